"""pytest-benchmark benchmarks for issue 3's table: every size, gangopt and greedy, same run.

    python -m pytest bench                      # S and M
    python -m pytest bench --run-slow           # also L and XL (or GANGOPT_BENCH_SLOW=1)

Each benchmark times the end-to-end library call (parse + validate input, solve, validate
plan) and asserts the plan is valid. ``bench/table.py`` prints the issue's table.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.rounds import check_valid, end_to_end, round_text
from gangopt.parsing import parse_json
from gangopt.prefilter import prefilter
from gangopt.schema import Round

SLOW = {"L", "XL"}
SIZE_PARAMS = [pytest.param(s, marks=[pytest.mark.slow] if s in SLOW else [], id=s) for s in ("S", "M", "L", "XL")]


@pytest.mark.parametrize("size", SIZE_PARAMS)
@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
def test_time_to_plan(benchmark: Any, size: str, solver: str) -> None:
    text = round_text(size)
    benchmark.group = f"round {size}"
    benchmark.extra_info["size"] = size
    rounds = 3 if solver == "cpsat" else 5
    rnd, plan = benchmark.pedantic(end_to_end, args=(text, solver), rounds=rounds, iterations=1)
    check_valid(rnd, plan, solver)
    benchmark.extra_info.update(status=str(plan.status), gap=plan.gap, admitted=len(plan.admitted))
    assert plan.admitted or not rnd.pending or plan.waiting
    assert {w.gang for w in plan.waiting} | set(plan.admitted) == {g.name for g in rnd.pending}


@pytest.mark.slow
def test_prefilter_xl(benchmark: Any) -> None:
    rnd = parse_json(Round, round_text("XL"), "round")
    benchmark.group = "prefilter"
    pre = benchmark.pedantic(prefilter, args=(rnd,), rounds=5, iterations=1, warmup_rounds=1)
    assert pre.seconds < 60


def test_prefilter_m(benchmark: Any) -> None:
    rnd = parse_json(Round, round_text("M"), "round")
    benchmark.group = "prefilter"
    benchmark.pedantic(prefilter, args=(rnd,), rounds=5, iterations=1, warmup_rounds=1)
