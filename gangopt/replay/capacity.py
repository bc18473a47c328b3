"""Capacity planning: the smallest cluster that meets stated SLOs, and how tightly it packs.

**Sizing** (:func:`size_cluster`). A size ``n`` (nodes of the varied type of a
:class:`~gangopt.replay.sweep.ClusterSpec`) *meets* the SLOs when, for every SLO, at least
``ceil(seed_share x seeds)`` of the seeds' replays meet it (``seed_share = 1``: every seed).
The search assumes that meeting the SLOs is monotone in ``n`` (more identical nodes never
hurt). That holds for the quantities replayed here in practice but is not a theorem for
online scheduling (a bigger cluster can change the order jobs start in), so
``--brute-force`` evaluates every size of the range and reports any non-monotone size.

1. Probe ``max(min_nodes, largest job, average load)``: the fewest nodes on which the
   workload's largest job fits at its minimum size, and the nodes whose GPUs match the
   average demand over the arrival window; double until a size meets the SLOs (or
   ``max_nodes`` does not: then there is no answer in range). Neither bound is assumed to
   fail: sizes below the probe are still searched when the probe meets the SLOs.
2. Bisect between the largest failing and the smallest meeting size. With more workers than
   seeds, ``k = workers // seeds`` sizes are tried per step (k-section), so the machine's
   cores are used even though each step depends on the previous one.

Every (size, seed) replay is cached, so a size is never simulated twice.

**Packing measures** of Verma et al., *Large-scale cluster management at Google with Borg*
(EuroSys '15, §5.1) and the CLUSTER '14 evaluation methodology they cite:

* **Cluster compaction** (:func:`compaction`): remove nodes until the workload no longer
  fits. Nodes are taken in a random permutation, and a binary search finds the shortest prefix
  that still fits; repeated over several permutations (the spread shows how much the choice of
  nodes matters: none for identical nodes without topology requests, much for mixed fleets).
  "Fits" is either ``peak`` -- every job that would run at the workload's peak (the instant
  of largest GPU demand if each job started on arrival and ran its duration) is admitted in
  one round by the packing solver (CP-SAT by default) -- or ``replay`` -- the SLOs are met.
* **Workload inflation** (:func:`inflation`): the largest factor ``f`` by which arrivals can be
  compressed (``f`` times the load, :func:`gangopt.replay.sweep.variant`) on a fixed cluster while it
  still fits (``peak``) or meets the SLOs (``replay``); a geometric bisection to a relative
  tolerance. ``f < 1`` means the cluster does not meet them even at the recorded load.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from gangopt.replay.policies import POLICY_NAMES, make_policy
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.slo import SLO
from gangopt.replay.sweep import ClusterSpec, Outcome, Task, default_workers, run_tasks, variant
from gangopt.replay.workload import Job, Workload
from gangopt.schema import Cluster, PendingGang, Policy, Round
from gangopt.solve import solve

FitsMode = Literal["peak", "replay"]
PackSolver = Literal["cpsat", "greedy"]


# ----------------------------------------------------------------------------- one size


@dataclass
class SizeVerdict:
    """Every seed's replay at one size and whether the size meets the SLOs."""

    nodes: int
    outcomes: list[Outcome]
    slos: tuple[SLO, ...]
    needed: int
    """Seeds that must meet each SLO."""

    @property
    def seeds_meeting(self) -> list[int]:
        """Per SLO, how many seeds meet it."""
        return [sum(1 for o in self.outcomes if o.slo_met[i]) for i in range(len(self.slos))]

    @property
    def meets(self) -> bool:
        return all(k >= self.needed for k in self.seeds_meeting)

    def worst(self, i: int) -> float:
        """The SLO's value at the ``needed``-th best seed (the value that decides the verdict)."""
        values = sorted((o.slo_values[i] for o in self.outcomes), reverse=self.slos[i].op in (">=", ">"))
        return values[self.needed - 1] if values else 0.0


