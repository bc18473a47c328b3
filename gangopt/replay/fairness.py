"""Per-queue fairness of a replay: what a policy gives each tenant against what it deserves.

Issue 15 asks that capacity replays show what a policy does to each tenant. A queue's wait
summary (``Metrics.queueing_delay_by_queue``) says how long its jobs waited, not whether it got
its share while it asked for one; this module measures the share, over the replay's per-queue
step timeline (:attr:`~gangopt.replay.simulation.SimulationResult.queue_timeline`).

Definitions (at each instant, over the queues with *demand*: GPUs held plus GPUs their waiting
jobs need at their minimum size):

* **Deserved GPUs** (:func:`deserved`): first each queue's guarantee, its nominal GPU quota
  capped at its demand (scaled down together if the guarantees exceed the cluster); then the
  rest of the cluster's GPUs shared by weighted max-min fairness (water-filling) over the demand
  left, with the queues' fair-share weights (``Queue.weight``; unset counts 1). With no quotas
  and no weights this is plain max-min fairness (Volcano's proportion plugin: deserved from
  weights, capped at the request); with quotas it is Kueue's reading (nominal first, then the
  borrowable rest by weight). The deserved GPUs of all queues sum to the smaller of the cluster
  and the total demand.
* **Share of deserved** of a queue = its allocated GPU-seconds / its deserved GPU-seconds,
  over the time it had demand (1.0: it got exactly its share; above 1, it used what others did
  not get). **Starved hours**: time during which it held less than half its deserved GPUs.
* **Jain's index** at an instant, over the queues that deserve GPUs, of x = allocated /
  deserved: (sum x)^2 / (n sum x^2), 1 when every queue gets the same fraction of its share,
  1/n when one queue gets everything. Reported time-weighted over the instants where at least
  two queues deserve GPUs (``jain_index``), and over the *contended* ones only, where the total
  demand exceeds the cluster (``jain_index_contended``): when every demand fits, a low index
  means fragmentation or topology, not unfairness.

The deserved share ignores placement (topology, node fit): a queue whose gangs fit nowhere still
deserves GPUs, and its share of deserved shows what it lost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from gangopt.quantities import MILLI
from gangopt.replay.simulation import QueuePoint
from gangopt.schema import Queue

GPU = "gpu"
STARVED_SHARE = 0.5
"""A queue holding less than this fraction of its deserved GPUs counts as starved."""


class QueueFairness(BaseModel):
    """One queue's share over a replay (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    demand_hours: float = 0.0
    """Hours during which the queue had demand."""
    deserved_gpu_hours: float = 0.0
    allocated_gpu_hours: float = 0.0
    """Over the hours with demand."""
    share_of_deserved: float = 0.0
    """``allocated_gpu_hours / deserved_gpu_hours`` (0 when it deserved nothing)."""
    starved_hours: float = 0.0
    """Hours holding less than :data:`STARVED_SHARE` of its deserved GPUs."""


class Fairness(BaseModel):
    """Per-queue shares and Jain's index of one replay (see the module docstring)."""

    model_config = ConfigDict(frozen=True)

    queues: dict[str, QueueFairness] = {}
    jain_index: float = 1.0
    """Time-weighted Jain's index of allocated / deserved where two or more queues deserve GPUs."""
    jain_index_contended: float = 1.0
    """The same over the instants where the total demand exceeds the cluster."""
    shared_hours: float = 0.0
    """Hours with two or more queues deserving GPUs."""
    contended_hours: float = 0.0
    """Of those, the hours with more demand than GPUs."""


