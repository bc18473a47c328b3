"""Small builders for rounds and plans, so a test states its scenario in a few lines.

Rounds::

    rnd = make_round(
        cluster(4, gpus=8, racks=2),                      # n0..n3, racks r0 (n0,n1) and r1 (n2,n3)
        running=[running("low", ["n0", "n0"], gpu=4, priority=0)],
        pending=[pending("big", replicas=2, gpu=8, priority=10)],
    )

Plans (every bookkeeping field filled in the way docs/plan-semantics.md says, so a test only
changes the one thing it means to break)::

    plan = make_plan(rnd, place={"big": ["n0", "n1"]}, evict={"low": ["big"]})

All quantities are given in whole units (``gpu=8`` is 8 GPUs); the schema stores milli-units.
Everything returned is a real schema object, validated by pydantic and ``Round`` checks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import count, islice
from typing import Any, Literal

from gangopt.schema import (
    BoundPod,
    Cluster,
    Cohort,
    MatchExpression,
    Node,
    PendingGang,
    Placement,
    Plan,
    Policy,
    Preemption,
    Queue,
    Resize,
    Role,
    Round,
    RunningGang,
    Status,
    Taint,
    Toleration,
    TopologyRequest,
    Waiting,
)

Quantity = int | float | str
Placed = Sequence[str] | Mapping[str, Sequence[str]]
"""Nodes of new pods: a list (pods of the gang's first role) or ``{role: [node, ...]}``."""


# ----------------------------------------------------------------------------- cluster


def node(
    name: str,
    gpus: Quantity = 8,
    *,
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Taint | tuple[str, str, str]] = (),
    schedulable: bool = True,
    topology: Mapping[str, str] | None = None,
    **other: Quantity,
) -> Node:
    """One node; ``taints`` as Taint objects or ``(key, value, effect)`` tuples; extra keyword
    arguments are further resources (``rdma=4``)."""
    capacity: dict[str, Any] = {"gpu": gpus, **other}
    if cpu is not None:
        capacity["cpu"] = cpu
    if memory is not None:
        capacity["memory"] = memory
    return Node(
        name=name,
        capacity=capacity,
        labels=dict(labels or {}),
        taints=[t if isinstance(t, Taint) else Taint(key=t[0], value=t[1], effect=t[2]) for t in taints],
        schedulable=schedulable,
        topology=dict(topology or {}),
    )


def cluster(
    n_nodes: int,
    gpus: Quantity = 8,
    *,
    racks: int | None = None,
    blocks: int | None = None,
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    taints: Mapping[str, Sequence[Taint | tuple[str, str, str]]] | None = None,
    cordoned: Sequence[str] = (),
    prefix: str = "n",
) -> Cluster:
    """``n_nodes`` identical nodes ``n0, n1, ...``, split into contiguous equal ``racks``
    (``r0, r1, ...``) and, above them, ``blocks`` (``b0, ...``; needs ``racks`` divisible by it).
    ``labels`` / ``taints`` map a node name to its labels / taints; ``cordoned`` nodes are
    unschedulable."""
    levels: list[str] = []
    if blocks is not None:
        assert racks is not None and racks % blocks == 0, "blocks need racks, a multiple of blocks"
        levels.append("block")
    if racks is not None:
        assert n_nodes % racks == 0, "nodes must divide evenly into racks"
        levels.append("rack")
    per_rack = n_nodes // racks if racks else n_nodes
    nodes = []
    for i in range(n_nodes):
        name = f"{prefix}{i}"
        topo: dict[str, str] = {}
        if racks is not None:
            topo["rack"] = f"r{i // per_rack}"
        if blocks is not None and racks is not None:
            topo["block"] = f"b{(i // per_rack) // (racks // blocks)}"
        nodes.append(
            node(
                name,
                gpus,
                cpu=cpu,
                memory=memory,
                labels=(labels or {}).get(name),
                taints=(taints or {}).get(name, ()),
                schedulable=name not in cordoned,
                topology=topo,
            )
        )
    return Cluster(topology_levels=levels, nodes=nodes)


# ----------------------------------------------------------------------------- gangs


def role(
    name: str = "worker",
    replicas: int = 1,
    gpu: Quantity = 1,
    *,
    min_replicas: int | None = None,
    cpu: Quantity | None = None,
    memory: Quantity | None = None,
    selector: Mapping[str, str] | None = None,
    affinity: Sequence[MatchExpression | tuple[str, str, Sequence[str]]] = (),
    tolerations: Sequence[Toleration] = (),
    **other: Quantity,
) -> Role:
    """One role; ``affinity`` as MatchExpression objects or ``(key, operator, values)`` tuples.
    ``gpu=0`` leaves gpu out of the requests (cpu-only pods); extra keyword arguments are
    further per-pod requests (``rdma=1``)."""
    requests: dict[str, Any] = dict(other)
    if gpu:
        requests["gpu"] = gpu
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    return Role(
        name=name,
        replicas=replicas,
        min_replicas=min_replicas,
        requests=requests,
        node_selector=dict(selector or {}),
        node_affinity=[
            a if isinstance(a, MatchExpression) else MatchExpression(key=a[0], operator=a[1], values=list(a[2]))
            for a in affinity
        ],
        tolerations=list(tolerations),
    )


