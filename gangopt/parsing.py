"""The one parse boundary: bytes or text in, a validated model (or a list of manifests) out,
and every failure on the way an :class:`~gangopt.errors.InputError` with a JSON path.

The CLI (:mod:`gangopt.io`), the service (:mod:`gangopt.service`) and the Kubernetes import
(:mod:`gangopt.k8s.documents`) all come through here, so a bad input gets the same answer
everywhere: exit code 2 or HTTP 422, ``$.path: message``, never a traceback. Before this
module, six kinds of bad input escaped as 500s or exit 1 (issue 14): ``RecursionError`` from
JSON nested 10,000 deep, ``decimal.InvalidOperation``/``decimal.Overflow`` from ``NaN`` or
``"1e999999999"`` quantities, ``OverflowError`` from a weight of 1e308, ``UnicodeDecodeError``
from a Latin-1 file, and pydantic's own messages from models built outside this boundary.

What is refused, and why, is listed in ``docs/limits.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

from gangopt.errors import InputError, Problem, problems_from_validation
from gangopt.quantities import parse_known, parse_quantity
from gangopt.schema import ASCII_IDENTITIES
from gangopt.strict_json import JSONProblem, loads

M = TypeVar("M", bound=BaseModel)

MAX_INPUT_BYTES = 256 * 1024 * 1024
"""Largest file the CLI reads (the service has its own ``--max-body-mb``, 32 MB by default):
the XL benchmark round is about 12 MB, and parsing costs about 20 bytes of memory per byte."""

MAX_CONTAINERS_PER_KB = 160
"""JSON objects and arrays per kilobyte of input at most (counted as ``{`` and ``[`` bytes, before
parsing, in C). Each costs 56-64 bytes as a Python dict or list and several hundred as a
pydantic model, so a body of nothing but ``{},`` (one container per 3 bytes) grows about 170-fold
in memory; real rounds have about 20 per KB (scale-M: 17), manifests fewer."""

MAX_PROBLEMS = 100
"""Problems reported per input: a 100,000-node round with the same mistake on every node does
not need 100,000 lines (or a 100,000-item 422 body) to be understood."""


def decode(data: bytes | str, source: str) -> str:
    """UTF-8 text (a leading BOM dropped), or an error naming the first bad byte."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            [Problem("$", f"not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start}")], source
        ) from None


def check_size(text: str, limit: int, source: str) -> None:
    """Refuse ``text`` longer than ``limit`` bytes (as UTF-8) or denser in objects and arrays
    than real input, before anything is built from it."""
    if len(text) > limit:
        raise InputError([Problem("$", f"the input has {len(text):,} characters; the most read is {limit:,}")], source)
    containers = text.count("{") + text.count("[")
    allowed = 1000 + len(text) * MAX_CONTAINERS_PER_KB // 1024
    if containers > allowed:
        raise InputError(
            [
                Problem(
                    "$",
                    f"{containers:,} objects and arrays in {len(text):,} bytes: more than {MAX_CONTAINERS_PER_KB} "
                    "per KB, far denser than any real input (see docs/limits.md)",
                )
            ],
            source,
        )


def load_json(text: str, source: str) -> Any:
    """Strict JSON (:mod:`gangopt.strict_json`) with every refusal as a path-named problem."""
    try:
        return loads(text)
    except json.JSONDecodeError as error:
        message = f"malformed JSON: {error.msg} at line {error.lineno} column {error.colno}"
        raise InputError([Problem("$", message)], source) from None
    except JSONProblem as error:
        raise InputError([Problem(error.path, error.message)], source) from None
    except RecursionError:
        raise InputError([Problem("$", _DEEP)], source) from None
    except ValueError as error:  # e.g. Python's own int-string limit
        raise InputError([Problem("$", f"malformed JSON: {error}")], source) from None


_DEEP = "nested too deeply (JSON and YAML input may nest about 100 levels; rounds need 7)"


def parse_model(model: type[M], data: Any, source: str = "input") -> M:
    """Validate parsed JSON as ``model`` (strict: see ``gangopt.schema._Model``)."""
    with guarded(source):
        return model.model_validate(data)


def parse_json(
    model: type[M],
    data: bytes | str,
    source: str = "input",
    limit: int = MAX_INPUT_BYTES,
    precheck: Callable[[Any], None] | None = None,
) -> M:
    """Bytes or text to ``model``: decode, size and density check, strict JSON, ``precheck`` of
    the parsed data (counts that refuse a round before any model exists), then validation.

    Validation first reads the dicts the strict parse built (:func:`validate_parsed`): that
    skips a second JSON parse, and on printable-ASCII input the per-string character checks.
    Only if that fails is the text validated again the reference way (``model_validate_json``,
    which names every problem by its JSON path), so a bad input gets exactly the errors it
    always got. On the XL round (17 MB, 68,536 running gangs) validation takes 0.74-0.79 CPU-s
    instead of 1.12 (best of 7, cross-field checks left out). The price is the dicts and the
    models alive together: a 3.9 MB round of 100,000 bare nodes grows the service by 28x its
    size instead of 25x (``scripts/measure_memory.py``); the XL round's parse peaks at 386 MB
    either way."""
    text = decode(data, source)
    check_size(text, limit, source)
    parsed = load_json(text, source)
    if precheck is not None:
        precheck(parsed)
    built = validate_parsed(model, parsed, plain_ascii(text))
    del parsed
    if built is not None:
        return built
    with guarded(source):
        return model.model_validate_json(text)


