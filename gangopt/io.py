"""Reading rounds and plans from files, text or stdin, with path-named errors."""

from __future__ import annotations

import sys
from pathlib import Path

from gangopt.errors import InputError, Problem
from gangopt.parsing import MAX_INPUT_BYTES, decode, parse_json
from gangopt.schema import Plan, Round


def read_input(source: str | Path, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of a file (``-``: stdin), read as bytes and decoded at the parse boundary, so a
    Latin-1 file is a path-named problem rather than a ``UnicodeDecodeError``; at most ``limit``
    bytes are read."""
    name = str(source)
    try:
        if name == "-":
            stream = getattr(sys.stdin, "buffer", None)  # a test's StringIO has none
            data = stream.read(limit + 1) if stream is not None else sys.stdin.read(limit + 1).encode()
        else:
            with Path(source).open("rb") as f:
                data = f.read(limit + 1)
    except OSError as error:
        raise InputError([Problem("$", f"cannot read {name}: {error.strerror}")], name) from None
    if len(data) > limit:
        raise InputError([Problem("$", f"{name} is larger than {limit:,} bytes, the most gangopt reads")], name)
    text: str = decode(data, name)
    return text


def load_round(source: str | Path) -> Round:
    """Read a round from a JSON file (``-`` for stdin); raises :class:`InputError`."""
    return parse_json(Round, read_input(source), str(source))


def load_plan(source: str | Path) -> Plan:
    """Read a plan from a JSON file (``-`` for stdin); raises :class:`InputError`."""
    return parse_json(Plan, read_input(source), str(source))
