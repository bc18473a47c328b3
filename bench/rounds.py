"""The benchmark rounds and the end-to-end library call that every benchmark times."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import gangopt
from gangopt.parsing import parse_json
from gangopt.replay.generate import (
    FRAGMENTED_SHARES,
    SIZES,
    Spec,
    dump_round,
    generate,
    size_spec,
    without_preemption,
)
from gangopt.schema import Plan, Policy, Round

ROOT = Path(__file__).resolve().parent.parent
ORDER = list(SIZES)


@cache
def round_text(size: str, seed: int = 0, contention: bool = False) -> str:
    """The round's JSON: the committed file for S and M (seed 0), else generated."""
    path = ROOT / "instances" / f"scale-{size}.json"
    if seed == 0 and not contention and path.exists():
        return path.read_text(encoding="utf-8")
    rnd, _ = generate(size_spec(size, seed=seed, contention=contention))
    return dump_round(rnd)


@cache
def fragmented_text(
    size: str,
    busy: float = 0.75,
    seed: int = 0,
    running_mix: Literal["jobs", "tilted"] | None = None,
    preemption: bool = True,
) -> str:
    """Issue 13's fragmented round of a size: running gangs where they happened to land, no
    node wholly free, a fabric selector on 30 % of the pending gangs, preemption on (or off:
    ``preemption=False``, the wider sweep of bench/promise_sweep.py); ``size`` a name or
    ``nodes/gangs``."""
    nodes, gangs = SIZES[size] if "/" not in size else (int(x) for x in size.split("/"))
    rnd = generate(fragmented_spec(nodes, gangs, busy, seed, running_mix))[0]
    return dump_round(rnd if preemption else without_preemption(rnd))


def fragmented_spec(
    nodes: int, gangs: int, busy: float = 0.75, seed: int = 0, running_mix: Literal["jobs", "tilted"] | None = None
) -> Spec:
    """The :class:`Spec` of a fragmented round of any size (the tests' small ones too);
    ``running_mix`` as :attr:`Spec.running_mix` (default: issue 13's many small running gangs)."""
    elastic, required, preferred = FRAGMENTED_SHARES
    return Spec(
        nodes=nodes,
        gangs=gangs,
        seed=seed,
        fragmented=True,
        busy=busy,
        elastic_share=elastic,
        required_share=required,
        preferred_share=preferred,
        running_mix=running_mix,
    )


def end_to_end(text: str, solver: str = "cpsat", time_limit: float | None = None) -> tuple[Round, Plan]:
    """What a caller pays: parse and validate the input, then solve (``gangopt.solve``
    prefilters, builds, searches, expands to nodes and validates the plan it returns)."""
    rnd = parse_json(Round, text, "round")
    policy = None
    if time_limit is not None:
        policy = Policy.model_validate({**rnd.policy.model_dump(), "time_limit": time_limit})
    return rnd, gangopt.solve(rnd, policy, solver=solver)


def check_valid(rnd: Round, plan: Plan, solver: str) -> None:
    """The benchmark's own check, outside the timed call: the validator finds nothing."""
    violations = gangopt.validate(rnd, plan)
    if violations:
        raise AssertionError(f"{solver} plan on a benchmark round is invalid: {violations[:3]}")
