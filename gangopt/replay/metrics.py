"""Metrics of one simulation: waits, completion times, allocation, preemption, solver time.

:func:`compute_metrics` turns a :class:`~gangopt.replay.simulation.SimulationResult` into a
:class:`Metrics` model (JSON via pydantic, CSV via :func:`metrics_rows`);
:func:`write_report` writes ``metrics.json``, ``metrics.csv``, ``jobs.csv``, ``rounds.csv``
and ``timeline.csv`` into a folder.

Definitions
-----------
* **Queueing delay** = first start - arrival, over every job that arrived. A job that never
  started counts with its wait up to the end of the simulation (a lower bound, *censored*);
  leaving it out would reward a policy for starving jobs. ``unstarted`` says how many.
  Percentiles are numpy's linear interpolation (``p50`` of 1, 2, 3, 4 is 2.5).
  Also per priority, per queue and per job size class (:func:`size_class`).
* **Fairness** (several queues only): each queue's share of the GPUs it deserved while it had
  demand, and Jain's index over the queues (:mod:`gangopt.replay.fairness`).
* **JCT** = finish - arrival, over finished jobs only.
* **Allocation** is time-weighted over ``[start, end]`` of the simulation from the step
  timeline: mean GPUs allocated and mean utilization (allocated / total) over the policy's
  own span. That span differs between policies (a policy that finishes sooner divides by less),
  so ``utilization_mean`` alone flatters a short makespan: on openb 74 % against 54 % was
  mostly 612 h against 842 h of makespan (issue 16).
* **Utilization over the common window** (``utilization_window``): allocated GPU-seconds
  within ``[first arrival, window_end]`` over ``GPUs x window``, where ``window_end`` is the
  trace's own span, ``max(arrival + duration)`` (when the last job would finish if every job
  started on arrival), cut at the horizon. The window depends on the workload alone, so it is
  the same for every policy and cluster of a comparison.
* **GPU-hours**: ``gpu_hours_allocated`` = GPUs held x time over the whole replay;
  ``gpu_hours_delivered`` = that minus ``lost_gpu_hours`` (work rolled back by preemptions):
  the GPU time that went into work kept.
* **Idle but needed** GPU-hours = integral of ``min(free GPUs, GPUs the waiting jobs need at
  their minimum)`` while some job waits: capacity that sits idle although demand exists
  (fragmentation, topology, or head-of-line blocking). ``idle_while_waiting`` is the plain
  integral of free GPUs while any job waits.
* **Preemptions**: evictions counted per job; lost GPU-hours = GPUs held x time since the
  last checkpoint at each eviction (see :mod:`gangopt.replay.simulation`).
* **Deadline misses** (:func:`deadline_missed`): a *start* deadline is missed when the first
  start is later than it, or the job has not started and the end of the simulation is past
  it; a *completion* deadline when the job finishes after it, or has not finished and the end
  is past it.
* **Solver time**: wall seconds of each policy call (rounds the simulator skipped are not counted).
* **Size classes**: a job's class is its GPUs at maximum size rounded up to a power of two
  (:func:`size_class`: 0 = CPU-only, 1 = one GPU or a share of one, then 2, 4, 8, 16, ...).
  The **largest class** is the largest class holding at least :data:`LARGEST_CLASS_MIN_JOBS`
  arrived jobs, together with every larger class: the big gangs whose starvation issue 12
  measures (a p95 over two jobs would be one job's wait). On the Philly VC b436b2 window that
  is the 41 gangs of 16 and 24 GPUs; on the openb window the 11 pods of 8 GPUs.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from gangopt.replay.fairness import Fairness, compute_fairness
from gangopt.replay.simulation import JobRecord, SimulationResult, TimelinePoint


class Summary(BaseModel):
    """Count, mean and percentiles of a sample (all 0 when it is empty)."""

    model_config = ConfigDict(frozen=True)

    count: int = 0
    mean: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    p99: float = 0.0
    max: float = 0.0


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        return Summary()
    a = np.asarray(values, dtype=float)
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return Summary(
        count=len(a), mean=float(a.mean()), p50=float(p50), p95=float(p95), p99=float(p99), max=float(a.max())
    )


LARGEST_CLASS_MIN_JOBS = 10
"""Jobs a size class needs to be the largest class (smaller top classes are merged into it)."""


def size_class(gpus: float) -> int:
    """GPUs rounded up to a power of two: 0 for CPU-only jobs, 1 for a GPU or a share of one."""
    if gpus <= 0:
        return 0
    return 1 << max(0, math.ceil(math.log2(gpus) - 1e-9))


def largest_class(counts: dict[int, int]) -> int:
    """The largest size class with at least :data:`LARGEST_CLASS_MIN_JOBS` jobs in ``counts``
    (class -> jobs); the smallest class present when none has that many, -1 when empty."""
    if not counts:
        return -1
    big = [c for c, n in counts.items() if n >= LARGEST_CLASS_MIN_JOBS]
    return max(big) if big else min(counts)


class Metrics(BaseModel):
    """The measured outcome of one simulation; times in seconds, GPU amounts in GPUs."""

    model_config = ConfigDict(frozen=True)

    policy: str
    nodes: int
    gpus_total: float
    start_time: float
    end_time: float
    wall_seconds: float
    jobs: int
    arrived: int
    finished: int
    running_at_end: int
    pending_at_end: int
    not_arrived: int
    unstarted: int
    queueing_delay: Summary
    queueing_delay_by_priority: dict[int, Summary]
    queueing_delay_by_queue: dict[str, Summary]
    queueing_delay_by_size: dict[int, Summary] = {}
    """Per size class (:func:`size_class`: GPUs rounded up to a power of two), largest first."""
    largest_size_class: int = -1
    """The largest class with enough jobs (:func:`largest_class`); -1 when no job arrived."""
    queueing_delay_largest_class: Summary = Summary()
    """Queueing delay of the jobs of ``largest_size_class`` and every larger class."""
    jct: Summary
    gpus_allocated_mean: float
    utilization_mean: float
    idle_needed_gpu_hours: float
    idle_while_waiting_gpu_hours: float
    preemptions: int
    jobs_preempted: int
    max_preemptions_per_job: int = 0
    lost_gpu_hours: float
    deadlines: int
    deadline_misses: int
    rounds: int
    solver_seconds: Summary
    solver_seconds_total: float
    jobs_per_second: float
    """Arrived jobs replayed per wall-clock second."""
    cpu_seconds: float = 0.0
    """CPU seconds of the replay (:attr:`SimulationResult.cpu_seconds`)."""
    window_end: float = 0.0
    """End of the common window: the trace's span (``max(arrival + duration)``), cut at the end."""
    utilization_window: float = 0.0
    """Allocated GPU-seconds in ``[start_time, window_end]`` / (GPUs x window): comparable across policies."""
    gpu_hours_allocated: float = 0.0
    gpu_hours_delivered: float = 0.0
    """Allocated GPU-hours minus the GPU-hours preemptions rolled back."""
    completion_deadlines: int = 0
    """How many of ``deadlines`` are completion deadlines (the rest bound the start)."""
    fairness: Fairness | None = None
    """Per-queue share of deserved GPUs and Jain's index (:mod:`gangopt.replay.fairness`);
    None when every job is in one queue."""