def deserved(
    demand: Mapping[str, float], total: float, nominal: Mapping[str, float], weight: Mapping[str, float]
) -> dict[str, float]:
    """Deserved GPUs per queue with demand (module docstring): guarantees, then weighted
    water-filling of the rest. Queues not in ``nominal``/``weight`` have none / weight 1."""
    queues = [q for q, d in demand.items() if d > 0]
    guarantee = {q: min(nominal.get(q, 0.0), demand[q]) for q in queues}
    promised = sum(guarantee.values())
    if promised > total > 0:
        return {q: guarantee[q] * total / promised for q in queues}
    out = dict(guarantee)
    left = max(0.0, total - promised)
    open_ = [q for q in queues if demand[q] - out[q] > 1e-9 and weight.get(q, 1.0) > 0]
    while left > 1e-9 and open_:
        weights = sum(weight.get(q, 1.0) for q in open_)
        level = left / weights
        full = [q for q in open_ if demand[q] - out[q] <= level * weight.get(q, 1.0)]
        if not full:
            for q in open_:
                out[q] += level * weight.get(q, 1.0)
            break
        for q in full:
            left -= demand[q] - out[q]
            out[q] = demand[q]
        open_ = [q for q in open_ if q not in full]
    return out


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index of ``values`` (1 when all are equal; 1 for an empty list)."""
    square = sum(v * v for v in values)
    if not values or square == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * square)


def _declared(queues: Iterable[Queue]) -> tuple[dict[str, float], dict[str, float]]:
    """Nominal GPUs and fair-share weights of the declared queues."""
    declared = list(queues)
    nominal = {q.name: q.nominal.get(GPU, 0) / MILLI for q in declared}
    weight = {q.name: q.weight for q in declared if q.weight is not None}
    return nominal, weight


def _steps(timeline: Sequence[QueuePoint], end: float) -> Iterator[tuple[QueuePoint, float, dict[str, float]]]:
    """Each point of the step function with its span (cut at ``end``) and per-queue demand."""
    for point, after in zip(timeline, [*timeline[1:], None], strict=True):
        stop = min(end, after.time if after is not None else end)
        span = stop - point.time
        if span <= 0:
            continue
        names = sorted({*point.allocated, *point.pending})
        yield point, span, {q: point.allocated.get(q, 0.0) + point.pending.get(q, 0.0) for q in names}


def jain_series(
    timeline: Sequence[QueuePoint], end: float, total: float, queues: Iterable[Queue], bucket: float = 3600.0
) -> list[tuple[float, float]]:
    """Jain's index over time: per ``bucket`` seconds from the first point, the time-weighted
    index over the instants where two or more queues deserve GPUs (buckets with none are left
    out). For the report's figure: when in the replay a policy was unfair."""
    if not timeline:
        return []
    nominal, weight = _declared(queues)
    origin = timeline[0].time
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for point, span, demand in _steps(timeline, end):
        share = deserved(demand, total, nominal, weight)
        ratios = [point.allocated.get(q, 0.0) / d for q, d in share.items() if d > 0]
        if len(ratios) < 2:
            continue
        index = jain(ratios)
        t, stop = point.time, point.time + span
        while t < stop:  # a step may cross buckets: split it
            k = int((t - origin) // bucket)
            upto = min(stop, origin + (k + 1) * bucket)
            sums[k][0] += index * (upto - t)
            sums[k][1] += upto - t
            t = upto
    return [(origin + k * bucket, s / w) for k, (s, w) in sorted(sums.items()) if w > 0]


def compute_fairness(timeline: Sequence[QueuePoint], end: float, total: float, queues: Iterable[Queue]) -> Fairness:
    """Fairness over ``timeline`` (a step function) up to ``end`` on a cluster of ``total`` GPUs,
    with the replay's declared ``queues`` (quotas and weights; others: none and 1)."""
    nominal, weight = _declared(queues)
    hours: dict[str, float] = defaultdict(float)
    owed: dict[str, float] = defaultdict(float)
    held: dict[str, float] = defaultdict(float)
    starved: dict[str, float] = defaultdict(float)
    jain_sum = jain_span = hot_sum = hot_span = 0.0
    for point, span, demand in _steps(timeline, end):
        share = deserved(demand, total, nominal, weight)
        ratios = []
        for q, d in share.items():
            got = point.allocated.get(q, 0.0)
            hours[q] += span
            owed[q] += d * span
            held[q] += got * span
            if d > 0:
                ratios.append(got / d)
                if got < STARVED_SHARE * d:
                    starved[q] += span
        if len(ratios) >= 2:
            index = jain(ratios)
            jain_sum += index * span
            jain_span += span
            if sum(demand.values()) > total:
                hot_sum += index * span
                hot_span += span
    per_queue = {
        q: QueueFairness(
            demand_hours=hours[q] / 3600.0,
            deserved_gpu_hours=owed[q] / 3600.0,
            allocated_gpu_hours=held[q] / 3600.0,
            share_of_deserved=held[q] / owed[q] if owed[q] > 0 else 0.0,
            starved_hours=starved[q] / 3600.0,
        )
        for q in sorted(hours)
    }
    return Fairness(
        queues=per_queue,
        jain_index=jain_sum / jain_span if jain_span > 0 else 1.0,
        jain_index_contended=hot_sum / hot_span if hot_span > 0 else 1.0,
        shared_hours=jain_span / 3600.0,
        contended_hours=hot_span / 3600.0,
    )
