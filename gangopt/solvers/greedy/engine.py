"""Greedy baseline: one round decided the way Kubernetes gang plugins decide it.

:func:`greedy` serves three purposes: the hint CP-SAT starts from, the fallback when CP-SAT
finds nothing in time, and ``--solver greedy`` for comparisons. Its plans obey every rule of
docs/plan-semantics.md; it is deterministic (same round, same plan) and vectorized with numpy
(see :mod:`gangopt.arrays`), so 16,384 nodes x 2,000 pending gangs take seconds.

Procedure (docs/peers.md §2: Koordinator/Volcano/Kueue, one gang at a time)
---------------------------------------------------------------------------
1. **Order** pending gangs by priority (high first), then ``submit_time``, then name. Gangs
   sharing a ``group`` form one transaction at the position of their first member: all of
   them are placed, or none.
2. **Place the minimum** of each gang (pods per role from
   :meth:`~gangopt.objective.ObjectiveTerms.min_pods`; with slices, rounded up to a whole number
   of slices), first-fit in node input order, on eligible nodes only, within capacity and
   within quota (a limit already exceeded before the round may not grow further).

   * ``topology.required``: every domain of that level is checked at once (per-domain sums of
     fit counts); the domains that can hold the gang are **dry-run in best-fit order** (least
     free capacity of the gang's dominant resource first, then domain order) and the first
     that really fits is taken: Kueue's BestFit / Volcano's "dry-run every hypernode, keep the
     tightest", stopping at the first success instead of scoring them all.
   * ``topology.preferred`` (Kueue TAS ``preferred``, Slurm's tree plugin): into one domain
     of the preferred level if one holds the gang, else one domain of the next level up, and
     so on (best fit among those that hold it; inside a required domain when there is one);
     within it, or over the cluster when no domain holds it, first fit through the
     sub-domains with the most room first, level by level.
   * slices: the pods form consecutive slices of ``slice_size``; each slice goes, whole, into
     the first ``slice_level`` domain (inside the required domain, if any) where it fits.

3. **Preempt** (when ``policy.preemption``) if the minimum does not fit, like Koordinator /
   Kueue: candidates are running, preemptible gangs that every gang of the transaction may
   preempt (rule 5 and the queues' policies, :mod:`gangopt.scope`; by default those of strictly
   lower priority), with a pod on a node the transaction may use; gangs of other queues above
   their nominal first (Kueue's candidate ordering), then lowest priority, then lowest
   preemption cost, then name. Removal units are first the elastic surplus of the
   candidates (one pod at a time, never below a minimum, per role too; sliced gangs are never
   shrunk), then whole gangs. The fewest leading units that let the transaction fit are found
   by bisection; then **reprieve**: units go back in reverse order whenever the placement
   still fits (capacity and quota), so nothing is evicted the plan does not use. A victim
   whose eviction unit stays loses all its pods (never left below its minimum); a victim on
   whose nodes the transaction places nothing is put back. With quotas, a transaction that
   would leave an earlier victim's removal needed only by gangs that may not preempt it is
   refused (rule 5's second reprieve check), and the pods that fit again go back at once.
   **Cheapest room** (greedy's; not the peers' nor the slot placer's): the nodes are priced by
   the tier value clearing them evicts (a rigid gang at its whole value, wherever its other
   pods are) and the preemption is made again over the victims of the cheapest room that
   makes up what the gang lacks (per domain of its required level), kept when it evicts less
   tier value (:meth:`GreedyEngine.cheaper_domain`). With it off, the **spare**: when the
   preemption evicts a gang whose pods lie on nodes the transaction does not use (a rigid
   gang spread over many nodes, lost whole for one node's room), it is made again without
   it, and kept when what it evicts is worth less, tier by tier
   (:meth:`GreedyEngine.spare_spread`).
4. **Grow** elastic gangs up to their maximum while pods fit (no preemption for growth):
   admitted gangs right after admission (``growth="eager"``, as Volcano's allocate does) or
   after every pending gang had its chance (``growth="deferred"``, better for lower-priority
   minimums); then running elastic gangs that kept all their pods, by priority. A gang with
   a preferred level grows inside the domains it already uses first, broadest level first.
5. A last pass puts back any preempted pod (or whole evicted gang) that fits again, since a
   later preemption may have freed room near it.

Weakness (on purpose: it is what CP-SAT fixes): first-fit commits gang by gang and never
revisits a choice, so a small gang can take the one node a later big gang needed
(fragmentation), and a preemption is chosen for one gang without regard to the next.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, chain
from operator import attrgetter
from typing import Literal, TypeVar, cast

import numpy as np
import numpy.typing as npt

from gangopt.arrays import (
    BoolArray,
    Eligibility,
    IndexArray,
    IntArray,
    QuotaLimits,
    RoleSignature,
    cluster_capacity,
    domain_codes,
    domain_members,
    first_fit,
    fit_counts,
    node_index,
    per_cluster,
    queue_usage,
    quota_limits,
    read_only,
    request_matrix,
    resource_names,
    role_signature,
    run_starts,
    running_pod_names,
)
from gangopt.objective import ObjectiveTerms
from gangopt.quantities import human
from gangopt.schema import (
    PendingGang,
    Placement,
    Plan,
    Policy,
    Preemption,
    Resize,
    Round,
    RunningGang,
    Status,
    Waiting,
)
from gangopt.scope import Scope, reclaims_hold, within_nominal

Growth = Literal["eager", "deferred"]
RESERVED = 1 << 52
"""Subtracted from a node's free capacity while it is reserved for higher priorities (see
``GreedyEngine._reserved``): far beyond any request, far from int64's limits."""
WaitingCode = Literal["capacity", "topology", "quota", "eligibility", "outranked", "group", "policy"]
Alloc = list[tuple[int, int, int]]
FloatArray = npt.NDArray[np.float64]
_LicenceKey = tuple[str, int, object, int]
"""What rule 5's answer for (gang, running gang index) reads of the gang: queue, priority,
submit time (see :meth:`GreedyEngine._may_use`)."""
"""New pods of one gang: ``(role index, node row, pods)`` in placement order."""
_Shape = tuple[IntArray, IntArray, list[BoolArray], list[IndexArray]]
"""Requests, quota rows, eligibility masks and eligible rows of a gang (see ``GangView``)."""
_ShapeKey = tuple[str, tuple[tuple[tuple[tuple[str, int], ...], RoleSignature], ...]]
"""What a gang's ``_Shape`` depends on: its queue, and per role the requests and the
placement constraints (with the round's resources and quota rows)."""


E = TypeVar("E", bound="GreedyEngine")

_TIER_WEIGHT = 1e6
"""What one unit of tier value of a priority weighs in :meth:`GreedyEngine._domain_costs`
against the priority below it (tier values of a domain's victims stay far below it)."""


def greedy(
    rnd: Round,
    policy: Policy | None = None,
    *,
    growth: Growth = "eager",
    explain: bool = True,
    engines: list[GreedyEngine] | None = None,
    stop: Callable[[], bool] | None = None,
    solver: str = "greedy",
    keep_top: bool = False,
) -> Plan:
    """Decide ``rnd`` greedily (see the module docstring); ``policy`` overrides ``rnd.policy``.

    Returns a ``FEASIBLE`` plan with ``solver`` as its solver name (FIFO first fit's pass is
    greedy's on a flattened round), every pending gang either admitted or
    waiting with a code and a reason; score and stats are left at their defaults.
    ``explain=False`` (:attr:`GreedyEngine.explain`) gives every waiting gang the plain
    :data:`UNEXPLAINED` reason instead of diagnosing it; the decisions are the same.
    ``engines``: each engine built is appended to it (CP-SAT's slot placer builds its own
    ``like`` greedy's: :class:`GreedyEngine`). ``stop``: the pass ends when it says so, the
    gangs not reached waiting (:attr:`GreedyEngine.stop`; :func:`gangopt.annotate.stop_by` makes one).
    ``keep_top``: :attr:`GreedyEngine.keep_top`.
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})

    def make() -> GreedyEngine:
        engine = GreedyEngine(rnd, growth)
        engine.explain = explain
        engine.stop = stop
        engine.solver = solver
        engine.keep_top = keep_top
        if engines is not None:
            engines.append(engine)
        return engine

    return decided(make, GreedyEngine.run)


NOT_CONSIDERED = (
    "not considered: the time limit ran out before the scheduling pass reached it"
    " (a longer time limit decides every gang)"
)
"""The waiting reason of a gang a pass stopped at its deadline never reached (:attr:`GreedyEngine.stop`):
greedy's, CP-SAT's first candidate's or a peer's run alone, so it names no solver (the plan's
message does)."""


def unstarted(rnd: Round, solver: str = "greedy") -> Plan:
    """The plan of a pass its stop ends before the first gang, made without building the engine
    (:func:`gangopt.annotate.pass_hopeless` decides): every pending gang waits "not considered"
    (highest priority first), nothing else changes, and the message is a stopped pass's. What
    the engine's setup would have cost is saved: 0.4-0.7 CPU-s at 16,384 nodes, where a 3 s
    limit stopped every pass at its first ask."""
    order = sorted(rnd.pending, key=lambda g: (-g.priority, g.submit_time, g.name))
    n = len(order)
    note = f"time limit: the {solver} pass stopped at its deadline after 0 of {n} pending gangs; {n} not considered"
    return Plan(
        status=Status.FEASIBLE,
        solver=solver,
        message=note,
        waiting=[Waiting(gang=g.name, code="policy", reasons=[NOT_CONSIDERED]) for g in order],
    )


UNEXPLAINED = "not started (unexplained: the plan was not annotated)"
"""The waiting reason of a gang an engine with :attr:`GreedyEngine.explain` off leaves waiting."""


def decided(make: Callable[[], E], run: Callable[[E], Plan]) -> Plan:
    """``run(make())``; when the plan's cohort reclaims no longer hold on the finished plan
    (a later decision of the round moved a queue across its nominal; rule 5), decide again
    with the licences that hold whatever the usage only (:meth:`gangopt.scope.Scope.static`)."""
    engine = make()
    plan = run(engine)
    if engine.scope.plain or reclaims_hold(engine.rnd, plan, engine.scope):
        return plan
    engine = make()
    engine.reclaim = False
    return run(engine)


@dataclass
class GangView:
    """A gang with its per-role arrays: requests, quota usage per pod, eligible nodes."""

    spec: PendingGang | RunningGang
    reqs: IntArray
    """Shape ``(roles, resources)``."""
    qreq: IntArray
    """Shape ``(roles, quota constraints)``: what one pod of each role adds to each quota."""
    elig: list[BoolArray]
    idx: list[IndexArray]

    @property
    def minimum(self) -> int:
        return self.spec.minimum

    @property
    def maximum(self) -> int:
        return self.spec.maximum

    @property
    def elastic(self) -> bool:
        return self.spec.elastic

    @cached_property
    def role_min(self) -> list[int]:
        """Fewest pods per role (asked only of elastic gangs: read on demand)."""
        return [self.spec.role_minimum(r) for r in self.spec.roles]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def slice_size(self) -> int:
        topo = self.spec.topology
        if topo is None or topo.slice_level is None or not topo.slice_size:
            return 0
        return topo.slice_size


@dataclass
class Attempt:
    """A transaction that fits: the cluster after it, and what it places and removes."""

    free: IntArray
    used: IntArray
    allocs: list[tuple[Alloc, int | None]]
    """Per gang of the transaction: its new pods and the required-level domain chosen."""
    removed: list[IndexArray] = field(default_factory=list)
    """Rows of running pods (see ``GreedyEngine.rp_*``) the transaction preempts."""
    gangs: list[GangView] = field(default_factory=list)
    """The gangs of the transaction (in ``allocs`` order)."""
    units: int = 0
    """How many leading removal units :meth:`GreedyEngine.remove_then_fill` found it needs
    (before the reprieve): where :meth:`GreedyEngine.spare_spread`'s search starts again."""


@dataclass
class EngineState:
    """An engine's decisions at one point of :meth:`GreedyEngine.run` (copies): what
    :meth:`GreedyEngine.restore` puts into another engine of the same round, which then decides
    only the transactions not in :attr:`decided` (the slot placer after greedy's highest
    priority: :attr:`GreedyEngine.keep_top`)."""

    decided: frozenset[tuple[int, ...]]
    """The transactions (pending gang indices) decided before this point."""
    arrays: dict[str, IntArray]
    """free, used, kept, alive, surplus, floor, lowest_new."""
    floor_max: int
    allocs: dict[str, Alloc]
    counts: dict[str, list[int]]
    domain: dict[str, int]
    admitted: list[str]
    waiting: list[Waiting]
    victim_order: list[int]
    locked: set[str]
    lost_on: dict[int, set[int]]
    new_on: dict[int, dict[str, GangView]]


_STATE_ARRAYS = ("free", "used", "kept", "alive", "surplus", "floor", "lowest_new")
"""The engine's per-node, per-pod and per-gang state arrays (:class:`EngineState`)."""