def _topology(
    required: str | None, preferred: str | None, slice_level: str | None, slice_size: int | None
) -> TopologyRequest | None:
    if required is None and preferred is None and slice_level is None:
        return None
    return TopologyRequest(required=required, preferred=preferred, slice_level=slice_level, slice_size=slice_size)


def pending(
    name: str,
    replicas: int = 1,
    gpu: Quantity = 1,
    *,
    roles: Sequence[Role] | None = None,
    priority: int = 0,
    queue: str = "default",
    min_replicas: int | None = None,
    min_members: int | None = None,
    max_members: int | None = None,
    required: str | None = None,
    preferred: str | None = None,
    slice_level: str | None = None,
    slice_size: int | None = None,
    group: str | None = None,
    submit_time: float = 0.0,
    deadline: float | None = None,
    **role_args: Any,
) -> PendingGang:
    """A pending gang: one role ``worker`` of ``replicas`` pods of ``gpu`` GPUs each (other
    role settings as keyword arguments, see :func:`role`), or the given ``roles``."""
    return PendingGang(
        name=name,
        queue=queue,
        priority=priority,
        roles=list(roles) if roles else [role("worker", replicas, gpu, min_replicas=min_replicas, **role_args)],
        min_members=min_members,
        max_members=max_members,
        topology=_topology(required, preferred, slice_level, slice_size),
        group=group,
        submit_time=submit_time,
        deadline=deadline,
    )


def running(
    name: str,
    nodes: Placed,
    gpu: Quantity = 1,
    *,
    roles: Sequence[Role] | None = None,
    replicas: int | None = None,
    priority: int = 0,
    queue: str = "default",
    min_replicas: int | None = None,
    min_members: int | None = None,
    max_members: int | None = None,
    required: str | None = None,
    preferred: str | None = None,
    slice_level: str | None = None,
    slice_size: int | None = None,
    preemptible: bool = True,
    preemption_cost: float | None = None,
    **role_args: Any,
) -> RunningGang:
    """A running gang with one pod per entry of ``nodes``, named ``{name}-{role}-{i}``.

    With a plain list, the gang has one role ``worker`` with ``replicas`` (default: one per
    listed node) pods of ``gpu`` GPUs; elastic gangs set ``replicas`` and ``min_replicas``.
    With ``{role: [node, ...]}``, pass the matching ``roles``.
    """
    by_role = _by_role(nodes, roles[0].name if roles else "worker")
    if roles is None:
        assert list(by_role) == ["worker"], "pass roles=[...] when placing pods of named roles"
        roles = [role("worker", replicas or len(by_role["worker"]), gpu, min_replicas=min_replicas, **role_args)]
    pods = [BoundPod(name=f"{name}-{r}-{i}", role=r, node=n) for r, ns in by_role.items() for i, n in enumerate(ns)]
    return RunningGang(
        name=name,
        queue=queue,
        priority=priority,
        roles=list(roles),
        min_members=min_members,
        max_members=max_members,
        topology=_topology(required, preferred, slice_level, slice_size),
        pods=pods,
        preemptible=preemptible,
        preemption_cost=preemption_cost,
    )


def queue(
    name: str,
    *,
    cohort: str | None = None,
    nominal: Mapping[str, Quantity] | None = None,
    borrowing_limit: Mapping[str, Quantity] | None = None,
    gpu: Quantity | None = None,
) -> Queue:
    """A queue; ``gpu=N`` is shorthand for ``nominal={'gpu': N}``."""
    quota: dict[str, Any] = dict(nominal or {})
    if gpu is not None:
        quota["gpu"] = gpu
    return Queue(name=name, cohort=cohort, nominal=quota, borrowing_limit=dict(borrowing_limit or {}))


def make_round(
    cluster: Cluster,
    *,
    running: Sequence[RunningGang] = (),
    pending: Sequence[PendingGang] = (),
    queues: Sequence[Queue] = (),
    cohorts: Sequence[Cohort] = (),
    preemption: bool = True,
    now: float | None = None,
    **policy: Any,
) -> Round:
    """A round; ``preemption``, ``now`` and other keyword arguments go into the policy."""
    return Round(
        cluster=cluster,
        running=list(running),
        pending=list(pending),
        queues=list(queues),
        cohorts=list(cohorts),
        policy=Policy(preemption=preemption, now=now, **policy),
    )


