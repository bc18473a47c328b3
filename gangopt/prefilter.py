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
   pod made room; in the free room alone for a gang that may preempt no candidate); gangs
   that cannot fit even so, or not within one domain of their required level, or not within
   their quota, are pruned with the reason recorded.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from itertools import chain
from operator import attrgetter, itemgetter
from typing import NamedTuple, TypeVar, cast

import numpy as np

from gangopt import arrays
from gangopt.quantities import human
from gangopt.quota_tree import quota_rows, row_bounds
from gangopt.schema import NODE_LEVEL, GangSpec, PendingGang, Role, Round, RunningGang, WaitingCode
from gangopt.scope import Scope
from gangopt.topology import Topology

T = TypeVar("T")

BIG = 1 << 30
"""Pods of a role that requests nothing fit without bound; capped by replicas later."""


class RoleKey(NamedTuple):
    """A role of a gang: ``kind`` is 'pending' or 'running', ``gang`` its index in that list.

    A named tuple rather than a frozen dataclass: the prefilter hashes thousands of these per
    round, and a tuple's hash and constructor run in C."""

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
    required_domains: dict[int, list[str]] = field(default_factory=dict)
    pruned: dict[str, Pruned] = field(default_factory=dict)
    stranded: dict[int, dict[str, int]] = field(default_factory=dict)
    """Candidate gang -> pods per role on nodes left out of the model (kept iff the gang stays)."""
    domain_index: dict[str, tuple[list[str], np.ndarray]] = field(default_factory=dict)
    """Per level: domain names and each class's domain (valid until classes change)."""
    derived: dict[Hashable, object] = field(default_factory=dict)
    """Values later stages derive from this prefiltered round once (:meth:`kept`)."""
    nodes_pruned: int = 0
    seconds: float = 0.0

    def kept(self, key: Hashable, build: Callable[[], T]) -> T:
        """``build()`` once per prefiltered round and ``key``, then the same value: what every
        candidate plan of a solve and the finisher ask for again (tier ceilings, cheap and
        slot bounds, the slot models)."""
        if key not in self.derived:
            self.derived[key] = build()
        return cast(T, self.derived[key])

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
    pods = _RunningPods.of(rnd, topo, resources, candidates)
    masks, role_signature = _eligibility(rnd, topo, growers)
    level = _relevant_level(rnd, growers)
    classes = _classes(rnd, topo, capacity - pods.fixed_usage(), masks, pods, level)
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
    )
    pre.derived[_RUNNING_PODS] = pods
    first = np.fromiter((c.nodes[0] for c in classes), dtype=np.intp, count=len(classes))
    class_masks = np.stack(masks, axis=1)[first] if masks else np.zeros((len(classes), 0), dtype=bool)
    _fit_counts(pre, class_masks, role_signature, _preempting_nothing(rnd, candidates))
    _prune_gangs(pre)
    _drop_useless_classes(pre)
    pre.seconds = time.perf_counter() - start
    return pre


_RUNNING_PODS = "running-pods"
"""Key in ``pre.derived`` of the prefilter's running pods as arrays (:func:`running_pod_rows`)."""


