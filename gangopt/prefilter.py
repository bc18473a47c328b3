"""Vectorized prefilter: prune what cannot matter, and group nodes into equivalence classes.

Everything here is numpy over nodes (no Python loop over nodes per gang), because it runs on
every round of clusters with thousands of nodes:

1. Node arrays: capacity, usage of running pods that must stay ("fixed"), and pods of running
   gangs that could be preempted or shrunk ("candidates", priced per priority level).
2. Eligibility masks, one per distinct (selector, affinity, tolerations) signature.
3. Equivalence classes: nodes with the same fixed free capacity, eligibility, candidate pods,
   idleness and domain at the finest topology level any gang cares about. The CP-SAT model is
   built over classes, so it grows with classes, not nodes.
4. Per gang and role, how many pods fit on one node of each class (if every candidate
   pod made room); gangs that cannot fit even so, or not within one domain of their required
   level, or not within their quota, are pruned with the reason recorded.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from gangopt import arrays
from gangopt.quantities import human
from gangopt.schema import NODE_LEVEL, PendingGang, Role, Round, RunningGang, WaitingCode
from gangopt.topology import Topology

BIG = 1 << 30
"""Pods of a role that requests nothing fit without bound; capped by replicas later."""


@dataclass(frozen=True)
class RoleKey:
    """A role of a gang: ``kind`` is 'pending' or 'running', ``gang`` its index in that list."""

    kind: str
    gang: int
    role: int


@dataclass
class NodeClass:
    """Interchangeable nodes: same fixed free capacity, eligibility, candidate pods and domain."""

    nodes: list[int]
    free: np.ndarray
    """Per resource, capacity minus pods that stay whatever happens (milli-units)."""
    candidates: dict[tuple[int, str], int]
    """(running gang index, role name) -> pods of that preemptible gang on *each* node."""
    domains: dict[str, str]
    """Domain name per topology level (levels finer than the finest relevant one omitted)."""
    idle: bool
    """Nothing runs on these nodes before the round."""

    @property
    def size(self) -> int:
        return len(self.nodes)


@dataclass
class Pruned:
    """Why a gang was left out before the model: a waiting code and plain words."""

    code: WaitingCode
    reason: str


@dataclass
class Prefiltered:
    """The round reduced to what the CP-SAT model needs."""

    rnd: Round
    topo: Topology
    resources: list[str]
    classes: list[NodeClass]
    pending: list[int]
    """Indexes of pending gangs kept for the model."""
    candidates: list[int]
    """Indexes of running gangs that may lose pods (preemptible, and someone outranks them)."""
    growers: list[int]
    """Indexes of running elastic gangs that may gain pods."""
    fits: dict[RoleKey, np.ndarray]
    """Pods of one role that fit on one node of each class (0 = not eligible), per class."""
    eligible_anywhere: dict[RoleKey, bool]
    """Whether the role is eligible on some node at all (to tell eligibility from capacity)."""
    requests: dict[RoleKey, np.ndarray]
    required_domains: dict[RoleKey | int, list[str]] = field(default_factory=dict)
    pruned: dict[str, Pruned] = field(default_factory=dict)
    stranded: dict[int, dict[str, int]] = field(default_factory=dict)
    """Candidate gang -> pods per role on nodes left out of the model (kept iff the gang stays)."""
    relevant_level: str | None = None
    domain_index: dict[str, tuple[list[str], np.ndarray]] = field(default_factory=dict)
    """Per level: domain names and each class's domain (valid until classes change)."""
    nodes_pruned: int = 0
    seconds: float = 0.0

    def gang(self, kind: str, index: int) -> PendingGang | RunningGang:
        return self.rnd.pending[index] if kind == "pending" else self.rnd.running[index]


def resource_names(rnd: Round) -> list[str]:
    """Every resource the round names, gpu first (the encoder's aggregate rows and the
    binding-resource test rely on that), then alphabetical."""
    return sorted(arrays.resource_names(rnd), key=lambda r: (r != "gpu", r))


def request_vector(role: Role, resources: list[str]) -> np.ndarray:
    """A role's per-pod requests as a vector over ``resources``."""
    return arrays.request_vector(role.requests, resources)


