"""The round as numpy arrays: free capacity, eligibility masks, fit counts, quota limits.

Shared by the greedy baseline (:mod:`gangopt.solvers.greedy.engine`) and usable by the prefilter. Every
function is vectorized over nodes: Python loops run over nodes only once, when the arrays are
built, never per pod or per gang.

Conventions
-----------
* **Rows are nodes**, in the round's input order: row ``i`` is ``rnd.cluster.nodes[i]``.
* **Columns are resources**, in the order :func:`resource_names` returns (sorted names).
* **Amounts are int64 milli-units**, exactly as the schema stores them. Nothing is a float, so
  ``free // request`` is the exact number of pods that fit and no comparison drifts.
* A *role* answers for **one pod** of that role: its request vector, its eligible nodes.

Typical use::

    resources = resource_names(rnd)
    free = capacity_matrix(rnd, resources) - running_usage(rnd, resources)
    elig = Eligibility(rnd)
    role = rnd.pending[0].roles[0]
    request = request_vector(role.requests, resources)
    fits = fit_counts(free, request)                      # pods per node
    fits[~elig.mask(role)] = 0                            # only where allowed
    some = fit_counts(free, request, rows=elig.indices(role))   # or: eligible rows only
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from gangopt.memo import derived
from gangopt.quota_tree import quota_rows, row_bounds
from gangopt.schema import NODE_LEVEL, Cluster, MatchExpression, Role, Round, RunningGang, Taint, Toleration

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
IndexArray = npt.NDArray[np.intp]

UNBOUNDED = 1 << 40
"""Fit count of a pod that requests nothing: more than any gang needs, small enough that a
cumulative sum over a million nodes stays far from int64 overflow."""

FIRST_WINDOW = 256
"""Candidates :func:`first_fit` examines first; each further window is four times larger."""

REPELLING_EFFECTS = ("NoSchedule", "NoExecute")
"""Taint effects that make a node ineligible (``PreferNoSchedule`` is only a preference)."""

T = TypeVar("T")
ArrayT = TypeVar("ArrayT", bound=np.ndarray[Any, Any])


def per_cluster(cluster: Cluster, key: Hashable, build: Callable[[], T]) -> T:
    """``build()`` computed once per cluster object and ``key``, kept on the cluster
    (:mod:`gangopt.memo`): a replay decides thousands of rounds on one cluster object. Only for
    values that depend on the cluster alone (and on ``key``), and that nobody modifies (see
    :func:`read_only`)."""
    return derived(cluster, key, (cluster.nodes, cluster.topology_levels), build)


def read_only(array: ArrayT) -> ArrayT:
    """``array``, flagged read-only: it is shared (cached), so writing to it is a bug."""
    array.flags.writeable = False
    return array


def run_starts(values: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Mask of the first element of each run of equal neighbours in ``values`` (sorted: each
    distinct value once). Where a sort is needed anyway this stands in for :func:`numpy.unique`,
    whose hash path on NumPy 2.4 took 15 ms for 60,000 int64 keys in greedy's cheapest room,
    30 times a sort and this mask (docs/benchmarks.md, "h36-domain")."""
    if values.size == 0:
        return np.zeros(0, dtype=np.bool_)
    return np.concatenate(([True], values[1:] != values[:-1]))


def running_pod_count(rnd: Round) -> int:
    """Pods of the round's running gangs, counted once per round (kept on it): the clocks and
    reserves of one solve ask for it six times, each a pass over the 16,262 running gangs of
    fragmented L (4-5 ms)."""
    return derived(rnd, "running-pod-count", (rnd.running,), lambda: sum(map(len, map(_PODS, rnd.running))))


def running_pod_names(rnd: Round) -> frozenset[str]:
    """Names of the round's running pods, collected once per round (kept on it): every plan a
    greedy engine builds (greedy's, the slot placer's, each peer's) names its new pods around
    them (17,911 at fragmented L)."""
    return derived(
        rnd,
        "running-pod-names",
        (rnd.running,),
        lambda: frozenset(map(_NAME, chain.from_iterable(map(_PODS, rnd.running)))),
    )