def _censored_delay(job: JobRecord, end: float) -> float:
    return job.queueing_delay if job.queueing_delay is not None else max(0.0, end - job.arrival)


def size_label(size: int) -> str:
    """How a :func:`size_class` reads in tables: ``0`` (CPU only), ``≤1`` (one GPU or a share),
    ``2``, then the range of GPU counts the class holds (``3-4``, ``5-8``, ``9-16``, ...)."""
    if size <= 2:
        return {0: "0", 1: "≤1", 2: "2"}[size]
    return f"{size // 2 + 1}-{size}"


def deadline_missed(job: JobRecord, end: float) -> bool:
    """Whether ``job`` (with a deadline) missed it by ``end`` (see the module docstring)."""
    assert job.deadline is not None
    reached = job.finish if job.deadline_kind == "completion" else job.first_start
    if reached is not None:
        return reached > job.deadline
    return end > job.deadline


def window_end(result: SimulationResult) -> float:
    """End of the common window: ``max(arrival + duration)`` over the jobs, at most the end."""
    span = max((j.arrival + j.duration for j in result.jobs), default=result.start_time)
    return max(result.start_time, min(span, result.end_time))


def _integrals(timeline: Sequence[TimelinePoint], start: float, end: float, total: float) -> tuple[float, ...]:
    """Time integrals (GPU-seconds) of allocated, idle-but-needed and idle-while-waiting GPUs."""
    allocated = needed = waiting = 0.0
    for i, point in enumerate(timeline):
        a = max(point.time, start)
        b = min(timeline[i + 1].time if i + 1 < len(timeline) else end, end)
        if b <= a:
            continue
        span = b - a
        free = max(0.0, total - point.gpus_allocated)
        allocated += point.gpus_allocated * span
        if point.pending > 0:
            needed += min(free, point.pending_gpus) * span
            waiting += free * span
    return allocated, needed, waiting