def prefilter(rnd: Round, topo: Topology | None = None) -> Prefiltered:
    """Run every prefilter step on ``rnd``; see the module docstring."""
    start = time.perf_counter()
    topo = topo or Topology.of(rnd.cluster)
    resources = resource_names(rnd)
    capacity = arrays.cluster_capacity(rnd, resources)
    candidates, growers = _movable_running(rnd)
    fixed_used, cand_pods, busy = _running_usage(rnd, topo, resources, set(candidates))
    masks, role_signature = _eligibility(rnd, topo, growers)
    level = _relevant_level(rnd, growers)
    classes = _classes(topo, capacity - fixed_used, masks, cand_pods, level, busy)
    pre = Prefiltered(
        rnd=rnd,
        topo=topo,
        resources=resources,
        classes=classes,
        pending=list(range(len(rnd.pending))),
        candidates=candidates,
        growers=growers,
        fits={},
        eligible_anywhere={},
        requests={},
        relevant_level=level,
    )
    first = np.fromiter((c.nodes[0] for c in classes), dtype=np.intp, count=len(classes))
    class_masks = np.stack(masks, axis=1)[first] if masks else np.zeros((len(classes), 0), dtype=bool)
    _fit_counts(pre, class_masks, role_signature)
    _prune_gangs(pre)
    _drop_useless_classes(pre)
    pre.seconds = time.perf_counter() - start
    return pre


def _movable_running(rnd: Round) -> tuple[list[int], list[int]]:
    """Running gangs that may lose pods (preemptible and outranked by someone who may want
    their room) and those that may gain pods (elastic, below their maximum)."""
    growers = [i for i, g in enumerate(rnd.running) if len(g.pods) < g.maximum and not _sliced(g)]
    if not rnd.policy.preemption:
        return [], growers
    top = max([g.priority for g in rnd.pending] + [rnd.running[i].priority for i in growers], default=None)
    if top is None:
        return [], growers
    candidates = [i for i, g in enumerate(rnd.running) if g.preemptible and g.priority < top]
    return candidates, growers


def _sliced(gang: RunningGang) -> bool:
    """Running gangs split in slices are never resized: a resize would have to move whole slices."""
    return gang.topology is not None and gang.topology.slice_level is not None


def _running_usage(
    rnd: Round, topo: Topology, resources: list[str], candidates: set[int]
) -> tuple[np.ndarray, dict[int, dict[tuple[int, str], int]], np.ndarray]:
    """Usage of pods that stay whatever happens, candidate pods per node, and which nodes run
    anything. One scatter-add over every fixed pod (16,384 nodes: tens of thousands of pods)."""
    n = len(topo.node_names)
    cand: dict[int, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))
    rows: list[int] = []
    usage: list[np.ndarray] = []
    busy = np.zeros(n, dtype=bool)
    for gi, gang in enumerate(rnd.running):
        nodes = [topo.node_index[pod.node] for pod in gang.pods]
        busy[nodes] = True
        if gi in candidates:
            for node, pod in zip(nodes, gang.pods, strict=True):
                cand[node][(gi, pod.role)] += 1
            continue
        reqs = {r.name: request_vector(r, resources) for r in gang.roles}
        rows += nodes
        usage += [reqs[pod.role] for pod in gang.pods]
    fixed = np.zeros((n, len(resources)), dtype=np.int64)
    if rows:
        np.add.at(fixed, np.asarray(rows, dtype=np.intp), np.stack(usage))
    return fixed, {k: dict(v) for k, v in cand.items()}, busy


def _signature(role: Role) -> tuple[object, ...]:
    return (
        tuple(sorted(role.node_selector.items())),
        tuple((e.key, e.operator, tuple(e.values)) for e in role.node_affinity),
        tuple((t.key, t.operator, t.value, t.effect) for t in role.tolerations),
    )


