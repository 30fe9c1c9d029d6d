"""The layout is the architecture (docs/architecture.md): families import only downward.

Read from the source with ``ast``, nothing imported: ``param_explore`` never imports
``agents``; inside ``agents`` the families are layered common ← curiosity ← settings ←
the learners (ddpg, sb3) ← runs ← reporting ← the CLI, with the sparse tasks apart; no
module imports another that imports it back; and an optional learner's dependency is
imported only when a run asks for that learner.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Family → the families it may import (besides itself and ``param_explore``).
ALLOWED = {
    "tasks": set(),
    "common": set(),
    "curiosity": {"common"},
    "settings": {"common", "curiosity"},
    "ddpg": {"common", "settings"},
    "sb3": {"common", "settings"},
    "runs": {"common", "settings", "curiosity", "ddpg", "sb3", "tasks"},
    "reporting": {"common", "runs", "tasks"},
    "cli": {"common", "settings", "curiosity", "runs", "reporting"},
    "__init__": {"common", "settings", "ddpg", "runs", "tasks"},
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
        allowed = ALLOWED[family] | {family}
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


def test_an_optional_learner_is_imported_only_when_asked_for():
    """A plain install (no extras) runs every default command: importing the package and
    its command-line tools does not import sb3-contrib (``--algo trpo``'s dependency) or
    MuJoCo Warp (the ``gpu`` extra's)."""
    code = (
        "import sys, agents, agents.cli, agents.reporting.compare\n"
        "for name in ('sb3_contrib', 'mujoco_warp', 'warp'):\n"
        "    assert name not in sys.modules, f'{name} imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_every_package_is_installed_and_the_presets_are_package_data():
    """pyproject.toml lists the packages (the presets need a package of their own): the
    list is every folder with an ``__init__.py``, and ``configs`` is not among them."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        _module_name(init)
        for package in ("param_explore", "agents")
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert set(project["packages"]) == found | {"agents.presets"}
    assert project["package-dir"] == {"agents.presets": "configs"}


#: What making one of the engines' shared decisions looks like in code → the modules that
#: may (``docs/architecture.md``, "One engine: the stages"): compile or eager, when weight
#: noise is redrawn, what a run needs in memory (the bonus's own check, below the settings,
#: apart), who may share a population.
DECISIONS = {
    r"except CompilationError|\.run_traced\(\)": {"agents/ddpg/execution.py"},
    r"resample\s*(==|!=)": {"agents/common/noise_redraw.py"},
    r"\.memory_needs\(": {"agents/settings/memory.py", "agents/curiosity/vime.py"},
    r"shared_by_members\(|in PER_MEMBER_KEYS": {"agents/settings/sharing.py"},
}


@pytest.mark.parametrize("pattern", DECISIONS)
def test_each_shared_decision_is_made_in_its_one_module(pattern):
    deciding = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "agents").rglob("*.py")
        if re.search(pattern, path.read_text())
    }
    assert deciding <= DECISIONS[pattern], sorted(deciding - DECISIONS[pattern])
    assert deciding, "the pattern no longer finds the decision itself"
