"""Size classes of :mod:`gangopt.replay.metrics` (issue 12's largest-gang-class wait) and the
per-job preemption maximum, on hand-made simulation results."""

from __future__ import annotations

import pytest

from gangopt.replay.metrics import (
    LARGEST_CLASS_MIN_JOBS,
    compute_metrics,
    deadline_missed,
    largest_class,
    size_class,
    size_label,
)
from gangopt.replay.simulation import JobRecord, SimConfig, SimulationResult, TimelinePoint
from gangopt.replay.workload import DeadlineKind


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(0, 0), (0.25, 1), (1, 1), (1.5, 2), (2, 2), (3, 4), (4, 4), (8, 8), (12, 16), (16, 16), (24, 32), (128, 128)],
)
def test_size_class_rounds_gpus_up_to_a_power_of_two(gpus: float, expected: int) -> None:
    assert size_class(gpus) == expected


def test_largest_class_needs_enough_jobs() -> None:
    n = LARGEST_CLASS_MIN_JOBS
    assert largest_class({1: 500, 8: n, 16: n - 1}) == 8
    assert largest_class({1: 500, 8: n - 1, 16: n}) == 16
    assert largest_class({2: 3, 4: 1}) == 2  # none has enough: the smallest class, i.e. every job
    assert largest_class({}) == -1


def _job(name: str, gpus: float, wait: float, preemptions: int = 0) -> JobRecord:
    return JobRecord(
        name=name,
        arrival=0.0,
        priority=0,
        queue="q",
        gpus=gpus,
        duration=10.0,
        deadline=None,
        state="finished",
        first_start=wait,
        finish=wait + 10.0,
        preemptions=preemptions,
    )


def test_largest_class_wait_merges_the_small_top_classes() -> None:
    """Ten 16-GPU gangs waiting 100 s and two 24-GPU gangs waiting 1000 s: the 32 class has
    too few jobs, so the largest class is '16 and up', twelve jobs."""
    jobs = [_job(f"s{i}", 1, 0.0) for i in range(30)]
    jobs += [_job(f"m{i}", 16, 100.0) for i in range(LARGEST_CLASS_MIN_JOBS)]
    jobs += [_job("l0", 24, 1000.0, preemptions=3), _job("l1", 24, 1000.0, preemptions=1)]
    result = SimulationResult(
        policy="hand",
        config=SimConfig(),
        nodes=1,
        gpus_total=32.0,
        start_time=0.0,
        end_time=2000.0,
        wall_seconds=1.0,
        jobs=jobs,
        rounds=[],
        timeline=[],
    )
    m = compute_metrics(result)
    assert list(m.queueing_delay_by_size) == [32, 16, 1]
    assert m.queueing_delay_by_size[16].count == LARGEST_CLASS_MIN_JOBS
    assert m.largest_size_class == 16
    largest = m.queueing_delay_largest_class
    assert largest.count == LARGEST_CLASS_MIN_JOBS + 2 and largest.max == 1000.0
    assert largest.mean == pytest.approx((100.0 * LARGEST_CLASS_MIN_JOBS + 2000.0) / (LARGEST_CLASS_MIN_JOBS + 2))
    assert (m.preemptions, m.jobs_preempted, m.max_preemptions_per_job) == (4, 2, 3)




def rec(arrival: float, start: float | None, finish: float | None, deadline: float, kind: DeadlineKind) -> JobRecord:
    state = "finished" if finish is not None else ("running" if start is not None else "pending")
    return JobRecord(
        name="j",
        arrival=arrival,
        priority=0,
        queue="q",
        gpus=8.0,
        duration=100.0,
        deadline=deadline,
        deadline_kind=kind,
        state=state,  # type: ignore[arg-type]
        first_start=start,
        finish=finish,
    )


@pytest.mark.parametrize(
    ("start", "finish", "deadline", "kind", "end", "missed"),
    [
        (10, 110, 20, "start", 500, False),  # started in time; finishing late does not matter
        (30, 130, 20, "start", 500, True),
        (None, None, 20, "start", 500, True),
        (None, None, 600, "start", 500, False),  # not started, but the deadline is still ahead
        (30, 130, 120, "completion", 500, True),  # started after deadline - duration: finished late
        (10, 110, 120, "completion", 500, False),
        (10, None, 120, "completion", 500, True),  # still running at the end, past the deadline
        (10, None, 600, "completion", 500, False),
        (30, 130, 130, "completion", 500, False),  # finishing exactly at the deadline meets it
    ],
)
def test_deadline_missed_by_kind(
    start: float | None, finish: float | None, deadline: float, kind: DeadlineKind, end: float, missed: bool
) -> None:
    assert deadline_missed(rec(0, start, finish, deadline, kind), end) is missed


def _result(policy: str, timeline: list[tuple[float, float]], end: float, lost: float = 0.0) -> SimulationResult:
    jobs = [
        JobRecord("a", 0.0, 0, "q", 8.0, 100.0, None, state="finished", first_start=0.0, finish=100.0),
        JobRecord("b", 50.0, 0, "q", 8.0, 100.0, 300.0, "completion", "finished", lost_gpu_hours=lost),
    ]
    jobs[1].first_start, jobs[1].finish = end - 100.0, end
    points = [TimelinePoint(t, g, 0, 0.0, 1) for t, g in timeline]
    return SimulationResult(policy, SimConfig(), 2, 16.0, 0.0, end, 1.0, jobs, [], points)


def test_utilization_over_the_common_window_is_comparable_across_policies() -> None:
    """Same jobs, two schedules: b overlaps a, or waits for it. Over each policy's own span the
    slow schedule divides by 200 s and the fast one by 150 s; the common window is the trace's
    span, max(arrival + duration) = 150 s, for both."""
    fast = compute_metrics(_result("fast", [(0, 8), (50, 16), (100, 8), (150, 0)], end=150.0))
    slow = compute_metrics(_result("slow", [(0, 8), (100, 8), (200, 0)], end=200.0, lost=0.1))
    assert fast.window_end == slow.window_end == 150.0
    assert fast.utilization_mean == pytest.approx(1600 / (16 * 150))
    assert slow.utilization_mean == pytest.approx(1600 / (16 * 200))
    assert fast.utilization_window == pytest.approx(1600 / (16 * 150))
    assert slow.utilization_window == pytest.approx(8 * 150 / (16 * 150))
    # the same work allocated; delivered subtracts what preemptions rolled back
    assert fast.gpu_hours_allocated == slow.gpu_hours_allocated == pytest.approx(1600 / 3600)
    assert fast.gpu_hours_delivered == pytest.approx(1600 / 3600)
    assert slow.gpu_hours_delivered == pytest.approx(1600 / 3600 - 0.1)
    assert (fast.deadlines, fast.completion_deadlines, fast.deadline_misses) == (1, 1, 0)


def test_window_is_cut_at_the_end_of_a_replay_with_a_horizon() -> None:
    m = compute_metrics(_result("cut", [(0, 8), (100, 8)], end=120.0))
    assert m.window_end == 120.0 and m.utilization_window == pytest.approx(0.5)


def test_size_labels() -> None:
    sizes = [0, 0.25, 1, 1.5, 4, 4.5, 8, 12, 16, 17, 64, 65]
    assert [size_label(size_class(g)) for g in sizes] == [
        "0", "≤1", "≤1", "2", "3-4", "5-8", "5-8", "9-16", "9-16", "17-32", "33-64", "65-128"
    ]
    m = compute_metrics(_result("sizes", [(0, 8), (150, 0)], end=150.0))
    assert list(m.queueing_delay_by_size) == [8] and m.queueing_delay_by_size[8].count == 2