def compute_metrics(result: SimulationResult) -> Metrics:
    """Summarize ``result`` (see the module docstring for every definition)."""
    end = result.end_time
    arrived = [j for j in result.jobs if j.state != "not_arrived"]
    delays = [_censored_delay(j, end) for j in arrived]
    by_priority: dict[int, list[float]] = defaultdict(list)
    by_queue: dict[str, list[float]] = defaultdict(list)
    by_size: dict[int, list[float]] = defaultdict(list)
    for job, delay in zip(arrived, delays, strict=True):
        by_priority[job.priority].append(delay)
        by_queue[job.queue].append(delay)
        by_size[size_class(job.gpus)].append(delay)
    top = largest_class({c: len(v) for c, v in by_size.items()})
    finished = [j for j in arrived if j.state == "finished"]
    span = max(0.0, end - result.start_time)
    allocated, needed, waiting = _integrals(result.timeline, result.start_time, end, result.gpus_total)
    with_deadline = [j for j in arrived if j.deadline is not None]
    misses = sum(1 for j in with_deadline if deadline_missed(j, end))
    w_end = window_end(result)
    in_window, _, _ = _integrals(result.timeline, result.start_time, w_end, result.gpus_total)
    w_span = w_end - result.start_time
    lost = sum(j.lost_gpu_hours for j in arrived)
    solver = [r.solver_seconds for r in result.rounds]
    mean_alloc = allocated / span if span > 0 else (result.timeline[-1].gpus_allocated if result.timeline else 0.0)
    return Metrics(
        policy=result.policy,
        nodes=result.nodes,
        gpus_total=result.gpus_total,
        start_time=result.start_time,
        end_time=end,
        wall_seconds=result.wall_seconds,
        jobs=len(result.jobs),
        arrived=len(arrived),
        finished=len(finished),
        running_at_end=sum(1 for j in arrived if j.state == "running"),
        pending_at_end=sum(1 for j in arrived if j.state == "pending"),
        not_arrived=len(result.jobs) - len(arrived),
        unstarted=sum(1 for j in arrived if j.first_start is None),
        queueing_delay=summarize(delays),
        queueing_delay_by_priority={p: summarize(v) for p, v in sorted(by_priority.items(), reverse=True)},
        queueing_delay_by_queue={q: summarize(v) for q, v in sorted(by_queue.items())},
        queueing_delay_by_size={c: summarize(v) for c, v in sorted(by_size.items(), reverse=True)},
        largest_size_class=top,
        queueing_delay_largest_class=summarize([d for c, v in by_size.items() if c >= top for d in v]),
        jct=summarize([j.jct for j in finished if j.jct is not None]),
        gpus_allocated_mean=mean_alloc,
        utilization_mean=mean_alloc / result.gpus_total if result.gpus_total > 0 else 0.0,
        idle_needed_gpu_hours=needed / 3600.0,
        idle_while_waiting_gpu_hours=waiting / 3600.0,
        preemptions=sum(j.preemptions for j in arrived),
        jobs_preempted=sum(1 for j in arrived if j.preemptions > 0),
        max_preemptions_per_job=max((j.preemptions for j in arrived), default=0),
        lost_gpu_hours=lost,
        deadlines=len(with_deadline),
        deadline_misses=misses,
        rounds=len(result.rounds),
        solver_seconds=summarize(solver),
        solver_seconds_total=float(sum(solver)),
        jobs_per_second=len(arrived) / result.wall_seconds if result.wall_seconds > 0 else 0.0,
        cpu_seconds=result.cpu_seconds,
        window_end=w_end,
        utilization_window=in_window / (w_span * result.gpus_total) if w_span > 0 and result.gpus_total > 0 else 0.0,
        gpu_hours_allocated=allocated / 3600.0,
        gpu_hours_delivered=max(0.0, allocated / 3600.0 - lost),
        completion_deadlines=sum(1 for j in with_deadline if j.deadline_kind == "completion"),
        fairness=(
            compute_fairness(result.queue_timeline, end, result.gpus_total, result.config.queues)
            if result.queue_timeline
            else None
        ),
    )


# ----------------------------------------------------------------------------- export


def metrics_rows(metrics: Metrics) -> list[tuple[str, Any]]:
    """Flattened ``(metric, value)`` pairs, e.g. ``("queueing_delay.p95", 120.0)`` or
    ``("queueing_delay_by_priority.2.mean", 3.5)``."""
    rows: list[tuple[str, Any]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        else:
            rows.append((prefix, value))

    walk("", metrics.model_dump(mode="json"))
    return rows


def _csv(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def metrics_csv(metrics: Metrics) -> str:
    return _csv(metrics_rows(metrics), ["metric", "value"])


def records_csv(records: Sequence[Any], extra: Sequence[str] = ()) -> str:
    """CSV of dataclass records (one row each); ``extra`` names properties to add as columns."""
    if not records:
        return ""
    names = [f.name for f in dataclasses.fields(records[0])]
    rows = ([getattr(r, n) for n in names] + [getattr(r, e) for e in extra] for r in records)
    return _csv(([("" if v is None else v) for v in row] for row in rows), [*names, *extra])


def write_report(result: SimulationResult, metrics: Metrics, folder: str | Path) -> list[Path]:
    """Write metrics.json, metrics.csv, jobs.csv, rounds.csv and timeline.csv; returns the paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "metrics.json": json.dumps(metrics.model_dump(mode="json"), indent=2) + "\n",
        "metrics.csv": metrics_csv(metrics),
        "jobs.csv": records_csv(result.jobs, extra=("queueing_delay", "jct")),
        "rounds.csv": records_csv(result.rounds),
        "timeline.csv": records_csv(result.timeline),
    }
    paths = []
    for name, text in files.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
