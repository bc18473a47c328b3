"""Reading rounds and plans from files, text or stdin, with path-named errors."""

from __future__ import annotations

import sys
from pathlib import Path

from gangopt.errors import InputError, Problem, parse_json_text
from gangopt.schema import Plan, Round


def _read(source: str | Path) -> str:
    if str(source) == "-":
        return sys.stdin.read()
    path = Path(source)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError([Problem("$", f"cannot read {path}: {error.strerror}")], str(path)) from None


def load_round(source: str | Path) -> Round:
    """Read a round from a JSON file (``-`` for stdin); raises :class:`InputError`."""
    return parse_json_text(Round, _read(source), str(source))


def load_plan(source: str | Path) -> Plan:
    """Read a plan from a JSON file (``-`` for stdin); raises :class:`InputError`."""
    return parse_json_text(Plan, _read(source), str(source))