def _eligibility(rnd: Round, topo: Topology, growers: list[int]) -> tuple[list[np.ndarray], dict[RoleKey, int]]:
    """One boolean node mask per distinct eligibility signature, and each role's signature.

    Running gangs with a required topology level may only grow inside their current domain,
    which makes their mask specific to them.
    """
    nodes = rnd.cluster.nodes
    schedulable = np.array([n.schedulable for n in nodes], dtype=bool)
    label_columns: dict[str, np.ndarray] = {}

    def column(key: str) -> np.ndarray:
        if key not in label_columns:
            label_columns[key] = np.array([n.labels.get(key) for n in nodes], dtype=object)
        return label_columns[key]

    hard_taints = sorted(
        {(t.key, t.value, t.effect) for n in nodes for t in n.taints if t.effect != "PreferNoSchedule"}
    )
    taint_index = {t: i for i, t in enumerate(hard_taints)}
    incidence = np.zeros((len(nodes), len(hard_taints)), dtype=bool)
    for i, node in enumerate(nodes):
        for t in node.taints:
            if t.effect != "PreferNoSchedule":
                incidence[i, taint_index[(t.key, t.value, t.effect)]] = True

    def mask_for(role: Role) -> np.ndarray:
        mask = schedulable.copy()
        for key, value in role.node_selector.items():
            mask &= column(key) == value
        for expr in role.node_affinity:
            col = column(expr.key)
            present = col != None  # noqa: E711 - elementwise comparison on an object array
            if expr.operator == "Exists":
                mask &= present
            elif expr.operator == "DoesNotExist":
                mask &= ~present
            else:
                inside = np.isin(col, np.array(expr.values, dtype=object))
                mask &= (present & inside) if expr.operator == "In" else ~(present & inside)
        if hard_taints:
            tolerated = np.array([_tolerates(role, t) for t in hard_taints], dtype=bool)
            mask &= ~incidence[:, ~tolerated].any(axis=1)
        return mask

    masks: list[np.ndarray] = []
    by_signature: dict[tuple[object, ...], int] = {}
    role_signature: dict[RoleKey, int] = {}
    for kind, gangs in (("pending", list(enumerate(rnd.pending))), ("running", [(i, rnd.running[i]) for i in growers])):
        for gi, gang in gangs:
            restrict = _growth_domain(rnd, topo, gang) if kind == "running" else None
            for ri, role in enumerate(gang.roles):
                sig = (_signature(role), restrict)
                if sig not in by_signature:
                    mask = mask_for(role)
                    if restrict is not None:
                        level, domain = restrict
                        codes, names = topo.codes(level)
                        mask &= codes == names.index(domain)
                    by_signature[sig] = len(masks)
                    masks.append(mask)
                role_signature[RoleKey(kind, gi, ri)] = by_signature[sig]
    return masks, role_signature


def _tolerates(role: Role, taint: tuple[str, str, str]) -> bool:
    key, value, effect = taint
    for tol in role.tolerations:
        if tol.effect is not None and tol.effect != effect:
            continue
        if tol.key is None and tol.operator == "Exists":
            return True
        if tol.key == key and (tol.operator == "Exists" or tol.value == value):
            return True
    return False


def _growth_domain(rnd: Round, topo: Topology, gang: PendingGang | RunningGang) -> tuple[str, str] | None:
    """For a running gang with a required level: the one domain its pods are in."""
    if not isinstance(gang, RunningGang) or gang.topology is None or gang.topology.required is None:
        return None
    level = gang.topology.required
    domains = {topo.domain(p.node, level) for p in gang.pods}
    return (level, domains.pop()) if len(domains) == 1 else (level, "")


def _relevant_level(rnd: Round, growers: list[int]) -> str | None:
    """The finest topology level any gang's request mentions (classes must not span it)."""
    levels = [*rnd.cluster.topology_levels, NODE_LEVEL]
    used: set[str] = set()
    for gang in [*rnd.pending, *(rnd.running[i] for i in growers)]:
        if gang.topology is not None:
            used.update(x for x in (gang.topology.required, gang.topology.preferred, gang.topology.slice_level) if x)
    return max(used, key=levels.index) if used else None