def running_pod_rows(pre: Prefiltered) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per running pod (the round's order, gang by gang): its node row, its gang's index and
    its requests over ``pre.resources`` (read only): the arrays the prefilter built, kept on
    ``pre`` so that the slot models' columns do not build them again (three passes over the
    16,262 running gangs of L 0.75 and their roles' request table: 0.03 CPU-s)."""
    pods = pre.derived.get(_RUNNING_PODS)
    if not isinstance(pods, _RunningPods):
        pods = _RunningPods.of(pre.rnd, pre.topo, pre.resources, pre.candidates)
        pre.derived[_RUNNING_PODS] = pods
    node, gang = pods.node, pods.gang
    requests = pods.requests if len(gang) else np.zeros((0, len(pre.resources)), dtype=np.int64)
    for array in (node, gang, requests):
        array.flags.writeable = False
    return node, gang, requests


def _movable_running(rnd: Round) -> tuple[list[int], list[int]]:
    """Running gangs that may lose pods (preemptible and outranked by someone who may want
    their room) and those that may gain pods (elastic, below their maximum)."""
    running = rnd.running
    sizes = zip(map(len, map(_PODS, running)), _maxima(running), strict=True)
    growers = [i for i, (pods, most) in enumerate(sizes) if pods < most and not _sliced(running[i])]
    if not rnd.policy.preemption:
        return [], growers
    top = max([*map(_PRIORITY, rnd.pending), *(running[i].priority for i in growers)], default=None)
    if top is None:
        return [], growers
    if Scope(rnd).beyond_priority:  # a queue may reclaim at any priority (Queue.preemption)
        return [i for i, gang in enumerate(running) if gang.preemptible], growers
    ranks = zip(map(attrgetter("preemptible"), running), map(_PRIORITY, running), strict=True)
    candidates = [i for i, (preemptible, priority) in enumerate(ranks) if preemptible and priority < top]
    return candidates, growers


_PODS = attrgetter("pods")
_NODES = attrgetter("nodes")
_ROLES = attrgetter("roles")
_PRIORITY = attrgetter("priority")


def _maxima(gangs: list[RunningGang]) -> list[int]:
    """Each gang's :attr:`~gangopt.schema.GangSpec.maximum`, for all gangs at once: the cached
    property costs a few microseconds per first read, and a 16,384-node round has 7,290
    running gangs, none of which has been asked before the first round."""
    if not gangs:
        return []
    roles = list(map(_ROLES, gangs))
    replicas = np.fromiter(map(attrgetter("replicas"), chain.from_iterable(roles)), dtype=np.int64)
    starts = np.cumsum([0, *map(len, roles[:-1])])
    totals = np.add.reduceat(replicas, starts).tolist()
    ceilings = map(attrgetter("max_members"), gangs)
    return [min(total, most) if most else total for total, most in zip(totals, ceilings, strict=True)]


def _sliced(gang: RunningGang) -> bool:
    """Running gangs split in slices are never resized: a resize would have to move whole slices."""
    return gang.topology is not None and gang.topology.slice_level is not None


@dataclass
class _RunningPods:
    """Every running pod as array rows, built in one pass over the running gangs.

    Arrays rather than per-node dicts: a 16,384-node round has ~15,000 running pods, and
    thousands of small dicts cost more to build (and to garbage-collect) than the numpy
    grouping that replaces them."""

    node: np.ndarray
    """Per pod, its node row."""
    gang: np.ndarray
    """Per pod, its running gang's index."""
    role_row: np.ndarray
    """Per pod, its role's row in :attr:`role_names` (roles of all gangs, in round order)."""
    role_names: list[str]
    """Names of the roles of all running gangs, in round order."""
    requests: np.ndarray
    """Per pod, its requests (rows over the resources)."""
    candidate: np.ndarray
    """Per pod, whether its gang may lose pods."""
    size: int
    """Nodes in the cluster."""

    @classmethod
    def of(cls, rnd: Round, topo: Topology, resources: list[str], candidates: list[int]) -> _RunningPods:
        """Flat comprehensions over all pods and roles, then numpy: no per-gang dicts."""
        running = rnd.running
        index = topo.node_index
        gang_pods = list(map(_PODS, running))
        gang_roles = list(map(_ROLES, running))
        pod_count = np.fromiter(map(len, gang_pods), dtype=np.intp, count=len(running))
        role_count = np.fromiter(map(len, gang_roles), dtype=np.intp, count=len(running))
        gang = np.repeat(np.arange(len(running), dtype=np.intp), pod_count)
        pods = list(chain.from_iterable(gang_pods))
        roles = list(chain.from_iterable(gang_roles))
        node = np.fromiter(map(index.__getitem__, map(attrgetter("node"), pods)), dtype=np.intp, count=len(pods))
        # A pod names its role: match (gang, role name) pairs through one name numbering.
        role_names = list(map(attrgetter("name"), roles))
        pod_roles = list(map(attrgetter("role"), pods))
        names = {name: k for k, name in enumerate(dict.fromkeys(chain(pod_roles, role_names)))}
        pod_name = np.fromiter(map(names.__getitem__, pod_roles), dtype=np.intp, count=len(pods))
        role_name = np.fromiter(map(names.__getitem__, role_names), dtype=np.intp, count=len(roles))
        role_gang = np.repeat(np.arange(len(running), dtype=np.intp), role_count)
        role_key = role_gang * len(names) + role_name  # ascending in gang order; names may repeat
        order = np.argsort(role_key, kind="stable")
        # The last role of that name, as a name -> position dict of the gang's roles would give.
        row = order[np.searchsorted(role_key[order], gang * len(names) + pod_name, side="right") - 1]
        table = arrays.request_matrix(list(map(attrgetter("requests"), roles)), resources)
        movable = np.zeros(len(running), dtype=bool)
        movable[np.asarray(candidates, dtype=np.intp)] = True
        return cls(
            node=node,
            gang=gang,
            role_row=row,
            role_names=role_names,
            requests=table[row],
            candidate=movable[gang],
            size=len(topo.node_names),
        )

    def fixed_usage(self) -> np.ndarray:
        """Per node, the requests of pods that stay whatever happens (non-candidates)."""
        fixed = np.zeros((self.size, self.requests.shape[1]), dtype=np.int64)
        stay = ~self.candidate
        np.add.at(fixed, self.node[stay], self.requests[stay])
        return fixed

    def candidate_usage(self) -> np.ndarray:
        """Per node, the requests of the candidates' pods (what preemption could free there)."""
        usage = np.zeros((self.size, self.requests.shape[1]), dtype=np.int64)
        np.add.at(usage, self.node[self.candidate], self.requests[self.candidate])
        return usage

    def busy(self) -> np.ndarray:
        """Which nodes run any pod before the round."""
        busy = np.zeros(self.size, dtype=bool)
        busy[self.node] = True
        return busy

    def candidate_groups(self) -> _Groups:
        """Candidate pods grouped by (node, gang, role), sorted by node, gang and role."""
        picked = np.flatnonzero(self.candidate)
        node, gang, role = self.node[picked], self.gang[picked], self.role_row[picked]
        order = np.lexsort((role, gang, node))  # stable: each group's first pod comes first
        node, gang, role, picked = node[order], gang[order], role[order], picked[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (node[1:] != node[:-1]) | (gang[1:] != gang[:-1]) | (role[1:] != role[:-1])
        starts = np.flatnonzero(new)
        count = np.diff(np.append(starts, len(order)))
        return _Groups(node[starts], gang[starts], role[starts], count, picked[starts], self.role_names)


@dataclass
class _Groups:
    """Candidate pods grouped by (node, gang, role): one entry per group."""

    node: np.ndarray
    gang: np.ndarray
    role_row: np.ndarray
    """The role's row in ``role_names`` (one row per role of each running gang)."""
    count: np.ndarray
    """Pods in the group."""
    first: np.ndarray
    """The group's first pod, as a position among the round's running pods."""
    role_names: list[str]


def _eligibility(rnd: Round, topo: Topology, growers: list[int]) -> tuple[list[np.ndarray], dict[RoleKey, int]]:
    """One boolean node mask per distinct eligibility signature, and each role's signature.

    Running gangs with a required topology level may only grow inside their current domain,
    which makes their mask specific to them.
    """
    # The one reading of cordons, selectors, affinity and taints (shared with every solver).
    elig = arrays.per_cluster(rnd.cluster, "eligibility", lambda: arrays.Eligibility(rnd))
    masks: list[np.ndarray] = []
    by_signature: dict[tuple[object, ...], int] = {}
    role_signature: dict[RoleKey, int] = {}
    for kind, gangs in (("pending", list(enumerate(rnd.pending))), ("running", [(i, rnd.running[i]) for i in growers])):
        for gi, gang in gangs:
            restrict = _growth_domain(rnd, topo, gang) if kind == "running" else None
            for ri, role in enumerate(gang.roles):
                sig = (arrays.role_signature(role), restrict)
                if sig not in by_signature:
                    mask = elig.mask(role).copy()
                    if restrict is not None:
                        level, domain = restrict
                        codes, names = topo.codes(level)
                        # A gang already spread over several domains ("") may grow nowhere.
                        mask &= codes == names.index(domain) if domain in names else False
                    by_signature[sig] = len(masks)
                    masks.append(mask)
                role_signature[RoleKey(kind, gi, ri)] = by_signature[sig]
    return masks, role_signature


def _growth_domain(rnd: Round, topo: Topology, gang: PendingGang | RunningGang) -> tuple[str, str] | None:
    """For a running gang with a required level: the one domain its pods are in, or ``""``
    when they already span several (the round allows it; such a gang cannot grow)."""
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
    rnd: Round,
    topo: Topology,
    fixed_free: np.ndarray,
    masks: list[np.ndarray],
    pods: _RunningPods,
    level: str | None,
) -> list[NodeClass]:
    """Group nodes by the key described in the module docstring: classes in order of their
    first node, members in node order."""
    n = len(topo.node_names)
    if n == 0:
        return []
    busy = pods.busy()
    groups = pods.candidate_groups()
    domain = topo.codes(level)[0] if level else np.zeros(n, dtype=np.int64)
    signature = _candidate_signatures(n, groups.node, groups.gang, groups.role_row, groups.count)
    columns = [fixed_free, signature[:, None], domain[:, None], busy[:, None]]
    if masks:
        columns.append(np.stack(masks, axis=1))
    class_of = _row_groups(np.concatenate(columns, axis=1, dtype=np.int64))
    members = np.argsort(class_of, kind="stable")
    ends = np.cumsum(np.bincount(class_of)).tolist()
    starts = [0, *ends[:-1]]
    reps = members[starts]
    node_lists = members.tolist()
    levels = topo.levels[: topo.depth(level) + 1] if level else []
    domains = _rep_domains(topo, levels, reps)
    nodes = [node_lists[a:b] for a, b in zip(starts, ends, strict=True)]
    idle = (~busy[reps]).tolist()
    # NodeClass(nodes, free, candidates, domains, idle), positionally: thousands of classes.
    return list(map(NodeClass, nodes, _rows(fixed_free, reps), _rep_candidates(reps, groups), domains, idle))


def _rep_domains(topo: Topology, levels: list[str], reps: np.ndarray) -> list[dict[str, str]]:
    """Per representative node, its domain name at each of ``levels``. Classes in the same
    domains share one (read-only) dict, as the encoder's per-node classes already do."""
    rows = reps.tolist()
    if not levels:
        return [{} for _ in rows]
    paths = list(zip(*(topo.domains_of(lv, rows) for lv in levels), strict=True))
    shared = {names: dict(zip(levels, names, strict=True)) for names in dict.fromkeys(paths)}
    return list(map(shared.__getitem__, paths))


def _rows(matrix: np.ndarray, rows: np.ndarray) -> list[np.ndarray]:
    """The given rows of ``matrix``, each a contiguous row of one new array."""
    return list(np.ascontiguousarray(matrix[rows]))


def _row_groups(key: np.ndarray) -> np.ndarray:
    """Per row of ``key``, the number of its group of equal rows; groups numbered in order of
    their first row. A lexsort and one comparison of neighbours: several times faster than
    ``np.unique(axis=0)``, which sorts rows as opaque byte strings."""
    n = key.shape[0]
    if key.shape[1] == 0:
        return np.zeros(n, dtype=np.intp)  # no columns: every row equals every other
    order = np.lexsort(key.T)
    ordered = key[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    first = order[new]  # the sort is stable: each group's first row comes first
    rank = np.empty(len(first), dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    group = np.empty(n, dtype=np.intp)
    group[order] = rank[np.cumsum(new) - 1]
    return group


def _candidate_signatures(
    n: int, node: np.ndarray, gang: np.ndarray, role: np.ndarray, count: np.ndarray
) -> np.ndarray:
    """Per node, an id of its candidate pods, i.e. of its (gang, role, count) groups; 0 for
    nodes without any. Nodes with as many groups are compared as rows of one matrix."""
    ids = np.zeros(n, dtype=np.int64)
    if not len(node):
        return ids
    nodes, start, length = np.unique(node, return_index=True, return_counts=True)
    triples = np.stack([gang, role, count], axis=1)
    taken = 1
    for k in np.unique(length).tolist():
        which = np.flatnonzero(length == k)
        rows = triples[start[which][:, None] + np.arange(k)].reshape(len(which), 3 * k)
        group = _row_groups(rows)
        ids[nodes[which]] = taken + group
        taken += int(group.max()) + 1
    return ids


def _rep_candidates(reps: np.ndarray, groups: _Groups) -> list[dict[tuple[int, str], int]]:
    """Per representative node, its candidate pods as (gang, role name) -> count, keys in the
    order the round lists those pods."""
    order = np.lexsort((groups.first, groups.node))
    node = groups.node[order]
    lo = np.searchsorted(node, reps, side="left")
    hi = np.searchsorted(node, reps, side="right")
    # The groups of the representatives only, one run per representative, in one flat array.
    length = hi - lo
    ends = np.cumsum(length)
    take = order[np.repeat(lo - (ends - length), length) + np.arange(int(ends[-1]) if len(ends) else 0)]
    role_names = map(groups.role_names.__getitem__, groups.role_row[take].tolist())
    keys = zip(groups.gang[take].tolist(), role_names, strict=True)
    pairs = list(zip(keys, groups.count[take].tolist(), strict=True))  # ((gang, role name), count)
    bounds = ends.tolist()
    return [dict(pairs[a:b]) for a, b in zip([0, *bounds[:-1]], bounds, strict=True)]


def role_named(gang: GangSpec, name: str) -> Role:
    """The role called ``name`` (running pods name their role)."""
    return next(r for r in gang.roles if r.name == name)


def _preempting_nothing(rnd: Round, candidates: list[int]) -> int | None:
    """The highest priority whose gangs may preempt no candidate (None: every gang may preempt
    some, or a queue may preempt outside the priority order: :attr:`Scope.beyond_priority`).
    Without such a queue a gang preempts only strictly lower priorities (rule 5), so a gang at
    or below the lowest candidate's priority preempts nothing."""
    if not candidates or Scope(rnd).beyond_priority:
        return None
    return min(rnd.running[i].priority for i in candidates)


def _fit_counts(
    pre: Prefiltered, class_masks: np.ndarray, role_signature: dict[RoleKey, int], alone: int | None = None
) -> None:
    """Pods per node of each class, per role, if every candidate pod made room, for a gang
    that may preempt some candidate; in the free room alone for a gang of priority ``alone``
    or lower, which may preempt none (:func:`_preempting_nothing`).

    Not only the role's own lower-priority victims: a gang that may preempt some candidate may
    also land where a higher-priority gang evicted others it could have preempted, so a tighter
    count per victim would cut plans off. A gang that may preempt none never lands on a node
    where any pod was evicted or shrunk (rule 5: freed nodes serve preemptors only), so the
    free room is all it can ever use. On the fragmented 16,384-node round (busy 0.75, no node
    wholly free) 194 priority-0 gangs of whole-node pods could start nowhere and were kept:
    the node-class bound of priority 0 counted 1,167 GPU-eq of them (docs/benchmarks.md,
    "Impossible gangs pruned").
    """
    room = np.array([c.free for c in pre.classes], dtype=np.int64).reshape(len(pre.classes), len(pre.resources))
    room = np.asfortranarray(np.maximum(room, 0))
    free: np.ndarray | None = None
    anywhere = np.asarray(class_masks.any(axis=0), dtype=bool).tolist()
    keys = list(role_signature)
    if not keys:
        return
    signatures = list(role_signature.values())
    gangs: dict[str, list[PendingGang] | list[RunningGang]] = {"pending": pre.rnd.pending, "running": pre.rnd.running}
    roles = [gangs[kind][gang].roles[role] for kind, gang, role in keys]
    replicas = list(map(attrgetter("replicas"), roles))
    table = arrays.request_matrix(list(map(attrgetter("requests"), roles)), pre.resources)
    lone = [alone is not None and gangs[kind][gang].priority <= alone for kind, gang, _ in keys]
    if any(lone):
        first_nodes = np.fromiter((c.nodes[0] for c in pre.classes), dtype=np.intp, count=len(pre.classes))
        taken = cast(_RunningPods, pre.derived[_RUNNING_PODS]).candidate_usage()[first_nodes]
        free = np.asfortranarray(np.maximum(room - taken, 0))
    # Roles share a handful of shapes: one array per (requests, eligibility, replicas, free room
    # alone), shared read-only by every role that has it (16,384 nodes: 9,000 roles, a few
    # hundred shapes).
    shape = _row_groups(np.column_stack([_row_groups(table), signatures, replicas, lone]))
    _, first = np.unique(shape, return_index=True)  # shapes are numbered in order of first role
    fits = [
        _fit_array(free if lone[i] and free is not None else room, class_masks[:, signatures[i]], table[i], replicas[i])
        for i in first.tolist()
    ]
    pre.requests.update(zip(keys, table, strict=True))
    pre.eligible_anywhere.update(zip(keys, map(anywhere.__getitem__, signatures), strict=True))
    pre.fits.update(zip(keys, map(fits.__getitem__, shape.tolist()), strict=True))


def _fit_array(room: np.ndarray, eligible: np.ndarray, request: np.ndarray, replicas: int) -> np.ndarray:
    """Pods of one role shape per node of each class (0 where not eligible), at most ``replicas``."""
    return np.where(eligible, arrays.fit_counts(room, request, cap=replicas), 0).astype(np.int64)


class _FitSums:
    """What pruning asks of a fit array, computed once per array: roles of one shape share
    their fit array (a few hundred arrays for thousands of roles), so the answers are shared too.

    Keyed by ``id(fit)``: every array stays alive in ``pre.fits`` while pruning runs."""

    def __init__(self, pre: Prefiltered) -> None:
        self.pre = pre
        self.sizes = np.fromiter(map(len, map(_NODES, pre.classes)), dtype=np.int64, count=len(pre.classes))
        self._positive: dict[int, bool] = {}
        self._total: dict[tuple[int, int], int] = {}
        self._by_domain: dict[tuple[int, int, str], np.ndarray] = {}

    def positive(self, fit: np.ndarray) -> bool:
        """Whether a pod fits on some class."""
        hit = self._positive.get(id(fit))
        if hit is None:
            hit = self._positive[id(fit)] = bool((fit > 0).any())
        return hit

    def total(self, fit: np.ndarray, replicas: int) -> int:
        """Pods of the role that fit in the whole cluster, at most ``replicas``."""
        key = (id(fit), replicas)
        hit = self._total.get(key)
        if hit is None:
            hit = self._total[key] = int(np.minimum(self.sizes * fit, replicas).sum())
        return hit

    def by_domain(self, fit: np.ndarray, replicas: int, level: str) -> np.ndarray:
        """Pods of the role that fit in each domain of ``level``, at most ``replicas`` (float,
        from the weighted bincount; callers cast)."""
        key = (id(fit), replicas, level)
        hit = self._by_domain.get(key)
        if hit is None:
            names, domain_of = _domain_index(self.pre, level)
            room = np.bincount(domain_of, weights=self.sizes * fit, minlength=len(names))
            hit = self._by_domain[key] = np.minimum(room, replicas)
        return hit


def _prune_gangs(pre: Prefiltered) -> None:
    """Drop pending gangs that cannot reach their minimum, and growers that cannot grow."""
    rnd = pre.rnd
    sums = _FitSums(pre)
    before = _usage_before(rnd) if rnd.queues else None
    roles: list[list[tuple[RoleKey, np.ndarray]]] = [[] for _ in rnd.pending]
    for key, fit in pre.fits.items():  # each gang's roles in order, without hashing RoleKeys
        if key.kind == "pending":
            roles[key.gang].append((key, fit))
    memo: dict[tuple[object, ...], _RoomVerdict] = {}
    for gi, gang in enumerate(rnd.pending):
        verdict = _pending_verdict(pre, gi, gang, roles[gi], sums, before, memo)
        if verdict is not None:
            pre.pruned[gang.name] = verdict
    _prune_groups(pre)
    pre.pending = [i for i, g in enumerate(rnd.pending) if g.name not in pre.pruned]
    # A gang pruned with its group after its own verdict found domains must not keep them:
    # stale domains made the memoized and the fresh verdicts disagree (issue 18, bug 2).
    kept = set(pre.pending)
    for gi in [k for k in pre.required_domains if k not in kept]:
        del pre.required_domains[gi]
    pre.growers = [
        gi
        for gi in pre.growers
        if any(
            sums.positive(pre.fits[RoleKey("running", gi, ri)])
            and rnd.running[gi].roles[ri].replicas > _count(rnd, gi, ri)
            for ri in range(len(rnd.running[gi].roles))
        )
    ]


def _count(rnd: Round, gi: int, ri: int) -> int:
    gang = rnd.running[gi]
    return sum(1 for p in gang.pods if p.role == gang.roles[ri].name)


@dataclass(frozen=True)
class _RoomVerdict:
    """What fit arrays say of a gang, before quotas: the first required role without room, or
    the pods the cluster offers when short of the minimum, or the domains of its required
    level that can hold it (None: no required level)."""

    blocked_role: int | None = None
    short_of: int | None = None
    short_role: int | None = None
    """A role whose own minimum does not fit (then ``role_room`` is the room it has)."""
    role_room: int = 0
    feasible: list[str] | None = None
    best: int = 0


def _pending_verdict(
    pre: Prefiltered,
    gi: int,
    gang: PendingGang,
    fits: list[tuple[RoleKey, np.ndarray]],
    sums: _FitSums,
    before: dict[str, int] | None,
    memo: dict[tuple[object, ...], _RoomVerdict],
) -> Pruned | None:
    """None if the gang may fit; else why not (eligibility, capacity, topology, quota).
    ``fits`` pairs each role's key with its fit array, in role order.

    The room checks depend only on the gang's shape (fit arrays, replicas, minimums, required
    level), which thousands of gangs share: ``memo`` answers them once per shape."""
    level = gang.topology.required if gang.topology else None
    roles = zip(fits, gang.roles, strict=True)
    shape = (level, gang.min_members, *[(id(fit), r.replicas, r.min_replicas) for (_, fit), r in roles])
    room = memo.get(shape)
    if room is None:
        room = memo[shape] = _room_verdict(pre, gang, fits, sums, level)
    if room.blocked_role is not None:
        key, _ = fits[room.blocked_role]
        role = gang.roles[room.blocked_role]
        return Pruned("eligibility" if not _any_eligible(pre, key) else "capacity", _no_room(pre, gang, role))
    if room.short_role is not None:
        role = gang.roles[room.short_role]
        wants = ", ".join(human(v, r) for r, v in sorted(role.requests.items()) if v) or "no requests"
        return Pruned(
            "capacity",
            f"role {role.name!r} needs {gang.role_minimum(role)} pods ({wants} each); the whole cluster offers "
            f"room for {room.role_room} even after every allowed preemption",
        )
    if room.short_of is not None:
        return Pruned(
            "capacity",
            f"needs {_demand(pre, gang)} for {gang.minimum} pods; the whole cluster offers room for "
            f"{room.short_of} even after every allowed preemption",
        )
    quota = _quota_verdict(pre, gang, before) if before is not None else None
    if quota is not None:
        return quota
    if room.feasible is None:
        return None
    if not room.feasible:
        return Pruned(
            "topology",
            f"needs {gang.minimum} pods ({_demand(pre, gang)}) within one {level}; the best {level} has room "
            f"for {room.best} even after every allowed preemption",
        )
    pre.required_domains[gi] = room.feasible  # shared by the gangs of this shape: read-only
    return None


def _room_verdict(
    pre: Prefiltered,
    gang: PendingGang,
    fits: list[tuple[RoleKey, np.ndarray]],
    sums: _FitSums,
    level: str | None,
) -> _RoomVerdict:
    """The :class:`_RoomVerdict` of one gang shape (see :func:`_pending_verdict`)."""
    for ri, ((_, fit), role) in enumerate(zip(fits, gang.roles, strict=True)):
        if gang.role_minimum(role) > 0 and not sums.positive(fit):
            return _RoomVerdict(blocked_role=ri)
    totals = [sums.total(fit, role.replicas) for (_, fit), role in zip(fits, gang.roles, strict=True)]
    if not _reaches_minimum(gang, totals):
        for ri, (total, role) in enumerate(zip(totals, gang.roles, strict=True)):
            if total < gang.role_minimum(role):
                return _RoomVerdict(short_of=sum(totals), short_role=ri, role_room=total)
        return _RoomVerdict(short_of=sum(totals))
    if level is None:
        return _RoomVerdict()
    names, _ = _domain_index(pre, level)
    # Room per domain and role (bincount over classes), capped by replicas: one row per role.
    counts = np.stack(
        [sums.by_domain(fit, r.replicas, level) for (_, fit), r in zip(fits, gang.roles, strict=True)]
    ).astype(np.int64)
    role_min = np.array([gang.role_minimum(r) for r in gang.roles], dtype=np.int64)[:, None]
    ok = (counts >= role_min).all(axis=0) & (counts.sum(axis=0) >= gang.minimum)
    feasible = [names[d] for d in np.flatnonzero(ok).tolist()]
    best = int(counts.sum(axis=0).max()) if len(names) else 0
    return _RoomVerdict(feasible=feasible, best=best)


def _domain_index(pre: Prefiltered, level: str) -> tuple[list[str], np.ndarray]:
    """Domain names at ``level`` and each class's domain index (cached per level)."""
    if level not in pre.domain_index:
        domains = list(map(itemgetter(level), map(attrgetter("domains"), pre.classes)))
        names = sorted(set(domains))
        position = {name: i for i, name in enumerate(names)}
        index = np.fromiter(map(position.__getitem__, domains), dtype=np.int64, count=len(domains))
        pre.domain_index[level] = (names, index)
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


def _usage_before(rnd: Round) -> dict[str, int]:
    """Requests of every running pod, per ``"queue/resource"`` (0 for any other key)."""
    before: dict[str, int] = defaultdict(int)
    for run in rnd.running:
        for name, pods in Counter(pod.role for pod in run.pods).items():
            for res, amount in role_named(run, name).requests.items():
                before[f"{run.queue}/{res}"] += amount * pods
    return before


def _quota_verdict(pre: Prefiltered, gang: PendingGang, before: dict[str, int]) -> Pruned | None:
    """A gang whose minimum alone exceeds its queue's or cohort's hard limit can never start.
    Limits already exceeded before the round count at their current usage (a plan may keep
    such usage, so a gang may still start if lower-priority work in the queue makes way).
    ``before`` is :func:`_usage_before`, computed once for all gangs."""
    rnd = pre.rnd
    queue = next((q for q in rnd.queues if q.name == gang.queue), None)
    if queue is None:
        return None
    from gangopt.objective import ObjectiveTerms

    counts = ObjectiveTerms.of(rnd).min_pods(gang)
    # Every row with rule 6's tolerance read at its node (quota_tree.row_bounds).
    all_rows = quota_rows(rnd)
    was = [sum(before[f"{q}/{row.resource}"] for q in row.queues) for row in all_rows]
    bounds = row_bounds([row.limit for row in all_rows], [(row.label, row.resource) for row in all_rows], was)
    rows: dict[str, list[int]] = defaultdict(list)
    for row, bound in zip(all_rows, bounds, strict=True):
        if queue.name in row.queues:
            rows[row.resource].append(bound)
    for res, limits in sorted(rows.items()):
        need = sum(r.requests.get(res, 0) * counts[r.name] for r in gang.roles)
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
    """Remove classes no kept role can use; their candidate pods become 'stranded'.

    Except where an elastic candidate of a queue with a nominal quota runs: rule 5 lets such
    a gang shrink there only to free quota, which stranded pods (kept or lost with the whole
    gang) cannot express, so the model's optimum was no bound (a hypothesis round: greedy
    shrank a pod on a cordoned node, 20.0 on tier 0 against the model's "proven" 0.0,
    tests/test_regressions.py). Those classes hold only kept-pod variables."""
    kept = {"pending": set(pre.pending), "running": set(pre.growers)}
    used = {id(fit): fit for key, fit in pre.fits.items() if key.gang in kept[key.kind]}  # shared arrays once
    useful = np.zeros(len(pre.classes), dtype=bool)
    for fit in used.values():
        useful |= fit > 0
    limited = {q.name for q in pre.rnd.queues if q.nominal}
    shrinkable = {gi for gi in pre.candidates if pre.rnd.running[gi].queue in limited and pre.rnd.running[gi].elastic}
    if shrinkable:
        for k, cls in enumerate(pre.classes):
            useful[k] |= any(gi in shrinkable for gi, _ in cls.candidates)
    drop_classes(pre, useful)


def restricted(pre: Prefiltered, keep: np.ndarray) -> tuple[Prefiltered, np.ndarray]:
    """A copy of ``pre`` with only the classes where ``keep`` is true (see
    :func:`drop_classes`), and the kept old indexes; ``pre`` itself is left as it was, so the
    stages after the model (reasons, bounds) still see the whole round."""
    view = replace(
        pre,
        classes=list(pre.classes),
        fits=dict(pre.fits),
        stranded={gi: defaultdict(int, roles) for gi, roles in pre.stranded.items()},
        domain_index={},
        derived={},
    )
    return view, drop_classes(view, keep)


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