def plain_ascii(text: str) -> bool:
    """Whether every string the strict JSON parse of ``text`` yields is printable ASCII: the text
    is ASCII without DEL and without a backslash (so no escape makes a control character), and
    the strict parse refuses a raw control character inside a string. About 3 ms at 17 MB."""
    return text.isascii() and "\\" not in text and "\x7f" not in text


def validate_parsed(model: type[M], parsed: Any, plain: bool) -> M | None:
    """``model`` validated from ``parsed`` (the strict parse of a JSON text), or None if that
    fails in any way: the caller then validates the text itself, which reports the errors.

    Python-mode validation of JSON's own types accepts what JSON-mode validation of the same
    text accepts (tests/test_parsing.py checks both on every field of a round); quantities are
    looked up (:data:`_LOOKED_UP`), and with ``plain`` (:func:`plain_ascii`) the validators that
    leave printable ASCII alone are skipped."""
    validator = _validators(model, plain)
    try:
        return cast(M, validator.validate_python(parsed))
    except Exception:  # reported by the reference path, word for word
        return None


_FAST: dict[tuple[type[BaseModel], bool], SchemaValidator] = {}

_LOOKED_UP: dict[Callable[..., Any], Callable[..., Any]] = {parse_quantity: parse_known}
"""Before-validators replaced by a lookup in C that returns the same value for every input the
original accepts, and raises for any other (``TypeError`` included: :func:`validate_parsed` then
falls back to the reference path)."""


def _validators(model: type[BaseModel], plain: bool) -> SchemaValidator:
    """A copy of the model's validator with the quantities looked up (:data:`_LOOKED_UP`) and,
    with ``plain``, without :data:`gangopt.schema.ASCII_IDENTITIES` (built once per model and
    ``plain``: about 2 ms).

    pydantic-core builds a nested model from that model's own validator once it exists (its
    "prebuilt" validators), checks included: in a process that has validated a node or a gang
    on its own (the service, a test run) the copy is then partly the full validator, slower and
    never less strict. On the command line nothing is built before the round is read."""
    key = (model, plain)
    if key not in _FAST:
        schema = model.__pydantic_core_schema__
        if not isinstance(schema, dict):  # a deferred build's stand-in: reading it builds the model
            schema["type"]
            schema = model.__pydantic_core_schema__
        _FAST[key] = SchemaValidator(_faster(schema, ASCII_IDENTITIES if plain else frozenset()))
    return _FAST[key]


def _faster(node: Any, dropped: frozenset[Callable[..., Any]]) -> Any:
    """A copy of the core schema ``node`` with every after-validator calling one of ``dropped``
    replaced by the schema it wraps, and every before-validator of :data:`_LOOKED_UP` calling its
    lookup instead."""
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "function-after" and node["function"].get("function") in dropped:
            return _faster(node["schema"], dropped)
        copied = {key: _faster(value, dropped) for key, value in node.items()}
        if kind == "function-before" and copied["function"].get("type") == "no-info":
            looked_up = _LOOKED_UP.get(copied["function"].get("function"))
            if looked_up is not None:
                copied["function"] = {**copied["function"], "function": looked_up}
        return copied
    if isinstance(node, list):
        return [_faster(value, dropped) for value in node]
    return node


@contextmanager
def guarded(source: str) -> Iterator[None]:
    """Turn what a bad input can raise below this point into an :class:`InputError`: pydantic's
    errors with their paths, and the arithmetic and recursion errors no field check foresaw
    (at ``$``, since their place is not known)."""
    try:
        yield
    except InputError as error:
        raise InputError(_capped(error.problems), error.source) from None
    except ValidationError as error:
        raise InputError(_capped(problems_from_validation(error)), source) from None
    except RecursionError:
        raise InputError([Problem("$", _DEEP)], source) from None
    except ArithmeticError as error:
        raise InputError([Problem("$", f"a number is out of range ({type(error).__name__})")], source) from None
    except UnicodeError as error:
        raise InputError([Problem("$", f"not valid text: {error}")], source) from None


def _capped(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    more = len(problems) - MAX_PROBLEMS
    return [*problems[:MAX_PROBLEMS], Problem("$", f"... and {more:,} more problems")]
