"""Many simulations at once: policies x cluster sizes x seeds, on local processes or on Dask.

A :class:`Task` is one simulation: a policy, a node count of a :class:`ClusterSpec`, a seed
and a workload variant (arrival jitter, arrival scale). :func:`run_tasks` runs a list of
tasks and returns one :class:`Outcome` each (metrics, SLO values, waits, a thinned
timeline), in task order:

* ``workers=1``: in this process, one after the other (no start-up cost; tests, debugging);
* ``workers=N`` (default: the CPU count): a :class:`concurrent.futures.ProcessPoolExecutor`
  with N processes started with ``spawn`` (OR-Tools runs threads; forking a process that
  holds threads can deadlock). The workload is sent once per process, not once per task;
* ``dask=ADDRESS`` (or a ``distributed.Client``): the tasks go to an existing Dask cluster.
  The workload is scattered once to every worker.

Why Dask and not Ray: both can run a map of independent Python calls over a cluster, but
Dask's ``distributed`` is pure Python from PyPI (Ray ships a large binary wheel with its own
object store and raylet processes, and has no wheel for every platform and Python version),
starts in-process for tests (``LocalCluster(processes=False)``), and accepts plain functions
and pickled pydantic objects; we need nothing more than ``submit`` and ``as_completed``.
``pip install "gangopt[dask]"`` installs it; the core package does not need it.

Seeds. Seed 0 replays the workload exactly as given. Seed ``s > 0`` moves every arrival by a
uniform draw in ``[-jitter, +jitter]`` seconds (a sha256 draw per job name, so independent
of job order and Python version; arrivals stay >= 0; a deadline moves with its arrival), and
is also the policy's seed (CP-SAT's random seed). Jitter keeps the trace's load and job mix
and perturbs its timing, so an answer that holds over several seeds does not hinge on a
lucky interleaving of arrivals.

Arrival scale ``f`` (workload inflation): arrival ``a`` becomes ``a0 + (a - a0) / f``, with
``a0`` the first arrival: ``f = 2`` submits the same jobs in half the time (twice the load).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import multiprocessing
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from gangopt.replay.clusters import GPU_MODEL_LABEL, parametric_cluster
from gangopt.replay.metrics import Metrics, compute_metrics
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import PROGRESS_SMOOTHING, SimConfig, SimulationResult, TimelinePoint, simulate
from gangopt.replay.slo import SLO, wait
from gangopt.replay.workload import Job, Workload, unit_draw
from gangopt.schema import Cluster, Node

# ----------------------------------------------------------------------------- clusters by size


@dataclass(frozen=True)
class NodeType:
    """One node shape of a parametric cluster (see :func:`gangopt.replay.clusters.parametric_cluster`)."""

    name: str = "node"
    gpus: int = 8
    cpu: str = "96"
    memory: str = "1Ti"
    gpu_model: str = "H100"
    rack_size: int = 16

    def describe(self) -> str:
        return f"{self.gpus}x{self.gpu_model}, {self.cpu} CPUs, {self.memory}, racks of {self.rack_size}"


_SHAPE_KEYS = {
    "gpu": "gpus",
    "gpus": "gpus",
    "cpu": "cpu",
    "memory": "memory",
    "model": "gpu_model",
    "rack": "rack_size",
}


def parse_node_shape(text: str) -> NodeType:
    """``"[NAME:]gpu=8,cpu=96,memory=1Ti,model=H100,rack=16"`` -> :class:`NodeType`
    (every key optional; defaults: 8 GPUs, 96 CPUs, 1Ti, H100, racks of 16)."""
    name, sep, rest = text.partition(":")
    if not sep:
        name, rest = "node", text
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name):
        raise ValueError(f"node type name {name!r} must be lowercase letters, digits and '-'")
    values: dict[str, Any] = {}
    for term in filter(None, (t.strip() for t in rest.split(","))):
        key, eq, value = term.partition("=")
        if not eq or key not in _SHAPE_KEYS:
            raise ValueError(f"node shape term {term!r}: expected KEY=VALUE with KEY in {sorted(set(_SHAPE_KEYS))}")
        field_name = _SHAPE_KEYS[key]
        if field_name in ("gpus", "rack_size"):
            try:
                values[field_name] = int(value)
            except ValueError:
                raise ValueError(f"node shape term {term!r}: {key} must be an integer") from None
        else:
            values[field_name] = value
    shape = NodeType(name=name, **values)
    if shape.gpus < 0 or shape.rack_size < 1:
        raise ValueError(f"node shape {text!r}: gpu must be >= 0 and rack >= 1")
    return shape


@dataclass(frozen=True)
class ClusterSpec:
    """A cluster family indexed by one node count: ``vary`` gets the count, the other types
    have their ``fixed`` counts. One type: a plain :func:`parametric_cluster`. Several types:
    each builds its own racks, blocks and zones (names prefixed with the type's name) and
    keeps its ``gpu.model`` label, so roles can select a type."""

    types: tuple[NodeType, ...] = (NodeType(),)
    fixed: tuple[tuple[str, int], ...] = ()
    vary: str = "node"

    def __post_init__(self) -> None:
        names = [t.name for t in self.types]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate node type names {names}")
        if self.vary not in names:
            raise ValueError(f"varied node type {self.vary!r} is not one of {names}")
        for name, count in self.fixed:
            if name not in names or name == self.vary:
                raise ValueError(f"fixed count for {name!r}: not a node type other than the varied {self.vary!r}")
            if count < 0:
                raise ValueError(f"fixed count for {name!r} must be >= 0")

    @property
    def varied(self) -> NodeType:
        return next(t for t in self.types if t.name == self.vary)

    def counts(self, nodes: int) -> dict[str, int]:
        fixed = dict(self.fixed)
        return {t.name: nodes if t.name == self.vary else fixed.get(t.name, 0) for t in self.types}

    def build(self, nodes: int) -> Cluster:
        """The cluster with ``nodes`` nodes of the varied type."""
        counts = self.counts(nodes)
        if len(self.types) == 1:
            t = self.types[0]
            return parametric_cluster(nodes, t.gpus, t.cpu, t.memory, t.gpu_model, rack_size=t.rack_size)
        out: list[Node] = []
        levels: list[str] = []
        for t in self.types:
            part = parametric_cluster(counts[t.name], t.gpus, t.cpu, t.memory, t.gpu_model, rack_size=t.rack_size)
            levels = part.topology_levels
            for node in part.nodes:
                topology = {level: f"{t.name}-{domain}" for level, domain in node.topology.items()}
                labels = {**node.labels, "gangopt.io/node-type": t.name}
                if t.gpus > 0:
                    labels[GPU_MODEL_LABEL] = t.gpu_model
                out.append(
                    node.model_copy(update={"name": f"{t.name}-{node.name}", "topology": topology, "labels": labels})
                )
        return Cluster(topology_levels=levels, nodes=out)

    def describe(self, nodes: int) -> str:
        counts = self.counts(nodes)
        return " + ".join(f"{counts[t.name]} x {t.name} ({t.describe()})" for t in self.types)


# ----------------------------------------------------------------------------- workload variants


def variant(workload: Workload, seed: int = 0, jitter: float = 0.0, scale: float = 1.0) -> Workload:
    """The workload a task replays (see the module docstring: seeds jitter, scale compresses)."""
    if scale <= 0:
        raise ValueError(f"arrival scale must be > 0, got {scale}")
    if (seed == 0 or jitter <= 0) and scale == 1.0:
        return workload
    a0 = min((j.arrival for j in workload.jobs), default=0.0)
    jobs: list[Job] = []
    for job in workload.jobs:
        arrival = a0 + (job.arrival - a0) / scale
        if seed != 0 and jitter > 0:
            arrival = max(0.0, arrival + (2.0 * unit_draw(seed, job.name, "arrival") - 1.0) * jitter)
        update: dict[str, Any] = {"arrival": arrival}
        if job.deadline is not None:
            update["deadline"] = arrival + (job.deadline - job.arrival)
        jobs.append(job.model_copy(update=update))
    note = f"variant: seed {seed}, arrival jitter +-{jitter:g} s, arrivals compressed x{scale:g}"
    return workload.model_copy(update={"jobs": jobs, "assumptions": [*workload.assumptions, note]})


# ----------------------------------------------------------------------------- tasks and outcomes


@dataclass(frozen=True)
class Task:
    """One simulation of a sweep."""

    policy: str
    nodes: int
    seed: int = 0
    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    config: SimConfig = field(default_factory=SimConfig)
    jitter: float = 0.0
    scale: float = 1.0
    slos: tuple[SLO, ...] = ()
    keep_timeline: bool = False
    """Keep the timeline and every job's wait (for plots); otherwise only metrics and SLO values."""


@dataclass
class Outcome:
    """What one task produced (small enough to send back from a worker)."""

    task: Task
    metrics: Metrics
    slo_values: list[float]
    waits: list[float] = field(default_factory=list)
    timeline: list[TimelinePoint] = field(default_factory=list)

    @property
    def slo_met(self) -> list[bool]:
        return [s.met(v) for s, v in zip(self.task.slos, self.slo_values, strict=True)]


MAX_TIMELINE_POINTS = 4000


def thin_timeline(timeline: Sequence[TimelinePoint], limit: int = MAX_TIMELINE_POINTS) -> list[TimelinePoint]:
    """At most about ``limit`` points, keeping in each bucket the point of the largest queue
    (plots then show the peaks rather than an average that hides them)."""
    if len(timeline) <= limit:
        return list(timeline)
    step = math.ceil(len(timeline) / limit)
    out = [
        max(timeline[i : i + step], key=lambda p: (p.pending, p.gpus_allocated)) for i in range(0, len(timeline), step)
    ]
    return [dataclasses.replace(p, time=timeline[i * step].time) for i, p in enumerate(out)]


def run_task(task: Task, workload: Workload) -> Outcome:
    """Run one task in this process."""
    wl = variant(workload, task.seed, task.jitter, task.scale)
    config = dataclasses.replace(task.config, seed=task.seed, progress=False)
    result = simulate(
        wl, task.cluster.build(task.nodes), make_policy(task.policy, wl), config, name=task.policy, impossible="keep"
    )
    return outcome(task, result)


def outcome(task: Task, result: SimulationResult) -> Outcome:
    values = [s.measure(result) for s in task.slos]
    out = Outcome(task, compute_metrics(result), values)
    if task.keep_timeline:
        out.waits = [wait(j, result.end_time) for j in result.jobs if j.state != "not_arrived"]
        out.timeline = thin_timeline(result.timeline)
    return out


_WORKLOAD: Workload | None = None


def _init_worker(workload: Workload) -> None:
    global _WORKLOAD
    _WORKLOAD = workload


def _run_in_worker(task: Task) -> Outcome:
    assert _WORKLOAD is not None, "worker started without a workload"
    return run_task(task, _WORKLOAD)


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


Progress = Callable[[Outcome], None]


def run_tasks(
    tasks: Sequence[Task],
    workload: Workload,
    *,
    workers: int | None = None,
    dask: Any = None,
    progress: bool = False,
    on_done: Progress | None = None,
) -> list[Outcome]:
    """Run ``tasks`` (see the module docstring for where); results in task order.

    ``dask``: a scheduler address (``"tcp://host:8786"``) or a ``distributed.Client``.
    ``on_done`` is called in this process as each task finishes (any order).
    """
    if not tasks:
        return []
    bar = _bar(len(tasks)) if progress else None
    results: list[Outcome | None] = [None] * len(tasks)

    def done(i: int, out: Outcome) -> None:
        results[i] = out
        if bar is not None:
            bar.update(1)
        if on_done is not None:
            on_done(out)

    try:
        if dask is not None:
            _run_dask(tasks, workload, dask, done)
        else:
            n = min(workers or default_workers(), len(tasks))
            if n <= 1:
                for i, task in enumerate(tasks):
                    done(i, run_task(task, workload))
            else:
                context = multiprocessing.get_context("spawn")
                with ProcessPoolExecutor(n, mp_context=context, initializer=_init_worker, initargs=(workload,)) as pool:
                    futures: dict[Future[Outcome], int] = {
                        pool.submit(_run_in_worker, t): i for i, t in enumerate(tasks)
                    }
                    for future in as_completed(futures):
                        done(futures[future], future.result())
    finally:
        if bar is not None:
            bar.close()
    return [r for r in results if r is not None]


def _run_dask(tasks: Sequence[Task], workload: Workload, dask: Any, done: Callable[[int, Outcome], None]) -> None:
    try:
        distributed: Any = importlib.import_module("distributed")
    except ImportError:  # pragma: no cover - depends on the installation
        raise RuntimeError('--dask needs the Dask extra: pip install "gangopt[dask]"') from None
    client: Any = dask if isinstance(dask, distributed.Client) else distributed.Client(dask)
    try:
        shared = client.scatter(workload, broadcast=True)
        futures = [client.submit(run_task, t, shared, pure=False) for t in tasks]
        index = {f.key: i for i, f in enumerate(futures)}
        for future in distributed.as_completed(futures):
            done(index[future.key], future.result())
    finally:
        if client is not dask:
            client.close()


def _bar(total: int) -> Any:
    import sys

    from tqdm import tqdm

    return tqdm(
        total=total, unit="sim", desc="simulations", file=sys.stderr, mininterval=0.5, smoothing=PROGRESS_SMOOTHING
    )


# ----------------------------------------------------------------------------- sweeps


def sweep_tasks(
    policies: Iterable[str],
    sizes: Iterable[int],
    seeds: Iterable[int],
    *,
    cluster: ClusterSpec | None = None,
    config: SimConfig | None = None,
    jitter: float = 0.0,
    slos: Sequence[SLO] = (),
    keep_timeline: bool = True,
) -> list[Task]:
    """Every (policy, size, seed) combination, policies outermost."""
    spec = cluster or ClusterSpec()
    cfg = config or SimConfig()
    return [
        Task(p, n, s, spec, cfg, jitter, 1.0, tuple(slos), keep_timeline)
        for p in policies
        for n in sizes
        for s in seeds
    ]


def sweep(
    workload: Workload,
    policies: Iterable[str],
    sizes: Iterable[int],
    seeds: Iterable[int] = (0,),
    *,
    cluster: ClusterSpec | None = None,
    config: SimConfig | None = None,
    jitter: float = 0.0,
    slos: Sequence[SLO] = (),
    workers: int | None = None,
    dask: Any = None,
    progress: bool = False,
    on_done: Progress | None = None,
) -> list[Outcome]:
    """Run policies x sizes x seeds; see :func:`run_tasks` for where they run and ``on_done``."""
    tasks = sweep_tasks(policies, sizes, seeds, cluster=cluster, config=config, jitter=jitter, slos=slos)
    return run_tasks(tasks, workload, workers=workers, dask=dask, progress=progress, on_done=on_done)


def sweep_rows(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """One flat row per outcome (the sweep's CSV)."""
    rows = []
    for o in outcomes:
        m = o.metrics
        row: dict[str, Any] = {
            "policy": o.task.policy,
            "nodes": o.task.nodes,
            "gpus": m.gpus_total,
            "seed": o.task.seed,
            "scale": o.task.scale,
            "jobs": m.arrived,
            "finished": m.finished,
            "unstarted": m.unstarted,
            "wait_mean": m.queueing_delay.mean,
            "wait_p50": m.queueing_delay.p50,
            "wait_p95": m.queueing_delay.p95,
            "wait_p99": m.queueing_delay.p99,
            "wait_max": m.queueing_delay.max,
            "jct_p50": m.jct.p50,
            "utilization": m.utilization_mean,  # over this run's own span
            "utilization_window": m.utilization_window,  # over the trace's span: compare these
            "gpu_hours_delivered": m.gpu_hours_delivered,
            "idle_needed_gpu_hours": m.idle_needed_gpu_hours,
            "preemptions": m.preemptions,
            "lost_gpu_hours": m.lost_gpu_hours,
            "deadline_misses": m.deadline_misses,
            "solver_seconds_total": m.solver_seconds_total,
            "wall_seconds": m.wall_seconds,
        }
        for slo, value, ok in zip(o.task.slos, o.slo_values, o.slo_met, strict=True):
            row[slo.label] = value
            row[f"{slo.label} ok"] = ok
        rows.append(row)
    return rows
