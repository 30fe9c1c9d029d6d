"""YAML from users, parsed within bounds: a config is small, and a document that is not
is refused with one line before it is built.

A ``--config`` file, a ``--set`` value and a run's ``config.yaml`` (which ``compare_runs``
reads from directories that may be shared or copied) are text anyone can write. PyYAML
reads an alias as a reference to the node it names, so nine levels of nine aliases each
(a "billion laughs") parse in a millisecond into a value of 9⁹ leaves shared by
reference; the cost comes after, when the value is walked or copied (reading its numbers,
``dataclasses.asdict``, writing ``config.yaml``), and grows memory without output until
the machine runs out. An alias inside the node it names makes a value that contains
itself, which a walk never leaves; brackets nested a few thousand deep exhaust the
parser's recursion. Each is refused here, before any value is constructed.

The bounds, far above every config the project has (the largest shipped one,
``configs/ddpg.yaml``, is 4 KB of 69 nodes; a run's ``config.yaml`` is under 100 nodes):

* :data:`MAX_CHARS`: the document's length, which bounds the parser's own work;
* :data:`MAX_NODES`: the values the document stands for with every alias expanded (a
  mapping, a sequence, a key and a scalar each count one), which bounds everything done
  with the value afterwards. The number of aliases is not bounded: 81 aliases make the
  billion laughs and a few are harmless, so only what they expand to tells;
* :data:`MAX_DEPTH`: nesting, so that a deep document is one line, not a RecursionError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

MAX_CHARS = 1_000_000
MAX_NODES = 100_000
MAX_DEPTH = 64


def load_yaml_text(text: str, source: str) -> Any:
    """The value of the YAML document ``text`` (safe types only, as ``yaml.safe_load``).

    A document beyond a bound is a :class:`ConfigError` ``cannot parse <source>: ...``;
    invalid YAML raises ``yaml.YAMLError`` as ``yaml.safe_load`` does, for the caller to
    word (a config file's line, a ``--set`` value).
    """
    if len(text) > MAX_CHARS:
        raise ConfigError(
            f"cannot parse {source}: it is {len(text):,} characters long, more than a config "
            f"can be ({MAX_CHARS:,})"
        )
    loader = _BoundedLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node, {}, set(), source) > MAX_NODES:
            raise ConfigError(
                f"cannot parse {source}: through its aliases it stands for more than "
                f"{MAX_NODES:,} values (a config has a few hundred)"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml_file(path: str | Path) -> Any:
    """:func:`load_yaml_text` of the file at ``path``, read no further than the bound (a
    link to ``/dev/zero`` is refused, not read forever). OSError and UnicodeDecodeError
    as reading raises them."""
    with open(path, "rb") as f:
        data = f.read(MAX_CHARS + 1)
    if len(data) > MAX_CHARS:
        raise ConfigError(f"cannot parse {path}: it is longer than a config can be")
    return load_yaml_text(data.decode("utf-8"), str(path))


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses nesting deeper than :data:`MAX_DEPTH` as it composes."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text)
        self._source = source
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ConfigError(
                    f"cannot parse {self._source}: it is nested more than {MAX_DEPTH} levels "
                    "deep (a config has a few)"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_size(node: yaml.Node, sizes: dict[int, int], open_: set[int], source: str) -> int:
    """Nodes under ``node`` with aliases expanded, counting each shared node once per
    reference (memoised in ``sizes``, capped just past :data:`MAX_NODES`). An alias names
    a node composed before it, so in document order the walk meets each node whole or
    among its own ancestors (``open_``): the latter is a value that contains itself."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise ConfigError(
            f"cannot parse {source}: the value at line {node.start_mark.line + 1} holds an "
            "alias of itself (a value without end)"
        )
    open_.add(key)
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    else:
        children = []
    size = 1
    for child in children:
        size = min(size + _expanded_size(child, sizes, open_, source), MAX_NODES + 1)
    open_.discard(key)
    sizes[key] = size
    return size
