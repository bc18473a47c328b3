"""Size classes of :mod:`gangopt.replay.metrics` (issue 12's largest-gang-class wait) and the
per-job preemption maximum, on hand-made simulation results."""

from __future__ import annotations

import pytest

from gangopt.replay.metrics import LARGEST_CLASS_MIN_JOBS, compute_metrics, largest_class, size_class
from gangopt.replay.simulation import JobRecord, SimConfig, SimulationResult


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
