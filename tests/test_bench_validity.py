"""The validity checks of ``bench/``, without the timing: collected in CI (``testpaths`` is
``tests``, so ``bench/`` itself only runs on demand, see docs/property-tests.md).

Each benchmark asserts that the plans it times are valid; these tests run the same calls once
on the rounds CI can afford (S and M, about 1 s together) and a 200-job slice of the replay
benchmark with the simulator validating every plan (about 1 s).
"""

from __future__ import annotations

import pytest

from bench.rounds import check_valid, end_to_end, round_text
from bench.test_replay import NODES, philly_slice
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.schema import Status


@pytest.mark.parametrize("size", ["S", "M"])
@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
def test_benchmark_round_plans_are_valid(size: str, solver: str) -> None:
    rnd, plan = end_to_end(round_text(size), solver)
    check_valid(rnd, plan, solver)
    assert plan.status != Status.FALLBACK
    assert {w.gang for w in plan.waiting} | set(plan.admitted) == {g.name for g in rnd.pending}
    assert set(plan.admitted).isdisjoint(w.gang for w in plan.waiting)
    assert plan.admitted, "the benchmark rounds always start something"


def test_replay_slice_validates_every_plan() -> None:
    workload = philly_slice(200)
    result = simulate(
        workload, parametric_cluster(NODES), make_policy("greedy", workload), SimConfig(validate="always"), name="g"
    )
    assert len(result.jobs) == 200
    assert all(j.state == "finished" for j in result.jobs)
