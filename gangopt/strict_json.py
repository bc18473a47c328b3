"""JSON as RFC 8259 defines it, not as Python's ``json`` module accepts it.

``json.loads`` takes ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON), turns ``1e999`` into
``inf``, keeps the last of two equal keys and converts integers of any length (a 100,000-digit
integer takes seconds). Kubernetes' strict decoding refuses all of these, and so does this
module, with the standard module's own hooks (``parse_constant``, ``parse_float``,
``parse_int``, ``object_pairs_hook``) rather than a parser of our own: the C scanner keeps
its speed (the hooks cost about 15 % on a 290 KB round).

Nesting is bounded by the scanner itself: it raises ``RecursionError`` at about 1,000 levels,
which :mod:`gangopt.parsing` reports as a path-named problem.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_INT_DIGITS = 30
"""Longest integer literal read: 10^30 is far beyond every field (quantities are at most
9.2e15 units); a longer one is a typo or an attempt to make ``int()`` spend quadratic time."""


class JSONProblem(ValueError):
    """Strict JSON refused: ``path`` is the JSON path of the offending key or value."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


class _NonFinite(Exception):
    def __init__(self, literal: str, what: str = "is not a finite JSON number") -> None:
        self.literal = literal
        self.what = what


def _constant(literal: str) -> Any:
    raise _NonFinite(literal)


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise _NonFinite(literal)
    return value


def _int(literal: str) -> int:
    if len(literal) > MAX_INT_DIGITS and len(literal.lstrip("-")) > MAX_INT_DIGITS:  # one len() for the rest
        raise _NonFinite(literal[:20], f"... is an integer of more than {MAX_INT_DIGITS} digits")
    return int(literal)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object, parse_constant=_constant, parse_float=_float, parse_int=_int, strict=True
)


def loads(text: str) -> Any:
    """Parse strict JSON; raises :class:`JSONProblem` for what JSON does not allow,
    ``json.JSONDecodeError`` for malformed text and ``RecursionError`` for deep nesting."""
    try:
        return _DECODER.decode(text)
    except _NonFinite as error:
        where = _locate(text, error.literal)
        raise JSONProblem(_refused_path(text), f"{error.literal} {error.what}{where}") from None
    except _Duplicate as error:
        raise JSONProblem(_duplicate_path(text), f"duplicate key {error.key!r}") from None


def _locate(text: str, literal: str) -> str:
    """`` at line L column C`` of the first occurrence of ``literal`` as a value (best effort:
    the hooks are not told where they are)."""
    match = re.search(r"(?<=[:\[,\s])" + re.escape(literal), text)
    if match is None:
        return ""
    line = text.count("\n", 0, match.start()) + 1
    column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
    return f" at line {line} column {column}"


class _Refused:
    """Stands for a literal strict JSON refuses, in the second parse that finds its path."""


_REFUSED = _Refused()


def _refused_path(text: str) -> str:
    """The JSON path of the first refused literal (NaN, an infinite or over-long number; only
    run once one is known), so the error names the field like every other input problem."""

    def number(literal: str) -> Any:
        value = float(literal)
        return value if math.isfinite(value) else _REFUSED

    def integer(literal: str) -> Any:
        return _REFUSED if len(literal.lstrip("-")) > MAX_INT_DIGITS else 0

    decoder = json.JSONDecoder(parse_constant=lambda _: _REFUSED, parse_float=number, parse_int=integer)
    stack: list[tuple[str, Any]] = [("$", decoder.decode(text))]
    while stack:
        path, value = stack.pop()
        if value is _REFUSED:
            return path
        if isinstance(value, dict):
            stack += [(f"{path}.{k}", v) for k, v in reversed(list(value.items()))]
        elif isinstance(value, list):
            stack += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value)))]
    return "$"


class _Pairs(list[tuple[str, Any]]):
    """An object kept as its key-value pairs, so that a second parse can find the duplicate."""


def _duplicate_path(text: str) -> str:
    """The JSON path of the first object with a repeated key (only run once one is known)."""
    decoder = json.JSONDecoder(object_pairs_hook=_Pairs)
    stack: list[tuple[str, Any]] = [("$", decoder.decode(text))]
    while stack:
        path, value = stack.pop()
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, _ in value:
                if key in seen:
                    return f"{path}.{key}"
                seen.add(key)
            stack += [(f"{path}.{k}", v) for k, v in reversed(value)]
        elif isinstance(value, list):
            stack += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value)))]
    return "$"