# ----------------------------------------------------------------------------- plans


def fragmented_round(
    nodes: int,
    gangs: int,
    busy: float = 0.75,
    seed: int = 0,
    time_limit: float = 5.0,
    running_mix: Literal["jobs", "tilted"] = "tilted",
) -> Round:
    """Issue 13's fragmented round (``bench.rounds.fragmented_spec``: running gangs where they
    happened to land, preemption on) of a size, with a test's time limit. ``running_mix``
    defaults to ``tilted`` (fewer, larger running gangs): the rounds the tests that name a seed
    were written against; ``jobs`` is the benchmark family's (many single-GPU gangs)."""
    from dataclasses import replace

    from bench.rounds import fragmented_spec
    from gangopt.replay.generate import generate

    return generate(replace(fragmented_spec(nodes, gangs, busy, seed, running_mix), time_limit=time_limit))[0]


def _by_role(nodes: Placed, default_role: str) -> dict[str, list[str]]:
    if isinstance(nodes, Mapping):
        return {r: list(ns) for r, ns in nodes.items()}
    return {default_role: list(nodes)}


def make_plan(
    rnd: Round,
    *,
    place: Mapping[str, Placed] | None = None,
    evict: Mapping[str, Sequence[str]] | None = None,
    shrink: Mapping[str, tuple[Sequence[str], Sequence[str]]] | None = None,
    admitted: Sequence[str] | None = None,
    status: Status = Status.FEASIBLE,
) -> Plan:
    """A plan with every bookkeeping field derived as docs/plan-semantics.md defines it.

    - ``place``: gang -> nodes of its new pods (see :data:`Placed`); pending gangs named here
      are admitted (unless ``admitted`` is given), the others wait with code ``capacity``.
      Pod names are ``{gang}-{role}-{i}`` with the lowest indices no running pod uses.
    - ``evict``: running gang -> the gangs it is evicted for (all its pods go).
    - ``shrink``: running gang -> (pod names removed, gangs it is shrunk for).
    - ``resizes`` are filled in for running gangs whose member count changes (not evicted).

    The result is consistent bookkeeping, not necessarily a valid plan: that is the point,
    tests build the plan they describe and let the validator judge it.
    """
    place, evict, shrink = place or {}, evict or {}, shrink or {}
    gangs = {g.name: g for g in [*rnd.pending, *rnd.running]}
    running_gangs = {g.name: g for g in rnd.running}
    taken = {p.name for g in rnd.running for p in g.pods}
    placements: list[Placement] = []
    for gang, nodes in place.items():
        spec = gangs[gang]
        for r, ns in _by_role(nodes, spec.roles[0].name).items():
            free = (f"{gang}-{r}-{i}" for i in count())
            names = list(islice((n for n in free if n not in taken), len(ns)))
            placements += [Placement(gang=gang, role=r, pod=pod, node=n) for pod, n in zip(names, ns, strict=True)]
    preemptions = [
        _preemption(running_gangs[g], "evict", [p.name for p in running_gangs[g].pods], list(f))
        for g, f in evict.items()
    ]
    preemptions += [_preemption(running_gangs[g], "shrink", list(pods), list(f)) for g, (pods, f) in shrink.items()]
    if admitted is None:
        admitted = [g.name for g in rnd.pending if g.name in place]
    waiting = [
        Waiting(gang=g.name, code="capacity", reasons=["not enough free GPUs"])
        for g in rnd.pending
        if g.name not in admitted
    ]
    return Plan(
        status=status,
        admitted=list(admitted),
        placements=placements,
        preemptions=preemptions,
        resizes=_resizes(rnd, placements, preemptions),
        waiting=waiting,
    )


def _preemption(gang: RunningGang, kind: str, pods: list[str], for_gangs: list[str]) -> Preemption:
    node_of = {p.name: p.node for p in gang.pods}
    nodes = sorted({node_of[p] for p in pods})
    cost = gang.preemption_cost if gang.preemption_cost is not None else 1.0
    if kind == "shrink":
        cost *= len(pods) / len(gang.pods)
    return Preemption(
        gang=gang.name, kind=kind, pods=pods, nodes=nodes, priority=gang.priority, cost=cost, for_gangs=for_gangs
    )


def _resizes(rnd: Round, placements: list[Placement], preemptions: list[Preemption]) -> list[Resize]:
    new = Counter(p.gang for p in placements)
    lost = Counter({pre.gang: len(pre.pods) for pre in preemptions})
    out = []
    for g in rnd.running:
        after = len(g.pods) - lost[g.name] + new[g.name]
        if after != len(g.pods) and lost[g.name] < len(g.pods):
            out.append(Resize(gang=g.name, from_members=len(g.pods), to_members=after))
    return out
