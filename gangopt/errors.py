"""Input errors that name the JSON path of what is wrong.

Library callers get :class:`InputError` (a ``ValueError``) with one :class:`Problem` per
mistake; the CLI prints them one per line and exits with code 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Problem:
    """One mistake in the input: where it is (a JSON path such as ``$.pending[3].roles[0]``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class InputError(ValueError):
    """The input cannot be used; ``problems`` lists every mistake found."""

    def __init__(self, problems: list[Problem], source: str = "input") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid {source}:\n{lines}")


def json_path(loc: tuple[int | str, ...]) -> str:
    """``('cluster', 'nodes', 3, 'name')`` -> ``$.cluster.nodes[3].name``."""
    path = "$"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def problems_from_validation(error: ValidationError) -> list[Problem]:
    """Turn pydantic's errors into path-named problems, expanding our cross-field checks."""
    out: list[Problem] = []
    for err in error.errors(include_url=False):
        ctx = err.get("ctx") or {}
        if err["type"] == "round_invalid" and "problems" in ctx:
            out += [Problem(path, message) for path, message in ctx["problems"]]
            continue
        message = err["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        out.append(Problem(json_path(tuple(err["loc"])), message))
    return out