def _classes(
    topo: Topology,
    fixed_free: np.ndarray,
    masks: list[np.ndarray],
    cand_pods: dict[int, dict[tuple[int, str], int]],
    level: str | None,
    busy: np.ndarray,
) -> list[NodeClass]:
    """Group nodes by the key described in the module docstring (np.unique over a key matrix)."""
    n = len(topo.node_names)
    signatures: dict[tuple[tuple[tuple[int, str], int], ...], int] = {(): 0}
    cand_id = np.zeros(n, dtype=np.int64)
    for node, pods in cand_pods.items():
        cand_id[node] = signatures.setdefault(tuple(sorted(pods.items())), len(signatures))
    domain = topo.codes(level)[0] if level else np.zeros(n, dtype=np.int64)
    columns = [fixed_free, cand_id[:, None], domain[:, None], busy[:, None].astype(np.int64)]
    if masks:
        columns.append(np.stack(masks, axis=1).astype(np.int64))
    key = np.concatenate(columns, axis=1)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    # Members of each class in node order, classes in order of their first node.
    rank = np.empty(len(first), dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    by_class = np.argsort(rank[inverse], kind="stable")
    members = np.split(by_class, np.cumsum(np.bincount(rank[inverse], minlength=len(first)))[:-1])
    levels = topo.levels[: topo.depth(level) + 1] if level else []
    codes = {lv: topo.codes(lv) for lv in levels}
    classes = []
    for nodes in members:
        rep = int(nodes[0])
        classes.append(
            NodeClass(
                nodes=nodes.tolist(),
                free=fixed_free[rep].copy(),
                candidates=dict(cand_pods.get(rep, {})),
                domains={lv: names[int(code[rep])] for lv, (code, names) in codes.items()},
                idle=not bool(busy[rep]),
            )
        )
    return classes


def role_named(gang: PendingGang | RunningGang, name: str) -> Role:
    """The role called ``name`` (running pods name their role)."""
    return next(r for r in gang.roles if r.name == name)


def _fit_counts(pre: Prefiltered, class_masks: np.ndarray, role_signature: dict[RoleKey, int]) -> None:
    """Pods per node of each class, per role, if every candidate pod made room.

    Not only the role's own lower-priority victims: once a higher-priority gang evicts a whole
    gang, the rest of the freed room may go to anyone, so a tighter bound would cut plans off.
    """
    room = np.array([c.free for c in pre.classes], dtype=np.int64).reshape(len(pre.classes), len(pre.resources))
    room = np.asfortranarray(np.maximum(room, 0))
    anywhere = np.asarray(class_masks.any(axis=0), dtype=bool)
    # Roles share a handful of shapes: one array per (requests, eligibility, replicas), shared
    # read-only by every role that has it (16,384 nodes: 9,000 roles, a few hundred shapes).
    by_shape: dict[tuple[bytes, int, int], np.ndarray] = {}
    for key, sig in role_signature.items():
        role = pre.gang(key.kind, key.gang).roles[key.role]
        req = request_vector(role, pre.resources)
        pre.requests[key] = req
        pre.eligible_anywhere[key] = bool(anywhere[sig])
        shape = (req.tobytes(), sig, role.replicas)
        fit = by_shape.get(shape)
        if fit is None:
            fit = np.where(class_masks[:, sig], arrays.fit_counts(room, req, cap=role.replicas), 0).astype(np.int64)
            by_shape[shape] = fit
        pre.fits[key] = fit


def _prune_gangs(pre: Prefiltered) -> None:
    """Drop pending gangs that cannot reach their minimum, and growers that cannot grow."""
    sizes = np.array([c.size for c in pre.classes], dtype=np.int64)
    rnd = pre.rnd
    for gi, gang in enumerate(rnd.pending):
        verdict = _pending_verdict(pre, gi, gang, sizes)
        if verdict is not None:
            pre.pruned[gang.name] = verdict
    _prune_groups(pre)
    pre.pending = [i for i, g in enumerate(rnd.pending) if g.name not in pre.pruned]
    pre.growers = [
        gi
        for gi in pre.growers
        if any(
            (pre.fits[RoleKey("running", gi, ri)] > 0).any()
            and rnd.running[gi].roles[ri].replicas > _count(rnd, gi, ri)
            for ri in range(len(rnd.running[gi].roles))
        )
    ]


def _count(rnd: Round, gi: int, ri: int) -> int:
    gang = rnd.running[gi]
    return sum(1 for p in gang.pods if p.role == gang.roles[ri].name)


def _pending_verdict(pre: Prefiltered, gi: int, gang: PendingGang, sizes: np.ndarray) -> Pruned | None:
    """None if the gang may fit; else why not (eligibility, capacity, topology, quota)."""
    keys = [RoleKey("pending", gi, ri) for ri in range(len(gang.roles))]
    for key, role in zip(keys, gang.roles, strict=True):
        if gang.role_minimum(role) > 0 and not (pre.fits[key] > 0).any():
            return Pruned("eligibility" if not _any_eligible(pre, key) else "capacity", _no_room(pre, gang, role))
    totals = [np.minimum(sizes * pre.fits[k], role.replicas) for k, role in zip(keys, gang.roles, strict=True)]
    if not _reaches_minimum(gang, [int(t.sum()) for t in totals]):
        return Pruned(
            "capacity",
            f"needs {_demand(pre, gang)} for {gang.minimum} pods; the whole cluster offers room for "
            f"{sum(int(t.sum()) for t in totals)} even after every allowed preemption",
        )
    quota = _quota_verdict(pre, gang)
    if quota is not None:
        return quota
    level = gang.topology.required if gang.topology else None
    if level is None:
        return None
    names, domain_of = _domain_index(pre, level)
    # Room per domain and role (bincount over classes), capped by replicas: one pass per role.
    counts = np.stack(
        [
            np.minimum(np.bincount(domain_of, weights=sizes * pre.fits[k], minlength=len(names)), r.replicas)
            for k, r in zip(keys, gang.roles, strict=True)
        ]
    ).astype(np.int64)
    role_min = np.array([gang.role_minimum(r) for r in gang.roles], dtype=np.int64)[:, None]
    ok = (counts >= role_min).all(axis=0) & (counts.sum(axis=0) >= gang.minimum)
    feasible = [names[d] for d in np.flatnonzero(ok).tolist()]
    best = int(counts.sum(axis=0).max()) if len(names) else 0
    if not feasible:
        return Pruned(
            "topology",
            f"needs {gang.minimum} pods ({_demand(pre, gang)}) within one {level}; the best {level} has room "
            f"for {best} even after every allowed preemption",
        )
    pre.required_domains[gi] = feasible
    return None


def _domain_index(pre: Prefiltered, level: str) -> tuple[list[str], np.ndarray]:
    """Domain names at ``level`` and each class's domain index (cached per level)."""
    if level not in pre.domain_index:
        names = sorted({c.domains[level] for c in pre.classes})
        position = {name: i for i, name in enumerate(names)}
        pre.domain_index[level] = (names, np.array([position[c.domains[level]] for c in pre.classes], dtype=np.int64))
    return pre.domain_index[level]


def _reaches_minimum(gang: PendingGang | RunningGang, counts: list[int]) -> bool:
    if any(c < gang.role_minimum(r) for c, r in zip(counts, gang.roles, strict=True)):
        return False
    return sum(counts) >= gang.minimum


def _any_eligible(pre: Prefiltered, key: RoleKey) -> bool:
    """Whether the role passes selectors and taints somewhere (to tell eligibility from capacity)."""
    return pre.eligible_anywhere[key]


def _no_room(pre: Prefiltered, gang: PendingGang, role: Role) -> str:
    wants = ", ".join(human(v, r) for r, v in sorted(role.requests.items()) if v)
    extra = ""
    if role.node_selector:
        extra = f" matching {role.node_selector}"
    return (
        f"role {role.name!r}: no node{extra} has room for one pod ({wants or 'no requests'}), "
        "even after every allowed preemption"
    )


def _demand(pre: Prefiltered, gang: PendingGang | RunningGang) -> str:
    from gangopt.objective import ObjectiveTerms

    counts = ObjectiveTerms.of(pre.rnd).min_pods(gang)
    totals: dict[str, int] = defaultdict(int)
    for role in gang.roles:
        for res, amount in role.requests.items():
            totals[res] += amount * counts[role.name]
    main = [r for r in ("gpu",) if totals.get(r)] or sorted(r for r in totals if totals[r])[:1]
    return ", ".join(human(totals[r], r) for r in main) or "no resources"


def _quota_verdict(pre: Prefiltered, gang: PendingGang) -> Pruned | None:
    """A gang whose minimum alone exceeds its queue's or cohort's hard limit can never start.
    Limits already exceeded before the round count at their current usage (a plan may keep
    such usage, so a gang may still start if lower-priority work in the queue makes way)."""
    rnd = pre.rnd
    queue = next((q for q in rnd.queues if q.name == gang.queue), None)
    if queue is None:
        return None
    from gangopt.objective import ObjectiveTerms

    counts = ObjectiveTerms.of(rnd).min_pods(gang)
    before: dict[str, int] = defaultdict(int)
    for run in rnd.running:
        for pod in run.pods:
            for res, amount in role_named(run, pod.role).requests.items():
                before[f"{run.queue}/{res}"] += amount
    cohort = [q for q in rnd.queues if queue.cohort and q.cohort == queue.cohort]
    for res, nominal in queue.nominal.items():
        need = sum(r.requests.get(res, 0) * counts[r.name] for r in gang.roles)
        limits: list[int] = []
        if queue.cohort is None:
            limits.append(max(nominal, before[f"{queue.name}/{res}"]))
        else:
            if res in queue.borrowing_limit:
                limits.append(max(nominal + queue.borrowing_limit[res], before[f"{queue.name}/{res}"]))
            if all(res in q.nominal for q in cohort):
                total = sum(q.nominal[res] for q in cohort)
                limits.append(max(total, sum(before[f"{q.name}/{res}"] for q in cohort)))
        if limits and need > min(limits):
            return Pruned(
                "quota",
                f"queue {queue.name!r}: needs {human(need, res)}, more than its limit {human(min(limits), res)}",
            )
    return None


def _prune_groups(pre: Prefiltered) -> None:
    """A gang group starts whole or not at all: one pruned member prunes the rest."""
    groups: dict[str, list[str]] = defaultdict(list)
    for gang in pre.rnd.pending:
        if gang.group:
            groups[gang.group].append(gang.name)
    for group, names in groups.items():
        blocked = [n for n in names if n in pre.pruned]
        if not blocked:
            continue
        for name in names:
            if name not in pre.pruned:
                pre.pruned[name] = Pruned(
                    "group", f"gang group {group!r} cannot start: {', '.join(blocked)} cannot fit"
                )


def _drop_useless_classes(pre: Prefiltered) -> None:
    """Remove classes no kept role can use; their candidate pods become 'stranded'."""
    keys = [RoleKey("pending", gi, ri) for gi in pre.pending for ri in range(len(pre.rnd.pending[gi].roles))]
    keys += [RoleKey("running", gi, ri) for gi in pre.growers for ri in range(len(pre.rnd.running[gi].roles))]
    useful = np.zeros(len(pre.classes), dtype=bool)
    for fit in {id(pre.fits[k]): pre.fits[k] for k in keys}.values():  # shared arrays once
        useful |= fit > 0
    drop_classes(pre, useful)


def drop_classes(pre: Prefiltered, keep: np.ndarray) -> np.ndarray:
    """Keep only the classes where ``keep`` is true; candidate pods on the others become
    'stranded' (kept exactly when their gang stays). Returns the kept old indexes."""
    kept = np.flatnonzero(keep)
    for k in np.flatnonzero(~keep).tolist():
        cls = pre.classes[k]
        pre.nodes_pruned += cls.size
        for (gi, role_name), count in cls.candidates.items():
            stranded = pre.stranded.setdefault(gi, defaultdict(int))
            stranded[role_name] += count * cls.size
    pre.classes = [pre.classes[k] for k in kept.tolist()]
    taken: dict[int, np.ndarray] = {}  # arrays shared among roles stay shared
    for key, fit in pre.fits.items():
        if id(fit) not in taken:
            taken[id(fit)] = fit[kept]
        pre.fits[key] = taken[id(fit)]
    pre.domain_index.clear()
    return kept
