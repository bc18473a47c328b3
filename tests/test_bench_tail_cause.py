"""The tail-cause counterfactual (``bench/tail_cause.py``): holding a job back, and counting its
wait from its real arrival."""

from __future__ import annotations

import pytest

from bench.tail_cause import config_of, hold_back, replay, restore_arrivals, table
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.metrics import compute_metrics
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.workload import Job, Workload


def job(name: str, arrival: float, duration: float, gpus: int, **kw: object) -> Job:
    data = {
        "name": name,
        "arrival": arrival,
        "duration": duration,
        "roles": [{"replicas": 1, "requests": {"gpu": gpus}}],
        **kw,
    }
    return Job.model_validate(data)


def workload() -> Workload:
    # one 8-GPU node: the long whole-node job at 0 blocks the short one arriving at 10
    return Workload(jobs=[job("long", 0, 10_000, 8), job("short", 10, 100, 1)])


def test_hold_back_moves_only_that_job_and_never_earlier() -> None:
    wl = workload()
    held = hold_back(wl, "long", 500)
    assert [(j.name, j.arrival) for j in held.jobs] == [("long", 500), ("short", 10)]
    assert hold_back(wl, "short", 5).jobs[1].arrival == 10  # never before its own arrival
    with pytest.raises(ValueError, match="no job named"):
        hold_back(wl, "missing", 1)
    late = Workload(jobs=[job("d", 0, 10, 1, deadline=100)])
    with pytest.raises(ValueError, match="deadline"):
        hold_back(late, "d", 200)


def test_held_job_waits_from_its_real_arrival_and_frees_the_node() -> None:
    wl = workload()
    arrivals = {j.name: j.arrival for j in wl.jobs}
    cluster = parametric_cluster(1)
    as_is = compute_metrics(simulate(wl, cluster, make_policy("greedy"), SimConfig(interval=0.0)))
    result = simulate(hold_back(wl, "long", 500), cluster, make_policy("greedy"), SimConfig(interval=0.0))
    records = {r.name: r for r in restore_arrivals(result, arrivals).jobs}
    assert records["long"].arrival == 0 and records["long"].queueing_delay == 500
    assert records["short"].queueing_delay == 0  # the node was free when it arrived
    held = compute_metrics(result)
    # as it is: "short" waits behind "long" (10,000 s - 10 s); held: "long" waits 500 s
    assert as_is.queueing_delay.mean == pytest.approx((10_000 - 10) / 2)
    assert held.queueing_delay.mean == pytest.approx(500 / 2)


def test_replay_row_reports_the_jobs_start() -> None:
    wl = workload()
    arrivals = {j.name: j.arrival for j in wl.jobs}
    row = replay(hold_back(wl, "long", 300), 1, "greedy", arrivals, "long", "held")
    assert row.job_start == 300 and row.metrics.queueing_delay.max == 300
    assert "| held | 0.1 h |" in table([row], "long")


def test_setting_json_becomes_the_replay_config() -> None:
    config = config_of('{"lookahead": {"reservations": 0}, "weights": {"short_first": 0.5}, "preemption": false}')
    assert config.lookahead is not None and config.lookahead.reservations == 0
    assert config.lookahead.first_run_seconds == 300  # the rest stays at the schema's default
    assert config.weights is not None and config.weights.short_first == 0.5 and not config.preemption
    assert config_of("{}").lookahead is None and config_of("{}").preemption
    with pytest.raises(ValueError, match="unknown key"):
        config_of('{"lookahed": {}}')
    with pytest.raises(ValueError, match="JSON object"):
        config_of("[1]")
