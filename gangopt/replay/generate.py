"""Seeded benchmark rounds: busy 8-GPU clusters and queues sized like real traces (issue 3).

A round is built in four steps, every random choice drawn from one ``random.Random(seed)``
so the same :class:`Spec` always gives the same round, on any machine:

1. **cluster** -- :func:`gangopt.replay.clusters.parametric_cluster`: 8-GPU nodes (96 CPUs, 1 TiB) in
   racks of 16 (up to 1,024 nodes) or 32 nodes, 8 racks per block, 4 blocks per zone.
2. **running gangs** fill the cluster up to a busy share (60-90 % of the GPUs, drawn from
   the seed; 80-90 % for contention rounds) the way a bin-packing scheduler leaves it:
   multi-node gangs on the best-fitting rack, single-pod gangs best-fit on the fullest node
   (15 % of them on a random node that fits), then some gangs *finish* (random ones; mostly
   single-pod ones for contention rounds) so the free GPUs end up scattered. Priorities
   0 / 5 / 10; a share are elastic (can shrink), production gangs are sometimes not
   preemptible, and every gang has a time since its last checkpoint.
3. **pending gangs** of 1 to 1,024 GPUs: sizes from the Microsoft Philly trace
   (``gangopt/data/philly_sizes.json``, made by ``scripts/size_mix.py``), see :func:`size_mix`.
   A share are elastic, multi-node ones ask for a required or preferred rack/block.
4. **policy**: preemption on, ``now`` = the newest submit time, secondary terms searched to a
   0.5 % gap (the scale issue's M target; tiers are always searched to optimality).

The size mix is the one modelling choice that needs care: Philly (2017) is 93 % one-GPU
jobs with at most 128 GPUs, so a queue drawn from its job counts would ask for a small
fraction of the free GPUs and never exceed 128. The generator therefore

- stretches the multi-node tail: a job of 16 GPUs or more is multiplied by 1, 2, 4 or 8
  (uniformly), so sizes reach 1,024 GPUs as on today's clusters (sizes above half the
  cluster are dropped);
- tilts the job-count mix toward large jobs, ``P(s) ~ jobs(s) * s**alpha``, with ``alpha``
  chosen (bisection) so that the expected demand of the queue is ``demand`` times the free
  GPUs (0.8 by default, 2.0 for contention rounds). ``alpha = 0`` is Philly's job mix,
  ``alpha = 1`` its mix weighted by GPUs requested. A queue snapshot holds more big jobs
  than the arrival stream anyway (they wait longer).

Running gangs follow the same stretch, with Philly's *running* mix (jobs of size s running
at an instant ~ GPU-hours(s) / s, by Little's law) under the same tilt.

Nothing here reads the traces at run time: only the committed table.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

import numpy as np

from gangopt.replay.clusters import parametric_cluster
from gangopt.schema import Cluster, Round

GPUS_PER_NODE = 8
CPU_PER_GPU = (8, 12)
"""CPUs per GPU a pod asks (96-CPU nodes: 12 per GPU is the whole node's share)."""
MEMORY_PER_GPU_GI = (64, 128)
"""GiB per GPU a pod asks (1 TiB nodes: 128 GiB per GPU is the whole node's share)."""
PRIORITIES = ((0, 0.45), (5, 0.35), (10, 0.20))
"""Priority tiers (batch, normal, production) and their shares, for running and pending gangs."""
TAIL_FROM = 16
"""Jobs of at least this many GPUs (more than one node) get the tail stretch."""
STRETCH = (1, 2, 4, 8)
MAX_GANG_GPUS = 1024
HORIZON = 4 * 3600.0
"""Pending gangs were submitted within the last four hours."""

SIZES: dict[str, tuple[int, int]] = {"S": (128, 50), "M": (1024, 200), "L": (4096, 1000), "XL": (16384, 2000)}
"""Issue 3's rounds: name -> (nodes, pending gangs)."""
GAP_TARGETS: dict[str, float] = {"S": 0.0, "M": 0.005, "L": 0.01, "XL": 0.02}
"""Issue 3's gap target per size, written into each round's ``policy.gap_limit``."""


@dataclass(frozen=True)
class Spec:
    """What to generate. ``None`` fields are drawn from the seed (``busy``) or defaulted."""

    nodes: int
    gangs: int
    seed: int = 0
    contention: bool = False
    fragmented: bool = False
    """Running gangs where they happened to land (random nodes, not bin-packed): free GPUs
    scattered 1-7 per node, no node wholly free; 30 % of the pending gangs select a fabric
    label. :data:`FRAGMENTED_SHARES` are the issue-13 mix of the other shares. The running
    gangs follow Philly's job-count mix untilted (:attr:`running_mix`), as issue 13's rounds
    do: 68,536 running gangs at 16,384 nodes busy 0.75 (the issue: about 57 k), where the
    pending mix's tilt gave 6,382 (stop 26's rounds; the fragmented figures before stop 27 are
    on those)."""
    running_mix: Literal["jobs", "tilted"] | None = None
    """How the running gangs' sizes are drawn: ``jobs``, Philly's job-count mix untilted (93 %
    single-GPU: a busy cluster of many small jobs); ``tilted``, Philly's GPU-hour mix tilted
    like the pending queue (fewer, larger gangs). Default: ``jobs`` for fragmented rounds,
    else ``tilted``."""
    busy: float | None = None
    """Share of GPUs running before the round (default: uniform 0.6-0.9, contention 0.8-0.9)."""
    demand: float | None = None
    """Expected pending GPU demand / free GPUs (default 0.8, contention 2.0)."""
    rack_size: int | None = None
    """Nodes per rack (default 16 up to 1,024 nodes, else 32)."""
    elastic_share: float = 0.15
    required_share: float = 0.4
    """Of the multi-pod pending gangs: share with a required rack/block."""
    preferred_share: float = 0.4
    """Of the multi-pod pending gangs: share with a preferred rack/block."""
    time_limit: float = 10.0
    gap_limit: float = 0.005

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.gangs < 0:
            raise ValueError(f"gangs must be >= 0, got {self.gangs}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.busy is not None and not 0.0 <= self.busy < 1.0:
            raise ValueError(f"busy must be in [0, 1), got {self.busy}")
        if self.demand is not None and self.demand <= 0:
            raise ValueError(f"demand must be > 0, got {self.demand}")
        if self.rack_size is not None and self.rack_size < 1:
            raise ValueError(f"rack_size must be >= 1, got {self.rack_size}")
        if self.time_limit <= 0:
            raise ValueError(f"time_limit must be > 0, got {self.time_limit}")
        if not 0.0 <= self.gap_limit <= 1.0:
            raise ValueError(f"gap_limit must be in [0, 1], got {self.gap_limit}")


FRAGMENTED_SHARES = (0.2, 0.3, 0.4)
"""Issue 13's pending mix for fragmented rounds (``gangopt generate --fragmented``): elastic,
required and preferred topology shares."""


def size_spec(name: str, seed: int = 0, contention: bool = False) -> Spec:
    """The :class:`Spec` of one of issue 3's rounds (``S``, ``M``, ``L``, ``XL``)."""
    try:
        nodes, gangs = SIZES[name.upper()]
    except KeyError:
        raise ValueError(f"unknown size {name!r} (sizes: {', '.join(SIZES)})") from None
    return Spec(nodes=nodes, gangs=gangs, seed=seed, contention=contention, gap_limit=GAP_TARGETS[name.upper()])


@dataclass
class Summary:
    """What was generated, for the CLI's one-line report and the benchmark table."""

    nodes: int
    gpus: int
    busy_gpus: int
    running: int
    pending: int
    demand_gpus: int
    largest: int
    alpha: float
    contention: bool
    fragmented: bool = False
    topology: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        free = self.gpus - self.busy_gpus
        return (
            f"{self.nodes} nodes, {self.gpus} GPUs, {self.busy_gpus / max(1, self.gpus):.0%} busy "
            f"({self.running} running gangs); {self.pending} pending gangs asking {self.demand_gpus} GPUs "
            f"({self.demand_gpus / max(1, free):.2f}x the {free} free; largest {self.largest}; "
            f"alpha {self.alpha:.2f}){'; contention' if self.contention else ''}"
            f"{'; fragmented' if self.fragmented else ''}"
        )


# ----------------------------------------------------------------------------- size mix


@cache
def philly_table() -> tuple[tuple[int, int, float], ...]:
    """``(gpus, jobs, gpu_hours)`` per job size of the Philly trace (the committed table)."""
    text = resources.files("gangopt").joinpath("data/philly_sizes.json").read_text(encoding="utf-8")
    data = json.loads(text)
    return tuple((int(r["gpus"]), int(r["jobs"]), float(r["gpu_hours"])) for r in data["sizes"])


def size_mix(alpha: float, cap: int, running: bool = False) -> dict[int, float]:
    """Probability of each gang size in GPUs: Philly's job mix (or running mix) tilted by
    ``s**alpha``, the tail stretched by :data:`STRETCH`, sizes above ``cap`` dropped."""
    mix: dict[int, float] = {}
    for gpus, jobs, hours in philly_table():
        weight = (hours / gpus if running else jobs) * gpus**alpha
        factors = STRETCH if gpus >= TAIL_FROM else (1,)
        for f in factors:
            size = gpus * f
            if size <= cap:
                mix[size] = mix.get(size, 0.0) + weight / len(factors)
    total = sum(mix.values())
    if total <= 0:
        return {1: 1.0}
    return {s: w / total for s, w in sorted(mix.items())}


def _mean(mix: dict[int, float]) -> float:
    return sum(s * p for s, p in mix.items())


def fit_alpha(mean: float, cap: int) -> float:
    """The tilt whose pending mix has expected size ``mean`` (clamped to [0, 4])."""
    lo, hi = 0.0, 4.0
    if _mean(size_mix(lo, cap)) >= mean:
        return lo
    if _mean(size_mix(hi, cap)) <= mean:
        return hi
    for _ in range(40):
        mid = (lo + hi) / 2
        if _mean(size_mix(mid, cap)) < mean:
            lo = mid
        else:
            hi = mid
    return round((lo + hi) / 2, 4)


class _Sampler:
    def __init__(self, mix: dict[int, float]) -> None:
        self.sizes = list(mix)
        self.cum = list(np.cumsum(list(mix.values())))

    def draw(self, rng: random.Random) -> int:
        u = rng.random() * self.cum[-1]
        for size, c in zip(self.sizes, self.cum, strict=True):
            if u <= c:
                return size
        return self.sizes[-1]


def pod_shape(gpus: int) -> tuple[int, int]:
    """``(pods, gpus per pod)`` of a gang of ``gpus`` GPUs on 8-GPU nodes: one pod up to 8 GPUs,
    else the fewest equal pods of at most 8 GPUs (12 -> 2 x 6, 1,024 -> 128 x 8)."""
    if gpus <= GPUS_PER_NODE:
        return 1, gpus
    pods = math.ceil(gpus / GPUS_PER_NODE)
    while gpus % pods:
        pods += 1
    return pods, gpus // pods


def _priority(rng: random.Random) -> int:
    u = rng.random()
    for prio, share in PRIORITIES:
        if u < share:
            return prio
        u -= share
    return PRIORITIES[-1][0]


def _requests(rng: random.Random, gpus: int) -> dict[str, Any]:
    cpu = rng.choice(CPU_PER_GPU) * gpus
    mem = rng.choice(MEMORY_PER_GPU_GI) * gpus
    return {"gpu": gpus, "cpu": cpu, "memory": f"{mem}Gi"}


# ----------------------------------------------------------------------------- placement


class _Cluster:
    """Free GPUs per node and the rack of each node, for the placement simulation."""

    def __init__(self, nodes: int, rack_size: int, scatter: bool = False) -> None:
        self.scatter = scatter
        """Place on random nodes that fit (a cluster as it is after months of churn)."""
        self.free = np.full(nodes, GPUS_PER_NODE, dtype=np.int64)
        self.rack_size = rack_size
        self.racks = math.ceil(nodes / rack_size)
        self.rack_starts = np.arange(0, nodes, rack_size)
        self.index = np.arange(nodes)

    def place(self, rng: random.Random, pods: int, per: int) -> list[int] | None:
        """Nodes for ``pods`` pods of ``per`` GPUs (one pod per node), or None if they do not fit."""
        fits = self.free >= per
        if self.scatter:
            candidates = np.flatnonzero(fits)
            if candidates.size < pods:
                return None
            return sorted(int(candidates[k]) for k in rng.sample(range(candidates.size), pods))
        if pods == 1:
            candidates = np.flatnonzero(fits)
            if candidates.size == 0:
                return None
            if rng.random() < 0.15:
                return [int(candidates[rng.randrange(candidates.size)])]
            # best fit: the fullest node that fits, lowest index first (packs racks in order)
            key = self.free[candidates] * (len(self.free) + 1) + candidates
            return [int(candidates[int(np.argmin(key))])]
        per_rack = np.add.reduceat(fits.astype(np.int64), self.rack_starts)
        enough = np.flatnonzero(per_rack >= pods)
        if enough.size:
            rack = int(enough[int(np.argmin(per_rack[enough]))])  # best-fitting rack
            lo = rack * self.rack_size
            hi = min(lo + self.rack_size, len(self.free))
            local = lo + np.flatnonzero(fits[lo:hi])
        else:
            local = np.flatnonzero(fits)
            if local.size < pods:
                return None
            # spanning racks: the racks with the most room, so the gang touches few of them
            rack_of = local // self.rack_size
            order = np.lexsort((local, -per_rack[rack_of]))
            local = local[order]
        chosen = local[np.argsort(self.free[local], kind="stable")][:pods]
        return sorted(int(n) for n in chosen)


@dataclass
class _Running:
    name: str
    gpus: int
    nodes: list[int]
    per: int
    data: dict[str, Any]


# ----------------------------------------------------------------------------- the round


def generate(spec: Spec) -> tuple[Round, Summary]:
    """The round described by ``spec``, and a summary of it. Deterministic for a spec."""
    seed = f"gangopt-generate/{spec.nodes}/{spec.gangs}/{spec.seed}/{int(spec.contention)}"
    rng = random.Random(seed + ("/fragmented" if spec.fragmented else ""))
    rack_size = spec.rack_size or (16 if spec.nodes <= 1024 else 32)
    cluster = parametric_cluster(spec.nodes, rack_size=rack_size)
    names = [n.name for n in cluster.nodes]
    total = spec.nodes * GPUS_PER_NODE
    cap = min(MAX_GANG_GPUS, max(1, total // 2))
    busy = spec.busy if spec.busy is not None else (rng.uniform(0.8, 0.9) if spec.contention else rng.uniform(0.6, 0.9))
    demand = spec.demand if spec.demand is not None else (2.0 if spec.contention else 0.8)

    # the tilt is fitted for the free capacity the busy share leaves
    alpha = fit_alpha(demand * total * (1 - busy) / max(1, spec.gangs), cap)
    state = _Cluster(spec.nodes, rack_size, scatter=spec.fragmented)
    by_jobs = (spec.running_mix or ("jobs" if spec.fragmented else "tilted")) == "jobs"
    running_mix = size_mix(0.0, cap) if by_jobs else size_mix(alpha, cap, running=True)
    runs = _fill(rng, state, busy, spec.contention, _Sampler(running_mix))
    if spec.fragmented:
        runs += _occupy_free_nodes(rng, state)
        cluster = _with_fabric_labels(cluster, rack_size)
    running = [_running_data(rng, r, names) for r in runs]
    busy_gpus = int(total - state.free.sum())

    sizes = _queue_sizes(rng, _Sampler(size_mix(alpha, cap)), spec.gangs, demand * (total - busy_gpus))
    pending: list[dict[str, Any]] = []
    topo_counts: dict[str, int] = {}
    for i, gpus in enumerate(sizes):
        gang = _pending_data(rng, spec, i, gpus, rack_size)
        if spec.fragmented and rng.random() < SELECTOR_SHARE:
            gang["roles"][0]["node_selector"] = {FABRIC_LABEL: rng.choice(FABRICS)}
        if "topology" in gang:
            for kind, level in gang["topology"].items():
                topo_counts[f"{kind}:{level}"] = topo_counts.get(f"{kind}:{level}", 0) + 1
        pending.append(gang)
    now = max((g["submit_time"] for g in pending), default=HORIZON)

    data = {
        "api_version": "gangopt/v1",
        "cluster": cluster.model_dump(mode="json", exclude_defaults=True),
        "running": running,
        "pending": pending,
        "policy": {
            "time_limit": spec.time_limit,
            "seed": 0,
            "workers": 1,
            "preemption": True,
            "now": now,
            "gap_limit": spec.gap_limit,
        },
    }
    rnd = Round.model_validate(data)
    demand_gpus = sum(_gang_gpus(g) for g in pending)
    summary = Summary(
        nodes=spec.nodes,
        gpus=total,
        busy_gpus=busy_gpus,
        running=len(running),
        pending=len(pending),
        demand_gpus=demand_gpus,
        largest=max((_gang_gpus(g) for g in pending), default=0),
        alpha=alpha,
        contention=spec.contention,
        fragmented=spec.fragmented,
        topology=dict(sorted(topo_counts.items())),
    )
    return rnd, summary


DEMAND_TOLERANCE = (0.8, 1.25)
"""A queue whose GPU demand is outside these multiples of the target is drawn again."""


def _queue_sizes(rng: random.Random, sampler: _Sampler, gangs: int, target: float) -> list[int]:
    """Sizes of the pending gangs. The mix is heavy-tailed, so a queue of 50 can ask for a third
    or three times the target; queues are redrawn (up to 200 times, keeping the closest) until
    the demand is within :data:`DEMAND_TOLERANCE` of the target."""
    best: list[int] = []
    best_error = math.inf
    for _ in range(200):
        sizes = [sampler.draw(rng) for _ in range(gangs)]
        ratio = sum(sizes) / max(1.0, target)
        if DEMAND_TOLERANCE[0] <= ratio <= DEMAND_TOLERANCE[1]:
            return sizes
        error = abs(math.log(max(ratio, 1e-9)))
        if error < best_error:
            best, best_error = sizes, error
    return best


def _gang_gpus(gang: dict[str, Any]) -> int:
    return sum(int(r["replicas"]) * int(r["requests"]["gpu"]) for r in gang["roles"])


def _fill(rng: random.Random, state: _Cluster, busy: float, contention: bool, sampler: _Sampler) -> list[_Running]:
    """Start gangs until the cluster is fuller than ``busy``, then let some finish."""
    total = len(state.free) * GPUS_PER_NODE
    target = busy * total
    overshoot = 0.99 * total if contention else min(0.97 * total, target + 0.05 * total)
    runs: list[_Running] = []
    used = 0
    misses = 0
    while used < overshoot and misses < 50:
        gpus = sampler.draw(rng)
        pods, per = pod_shape(gpus)
        if state.scatter and per == GPUS_PER_NODE and rng.random() < SPLIT_SHARE:
            per = rng.choice((2, 4))  # data-parallel workers of a few GPUs each, anywhere
            pods = gpus // per
        nodes = state.place(rng, pods, per)
        if nodes is None:
            misses += 1
            continue
        misses = 0
        state.free[nodes] -= per
        used += gpus
        runs.append(_Running(f"run-{len(runs):05d}", gpus, nodes, per, {}))
    # departures: random gangs finish (contention: mostly single-pod ones, which scatters the holes)
    order = list(range(len(runs)))
    rng.shuffle(order)
    if contention:
        order.sort(key=lambda k: len(runs[k].nodes) > 1 and rng.random() < 0.9)
    gone: set[int] = set()
    for k in order:
        if used <= target:
            break
        run = runs[k]
        if used - run.gpus < target - 0.01 * total:  # would overshoot the busy share
            continue
        state.free[run.nodes] += run.per
        used -= run.gpus
        gone.add(k)
    return [r for k, r in enumerate(runs) if k not in gone]


FABRIC_LABEL = "gangopt.io/fabric"
FABRICS = ("ib", "roce")
"""Fragmented rounds label each block's nodes with one fabric (blocks alternate)."""
SPLIT_SHARE = 0.6
"""Share of a fragmented round's running whole-node gangs whose pods ask 2 or 4 GPUs instead
(so that the holes they leave are partial nodes)."""
SELECTOR_SHARE = 0.3
"""Share of a fragmented round's pending gangs that select one fabric."""


def _occupy_free_nodes(rng: random.Random, state: _Cluster) -> list[_Running]:
    """A small single-pod gang (1-2 GPUs) on every wholly free node: in a fragmented cluster
    no node is free (issue 13's rounds)."""
    runs: list[_Running] = []
    for node in np.flatnonzero(state.free == GPUS_PER_NODE).tolist():
        gpus = rng.choice((1, 2))
        state.free[node] -= gpus
        runs.append(_Running(f"small-{len(runs):05d}", gpus, [int(node)], gpus, {}))
    return runs


def _with_fabric_labels(cluster: Cluster, rack_size: int, racks_per_block: int = 8) -> Cluster:
    """``cluster`` with :data:`FABRIC_LABEL` on every node, alternating by block."""
    nodes = [
        n.model_copy(update={"labels": {**n.labels, FABRIC_LABEL: FABRICS[(i // (rack_size * racks_per_block)) % 2]}})
        for i, n in enumerate(cluster.nodes)
    ]
    return cluster.model_copy(update={"nodes": nodes})


def _running_data(rng: random.Random, run: _Running, names: list[str]) -> dict[str, Any]:
    pods = len(run.nodes)
    priority = _priority(rng)
    role: dict[str, Any] = {"name": "worker", "replicas": pods, "requests": _requests(rng, run.per)}
    if pods >= 2 and rng.random() < 0.2:
        role["min_replicas"] = math.ceil(pods / 2)
    gang: dict[str, Any] = {
        "name": run.name,
        "priority": priority,
        "roles": [role],
        "pods": [{"name": f"{run.name}-worker-{i}", "node": names[n]} for i, n in enumerate(run.nodes)],
        "seconds_since_checkpoint": round(rng.uniform(0, 3600)),
    }
    if priority == PRIORITIES[-1][0] and rng.random() < 0.5:
        gang["preemptible"] = False
    return gang


def _pending_data(rng: random.Random, spec: Spec, i: int, gpus: int, rack_size: int) -> dict[str, Any]:
    name = f"job-{i:04d}"
    pods, per = pod_shape(gpus)
    role: dict[str, Any] = {"name": "worker", "replicas": pods, "requests": _requests(rng, per)}
    if rng.random() < spec.elastic_share:
        if pods >= 2:
            role["min_replicas"] = math.ceil(pods / 2)
        elif gpus >= 2:  # a sweep of one-GPU pods that can start with half of them
            role = {**role, "replicas": gpus, "min_replicas": max(1, gpus // 2), "requests": _requests(rng, 1)}
    submit = round(rng.uniform(0, HORIZON))
    gang: dict[str, Any] = {"name": name, "priority": _priority(rng), "roles": [role], "submit_time": submit}
    nodes_needed = role["replicas"] if role["requests"]["gpu"] == GPUS_PER_NODE else math.ceil(gpus / GPUS_PER_NODE)
    if pods >= 2:
        level = "rack" if nodes_needed <= rack_size else "block"
        u = rng.random()
        if u < spec.required_share:
            gang["topology"] = {"required": level}
        elif u < spec.required_share + spec.preferred_share:
            gang["topology"] = {"preferred": level}
    if rng.random() < 0.05:
        gang["deadline"] = submit + round(rng.uniform(3600, 6 * 3600))
    return gang


def without_preemption(rnd: Round) -> Round:
    """``rnd`` with ``policy.preemption`` off (no running gang may be evicted or shrunk): issue
    13's family has each round both ways (``gangopt generate --no-preemption``,
    ``bench.rounds.fragmented_text(..., preemption=False)``)."""
    return rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"preemption": False})})


# ----------------------------------------------------------------------------- output


def dump_round(rnd: Round) -> str:
    """Compact, deterministic JSON: one node or gang per line (diffable, a fraction of the
    pretty-printed size)."""
    data = rnd.model_dump(mode="json", exclude_defaults=True)
    data = {"api_version": rnd.api_version, **data}
    cluster = data.pop("cluster")
    nodes = cluster.pop("nodes")
    lists = {"running": data.pop("running", []), "pending": data.pop("pending", [])}
    policy = data.pop("policy", {})

    def items(values: list[Any]) -> str:
        return "[\n" + ",\n".join(json.dumps(v, separators=(",", ":")) for v in values) + "\n]"

    parts = [f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}" for k, v in data.items()]
    head = "".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}," for k, v in cluster.items())
    parts.append(f'"cluster":{{{head}"nodes":{items(nodes)}}}')  # no levels: no stray comma
    parts += [f"{json.dumps(k)}:{items(v)}" for k, v in lists.items()]
    parts.append(f'"policy":{json.dumps(policy, separators=(",", ":"))}')
    return "{\n" + ",\n".join(parts) + "\n}\n"