_PODS = attrgetter("pods")
_NAME = attrgetter("name")


# ----------------------------------------------------------------------------- resources


def resource_names(rnd: Round) -> list[str]:
    """Every resource the round mentions (node capacities, role requests, queue quotas), sorted.

    This is the column order of every matrix in this module.
    """
    names = set(per_cluster(rnd.cluster, "resources", lambda: _capacity_names(rnd.cluster)))
    roles = chain.from_iterable(map(attrgetter("roles"), chain(rnd.running, rnd.pending)))
    names.update(*map(attrgetter("requests"), roles))
    for queue in rnd.queues:
        names.update(queue.nominal)
        names.update(queue.borrowing_limit)
    return sorted(names)


def _capacity_names(cluster: Cluster) -> frozenset[str]:
    """Every resource some node of ``cluster`` has."""
    return frozenset().union(*map(attrgetter("capacity"), cluster.nodes))


def request_vector(requests: Mapping[str, int], resources: Sequence[str]) -> IntArray:
    """A requests mapping (e.g. ``role.requests``) as a vector over ``resources``.

    Raises ``KeyError`` naming the resource if ``requests`` mentions one not in ``resources``
    (use :func:`resource_names` of the same round and this cannot happen).
    """
    vector: IntArray = request_matrix([requests], resources)[0]
    return vector


def request_matrix(requests: Sequence[Mapping[str, int]], resources: Sequence[str]) -> IntArray:
    """Several requests mappings (e.g. the roles of a gang) as rows over ``resources``, shape
    ``(len(requests), resources)``; ``KeyError`` as in :func:`request_vector`.

    Replays build these for every gang of every round, the prefilter for every role at once."""
    if len(requests) <= 8:
        for amounts in requests:
            for name in amounts:
                if name not in resources:
                    raise _unknown(name, resources)
        rows = [[amounts.get(name, 0) for name in resources] for amounts in requests]
        return np.array(rows, dtype=np.int64).reshape(len(requests), len(resources))
    # Many rows (all the roles of a round): one tight loop per resource is ~3x faster.
    known = set(resources)
    for amounts in requests:
        if not known.issuperset(amounts):
            raise _unknown(next(name for name in amounts if name not in known), resources)
    out = np.zeros((len(requests), len(resources)), dtype=np.int64)
    for j, name in enumerate(resources):
        out[:, j] = [amounts.get(name, 0) for amounts in requests]
    return out


def _unknown(name: str, resources: Sequence[str]) -> KeyError:
    """The error for a request of a resource that is not a column."""
    return KeyError(f"resource {name!r} is not among the columns {list(resources)}")


def node_index(rnd: Round) -> dict[str, int]:
    """Node name -> row."""
    return {node.name: i for i, node in enumerate(rnd.cluster.nodes)}


def capacity_matrix(rnd: Round, resources: Sequence[str]) -> IntArray:
    """Allocatable capacity, shape ``(nodes, resources)``; 0 where a node lacks a resource.

    Fortran-ordered (each resource column contiguous; see :func:`fit_counts`), like every
    node matrix of this module; ``copy(order="K")`` keeps that order."""
    capacities = list(map(attrgetter("capacity"), rnd.cluster.nodes))
    out = np.zeros((len(capacities), len(resources)), dtype=np.int64, order="F")
    for j, name in enumerate(resources):  # one column at a time: a tight loop per resource
        out[:, j] = [amounts.get(name, 0) for amounts in capacities]
    return out


def cluster_capacity(rnd: Round, resources: Sequence[str]) -> IntArray:
    """:func:`capacity_matrix`, built once per cluster object and resource list (read-only)."""
    return per_cluster(rnd.cluster, ("capacity", *resources), lambda: read_only(capacity_matrix(rnd, resources)))


def running_usage(rnd: Round, resources: Sequence[str]) -> IntArray:
    """Requests of all running pods per node, shape ``(nodes, resources)`` (before the plan)."""
    index = node_index(rnd)
    out = np.zeros((len(rnd.cluster.nodes), len(resources)), dtype=np.int64, order="F")
    for gang in rnd.running:
        if gang.pods:
            np.add.at(out, *pod_rows(gang, resources, index))
    return out


