"""A YAML loader for Kubernetes manifests that cannot be turned into a memory bomb.

``yaml.safe_load`` builds no Python objects of its choosing, but it expands aliases: a
508-byte "billion laughs" document (nine levels of nine aliases) made ``gangopt import k8s``
and ``POST /v1/import/k8s`` grow by about 25 MB/s without end. Manifests never need aliases
(``kubectl`` never writes them, and JSON, the API's wire format, cannot express them), so this
loader refuses them outright, together with what strict Kubernetes decoding refuses: duplicate
keys (PyYAML keeps the last) and non-finite numbers (``.nan``, ``.inf``). It also caps nesting
at :data:`MAX_DEPTH` levels (PyYAML's composer recurses three Python frames per level) and the
number of nodes per document at :data:`MAX_NODES`.

Errors are ``yaml.MarkedYAMLError`` subclasses with a line and column, reported by
:mod:`gangopt.k8s.documents` like any other YAML syntax error.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode

MAX_DEPTH = 100
"""Deepest nesting of a manifest: a Pod's required node affinity values sit 11 levels down
(12 inside a List); managedFields go a few levels deeper. Kubernetes' own decoder stops at 10,000,
but PyYAML would hit Python's recursion limit long before that."""

MAX_NODES = 5_000_000
"""Scalars, sequences and mappings per document: about 20 bytes of YAML each at the least, so
a 32 MB body stays below this; a bigger count means the input is not manifests."""

MAX_INT_DIGITS = 30
"""As :data:`gangopt.strict_json.MAX_INT_DIGITS`: longer integers are refused unread."""


class _Composer(yaml.SafeLoader):
    """SafeLoader whose composer refuses aliases and caps depth and node count."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def _mark(self) -> Any:
        return self.peek_event().start_mark  # type: ignore[no-untyped-call]

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise ComposerError(
                None, None, f"YAML aliases are not allowed (*{event.anchor}); write the value out", event.start_mark
            )
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise ComposerError(None, None, f"more than {MAX_NODES:,} YAML nodes in one document", self._mark())
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", self._mark())
            node: Node | None = super().compose_node(parent, index)
            return node
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode):
                key = key_node.value
                if key in seen:
                    raise ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        value: float = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise ConstructorError(None, None, f"{node.value} is not a finite number", node.start_mark)
        return value

    def construct_yaml_int(self, node: ScalarNode) -> int:
        if len(str(node.value).lstrip("+-")) > MAX_INT_DIGITS:
            raise ConstructorError(None, None, "integer too long", node.start_mark)
        value: int = super().construct_yaml_int(node)
        return value


_Composer.add_constructor("tag:yaml.org,2002:float", _Composer.construct_yaml_float)
_Composer.add_constructor("tag:yaml.org,2002:int", _Composer.construct_yaml_int)


def load_all(text: str) -> Iterator[Any]:
    """The documents of ``text``; raises ``yaml.YAMLError`` (with a mark) on anything refused."""
    loader = _Composer(text)
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            yield loader.get_data()
    finally:
        loader.dispose()
