"""The layout is the architecture (docs/architecture.md): families import only downward.

Read from the source with ``ast``, nothing imported: ``param_explore`` never imports
``agents``; inside ``agents`` the families are layered engine ← sb3 ← runs ← reporting ←
the CLI, with the new families (sparse tasks, curiosity) as subpackages of their own; and no
module imports another that imports it back.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Family → the families it may import (besides itself, ``errors`` and ``param_explore``).
ALLOWED = {
    "tasks": set(),
    "engine": set(),
    "sb3": {"engine"},
    "curiosity": {"engine"},
    "runs": {"engine", "sb3", "curiosity", "tasks"},
    "reporting": {"engine", "runs", "tasks"},
    "cli": {"engine", "runs", "reporting"},
    "__init__": {"engine", "runs", "tasks"},
    "errors": set(),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Modules ``path`` imports, as absolute dotted names (relative imports resolved)."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _sources(package: str) -> dict[str, Path]:
    return {_module_name(p): p for p in (ROOT / package).rglob("*.py")}


def _family(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_param_explore_never_imports_agents():
    for name, path in _sources("param_explore").items():
        assert not any(m.split(".")[0] == "agents" for m in _imports(path)), name


def test_agents_families_import_only_downward():
    modules = _sources("agents")
    for name, path in modules.items():
        family = _family(name)
        assert family in ALLOWED, f"{name}: a new family needs its place in ALLOWED"
        allowed = ALLOWED[family] | {family, "errors"}
        for imported in _imports(path):
            if imported in modules and imported != "agents":
                target = _family(imported)
                assert target in allowed, f"{name} ({family}) imports {imported} ({target})"


def test_no_module_imports_one_that_imports_it_back():
    modules = {**_sources("agents"), **_sources("param_explore")}
    graph = {name: {m for m in _imports(path) if m in modules} - {name}
             for name, path in modules.items()}  # fmt: skip

    def reaches(start: str, goal: str) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    # A package's __init__ importing its own submodules is not a cycle of modules.
    cycles = [
        (a, b) for a in graph for b in graph[a]
        if reaches(b, a) and not (a.startswith(b + ".") or b.startswith(a + "."))
    ]  # fmt: skip
    assert not cycles, cycles
