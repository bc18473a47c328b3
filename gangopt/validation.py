"""Independent plan validator. (Under construction by a teammate.)"""

from __future__ import annotations

from dataclasses import dataclass

from gangopt.schema import Plan, Round


@dataclass(frozen=True)
class Violation:
    """One broken rule."""

    rule: str
    message: str
    gang: str | None = None
    node: str | None = None


def validate(rnd: Round, plan: Plan) -> list[Violation]:
    raise NotImplementedError