class GreedyEngine:
    """State of one greedy run: free capacity and quota usage, updated gang by gang.

    :meth:`run` is the procedure of the module docstring. The peer emulations
    (:mod:`gangopt.solvers.peers`) are subclasses that change it through these hooks, each
    free to call the engine's own version:

    * order and admission: :meth:`run` (the loop over transactions), :meth:`transactions`,
      :meth:`admit` (one transaction: place, else preempt, else wait);
    * how much of a gang to start: :meth:`min_counts`;
    * where pods go: :meth:`place` (a gang's pods onto nodes, within its required domain),
      :meth:`domain_order` (which required domain first), :meth:`fill` (pods of one role onto
      candidate nodes), :meth:`node_order` (in which order: first fit);
    * victims decided elsewhere: :meth:`remove` (the slot placer's);
    * whom to preempt: :meth:`preempt` (victims for a transaction), :meth:`units` (removal
      units), :meth:`remove_then_fill`, :meth:`reprieve`, :meth:`put_back`;
    * growth: :meth:`grow`, :meth:`grow_running`;
    * waiting: :meth:`wait` and :meth:`diagnose` (the reason a transaction waits);
    * the result: :meth:`plan`.

    Everything else (names with a leading underscore) is the engine's own business. A new
    placement rule lands in :meth:`place`/:meth:`fill` (the engine's ``may place`` check is
    eligibility and capacity per node, read from :class:`~gangopt.arrays.Eligibility`), in the
    CP-SAT encoding, in the validator and in docs/rules.md.
    """

    fair_share = True
    """Within a priority, the gangs of a weighted cohort go least-served queue first (the
    objective's tie-break); the peer emulations order as their schedulers do instead."""

    solver = "greedy"
    """The plan's solver name (its message's too when :attr:`stop` cuts the pass): a peer's own,
    FIFO's through :func:`greedy`'s ``solver``."""

    explain = True
    """Diagnose why each waiting gang waits (:meth:`diagnose`). Off for CP-SAT's candidates
    (:mod:`gangopt.solvers.cpsat`): the finisher explains whatever plan CP-SAT returns from
    the finished plan, and a replay reads no reason; the diagnosis was a quarter of the
    greedy candidate's CPU on the Philly b436b2 replay."""

    stop: Callable[[], bool] | None = None
    """Asked before each transaction (and each growth step): True once the pass must stop, the
    caller's deadline reached (:func:`greedy`'s ``stop``). The gangs not reached wait with
    :data:`NOT_CONSIDERED` (code ``policy``), nothing grows after, the evictions already made
    get their final reprieve: a valid plan of what was decided, whose message says so. At
    16,384 nodes (issue 13's fragmented XL round) the admissions are 3.1 of the pass's 4.0
    CPU-s (setup 0.58, plan 0.21), and they no longer outlast a short limit."""

    stopped: int | None = None
    """How many pending gangs :attr:`stop` left unconsidered (0: stopped while growing); None:
    the pass ran whole."""

    keep_top = False
    """Whether :meth:`run` keeps its state after the transactions of the highest priority
    (:attr:`top_state`): CP-SAT's greedy candidate, whose slot placer passes start there
    when the highest tier is not the one they place (:mod:`gangopt.solvers.cpsat.placer`)."""

    top_state: EngineState | None = None
    """The state :attr:`keep_top` kept (None: not asked, no lower transaction, or the pass
    stopped first)."""

    def __init__(self, rnd: Round, growth: Growth, *, like: GreedyEngine | None = None) -> None:
        """``like``: an engine of the same round (in any state) whose quota rows are the
        round's own (greedy's, the slot placer's; not a peer's, which adds rows): its gang
        views, running-pod index and victim order are shared instead of built again (they
        depend on the round only; the state is fresh). The slot placer's engine after greedy's
        on the fragmented 4,096-node round: a placer pass 0.50 -> 0.36 CPU-s, its engine's
        setup 0.09 -> 0.02 and the victim order not sorted again (docs/benchmarks.md, "h29-L")."""
        self.rnd = rnd
        self.eager = growth == "eager"
        self.terms = ObjectiveTerms.of(rnd)
        self.res = resource_names(rnd)
        self.cap = cluster_capacity(rnd, self.res)
        self.totals = self.cap.sum(axis=0)
        self.elig = per_cluster(rnd.cluster, "eligibility", lambda: Eligibility(rnd))
        self.quota = quota_limits(rnd, self.res)
        before = self.quota.usage(queue_usage(rnd, self.res, self.quota.queues))
        self.used = before.copy()
        self.limit = self.quota.effective_limit(before)
        self._levels: dict[str, tuple[IntArray, list[IndexArray]]] = {}
        self._empty: dict[tuple[RoleSignature, tuple[int, ...]], int] = {}
        self._runs_of: dict[str, IndexArray | None] = {}
        """:meth:`_runs` per level."""
        self._widest: dict[str, int] = {}
        """Per level with consecutive domains, the most nodes of one domain (:meth:`_domain_sums`)."""
        self._shapes: tuple[QuotaLimits, dict[_ShapeKey, _Shape]] = (self.quota, {})
        self._ranked: IndexArray | None = None
        """:meth:`ranked_victims`, once computed or shared from ``like``."""
        shared = like if like is not None and like.rnd is rnd and like.quota.size == self.quota.size else None
        if shared is not None:
            self._share_setup(shared)
        else:
            self.pending = self._gangs(rnd.pending)
            self.running = self._gangs(rnd.running)
            self._index_running_pods()
        self.free: IntArray = np.asfortranarray(self.cap - self._running_usage())
        self.allocs: dict[str, Alloc] = {}
        self.counts: dict[str, list[int]] = {}
        self.domain: dict[str, int] = {}
        self.admitted: list[str] = []
        self.waiting: list[Waiting] = []
        self.victim_order: list[int] = []
        self.victims_seen: set[int] = set()
        self.floor = np.full(len(self.free), np.iinfo(np.int64).min, dtype=np.int64)
        """Per node, the highest priority of a gang that lost pods there: only gangs of strictly
        higher priority may get new pods on it (rule 5 of docs/plan-semantics.md)."""
        self.floor_max = int(np.iinfo(np.int64).min)
        self._floor_rows: dict[int, IndexArray] = {}
        """Per priority, the rows of :attr:`floor` at or above it (:meth:`_reserved`), until the
        floor next changes: one scan of the nodes per priority and commit, not per attempt
        (the fragmented XL round: 7,834 attempts, 0.41 CPU-s of 3.2 in the scans)."""
        self._views_of: tuple[list[GangView], list[GangView], dict[str, GangView]] | None = None
        """:meth:`_views`' cache: the gang lists it was built from and the views by name."""
        self._running_at_of: tuple[list[GangView], dict[str, int]] | None = None
        """:meth:`_running_at`'s cache: the running-gang list it was built from, and the index."""
        if shared is not None:  # the same views as ``like``'s: their maps too
            self._views_of = (self.pending, self.running, shared._views())
            self._running_at_of = (self.running, shared._running_at())
        self.lowest_new = np.full(len(self.free), np.iinfo(np.int64).max, dtype=np.int64)
        """Per node, the lowest priority of a gang that got new pods there: running gangs of
        that priority or higher may no longer lose pods on it (rule 5, seen from the victim)."""
        self.scope = Scope(rnd)
        """Whom a gang may preempt (the queues' policies). Under the default policies (``plain``)
        that is every strictly lower priority and the priority arrays above say it all;
        otherwise the two maps below say it gang by gang, and cohort reclaims read the queues'
        usage: on the 1,024-node contended round with 4 queues in one cohort
        (``python -m bench.queue_policies M``) greedy took 0.62 CPU-s with
        reclaim_within_cohort any, 0.24 with the default policies."""
        self.reclaim = True
        """Whether cohort reclaims (licences that depend on the queues' usage) are used."""
        self.lost_on: dict[int, set[int]] = defaultdict(set)
        """Per node row, the running gangs that lost pods there (policies not plain)."""
        self.new_on: dict[int, dict[str, GangView]] = defaultdict(dict)
        """Per node row, the gangs that got new pods there (policies not plain)."""
        self.locked: set[str] = set()
        """Queues that reclaimed within their nominal: they stay within it for the rest of the
        round (no admission or growth above it), so the reclaim still holds on the plan."""

    # ------------------------------------------------------------------------- setup

    def _gang(self, spec: PendingGang | RunningGang) -> GangView:
        """One gang's view (:meth:`_gangs`)."""
        return self._gangs([spec])[0]

    def _gangs(self, specs: Sequence[PendingGang | RunningGang]) -> list[GangView]:
        """Each gang's view, its arrays shared with every gang of its shape (:meth:`_shape`).
        One loop for a list, not a method call per gang: 68,536 running gangs at fragmented XL
        (0.15 -> 0.11 CPU-s)."""
        if self._shapes[0] is not self.quota:  # a peer added quota rows: every shape changed
            self._shapes = (self.quota, {})
        shapes = self._shapes[1]
        out: list[GangView] = []
        for spec in specs:
            roles = spec.roles
            key: _ShapeKey
            if len(roles) == 1:  # the same key without a generator: most gangs
                role = roles[0]
                key = (spec.queue, ((tuple(role.requests.items()), role_signature(role)),))
            else:
                key = (spec.queue, tuple((tuple(r.requests.items()), role_signature(r)) for r in roles))
            shape = shapes.get(key)
            if shape is None:
                shape = shapes[key] = self._shape(spec)
            reqs, qreq, elig, idx = shape
            out.append(GangView(spec, reqs, qreq, list(elig), list(idx)))
        return out

    def _shape(self, spec: PendingGang | RunningGang) -> _Shape:
        """The arrays of a gang that depend only on its queue and its roles' requests and
        placement constraints: shared (read-only) by the gangs of one shape, since a round
        has hundreds of gangs and usually a handful of shapes."""
        reqs = read_only(request_matrix([r.requests for r in spec.roles], self.res))
        qreq = read_only(self.quota.pod_usage(spec.queue, reqs))
        return reqs, qreq, [self.elig.mask(r) for r in spec.roles], [self.elig.indices(r) for r in spec.roles]

    def _index_running_pods(self) -> None:
        """Running pods as flat arrays (gang by gang, pods in input order). Only the pod lists
        are walked in Python; requests and quota rows are gathered in one step for all gangs,
        since replays index every running gang again in every round."""
        rows = node_index(self.rnd)
        specs = [g.spec for g in self.running]
        pod_lists = list(map(_PODS, specs))
        flat_pods = list(chain.from_iterable(pod_lists))
        nodes = list(map(rows.__getitem__, map(_NODE, flat_pods)))
        starts = [0, *accumulate(map(len, pod_lists))]
        roles: list[int] = []
        pod_roles = list(map(_ROLE, flat_pods))
        for gi, spec in enumerate(specs):
            spec_roles = spec.roles
            s, e = starts[gi], starts[gi + 1]
            if len(spec_roles) == 1 and pod_roles[s:e].count(spec_roles[0].name) == e - s:
                roles += [0] * (e - s)  # one role, most gangs: no map of role names
            else:
                role_of = {r.name: i for i, r in enumerate(spec_roles)}
                roles += [role_of[role] for role in pod_roles[s:e]]
        self.rp_node = np.asarray(nodes, dtype=np.intp)
        self.rp_gang = np.repeat(np.arange(len(self.running), dtype=np.intp), np.diff(starts))
        self.rp_start = np.asarray(starts, dtype=np.intp)
        self.rp_role = np.asarray(roles, dtype=np.intp)
        priorities = np.asarray([g.spec.priority for g in self.running], dtype=np.int64)
        self.rp_priority = priorities[self.rp_gang]
        self.rp_rows = np.asfortranarray(
            _pod_rows([g.reqs for g in self.running], len(self.res), self.rp_gang, self.rp_role)
        )
        self.rp_q = _pod_rows([g.qreq for g in self.running], self.quota.size, self.rp_gang, self.rp_role)
        self.kept = np.ones(len(nodes), dtype=np.bool_)
        self.alive = np.ones(len(self.running), dtype=np.bool_)
        self.surplus = np.zeros(len(nodes), dtype=np.bool_)
        self._elastic_running = [gi for gi, spec in enumerate(specs) if spec.elastic]
        """The running gangs that are elastic (by index): only they have surplus pods or grow."""
        for gi in self._elastic_running:
            self._refresh_surplus(gi)
        self._surplus_before = read_only(self.surplus.copy())
        """:attr:`surplus` before any decision (an engine built ``like`` this one starts from it)."""

    def _share_setup(self, like: GreedyEngine) -> None:
        """What :meth:`_gang` and :meth:`_index_running_pods` would build, from ``like`` (see
        :meth:`__init__`): its gang views and pod index, which no engine writes to; the pod
        state (kept, alive, surplus) as before any decision."""
        self._levels, self._empty = dict(like._levels), dict(like._empty)
        self.pending, self.running = list(like.pending), list(like.running)
        self.rp_node, self.rp_gang, self.rp_start = like.rp_node, like.rp_gang, like.rp_start
        self.rp_role, self.rp_priority = like.rp_role, like.rp_priority
        self.rp_rows, self.rp_q = like.rp_rows, like.rp_q
        self.kept = np.ones(len(self.rp_node), dtype=np.bool_)
        self.alive = np.ones(len(self.running), dtype=np.bool_)
        self.surplus = like._surplus_before.copy()
        self._surplus_before = like._surplus_before
        self._elastic_running = like._elastic_running
        self._ranked = like._ranked

    def _running_usage(self) -> IntArray:
        """Requests of all running pods per node, before the plan (from the indexed pods)."""
        usage = np.zeros(self.cap.shape, dtype=np.int64, order="F")
        _scatter_add(usage, self.rp_node, self.rp_rows)
        return usage

    @cached_property
    def victim_rank(self) -> IndexArray:
        """Preemptible running gangs in the order they are preempted: lowest priority, then
        lowest preemption cost, then name. Computed on first use: most rounds preempt nothing,
        and the costs are a pass over every running pod."""
        return self.ranked_victims()

    def ranked_victims(self) -> IndexArray:
        """:attr:`victim_rank`'s order, computed once (or shared from the engine this one was
        built ``like``: it depends on the round only); subclasses that override the property
        read it here."""
        if self._ranked is None:
            # One stable sort of arrays instead of a key tuple per gang (the same order: costs
            # are finite floats, names have no control character, so NumPy's string order is
            # Python's): 0.022 -> 0.005 CPU-s for the 14,668 victims of fragmented L.
            rank = [i for i, g in enumerate(self.running) if isinstance(g.spec, RunningGang) and g.spec.preemptible]
            specs = [cast(RunningGang, self.running[i].spec) for i in rank]
            priority = np.fromiter(map(_PRIORITY, specs), dtype=np.int64, count=len(rank))
            cost = np.asarray(self.terms.preemption_costs(specs), dtype=np.float64)
            names = np.asarray([spec.name for spec in specs], dtype=np.str_)
            order = np.lexsort((names, cost, priority)) if rank else np.zeros(0, dtype=np.intp)
            self._ranked = read_only(np.asarray(rank, dtype=np.intp)[order])
        return self._ranked

    @cached_property
    def running_prio(self) -> IntArray:
        """Priority of each running gang, by index: read for every preemption of the peers
        (a Python pass over 68,536 running gangs per preemption at fragmented XL)."""
        return np.fromiter(map(_SPEC_PRIORITY, self.running), dtype=np.int64, count=len(self.running))

    @cached_property
    def victim_prio(self) -> IntArray:
        """Priority of each gang of :attr:`victim_rank` (ascending): read from :attr:`running_prio`
        (a Python pass over the 61,768 victims of the fragmented XL round was 0.05 CPU-s)."""
        out: IntArray = self.running_prio[self.victim_rank]
        return out

    def _cost(self, gi: int) -> float:
        spec = self.running[gi].spec
        assert isinstance(spec, RunningGang)
        return self.terms.preemption_cost(spec)

    def level(self, level: str) -> tuple[IntArray, list[IndexArray]]:
        """Domain code per node at ``level`` and the rows of each domain (cached)."""
        if level not in self._levels:
            codes, names = domain_codes(self.rnd, level)
            self._levels[level] = (codes, domain_members(codes, len(names)))
        return self._levels[level]

    # ------------------------------------------------------------------------- main loop

    def run(self) -> Plan:
        transactions = self.transactions()
        top = self.pending[transactions[0][0]].spec.priority if transactions else 0
        for k, members in enumerate(transactions):
            if self.stop is not None and self.stop():
                self._not_considered(transactions[k:])
                break
            if self.keep_top and self.top_state is None and self.pending[members[0]].spec.priority < top:
                self.top_state = self.state(transactions[:k])
            self.admit([self.pending[i] for i in members])
        self.final_reprieve()
        if self.stopped is not None:  # no growth past the deadline: the plan is valid without it
            return self._stopped_plan()
        growers: list[tuple[int, int, GangView]] = []
        if not self.eager:
            order = {name: k for k, name in enumerate(self.admitted)}
            growers += [(-g.spec.priority, order[g.name], g) for g in self.pending if g.name in order]
        base = len(growers)
        # only elastic running gangs can grow: skipping the rest changes no order among these
        growers += [(-self.running[k].spec.priority, base + k, self.running[k]) for k in self._elastic_running]
        for _, k, g in sorted(growers, key=lambda t: (t[0], t[1])):
            if self.stop is not None and self.stop():
                self.stopped = 0
                return self._stopped_plan()
            if k >= base:
                self.grow_running(k - base)
            else:
                self._grow_pending(g)
        return self.plan()

    def state(self, decided: list[list[int]]) -> EngineState:
        """A copy of the engine's decisions, the transactions ``decided`` made (:class:`EngineState`)."""
        return EngineState(
            decided=frozenset(tuple(t) for t in decided),
            arrays={name: getattr(self, name).copy(order="K") for name in _STATE_ARRAYS},
            floor_max=self.floor_max,
            allocs=dict(self.allocs),
            counts={name: list(c) for name, c in self.counts.items()},
            domain=dict(self.domain),
            admitted=list(self.admitted),
            waiting=list(self.waiting),
            victim_order=list(self.victim_order),
            locked=set(self.locked),
            lost_on={row: set(gangs) for row, gangs in self.lost_on.items()},
            new_on={row: dict(gangs) for row, gangs in self.new_on.items()},
        )

    def restore(self, state: EngineState) -> None:
        """Take ``state`` (copied: one state can seed several engines) as this engine's, made
        by an engine of the same round built ``like`` it or sharing its setup."""
        for name, array in state.arrays.items():
            setattr(self, name, array.copy(order="K"))
        self.floor_max = state.floor_max
        self._floor_rows.clear()
        self.allocs = dict(state.allocs)
        self.counts = {name: list(c) for name, c in state.counts.items()}
        self.domain = dict(state.domain)
        self.admitted = list(state.admitted)
        self.waiting = list(state.waiting)
        self.victim_order = list(state.victim_order)
        self.victims_seen = set(state.victim_order)
        self.locked = set(state.locked)
        self.lost_on = defaultdict(set, {row: set(gangs) for row, gangs in state.lost_on.items()})
        self.new_on = defaultdict(dict, {row: dict(gangs) for row, gangs in state.new_on.items()})

    def _not_considered(self, rest: list[list[int]]) -> None:
        """The transactions ``rest`` wait unconsidered: the deadline (:attr:`stop`) came first."""
        gangs = [self.pending[i] for members in rest for i in members]
        self.stopped = len(gangs)
        self.waiting += [Waiting(gang=g.name, code="policy", reasons=[NOT_CONSIDERED]) for g in gangs]

    def _stopped_plan(self) -> Plan:
        """:meth:`plan`, its message saying where :attr:`stop` cut the pass."""
        plan = self.plan()
        if self.stopped:
            decided = len(self.pending) - self.stopped
            note = (
                f"time limit: the {plan.solver} pass stopped at its deadline after {decided} of "
                f"{len(self.pending)} pending gangs; {self.stopped} not considered"
            )
        else:
            note = f"time limit: the {plan.solver} pass stopped at its deadline before growing elastic gangs"
        return plan.model_copy(update={"message": note})

    def transactions(self) -> list[list[int]]:
        """Pending gang indices in decision order, grouped gangs together."""
        order = sorted(
            range(len(self.pending)),
            key=lambda i: (-self.pending[i].spec.priority, self._submit(i), self.pending[i].name),
        )
        if self.fair_share:
            order = self.terms.tie_break_order(order, lambda i: self.pending[i].spec.priority)
        groups: dict[str, list[int]] = defaultdict(list)
        for i in order:
            group = self._group(i)
            if group is not None:
                groups[group].append(i)
        out: list[list[int]] = []
        seen: set[str] = set()
        for i in order:
            group = self._group(i)
            if group is None:
                out.append([i])
            elif group not in seen:
                seen.add(group)
                out.append(groups[group])
        return out

    def _submit(self, i: int) -> float:
        spec = self.pending[i].spec
        return spec.submit_time if isinstance(spec, PendingGang) else 0.0

    def _group(self, i: int) -> str | None:
        spec = self.pending[i].spec
        return spec.group if isinstance(spec, PendingGang) else None

    def admit(self, gangs: list[GangView]) -> None:
        counts = [self.min_counts(g) for g in gangs]
        result = self.attempt(gangs, counts, self.free.copy(order="K"), self.used)
        hopeless = any(self.hopeless(g, c) for g, c in zip(gangs, counts, strict=True))
        if result is None and self.rnd.policy.preemption and not hopeless:
            result = self.preempt(gangs, counts)
        if result is None:
            self.wait(gangs, counts)
            return
        self.commit(gangs, counts, result)

    def remove(self, removed: list[IndexArray]) -> None:
        """Take the running pods ``removed`` (one array of pod rows per victim, as
        :attr:`Attempt.removed`) off their nodes as a transaction's preemptions are, with no
        gang placed yet: victims decided elsewhere (the slot placer's). The reprieves put back
        those the plan does not use."""
        if not removed:
            return
        pods = np.concatenate(removed)
        free = self.free.copy(order="K")
        _scatter_add(free, self.rp_node[pods], self.rp_rows[pods])
        self.commit([], [], Attempt(free, self.used - self.rp_q[pods].sum(axis=0), [], removed=list(removed)))

    def commit(self, gangs: list[GangView], counts: list[list[int]], result: Attempt) -> None:
        """Apply a transaction that fits: its preemptions, its pods, then eager growth."""
        self.free, self.used = result.free, result.used
        if not self.scope.plain and result.removed:
            self._lock_reclaimers(gangs, result.removed)
        settle = bool(result.removed) and self.quota.size > 0
        for pods in result.removed:
            self.kept[pods] = False
            np.maximum.at(self.floor, self.rp_node[pods], self.rp_priority[pods])
            self._floor_rows.clear()
            if pods.size:
                self.floor_max = max(self.floor_max, int(self.rp_priority[pods].max()))
            if not self.scope.plain:
                for row, gi in zip(self.rp_node[pods].tolist(), self.rp_gang[pods].tolist(), strict=True):
                    self.lost_on[row].add(gi)
            for gi in np.unique(self.rp_gang[pods]).tolist():
                if gi not in self.victims_seen:
                    self.victims_seen.add(gi)
                    self.victim_order.append(gi)
                s, e = self.rp_start[gi], self.rp_start[gi + 1]
                self.alive[gi] = bool(self.kept[s:e].any())
                self._refresh_surplus(gi)
        for g, c, (alloc, dom) in zip(gangs, counts, result.allocs, strict=True):
            self.admitted.append(g.name)
            self.allocs[g.name] = alloc
            self._record_new(alloc, g)
            self.counts[g.name] = list(c)
            if dom is not None:
                self.domain[g.name] = dom
        if settle:  # as _steals settled it: what the preemptors do not need goes back now
            self._settle(self.free, self.used, self.kept, self.alive, self.victim_order, {})
            for gi in self.victim_order:
                self._refresh_surplus(gi)
        if self.eager:
            for g in gangs:
                self._grow_pending(g)

    # ------------------------------------------------------------------------- placement

    def min_counts(self, g: GangView) -> list[int]:
        """Pods per role of the gang's minimum, rounded up to whole slices."""
        minimum = self.terms.min_pods(g.spec)
        counts = [minimum[r.name] for r in g.spec.roles]
        size = g.slice_size
        if size > 1:
            total = sum(counts)
            target = max(size, -(-total // size) * size)
            counts = [a + b for a, b in zip(counts, self.more_pods(g, counts, target - total), strict=True)]
        return counts

    @staticmethod
    def more_pods(g: GangView, current: list[int], extra: int) -> list[int]:
        """``extra`` further pods per role (roles in order, up to their replicas)."""
        out = []
        for role, have in zip(g.spec.roles, current, strict=True):
            take = max(0, min(extra, role.replicas - have))
            out.append(take)
            extra -= take
        return out

    def attempt(self, gangs: list[GangView], counts: list[list[int]], work: IntArray, used: IntArray) -> Attempt | None:
        """Place every gang's minimum on ``work`` (modified) within quota, or None."""
        demand = np.zeros(self.quota.size, dtype=np.int64)
        for g, c in zip(gangs, counts, strict=True):
            demand += np.asarray(c, dtype=np.int64) @ g.qreq
        if (used + demand > self.limit).any():
            return None
        if self.locked and not self._within_locked(gangs, counts):
            return None
        allocs: list[tuple[Alloc, int | None]] = []
        with self._reserved(work, gangs):
            for g, c in zip(gangs, counts, strict=True):
                placed = self.place(work, g, c)
                if placed is None:
                    return None
                allocs.append(placed)
        return Attempt(work, used + demand, allocs, gangs=list(gangs))

    def _lock_reclaimers(self, gangs: list[GangView], removed: list[IndexArray]) -> None:
        """Lock the queues of ``gangs`` that preempt by a cohort reclaim (not a static licence)."""
        victims = {int(gi) for pods in removed for gi in np.unique(self.rp_gang[pods]).tolist()}
        for g in gangs:
            if any(not self.scope.static(g.spec, self.running[gi].spec) for gi in victims):
                self.locked.add(g.spec.queue)

    def _within_locked(self, gangs: list[GangView], counts: list[list[int]]) -> bool:
        """Whether the gangs of locked queues (:attr:`locked`) keep them within their nominal."""
        demand: dict[str, IntArray] = {}
        for g, c in zip(gangs, counts, strict=True):
            if g.spec.queue in self.locked:
                add = np.asarray(c, dtype=np.int64) @ g.reqs
                demand[g.spec.queue] = demand[g.spec.queue] + add if g.spec.queue in demand else add
        if not demand:
            return True
        usage = self.queue_now()
        for q, add in demand.items():
            mine = usage.get(q, {})
            extra = dict(zip(self.res, add.tolist(), strict=True))
            if not within_nominal(self.scope.queues.get(q), {r: mine.get(r, 0) + extra[r] for r in self.res}):
                return False
        return True

    def _record_new(self, alloc: Alloc, g: GangView) -> None:
        if alloc:
            rows = np.fromiter((node for _, node, _ in alloc), dtype=np.intp, count=len(alloc))
            np.minimum.at(self.lowest_new, rows, g.spec.priority)
            if not self.scope.plain:
                for row in rows.tolist():
                    self.new_on[row][g.name] = g

    # ------------------------------------------------------------------------- who may preempt whom

    def may_preempt(
        self, g: GangView, gi: int, demand: IntArray | None = None, usage: dict[str, dict[str, int]] | None = None
    ) -> bool:
        """Whether ``g`` may preempt running gang ``gi`` (rule 5, the queues' policies) in the
        current state; ``demand`` (per resource) is what ``g`` is about to add to its queue;
        ``usage`` is :meth:`queue_now` when the caller has it."""
        victim = self.running[gi].spec
        if self.scope.static(g.spec, victim):
            return True
        if not self.reclaim or not self.scope.needs_state(g.spec, victim):
            return False
        usage = usage if usage is not None else self.queue_now()
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        rows = self.rp_rows[s:e]
        lost = dict(zip(self.res, rows[~self.kept[s:e]].sum(axis=0).tolist(), strict=True))
        held = {r for role in victim.roles for r in role.requests}
        # above its nominal with the victim's removed pods back (its kept ones still count now)
        borrowing = self.scope.borrowing_with(g.spec, victim, usage, {r: lost[r] for r in held if r in lost})
        mine = dict(usage.get(g.spec.queue, {}))
        if demand is not None:
            for r, a in zip(self.res, demand.tolist(), strict=True):
                mine[r] = mine.get(r, 0) + a
        if victim.queue == g.spec.queue:
            # a newer victim of the own queue (within_queue lower_or_newer_equal_priority): the
            # queue's usage without it; a victim only shrunk is re-read on the finished plan
            gone = rows[self.kept[s:e]].sum(axis=0).tolist()
            for r, a in zip(self.res, gone, strict=True):
                mine[r] = mine.get(r, 0) - a
        within = self.scope.within_guarantee(g.spec, victim, {**usage, g.spec.queue: mine})
        return self.scope.reclaims(g.spec, victim, borrowing, within)

    @cached_property
    def _running_queues(self) -> tuple[list[str], IntArray]:
        """The running gangs' queues (in order of first appearance) and, per running pod, the
        index of its gang's queue there: :meth:`queue_now` sums kept pods per queue in one step."""
        names: dict[str, int] = {}
        of_gang = np.asarray([names.setdefault(g.spec.queue, len(names)) for g in self.running], dtype=np.intp)
        return list(names), of_gang[self.rp_gang]

    def queue_now(self) -> dict[str, dict[str, int]]:
        """Per queue, the requests of the kept running pods and the new pods so far. Called
        for every licence check under cohort policies (772 times on the M round under
        reclaim-any): one scatter over the kept pods, not a loop over the running gangs."""
        names, pod_queue = self._running_queues
        per_queue = np.zeros((len(names), len(self.res)), dtype=np.int64)
        np.add.at(per_queue, pod_queue[self.kept], self.rp_rows[self.kept])
        out: dict[str, np.ndarray] = dict(zip(names, per_queue, strict=True))
        views = {g.name: g for g in [*self.pending, *self.running]}
        for name, alloc in self.allocs.items():
            g = views[name]
            q = g.spec.queue
            add = sum((k * g.reqs[r] for r, _, k in alloc), np.zeros(len(self.res), dtype=np.int64))
            out[q] = out[q] + add if q in out else add
        return {q: dict(zip(self.res, a.tolist(), strict=True)) for q, a in out.items()}

    def borrowers_first(self, gangs: list[GangView], victims: list[int]) -> list[int]:
        """``victims`` with those of other queues above their nominal first (Kueue's candidate
        ordering: take back what other queues borrow before touching work within a quota),
        otherwise in the given order."""
        if not any(q.nominal for q in self.scope.queues.values()) or len(victims) < 2:
            return victims
        usage = self.queue_now()
        mine = {g.spec.queue for g in gangs}

        def borrows(gi: int) -> bool:
            q = self.running[gi].spec.queue
            spec = self.scope.queues.get(q)
            now = usage.get(q, {})
            return q not in mine and spec is not None and any(now.get(r, 0) > n for r, n in spec.nominal.items())

        flags = {gi: borrows(gi) for gi in victims}
        return [gi for gi in victims if flags[gi]] + [gi for gi in victims if not flags[gi]]

    def unblocked(self, victims: Iterable[int]) -> list[int]:
        """The victims none of whose pods sits on a node that already got a new pod of the
        victim's priority or lower this round: evicting it there would make room for its own
        priority (rule 5). Peers that do not decide in priority order need this; for the
        others it changes nothing. One pass over the running pods, not one per victim."""
        if isinstance(victims, np.ndarray):
            chosen = victims.astype(np.intp, copy=False)
        else:
            chosen = np.fromiter(victims, dtype=np.intp)
        if chosen.size == 0:
            return []
        if not self.scope.plain:
            usage = self.queue_now() if self.reclaim and self.new_on else None
            return [gi for gi in chosen.tolist() if not self._blocked(gi, usage)]
        # tolist, not a loop over numpy scalars: 1.7 of greedy's 12.5 CPU-s on the fragmented XL
        # round (68,536 running gangs, 170 preemptions) went to that loop
        out: list[int] = self._unblocked_rows(chosen).tolist()
        return out

    def _unblocked_rows(self, chosen: IndexArray) -> IndexArray:
        """:meth:`unblocked` under the default policies, an array in and out."""
        if chosen.size == 0:
            return chosen
        seg = self._segments(chosen)
        if seg is None:
            blocked_pod = self.lowest_new[self.rp_node] <= self.rp_priority
            blocked = np.logical_or.reduceat(blocked_pod, self.rp_start[:-1])[chosen]
        else:
            pods, starts = seg
            blocked = np.logical_or.reduceat(self.lowest_new[self.rp_node[pods]] <= self.rp_priority[pods], starts)
        out: IndexArray = chosen[~blocked]
        return out

    def _blocked(self, gi: int, usage: dict[str, dict[str, int]] | None) -> bool:
        """Whether a node of running gang ``gi`` already got new pods of a gang that may not
        preempt it (policies not plain); ``usage`` is :meth:`queue_now`."""
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        rows = set(self.rp_node[s:e][self.kept[s:e]].tolist())
        gangs = {g.name: g for row in rows for g in self.new_on.get(row, {}).values()}
        if not gangs:
            return False
        return any(not self.may_preempt(g, gi, usage=usage) for g in gangs.values())

    @contextmanager
    def _reserved(self, work: IntArray, gangs: list[GangView]) -> Iterator[None]:
        """Nodes that lost pods of a gang that some of ``gangs`` may not preempt (by default: of
        their lowest priority or higher) look full on ``work`` for the duration: no peer lets a
        preemption for higher priorities make room for the victim's own priority (rule 5).
        Exact arithmetic: the offset is added back after."""
        if self.scope.plain:
            priority = min(g.spec.priority for g in gangs)
            if priority > self.floor_max:
                yield  # nothing was preempted for this priority: the common case, no scan
                return
            rows = self._floor_rows.get(priority)
            if rows is None:
                rows = self._floor_rows[priority] = np.flatnonzero(self.floor >= priority)
        else:
            usage = self.queue_now() if self.reclaim and self.lost_on else None
            rows = np.asarray(
                sorted(
                    row
                    for row, lost in self.lost_on.items()
                    if any(not self.may_preempt(g, gi, usage=usage) for gi in lost for g in gangs)
                ),
                dtype=np.intp,
            )
        _shift_rows(work, rows, -RESERVED)
        try:
            yield
        finally:
            _shift_rows(work, rows, RESERVED)

    def place(
        self, work: IntArray, g: GangView, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        """Place ``counts`` pods per role of ``g`` on ``work`` (modified; partly on failure)."""
        topo = g.spec.topology if topology else None
        sliced = topology and g.slice_size > 0
        preferred = [level for level, _ in self.terms.spread_levels(g.spec)] if topo is not None else []
        if topo is None or topo.required is None:
            if preferred:
                # ``work`` itself: _fill_preferred writes its rows only once a fill succeeded
                every = np.arange(len(work), dtype=np.intp)
                alloc = self._fill_preferred(work, every, g, counts, preferred, sliced=sliced)
                return None if alloc is None else (alloc, None)
            alloc = self.fill(work, None, g, counts, sliced=sliced)
            return None if alloc is None else (alloc, None)
        codes, groups = self.level(topo.required)
        n_domains = len(groups)
        ok = np.ones(n_domains, dtype=np.bool_)
        for r, n in enumerate(counts):
            if n:
                idx = g.idx[r]
                fits = fit_counts(work, g.reqs[r], cap=n, rows=None if len(idx) == len(work) else idx)
                ok &= self._domain_sums(topo.required, fits, idx) >= n
        candidates = np.flatnonzero(ok)
        if candidates.size == 0:
            return None
        demand = np.asarray(counts, dtype=np.int64) @ g.reqs
        dominant = int(np.argmax(demand / np.maximum(self.totals, 1)))
        room = self._domain_sums(topo.required, work[:, dominant])
        order = candidates[np.argsort(room[candidates], kind="stable")]
        if g.elastic and isinstance(g.spec, PendingGang):
            # An elastic gang can only grow inside the domain it starts in: prefer domains
            # with room for more members (best fit among equals), not the tightest one.
            growth = self._domain_growth(work, g, codes, n_domains)[order]
            order = order[np.argsort(-growth, kind="stable")]
        order = self.domain_order(g, order)
        for d in order.tolist():
            nodes = groups[d]
            rows = work[nodes]
            if preferred:
                alloc = self._fill_preferred(rows, nodes, g, counts, preferred, sliced=sliced)
            else:
                alloc = self.fill(rows, nodes, g, counts, sliced=sliced)
            if alloc is not None:
                work[nodes] = rows
                return alloc, d
        return None

    def _domain_sums(self, level: str, values: IntArray, rows: IndexArray | None = None) -> IntArray | FloatArray:
        """Per domain of ``level``, the sum of ``values`` (one per node, or per row of ``rows``,
        ascending): ``np.bincount(codes[rows], weights=values)``, the same numbers. Where the
        domains' nodes are consecutive (:meth:`_runs`) and every partial sum is exact in a
        float (``|values| x nodes of a domain < 2**53``: not so on rows :meth:`_reserved`
        made look full), one ``np.add.reduceat`` of the integers over every node instead: at XL a
        required-level placement summed 16,384 nodes twice through floats (the preemption's
        search tries 609 of them)."""
        codes, groups = self.level(level)
        starts = self._runs(level)
        every = rows is None or len(rows) == len(codes)  # rows ascending and distinct: every node
        if starts is not None and every and values.size:
            widest = self._widest[level]
            if max(int(values.max()), -int(values.min())) * widest < 2**53:
                out: IntArray = np.add.reduceat(values, starts)
                return out
        where = codes if every else codes[rows]
        return np.bincount(where, weights=values, minlength=len(groups))

    def _runs(self, level: str) -> IndexArray | None:
        """Each domain's first node at ``level`` when every domain's nodes are consecutive (its
        codes ascending: domains are numbered in node order), else None (cached)."""
        if level not in self._runs_of:
            codes, groups = self.level(level)
            starts = None
            if codes.size and bool((codes[1:] >= codes[:-1]).all()):
                starts = np.searchsorted(codes, np.arange(len(groups))).astype(np.intp)
                self._widest[level] = max(len(m) for m in groups)
            self._runs_of[level] = starts
        return self._runs_of[level]

    def domain_order(self, g: GangView, order: IndexArray) -> IndexArray:
        """The domains of ``g``'s required level that can hold it, in the order they are tried
        (best fit): a hook for a placer that knows which domain a gang should take."""
        return order

    def _fill_preferred(
        self, rows: IntArray, nodes: IndexArray, g: GangView, counts: list[int], levels: list[str], *, sliced: bool
    ) -> Alloc | None:
        """Kueue TAS ``preferred`` over the cluster rows ``nodes`` (``rows`` their free room,
        modified): the gang goes into one domain of its preferred level if one holds it, else
        into one domain of the next level up, and so on (``levels``, narrowest first, from
        :meth:`~gangopt.objective.ObjectiveTerms.spread_levels`); among the domains of a level
        that hold it, the one with the fewest pods to offer first (best fit). Inside the chosen
        domain, or over all of ``nodes`` when none holds the gang, first fit runs through the
        sub-domains with the most to offer first, level by level, so each level uses few
        domains. First fit in node order took blocks of two spines for a 2-block gang in 9 of
        10 shuffled node orders; this keeps it in one spine in all 10.

        ``nodes`` every node (the gang has no required level; ``nodes`` distinct and ascending,
        so ``arange``): the eligible rows, the codes and the domains' nodes are read as they
        are, not gathered through ``nodes``, and the domain sums made by :meth:`_domain_sums`
        (363 such placements at XL, most of them tries of the preemption's search)."""
        full = len(nodes) == len(self.free)
        offers = np.zeros((len(counts), len(nodes)), dtype=np.int64)
        for r, n in enumerate(counts):
            if n:
                local = g.idx[r] if full else np.flatnonzero(g.elig[r][nodes])
                every_row = full and local.size == len(nodes)
                offers[r, local] = fit_counts(rows, g.reqs[r], cap=n, rows=None if every_row else local)
        total = offers.sum(axis=0)
        need = np.asarray(counts, dtype=np.int64)
        if (offers.sum(axis=1) < need).any():
            # Fewer pods of a role fit on all of ``nodes`` than it needs: no domain holds the gang
            # and the fill over every node fails too (each role's pods fit at most its offers).
            # Said at once: 730 of the fragmented XL round's 978 preferred placements were such
            # tries of the preemption's bisection, 1.55 of greedy's 7.4 CPU-s.
            return None
        codes = {level: self.level(level)[0] if full else self.level(level)[0][nodes] for level in levels}
        for li, level in enumerate(levels):
            n_domains = len(self.level(level)[1])
            if full:
                per = np.stack([self._domain_sums(level, o) for o in offers])
            else:
                per = np.stack([np.bincount(codes[level], weights=o, minlength=n_domains) for o in offers])
            holds = np.flatnonzero((per >= need[:, None]).all(axis=0))
            room = per.sum(axis=0)
            starts = self._runs(level) if full else None
            for d in holds[np.argsort(room[holds], kind="stable")].tolist():
                if starts is not None:  # the domain's nodes, consecutive
                    end = int(starts[d + 1]) if d + 1 < len(starts) else len(nodes)
                    inside = np.arange(int(starts[d]), end, dtype=np.intp)
                else:
                    inside = np.flatnonzero(codes[level] == d)
                order = inside[self._tree_order(codes, levels[:li], total[inside], inside)]
                sub = rows[order]
                alloc = self.fill(sub, nodes[order], g, counts, sliced=sliced)
                if alloc is not None:
                    rows[order] = sub
                    return alloc
        every = np.arange(len(nodes), dtype=np.intp)
        order = self._tree_order(codes, levels, total, every)
        sub = rows[order]
        alloc = self.fill(sub, nodes[order], g, counts, sliced=sliced)
        if alloc is not None:
            rows[order] = sub
        return alloc

    @staticmethod
    def _tree_order(
        codes: dict[str, IntArray], levels: list[str], offer: IntArray, positions: IndexArray
    ) -> IndexArray:
        """Positions into ``positions`` sorted by their domains at ``levels`` (narrowest
        first), broadest level first, each level's domains by most to offer, then by domain;
        ties in node order."""
        if not levels:  # ``positions`` ascending (every caller's): they stay as they are
            return np.arange(len(positions), dtype=np.intp)
        keys: list[IntArray] = [positions]
        for level in levels:
            code = codes[level][positions]
            offered = np.bincount(code, weights=offer)[code]
            keys += [code, -offered]
        return np.lexsort(keys).astype(np.intp)

    def _domain_growth(self, work: IntArray, g: GangView, codes: IntArray, n_domains: int) -> IntArray:
        """Per domain, how many of the gang's members (up to its maximum) fit on ``work``: the
        roles' fit counts, each capped at its replicas, summed."""
        total = np.zeros(n_domains, dtype=np.int64)
        for r, role in enumerate(g.spec.roles):
            idx = g.idx[r]
            fits = fit_counts(work, g.reqs[r], cap=role.replicas, rows=idx)
            per_domain = np.bincount(codes[idx], weights=fits, minlength=n_domains).astype(np.int64)
            total += np.minimum(per_domain, role.replicas)
        return np.minimum(total, g.maximum)

    def fill(
        self, rows: IntArray, nodes: IndexArray | None, g: GangView, counts: list[int], *, sliced: bool
    ) -> Alloc | None:
        """First-fit ``counts`` pods per role on ``rows`` (the cluster rows ``nodes``, or all
        rows when None). Modifies ``rows``, also partly on failure."""
        if sliced:
            return self._fill_slices(rows, nodes, g, self._chunks(g, counts))
        out: Alloc = []
        for r, n in enumerate(counts):
            if not n:
                continue
            cand = g.idx[r] if nodes is None else np.flatnonzero(g.elig[r][nodes])
            got = first_fit(rows, self.node_order(rows, nodes, g, r, cand), g.reqs[r], n)
            if got is None:
                return None
            pos, take = got
            where = pos if nodes is None else nodes[pos]
            out.extend((r, node, k) for node, k in zip(where.tolist(), take.tolist(), strict=True))
        return out

    def node_order(self, rows: IntArray, nodes: IndexArray | None, g: GangView, r: int, cand: IndexArray) -> IndexArray:
        """The positions ``cand`` (into ``rows``, the cluster rows ``nodes`` or all rows) in the
        order :meth:`fill` tries them for role ``r`` of ``g``: as given (first fit). A hook for
        a placer that fits best."""
        return cand

    @staticmethod
    def _chunks(g: GangView, counts: list[int]) -> list[list[int]]:
        """Consecutive slices of ``slice_size`` pods, each as pods per role."""
        size = g.slice_size
        seq = [r for r, n in enumerate(counts) for _ in range(n)]
        return [
            np.bincount(seq[i : i + size], minlength=len(counts)).astype(int).tolist() for i in range(0, len(seq), size)
        ]

    def _fill_slices(
        self, rows: IntArray, nodes: IndexArray | None, g: GangView, chunks: list[list[int]]
    ) -> Alloc | None:
        """Each chunk whole into the first slice-level domain where it fits. A chunk that fits
        nowhere fails the call (``rows`` keeps the chunks placed before it)."""
        topo = g.spec.topology
        assert topo is not None and topo.slice_level is not None
        codes_all, groups = self.level(topo.slice_level)
        codes = codes_all if nodes is None else codes_all[nodes]
        n_domains = len(groups)
        out: Alloc = []
        for chunk in chunks:
            ok = np.ones(n_domains, dtype=np.bool_)
            for r, n in enumerate(chunk):
                if n:
                    cand = g.idx[r] if nodes is None else np.flatnonzero(g.elig[r][nodes])
                    fits = fit_counts(rows, g.reqs[r], cap=n, rows=cand)
                    ok &= np.bincount(codes[cand], weights=fits, minlength=n_domains) >= n
            placed: Alloc | None = None
            for d in np.flatnonzero(ok).tolist():
                pos = groups[d] if nodes is None else np.flatnonzero(codes == d)
                sub_nodes = pos if nodes is None else nodes[pos]
                sub = rows[pos]
                placed = self.fill(sub, sub_nodes, g, chunk, sliced=False)
                if placed is not None:
                    rows[pos] = sub
                    break
            if placed is None:
                return None
            out.extend(placed)
        return out

    # ------------------------------------------------------------------------- growth

    def grow(self, g: GangView, current: list[int], nodes: IndexArray | None) -> Alloc:
        """Add pods to ``g`` (which has ``current`` pods per role) up to its maximum while they
        fit, on the rows ``nodes`` (or anywhere); commits to the free capacity and quota."""
        maximum = g.maximum
        total = sum(current)
        if total >= maximum:
            return []
        rows = self.free if nodes is None else self.free[nodes]
        out: Alloc = []
        size = g.slice_size
        if size:
            while total + size <= maximum:
                chunk = self.more_pods(g, current, size)
                if sum(chunk) < size:
                    break
                demand = np.asarray(chunk, dtype=np.int64) @ g.qreq
                if (self.used + demand > self.limit).any():
                    break
                placed = self._fill_slices(rows, nodes, g, [chunk])
                if placed is None:
                    break
                self.used += demand
                out.extend(placed)
                current = [a + b for a, b in zip(current, chunk, strict=True)]
                total += size
        else:
            for r, role in enumerate(g.spec.roles):
                want = min(role.replicas - current[r], maximum - total)
                per_pod = g.qreq[r]
                limited = per_pod > 0
                if limited.any():
                    want = min(want, int(((self.limit - self.used)[limited] // per_pod[limited]).min()))
                if want <= 0:
                    continue
                cand = g.idx[r] if nodes is None else np.flatnonzero(g.elig[r][nodes])
                got = first_fit(rows, cand, g.reqs[r], want, partial=True)
                assert got is not None
                pos, take = got
                n = int(take.sum())
                where = pos if nodes is None else nodes[pos]
                out.extend((r, node, k) for node, k in zip(where.tolist(), take.tolist(), strict=True))
                self.used += n * per_pod
                current[r] += n
                total += n
        if nodes is not None:
            self.free[nodes] = rows
        return out

    def _grow_pending(self, g: GangView) -> None:
        if g.name not in self.allocs or not g.elastic or g.spec.queue in self.locked:
            return
        with self._reserved(self.free, [g]):
            self._grow_pending_open(g)

    def _grow_pending_open(self, g: GangView) -> None:
        topo = g.spec.topology
        nodes = None
        if topo is not None and topo.required is not None:
            nodes = self.level(topo.required)[1][self.domain[g.name]]
        preferred = [level for level, _ in self.terms.spread_levels(g.spec)]
        if preferred:
            nodes = self._near_first(nodes, [node for _, node, _ in self.allocs[g.name]], preferred)
        current = list(self.counts[g.name])
        grown = self.grow(g, current, nodes)
        self._record_new(grown, g)
        self.allocs[g.name] = self.allocs[g.name] + grown

    def _near_first(self, nodes: IndexArray | None, placed: list[int], levels: list[str]) -> IndexArray:
        """``nodes`` (or every node) with those in the gang's domains first, broadest level
        first: a preferred gang grows inside the domains it already uses before it opens new
        ones (first fit in node order opened any)."""
        rows = np.arange(len(self.free), dtype=np.intp) if nodes is None else nodes
        keys: list[IntArray] = [np.arange(len(rows))]
        for level in levels:
            codes = self.level(level)[0]
            keys.append((~np.isin(codes[rows], codes[placed])).astype(np.int64))
        return rows[np.lexsort(keys)]

    def grow_running(self, gi: int) -> None:
        """Grow a running elastic gang that kept all its pods, inside its required domain and
        in whole slices (skipped if its current placement already breaks either, or its queue is
        :attr:`locked`)."""
        if self.running[gi].spec.queue in self.locked:
            return
        with self._reserved(self.free, [self.running[gi]]):
            self._grow_running_open(gi)

    def _grow_running_open(self, gi: int) -> None:
        g = self.running[gi]
        spec = g.spec
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        if not g.elastic or not self.kept[s:e].all():
            return
        current = np.bincount(self.rp_role[s:e], minlength=len(spec.roles)).astype(int).tolist()
        if sum(current) >= g.maximum:
            return
        topo = spec.topology
        nodes = None
        pod_nodes = self.rp_node[s:e]
        if topo is not None and topo.required is not None:
            codes, groups = self.level(topo.required)
            domains = np.unique(codes[pod_nodes])
            if domains.size != 1:
                return
            nodes = groups[int(domains[0])]
        if topo is not None and g.slice_size:
            codes = self.level(topo.slice_level or "")[0]
            if (np.bincount(codes[pod_nodes]) % g.slice_size).any():
                return
        alloc = self.grow(g, current, nodes)
        if alloc:
            self._record_new(alloc, g)
            self.allocs[g.name] = alloc

    # ------------------------------------------------------------------------- preemption

    def hopeless(self, g: GangView, counts: list[int]) -> bool:
        """True when even an empty cluster could not hold some role's minimum on its nodes."""
        return any(n and self._empty_fits(g, r) < n for r, n in enumerate(counts))

    def _empty_fits(self, g: GangView, r: int) -> int:
        """Pods of role ``r`` the nodes it may use hold when empty (cached per role shape)."""
        key = (role_signature(g.spec.roles[r]), tuple(g.reqs[r].tolist()))
        if key not in self._empty:
            self._empty[key] = int(fit_counts(self.cap, g.reqs[r], rows=g.idx[r]).sum())
        return self._empty[key]

    def _surplus(self, gi: int) -> list[int]:
        """Pod rows a victim can lose and keep its minimum (overall and per role): last pods first.
        Sliced gangs are not shrunk (a single pod would break their slices)."""
        g = self.running[gi]
        spec = g.spec
        if not g.elastic or g.slice_size > 1:
            return []
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        pods = s + np.flatnonzero(self.kept[s:e])
        per_role = np.bincount(self.rp_role[pods], minlength=len(spec.roles)).astype(int).tolist()
        total = len(pods)
        out: list[int] = []
        for p in reversed(pods.tolist()):
            r = int(self.rp_role[p])
            if total > g.minimum and per_role[r] > g.role_min[r]:
                out.append(p)
                per_role[r] -= 1
                total -= 1
        return out

    def _refresh_surplus(self, gi: int) -> None:
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        self.surplus[s:e] = False
        self.surplus[self._surplus(gi)] = True

    def units(self, victims: IndexArray) -> tuple[IndexArray, IndexArray, IndexArray, BoolArray]:
        """Removal units over ``victims`` (in order): first every surplus pod of elastic victims
        (one unit each; a victim's last pods first), then each victim's remaining pods (one
        unit per victim). Returns the pods of all units concatenated, unit start offsets
        (one more than units), the victim of each unit, and whether each unit is an eviction."""
        pods, lengths = self._pods_of(victims)
        rank = np.repeat(np.arange(len(victims), dtype=np.intp), lengths)
        alive = self.kept[pods]
        spare = alive & self.surplus[pods]
        rest = alive & ~self.surplus[pods]
        spare_order = np.lexsort((-pods[spare], rank[spare]))
        spare_pods, spare_rank = pods[spare][spare_order], rank[spare][spare_order]
        rest_pods, rest_rank = pods[rest], rank[rest]
        firsts = np.flatnonzero(run_starts(rest_rank))
        flat = np.concatenate([spare_pods, rest_pods]).astype(np.intp)
        starts = np.concatenate([np.arange(spare_pods.size), spare_pods.size + firsts, [flat.size]]).astype(np.intp)
        unit_victim = victims[np.concatenate([spare_rank, rest_rank[firsts]]).astype(np.intp)]
        evict = np.concatenate([np.zeros(spare_pods.size, dtype=np.bool_), np.ones(firsts.size, dtype=np.bool_)])
        return flat, starts, unit_victim, evict

    def _pods_of(self, gangs: IndexArray, lengths: IndexArray | None = None) -> tuple[IndexArray, IndexArray]:
        """The running pods of ``gangs`` (running gang rows, in order; each gang's pods in
        input order) concatenated, and each gang's number of pods (``lengths``, when the caller
        has them already)."""
        if lengths is None:
            lengths = self.rp_start[gangs + 1] - self.rp_start[gangs]
        before = np.cumsum(lengths) - lengths
        pods = np.arange(int(lengths.sum()), dtype=np.intp) + np.repeat(self.rp_start[gangs] - before, lengths)
        return pods, lengths

    def _segments(self, gangs: IndexArray) -> tuple[IndexArray, IndexArray] | None:
        """``gangs``' pods (:meth:`_pods_of`) and the start of each gang's among them, for a
        ``reduceat`` over those pods only that gives, per gang of ``gangs``, what the
        ``reduceat`` over every running pod at ``rp_start[:-1]`` gives at ``gangs``; None
        (reduce over every pod) where that would not be cheaper (more than a quarter of the
        running pods) or not the same (a gang without pods: ``reduceat`` gives the next gang's
        first pod there). The preemptions at XL reduced every running pod (about 220,000)
        three times a try for a few hundred to a few thousand victims."""
        lengths = self.rp_start[gangs + 1] - self.rp_start[gangs]
        if gangs.size == 0 or 4 * int(lengths.sum()) > len(self.rp_node) or not lengths.all():
            return None
        pods, _ = self._pods_of(gangs, lengths)
        starts = np.cumsum(lengths) - lengths
        return pods, starts

    def preempt(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        """Make room for the transaction by removing the fewest leading victim units, then
        reprieve in reverse order (see the module docstring, step 3)."""
        if self.victim_rank.size == 0:
            return None
        floor = min(g.spec.priority for g in gangs)
        near = np.zeros(len(self.free), dtype=np.bool_)
        for g, c in zip(gangs, counts, strict=True):
            for r, n in enumerate(c):
                if n:
                    near |= g.elig[r]
        if self.scope.plain:
            lower = self.victim_rank[: int(np.searchsorted(self.victim_prio, floor, side="left"))]
        else:
            lower = self.allowed_victims(gangs, counts, self.victim_rank)
        lower = lower[self.alive[lower]]
        if lower.size == 0:
            return None
        seg = self._segments(lower)
        anywhere = bool(near.all())  # every node near (most gangs): a pod touches them if kept
        if seg is None:
            kept = self.kept if anywhere else near[self.rp_node] & self.kept
            touches = np.logical_or.reduceat(kept, self.rp_start[:-1])[lower]
        else:
            pods, starts = seg
            kept = self.kept[pods] if anywhere else near[self.rp_node[pods]] & self.kept[pods]
            touches = np.logical_or.reduceat(kept, starts)
        if self._victims_as_arrays:
            victims = self._unblocked_rows(lower[touches])
        else:
            victims = np.asarray(self.borrowers_first(gangs, self.unblocked(lower[touches])), dtype=np.intp)
        if victims.size == 0:
            return None
        found = self.remove_then_fill(gangs, counts, *self.units(victims))
        if found is None:
            return None
        if not self.spares_spread:
            return found
        if self.prices_domains:  # the cheapest room finds what the spare would, and more
            return self.cheaper_domain(gangs, counts, victims, found)
        return self.spare_spread(gangs, counts, victims, found)

    spares_spread = True
    """Whether :meth:`preempt` tries other victims than the fewest leading ones: the room
    cheapest to clear (:meth:`cheaper_domain`, with :attr:`prices_domains`), else the spare
    (:meth:`spare_spread`). Greedy's rule. The peer emulations turn it off (they preempt as
    their schedulers do, docs/peers.md), and so does the slot placer, which places a choice
    already made (``SlotPlacer.spares_spread``)."""

    prices_domains = True
    """Whether :meth:`preempt` tries the room cheapest to clear (:meth:`cheaper_domain`)
    instead of the spare (:meth:`spare_spread`). Greedy's rule, made only where
    :attr:`spares_spread` is on: the peers preempt as their schedulers do (docs/peers.md) and
    the slot placer places a choice already made (with this, XL at 30 s lost 1,610.0 GPU-eq of
    priority 0 there: 2 passes instead of 6); both turn the spare off, and with it this.
    It replaces the spare rather than following it: after the spare it took greedy's pass at
    XL +0.76 CPU-s (7.02 -> 7.78, medians of 3 pairs, +11 %) for 15.0 GPU-eq of priority 0
    (180,784.4 against 180,769.4 alone); alone the plans of L, L busy 0.6 and five rounds of
    XL's and L's shape measured were the same (docs/benchmarks.md, "h36-domain")."""

    domain_tries = 2
    """At most this many domains placed again per preemption (:meth:`cheaper_domain`), the
    cheapest first (greedy's own included: the room priced there may be other nodes of it)."""

    spare_tries = 3
    """At most this many placements again per preemption (:meth:`spare_spread`): 8 changed no
    plan on the five rounds of XL's shape the spare moves; at XL the pass makes 152 placements
    again for 157 preemptions (+0.84 CPU-s, docs/benchmarks.md, "h35-victims")."""

    def spare_spread(
        self, gangs: list[GangView], counts: list[list[int]], victims: IndexArray, found: Attempt
    ) -> Attempt:
        """A preemption that costs less than ``found`` where ``found`` evicts a gang whose pods
        lie on nodes the transaction does not use, else ``found``.

        The fewest leading victim units place the transaction on whatever room they free: a
        rigid gang spread over many nodes loses all its pods for the one node the transaction
        takes, and the reprieve cannot put it back once that node is used (on the 256-node
        round of XL's shape, ``bench.xl_shape 256`` seed 3, run-00671: 64 one-node pods of
        priority 0, 1,280.0 GPU-eq, evicted for one 8-GPU pod; the optimum evicts eleven
        one-node gangs instead: docs/benchmarks.md, "h35-xlbound"). So the evicted victim with
        such pods, highest priority then highest tier value first, is taken off the victim
        list and the preemption made again over the rest (more leading units, the same
        reprieve): kept if what it loses (:meth:`_loss`: per priority, highest first, the tier
        value of the gangs it evicts, a rigid gang at its whole value; then the secondary
        cost) is lexicographically less, the next such victim tried otherwise, at most
        :attr:`spare_tries` placements. Every placement is one :meth:`remove_then_fill`, so
        rule 5, quotas and the reprieves hold as for the first."""
        spared: list[int] = []
        tried: set[int] = set()
        loss = self._loss(found)
        floor = min(g.spec.priority for g in gangs)
        for _ in range(self.spare_tries):
            spread = [gi for gi in self._collateral(found) if gi not in tried and self._spares(floor, gi)]
            if not spread:
                break
            gi = max(spread, key=lambda v: (self.running_prio[v], self.terms.tier_value(self.running[v].spec), -v))
            tried.add(gi)
            rest = victims[~np.isin(victims, [*spared, gi])]
            if rest.size == 0:
                continue
            other = self.remove_then_fill(gangs, counts, *self.units(rest), start=found.units - 1)
            if other is None:
                continue
            other_loss = self._loss(other)
            if other_loss < loss:
                found, loss = other, other_loss
                spared.append(gi)
        return found

    def cheaper_domain(
        self, gangs: list[GangView], counts: list[list[int]], victims: IndexArray, found: Attempt
    ) -> Attempt:
        """A preemption on the room cheapest to clear when it loses less than ``found``, else
        ``found``.

        :meth:`remove_then_fill` removes the fewest leading victims (lowest priority, then
        preemption cost) that let the transaction fit and places it first fit (in the tightest
        domain of its required level): which nodes it clears follows the victim order, not
        what clearing each node costs the objective. So the nodes are priced
        (:meth:`_cheapest_room`: a rigid victim at its whole tier value, an elastic one's
        surplus pods at their removal cost), and the preemption is made again over only the
        victims on the cheapest room that makes up what the gang lacks (per domain of its
        required level, the :attr:`domain_tries` cheapest domains, ``found``'s among them: its
        cheapest nodes may be others than ``found``'s, as on the 32-node round of
        tests/test_slots.py, where skipping it lost the spare's gain; without a required level,
        the cheapest nodes of the cluster), those on the cheapest node first: the same
        search, reprieve, rule 5 and quota checks. Kept if the tier
        values it evicts (:meth:`_loss` without its secondary cost) are lexicographically
        less: taking every secondary-only saving too moved more placements for little (L
        priority 0 50,454.9 against 50,484.9 GPU-eq, 1024/250/1 of L's shape 11,051.8 against
        11,111.8). Only for a single gang under the default policies. Unlike the spare
        (:meth:`_spares`) every priority tries it (measured with the spare run before it):
        kept to the lowest pending priority above
        the victims', greedy reached priority 5 178,385.5 and priority 0 180,394.4 GPU-eq at XL
        (every priority: 178,380.5 and 180,784.4, 5.0 lower on priority 5), but 4,250.3
        against 4,375.3 on priority 5 of 512/62/3 of XL's shape, and on L busy 0.6 priority 0
        225.0 below greedy without the rule where every priority gains 15.0 on priority 5
        (docs/benchmarks.md, "h36-domain")."""
        if len(gangs) != 1 or not self.scope.plain or not found.removed:
            return found
        loss = self._loss(found)
        if not any(loss[:-1]):
            return found  # only shrinks: no tier value to save (12 of 147 at XL)
        g, c = gangs[0], counts[0]
        rooms = self._cheapest_room(g, c, victims, g.spec.priority, self.domain_tries)
        seg = self._segments(victims)
        if seg is None:  # over every running pod, then the victims'
            pods, starts = np.arange(len(self.rp_node), dtype=np.intp), self.rp_start[:-1]
        else:
            pods, starts = seg
        nodes, kept, surplus = self.rp_node[pods], self.kept[pods], self.surplus[pods]
        for rank in rooms:  # greedy's own domain too: other nodes of it
            # a victim by the cheapest chosen node where it loses more than surplus pods; one
            # with only surplus pods there after them all (its shrink units come first anyway:
            # ordered first, its eviction unit led the search, and on 256/31/3 the placement
            # evicted run-00726, 128 pods, for the room its surplus freed)
            key = np.full(len(pods), np.inf)
            on = np.isfinite(rank[nodes]) & kept
            whole = on & ~surplus
            key[whole] = rank[nodes[whole]]
            key[on & surplus] = len(self.free)
            first = np.minimum.reduceat(key, starts)
            first = first[victims] if seg is None else first
            order = np.lexsort((np.arange(victims.size), first))
            mine = victims[order][np.isfinite(first[order])]
            if mine.size == 0:
                continue
            other = self.remove_then_fill(gangs, counts, *self.units(mine))
            if other is None:
                continue
            other_loss = self._loss(other)
            if other_loss[:-1] < loss[:-1]:  # the tiers: a secondary-only saving moves room for little
                found, loss = other, other_loss
        return found

    def _cheapest_room(
        self, g: GangView, counts: list[int], victims: IndexArray, floor: int, limit: int
    ) -> list[FloatArray]:
        """Where removing some of ``victims`` makes room for ``counts`` pods of ``g`` costs
        least: per domain of ``g``'s required level (the whole cluster without one),
        cheapest domain first, the ``limit`` cheapest: the rank of each node of the room chosen
        there (0 the cheapest node; inf for every node outside it). Only those are made (one
        array of every node a domain: at XL a preemption made 40 for the 2 it tries).

        Per node, clearing it costs the tier value of every victim gang with a pod there (a
        rigid gang all-or-nothing: its whole value, wherever its other pods are), weighted by
        the victim's priority (:data:`_TIER_WEIGHT`), plus the removal cost of the surplus pods
        of elastic victims (a shrink costs no tier value), and adds the pods of each role that
        fit once the victims' pods there are gone. Per domain the nodes that add pods are taken
        cheapest per pod added first until the pods it lacks are met (per role; the roles'
        prices summed). Nodes rule 5 reserves at ``floor`` add nothing. Numpy over the pods
        and nodes: no loop over victims."""
        topo = g.spec.topology
        if topo is not None and topo.required is not None:
            codes, groups = self.level(topo.required)
            n_domains = len(groups)
        else:
            codes, n_domains = np.zeros(len(self.free), dtype=np.int64), 1
        n = len(self.running)
        lengths = self.rp_start[victims + 1] - self.rp_start[victims]
        if 16 * int(lengths.sum()) <= len(self.rp_node):  # a few victims: their pods only
            ordered = np.unique(victims)  # their pods ascending, as a mask over every pod gives them
            pods, _ = self._pods_of(ordered, self.rp_start[ordered + 1] - self.rp_start[ordered])
            pods = pods[self.kept[pods]]
        else:
            gang_of = np.zeros(n, dtype=np.bool_)
            gang_of[victims] = True
            pods = np.flatnonzero(gang_of[self.rp_gang] & self.kept)
        if pods.size == 0:
            return []
        nodes = self.rp_node[pods]
        after = self.free.copy(order="K")
        _scatter_add(after, nodes, _rows_of(self.rp_rows, pods))
        reserved = self.floor >= floor
        roles: list[tuple[int, IndexArray, IntArray, IntArray]] = []
        useful = np.zeros(len(self.free), dtype=np.bool_)
        for r, need in enumerate(counts):
            if need:
                idx = g.idx[r]
                idx = idx[~reserved[idx]]
                now = fit_counts(self.free, g.reqs[r], cap=need, rows=idx)
                adds = fit_counts(after, g.reqs[r], cap=need, rows=idx) - now
                roles.append((need, idx, now, adds))
                useful[idx[adds > 0]] = True
        # only the victims on nodes that add pods are priced (each gang once per engine: the
        # first preemptions at XL priced tens of thousands of gangs in Python, 0.5 CPU-s)
        on = useful[nodes]
        pods, nodes = pods[on], nodes[on]
        owner = self.rp_gang[pods]
        value, removal = self._victim_prices(owner)
        whole = ~self.surplus[pods]
        cost = np.zeros(len(self.free), dtype=np.float64)
        pairs = np.sort(nodes[whole].astype(np.int64) * n + owner[whole])
        pairs = pairs[run_starts(pairs)]  # each (node, gang) once
        np.add.at(cost, pairs // n, value[pairs % n])
        np.add.at(cost, nodes[~whole], removal[owner[~whole]])
        price = np.zeros(n_domains, dtype=np.float64)
        ok = np.ones(n_domains, dtype=np.bool_)
        rank = np.full(len(self.free), np.inf)
        for need, idx, now, adds in roles:
            code = codes[idx]
            lack = np.maximum(need - np.bincount(code, weights=now, minlength=n_domains), 0)
            more = adds > 0
            idx, code, adds = idx[more], code[more], adds[more]
            ok &= np.bincount(code, weights=adds, minlength=n_domains) >= lack
            each = cost[idx]
            order = np.lexsort((idx, each / adds, code))
            idx, code, adds, each = idx[order], code[order], adds[order], each[order]
            before = np.cumsum(adds) - adds
            if code.size:
                before -= before[np.searchsorted(code, code)]
            take = before < lack[code]
            price += np.bincount(code[take], weights=each[take], minlength=n_domains)
            np.minimum.at(rank, idx[take], np.flatnonzero(take).astype(np.float64))
        domains = np.flatnonzero(ok)
        cheapest = domains[np.argsort(price[domains], kind="stable")][:limit]
        return [np.where(codes == d, rank, np.inf) for d in cheapest.tolist()]

    def _victim_prices(self, victims: IndexArray) -> tuple[FloatArray, FloatArray]:
        """Per running gang (filled for ``victims``, repeats allowed): the price of evicting it (its tier value,
        times :data:`_TIER_WEIGHT` per priority of the running gangs below its own) and of
        removing one surplus pod (its secondary pod removal cost, a tier-free shrink)."""
        if self._prices is None:
            n = len(self.running)
            self._prices = (np.full(n, np.nan), np.full(n, np.nan))
        value, removal = self._prices
        todo = np.sort(victims[np.isnan(value[victims])])
        if todo.size:
            todo = todo[run_starts(todo)]  # each gang once
            ascending = self._victim_priorities[::-1]
            weight = np.asarray([_TIER_WEIGHT**k for k in range(len(ascending))], dtype=np.float64)
            specs = [cast(RunningGang, self.running[gi].spec) for gi in todo.tolist()]
            tier, cost = self.terms.running_prices(specs)  # tier_value, pod_removal_cost: numpy
            rank = np.searchsorted(np.asarray(ascending, dtype=np.int64), self.running_prio[todo])
            value[todo] = tier * weight[rank]
            removal[todo] = cost / _TIER_WEIGHT
        return value, removal

    _prices: tuple[FloatArray, FloatArray] | None = None
    """:meth:`_victim_prices`' arrays, filled as victims are priced."""

    def _spares(self, floor: int, gi: int) -> bool:
        """Whether a transaction whose lowest priority is ``floor`` spares running gang ``gi``:
        only the lowest pending priority above the victim's does. Sparing moves the
        transaction onto other room, which gangs still to come may have needed; where those
        rank above the victim (a priority-10 transaction sparing a priority-0 victim, then the
        priority-5 gangs) that can cost a higher tier than the spare gains: on the busy-0.6 L
        round priority 5 lost 17.1 GPU-eq, on 512/62/1 of XL's shape priority 0 lost 330.0; with
        this rule neither, and the gains on XL, L and 256/31/3 stay (docs/benchmarks.md,
        "h35-victims")."""
        prio = int(self.running_prio[gi])
        above = self._pending_priorities[bisect_right(self._pending_priorities, prio) :]
        return bool(above) and floor == above[0]

    @cached_property
    def _pending_priorities(self) -> list[int]:
        """The pending gangs' priorities, ascending, each once (:meth:`_spares`)."""
        return sorted({g.spec.priority for g in self.pending})

    def _collateral(self, found: Attempt) -> list[int]:
        """The gangs ``found`` evicts that have removed pods on nodes it places nothing on."""
        landed = np.zeros(len(self.free), dtype=np.bool_)
        for alloc, _ in found.allocs:
            landed[[node for _, node, _ in alloc]] = True
        out: list[int] = []
        for pods in found.removed:
            gi, whole = self._removal(pods)
            if whole and not landed[self.rp_node[pods]].all():
                out.append(gi)
        return out

    def _removal(self, pods: IndexArray) -> tuple[int, bool]:
        """The running gang whose pod rows ``pods`` a preemption removes, and whether they are
        all it kept (an eviction, not a shrink)."""
        gi = int(self.rp_gang[pods[0]])
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        return gi, pods.size == int(self.kept[s:e].sum())

    def _loss(self, found: Attempt) -> tuple[int, ...]:
        """What ``found``'s preemptions cost the objective, comparable lexicographically: per
        priority of the victims (highest first, every priority of the running gangs) the tier
        value of the gangs it evicts, then the secondary cost (evictions, pods removed)."""
        tier: dict[int, int] = defaultdict(int)
        secondary = 0
        for pods in found.removed:
            gi, whole = self._removal(pods)
            spec = self.running[gi].spec
            assert isinstance(spec, RunningGang)
            if whole:
                tier[spec.priority] += self.terms.tier_value(spec)
                secondary += self.terms.eviction_cost(spec)
            else:
                secondary += int(pods.size) * self.terms.pod_removal_cost(spec)
        return (*(tier[p] for p in self._victim_priorities), secondary)

    @cached_property
    def _victim_priorities(self) -> list[int]:
        """The running gangs' priorities, highest first (:meth:`_loss`'s tiers)."""
        return sorted({int(p) for p in self.running_prio.tolist()}, reverse=True)

    @cached_property
    def _victims_as_arrays(self) -> bool:
        """Whether :meth:`preempt` may keep its victims an array from end to end: under the
        default policies, with no queue nominal (so :meth:`borrowers_first` keeps the order)
        and the engine's own :meth:`unblocked` and :meth:`borrowers_first`. The same victims;
        the 170 preemptions of the fragmented XL round built a list of up to 60,000 ints and
        read it back each (0.2-0.3 of greedy's 4.5-5.7 CPU-s)."""
        kind = type(self)
        mine = kind.unblocked is GreedyEngine.unblocked and kind.borrowers_first is GreedyEngine.borrowers_first
        return mine and self.scope.plain and not any(q.nominal for q in self.scope.queues.values())

    def allowed_victims(self, gangs: list[GangView], counts: list[list[int]], ranked: IndexArray) -> IndexArray:
        """The gangs of ``ranked`` (in order) that every gang of the transaction may preempt."""
        if self.scope.plain:  # strictly lower than every gang of the transaction
            floor = min(g.spec.priority for g in gangs)
            prio = self.running_prio[ranked]
            out: IndexArray = ranked[(prio < floor) & self.alive[ranked]] if ranked.size else ranked
            return out
        demand = [np.asarray(c, dtype=np.int64) @ g.reqs for g, c in zip(gangs, counts, strict=True)]
        usage = self.queue_now() if self.reclaim else None
        keep = [
            gi
            for gi in ranked.tolist()
            if self.alive[gi] and all(self.may_preempt(g, gi, d, usage) for g, d in zip(gangs, demand, strict=True))
        ]
        return np.asarray(keep, dtype=np.intp)

    def remove_then_fill(
        self,
        gangs: list[GangView],
        counts: list[list[int]],
        flat: IndexArray,
        starts: IndexArray,
        unit_victim: IndexArray,
        unit_evict: BoolArray,
        start: int = 0,
    ) -> Attempt | None:
        """The fewest leading removal units (pods ``flat[starts[u]:starts[u+1]]`` of unit ``u``)
        that let the transaction fit, then reprieve in reverse order; None if none do.
        ``start``: the search gallops from there (fewer units taken not to fit), not from the
        front: :meth:`spare_spread`'s placements again, whose answer is near the first's."""
        if len(starts) < 2:
            return None
        freed_quota = np.vstack([np.zeros((1, self.quota.size), dtype=np.int64), np.cumsum(self.rp_q[flat], axis=0)])

        # The pods' nodes and requests gathered once; the free capacity after the first k units
        # is one matrix moved from try to try by the units between (_Shortfall): one copy a
        # try instead of two, and the shortfall count kept up to date on the nodes moved.
        nodes, rows = self.rp_node[flat], _rows_of(self.rp_rows, flat)
        short = _Shortfall(self.free, gangs, counts, nodes, rows)

        def attempt(k: int) -> Attempt | None:
            end = int(starts[k])
            if short.certain(end):
                return None  # some role's pods do not fit even on every eligible node: no placement can
            return self.attempt(gangs, counts, short.work_at(end), self.used - freed_quota[end])

        n_units = len(starts) - 1
        # every unit removed: summed at once, the cursor left at the front where the gallop starts
        end = int(starts[n_units])
        work = self.free.copy(order="K")
        _scatter_add(work, nodes[:end], rows[:end])
        best = self.attempt(gangs, counts, work, self.used - freed_quota[end])
        if best is None:
            return None
        # gallop from the front (most transactions need few units), then bisect
        base = min(max(start - 1, 0), n_units)
        lo, hi, step = base, n_units, 1
        while base + step < hi:
            found = attempt(base + step)
            if found is not None:
                hi, best = base + step, found
                break
            lo, step = base + step, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            found = attempt(mid)
            if found is None:
                lo = mid
            else:
                hi, best = mid, found
        removed = self.reprieve(best, flat, starts[: hi + 1], unit_victim[:hi], unit_evict[:hi])
        if removed is None:
            # The victims only freed quota: the placement went elsewhere. Once more, on the
            # victims' nodes only (a priority-3 gang placed beside the victims' node, where only
            # quota was freed, while the node of the priority-0 victim held it:
            # tests/test_regressions.py).
            retry = self._on_victims_nodes(gangs, counts, flat[: starts[hi]], freed_quota[starts[hi]])
            if retry is None:
                return None
            best, removed = retry, self.reprieve(retry, flat, starts[: hi + 1], unit_victim[:hi], unit_evict[:hi])
            if removed is None:
                return None
        best.removed = removed
        best.units = hi
        return best

    def _on_victims_nodes(
        self, gangs: list[GangView], counts: list[list[int]], pods: IndexArray, freed: IntArray
    ) -> Attempt | None:
        """:meth:`attempt` with ``pods`` removed and the transaction kept to their nodes."""
        work = self.free.copy(order="K")
        _scatter_add(work, self.rp_node[pods], self.rp_rows[pods])
        theirs = np.zeros(len(work), dtype=np.bool_)
        theirs[self.rp_node[pods]] = True
        others = work[~theirs].copy()
        work[~theirs] = 0
        found = self.attempt(gangs, counts, work, self.used - freed)
        if found is not None:
            found.free[~theirs] = others
        return found

    def reprieve(
        self, best: Attempt, flat: IndexArray, starts: IndexArray, unit_victim: IndexArray, unit_evict: BoolArray
    ) -> list[IndexArray] | None:
        """Put units back, last first, while the placement in ``best`` still fits; returns the
        pods that stay removed, or None if a victim would only have freed quota."""
        work, used = best.free, best.used
        n_units = len(starts) - 1
        landed = np.zeros(len(self.free), dtype=np.bool_)
        for alloc, _ in best.allocs:
            landed[[node for _, node, _ in alloc]] = True
        pods_landed = landed[self.rp_node[flat[: starts[-1]]]]
        unit_landed = np.logical_or.reduceat(pods_landed, starts[:-1]) if n_units else np.zeros(0, dtype=np.bool_)
        retained = np.ones(n_units, dtype=np.bool_)
        # Units away from every new pod go back together when quota allows (capacity is sure).
        away = np.flatnonzero(~unit_landed)
        if away.size:
            # the pods of the units away, in unit order, by one mask (a list of slices per unit
            # cost 1.9 of greedy's 12.5 CPU-s on the fragmented XL round: tens of thousands of units)
            unit_of = np.repeat(np.arange(n_units, dtype=np.intp), np.diff(starts))
            pods = flat[: starts[-1]][~unit_landed[unit_of]]
            if self.put_back(work, used, pods):
                retained[away] = False
        evicting: set[int] = set()
        # Only the units still retained, last first (the loop clears only the unit it is at, so
        # the list is the loop's own): the units away went back above, and looping over every
        # unit to skip them was 2.7 M steps on the fragmented XL round (170 preemptions).
        todo = np.flatnonzero(retained)[::-1]
        for u, v, evict in zip(todo.tolist(), unit_victim[todo].tolist(), unit_evict[todo].tolist(), strict=True):
            if not evict and v in evicting:
                continue
            if self.put_back(work, used, flat[starts[u] : starts[u + 1]]):
                retained[u] = False
            elif evict:
                evicting.add(v)
        # An evicted victim loses all its pods: take back its reprieved surplus pods too (at
        # once: integer sums, the same in any order).
        if evicting:
            back = np.flatnonzero(~retained & ~unit_evict & np.isin(unit_victim, np.fromiter(evicting, dtype=np.intp)))
            if back.size:
                pods = np.concatenate([flat[starts[u] : starts[u + 1]] for u in back.tolist()])
                _scatter_add(work, self.rp_node[pods], self.rp_rows[pods])
                used -= self.rp_q[pods].sum(axis=0)
                retained[back] = True
        by_victim: dict[int, list[int]] = defaultdict(list)
        for u in np.flatnonzero(retained).tolist():
            by_victim[int(unit_victim[u])].append(u)
        removed: list[IndexArray] = []
        for units in by_victim.values():
            pods = np.concatenate([flat[starts[u] : starts[u + 1]] for u in units])
            if landed[self.rp_node[pods]].any():
                removed.append(pods)
            elif not self.put_back(work, used, pods):
                return None  # it only freed quota: not a preemption the plan may make
        if removed and self.quota.size and self._steals(best, removed):
            return None
        return removed

    def put_back(self, work: IntArray, used: IntArray, pods: IndexArray) -> bool:
        """Put running pods back on their nodes if capacity and quota allow (modifies both)."""
        nodes, rows = self.rp_node[pods], _rows_of(self.rp_rows, pods)
        if len(pods) > 1:
            nodes, rows = _node_sums(len(work), nodes, rows)
        if not self.quota.size:  # no quota row to check or add (8,218 calls at XL)
            if (work[nodes] < rows).any():
                return False
            work[nodes] -= rows
            return True
        quota = self.rp_q[pods].sum(axis=0)
        if (work[nodes] < rows).any() or (used + quota > self.limit).any():
            return False
        work[nodes] -= rows
        used += quota
        return True

    def final_reprieve(self) -> None:
        """Put back evicted gangs (whole) and shrunk pods (one by one) that fit again."""
        self._settle(self.free, self.used, self.kept, self.alive, self.victim_order, {})

    def _settle(
        self,
        free: IntArray,
        used: IntArray,
        kept: BoolArray,
        alive: BoolArray,
        victims: list[int],
        extra: dict[str, tuple[GangView, Alloc]],
    ) -> None:
        """Put back (in place) the removed pods of ``victims`` that fit again, last victim
        first, until nothing more fits: evicted gangs whole, shrunk gangs pod by pod, the pods
        on nodes where no gang that may preempt the victim landed first (``extra``: new pods
        not in :attr:`allocs` yet). A pod left removed there would be preempted for no gang."""
        new_rows: dict[int, IndexArray] = {}  # filled on first need: the new pods do not change here
        changed = True
        while changed:
            changed = False
            for gi in reversed(victims):
                s, e = self.rp_start[gi], self.rp_start[gi + 1]
                lost = s + np.flatnonzero(~kept[s:e])
                if lost.size == 0:
                    continue
                if not alive[gi]:
                    if self.put_back(free, used, lost):
                        kept[lost] = True
                        alive[gi] = True
                        changed = True
                    continue
                if lost.size > 1:
                    served = self._served_rows(gi, extra, new_rows)
                    lost = lost[np.argsort(served[self.rp_node[lost]], kind="stable")]
                for p in lost.tolist():
                    if self.put_back(free, used, np.asarray([p], dtype=np.intp)):
                        kept[p] = True
                        changed = True

    def _new_pods(self, extra: dict[str, tuple[GangView, Alloc]]) -> Iterator[tuple[GangView, Alloc]]:
        """Every gang with new pods so far (and those of ``extra``), with its pods."""
        views = self._views()
        for name, alloc in self.allocs.items():
            if name not in extra:
                yield views[name], alloc
        yield from extra.values()

    def _views(self) -> dict[str, GangView]:
        """Every gang's view by name, built once per pair of gang lists (a peer replaces them
        after the engine's setup): on the fragmented XL round (57 k running gangs) building it
        per reprieve check was 0.35 of greedy's 3.2 CPU-s."""
        cached = self._views_of
        if cached is None or cached[0] is not self.pending or cached[1] is not self.running:
            views = [*self.pending, *self.running]  # by map: no property call per gang (70,536 at XL)
            cached = (self.pending, self.running, dict(zip(map(_SPEC_NAME, views), views, strict=True)))
            self._views_of = cached
        return cached[2]

    def _may_use(
        self, g: GangView, gi: int, usage: dict[str, dict[str, int]] | None, memo: dict[_LicenceKey, bool] | None = None
    ) -> bool:
        """Whether ``g``'s new pods may use what running gang ``gi`` lost (rule 5); ``usage``
        is :meth:`queue_now` (None under the default policies, which do not read it).

        ``memo`` caches answers while neither ``usage`` nor :attr:`kept` changes: the answer
        reads the gang only through its queue, priority and (same queue and priority as the victim's)
        submit time (:class:`Scope`), and
        a round's 200 pending gangs have a dozen such keys. Without it, 4,800 pairs per
        reprieve check made this 80 % of greedy's time on the M round under reclaim-any
        policies (``python -m bench.queue_policies M``: 3.0 CPU-s)."""
        if self.scope.plain:
            return g.spec.priority > self.running[gi].spec.priority
        if memo is None:
            return self.may_preempt(g, gi, usage=usage)
        victim = self.running[gi].spec
        same = g.spec.queue == victim.queue and g.spec.priority == victim.priority
        key = (g.spec.queue, g.spec.priority, getattr(g.spec, "submit_time", None) if same else None, gi)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self.may_preempt(g, gi, usage=usage)
        return hit

    def _served_rows(
        self, gi: int, extra: dict[str, tuple[GangView, Alloc]], new_rows: dict[int, IndexArray] | None = None
    ) -> BoolArray:
        """Per node row, whether a gang that may preempt ``gi`` got new pods there.
        ``new_rows`` (default policies: whom a gang may preempt is its priority): the caller's
        cache of the new pods' rows by their gang's priority, filled here on first use, for
        callers whose new pods do not change between calls (:meth:`_settle`)."""
        served = np.zeros(len(self.free), dtype=np.bool_)
        if self.scope.plain and new_rows is not None:
            if not new_rows:
                by: dict[int, list[int]] = {}
                for g, alloc in self._new_pods(extra):
                    by.setdefault(g.spec.priority, []).extend(node for _, node, _ in alloc)
                new_rows.update({p: np.asarray(v, dtype=np.intp) for p, v in by.items()})
                new_rows.setdefault(np.iinfo(np.int64).min, np.zeros(0, dtype=np.intp))  # filled, maybe empty
            below = self.running[gi].spec.priority
            for p, rows in new_rows.items():
                if p > below:
                    served[rows] = True
            return served
        usage = None if self.scope.plain else self.queue_now()
        memo: dict[_LicenceKey, bool] = {}
        for g, alloc in self._new_pods(extra):
            if alloc and self._may_use(g, gi, usage, memo):
                served[[node for _, node, _ in alloc]] = True
        return served

    def _steals(self, best: Attempt, removed: list[IndexArray]) -> bool:
        """Whether committing ``best`` (which removes ``removed``) would leave a preemption only
        gangs that may not preempt its victim need: rule 5's second reprieve check (docs/rules.md).

        A transaction whose victims free more quota than it uses can make an earlier victim's
        removal unneeded for the gangs that may preempt it; the earlier victim then fits back
        on top of their pods, and its share of the quota goes to gangs of its own priority or
        lower (a priority-2 gang starting on the quota a priority-3 gang took from a running
        priority-2 gang: tests/test_regressions.py). The cluster after the transaction is
        settled as :meth:`commit` will settle it; then every victim left must still be needed."""
        free, used = best.free.copy(order="K"), best.used.copy()
        kept, alive = self.kept.copy(), self.alive.copy()
        victims = list(self.victim_order)
        for pods in removed:
            kept[pods] = False
            for gi in np.unique(self.rp_gang[pods]).tolist():
                s, e = self.rp_start[gi], self.rp_start[gi + 1]
                alive[gi] = bool(kept[s:e].any())
                if gi not in self.victims_seen and gi not in victims:
                    victims.append(gi)
        extra = {g.name: (g, alloc) for g, (alloc, _) in zip(best.gangs, best.allocs, strict=True)}
        self._settle(free, used, kept, alive, victims, extra)
        usage = None if self.scope.plain else self.queue_now()
        quota: list[tuple[GangView, IntArray]] = []
        for g, alloc in self._new_pods(extra):
            q = sum((k * g.qreq[r] for r, _, k in alloc), np.zeros(self.quota.size, dtype=np.int64))
            if q.any():
                quota.append((g, q))
        memo: dict[_LicenceKey, bool] = {}
        # Under the default policies a gang may not use a victim's room when its priority is at
        # most the victim's (:meth:`_may_use`'s ``scope.plain`` answer, summed): the quota of
        # those gangs is a prefix sum over the priorities (a pass over every new pod's gang per
        # victim was 36 of kueue_like's 89 CPU-s at XL).
        prios: list[int] = []
        prefix = np.zeros((1, self.quota.size), dtype=np.int64)
        if self.scope.plain:
            by_prio: dict[int, IntArray] = {}
            for g, q in quota:
                p = g.spec.priority
                by_prio[p] = by_prio[p] + q if p in by_prio else q
            prios = sorted(by_prio)
            prefix = np.vstack([prefix, np.cumsum([by_prio[p] for p in prios], axis=0).reshape(-1, self.quota.size)])
        for gi in victims:
            s, e = self.rp_start[gi], self.rp_start[gi + 1]
            lost = s + np.flatnonzero(~kept[s:e])
            if lost.size == 0:
                continue
            if self.scope.plain:
                others = prefix[bisect_right(prios, self.running[gi].spec.priority)]
            else:
                others = sum(
                    (q for g, q in quota if not self._may_use(g, gi, usage, memo)),
                    np.zeros(self.quota.size, dtype=np.int64),
                )
            if not others.any():
                continue
            units = [lost] if not alive[gi] else [lost[i : i + 1] for i in range(lost.size)]
            for pods in units:
                if self.put_back(free.copy(order="K"), used - others, pods):
                    return True
        return False

    # ------------------------------------------------------------------------- waiting

    def wait(self, gangs: list[GangView], counts: list[list[int]]) -> None:
        if not self.explain:
            self.waiting += [Waiting(gang=g.name, code="policy", reasons=[UNEXPLAINED]) for g in gangs]
            return
        culprit: GangView | None = None
        code: WaitingCode = "capacity"
        reason = "the gangs of its group do not fit together"
        for g, c in zip(gangs, counts, strict=True):
            found = self.diagnose(g, c, alone=len(gangs) == 1)
            if found is not None:
                culprit, (code, reason) = g, found
                break
        for g in gangs:
            if len(gangs) == 1 or g is culprit or culprit is None:
                self.waiting.append(Waiting(gang=g.name, code=code, reasons=[reason]))
            else:
                group = g.spec.group if isinstance(g.spec, PendingGang) else None
                self.waiting.append(
                    Waiting(
                        gang=g.name,
                        code="group",
                        reasons=[f"its group {group!r} cannot start: {culprit.name} waits ({reason})"],
                    )
                )

    def diagnose(self, g: GangView, counts: list[int], *, alone: bool = False) -> tuple[WaitingCode, str] | None:
        """Why ``g`` alone cannot start now; None if it could (then its group is the reason)."""
        roles = g.spec.roles
        for r, n in enumerate(counts):
            if n and g.idx[r].size == 0:
                return "eligibility", f"role {roles[r].name}: {self.elig.explain(roles[r])}"
        for r, n in enumerate(counts):
            if n and self._empty_fits(g, r) < n:
                return "capacity", (
                    f"role {roles[r].name} needs {n} pods of {_requests(roles[r].requests)}; even empty, "
                    "the nodes it may use hold fewer"
                )
        demand = np.zeros(self.quota.size, dtype=np.int64)
        demand += np.asarray(counts, dtype=np.int64) @ g.qreq
        over = np.flatnonzero(self.used + demand > self.limit)
        if over.size:
            c = int(over[0])
            res = self.res[int(self.quota.resource[c])]
            left = int(self.limit[c] - self.used[c])
            return "quota", (
                f"{self.quota.labels[c]} has {human(left, res)} left; its minimum of {sum(counts)} pods needs "
                f"{human(int(demand[c]), res)}"
            )
        if g.spec.queue in self.locked and not self._within_locked([g], [counts]):
            return "quota", (
                f"queue {g.spec.queue} took back quota lent in its cohort this round and stays within its nominal "
                f"{_requests(self.scope.queues[g.spec.queue].nominal)}; its minimum of {sum(counts)} pods would go "
                "above"
            )
        preempt = " (preempting lower-priority gangs does not make room)" if self.rnd.policy.preemption else ""
        if not alone and self.place(self.free.copy(order="K"), g, counts) is not None:
            return None
        topo = g.spec.topology
        constrained = topo is not None and (topo.required is not None or g.slice_size > 0)
        loose = constrained and self.place(self.free.copy(order="K"), g, counts, topology=False) is not None
        if topo is not None and loose:
            if topo.required is not None:
                return "topology", f"no single {topo.required} has room for its {sum(counts)} pods{preempt}"
            return "topology", (
                f"its {sum(counts)} pods do not form slices of {g.slice_size} pods each within one "
                f"{topo.slice_level}{preempt}"
            )
        for r, n in enumerate(counts):
            avail = int(fit_counts(self.free, g.reqs[r], cap=n, rows=g.idx[r]).sum())
            if avail < n:
                return "capacity", (
                    f"role {roles[r].name} needs {n} pods of {_requests(roles[r].requests)}; the free capacity "
                    f"of the nodes it may use holds {avail}{preempt}"
                )
        return "capacity", f"its {sum(counts)} pods do not fit together in the free capacity{preempt}"

    # ------------------------------------------------------------------------- plan

    def plan(self) -> Plan:
        nodes = [n.name for n in self.rnd.cluster.nodes]
        taken = running_pod_names(self.rnd)
        placements: list[Placement] = []
        users: dict[int, list[str]] = defaultdict(list)
        gangs = self._views()
        order = [*self.admitted, *(self.running[gi].name for gi in self._running_allocated())]
        for name in order:
            g = gangs[name]
            for r, role in enumerate(g.spec.roles):
                pods = [(node, k) for rr, node, k in self.allocs[name] if rr == r]
                names = _pod_names(name, role.name, sum(k for _, k in pods), taken)
                it = iter(names)
                for node, k in pods:
                    for _ in range(k):
                        placements.append(
                            Placement.model_construct(gang=name, role=role.name, pod=next(it), node=nodes[node])
                        )
            for _, node, _ in self.allocs[name]:
                if not users[node] or users[node][-1] != name:
                    users[node].append(name)
        preemptions: list[Preemption] = []
        resizes: list[Resize] = []
        for gi in self._changed_running():
            g = self.running[gi]
            spec = g.spec
            assert isinstance(spec, RunningGang)
            s, e = self.rp_start[gi], self.rp_start[gi + 1]
            lost = np.flatnonzero(~self.kept[s:e]).tolist()
            new = sum(k for _, _, k in self.allocs.get(g.name, []))
            if lost:
                rows = sorted({int(self.rp_node[s + i]) for i in lost})
                evicted = len(lost) == len(spec.pods)
                beneficiaries = {u for row in rows for u in users[row] if self._licensed(gangs[u], gi)}
                cost = self.terms.preemption_cost(spec) * (1.0 if evicted else len(lost) / len(spec.pods))
                preemptions.append(
                    Preemption(
                        gang=g.name,
                        kind="evict" if evicted else "shrink",
                        pods=[spec.pods[i].name for i in lost],
                        nodes=[nodes[row] for row in rows],
                        priority=spec.priority,
                        cost=cost,
                        for_gangs=sorted(beneficiaries),
                    )
                )
                if evicted:
                    continue
            after = len(spec.pods) - len(lost) + new
            if after != len(spec.pods):
                resizes.append(Resize(gang=g.name, from_members=len(spec.pods), to_members=after))
        return Plan(
            status=Status.FEASIBLE,
            solver=self.solver,
            admitted=list(self.admitted),
            placements=placements,
            preemptions=preemptions,
            resizes=resizes,
            waiting=self.waiting,
        )

    def _licensed(self, g: GangView, gi: int) -> bool:
        if self.scope.plain:
            return g.spec.priority > self.running[gi].spec.priority
        return self.may_preempt(g, gi, usage=self._usage_at_end)

    @cached_property
    def _usage_at_end(self) -> dict[str, dict[str, int]]:
        """:meth:`queue_now` once the round is decided (read by :meth:`plan` only)."""
        return self.queue_now()

    def _changed_running(self) -> list[int]:
        """Running gangs that lose or gain pods, in input order: the only ones a plan lists
        (the others are most of a round, so they are not visited one by one)."""
        losing = set(np.unique(self.rp_gang[~self.kept]).tolist())
        return sorted(losing.union(self._running_allocated()))

    def _running_allocated(self) -> list[int]:
        """Running gangs (by index, ascending) with new pods: found from the gangs with new pods,
        not by a pass over every running gang (two per plan, 16,262 gangs at fragmented L)."""
        at = self._running_at()
        return sorted(at[name] for name in self.allocs if name in at)

    def _running_at(self) -> dict[str, int]:
        """Each running gang's index by name, built once per running-gang list (as :meth:`_views`)."""
        cached = self._running_at_of
        if cached is None or cached[0] is not self.running:
            at = dict(zip(map(_SPEC_NAME, self.running), range(len(self.running)), strict=True))
            cached = self._running_at_of = (self.running, at)
        return cached[1]


_PODS = attrgetter("pods")
_NODE = attrgetter("node")
_ROLE = attrgetter("role")
_PRIORITY = attrgetter("priority")
_SPEC_PRIORITY = attrgetter("spec.priority")
_SPEC_NAME = attrgetter("spec.name")


def _stacked(blocks: list[IntArray], width: int) -> IntArray:
    """Row blocks stacked into one matrix of ``width`` columns (no blocks: no rows)."""
    return np.concatenate(blocks) if blocks else np.zeros((0, width), dtype=np.int64)


class _Shortfall:
    """The free capacity once the first ``end`` pods of a victim list are removed, and whether a
    transaction's minimum then certainly does not fit: some role of one of its gangs has fewer
    pod slots on its eligible nodes than pods to place (``fit_counts`` summed). Every placement
    path (first fit, the topology and slice paths, the peers' own) puts pods on eligible nodes
    within their room, so then the attempt fails too, and :meth:`GreedyEngine.remove_then_fill`
    skips it: a failed attempt scans every candidate node, and on the fragmented XL round half of
    its 4,388 tries failed.

    One matrix, moved from one ``end`` to the next by the pods between (added or taken off: exact
    integer sums, the same matrix as the removed pods added to the free capacity at once), and
    the slots recounted on the nodes moved only. The slots are counted without reservations
    (more room, so the answer stays certain). Before, each try summed its pods from the
    nearest try below it kept as a copy, and the check sorted every removed pod's node again
    (so it gave up past a quarter of the nodes)."""

    def __init__(
        self, free: IntArray, gangs: list[GangView], counts: list[list[int]], nodes: IndexArray, rows: IntArray
    ) -> None:
        self.work = free.copy(order="K")
        self.end = 0
        self.nodes, self.rows = nodes, rows
        self.needs: list[tuple[BoolArray, IntArray, int]] = []
        self.slots: list[int] = []
        self.fits: list[IntArray] = []
        """Per need, the pods of it that fit on each node now (0 where it may not go): the
        nodes moved are counted after the move only (was before and after: 4,510 tries at XL)."""
        for g, c in zip(gangs, counts, strict=True):
            for r, n in enumerate(c):
                if n:
                    fits = np.zeros(len(free), dtype=np.int64)
                    fits[g.idx[r]] = fit_counts(free, g.reqs[r], cap=n, rows=g.idx[r])
                    self.slots.append(int(fits.sum()))
                    self.fits.append(fits)
                    self.needs.append((g.elig[r], g.reqs[r], n))

    def move(self, end: int) -> None:
        """Put the first ``end`` pods removed (and no others)."""
        if end == self.end:
            return
        lo, hi = min(end, self.end), max(end, self.end)
        seg, rows = self.nodes[lo:hi], self.rows[lo:hi]
        if 16 * len(seg) < len(self.work):  # a few pods: their nodes by a sort, the rows gathered
            touched, delta = _node_sums(len(self.work), seg, rows)
            after = self.work[touched]
            after = after + delta if end > self.end else after - delta
            for i, (elig, req, n) in enumerate(self.needs):
                mine = touched[elig[touched]]
                self._recount(i, mine, fit_counts(after[elig[touched]], req, cap=n))
            self.work[touched] = after
        else:  # many: their nodes by a mask, the pods added in place
            mark = np.zeros(len(self.work), dtype=np.bool_)
            mark[seg] = True
            touched = np.flatnonzero(mark)
            _scatter_add(self.work, seg, rows if end > self.end else -rows)
            for i, (elig, req, n) in enumerate(self.needs):
                at = touched[elig[touched]]
                self._recount(i, at, fit_counts(self.work, req, cap=n, rows=at))
        self.end = end

    def _recount(self, i: int, at: IndexArray, now: IntArray) -> None:
        """Need ``i``'s pods that fit on the nodes ``at`` (distinct) are ``now``: the slots follow."""
        fits = self.fits[i]
        self.slots[i] += int(now.sum()) - int(fits[at].sum())
        fits[at] = now

    def certain(self, end: int) -> bool:
        """Whether the transaction certainly does not fit with the first ``end`` pods removed."""
        self.move(end)
        return any(slots < n for slots, (_, _, n) in zip(self.slots, self.needs, strict=True))

    def work_at(self, end: int) -> IntArray:
        """A copy of the free capacity with the first ``end`` pods removed (the caller's to modify)."""
        self.move(end)
        return self.work.copy(order="K")


def _pod_rows(blocks: list[IntArray], width: int, gang: IndexArray, role: IndexArray) -> IntArray:
    """Per pod, row ``role`` of its gang's block: the blocks a shape shares (:meth:`GreedyEngine._gang`)
    are stacked once, not once per gang (68,536 blocks of a few shapes at fragmented XL)."""
    first: dict[int, int] = {}
    unique: list[IntArray] = []
    offsets: list[int] = []
    rows = 0
    for block in blocks:
        at = first.get(id(block))
        if at is None:
            at = first[id(block)] = rows
            unique.append(block)
            rows += len(block)
        offsets.append(at)
    out: IntArray = _stacked(unique, width)[np.asarray(offsets, dtype=np.intp)[gang] + role]
    return out


def _rows_of(matrix: IntArray, index: IndexArray) -> IntArray:
    """``matrix[index]`` for a Fortran-ordered ``matrix``, gathered one column at a time (the
    same rows; twice as fast as the 2-D gather for the tens of thousands of pods of a victim
    list in rank order, scattered over the pod index: 2 ms a preemption at fragmented XL). A
    few rows (a reprieve's unit: one pod, one gang) by the 2-D gather itself: 0.7 against 4 us
    for one row, 4.7 against 9.7 for 200."""
    if len(index) <= 256:
        few: IntArray = matrix[index]
        return few
    out = np.empty((len(index), matrix.shape[1]), dtype=matrix.dtype, order="F")
    for j in range(matrix.shape[1]):
        np.take(matrix[:, j], index, out=out[:, j])
    return out


def _node_sums(n_nodes: int, nodes: IndexArray, rows: IntArray) -> tuple[IndexArray, IntArray]:
    """The distinct ``nodes`` (ascending) and the sum of ``rows`` on each (one row per entry of
    ``nodes``, of ``n_nodes`` nodes). Many pods are summed into a zeroed matrix of every node,
    one column at a time, and the nodes found by a mask, instead of sorting them and a 2-D
    ``np.add.at``: a reprieve puts back tens of thousands of pods at once at fragmented XL
    (6 ms -> 1 ms); the same sums (integers) and the same order."""
    if 16 * len(nodes) < n_nodes:
        touched, inverse = np.unique(nodes, return_inverse=True)
        agg = np.zeros((len(touched), rows.shape[1]), dtype=np.int64)
        np.add.at(agg, inverse, rows)
        return touched, agg
    full = np.zeros((n_nodes, rows.shape[1]), dtype=np.int64, order="F")
    _scatter_add(full, nodes, rows)
    mark = np.zeros(n_nodes, dtype=np.bool_)
    mark[nodes] = True
    touched = np.flatnonzero(mark)
    return touched, full[touched]


def _shift_rows(matrix: IntArray, rows: IndexArray, amount: int) -> None:
    """``matrix[rows] += amount`` (``rows`` unique), one column at a time: on the engine's
    Fortran-ordered free matrix a quarter faster than the 2-D fancy index (3 columns, 300
    rows: 30 against 41 µs a reservation and its release, 2,263 of them at fragmented L)."""
    for j in range(matrix.shape[1]):
        column = matrix[:, j]
        column[rows] += amount


def _scatter_add(matrix: IntArray, rows: IndexArray, values: IntArray) -> None:
    """``matrix[rows] += values`` with repeated rows summed, one column at a time (much faster
    than a 2-D ``np.add.at`` on a Fortran-ordered matrix)."""
    for j in range(matrix.shape[1]):
        np.add.at(matrix[:, j], rows, values[:, j])


def _pod_names(gang: str, role: str, k: int, taken: AbstractSet[str]) -> list[str]:
    """The ``k`` lowest-index names ``{gang}-{role}-{i}`` that no running pod has."""
    out: list[str] = []
    i = 0
    while len(out) < k:
        name = f"{gang}-{role}-{i}"
        if name not in taken:
            out.append(name)
        i += 1
    return out


def _requests(requests: dict[str, int]) -> str:
    """``"8 gpu, 64Gi memory"``: one pod's requests for messages."""
    return ", ".join(human(amount, res) for res, amount in sorted(requests.items()) if amount) or "nothing"
