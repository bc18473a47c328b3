"""Kubernetes quantities: parsing into integer milli-units, formatting back, round trips.

Expected integers are written as arithmetic on the suffix's definition (``Ki`` = 2**10,
``k`` = 10**3, milli-units = units x 1000), never copied from the parser's output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gangopt
from gangopt.errors import InputError
from gangopt.quantities import MAX_MILLI, MILLI, format_quantity, human, parse_quantity

K, M, G, T, P, E = (10**e for e in (3, 6, 9, 12, 15, 18))
KI, MI, GI, TI, PI = (2**e for e in (10, 20, 30, 40, 50))
MAX_UNITS = (2**63 - 1) // 1000  # 9,223,372,036,854,775 whole units fit in int64 milli-units

PARSED: list[tuple[object, int]] = [
    # plain numbers
    ("0", 0),
    ("8", 8 * 1000),
    (8, 8 * 1000),
    ("1.5", 1500),
    (2.5, 2500),
    (0.1, 100),  # the float's shortest repr, not its binary expansion
    ("0.001", 1),
    (" 16 ", 16 * 1000),  # surrounding blanks are tolerated
    ("+3", 3000),
    ("-0", 0),
    # milli, micro, nano
    ("500m", 500),
    ("1m", 1),
    ("2000m", 2000),
    ("1000u", 1),
    ("5000000n", 5),
    # decimal suffixes
    ("1k", K * 1000),
    ("2.5k", 2500 * 1000),
    ("3M", 3 * M * 1000),
    ("4G", 4 * G * 1000),
    ("5T", 5 * T * 1000),
    ("6P", 6 * P * 1000),
    # binary suffixes
    ("1Ki", KI * 1000),
    ("64Mi", 64 * MI * 1000),
    ("512Gi", 512 * GI * 1000),
    ("1.5Gi", 3 * GI // 2 * 1000),
    ("2Ti", 2 * TI * 1000),
    ("7Pi", 7 * PI * 1000),
    # exponents
    ("1e3", 1000 * 1000),
    ("2E2", 200 * 1000),
    ("1e-3", 1),
    ("12e0", 12 * 1000),
    # the largest amount that fits
    (f"{MAX_UNITS}", MAX_UNITS * 1000),
    (f"{MAX_UNITS}.807", 2**63 - 1),
    ("8Pi", 8 * PI * 1000),  # 2**53 bytes = 9.007e18 milli-bytes < 2**63 - 1 = 9.223e18
]

INVALID: list[tuple[object, str]] = [
    ("1.5e3m", "cannot parse"),  # Kubernetes' grammar: an exponent or a suffix, not both
    ("", r"^cannot parse quantity ''"),
    ("Gi", r"^cannot parse quantity 'Gi'"),
    ("8x", r"^cannot parse quantity '8x' \(expected e\.g\. '8', '500m', '64Gi'\)$"),
    ("1.2.3", r"^cannot parse quantity"),
    ("0x10", r"^cannot parse quantity"),
    ("8 GB", r"^cannot parse quantity"),
    ("nan", r"^cannot parse quantity 'nan'"),
    ("NaN", r"^cannot parse quantity 'NaN'"),
    ("sNaN", r"^cannot parse quantity 'sNaN'"),
    ("inf", r"^cannot parse quantity 'inf'"),
    ("Infinity", r"^cannot parse quantity"),
    ("-1", r"^quantity must not be negative, got '-1'$"),
    (-1, r"^quantity must not be negative, got -1$"),
    (-0.5, r"^quantity must not be negative, got -0\.5$"),
    ("-500m", r"^quantity must not be negative"),
    ("0.0001", r"^quantity '0\.0001' is finer than one milli-unit$"),
    ("1.5m", r"^quantity '1\.5m' is finer than one milli-unit$"),
    ("1u", r"finer than one milli-unit"),
    ("1n", r"finer than one milli-unit"),
    (1e-4, r"finer than one milli-unit"),
    (f"{MAX_UNITS}.808", r"too large \(at most 9,223,372,036,854,775 units\)$"),
    ("10P", r"too large"),
    ("9Pi", r"too large"),  # 9 * 2**50 * 1000 = 1.01e19 milli-bytes > 2**63 - 1
    ("1E", r"too large"),
    ("1Ei", r"too large"),
    (2**63, r"too large"),
    (True, r"^expected a quantity, got True$"),
    (False, r"^expected a quantity, got False$"),
    (None, r"^expected a quantity such as 8, '500m' or '64Gi', got None$"),
    ([8], r"^expected a quantity such as"),
    (float("inf"), r"finite|too large"),
    (float("nan"), r"finite|cannot parse"),
]


@pytest.mark.parametrize(("value", "milli"), PARSED, ids=[repr(v) for v, _ in PARSED])
def test_parse(value: object, milli: int) -> None:
    assert parse_quantity(value) == milli
    assert type(parse_quantity(value)) is int


@pytest.mark.parametrize(("value", "pattern"), INVALID, ids=[repr(v) for v, _ in INVALID])
def test_invalid(value: object, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        parse_quantity(value)


def test_a_nan_amount_in_a_round_file_is_an_input_error(tmp_path: Path) -> None:
    """Python's json reads the literal NaN; such an amount must be a path-named input error,
    not a decimal.InvalidOperation escaping from the loader (issue 18)."""
    path = tmp_path / "round.json"
    path.write_text(json.dumps({"cluster": {"nodes": [{"name": "n0", "capacity": {"gpu": float("nan")}}]}}))
    with pytest.raises(InputError) as caught:
        gangopt.load_round(path)
    [problem] = caught.value.problems
    assert problem.path == "$.cluster.nodes[0].capacity.gpu"


FORMATTED: list[tuple[int, str, str]] = [
    (0, "gpu", "0"),
    (500, "cpu", "500m"),
    (1, "cpu", "1m"),
    (1500, "cpu", "1500m"),
    (2000, "gpu", "2"),
    (1024 * 1000, "gpu", "1024"),  # binary suffixes only for memory and storage
    (0, "memory", "0"),
    (1000, "memory", "1"),
    (1000 * 1000, "memory", "1000"),
    (KI * 1000, "memory", "1Ki"),
    (64 * GI * 1000, "memory", "64Gi"),
    (1536 * MI * 1000, "memory", "1536Mi"),  # 1.5Gi: the largest suffix that divides exactly
    (3 * TI * 1000, "memory", "3Ti"),
    (8 * PI * 1000, "memory", "8Pi"),
    (1025 * 1000, "memory", "1025"),
    (500, "memory", "500m"),
    (10 * GI * 1000, "ephemeral-storage", "10Gi"),
    (10 * GI * 1000, "storage", "10Gi"),
    (10 * GI * 1000, "rdma/hca", str(10 * GI)),
]


@pytest.mark.parametrize(("milli", "resource", "text"), FORMATTED, ids=[f"{t}-{r}" for _, r, t in FORMATTED])
def test_format(milli: int, resource: str, text: str) -> None:
    assert format_quantity(milli, resource) == text
    assert parse_quantity(text) == milli


def test_format_without_a_resource_uses_plain_units() -> None:
    assert format_quantity(KI * 1000) == "1024"
    assert format_quantity(7) == "7m"


@given(st.integers(0, MAX_MILLI), st.sampled_from(["gpu", "cpu", "memory", "ephemeral-storage", "rdma/hca"]))
def test_format_then_parse_is_the_identity(milli: int, resource: str) -> None:
    text = format_quantity(milli, resource)
    assert parse_quantity(text) == milli
    assert re.fullmatch(r"[0-9]+(m|Ki|Mi|Gi|Ti|Pi|Ei)?", text)


@given(
    st.integers(0, 10**6),
    st.sampled_from([("m", 1), ("", 1000), ("k", K * 1000), ("Ki", KI * 1000), ("Mi", MI * 1000), ("G", G * 1000)]),
)
def test_integer_with_suffix(number: int, suffix: tuple[str, int]) -> None:
    text, scale = suffix
    assert parse_quantity(f"{number}{text}") == number * scale


@given(st.integers(0, 10**9), st.integers(0, 3))
def test_decimal_fractions_are_exact(thousandths: int, shift: int) -> None:
    """``"12.345"`` is 12345 milli-units exactly: no float on the way."""
    text = f"{thousandths // 1000}.{thousandths % 1000:03d}"
    assert parse_quantity(text) == thousandths
    assert parse_quantity(f"{thousandths}e-3") == thousandths
    assert parse_quantity(f"{thousandths}m") == thousandths
    assert parse_quantity(f"{thousandths * 10**shift}e-{3 + shift}") == thousandths


def test_parse_cache_does_not_confuse_int_and_string() -> None:
    assert parse_quantity("1") == parse_quantity(1) == MILLI
    assert parse_quantity(1) == 1000 and parse_quantity("1m") == 1


HUMAN: list[tuple[int, str, str]] = [
    (8000, "gpu", "8 gpu"),
    (1500, "cpu", "1.5 cpu"),
    (500, "cpu", "0.5 cpu"),
    (512 * GI * 1000, "memory", "512Gi memory"),
    (GI * 1000 // 2, "memory", "0.5Gi memory"),
    (123456 * 1000, "gpu", "1.235e+05 gpu"),  # four significant digits
]


@pytest.mark.parametrize(("milli", "resource", "text"), HUMAN)
def test_human(milli: int, resource: str, text: str) -> None:
    assert human(milli, resource) == text


def test_the_lookup_agrees_with_the_parser_and_keeps_only_strings() -> None:
    """``parse_known`` (the fast path's quantity validator) gives what ``parse_quantity`` gives,
    refuses what it refuses (``True`` after ``"1"`` and ``1`` were seen: ``True == 1``), and
    raises ``TypeError`` on an unhashable value (the parse then falls back to the reference)."""
    from gangopt import quantities

    for text, milli in [("1", MILLI), ("64Gi", 64 * GI * MILLI), ("500m", 500), ("2.5", 2500)]:
        assert quantities.parse_known(text) == milli == quantities.parse_known(text)
    assert quantities.parse_known(1) == MILLI and quantities.parse_known(2.0) == 2 * MILLI
    for value in (True, False, None, "-1", "1.0001m", "NaN"):
        with pytest.raises(ValueError):
            quantities.parse_known(value)
    with pytest.raises(TypeError):
        quantities.parse_known([1])
    assert all(type(key) is str for key in quantities._KNOWN)
    assert len(quantities._KNOWN) <= quantities._KNOWN_SIZE
