"""A YAML loader for Kubernetes manifests that cannot be turned into a memory bomb.

``yaml.safe_load`` builds no Python objects of its choosing, but it expands aliases: a
508-byte "billion laughs" document (nine levels of nine aliases) made ``gangopt import k8s``
and ``POST /v1/import/k8s`` grow by about 25 MB/s without end. Manifests never need aliases
(``kubectl`` never writes them, and JSON, the API's wire format, cannot express them), so this
loader refuses them outright, together with what strict Kubernetes decoding refuses: duplicate
keys (PyYAML keeps the last) and non-finite numbers (``.nan``, ``.inf``). It also caps nesting
at :data:`MAX_DEPTH` levels and the number of nodes (scalars, sequences, mappings) of an
input, since every node costs time and memory whatever the bytes: 4 MB of ``- a`` lines are
a million nodes, about 9 s and 370 MB with libyaml (68 s and 630 MB in pure Python).

With libyaml (PyYAML's C extension, in every wheel) the limits are checked on the parser's
event stream before anything is composed, and the documents are then built by the C loader
(7x faster than the Python one on real manifests: 0.77 s for 5,000 pods, 740 KB). Errors are
``yaml.MarkedYAMLError`` subclasses with a line and column.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, Event, ScalarEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_DEPTH = 100
"""Deepest nesting of a manifest: a Pod's required node affinity values sit 11 levels down
(12 inside a List); managedFields go a few levels deeper. Kubernetes' own decoder stops at
10,000, but PyYAML's composer recurses three Python frames per level."""

MAX_NODES = 5_000_000
"""Nodes per input read by the CLI (about 40 MB of manifests, 45 s); the service passes its
own ``max_yaml_nodes`` (500,000 by default: about 4 MB of pod manifests, 5 s)."""

MAX_INT_DIGITS = 30
"""As :data:`gangopt.strict_json.MAX_INT_DIGITS`: longer integers are refused unread."""


class _Strict:
    """Constructor rules shared by both loaders: no duplicate keys, finite floats, short ints."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode):
                key = key_node.value
                if key in seen:
                    raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        return mapping

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value: float = super().construct_yaml_float(node)  # type: ignore[misc]
        if not math.isfinite(value):
            raise ConstructorError(None, None, f"{node.value} is not a finite number", node.start_mark)
        return value

    def construct_yaml_int(self, node: ScalarNode) -> int:
        if len(str(node.value).lstrip("+-")) > MAX_INT_DIGITS:
            raise ConstructorError(None, None, "integer too long", node.start_mark)
        value: int = super().construct_yaml_int(node)  # type: ignore[misc]
        return value


class _Limits:
    """Counts nodes and nesting; raises ``ComposerError`` at the event that breaks a limit."""

    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.nodes = 0
        self.depth = 0

    def see(self, event: Event) -> None:
        if isinstance(event, AliasEvent):
            message = f"YAML aliases are not allowed (*{event.anchor}); write the value out"
            raise ComposerError(None, None, message, event.start_mark)  # type: ignore[arg-type]
        if isinstance(event, ScalarEvent | CollectionStartEvent):
            self.nodes += 1
            if self.nodes > self.max_nodes:
                message = f"more than {self.max_nodes:,} YAML nodes; send large inputs as JSON"
                raise ComposerError(None, None, message, event.start_mark)  # type: ignore[arg-type]
        if isinstance(event, CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)  # type: ignore[arg-type]
        elif isinstance(event, CollectionEndEvent):
            self.depth -= 1


class _PyLoader(_Strict, yaml.SafeLoader):
    """The pure-Python loader, its composer checking each event before composing it."""

    def __init__(self, stream: str, max_nodes: int) -> None:
        super().__init__(stream)
        self._limits = _Limits(max_nodes)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._limits.see(self.peek_event())  # type: ignore[no-untyped-call]
        node: Node | None = super().compose_node(parent, index)
        return node

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        self._limits.depth -= 1
        return node

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        node = super().compose_sequence_node(anchor)
        self._limits.depth -= 1
        return node


_C_LOADER: type | None = getattr(yaml, "CSafeLoader", None)
_LOADERS: list[type] = [_PyLoader]
if _C_LOADER is not None:

    class _CLoader(_Strict, _C_LOADER):  # type: ignore[valid-type, misc]
        """libyaml's loader with the same constructor rules (its limits are checked on events)."""

    _LOADERS.append(_CLoader)

for _loader in _LOADERS:
    _loader.add_constructor("tag:yaml.org,2002:float", _Strict.construct_yaml_float)  # type: ignore[attr-defined]
    _loader.add_constructor("tag:yaml.org,2002:int", _Strict.construct_yaml_int)  # type: ignore[attr-defined]


def load_all(text: str, max_nodes: int = MAX_NODES) -> Iterator[Any]:
    """The documents of ``text``; raises ``yaml.YAMLError`` (with a mark) on anything refused."""
    if _C_LOADER is not None:
        limits = _Limits(max_nodes)
        for event in yaml.parse(text, Loader=_C_LOADER):
            limits.see(event)
        yield from yaml.load_all(text, Loader=_LOADERS[-1])
    else:
        yield from load_all_python(text, max_nodes)


def load_all_python(text: str, max_nodes: int = MAX_NODES) -> Iterator[Any]:
    """As :func:`load_all` without libyaml (for the tests, which check that both agree)."""
    loader = _PyLoader(text, max_nodes)
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            yield loader.get_data()
    finally:
        loader.dispose()
