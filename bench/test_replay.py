"""Replay speed (issue 4): jobs per second for a policy on a slice of the shipped Philly sample.

    python -m pytest bench/test_replay.py

Greedy replays the first 1,000 jobs of ``instances/workloads/philly-6214e9.json`` on 6 nodes
(48 GPUs: queues form, about 30 % mean utilization) with the simulator validating every plan
(``validate="always"``) and skipping plans ``gangopt.solve`` already validated
(``"untrusted"``). ``extra_info`` records jobs/s and rounds; the plan is the same either way.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import SimConfig, SimulationResult, simulate
from gangopt.replay.workload import Workload, load_workload

SAMPLE = Path(__file__).resolve().parent.parent / "instances" / "workloads" / "philly-6214e9.json"
JOBS = 1000
NODES = 6


@cache
def philly_slice(n: int = JOBS) -> Workload:
    workload = load_workload(SAMPLE)
    return workload.model_copy(update={"jobs": workload.jobs[:n]})


def replay(policy: str, validate: str) -> SimulationResult:
    config = SimConfig(validate=validate)  # type: ignore[arg-type]
    return simulate(philly_slice(), parametric_cluster(NODES), make_policy(policy, philly_slice()), config, name=policy)


@pytest.mark.parametrize("validate", ["always", "untrusted"])
def test_replay_greedy(benchmark: Any, validate: str) -> None:
    benchmark.group = f"replay philly[:{JOBS}] on {NODES} nodes"
    result = benchmark.pedantic(replay, args=("greedy", validate), rounds=2, iterations=1)
    jobs_per_second = len(result.jobs) / result.wall_seconds
    benchmark.extra_info.update(jobs=len(result.jobs), rounds=len(result.rounds), jobs_per_second=jobs_per_second)
    assert all(j.state == "finished" for j in result.jobs)
