"""Per-queue fairness of replays (gangopt/replay/fairness.py): deserved shares, Jain's index,
and a replay checked by hand."""

from __future__ import annotations

import pytest

from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.fairness import compute_fairness, deserved, jain, jain_series
from gangopt.replay.metrics import compute_metrics, metrics_rows
from gangopt.replay.policies import make_policy
from gangopt.replay.report import fairness_rows
from gangopt.replay.simulation import QueuePoint, SimConfig, simulate
from gangopt.replay.workload import Job, Workload
from gangopt.schema import Queue


def job(name: str, arrival: float, duration: float, queue: str, gpus: int = 8) -> Job:
    return Job.model_validate(
        {
            "name": name,
            "arrival": arrival,
            "duration": duration,
            "queue": queue,
            "roles": [{"replicas": 1, "requests": {"gpu": gpus, "cpu": 1}}],
        }
    )


@pytest.mark.parametrize(
    ("demand", "total", "nominal", "weight", "expected"),
    [
        # plain max-min: the small demand is met, the big one gets the rest
        ({"a": 10, "b": 2}, 8, {}, {}, {"a": 6, "b": 2}),
        # weights 3:1
        ({"a": 10, "b": 10}, 8, {}, {"a": 3}, {"a": 6, "b": 2}),
        # a's nominal 2 first, then the remaining 6 equally
        ({"a": 10, "b": 10}, 8, {"a": 2}, {}, {"a": 5, "b": 3}),
        # guarantees above the cluster: scaled down together
        ({"a": 10, "b": 10}, 8, {"a": 6, "b": 6}, {}, {"a": 4, "b": 4}),
        # every demand fits: deserved = demand
        ({"a": 3, "b": 2}, 8, {"a": 6}, {}, {"a": 3, "b": 2}),
        # weight 0: only its guarantee
        ({"a": 10, "b": 10}, 8, {"b": 1}, {"b": 0}, {"a": 8 - 1, "b": 1}),
        # no demand, nothing deserved
        ({"a": 0, "b": 4}, 8, {"a": 4}, {}, {"b": 4}),
    ],
)
def test_deserved(
    demand: dict[str, float],
    total: float,
    nominal: dict[str, float],
    weight: dict[str, float],
    expected: dict[str, float],
) -> None:
    got = deserved(demand, total, nominal, weight)
    assert got == pytest.approx(expected)
    assert sum(got.values()) == pytest.approx(min(total, sum(demand.values())))


@pytest.mark.parametrize(("values", "expected"), [([1, 1], 1.0), ([1, 0], 0.5), ([2, 0, 0, 0], 0.25), ([], 1.0)])
def test_jain(values: list[float], expected: float) -> None:
    assert jain(values) == pytest.approx(expected)


def test_compute_fairness_on_a_step_function() -> None:
    timeline = [
        QueuePoint(0.0, {"a": 8.0}, {}),
        QueuePoint(3600.0, {"a": 4.0, "b": 4.0}, {"a": 4.0}),
        QueuePoint(7200.0, {}, {}),
    ]
    f = compute_fairness(timeline, 7200.0, 8.0, [Queue(name="a", weight=1.0), Queue(name="b", weight=3.0)])
    # second hour: demand a 8, b 4; weights 1:3 -> b's 4 met, a the other 4: both at their share
    assert f.queues["a"].deserved_gpu_hours == pytest.approx(8 + 4)
    assert f.queues["b"].share_of_deserved == pytest.approx(1.0)
    assert f.jain_index == pytest.approx(1.0)
    assert f.shared_hours == pytest.approx(1.0) and f.contended_hours == pytest.approx(1.0)


def test_a_replay_checked_by_hand() -> None:
    """One 8-GPU node; queue a's 8-GPU job runs 0-1000 s, queue b's arrives at 10 s and waits
    for it (same priority: no preemption), then runs 1000-1100 s."""
    wl = Workload(jobs=[job("a1", 0, 1000, "a"), job("b1", 10, 100, "b")])
    result = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0))
    assert [(j.first_start, j.finish) for j in result.jobs] == [(0, 1000), (1000, 1100)]
    m = compute_metrics(result)
    assert m.fairness is not None
    a, b = m.fairness.queues["a"], m.fairness.queues["b"]
    # [0, 10): a alone deserves 8; [10, 1000): 4 each, a holds 8, b 0; [1000, 1100): b alone
    assert a.deserved_gpu_hours * 3600 == pytest.approx(8 * 10 + 4 * 990)
    assert a.share_of_deserved == pytest.approx(8000 / 4040)
    assert b.demand_hours * 3600 == pytest.approx(1090)
    assert b.share_of_deserved == pytest.approx(800 / (4 * 990 + 8 * 100))
    assert b.starved_hours * 3600 == pytest.approx(990)
    assert m.fairness.jain_index == pytest.approx(0.5)
    assert m.fairness.contended_hours * 3600 == pytest.approx(990)
    assert ("fairness.queues.b.starved_hours", pytest.approx(990 / 3600)) in metrics_rows(m)
    header, rows = fairness_rows([m])
    assert [r[1] for r in rows] == ["a", "b"] and "share" in header


def test_one_queue_has_no_fairness() -> None:
    wl = Workload(jobs=[job("a1", 0, 100, "a"), job("a2", 10, 100, "a")])
    result = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0))
    assert result.queue_timeline == [] and compute_metrics(result).fairness is None


def test_the_workloads_queues_reach_every_round_and_the_shares() -> None:
    """Queues a and b share one 8-GPU node, 4 GPUs of nominal quota each, Kueue-like reclaim:
    b's job reclaims the GPUs a borrows at once; without the queues it waits for a's job."""
    jobs = [job("a1", 0, 1000, "a"), job("b1", 10, 100, "b", gpus=4)]
    policy = {"reclaim_within_cohort": "any"}
    queues = [Queue(name=q, cohort="c", nominal={"gpu": 4}, preemption=policy) for q in ("a", "b")]
    shares = {}
    for declared in ([], queues):
        wl = Workload(jobs=jobs, queues=declared)
        result = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0))
        fairness = compute_metrics(result).fairness
        assert fairness is not None
        shares[bool(declared)] = (result.jobs[1].first_start, fairness.queues["b"].share_of_deserved)
    assert shares[False] == (1000, pytest.approx(400 / (4 * 990 + 4 * 100)))
    assert shares[True] == (10, pytest.approx(1.0))


def test_duplicate_queue_names_in_a_workload_are_refused() -> None:
    with pytest.raises(ValueError, match=r"queues\[1\]: duplicate queue name 'a'"):
        Workload(jobs=[job("a1", 0, 10, "a")], queues=[Queue(name="a"), Queue(name="a")])


def test_jain_series_splits_steps_across_hours() -> None:
    """Equal shares for 1.5 h (index 1), then one queue holds all (index 0.5) for 0.5 h."""
    timeline = [
        QueuePoint(0.0, {"a": 4.0, "b": 4.0}, {}),
        QueuePoint(5400.0, {"a": 8.0}, {"b": 4.0}),
        QueuePoint(7200.0, {}, {}),
    ]
    series = jain_series(timeline, 7200.0, 8.0, [])
    assert series == [(0.0, pytest.approx(1.0)), (3600.0, pytest.approx(0.75))]
    assert jain_series([], 10.0, 8.0, []) == []
