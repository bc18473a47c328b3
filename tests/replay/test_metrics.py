"""Metrics comparable across policies (issue 16): deadline kinds, the common window, GPU-hours."""

from __future__ import annotations

import pytest

from gangopt.replay.metrics import compute_metrics, deadline_missed, size_bucket
from gangopt.replay.simulation import JobRecord, SimConfig, SimulationResult, TimelinePoint
from gangopt.replay.workload import DeadlineKind


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


def test_size_buckets() -> None:
    sizes = [0, 0.25, 0.999, 1, 1.5, 4, 4.5, 8, 12, 16, 17, 64, 65, 1024]
    assert [size_bucket(g) for g in sizes] == [
        "0",
        "<1",
        "<1",
        "1",
        "2-4",
        "2-4",
        "5-8",
        "5-8",
        "9-16",
        "9-16",
        "17-64",
        "17-64",
        "65+",
        "65+",
    ]
    m = compute_metrics(_result("sizes", [(0, 8), (150, 0)], end=150.0))
    assert list(m.queueing_delay_by_gpus) == ["5-8"] and m.queueing_delay_by_gpus["5-8"].count == 2
