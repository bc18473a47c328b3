"""Kubernetes resource quantities, parsed exactly into integer milli-units.

Every resource amount in gangopt is an ``int`` counting thousandths of the base unit
(``"500m"`` cpu is 500, ``"2"`` gpu is 2000, ``"1Ki"`` memory is 1_024_000). One integer
scale for every resource keeps arithmetic exact (no float drift in capacity checks) and lets
the encoder divide by a per-resource GCD before handing numbers to CP-SAT.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import cast

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_BINARY = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
MILLI = 1000


MAX_MILLI = 2**63 - 1
"""Amounts live in int64 numpy arrays (milli-units): about 8 PiB of memory per node at most."""


def parse_quantity(value: object) -> int:
    """Parse ``"64Gi"``, ``"500m"``, ``"1.5"``, ``2`` or ``2.5`` into milli-units.

    Raises ``ValueError`` with a readable message for anything else, including negative
    amounts and amounts finer than one milli-unit (Kubernetes rounds those up; a scheduler
    input that relies on that is almost always a typo).
    """
    kind = type(value)
    if kind is str or kind is int:  # what JSON gives (never a bool): 260,760 calls at XL, 0.06 s less
        return _parse_cached(value)
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got {value!r}")
    if isinstance(value, str | int):
        return _parse_cached(value)  # a 16,384-node round repeats a few dozen strings 77,000 times
    return _parse(value)


@lru_cache(maxsize=4096)
def _parse_cached(value: str | int) -> int:
    return _parse(value)


class _Known(dict[str, int]):
    """Quantity strings already parsed, looked up in C: see :data:`parse_known`."""

    def __missing__(self, value: object) -> int:
        milli = parse_quantity(value)
        if type(value) is str and len(self) < _KNOWN_SIZE:
            self[value] = milli
        return milli


_KNOWN_SIZE = 4096
_KNOWN = _Known()

parse_known = cast(Callable[[object], int], _KNOWN.__getitem__)
""":func:`parse_quantity` for the Python-mode validation of parsed JSON
(:func:`gangopt.parsing.validate_parsed`): a string seen before is one dict lookup in C, no
Python call (260,760 quantities at XL, a few dozen distinct strings: 0.21 µs a call instead of
0.03, about 0.05 CPU-s). Only strings are kept, so ``True`` (equal to ``1``) or ``2.0`` (equal to
``2``) never find another value's entry, and at most :data:`_KNOWN_SIZE` of them. An unhashable
value (a list, an object) raises ``TypeError``, not ``ValueError``: pydantic passes it on, and
the caller then validates the text the reference way, which names the problem."""


def _parse(value: object) -> int:
    try:
        return _exact(value)
    except ArithmeticError:  # decimal.Overflow and friends: not a quantity any node has
        raise ValueError(f"quantity {value!r} is out of range") from None


def _exact(value: object) -> int:
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"quantity must be a finite number, got {value!r}")
        number = Decimal(repr(value))
    elif isinstance(value, str):
        number = _parse_string(value.strip())
    else:
        raise ValueError(f"expected a quantity such as 8, '500m' or '64Gi', got {value!r}")
    if number.is_nan():  # json reads a bare NaN; comparing it below would raise InvalidOperation
        raise ValueError(f"cannot parse quantity {value!r}")
    if number < 0:
        raise ValueError(f"quantity must not be negative, got {value!r}")
    milli = number * MILLI
    if milli != milli.to_integral_value():
        raise ValueError(f"quantity {value!r} is finer than one milli-unit")
    if milli > MAX_MILLI:
        raise ValueError(f"quantity {value!r} is too large (at most {MAX_MILLI // MILLI:,} units)")
    return int(milli)


_GRAMMAR = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3}|n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?"
)
"""Kubernetes' quantity grammar (``<signedNumber><suffix>``, ASCII digits only): Python's
``Decimal`` alone also takes ``1_0`` (ten), ``１０`` (full-width digits), ``NaN`` and
``1e999999999`` (whose scaling overflows); exponents keep to three digits."""


def _parse_string(text: str) -> Decimal:
    if not _GRAMMAR.fullmatch(text):
        raise ValueError(f"cannot parse quantity {text[:40]!r} (expected e.g. '8', '500m', '64Gi')")
    exponent = re.search(r"[eE]([+-]?[0-9]+)$", text)
    if exponent is not None and not -30 <= int(exponent.group(1)) <= 30:
        raise ValueError(f"quantity {text!r} is out of range")
    suffix = ""
    for candidate in sorted(_SUFFIXES, key=len, reverse=True):
        if candidate and text.endswith(candidate):
            suffix = candidate
            break
    digits = text[: len(text) - len(suffix)] if suffix else text
    try:
        if not digits or digits.lower() in ("nan", "inf", "-inf", "infinity"):
            raise InvalidOperation
        number = Decimal(digits)
    except InvalidOperation:
        raise ValueError(f"cannot parse quantity {text!r} (expected e.g. '8', '500m', '64Gi')") from None
    if not number.is_finite():
        raise ValueError(f"cannot parse quantity {text!r}")
    return number * _SUFFIXES[suffix]


def format_quantity(milli: int, resource: str = "") -> str:
    """Render milli-units back in the shortest exact Kubernetes notation."""
    if milli % MILLI:
        return f"{milli}m"
    units = milli // MILLI
    if resource == "memory" or resource.endswith("storage"):
        for suffix in reversed(_BINARY):
            scale = int(_SUFFIXES[suffix])
            if units and units % scale == 0:
                return f"{units // scale}{suffix}"
    return str(units)


def human(milli: int, resource: str) -> str:
    """A short approximate rendering for messages: ``"48 gpu"``, ``"1.5 cpu"``, ``"512Gi memory"``."""
    if resource == "memory":
        gib = milli / MILLI / 2**30
        return f"{gib:.4g}Gi memory"
    value = milli / MILLI
    return f"{value:.4g} {resource}"