@dataclass
class Evaluator:
    """Replays a workload at given sizes (all seeds), caching every (size, seed, scale).

    ``policy`` defaults to ``"gangopt"`` (CP-SAT, ``config.time_limit`` of work per round), as
    ``gangopt capacity`` does: the cluster is sized for the scheduler gangopt runs. It used to
    default to ``"greedy"``, so a library caller got greedy's answer where the CLI gave
    gangopt's (issue 16). The price, measured with ``gangopt capacity`` (the same
    Evaluator; 2 shared cores, one worker process per core): on the 300-job CSV of
    docs/capacity/walkthrough-jobs.csv, 34 s of CPU against greedy's 18 s (1.9x; another run
    41 s against 19 s; 12 replays each, the same answer, 15 nodes); on the first 1,000 jobs of the Philly sample, whose
    rounds are more contended, 77 s against 9.4 s (8x, the same answer, 8 nodes; see
    docs/capacity-planning.md). Pass ``policy="greedy"`` for a fast first estimate, or the
    peer you will run; an unknown name raises ``ValueError`` listing the known ones here, not
    in the first replay."""

    workload: Workload
    slos: tuple[SLO, ...]
    policy: str = "gangopt"
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    config: SimConfig = field(default_factory=SimConfig)
    seeds: tuple[int, ...] = (0,)
    seed_share: float = 1.0
    jitter: float = 600.0
    workers: int | None = 1
    dask: Any = None
    progress: bool = False
    keep_timeline: bool = False
    cache: dict[tuple[int, int, float], Outcome] = field(default_factory=dict)
    simulations: int = 0
    on_done: Callable[[Outcome], None] | None = None
    """Hears each replay as it finishes, in any order (``capacity --brute-force`` prints each
    size's verdict as soon as its seeds are in)."""

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("at least one seed is needed")
        if not 0 < self.seed_share <= 1:
            raise ValueError(f"seed_share must be in (0, 1], got {self.seed_share}")
        if self.policy not in POLICY_NAMES:
            raise ValueError(f"unknown policy {self.policy!r} (known: {', '.join(POLICY_NAMES)})")

    @property
    def needed(self) -> int:
        return max(1, math.ceil(self.seed_share * len(self.seeds) - 1e-9))

    def task(self, nodes: int, seed: int, scale: float = 1.0) -> Task:
        return Task(
            self.policy, nodes, seed, self.cluster, self.config, self.jitter, scale, self.slos, self.keep_timeline
        )

    def evaluate(self, sizes: Sequence[int], scale: float = 1.0) -> list[SizeVerdict]:
        """Verdicts for ``sizes`` (replays of all of them run together)."""
        todo = [
            self.task(n, s, scale) for n in dict.fromkeys(sizes) for s in self.seeds if (n, s, scale) not in self.cache
        ]
        outcomes = run_tasks(
            todo, self.workload, workers=self.workers, dask=self.dask, progress=self.progress, on_done=self.on_done
        )
        for out in outcomes:
            self.cache[(out.task.nodes, out.task.seed, scale)] = out
        self.simulations += len(todo)
        return [SizeVerdict(n, [self.cache[(n, s, scale)] for s in self.seeds], self.slos, self.needed) for n in sizes]

    def verdicts(self, scale: float = 1.0) -> list[SizeVerdict]:
        """Every size evaluated so far at ``scale``, smallest first."""
        sizes = sorted({n for (n, _, f) in self.cache if f == scale})
        return self.evaluate(sizes, scale)

    @property
    def parallel_sizes(self) -> int:
        """Sizes worth trying per step: the workers the seeds leave idle."""
        if self.dask is not None:
            return 3
        workers = self.workers if self.workers is not None else _cpus()
        return max(1, workers // len(self.seeds))


def _cpus() -> int:
    return default_workers()


# ----------------------------------------------------------------------------- sizing


@dataclass
class SizingResult:
    """The answer of :func:`size_cluster` and how it was found."""

    nodes: int | None
    """Smallest size meeting every SLO, or None if none in range does."""
    lower_bound: int
    min_nodes: int
    max_nodes: int
    evaluated: list[SizeVerdict]
    simulations: int
    non_monotone: list[int] = field(default_factory=list)
    """Brute force only: sizes above the answer that fail."""


def largest_job_nodes(workload: Workload, spec: ClusterSpec) -> int:
    """Fewest nodes of the varied type on which every job fits at its minimum size (by GPUs,
    ignoring what the fixed types add): a lower bound for any SLO that needs every job to start."""
    gpus = spec.varied.gpus
    if gpus <= 0:
        return 1
    need = 1
    for job in workload.jobs:
        per_pod = sorted(r.requests.get("gpu", 0) / 1000.0 for r in job.roles for _ in range(r.replicas))
        pods = per_pod[: job.minimum]
        # whole pods per node: a node holds floor(gpus / pod) pods of the largest size
        largest = max(pods, default=0.0)
        per_node = math.floor(gpus / largest) if largest > 0 else len(pods) or 1
        if largest > gpus:
            continue  # never fits any size; the SLO will say so
        need = max(need, math.ceil(len(pods) / max(1, per_node)))
    return need


def load_nodes(workload: Workload, spec: ClusterSpec) -> int:
    """Nodes of the varied type whose GPUs equal the workload's average demand over its
    arrival window (GPU-seconds / window): below it the queue grows for the whole window.
    Not a hard bound (an SLO may tolerate that), only where the search starts probing."""
    gpus = spec.varied.gpus
    if gpus <= 0 or len(workload.jobs) < 2:
        return 1
    arrivals = [j.arrival for j in workload.jobs]
    window = max(arrivals) - min(arrivals)
    if window <= 0:
        return 1
    demand = sum(j.gpus() * j.duration for j in workload.jobs) / window
    return max(1, math.ceil(demand / gpus))


def size_cluster(
    ev: Evaluator, min_nodes: int = 1, max_nodes: int = 1024, on_step: Callable[[list[SizeVerdict]], None] | None = None
) -> SizingResult:
    """Smallest size in ``[min_nodes, max_nodes]`` meeting the SLOs (see the module docstring)."""
    if not 1 <= min_nodes <= max_nodes:
        raise ValueError(f"need 1 <= min_nodes <= max_nodes, got {min_nodes}, {max_nodes}")
    bound = largest_job_nodes(ev.workload, ev.cluster)
    left = min_nodes - 1  # largest size known to fail (min_nodes - 1 by assumption)
    start = max(bound, load_nodes(ev.workload, ev.cluster))
    probe = min(max(min_nodes, start), max_nodes)  # the bounds only say where probing starts
    right: int | None = None  # smallest size known to meet
    while right is None:
        (v,) = ev.evaluate([probe])
        if on_step:
            on_step([v])
        if v.meets:
            right = probe
        elif probe >= max_nodes:
            return SizingResult(None, bound, min_nodes, max_nodes, ev.verdicts(), ev.simulations)
        else:
            left = probe
            probe = min(max_nodes, probe * 2)
    right = _bisect(ev, left, right, on_step)
    return SizingResult(right, bound, min_nodes, max_nodes, ev.verdicts(), ev.simulations)


def _bisect(ev: Evaluator, left: int, right: int, on_step: Callable[[list[SizeVerdict]], None] | None) -> int:
    """Smallest meeting size in ``(left, right]`` given ``left`` fails and ``right`` meets."""
    while right - left > 1:
        k = min(ev.parallel_sizes, right - left - 1)
        points = sorted({left + round((right - left) * (i + 1) / (k + 1)) for i in range(k)} - {left, right})
        verdicts = ev.evaluate(points)
        if on_step:
            on_step(verdicts)
        for v in verdicts:
            if v.meets:
                right = v.nodes
                break
            left = v.nodes
    return right


def brute_force(ev: Evaluator, min_nodes: int, max_nodes: int) -> SizingResult:
    """Evaluate every size in range; the answer is the smallest meeting one."""
    verdicts = ev.evaluate(list(range(min_nodes, max_nodes + 1)))
    meeting = [v.nodes for v in verdicts if v.meets]
    answer = meeting[0] if meeting else None
    non_monotone = [v.nodes for v in verdicts if answer is not None and v.nodes > answer and not v.meets]
    bound = largest_job_nodes(ev.workload, ev.cluster)
    return SizingResult(answer, bound, min_nodes, max_nodes, ev.verdicts(), ev.simulations, non_monotone)


# ----------------------------------------------------------------------------- peak snapshot


def peak_jobs(workload: Workload) -> tuple[float, list[Job]]:
    """(time, jobs) at the instant of largest GPU demand if every job started on arrival and
    ran for its duration (an infinite cluster)."""
    events: list[tuple[float, int, float, int]] = []
    for i, job in enumerate(workload.jobs):
        g = job.gpus()
        events.append((job.arrival, 1, g, i))
        events.append((job.arrival + job.duration, 0, -g, i))
    events.sort()  # at equal times, departures (0) before arrivals (1)
    load = best = 0.0
    best_time = 0.0
    for t, _, delta, _ in events:
        load += delta
        if load > best + 1e-9:
            best, best_time = load, t
    active = [j for j in workload.jobs if j.arrival <= best_time < j.arrival + j.duration]
    return best_time, active


def peak_round(cluster: Cluster, jobs: Sequence[Job], time_limit: float = 10.0, seed: int = 0) -> Round:
    """One round with ``jobs`` all pending at their full size range on an empty ``cluster``."""
    pending = [
        PendingGang(
            name=j.name,
            queue=j.queue,
            priority=j.priority,
            roles=j.roles,
            min_members=j.min_members,
            max_members=j.max_members,
            topology=j.topology,
            submit_time=j.arrival,
        )
        for j in jobs
    ]
    policy = Policy(time_limit=time_limit, seed=seed, preemption=False)
    return Round(cluster=cluster, pending=pending, policy=policy)


def peak_fits(cluster: Cluster, jobs: Sequence[Job], solver: PackSolver = "cpsat", time_limit: float = 10.0) -> bool:
    """Does one round on ``cluster`` admit every job of the peak snapshot?"""
    if not jobs:
        return True
    if not cluster.nodes:
        return False
    plan = solve(peak_round(cluster, jobs, time_limit), solver=solver)
    return len(plan.admitted) == len(jobs)


def peak_reference(
    workload: Workload,
    spec: ClusterSpec,
    start: int,
    max_nodes: int,
    solver: PackSolver = "cpsat",
    time_limit: float = 10.0,
) -> int | None:
    """A size on which the peak snapshot fits, to compact from: ``max(start, peak GPUs / node
    GPUs)``, doubled until it fits (None past ``max_nodes``)."""
    _, jobs = peak_jobs(workload)
    gpus = spec.varied.gpus
    need = math.ceil(sum(j.gpus() for j in jobs) / gpus) if gpus > 0 else 1
    size = max(start, need, 1)
    while size <= max_nodes:
        if peak_fits(spec.build(size), jobs, solver, time_limit):
            return size
        size *= 2
    return None


# ----------------------------------------------------------------------------- compaction


@dataclass
class CompactionResult:
    mode: FitsMode
    nodes_total: int
    counts: list[int | None]
    """Per permutation, fewest nodes that still fit (None: the full cluster does not fit)."""

    @property
    def fitting(self) -> list[int]:
        return sorted(c for c in self.counts if c is not None)

    def summary(self) -> str:
        if not self.fitting:
            return f"compaction ({self.mode}): the full {self.nodes_total}-node cluster does not fit"
        c = self.fitting
        median = c[len(c) // 2]
        return (
            f"compaction ({self.mode}, {len(self.counts)} permutations): min {c[0]}, median {median}, max {c[-1]} "
            f"of {self.nodes_total} nodes ({median / self.nodes_total:.0%} at the median)"
        )


def compaction(cluster: Cluster, fits: Callable[[Cluster], bool], repeats: int = 5, seed: int = 0) -> list[int | None]:
    """Per random node permutation, the shortest prefix of nodes on which ``fits`` holds."""
    out: list[int | None] = []
    cache: dict[tuple[str, ...], bool] = {}

    def check(nodes: list[Any]) -> bool:
        key = tuple(sorted(n.name for n in nodes))
        if key not in cache:
            cache[key] = fits(cluster.model_copy(update={"nodes": nodes}))
        return cache[key]

    for r in range(repeats):
        order = list(cluster.nodes)
        random.Random(seed * 1_000_003 + r).shuffle(order)
        if not check(order):
            out.append(None)
            continue
        left, right = 0, len(order)  # prefix `left` fails (0 nodes fit nothing non-empty), `right` fits
        if check([]):
            out.append(0)
            continue
        while right - left > 1:
            mid = (left + right) // 2
            if check(order[:mid]):
                right = mid
            else:
                left = mid
        out.append(right)
    return out


def peak_compaction(
    workload: Workload,
    cluster: Cluster,
    repeats: int = 5,
    seed: int = 0,
    solver: PackSolver = "cpsat",
    time_limit: float = 10.0,
) -> CompactionResult:
    _, jobs = peak_jobs(workload)
    counts = compaction(cluster, lambda c: peak_fits(c, jobs, solver, time_limit), repeats, seed)
    return CompactionResult("peak", len(cluster.nodes), counts)


def replay_compaction(ev: Evaluator, nodes: int, repeats: int = 1, seed: int = 0) -> CompactionResult:
    """Compaction with ``fits`` = the SLOs are met. For the homogeneous parametric clusters of
    :class:`ClusterSpec`, node order only matters through rack positions, so this is the
    sizing search restricted to prefixes of permuted node lists; it replays (expensive)."""
    full = ev.cluster.build(nodes)

    def fits(cluster: Cluster) -> bool:
        met = 0
        for s in ev.seeds:
            config = dataclasses.replace(ev.config, seed=s, progress=False)
            wl = variant(ev.workload, s, ev.jitter)
            res = simulate(wl, cluster, make_policy(ev.policy, wl), config, name=ev.policy, impossible="keep")
            met += all(slo.met(slo.measure(res)) for slo in ev.slos)
        return met >= ev.needed

    return CompactionResult("replay", nodes, compaction(full, fits, repeats, seed))


# ----------------------------------------------------------------------------- inflation


@dataclass
class InflationResult:
    mode: FitsMode
    nodes: int
    factor: float | None
    """Largest arrival compression that still fits / meets (None: not even the smallest tried)."""
    tried: list[tuple[float, bool]]

    def summary(self) -> str:
        if self.factor is None:
            low = min(f for f, _ in self.tried)
            return f"inflation ({self.mode}): {self.nodes} nodes fail even with arrivals stretched x{1 / low:g}"
        verb = "still fits" if self.mode == "peak" else "still meets the SLOs"
        return f"inflation ({self.mode}): arrivals compressed x{self.factor:.2f} {verb} on {self.nodes} nodes"


def inflation(
    ok: Callable[[float], bool], max_factor: float = 16.0, tolerance: float = 0.05, min_factor: float = 1 / 16
) -> tuple[float | None, list[tuple[float, bool]]]:
    """Largest ``f`` in ``[min_factor, max_factor]`` with ``ok(f)``, assuming monotone (a geometric
    bracket by doubling / halving, then geometric bisection until ``hi / lo <= 1 + tolerance``)."""
    tried: list[tuple[float, bool]] = []

    def test(f: float) -> bool:
        result = ok(f)
        tried.append((f, result))
        return result

    if test(1.0):
        lo, hi = 1.0, None
        f = 2.0
        while f <= max_factor:
            if test(f):
                lo = f
                f *= 2
            else:
                hi = f
                break
        if hi is None:
            return lo, tried
    else:
        hi, lo_found = 1.0, None
        f = 0.5
        while f >= min_factor:
            if test(f):
                lo_found = f
                break
            hi = f
            f /= 2
        if lo_found is None:
            return None, tried
        lo = lo_found
    while hi / lo > 1 + tolerance:
        mid = math.sqrt(lo * hi)
        if test(mid):
            lo = mid
        else:
            hi = mid
    return lo, tried


def slo_inflation(
    ev: Evaluator,
    nodes: int,
    max_factor: float = 16.0,
    tolerance: float = 0.05,
    on_try: Callable[[float, SizeVerdict], None] | None = None,
) -> InflationResult:
    """Largest arrival compression at which ``nodes`` still meet the SLOs (replays);
    ``on_try(factor, verdict)`` hears each factor's verdict as soon as it is known (the CLI
    prints it and advances its progress bar)."""

    def ok(f: float) -> bool:
        verdict = ev.evaluate([nodes], scale=f)[0]
        if on_try is not None:
            on_try(f, verdict)
        return verdict.meets

    factor, tried = inflation(ok, max_factor, tolerance)
    return InflationResult("replay", nodes, factor, tried)


def peak_inflation(
    workload: Workload,
    cluster: Cluster,
    max_factor: float = 16.0,
    tolerance: float = 0.05,
    solver: PackSolver = "cpsat",
    time_limit: float = 10.0,
) -> InflationResult:
    def ok(f: float) -> bool:
        _, jobs = peak_jobs(variant(workload, scale=f))
        return peak_fits(cluster, jobs, solver, time_limit)

    factor, tried = inflation(ok, max_factor, tolerance)
    return InflationResult("peak", len(cluster.nodes), factor, tried)
