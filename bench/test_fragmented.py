"""Issue 13's fragmented rounds: every solver in the same run, preemption on.

    python -m pytest bench/test_fragmented.py                  # S (128 nodes), busy 0.6/0.75/0.9
    python -m pytest bench/test_fragmented.py --run-slow       # also M (1,024 nodes)

Free GPUs are scattered 1-7 per node and no node is wholly free (``gangopt generate
--fragmented``): the rounds where greedy is not trivially optimal. Each row records, beside
the time, the CPU seconds (the machines are shared), the status and reported gap, the tier
values, and how the plan compares with greedy's in the same run (lexicographically: better,
equal or worse); CP-SAT's plan must be no worse than greedy's or any peer's (the portfolio
floor). The rounds are the benchmark family's (many small running gangs, checked once per
round); ``python -m bench.peer_sweep`` checks the floor on more sizes, busy levels and seeds.
A gap is the cheap bounds' or CP-SAT's proof; it is not a true gap until an
exact reference confirms it: ``python -m bench.fragmented_table S 0.75 --true`` prints the true
gaps against the independent per-node model of tests/reference.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.rounds import check_valid, end_to_end, fragmented_spec, fragmented_text
from gangopt.objective import lexicographic_key
from gangopt.replay.generate import SIZES as GENERATED
from gangopt.replay.generate import dump_round, generate
from gangopt.solvers import SOLVERS

SIZES = [pytest.param("S", id="S"), pytest.param("M", marks=[pytest.mark.slow], id="M")]
BUSY = [0.6, 0.75, 0.9]
_GREEDY: dict[tuple[str, float], tuple[float, ...]] = {}
"""Greedy's lexicographic key per round, for the comparison column (greedy runs first)."""
_KEYS: dict[tuple[str, float], dict[str, tuple[float, ...]]] = {}
"""Every solver's lexicographic key per round so far: the portfolio floor is checked against
each peer whichever of CP-SAT and the peer ran first."""


@pytest.mark.parametrize("busy", BUSY)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("solver", ["greedy", *[s for s in SOLVERS if s != "greedy"]])
def test_fragmented_round(benchmark: Any, solver: str, size: str, busy: float) -> None:
    text = fragmented_text(size, busy)
    if solver == "greedy":  # issue 13's family: many small running gangs (Philly's job-count mix)
        nodes, gangs = GENERATED[size]
        assert text == dump_round(generate(fragmented_spec(nodes, gangs, busy, 0, running_mix="jobs"))[0])
    benchmark.group = f"fragmented {size} busy {busy}"
    rounds = 3 if solver == "cpsat" else 5
    rnd, plan = benchmark.pedantic(end_to_end, args=(text, solver), rounds=rounds, iterations=1)
    check_valid(rnd, plan, solver)
    key = lexicographic_key(plan.score)
    if solver == "greedy":
        _GREEDY[(size, busy)] = key
    base = _GREEDY.get((size, busy))
    versus = None if base is None else ("better" if key > base else "equal" if key == base else "worse")
    benchmark.extra_info.update(
        size=size,
        busy=busy,
        status=str(plan.status),
        gap=plan.gap,
        cpu_seconds=plan.stats.cpu_seconds,
        tiers={str(t.priority): [t.value, t.bound] for t in plan.score.tiers},
        secondary=plan.score.secondary,
        vs_greedy=versus,
        admitted=len(plan.admitted),
        preemptions=len(plan.preemptions),
    )
    assert {w.gang for w in plan.waiting} | set(plan.admitted) == {g.name for g in rnd.pending}
    if solver == "cpsat" and base is not None:
        assert versus != "worse", "the portfolio floor: CP-SAT never below greedy"
    seen = _KEYS.setdefault((size, busy), {})
    seen[solver] = key
    if "cpsat" in seen:
        below = [s for s, k in seen.items() if k > seen["cpsat"]]
        assert not below, f"the portfolio floor: CP-SAT below {below} on fragmented {size} busy {busy}"