def pod_rows(gang: RunningGang, resources: Sequence[str], index: Mapping[str, int]) -> tuple[IndexArray, IntArray]:
    """A running gang's pods as (node row per pod, request row per pod); ``index`` is
    :func:`node_index`. The gang must have pods."""
    reqs = {role.name: request_vector(role.requests, resources) for role in gang.roles}
    nodes = np.fromiter((index[p.node] for p in gang.pods), dtype=np.intp, count=len(gang.pods))
    return nodes, np.stack([reqs[p.role] for p in gang.pods])


def free_capacity(rnd: Round, resources: Sequence[str]) -> IntArray:
    """Capacity minus running usage, shape ``(nodes, resources)`` (never negative for a valid round)."""
    return capacity_matrix(rnd, resources) - running_usage(rnd, resources)


def fit_counts(free: IntArray, request: IntArray, cap: int | None = None, rows: IndexArray | None = None) -> IntArray:
    """How many pods of ``request`` fit on each row of ``free``: min over the requested
    resources of ``free // request``.

    ``free`` is ``(n, resources)``, ``request`` is ``(resources,)``; with ``rows``, only those
    rows are computed (in that order), without copying the sub-matrix. A pod that requests
    nothing fits :data:`UNBOUNDED` times. Negative free amounts count as 0. ``cap`` bounds
    every count (pass the pods still needed to keep cumulative sums small).

    Works column by column with a scalar divisor, so it is fastest when ``free`` is
    Fortran-ordered (``np.asfortranarray``): each column is then one contiguous array.
    """
    if rows is not None and 4 * rows.size > free.shape[0]:
        return fit_counts(free, request, cap).take(rows)  # contiguous columns beat many gathers
    counts: IntArray | None = None
    for j in np.flatnonzero(request > 0).tolist():
        column = free[:, j] if rows is None else free[:, j].take(rows)
        quotient = column // request[j]
        if counts is None:
            counts = quotient
        else:
            np.minimum(counts, quotient, out=counts)
    if counts is None:
        counts = np.full(free.shape[0] if rows is None else rows.size, UNBOUNDED, dtype=np.int64)
    else:
        np.maximum(counts, 0, out=counts)
    if cap is not None:
        np.minimum(counts, cap, out=counts)
    return counts


def first_fit(
    free: IntArray, candidates: IndexArray, request: IntArray, count: int, *, partial: bool = False
) -> tuple[IndexArray, IntArray] | None:
    """Place ``count`` pods of ``request`` first-fit on the rows ``candidates`` (in that order)
    of ``free``, filling each row before moving on. **Mutates** ``free`` (subtracts what it
    placed) and returns ``(rows, pods_per_row)`` for the rows that got pods.

    Returns ``None`` (and leaves ``free`` untouched) when fewer than ``count`` pods fit, unless
    ``partial``: then it places as many as fit (possibly none). One cumulative sum over the
    fit counts finds the cut: no Python loop over nodes.
    """
    empty = (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64))
    if count <= 0:
        return empty
    # Look at growing windows of candidates: a gang that fits early never scans the cluster.
    pieces: list[IntArray] = []
    seen, found, window = 0, 0, FIRST_WINDOW
    while seen < candidates.size and found < count:
        part = fit_counts(free, request, cap=count, rows=candidates[seen : seen + window])
        pieces.append(part)
        found += int(part.sum())
        seen += window
        window *= 4
    if not pieces:
        return empty if partial else None
    fits = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    candidates = candidates[: fits.size]
    cum = np.cumsum(fits)
    total = int(cum[-1])
    if total < count:
        if not partial:
            return None
        count = total
        if count == 0:
            return empty
    cut = int(np.searchsorted(cum, count))
    take = fits[: cut + 1].copy()
    take[cut] -= int(cum[cut]) - count
    rows = candidates[: cut + 1]
    used = take > 0
    rows, take = rows[used], take[used]
    free[rows] -= take[:, None] * request[None, :]
    return rows, take


# ----------------------------------------------------------------------------- topology


def domain_codes(rnd: Round, level: str) -> tuple[IntArray, list[str]]:
    """Per node, the index of its domain at ``level``; and the domain names, numbered in
    first-seen node order (the same numbering as :meth:`gangopt.topology.Topology.codes`,
    without building the graph). At level ``node`` every node is its own domain."""
    if level == NODE_LEVEL:
        names = [n.name for n in rnd.cluster.nodes]
        return np.arange(len(names), dtype=np.int64), names
    seen: dict[str, int] = {}
    codes = np.fromiter(
        (seen.setdefault(n.topology[level], len(seen)) for n in rnd.cluster.nodes),
        dtype=np.int64,
        count=len(rnd.cluster.nodes),
    )
    return codes, list(seen)


def domain_members(codes: IntArray, n_domains: int) -> list[IndexArray]:
    """For codes from :func:`domain_codes`, the rows of each domain, each in input order."""
    order = np.argsort(codes, kind="stable").astype(np.intp)
    bounds = np.searchsorted(codes[order], np.arange(n_domains + 1))
    return [order[bounds[d] : bounds[d + 1]] for d in range(n_domains)]


# ----------------------------------------------------------------------------- eligibility


class LabelColumns:
    """Node labels as one integer column per label key: the code of the node's value, or -1
    where the node lacks the key. Selector and affinity tests become array comparisons."""

    def __init__(self, rnd: Round) -> None:
        self.size = len(rnd.cluster.nodes)
        self._labels = [node.labels for node in rnd.cluster.nodes]
        self._values: dict[str, dict[str, int]] = {}
        self._columns: dict[str, IntArray] = {}

    def column(self, key: str) -> IntArray:
        """Value codes of ``key`` per node (-1: no such label), built on first use: a round
        asks about a few label keys, and its nodes may carry dozens. Do not modify."""
        column = self._columns.get(key)
        if column is None:
            codes = self._values.setdefault(key, {})
            values = [labels.get(key) for labels in self._labels]
            column = np.fromiter(
                (-1 if v is None else codes.setdefault(v, len(codes)) for v in values), dtype=np.int64, count=self.size
            )
            self._columns[key] = column
        return column

    def isin(self, key: str, values: Sequence[str]) -> BoolArray:
        """Nodes whose label ``key`` has one of ``values`` (False where the label is absent)."""
        column = self.column(key)
        known = self._values[key]
        codes = [known[v] for v in values if v in known]
        if not codes:
            return np.zeros(self.size, dtype=np.bool_)
        return np.isin(column, np.asarray(codes, dtype=np.int64))

    def exists(self, key: str) -> BoolArray:
        """Nodes that have the label ``key``."""
        return self.column(key) >= 0

    def matches(self, term: MatchExpression) -> BoolArray:
        """Nodes where a required node-affinity term holds (Kubernetes semantics: ``NotIn``
        and ``DoesNotExist`` hold where the label is absent)."""
        if term.operator == "In":
            return self.isin(term.key, term.values)
        if term.operator == "NotIn":
            return ~self.isin(term.key, term.values)
        if term.operator == "Exists":
            return self.exists(term.key)
        return ~self.exists(term.key)  # DoesNotExist


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes ``ToleratesTaint``: no effect matches every effect; an empty key matches every
    key; ``Exists`` matches any value, ``Equal`` only the same value."""
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    return toleration.operator == "Exists" or toleration.value == taint.value


RoleSignature = tuple[
    tuple[tuple[str, str], ...],
    tuple[tuple[str, str, tuple[str, ...]], ...],
    tuple[tuple[str | None, str, str, str | None], ...],
]


UNCONSTRAINED: RoleSignature = ((), (), ())
"""The signature of a role without selector, affinity or tolerations (most roles)."""


def role_signature(role: Role) -> RoleSignature:
    """The placement constraints of a role as a hashable key: roles with equal signatures have
    equal eligibility masks (requests are not part of it)."""
    if not (role.node_selector or role.node_affinity or role.tolerations):
        return UNCONSTRAINED  # asked for every gang of every round: skip building the tuples
    return (
        tuple(sorted(role.node_selector.items())),
        tuple((t.key, t.operator, tuple(t.values)) for t in role.node_affinity),
        tuple((t.key, t.operator, t.value, t.effect) for t in role.tolerations),
    )


class Eligibility:
    """Which nodes a pod of each role may use (rule 3 of docs/plan-semantics.md): schedulable,
    labels matching ``node_selector`` and every ``node_affinity`` term, and every
    ``NoSchedule``/``NoExecute`` taint tolerated.

    Built once per round (labels become :class:`LabelColumns`, each distinct repelling taint
    one node mask); :meth:`mask` is then computed once per distinct :func:`role_signature`
    and cached, so thousands of gangs with a handful of constraint sets cost a handful of masks.
    """

    def __init__(self, rnd: Round) -> None:
        self.size = len(rnd.cluster.nodes)
        self.schedulable: BoolArray = np.fromiter(
            (n.schedulable for n in rnd.cluster.nodes), dtype=np.bool_, count=self.size
        )
        self.labels = LabelColumns(rnd)
        rows: dict[Taint, list[int]] = defaultdict(list)
        for i, node in enumerate(rnd.cluster.nodes):
            for taint in node.taints:
                if taint.effect in REPELLING_EFFECTS:
                    rows[taint].append(i)
        self.taints: dict[Taint, BoolArray] = {}
        for taint, idx in rows.items():
            mask = np.zeros(self.size, dtype=np.bool_)
            mask[np.asarray(idx, dtype=np.intp)] = True
            self.taints[taint] = mask
        self._masks: dict[RoleSignature, BoolArray] = {}
        self._indices: dict[RoleSignature, IndexArray] = {}

    def mask(self, role: Role) -> BoolArray:
        """Boolean mask over nodes where a pod of ``role`` may go (read-only, cached)."""
        key = role_signature(role)
        cached = self._masks.get(key)
        if cached is not None:
            return cached
        mask = self.schedulable.copy()
        for label, value in role.node_selector.items():
            mask &= self.labels.isin(label, [value])
        for term in role.node_affinity:
            mask &= self.labels.matches(term)
        for taint, nodes in self.taints.items():
            if not any(tolerates(t, taint) for t in role.tolerations):
                mask &= ~nodes
        mask.flags.writeable = False
        self._masks[key] = mask
        return mask

    def indices(self, role: Role) -> IndexArray:
        """Rows of the eligible nodes, ascending (read-only, cached)."""
        key = role_signature(role)
        cached = self._indices.get(key)
        if cached is None:
            cached = np.flatnonzero(self.mask(role)).astype(np.intp)
            cached.flags.writeable = False
            self._indices[key] = cached
        return cached

    def explain(self, role: Role) -> str:
        """Why no node is eligible for ``role``, naming the first constraint that empties the
        node set (e.g. ``"no schedulable node has label gpu-type=h100"``)."""
        mask = self.schedulable.copy()
        if not len(mask):
            return "the cluster has no nodes"
        if not mask.any():
            return "every node is cordoned"
        for label, value in role.node_selector.items():
            mask &= self.labels.isin(label, [value])
            if not mask.any():
                return f"no schedulable node has label {label}={value}"
        for term in role.node_affinity:
            mask &= self.labels.matches(term)
            if not mask.any():
                values = f" {list(term.values)}" if term.values else ""
                return f"no schedulable node satisfies node affinity {term.key} {term.operator}{values}"
        if mask.any() and not self.mask(role).any():
            return "every matching node has a NoSchedule/NoExecute taint the role does not tolerate"
        return "no node is eligible"


# ----------------------------------------------------------------------------- quotas


@dataclass(frozen=True)
class QuotaLimits:
    """Every quota limit of a round (the Queue semantics of :class:`gangopt.schema.Queue`) as
    ``C`` linear constraints over per-queue usage: constraint ``c`` sums resource
    ``resource[c]`` over the queues with ``members[q, c]`` and bounds it by ``limit[c]``.

    * a queue without cohort: its own usage <= nominal, per resource listed in ``nominal``;
    * a queue in a cohort, per resource in ``nominal`` *and* ``borrowing_limit``: its usage <=
      nominal + borrowing limit (no borrowing limit: no per-queue bound);
    * a cohort, per resource: usage of the members that list the resource in ``nominal`` <=
      the sum of their nominal amounts; in a cohort tree one or more rows per cohort that
      holds a limit (rule 6 over the tree, :func:`gangopt.quota_tree.quota_rows`).

    Resources a queue does not list are unlimited for it. Gangs of queues not in
    ``rnd.queues`` are unlimited. Usage already over a limit before the round is tolerated as
    long as the plan does not raise it: use :meth:`effective_limit` for that.
    """

    queues: list[str]
    members: BoolArray
    """Shape ``(queues, C)``."""
    resource: IndexArray
    """Shape ``(C,)``: column of the resource each constraint bounds."""
    limit: IntArray
    """Shape ``(C,)``, milli-units."""
    labels: list[str]
    """Per constraint, a name for messages: ``"queue a"``, ``"cohort c"``."""

    @property
    def size(self) -> int:
        return len(self.labels)

    def queue_row(self, queue: str) -> int | None:
        """Row of ``queue`` in :attr:`members`, or None if the round does not define it."""
        try:
            return self.queues.index(queue)
        except ValueError:
            return None

    def pod_usage(self, queue: str, request: IntArray) -> IntArray:
        """What one pod of ``request`` in ``queue`` adds to each constraint, shape ``(C,)``; for
        requests of shape ``(n, resources)`` (one row per role), shape ``(n, C)``."""
        row = self.queue_row(queue) if self.size else None
        if row is None:
            return np.zeros((*request.shape[:-1], self.size), dtype=np.int64)
        return np.where(self.members[row], request[..., self.resource], 0).astype(np.int64)

    def usage(self, per_queue: IntArray) -> IntArray:
        """Constraint usage, shape ``(C,)``, from per-queue usage of shape ``(queues, resources)``."""
        if self.size == 0:
            return np.zeros(0, dtype=np.int64)
        out: IntArray = np.where(self.members, per_queue[:, self.resource], 0).sum(axis=0).astype(np.int64)
        return out

    def effective_limit(self, before: IntArray) -> IntArray:
        """The bound a plan must keep per constraint, from its usage ``before`` the round:
        ``max(limit, before)``, read per quota node when a lending limit splits one into
        several rows (:func:`gangopt.quota_tree.row_bounds`)."""
        nodes = list(zip(self.labels, self.resource.tolist(), strict=True))
        bounds = row_bounds(self.limit.tolist(), nodes, np.asarray(before).tolist())
        return np.asarray(bounds, dtype=np.int64)


def quota_limits(rnd: Round, resources: Sequence[str]) -> QuotaLimits:
    """The :class:`QuotaLimits` of ``rnd`` (columns as in ``resources``): the rows of
    :func:`gangopt.quota_tree.quota_rows`, per queue and per cohort of a tree."""
    column = {name: i for i, name in enumerate(resources)}
    queues = [q.name for q in rnd.queues]
    row = {name: i for i, name in enumerate(queues)}
    specs = [([row[q] for q in r.queues], column[r.resource], r.limit, r.label) for r in quota_rows(rnd)]
    members_matrix = np.zeros((len(queues), len(specs)), dtype=np.bool_)
    for c, (rows, _, _, _) in enumerate(specs):
        members_matrix[rows, c] = True
    return QuotaLimits(
        queues=queues,
        members=members_matrix,
        resource=np.asarray([s[1] for s in specs], dtype=np.intp),
        limit=np.asarray([s[2] for s in specs], dtype=np.int64),
        labels=[s[3] for s in specs],
    )


def queue_usage(rnd: Round, resources: Sequence[str], queues: Sequence[str]) -> IntArray:
    """Requests of all running pods per queue, shape ``(len(queues), resources)``; gangs of
    queues not in ``queues`` are not counted."""
    row = {name: i for i, name in enumerate(queues)}
    out = np.zeros((len(queues), len(resources)), dtype=np.int64)
    for gang in rnd.running:
        if gang.queue not in row:
            continue
        reqs = {role.name: request_vector(role.requests, resources) for role in gang.roles}
        for pod in gang.pods:
            out[row[gang.queue]] += reqs[pod.role]
    return out
