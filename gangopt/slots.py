"""Tier bounds that know fragmentation and preemption: pod slots per node, then one LP per tier.

The cheap tier bounds of :mod:`gangopt.bounds` pool the cluster's free capacity (1-7 free GPUs
on many nodes count as room for an 8-GPU pod), assume every running gang stays, and bound only
the first tier below the full ones. On issue 13's fragmented rounds that overstated the tiers by
11-16 % while greedy's plans were optimal. This module bounds **every** tier with pending gangs
by what fits **per node**, and charges the evictions the tiers above need:

* **Room per priority.** Every running pod stays except those of *candidates* (running gangs
  the prefilter says may lose pods: preemptible and outranked). A node that gets a new pod of
  priority P keeps every candidate of priority >= P (rule 5: victims are strictly lower, and a
  node a victim left receives only strictly higher pods), so ``R_P(n)`` = capacity less fixed
  pods less candidate pods of priority >= P.
* **Levels.** New pods of the LP's tiers up to Q on a node leave the candidates of priority
  >= Q in place, and the candidates of the LP's tiers below Q that stay there use room too:
  one family of rows per tier Q of the LP, over ``R_Q``, with the kept candidates of tiers in
  [P, Q) as columns (kept = 1). This is how the tiers above pay for the room they take from
  tier P: starting a priority-10 gang on a priority-5 candidate's node evicts it.
* **Slots.** On one node, pods asking ``s_i`` of resource ``k`` use at most
  ``floor(R(n, k) / t)`` slots of size ``t`` when each counts ``floor(s_i / t)`` (floor is
  superadditive); summed over a node set this is what 1-7 free GPUs per node cannot offer an
  8-GPU pod. Node sets: each eligibility mask of a pending role (the one reading of
  :class:`gangopt.arrays.Eligibility`), their union, and every domain a gang with a required
  topology level may use (such a gang gets one column per domain, and none where its minimum
  cannot fit even alone). Per set and resource also the amount row (total room). A node
  where a candidate of the LP's tiers is evicted loses its slots for tier P's own pods
  (rule 5 again).
* **Lexicographic floors.** Going down from the highest priority, the optimum's value of tier Q
  is at least a valid plan's as long as every tier above Q is proven (its bound equals the
  plan's value): those tiers, down to and including the first one not proven, enter the LP of
  each tier below as rows ``value >= the plan's value``.
* **Elastic candidates.** Each pod of one is a group on its node with a variable of its own
  (kept or not), like a rigid candidate's pods, and a kept elastic candidate keeps at least
  its minimum of them: its kept pods take room, slots (through the node blockers) and rule 5
  (a node where it lost a pod) on their own nodes. Charged once as its minimum at its least
  request, by amount only, the 64-node busy-0.6 round (seed 0) had its lowest tier bounded at
  643.6 against an optimum of 618.6, and placed on any node in slot rows, the 1,024-node
  busy-0.75 round's integer model kept victims whose pods did not fit node by node (bound
  12,956.0; with a variable per pod 12,916.0, which a validated plan reaches).
* **Whole variables.** A gang starts or not, a candidate is kept or not: the model is solved
  with every variable 0 or 1 when its LP optimum is fractional (:func:`_integer_bound`).

The model maximizes tier P's value (kept pending gangs ``y``, candidates of tier P kept or
not, other running gangs of tier P counted as kept). Gang groups, quotas, slices and growth
are left out, which only loosens the bound. Built with numpy and handed to GLOP (then SCIP)
as one model proto (per-coefficient calls cost 3 µs each).

Measured (docs/benchmarks.md, "Fragmented rounds"): on the 128-node rounds at busy 0.6, 0.75
and 0.9 the bounds of CP-SAT's plan equal the true optimum of the independent reference model
(tests/reference.py), and at 0.75 and 0.9 greedy's plan is proven without a model (0.1 CPU-s
instead of 2.4-3.8); tier 5's bound at busy 0.75 went from 343.2 to 259.9, the optimum. At
1,024 nodes the lowest tier's bound went from 3191.9 to 2744.2 (greedy 2528.0, the optimum
unknown). Cost: 15-25 ms at 128 nodes, 60-90 ms at 1,024 (a loaded 2-core machine).

With whole variables and a variable per elastic pod (docs/benchmarks.md, "Slot bounds that are
reached"), the lowest tier's bound at 1,024 nodes went from 13,256.3 to 12,916.0 (busy 0.75),
6,583.0 to 6,138.8 (0.6) and 15,922.3 to 15,817.3 (0.9), and at 512 nodes from 5,745.7 to
5,438.6; each is reached by a plan the validator accepts (``python -m bench.bound_truth``), so
those are the optima. Cost: 7-15 ms at 128 nodes, 0.1-0.4 CPU-s at 1,024 (was 30-70 ms).

Rounds over :data:`MAX_COLUMNS` pending and candidate gangs (docs/benchmarks.md, "Slot bounds
and placer at L and XL"): with the caller's leave (:func:`allow_large`) and within
:data:`LARGE_SHARE` of the time limit, SCIP runs with its presolve. On the fragmented
4,096-node round (busy 0.75) the lowest tier's bound goes from 55,043.7 GPU-eq (the packed
bound) to 46,864.2, against greedy's 42,958.6; the integer model's whole solution is at
46,863.6, and the slot placer's plan at 46,738.6, so that 9 % is real and 0.3 % is left.
Since h28-L such a round's first open tier far below its LP's bound gives the slot placer the
LP's own solution instead of SCIP's (:data:`LP_CHOICE_GAP`, :func:`slot_choice`), and its
secondary stage reuses the lowest tier's model (:func:`_tier_lp`): on the many-small-gangs
4,096-node round the bounds, the placer pass and the secondary bound went from 6.0-7.3 to
2.2-2.3 CPU-s (docs/benchmarks.md, "h28-L").

Since h32-L06 a large round's integer solves keep to the clock and cost less: CLP's primal
simplex solves its tier LPs (:data:`LARGE_LP_SOLVER`), CP-SAT (not SCIP) the integer model
of a tier whose LP lies within :data:`LP_CHOICE_GAP` of the plan (:data:`LARGE_SAT_SETTINGS`),
SCIP runs for a bound alone far above the plan only on models of at most
:data:`SCIP_BOUND_MAX_VARIABLES`, and every integer solve of a larger model on a clocked solve
stops at :data:`INTEGER_SHARE` of the limit (the LP's bound and its own solution then stand). On the
fragmented 4,096-node busy-0.6 round the slot models' solves went from 7.6 CPU-s (5 calls;
the 10 s limit ended at 10.6-11.1 s with greedy's plan) to 1.6-2.0 (docs/benchmarks.md,
"h32-L06").
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from gangopt import arrays
from gangopt.bounds import Floors, chained_tier_bounds
from gangopt.lp_wire import Rows, add_variables
from gangopt.objective import ObjectiveTerms
from gangopt.prefilter import Prefiltered, request_vector, running_pod_rows
from gangopt.schema import PendingGang, RunningGang
from gangopt.slot_classes import affordable as classes_affordable
from gangopt.slot_classes import class_tier_bounds

if TYPE_CHECKING:
    from ortools.linear_solver import linear_solver_pb2, pywraplp

MAX_THRESHOLDS = 8
"""Slot rows per node set, level and resource (the largest request sizes of pending pods):
the amount row covers the smaller ones."""


MAX_COLUMNS = 1500
"""Rounds with up to this many kept pending and candidate running gangs get the slot bounds
whatever their time limit, solved as below (:data:`SCIP_SETTINGS`). The LP grows with them
(measured on a loaded 2-core machine: 1,024-node rounds of the old tilted running mix, 485-612
columns, 60-90 ms). The benchmark family's 1,024-node rounds (many small running gangs) have
2,962-4,370 and get them with CP-SAT's clock-based leave (:func:`allow_large`): on a machine at
load 4 the leave was refused and the busy-0.75 round's optimal greedy plan was reported 2.1 %
short. Raised to 5,000 (no clock), the busy-0.75 seed-2 round spent 51 s of a 10 s limit
(17.9 CPU-s) in these settings' SCIP before any search: kept at 1,500."""

WHOLE_SECONDARY_GANGS = 1500
"""Rounds with up to this many pending and candidate gangs solve the secondary second stage
(:func:`secondary_bound_at`) with whole variables: 10-25 ms at 128 nodes, but 0.34 CPU-s
against the LP's 0.18 on the 1,024-node busy-0.75 round, whose plan the LP proves already.
Larger rounds solve its LP, and leave out the preferred-topology columns
(:func:`_preferred_columns`: spread counted at 0): on the fragmented 4,096-node round (busy
0.75, 1,664 such columns) they tightened the bound by 2.0 GPU-eq (257.9 against 259.9, for a
plan at 140-158) for 0.3-0.4 CPU-s of model and 0.4 of LP; on the 1,024-node one, 0."""

SECONDARY_LP_SOLVER = "CLP"
"""The LP solver of a large round's secondary stage (GLOP when the OR-Tools build has no
CLP). On the fragmented 4,096-node round (busy 0.75; 27,543 variables, 37,580 rows) GLOP's
primal simplex took 2.4-2.8 CPU-s (12,881 iterations), CLP's dual simplex 0.7-0.9 (4,812),
for the same optimum; on the tier models GLOP is as fast (0.27-0.33 CPU-s for priority 0) and
stays."""

LARGE_SHARE = 0.25
"""Rounds with more than :data:`MAX_COLUMNS` pending and candidate gangs get the slot bounds
when the estimated cost of their LPs (:func:`large_estimate`) is at most this share of
``policy.time_limit`` (a rule on the round and its policy, not on the clock, so that a bound,
and whether a plan is returned proven, repeats on a loaded machine), solved with SCIP's
presolve (:data:`LARGE_SCIP_SETTINGS`). The fragmented 4,096-node round (busy 0.75, issue 13's
many small running gangs: 998 pending gangs in 1,754 columns, 13,103 candidates with 14,326
pods) gets them at a 10 s limit and by this rule at 3 s too, where the clock then decides
(estimate 0.73 s for the LPs, 0.92 whole; measured 0.7-1.0 CPU-s since h28-L, 1.7-2.0
before); the 16,384-node rounds do not (16,293 pending columns and 59,283 candidate pods on
the many-small-gangs one: estimate 33 s for the LPs since h29-XLlong, measured 33.4 CPU-s, so
a limit under about 134 s refuses them; on the tilted one the lowest tier's LP alone took 6.9
CPU-s). Until stop 27 the rule counted gangs (500 per second of the limit):
the 4,096-node round of many small gangs (14,101) got no slot bounds at all, and its plan
stayed at greedy's (6.8 % reported; with them the slot placer's plan is proven within 0.5 %)."""

INTEGER_NODES = 200
"""Branch-and-bound nodes the integer slot model may use (a deterministic limit: the bound,
and so whether greedy's plan is returned proven, must not depend on the machine's load)."""

SCIP_SETTINGS = (
    f"limits/nodes = {INTEGER_NODES}\n"
    "presolving/maxrounds = 0\nseparating/maxrounds = 0\nseparating/maxroundsroot = 0\n"
)
"""No presolve and no cutting planes: on a 1,024-node busy-0.6 round they took SCIP from
0.10 to 0.33-0.56 CPU-s for the same bound (6,208.8; GLOP's LP: 6,278.1 in 9 ms)."""

LARGE_SCIP_SETTINGS = "limits/nodes = 10\n"
"""SCIP with its presolve and cuts, for models over :data:`MAX_COLUMNS` columns. On the
fragmented 4,096-node round's lowest tier (11,013 variables, 13,794 rows, 13 fractional in the
LP) SCIP without presolve spent 3.0 CPU-s in its root LP and 5.6 CPU-s for 27 nodes (whole
solution 468,636, bound 468,640.5); with it, 1.0 CPU-s at the root for the same whole solution
and the LP's bound (468,642.5). At 1,024 nodes the presolve costs more than it saves
(:data:`SCIP_SETTINGS`). A node limit, not a time limit: deterministic. Since h28-L it runs
for a bound alone, or for the slot placer's choice when the plan is within
:data:`LP_CHOICE_GAP` of the LP's bound or the LP's own choice was not enough
(:func:`slot_choice` with ``whole``)."""

DOMAIN_THRESHOLDS = 2
"""Slot rows per required domain and level (largest sizes, first resource only)."""

LP_MARGIN = 0.05
"""Objective units added to GLOP's optimum before rounding down: its feasibility and
optimality tolerances (1e-7 on rows scaled to 1) move the value by far less."""


@dataclass(frozen=True)
class _Solution:
    """A whole solution of one tier's slot model (on a round over :data:`MAX_COLUMNS`, the
    LP's own, read at one half: :func:`_integer_bound`'s ``lp_choice``): the values and where
    to read them."""

    x: np.ndarray
    var: np.ndarray
    """Per column, its variable (-1: not in the model)."""
    gvar: np.ndarray
    """Per pod group, the variable that says it is kept."""
    rounded: bool = False
    """The LP's own solution (fractional values), not a whole one."""


@dataclass(frozen=True)
class _Kept:
    """A large round's lowest-tier slot model, kept for its secondary stage (:func:`_tier_lp`
    with ``growth``): the model with its growth groups held at 0, where to read it, and the
    growth groups' variables with their own upper bounds."""

    model: linear_solver_pb2.MPModelProto
    var: np.ndarray
    gvar: np.ndarray
    grown: list[int]
    upper: list[float]


@dataclass
class _Slots:
    """Every column and pod group of one prefiltered round (built once, kept on it).

    A column is a pending gang in one of its allowed domains (or anywhere) or a candidate
    running gang; a pod group is a count of pods of one request in one mask (pending) or on
    one node (candidates)."""

    prio: np.ndarray
    value: np.ndarray
    pending: np.ndarray
    """Per column: a pending gang (True) or a candidate (False)."""
    gang: np.ndarray
    """Per column: index into the pending gangs (columns of one gang share it), -1 for candidates."""
    domain_set: np.ndarray
    """Per column: the node set of its required domain, -1 if none."""
    gcol: np.ndarray
    gcount: np.ndarray
    greq: np.ndarray
    gmask: np.ndarray
    """Per pending group, its mask's id; -1 for candidate groups."""
    gnode: np.ndarray
    """Per candidate group, its node; -1 for pending groups."""
    sets: list[np.ndarray]
    """Node sets of the rows: masks (ids 0..), their union, then required domains."""
    mask_sets: int
    """How many of :attr:`sets` are masks (and the union); the rest are domains."""
    subset: np.ndarray
    """``subset[m, s]``: mask ``m`` lies within set ``s`` (for the mask sets)."""
    fixed_value: dict[int, int]
    """Per priority, the tier value of running gangs that are not candidates (always kept)."""
    capacity: np.ndarray
    fixed: np.ndarray
    candidate: dict[int, np.ndarray]
    flex: np.ndarray
    """Per group: a pod of an elastic candidate (its own kept-or-not variable)."""
    minimum: np.ndarray
    """Per column: an elastic candidate's minimum pods (0 for other columns)."""
    running: np.ndarray
    """Per column: index into the running gangs for a candidate, -1 for pending gangs."""
    place: list[tuple[str, int] | None]
    """Per column: the required level and domain index of a pending gang's column, else None."""
    gpod: np.ndarray
    """Per candidate group, the pod's index in its running gang; -1 for pending groups."""
    ok: np.ndarray | None = None
    """Per column: whether a pending gang's minimum fits, alone, in the room of its own
    priority within its masks (and domain); candidates always. Set on first use."""
    rooms: dict[int, np.ndarray] = field(default_factory=dict)
    member_cache: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    lps: dict[tuple[int, tuple[tuple[int, int], ...]], int | None] = field(default_factory=dict)
    solutions: dict[tuple[int, tuple[tuple[int, int], ...]], _Solution] = field(default_factory=dict)
    """Per LP of :attr:`lps`, the integer model's whole solution when one was found."""
    bound_only: set[tuple[int, tuple[tuple[int, int], ...]]] = field(default_factory=set)
    """LPs of :attr:`lps` whose bound is exact but whose whole solution was not sought (the
    tier was not the first open one, or the plan proved it: :func:`_tier_lp`). Should a later
    plan open the first tier there, the model is solved again for :func:`slot_choice`."""
    open_tier: dict[tuple[tuple[int, int], ...], tuple[int, tuple[tuple[int, int], ...]]] = field(default_factory=dict)
    """Per plan's tier values: the first tier its bounds leave open, and the floors above it
    (the key of its LP in :attr:`lps`)."""
    rhs: dict[tuple[int, int, int, int], int] = field(default_factory=dict)
    models: dict[tuple[int, tuple[tuple[int, int], ...]], _Kept] = field(default_factory=dict)
    """Per LP of :attr:`lps`, a large round's lowest-tier model kept for the secondary stage."""
    grow: np.ndarray | None = None
    """Per group, in the secondary model only (:func:`_with_growth`): the pods a *growth
    group* may add (a started pending gang's pods of one role above its minimum; 0 for the
    other groups, whose count is :attr:`gcount`); None in the tier models, which leave growth
    out. A growth group's variable counts its pods (whole in the integer model), its
    :attr:`gcount` is 1."""
    grow_value: np.ndarray | None = None
    """Per group, with :attr:`grow`: the secondary value of one of its pods."""
    spread: np.ndarray | None = None
    """Per column, in the secondary model only (:func:`_preferred_columns`): the least spread
    cost a started gang of that column pays (a preferred-topology gang's column that is in no
    single domain); None elsewhere."""

    def widened(self, **changes: Any) -> _Slots:
        """This model with more columns or groups (``changes``, as :func:`dataclasses.replace`
        takes them): the caches that read the columns start empty; those that read only the
        nodes (:attr:`rooms`, :attr:`rhs`) are kept unless ``changes`` names them."""
        fresh: dict[str, Any] = {
            "member_cache": {},
            "lps": {},
            "solutions": {},
            "bound_only": set(),
            "open_tier": {},
            "models": {},
        }
        return replace(self, **{**fresh, **changes})

    def room(self, priority: int) -> np.ndarray:
        """``R_P``: capacity less fixed pods less candidate pods of priority >= P, per node."""
        hit = self.rooms.get(priority)
        if hit is None:
            hit = self.capacity - self.fixed
            for prio, usage in self.candidate.items():
                if prio >= priority:
                    hit = hit - usage
            hit = self.rooms[priority] = np.maximum(hit, 0)
        return hit

    def fits_alone(self) -> np.ndarray:
        """:attr:`ok`, computed once. The LP would split a gang over two racks that each hold
        part of it (5 of 8 whole-node pods here, 3 there: 'all of it'); a gang starts whole in
        one domain, so a column whose minimum cannot fit there even alone is fixed at 0."""
        if self.ok is None:
            ok = np.ones(len(self.prio), dtype=bool)
            seen: dict[tuple[int, bytes, int, int], int] = {}
            for g in np.flatnonzero(self.gmask >= 0).tolist():
                col, mask = int(self.gcol[g]), int(self.gmask[g])
                if not ok[col]:
                    continue
                dom = int(self.domain_set[col])
                key = (int(self.prio[col]), self.greq[g].tobytes(), mask, dom)
                if key not in seen:
                    nodes = self.sets[mask] if dom < 0 else self.sets[mask] & self.sets[dom]
                    room = self.room(int(self.prio[col]))[nodes]
                    seen[key] = int(arrays.fit_counts(room, self.greq[g], cap=1 << 30).sum())
                ok[col] = seen[key] >= self.gcount[g]
            self.ok = ok
        return self.ok

    def members(self, s: int) -> tuple[np.ndarray, np.ndarray]:
        """Group indexes of set ``s``: pending groups whose pods must lie in it (mask within
        it; for a domain, the columns of that domain), and candidate groups on its nodes."""
        hit = self.member_cache.get(s)
        if hit is None and s >= self.mask_sets:
            # Domains count only their own gangs' pods: the kept candidates there would make
            # hundreds of racks times every candidate (a 4,096-node LP 5x larger). Every
            # domain's groups at once, by one stable sort (L 0.75: 256 domains, a pass over
            # every group each).
            domain = np.where(self.gmask >= 0, self.domain_set[self.gcol], -1)
            order = np.argsort(domain, kind="stable")
            sets, starts = np.unique(domain[order], return_index=True)
            ends = [*starts[1:].tolist(), len(order)]
            none = np.zeros(0, dtype=np.int64)
            for d in range(self.mask_sets, len(self.sets)):
                self.member_cache[d] = (none, none)
            for d, a, b in zip(sets.tolist(), starts.tolist(), ends, strict=True):
                if d >= self.mask_sets:
                    self.member_cache[d] = (order[a:b].astype(np.int64), none)
            hit = self.member_cache[s]
        if hit is None:
            pending = self.gmask >= 0
            inside = pending & self.subset[np.maximum(self.gmask, 0), s]
            on_nodes = (self.gnode >= 0) & self.sets[s][np.maximum(self.gnode, 0)]
            hit = self.member_cache[s] = (np.flatnonzero(inside), np.flatnonzero(on_nodes))
        return hit

    def slots(self, priority: int, s: int, k: int, t: int) -> int:
        """Pods asking ``t`` (or 1 for the amount row, ``t = 0``) of resource ``k`` that fit
        in ``R_priority`` over the nodes of set ``s`` (for ``t = 0``: the total room)."""
        key = (priority, s, k, t)
        hit = self.rhs.get(key)
        if hit is None:
            column = self.room(priority)[self.sets[s], k]
            hit = self.rhs[key] = int(column.sum(dtype=object)) if t == 0 else int((column // t).sum())
        return hit


def _shared(pre: Prefiltered) -> _Slots:
    """The round's columns and groups, built once per prefiltered round (every candidate plan
    and the finisher ask for bounds)."""
    return pre.kept("slots", lambda: _build(pre))


def _build(pre: Prefiltered) -> _Slots:
    """Columns and pod groups: pending gangs the prefilter kept (per allowed domain), then
    candidates; node rooms from every running pod in one numpy pass."""
    rnd = pre.rnd
    terms = ObjectiveTerms.of(rnd)
    resources = pre.resources
    nres = len(resources)
    n = len(rnd.cluster.nodes)
    elig = arrays.per_cluster(rnd.cluster, "eligibility", lambda: arrays.Eligibility(rnd))
    masks: list[np.ndarray] = []
    mask_ids: dict[bytes, int] = {}

    def mask_id(mask: np.ndarray) -> int:
        key = np.packbits(mask).tobytes()
        if key not in mask_ids:
            mask_ids[key] = len(masks)
            masks.append(np.asarray(mask, dtype=bool))
        return mask_ids[key]

    cols: list[tuple[int, int, bool, int, tuple[str, int] | None]] = []  # prio, value, pending, gang, domain
    groups: list[tuple[int, int, np.ndarray, int, int]] = []  # col, count, request, mask, node
    domains: dict[tuple[str, int], None] = {}
    for gi in pre.pending:
        gang = rnd.pending[gi]
        pods: list[tuple[int, np.ndarray, int]] = []
        spare: list[tuple[np.ndarray, np.ndarray]] = []
        for role in gang.roles:
            request = request_vector(role, resources)
            mask = elig.mask(role)
            count = gang.role_minimum(role)
            if count:
                pods.append((count, request, mask_id(mask)))
            if role.replicas > count:
                spare.append((request, mask))
        extra = gang.minimum - sum(gang.role_minimum(r) for r in gang.roles)
        if extra > 0 and spare:
            # Pods beyond the role minimums may be of any role with room to grow: the least
            # each could ask, in the union of their masks.
            union = np.logical_or.reduce([m for _, m in spare])
            pods.append((extra, np.min(np.stack([r for r, _ in spare]), axis=0), mask_id(union)))
        level = gang.topology.required if gang.topology is not None else None
        places: list[tuple[str, int] | None] = [None]
        if level is not None:
            codes, names = pre.topo.codes(level)
            wanted = set(pre.required_domains.get(gi, names))
            places = [(level, d) for d, name in enumerate(names) if name in wanted]
        for place in places:
            if place is not None:
                domains[place] = None
            col = len(cols)
            cols.append((gang.priority, terms.tier_value(gang), True, gi, place))
            groups.extend((col, count, request, m, -1) for count, request, m in pods)
    mask_count = len(masks)
    capacity = arrays.cluster_capacity(rnd, resources).astype(np.int64)
    # Every running pod as array rows: the prefilter's (node, gang, requests).
    running = rnd.running
    pod_node, pod_gang, pod_req = running_pod_rows(pre)
    movable = np.zeros(len(running), dtype=bool)
    movable[np.asarray(pre.candidates, dtype=np.intp)] = True
    priority = np.fromiter((run.priority for run in running), dtype=np.int64, count=len(running))
    # The running gangs' tier values from the objective's table (a pass the scoring of the
    # first candidate made already): 16,262 ``tier_value`` calls cost 0.09 CPU-s at L 0.75.
    values = terms.running_base.tier
    fixed = np.zeros((n, nres), dtype=np.int64)
    stays = ~movable[pod_gang]
    np.add.at(fixed, pod_node[stays], pod_req[stays])
    candidate: dict[int, np.ndarray] = {}
    for prio in np.unique(priority[movable]).tolist():
        picked = ~stays & (priority[pod_gang] == prio)
        candidate[prio] = np.zeros((n, nres), dtype=np.int64)
        np.add.at(candidate[prio], pod_node[picked], pod_req[picked])
    fixed_value: dict[int, int] = {}
    for gi in np.flatnonzero(~movable).tolist():
        fixed_value[running[gi].priority] = fixed_value.get(running[gi].priority, 0) + values[gi]
    # Candidates as columns, their pods as groups, one per pod (on its node). An elastic
    # candidate's pods get a variable each (kept or not) and at least its minimum of them stay
    # when it is kept (:func:`_tier_lp`): they take room on their own nodes only.
    cand = np.flatnonzero(movable)
    cand_col = np.full(len(running), -1, dtype=np.int64)
    cand_col[cand] = np.arange(len(cols), len(cols) + len(cand))
    cols.extend((running[gi].priority, values[gi], False, -1, None) for gi in cand.tolist())
    elastic = np.fromiter((run.elastic for run in running), dtype=bool, count=len(running))
    moving = ~stays
    # Node sets: masks, their union, required domains.
    sets = list(masks)
    if mask_count > 1:
        union = np.logical_or.reduce(masks)
        if np.packbits(union).tobytes() not in mask_ids:  # often the unconstrained mask itself
            sets.append(union)
    subset = np.zeros((mask_count, len(sets)), dtype=bool)
    for m in range(mask_count):
        for s in range(len(sets)):
            subset[m, s] = not (masks[m] & ~sets[s]).any()
    mask_sets = len(sets)
    domain_set: dict[tuple[str, int], int] = {}
    for level, d in domains:
        codes, _ = pre.topo.codes(level)
        domain_set[(level, d)] = len(sets)
        sets.append(codes == d)
    g, r = len(groups), int(moving.sum())
    pending_req = np.stack([x[2] for x in groups]) if groups else np.zeros((0, nres), np.int64)
    gcol = np.concatenate([np.fromiter((x[0] for x in groups), dtype=np.int64, count=g), cand_col[pod_gang[moving]]])
    gcount = np.concatenate([np.fromiter((x[1] for x in groups), dtype=np.int64, count=g), np.ones(r, np.int64)])
    gmask = np.concatenate([np.fromiter((x[3] for x in groups), dtype=np.int64, count=g), np.full(r, -1, np.int64)])
    greq = np.concatenate([pending_req, pod_req[moving]])
    minimum = np.zeros(len(cols), dtype=np.int64)
    col_running = np.full(len(cols), -1, dtype=np.int64)
    col_running[cand_col[cand]] = cand
    starts = np.zeros(len(running) + 1, dtype=np.intp)
    np.cumsum(np.bincount(pod_gang, minlength=len(running)), out=starts[1:])
    pod_in_gang = np.arange(len(pod_gang)) - starts[pod_gang]
    for gi in cand.tolist():
        if elastic[gi]:
            minimum[cand_col[gi]] = running[gi].minimum
    return _Slots(
        prio=np.array([c[0] for c in cols], dtype=np.int64),
        value=np.array([c[1] for c in cols], dtype=np.int64),
        pending=np.array([c[2] for c in cols], dtype=bool),
        gang=np.array([c[3] for c in cols], dtype=np.int64),
        domain_set=np.array([-1 if c[4] is None else domain_set[c[4]] for c in cols], dtype=np.int64),
        gcol=gcol,
        gcount=gcount,
        greq=greq.astype(np.int64),
        gmask=gmask,
        gnode=np.concatenate([np.full(g, -1, np.int64), pod_node[moving].astype(np.int64)]),
        flex=np.concatenate([np.zeros(g, dtype=bool), elastic[pod_gang[moving]]]),
        minimum=minimum,
        running=col_running,
        place=[c[4] for c in cols],
        gpod=np.concatenate([np.full(g, -1, np.int64), pod_in_gang[moving].astype(np.int64)]),
        sets=sets,
        mask_sets=mask_sets,
        subset=subset,
        fixed_value=fixed_value,
        capacity=capacity,
        fixed=fixed,
        candidate=candidate,
    )


def slot_tier_bounds(
    pre: Prefiltered, values: dict[int, int], known: dict[int, int], *, enough: float | None = None
) -> dict[int, int]:
    """Per priority with kept pending gangs, a bound on the lexicographic optimum's value of
    that tier (objective units), never above ``known``.

    ``values`` are a valid plan's tier values, ``known`` bounds already proven otherwise (the
    ceilings, the packed bounds); both decide, going down, which tiers the plan has proven:
    their floors enter the LPs of the tiers below, down to the first tier not proven.

    ``enough`` (a relative gap, as :func:`gangopt.annotate.tier_gap` measures it) is for a
    caller that only asks whether the plan is proven within that gap on every tier: going
    down, the tiers after the first one whose bound exceeds the plan's value by more than it
    are left out (no LP), since no bound below can prove the plan then. The first open tier
    (:func:`slot_choice`) is at or above that one, so it is bounded either way. On the
    Philly b436b2 replay the LPs below such a tier were a fifth of the slot bounds' CPU."""
    waiting = PLACER_FIRST and not pre.derived.get(_PLACED_KEY, False)  # LPs may wait for the placer
    key = ("slot-bounds", tuple(sorted(values.items())), tuple(sorted(known.items())), enough, waiting)
    return dict(pre.kept(key, lambda: _slot_tier_bounds(pre, values, known, enough)))


@dataclass(frozen=True)
class SlotChoice:
    """What the integer slot model of one tier chose (:func:`slot_choice`): the decisions of
    every tier from ``priority`` up (``levels``); lower tiers are left open."""

    priority: int
    levels: frozenset[int]
    value: int
    """The tier's value in the model's solution (objective units, fixed running gangs included):
    what a placement that honours every choice reaches (on a round over :data:`MAX_COLUMNS`,
    of the LP's solution read at one half, which need not fit whole)."""
    bound: int
    """The tier's slot bound (the solution's value when SCIP proved it)."""
    started: dict[int, tuple[str, int] | None]
    """Pending gangs (index into the round's) that start, with the required level and domain
    index (:meth:`gangopt.topology.Topology.codes`) the model put them in, or None."""
    evicted: frozenset[int]
    """Candidate running gangs (index into the round's) evicted whole."""
    shed: dict[int, tuple[int, ...]]
    """Kept elastic candidates that lose pods: the pods' indexes in the gang."""
    rounded: bool = False
    """The LP's own solution read at one half, not a whole one (:func:`_integer_bound`'s
    ``lp_choice``): :func:`slot_choice` with ``whole`` gives SCIP's."""


def slot_choice(pre: Prefiltered, values: dict[int, int], whole: bool = False) -> SlotChoice | None:
    """The integer slot model's choice for the first tier a plan of tier ``values`` (objective
    units) leaves open, once :func:`slot_tier_bounds` has bounded that plan (it solves the
    model; this reads its solution). None when the bounds proved every tier, were not computed
    for these values, or the model found no whole solution.

    On a round over :data:`MAX_COLUMNS` the choice may be the LP's own solution
    (:attr:`SlotChoice.rounded`); ``whole`` asks for SCIP's whole one instead (solved now,
    once; its bound then replaces the LP's when tighter): the slot placer's second chance when
    the LP's choice placed gives no better plan. On the tilted fragmented 4,096-node round
    (busy 0.75) the LP's choice placed stayed below greedy's plan and SCIP's reached priority
    0 at 46,748.6 of 46,864.2 GPU-eq, as before the LP's choice."""
    settings = _scip_settings(pre)
    if settings is None:
        return None
    shared = _shared(pre)
    opened = shared.open_tier.get(tuple(sorted(values.items())))
    if opened is None:
        return None
    prio, floors = opened
    solution = shared.solutions.get(opened)
    bound = shared.lps.get(opened)
    if solution is None or bound is None:
        return None
    if whole and solution.rounded:
        kept = shared.models.get(opened)
        model = kept.model if kept is not None else _tier_model(shared, prio, list(floors))[0]
        solved = _integer_bound(model, settings, deadline=_deadline(pre), cap=_capped(_integer_cap(pre), model))
        if solved is None or solved[1] is None:
            return None
        solution = shared.solutions[opened] = replace(solution, x=solved[1], rounded=False)
        bound = shared.lps[opened] = min(bound, shared.fixed_value.get(prio, 0) + _rounded(solved[0]))
    x, var = solution.x, solution.var
    decided = var >= 0
    chosen = np.zeros(len(var), dtype=bool)
    chosen[decided] = x[var[decided]] > 0.5
    started = {int(shared.gang[c]): shared.place[c] for c in np.flatnonzero(chosen & shared.pending).tolist()}
    evicted = frozenset(int(shared.running[c]) for c in np.flatnonzero(decided & ~chosen & ~shared.pending).tolist())
    groups = np.flatnonzero(shared.flex & chosen[shared.gcol])
    lost = groups[x[solution.gvar[groups]] < 0.5]
    shed: dict[int, tuple[int, ...]] = {}
    for g in lost.tolist():
        gi = int(shared.running[shared.gcol[g]])
        shed[gi] = (*shed.get(gi, ()), int(shared.gpod[g]))
    objective = np.where(shared.prio == prio, shared.value, 0)
    value = shared.fixed_value.get(prio, 0) + int(objective[chosen].sum())
    return SlotChoice(
        priority=prio,
        levels=frozenset(p for p, _ in floors) | {prio},
        value=value,
        bound=bound,
        started=started,
        evicted=evicted,
        shed=shed,
        rounded=solution.rounded,
    )


def _scip_settings(pre: Prefiltered) -> str | None:
    """How the round's integer slot models are solved (:data:`SCIP_SETTINGS` or
    :data:`LARGE_SCIP_SETTINGS`), or None when the round is too large for slot bounds within
    its time limit (:data:`MAX_COLUMNS`, :data:`LARGE_SHARE`)."""
    gangs = len(pre.pending) + len(pre.candidates)
    if gangs <= MAX_COLUMNS:
        return SCIP_SETTINGS
    leave = pre.derived.get(LARGE_KEY, False)
    if not leave or not large_affordable(pre):
        return None
    return LARGE_SCIP_SETTINGS if leave is True else LP_ONLY


LP_ONLY = "lp only"
"""In place of SCIP's settings: the LP's bound only, no integer model (:func:`allow_large`
with ``"lp"``)."""


LARGE_KEY = "slots-large"
"""Key in ``pre.derived`` of the caller's leave to solve a large round's slot models
(:func:`allow_large`)."""

LARGE_SECONDS_PER_COLUMN = 4e-4
"""Estimated CPU seconds of a large round's slot bounds (both tiers' models and LPs; SCIP only
where the plan is within :data:`LP_CHOICE_GAP` of the LP's bound) per pending column (a
pending gang in one of its allowed required domains, or anywhere): the pending gangs' rows and
domain columns are what the models' size follows. 0.7-1.0 CPU-s for the 1,754 pending columns
of the many-small-gangs fragmented 4,096-node round and 0.7 for the 2,267 of the tilted one
(load 9, h28-L); with SCIP's whole solution for the placer's choice it was 1.6-2.4 (load 2-4,
9e-4 a column)."""

LARGE_SECONDS_PER_CANDIDATE_POD = 1.5e-5
"""The same per pod of a candidate running gang (a pod group, a kept-or-evicted column, a
node blocker): the 14,326 candidate pods of the many-small-gangs 4,096-node round add about
0.2 CPU-s to what its 1,754 pending columns cost."""

LARGE_SECONDS_PER_COLUMN_NODE = 1.56e-7
"""The same per pending column and cluster node, where that product costs more than the
per-column count above (:func:`large_estimate` takes the larger): GLOP's simplex on the tier
LPs grows with their columns times their node rows, not with the columns alone. The
fragmented 16,384-node round (16,293 pending columns, 59,283 candidate pods) took 33.4 CPU-s
for the three tier LPs alone (GLOP 29.0 of it, priority 5's LP 23.6; model build 4.3) where the
per-column count said 5.9 s (h29-XLlong, load 2): 17x short with SCIP and the secondary
stage on top (about 100 CPU-s), so a 24-60 s limit gave them leave and the solve overran by
3-4x. Fitted there (33.4 / 0.8 / (16,293 x 16,384)); at the 4,096-node round it says 0.90 s
for LPs measured at 0.76 (the per-column count: 0.73)."""

LARGE_LP_SHARE = 0.8
"""The LPs alone (:data:`LP_ONLY`) as a share of :func:`large_estimate`: with the LP's own
solution as the placer's choice the whole bounds cost about what their LPs do (0.7-0.9 CPU-s
on the 4,096-node rounds); SCIP, where it still runs, is the rest."""


def large_affordable(pre: Prefiltered) -> bool:
    """Whether the round's size allows its slot bounds (their LPs at least) within its time
    limit at all (:data:`MAX_COLUMNS`, :data:`LARGE_SHARE`): a rule on the round, not the clock."""
    return large_estimate(pre, lp_only=True) <= LARGE_SHARE * pre.rnd.policy.time_limit


def large_estimate(pre: Prefiltered, lp_only: bool = False) -> float:
    """Estimated CPU seconds of the slot bounds of a round over :data:`MAX_COLUMNS` pending and
    candidate gangs (0 below), or of their LPs alone: per pending column and candidate pod
    (:data:`LARGE_SECONDS_PER_COLUMN`, :data:`LARGE_SECONDS_PER_CANDIDATE_POD`), or per
    pending column and node (:data:`LARGE_SECONDS_PER_COLUMN_NODE`) where that is more,
    counted without building the model."""
    if len(pre.pending) + len(pre.candidates) <= MAX_COLUMNS:
        return 0.0
    columns, pods = pre.kept(_SIZE_KEY, lambda: _large_size(pre))
    return large_seconds(columns, pods, len(pre.rnd.cluster.nodes), lp_only)


def large_seconds(columns: int, pods: int, nodes: int, lp_only: bool = False) -> float:
    """:func:`large_estimate` of a round with these pending columns, candidate pods and nodes."""
    seconds = max(
        LARGE_SECONDS_PER_COLUMN * columns + LARGE_SECONDS_PER_CANDIDATE_POD * pods,
        LARGE_SECONDS_PER_COLUMN_NODE * columns * nodes,
    )
    return seconds * (LARGE_LP_SHARE if lp_only else 1.0)


def _large_size(pre: Prefiltered) -> tuple[int, int]:
    """The round's pending columns (one per allowed required domain) and candidate pods."""
    rnd = pre.rnd
    columns = 0
    for gi in pre.pending:
        topology = rnd.pending[gi].topology
        level = topology.required if topology is not None else None
        columns += 1 if level is None else max(1, len(pre.required_domains.get(gi, pre.topo.codes(level)[1])))
    return columns, sum(len(rnd.running[gi].pods) for gi in pre.candidates)


_SIZE_KEY = "slots-large-size"
"""Key in ``pre.derived`` of the round's pending columns and candidate pods (:func:`large_estimate`)."""


def allow_large(pre: Prefiltered, allowed: bool | Literal["lp"], deadline: float | None = None) -> None:
    """Give (or refuse) leave to solve the slot models of a round over :data:`MAX_COLUMNS`
    pending and candidate gangs; ``"lp"``: their LPs only (looser bounds, no integer choice for
    the slot placer unless an LP's solution is whole). Without leave such a round gets no slot
    bounds: their 1.6-2.4 CPU-s at 4,096 nodes are more than a solver that has not budgeted for
    them can afford; CP-SAT gives it when its clock leaves the time
    (:func:`gangopt.solvers.cpsat.solve_cpsat`), the finisher to greedy and the peers when they
    ask for the LP bounds. Set it before the first bound is asked for: the bounds are kept per
    prefiltered round.

    ``deadline`` (a :func:`time.perf_counter` instant; clocked solves): the large models' LPs
    and SCIP get the time left to it as their own limit, and none starts after it (a tier whose
    LP did not finish has no slot bound: the other bounds stand), so that an estimate that
    falls short cannot hold the solve past it (h29-XLlong: XL's LPs, 33 CPU-s, ran to the end
    whatever the limit)."""
    pre.derived[LARGE_KEY] = allowed
    if deadline is None:
        pre.derived.pop(DEADLINE_KEY, None)
    else:
        pre.derived[DEADLINE_KEY] = deadline


DEADLINE_KEY = "slots-large-deadline"
"""Key in ``pre.derived`` of the instant by which a large round's slot models must stop
(:func:`allow_large`)."""


def _deadline(pre: Prefiltered) -> float | None:
    """:func:`allow_large`'s deadline, if any."""
    deadline = pre.derived.get(DEADLINE_KEY)
    return deadline if isinstance(deadline, float) else None


INTEGER_SHARE = 0.15
"""Share of ``policy.time_limit`` one integer solve of a large round's slot model (CP-SAT or
SCIP, after its LP) may take, on a clocked solve (one with :func:`allow_large`'s deadline):
stopped there, the tier keeps the LP's bound (or the solver's, when tighter) and the placer
gets the LP's own solution as its choice. On the fragmented 4,096-node busy-0.6 round SCIP
took 3.0 CPU-s for priority 5's whole solution and ran 3.7 s to the limit's end on priority 0
without one (20 CPU-s for its 10 nodes offline), so a 10 s limit ended at 10.6-11.1 s with
greedy's plan; CP-SAT proves priority 5 in 0.9-1.0 CPU-s, inside the 1.5 s this gives. Only
models larger than :data:`SCIP_BOUND_MAX_VARIABLES` are capped (:func:`_capped`): the 1,024-node
ones need SCIP's longer solves."""


def _integer_cap(pre: Prefiltered) -> float | None:
    """:data:`INTEGER_SHARE` of the round's time limit, on a clocked solve; None otherwise
    (node and deterministic work limits alone, so that the bounds repeat)."""
    return None if _deadline(pre) is None else INTEGER_SHARE * pre.rnd.policy.time_limit


def _slot_tier_bounds(
    pre: Prefiltered, values: dict[int, int], known: dict[int, int], enough: float | None = None
) -> dict[int, int]:
    settings = _scip_settings(pre)
    if settings is None:  # too large for the per-node models in time: nodes by capacity instead
        return class_tier_bounds(pre, values, known, enough) if classes_affordable(pre) else {}
    shared = _shared(pre)
    large = settings in (LARGE_SCIP_SETTINGS, LP_ONLY)
    deadline = _deadline(pre) if large else None
    cap = _integer_cap(pre) if large else None
    lowest = int(shared.prio.min()) if len(shared.prio) else 0
    plan = tuple(sorted(values.items()))

    def tier_bound(prio: int, floors: Floors, chain: bool, value: int) -> int | None:
        # One LP per tier and floors above it: candidate plans that agree on the tiers above
        # share it (and a tier the plan already proves is never asked).
        key = (prio, floors)
        known_lp = shared.lps.get(key)
        if key not in shared.lps and _placer_first(pre, settings, enough, chain, shared.open_tier.get(plan)):
            return None  # the placer's choice of the open tier above goes first (:data:`PLACER_FIRST`)
        if key not in shared.lps or (chain and key in shared.bound_only and known_lp is not None and known_lp > value):
            # A large round's lowest tier: its model is the secondary stage's too (kept, with
            # the growth groups held at 0 here: :func:`_tier_lp`).
            growth = _growth_only(pre, shared) if large and prio == lowest else None
            shared.lps[key] = _tier_lp(
                shared,
                prio,
                list(floors),
                settings,
                target=value,
                solution=chain,
                growth=growth,
                deadline=deadline,
                cap=cap,
            )
        lp = shared.lps[key]
        bound = lp if prio not in known or lp is None else min(known[prio], lp)
        if chain and bound is not None and bound > value:  # the first tier the plan leaves open
            shared.open_tier[plan] = (prio, floors)
        return lp

    return chained_tier_bounds({int(p) for p in shared.prio[shared.pending]}, values, known, enough, tier_bound)


PLACER_FIRST = True
"""Whether a large round's slot bounds asked only whether a plan is proven within a gap
(``enough``) leave out the LPs of the tiers below the first one the plan leaves open, when that
open tier has a whole solution for the slot placer (:func:`slot_choice`,
:data:`LARGE_SCIP_SETTINGS`): CP-SAT then places that choice (a plan lexicographically above
this one on the open tier) and asks the bounds again at its tiers; the lower tiers' LPs under the
old plan's floors bound a plan that is about to be replaced. On the fragmented 4,096-node
busy-0.6 round greedy's priority 5 is 0.22 % under its bound (357,385 of 358,164 units), inside
the 0.5 % gap limit, so priority 0's LP (22,157 variables) ran under that floor for 0.31-0.37
CPU-s before the placer, said 395,615 against greedy's 370,277 (6.8 %: proves nothing) and was
never read again: the placer's plan asks for priority 0's LP under priority 5 = 358,164. Left
out, the placer starts that much sooner, which at load 3 is what the search after it lacked
(docs/benchmarks.md, "h39-L06load"). The cost: a plan whose lower tiers that LP would have
proven inside the gap limit (so returned before the placer) is placed first; the placer's plan
is then lexicographically better and bounded at its own tiers. Rounds within
:data:`MAX_COLUMNS` (S, M, the replays) and the LPs alone (:data:`LP_ONLY`, no choice) keep
every LP."""


def _placer_first(
    pre: Prefiltered, settings: str, enough: float | None, chain: bool, opened: tuple[int, Floors] | None
) -> bool:
    """Whether a tier's LP is left out (:data:`PLACER_FIRST`): ``settings`` a large round's
    integer ones, ``enough`` given, the tier below the first open one (not ``chain``), that
    tier (``opened``) has a whole solution for the placer, and the round has no queues (CP-SAT
    places no choice there)."""
    if not PLACER_FIRST or settings != LARGE_SCIP_SETTINGS or enough is None or chain or opened is None:
        return False
    if pre.derived.get(_PLACED_KEY, False) or pre.rnd.queues or _shared(pre).solutions.get(opened) is None:
        return False
    pre.derived[_LEFT_KEY] = True
    return True


_PLACED_KEY = "slots-placer-passed"
_LEFT_KEY = "slots-left-for-the-placer"


def placer_passed(pre: Prefiltered) -> bool:
    """Say that the slot placer has placed what it will (:data:`PLACER_FIRST`): the LPs left
    out for it are solved on the next ask. True when any was left out: a caller whose plan no
    placement replaced (the placer late under load, or its plan not better) asks again, so that
    the plan is bounded (and proven, when the LPs prove it) as before, not by the finisher after
    the slot models' deadline. With the placer forced late on the fragmented 4,096-node busy-0.6
    round the LP then runs 0.7 s later than before and the plan and gap are as before (3.370 %);
    the first version, which left the LP to the finisher, reported 4.78 % in 2 of 6 runs at
    load 3.5-4 where 92dc36e reported 3.5 and 4.0 % (not traced; docs/benchmarks.md,
    "h39-L06load")."""
    pre.derived[_PLACED_KEY] = True
    return bool(pre.derived.get(_LEFT_KEY, False))


def _tier_lp(
    shared: _Slots,
    prio: int,
    floors: list[tuple[int, int]],
    settings: str = SCIP_SETTINGS,
    target: int | None = None,
    solution: bool = True,
    growth: _Slots | None = None,
    deadline: float | None = None,
    cap: float | None = None,
) -> int | None:
    """The slot model's bound of tier ``prio`` given the ``floors`` of the tiers above
    (objective units); None if GLOP does not report an optimum. ``settings``: how SCIP solves
    the integer model (:data:`SCIP_SETTINGS`; on a large round :data:`LARGE_SCIP_SETTINGS`, or
    :data:`LP_ONLY`: the LP's bound alone).

    With ``target`` (a valid plan's value of the tier) the whole solution is sought only where
    it can be read (:func:`slot_choice`: the first tier the plan leaves open, ``solution``):
    a fractional LP whose bound is already at most ``target`` is the answer as it is (the
    integer optimum lies between the plan's value and the LP's, so its bound is the same; on
    the fragmented 4,096-node round's priority 5, greedy's plan at its LP bound with one
    fractional variable), and otherwise, on a round within :data:`MAX_COLUMNS`, CP-SAT bounds
    the integer model first; SCIP, for its solution, runs only when ``solution`` and the tier
    stays open. The bound is the same either way (both solve these models to optimality);
    only where SCIP would stop at its node limit can CP-SAT's be tighter.

    With ``growth`` (``shared`` with growth groups, :func:`_growth_only`) the model is built
    from it with every growth group held at 0 (the same tier bound: they only add pods above
    a started gang's minimum), and kept in :attr:`_Slots.models` for the secondary stage
    (:func:`secondary_bound_at`), which then copies it instead of building its own: 0.3-0.4
    CPU-s on the fragmented 4,096-node round (busy 0.75). ``deadline``: :func:`allow_large`'s."""
    key = (prio, tuple(floors))
    if growth is None:
        model, var, gvar = _tier_model(shared, prio, floors)
    else:
        model, var, gvar = _tier_model(growth, prio, floors)
        grown = [] if growth.grow is None else gvar[np.flatnonzero((growth.grow > 0) & (gvar >= 0))].tolist()
        upper = [model.variable[i].upper_bound for i in grown]
        for i in grown:
            model.variable[i].upper_bound = 0.0
        shared.models[key] = _Kept(model=model, var=var, gvar=gvar, grown=grown, upper=upper)
    fixed = shared.fixed_value.get(prio, 0)
    enough = None if target is None else target - fixed
    solved = _integer_bound(
        model,
        settings,
        enough,
        solution,
        lp_choice=settings == LARGE_SCIP_SETTINGS,
        deadline=deadline,
        cap=_capped(cap, model),
    )
    if solved is None:
        return None
    relaxed, x = solved[0], solved[1]
    if x is not None:
        rounded = bool(np.any(np.abs(x - np.round(x)) > 1e-6))
        shared.solutions[key] = _Solution(x=x, var=var, gvar=gvar, rounded=rounded)
    if len(solved) > 2:
        shared.bound_only.add(key)
    else:
        shared.bound_only.discard(key)
    return fixed + _rounded(relaxed)


def _rounded(relaxed: float) -> int:
    """Tier values are whole objective units, so the optimum is at most the bound rounded down;
    the solvers work in floating point, so their answer first gets a margin for tolerances."""
    return math.floor(relaxed + 1e-6 * abs(relaxed) + LP_MARGIN)


def _tier_model(
    shared: _Slots, prio: int, floors: list[tuple[int, int]]
) -> tuple[linear_solver_pb2.MPModelProto, np.ndarray, np.ndarray]:
    """The slot model of tier ``prio`` (its objective less the tier's fixed value), per column
    the index of its variable (-1 for columns not in the model), and per pod group the index of
    the variable that says it is kept (:func:`slot_choice` and bench/bound_truth.py read the
    integer model's choice through them)."""
    from ortools.linear_solver import linear_solver_pb2

    floor_of = dict(floors)
    levels = sorted({prio, *floor_of})
    active = np.isin(shared.prio, levels) & (shared.prio >= prio)
    var = np.full(len(shared.prio), -1, dtype=np.int64)
    var[active] = np.arange(int(active.sum()))
    model = linear_solver_pb2.MPModelProto()
    model.maximize = True
    rows = Rows(model)  # written at the end, at once (:class:`gangopt.lp_wire.Rows`)
    objective = np.where(shared.prio[active] == prio, shared.value[active], 0).astype(float)
    upper = shared.fits_alone()[active].astype(float)
    add_variables(model, upper, objective)
    # A gang with several domain columns runs in at most one.
    pend = np.flatnonzero(active & shared.pending)
    gangs, counts = np.unique(shared.gang[pend], return_counts=True)
    for gang in gangs[counts > 1].tolist():
        cols = pend[shared.gang[pend] == gang]
        _row(rows, var[cols], np.ones(len(cols)), 1.0)
    # Pods of elastic candidates: a variable each, kept only with their gang, and at least
    # its minimum of them when it is kept.
    gact = active[shared.gcol]
    gvar = var[shared.gcol]
    own = np.flatnonzero(gact & shared.flex)
    gvar[own] = np.arange(len(model.variable), len(model.variable) + len(own))
    add_variables(model, np.ones(len(own)))
    if shared.grow is not None:
        # Growth groups (the secondary model): how many of its pods a started gang adds (none
        # unless it starts), in the same rows as its own pods. :func:`_row` drops a row whose
        # coefficients sum to at most its bound, as if every variable were at most 1: with a
        # growth group in it such a row may bind, so dropping it only loosens the bound.
        grown = np.flatnonzero(gact & (shared.grow > 0))
        gvar[grown] = np.arange(len(model.variable), len(model.variable) + len(grown))
        for g, pods in zip(grown.tolist(), shared.grow[grown].tolist(), strict=True):
            model.variable.add(lower_bound=0.0, upper_bound=float(pods))
            _row(rows, np.array([gvar[g], var[shared.gcol[g]]]), np.array([1.0, -float(pods)]), 0.0)
    for col in np.flatnonzero(active & (shared.minimum > 0)).tolist():
        pods = gvar[own[shared.gcol[own] == col]]
        _row(rows, np.append(pods, var[col]), np.append(-np.ones(len(pods)), float(shared.minimum[col])), 0.0)
        # Each pod kept only with its gang: ``pod - kept <= 0`` (a pod's variable comes after
        # every column's, so the row's indices are (kept, pod)), all at once as wire bytes.
        rows.pairs(np.stack([np.full(len(pods), var[col]), pods], axis=1), (-1.0, 1.0), 0.0)
    # Capacity rows per level, node set, resource and size.
    gprio = shared.prio[shared.gcol]
    gpend = shared.gmask >= 0
    for level in levels:
        included = gact & np.where(gpend, gprio <= level, gprio < level)
        if not included.any():
            continue
        pinned = shared.gnode >= 0  # candidate pods
        blockers = _blockers(rows, shared, gvar, included & pinned, level)
        evicted = _evicted(rows, shared, gvar, gact & pinned) if level == prio else None
        for s in range(len(shared.sets)):
            inside, on_nodes = shared.members(s)
            inside = inside[included[inside]]
            if len(inside):
                _set_rows(rows, shared, gvar, inside, on_nodes[included[on_nodes]], blockers, evicted, level, s)
    # Floors of the proven tiers above.
    for p, floor_value in floor_of.items():
        rhs = floor_value - shared.fixed_value.get(p, 0) - 0.5
        cols = np.flatnonzero(active & (shared.prio == p))
        if rhs > 0:
            _row(rows, var[cols], -shared.value[cols].astype(float), -rhs)
    rows.flush()
    return model, var, gvar


LP_CHOICE_GAP = 0.005
"""How far (relative) a round over :data:`MAX_COLUMNS` may have its plan below the LP's bound
of the first tier it leaves open before the slot placer gets the LP's own solution instead of
SCIP's whole one (:func:`_integer_bound`'s ``lp_choice``). Nearer, SCIP runs as before: its
integer bound may prove the plan (on these rounds it was 6.4-6.5 objective units below the
LP's, 0.001 %). Greedy's plan on the fragmented 4,096-node round is 1.4 % below."""


_BOUND_ONLY = "bound only"
"""Marks an :func:`_integer_bound` answer whose whole solution was not sought."""

SAT_SETTINGS = "num_workers: 1\nmax_deterministic_time: 1.0\n"
"""CP-SAT on a slot model whose bound only is needed (:func:`_integer_bound`): one worker and
a deterministic limit, so the bound does not depend on the machine's load. On the 218
fractional slot models of the Philly b436b2 replay's first 400 rounds it proved the same
optimum as SCIP on every one, at 5.6 ms a model against SCIP's 18."""

LARGE_SAT_SETTINGS = "num_workers: 1\nmax_deterministic_time: 1.0\n"
"""CP-SAT on a large round's integer slot model whose LP bound lies within
:data:`LP_CHOICE_GAP` of the plan (:func:`_integer_bound` with ``lp_choice``), in place of
SCIP: one worker and a deterministic limit (the bound and choice repeat; a clocked solve also
stops it at :data:`INTEGER_SHARE` of its limit). On the fragmented 4,096-node busy-0.6 round's
priority 5 (10,766 variables, 11 fractional in the LP, plan 357,235, LP 358,514) CP-SAT proved
the whole optimum, 358,164, in 0.9-1.0 CPU-s; SCIP with its presolve took 2.7-2.8 (without:
1.9, ten nodes)."""

LARGE_LP_SOLVER = "CLP"
"""The LP solver of a large round's tier models (:data:`LARGE_SCIP_SETTINGS`, :data:`LP_ONLY`),
with its primal simplex (GLOP when the OR-Tools build has no CLP). On the fragmented
4,096-node busy-0.6 round GLOP's (primal) took 0.87 CPU-s on priority 5's model (10,766
variables) and 0.67 on priority 0's (22,853); CLP's primal 0.11 and 0.35, the same optima
(CLP's dual: 0.06 and 3.2); at busy 0.75 the same 0.17 and 0.02 as GLOP. Rounds within
:data:`MAX_COLUMNS` (the replays among them) keep GLOP."""

SCIP_BOUND_MAX_VARIABLES = 10_000
"""Largest slot model of a large round (:data:`LARGE_SCIP_SETTINGS`) on which SCIP runs for a
bound alone when the LP lies more than :data:`LP_CHOICE_GAP` above the plan (a tier below the
first open one): larger ones keep the LP's bound. Measured per variable: on the fragmented
1,024-node busy-0.6 rounds (5,365-5,428 variables) SCIP took 0.5-1.1 CPU-s and brought
priority 0's bound from 112,186 to 100,784 units (seed 2; greedy's reported gap 11.0 % to
4.0 %); on the 4,096-node busy-0.6 round (22,853 variables) it ran 20 CPU-s for its ten nodes
and 37 for the placer's whole choice without a whole solution, so without one its bound is
the LP's: about 1e-3 CPU-s a variable there against 2e-4 at 1,024 nodes."""

SAT_MAX_VARIABLES = 500
"""CP-SAT is tried (:data:`SAT_SETTINGS`) only on slot models of at most this many variables:
the replays' rounds (2 to 14 nodes) are far below it. On the fragmented 1,024-node round (busy
0.75) the lowest tier's model has 2,332 variables: CP-SAT ran to its deterministic limit (2.4
CPU-s) without closing the tier and SCIP then took 0.13 s, so CP-SAT's solve went from 0.56 to
2.96 CPU-s; above this size SCIP alone, as before."""


def _integer_bound(
    model: linear_solver_pb2.MPModelProto,
    settings: str = SCIP_SETTINGS,
    enough: float | None = None,
    solution: bool = True,
    lp_choice: bool = False,
    deadline: float | None = None,
    cap: float | None = None,
) -> tuple[float, np.ndarray | None] | tuple[float, None, str] | None:
    """The slot model's optimum with every variable whole, or a bound on it: GLOP's LP value
    when its solution is already whole; else SCIP's dual bound (one thread, at most
    :data:`INTEGER_NODES` branch-and-bound nodes: it holds however early SCIP stops, once
    SCIP has a whole solution; stopped before one, the LP's), never above the LP's. None if
    GLOP reports no optimum. With the bound, the best whole solution found (GLOP's, or SCIP's
    incumbent; None if there is none, or if GLOP's bound is already at most ``enough``, when
    SCIP is not run): :func:`slot_choice` reads it.

    Every variable is 0 or 1 in a real plan (a gang starts or not, a candidate is kept or
    not, a node has a kept or an evicted candidate or not), so the integer model is still a
    relaxation of the round. The LP let a 32-node running gang stay at 97 %, the free 3 %
    making room for a whole-node gang of a higher tier: on a 64-node busy-0.6 round (seed 2)
    the lowest tier's LP bound was 1,259.7 against an optimum of 79.1, and the integer
    model says 79.1; on the 256-node busy-0.6 round 2,131.5 against 1,856.5, again exact.
    Cost (SCIP, when the LP is fractional): 2-4 ms there, 20-100 ms on the 1,024-node rounds.

    With ``enough`` (model units: a valid plan's value), the answer of a model whose whole
    solution is not needed (``solution`` False, or the bound at most ``enough``) carries
    :data:`_BOUND_ONLY` and no solution: a fractional LP whose rounded bound is at most
    ``enough`` is returned as it is, and otherwise (on a model of at most
    :data:`SAT_MAX_VARIABLES` variables) CP-SAT's optimum (:data:`SAT_SETTINGS`) is the
    bound when no ``solution`` is sought; with ``solution``, SCIP at once: on the Philly
    6-node slice CP-SAT first closed 8 of 33 such models and left 25 to SCIP anyway, its
    5 ms each spent for nothing (0.12 of the replay's 2.2 CPU-s; the same plans).

    ``lp_choice`` (a round over :data:`MAX_COLUMNS`, :func:`_tier_lp`): when a ``solution`` is
    sought, the LP is fractional and its bound is more than :data:`LP_CHOICE_GAP` above the
    plan's value ``enough`` (the integer model would not prove that plan either), the LP's own
    solution is the answer, with the LP's bound, and SCIP does not run: :func:`slot_choice`
    reads it at one half (a gang at 0.75 starts, a candidate kept at 0.01 is evicted). On the
    fragmented 4,096-node round (busy 0.75) the lowest tier's LP has 6 fractional variables of
    25,385; SCIP's whole solution took 0.96-1.1 CPU-s, and the slot placer reaches the same
    priority-0 value from either choice (51,019.9 GPU-eq, bound 51,020.5 instead of 51,019.9:
    a tier gap of 0.001 %)."""
    from ortools.linear_solver import linear_solver_pb2, pywraplp

    large = settings in (LARGE_SCIP_SETTINGS, LP_ONLY)
    solver = (large and pywraplp.Solver.CreateSolver(LARGE_LP_SOLVER)) or pywraplp.Solver.CreateSolver("GLOP")
    if solver.LoadModelFromProto(model) or not _time_left(solver, deadline):
        return None
    params = pywraplp.MPSolverParameters()
    if large:
        params.SetIntegerParam(params.LP_ALGORITHM, params.PRIMAL)
    if solver.Solve(params) != pywraplp.Solver.OPTIMAL:
        return None
    lp = float(solver.Objective().Value())
    values = _values(solver, len(model.variable))
    if np.all(np.abs(values - np.round(values)) <= 1e-6):
        return lp, np.round(values)
    if settings == LP_ONLY:
        return lp, None  # the LP's bound only (a large round's leave for the LPs alone)
    if enough is not None and _rounded(lp) <= enough:
        return lp, None, _BOUND_ONLY
    far = lp_choice and enough is not None and lp - enough > LP_CHOICE_GAP * abs(lp)
    if far and solution:
        return lp, values
    if far and len(model.variable) > SCIP_BOUND_MAX_VARIABLES:
        # A bound alone (a tier below the first open one; :func:`_tier_lp` solves it again
        # should it open) on a model too large for SCIP: the LP's.
        return lp, None, _BOUND_ONLY
    integer = linear_solver_pb2.MPModelProto()
    integer.CopyFrom(model)
    for v in integer.variable:
        v.is_integer = True
    stop = _integer_stop(deadline, cap)
    if lp_choice and enough is not None and not far:
        # Within LP_CHOICE_GAP of the plan on a large round: CP-SAT's whole optimum, capped
        # (:data:`LARGE_SAT_SETTINGS`); stopped short, the LP's choice (or bound) with the
        # tighter of the two bounds, and no SCIP.
        sat = _sat_solve(integer, LARGE_SAT_SETTINGS, stop)
        if sat is None:
            return (lp, values) if solution else (lp, None, _BOUND_ONLY)
        optimal, bound, whole, value = sat
        bound = min(lp, bound)
        if not solution:
            return bound, None, _BOUND_ONLY
        # Its whole solution when proven, or when it beats the plan (a choice that fits whole).
        return (bound, whole) if optimal or value > enough else (bound, values)
    if enough is not None and not solution and settings == SCIP_SETTINGS and len(model.variable) <= SAT_MAX_VARIABLES:
        small = _sat_solve(integer, SAT_SETTINGS, stop)
        if small is not None and small[0]:
            return min(lp, small[1]), None, _BOUND_ONLY
    scip = pywraplp.Solver.CreateSolver("SCIP")
    if scip is None or scip.LoadModelFromProto(integer) or not _time_left(scip, stop):
        return lp, None
    scip.SetNumThreads(1)
    if not scip.SetSolverSpecificParametersAsString(settings):
        raise RuntimeError("SCIP refused its settings")
    status = scip.Solve()
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        # NOT_SOLVED (stopped before a whole solution, e.g. by the deadline): the wrapper
        # reports 0.0 as the dual bound, not SCIP's. On the bin-packed M contention round's
        # secondary stage a 2.5 s limit gave 0.0 against an optimum of 31,848.7 units, so
        # the plan's secondary bound fell below its own value and its gap read 0 (h30-sweep).
        return lp, None
    whole = np.round(_values(scip, len(model.variable)))
    bound = float(scip.Objective().BestBound())
    return (min(lp, bound) if math.isfinite(bound) else lp), whole


def _capped(cap: float | None, model: linear_solver_pb2.MPModelProto) -> float | None:
    """``cap`` for an integer solve of ``model`` larger than :data:`SCIP_BOUND_MAX_VARIABLES`
    (:data:`INTEGER_SHARE`), None for a smaller one: the deadline alone stops it, as before
    h32-L06. On the fragmented 1,024-node busy-0.9 round (seed 1; 5.4 k variables a model) SCIP
    needs more than the cap's 1.5 s of a 10 s limit for priority 0's whole choice: capped, the
    plan stayed greedy's at 0.94 % after 8.7 CPU-s (LNS to the limit); uncapped it is placed and
    proven within 0.47 % in 6.1 (stop 31's figure). The 4,096-node busy-0.6 models (10.8 k and
    22.9 k variables) keep the cap."""
    return cap if cap is not None and len(model.variable) > SCIP_BOUND_MAX_VARIABLES else None


def _integer_stop(deadline: float | None, cap: float | None) -> float | None:
    """When an integer solve must stop: ``cap`` seconds from now (:func:`_integer_cap`), never
    after ``deadline``; None when neither is given (an unclocked solve: node and work limits
    alone)."""
    if cap is None:
        return deadline
    stop = time.perf_counter() + cap
    return stop if deadline is None else min(stop, deadline)


def _sat_solve(
    integer: linear_solver_pb2.MPModelProto, settings: str, stop: float | None
) -> tuple[bool, float, np.ndarray, float] | None:
    """CP-SAT on the integer model ``integer`` with ``settings``, stopped by ``stop`` too:
    whether it proved its optimum, its bound, its best whole solution and that solution's
    value; None when it ends without a whole solution (or has no time at all)."""
    from ortools.linear_solver import pywraplp

    sat = pywraplp.Solver.CreateSolver("CP_SAT")
    if sat is None or sat.LoadModelFromProto(integer):
        return None
    if stop is not None:
        left = stop - time.perf_counter()
        if left < 0.001:
            return None
        settings = f"{settings}max_time_in_seconds: {left:.3f}\n"
    if not sat.SetSolverSpecificParametersAsString(settings):
        raise RuntimeError("CP-SAT refused its settings")
    status = sat.Solve()
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return None
    bound = float(sat.Objective().BestBound())
    if not math.isfinite(bound):
        return None
    whole = np.round(_values(sat, len(integer.variable)))
    return status == pywraplp.Solver.OPTIMAL, bound, whole, float(sat.Objective().Value())


def _time_left(solver: pywraplp.Solver, deadline: float | None) -> bool:
    """Give ``solver`` the time left to ``deadline`` as its limit; False when none is left (or
    less than a millisecond). GLOP stopped by it reports no optimum, so its tier gets no bound;
    SCIP's dual bound holds however early it stops (before a whole solution, the LP's:
    :func:`_integer_bound`)."""
    if deadline is None:
        return True
    left = int((deadline - time.perf_counter()) * 1000)
    if left < 1:
        return False
    solver.SetTimeLimit(left)
    return True


def _values(solver: pywraplp.Solver, count: int) -> np.ndarray:
    """The solver's solution, one value per variable, read from its response proto in one
    call: a Python call per variable (``solver.variables()``, ``solution_value()``) took
    0.16 CPU-s per solve on the fragmented 4,096-node round's lowest tier (25,385
    variables), the proto 0.006, the same values."""
    from ortools.linear_solver import linear_solver_pb2

    response = linear_solver_pb2.MPSolutionResponse()
    solver.FillSolutionResponseProto(response)
    values = np.asarray(response.variable_value, dtype=float)
    if len(values) != count:
        raise RuntimeError(f"internal: the solver returned {len(values)} values for {count} variables")
    return values


@dataclass
class _Blockers:
    """Per node with kept-or-evicted candidates in a level's rows: an LP variable ``b`` >= each
    such candidate's ``kept``, and the smallest request of their pods there per resource."""

    nodes: np.ndarray
    var: np.ndarray
    least: np.ndarray


def _blockers(rows: Rows, shared: _Slots, gvar: np.ndarray, groups: np.ndarray, level: int) -> _Blockers:
    """One variable per node holding pods of the candidate ``groups``, with ``kept <= b``.

    A slot row cannot charge each kept candidate pod a slot of size ``t``: eight kept 1-GPU
    pods on eight nodes each spoil one 8-GPU slot, but four kept 1-GPU pods on one node spoil
    only one. Any kept pod on a node asks at least the smallest request there, so the node
    loses ``floor(R / t) - floor((R - least) / t)`` slots once ``b`` = 1; that is valid for
    every set of kept pods, and exact for a node with one candidate pod."""
    picked = np.flatnonzero(groups)
    nodes, inverse = np.unique(shared.gnode[picked], return_inverse=True)
    least = np.full((len(nodes), shared.greq.shape[1]), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(least, inverse, shared.greq[picked])
    pairs = _unique_pairs(inverse, gvar[picked])
    per_node = np.bincount(pairs[:, 0], minlength=len(nodes))
    # A node with one candidate gang needs no variable of its own: b is that gang's kept.
    b = np.full(len(nodes), -1, dtype=np.int64)
    single = per_node[pairs[:, 0]] == 1
    b[pairs[single, 0]] = pairs[single, 1]
    several = np.flatnonzero(per_node > 1)
    b[several] = np.arange(len(rows.model.variable), len(rows.model.variable) + len(several))
    add_variables(rows.model, np.ones(len(several)))
    rest = pairs[~single]
    rows.pairs(np.stack([rest[:, 1], b[rest[:, 0]]], axis=1), (1.0, -1.0), 0.0)
    return _Blockers(nodes=nodes, var=b, least=least)


def _unique_pairs(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """``np.unique(np.stack([first, second], axis=1), axis=0)`` for non-negative integers, as
    one key per pair: the same rows in the same order, without the row-wise unique's sort of a
    structured view (5 calls on the L 0.75 round's tier models, 14,326 pairs each)."""
    a, b = first.astype(np.int64), second.astype(np.int64)
    if len(a) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    span = int(b.max()) + 1
    key = np.unique(a * span + b)
    return np.stack([key // span, key % span], axis=1)


@dataclass
class _Evicted:
    """Per node with candidates of the LP's tiers: an LP variable ``e`` >= 1 - kept of each."""

    nodes: np.ndarray
    var: np.ndarray


def _evicted(rows: Rows, shared: _Slots, gvar: np.ndarray, groups: np.ndarray) -> _Evicted:
    """One variable per node holding pods of the candidate ``groups`` (all of priority >= the
    LP's tier P), with ``e + kept >= 1``: once a candidate there is evicted, the node receives
    no pod of tier P (rule 5: only strictly higher priorities), so tier P's rows lose the whole
    node's slots. Without it the LP let greedy's victims' nodes serve tier P's pods too."""
    picked = np.flatnonzero(groups)
    nodes, inverse = np.unique(shared.gnode[picked], return_inverse=True)
    e = np.arange(len(rows.model.variable), len(rows.model.variable) + len(nodes))
    add_variables(rows.model, np.ones(len(nodes)))
    pairs = _unique_pairs(inverse, gvar[picked])
    rows.pairs(np.stack([pairs[:, 1], e[pairs[:, 0]]], axis=1), (-1.0, -1.0), -1.0)
    return _Evicted(nodes=nodes, var=e)


def _set_rows(
    rows: Rows,
    shared: _Slots,
    gvar: np.ndarray,
    inside: np.ndarray,
    on_nodes: np.ndarray,
    blockers: _Blockers,
    evicted: _Evicted | None,
    level: int,
    s: int,
) -> None:
    """Amount and slot rows in set ``s`` of ``R_level``: the pending pod groups ``inside`` it,
    the candidate groups ``on_nodes`` of it (by their amount; in slot rows through the node
    blockers). Both are group indexes."""
    room = shared.room(level)
    in_set = shared.sets[s][blockers.nodes]
    both = np.concatenate([inside, on_nodes])
    # A domain gets rows for its first resource (gpu when the round has any) and its largest
    # sizes only: hundreds of racks times every resource and size made the LP of a 4,096-node
    # round 20x larger for a bound the mask rows already mostly give.
    domain = s >= shared.mask_sets
    for k in range(1 if domain else shared.greq.shape[1]):
        req = shared.greq[inside, k]
        sizes = np.unique(req[req > 0])[::-1][: DOMAIN_THRESHOLDS if domain else MAX_THRESHOLDS].tolist()
        if not sizes:
            continue
        amount = (shared.gcount[both] * shared.greq[both, k]).astype(float)
        evict_var, evict_room = np.zeros(0, np.int64), np.zeros(0, np.int64)
        if evicted is not None:
            on = shared.sets[s][evicted.nodes]
            evict_var, evict_room = evicted.var[on], room[evicted.nodes[on], k]
        _row(
            rows,
            np.concatenate([gvar[both], evict_var]),
            np.concatenate([amount, evict_room.astype(float)]),
            float(shared.slots(level, s, k, 0)),
        )
        node_room = room[blockers.nodes[in_set], k]
        least = blockers.least[in_set, k]
        node_var = blockers.var[in_set]
        cols = gvar[inside]
        counts = shared.gcount[inside].astype(float)
        for t in sizes:
            # A pod asking s counts floor(s / t) slots of size t (floor is superadditive, so
            # the pods of one node never count more than floor(room / t)): a 4-GPU pod takes
            # two 2-GPU slots, which plain counts of pods >= t let two 2-GPU pods share.
            units = req // t
            big = units > 0
            loss = node_room // t - np.maximum(node_room - least, 0) // t
            hit = loss > 0
            lost = evict_room // t
            idx = np.concatenate([cols[big], node_var[hit], evict_var[lost > 0]])
            weights = np.concatenate([(counts * units)[big], loss[hit].astype(float), lost[lost > 0].astype(float)])
            _row(rows, idx, weights, float(shared.slots(level, s, k, int(t))))


def _row(rows: Rows, idx: np.ndarray, coeff: np.ndarray, rhs: float) -> None:
    """``sum(coeff[i] · x[idx[i]]) <= rhs``, scaled to unit size (memory is in milli-bytes), to
    ``rows``. Indices are sorted, and summed only where one repeats (a candidate may block
    several nodes): 207 of the 2,758 rows of the L 0.75 round's tier models."""
    if len(idx) == 0 or np.maximum(coeff, 0).sum() <= rhs:  # variables in [0, 1]: it never binds
        return
    order = np.argsort(idx, kind="stable")
    ordered = idx[order]
    if len(ordered) > 1 and not (ordered[1:] > ordered[:-1]).all():
        idx, where = np.unique(idx, return_inverse=True)
        coeff = np.bincount(where, weights=coeff, minlength=len(idx))
    else:  # no repeat: the sums would be the values themselves (-0.0 read as 0.0, as the sums do)
        idx, coeff = ordered, coeff[order].astype(float) + 0.0
    scale = max(abs(rhs), float(np.abs(coeff).max()), 1.0)
    rows.add(idx, coeff / scale, rhs / scale)


def secondary_bound_at(pre: Prefiltered, values: dict[int, int], whole: bool = False) -> int | None:
    """A bound on the secondary terms of every plan whose tiers, from the lowest with pending
    gangs up, are at least ``values`` (objective units); None when there is none to give.

    When ``values`` are the lexicographic optimum's tiers (a plan reaches every tier's proven
    bound), every plan at least as good lexicographically is such a plan, so this bounds the
    optimum's secondary terms: the second lexicographic stage of the slot model, as an LP. The
    tier model of the lowest tier with pending gangs or candidates (:func:`_tier_model`, every
    candidate a column), its own value held at ``values`` too, maximizes what the candidates
    and the pending gangs add to the secondary sum: a kept candidate's members above its
    minimum and the pods an elastic one sheds (growth, removal cost), an evicted one's
    eviction cost, a started pending gang's growth (its pods above the minimum in the rows,
    and a preferred-topology gang's spread: :func:`_with_growth`). The rest is counted at its best:
    running gangs that cannot lose pods, every member a running gang may add, the guarantee
    term's ceiling; the other spread and opened nodes at 0. The growth bound of :mod:`gangopt.bounds`
    assumes no eviction at all and every member added wherever the total room allows.

    Measured on the fragmented M round at busy 0.75 (docs/benchmarks.md, "M end to end and the
    secondary gap"): 62.1 GPU-eq against 512.2 from the growth bound, for a plan at -26.7
    whose tiers are all at their bounds (reported gap 1.8 % to 0.3 %); 0.08 CPU-s.

    When only the lowest tier is open, ``values`` are the plan's own tiers: every plan at least
    as good lexicographically has each tier at least as high, so this bounds the optimum's
    secondary terms too (:func:`gangopt.annotate.cheap_bounds_for`). On the fragmented L round
    (busy 0.75; priority 0 at 46,748.6 of 46,864.2) 176.6 GPU-eq against 2,172.2, reported gap
    2.2 % to 0.50 %, in 0.7-1.0 CPU-s (2,727 columns: a round over :data:`MAX_COLUMNS` gets it
    with the leave its slot bounds have, :func:`allow_large`). On the many-small-gangs L round
    259.9 GPU-eq for a plan at 140.2 (every tier at its bound), 0.43-0.45 CPU-s at load 9
    (GLOP on the model with preferred columns: 2.4-3.8, :data:`SECONDARY_LP_SOLVER`).

    ``whole``: a round over :data:`WHOLE_SECONDARY_GANGS` gangs gets the whole-variable model
    (with the preferred columns) too, when it has at most :data:`WHOLE_SECONDARY_MAX`; None
    above that. On the fragmented 1,024-node busy-0.6 round (seed 2, every tier at its bound)
    the LP's 198.7 GPU-eq was -58.6 whole, for a plan at -66.7 (0.87 CPU-s against 0.09:
    :func:`gangopt.annotate.cheap_bounds_for` asks it only when the LP leaves the plan more
    than :data:`gangopt.annotate.WHOLE_SECONDARY_GAP` short)."""
    whole = whole and len(pre.pending) + len(pre.candidates) > WHOLE_SECONDARY_GANGS  # else it is whole already
    key = ("slot-secondary", tuple(sorted(values.items())), whole)
    return pre.kept(key, lambda: _secondary_bound_at(pre, values, whole))


WHOLE_SECONDARY_MAX = 6000
"""Most pending and candidate gangs for :func:`secondary_bound_at`'s ``whole`` (the
1,024-node fragmented rounds have 3,000-4,600; the 4,096-node ones about 14,000, whose
integer model would not fit their limit)."""


def _secondary_bound_at(pre: Prefiltered, values: dict[int, int], whole: bool = False) -> int | None:
    settings = _scip_settings(pre)
    if settings is None:  # a large round without leave for its slot models (:func:`allow_large`)
        return None
    shared = _shared(pre)
    if not shared.pending.any():
        return None
    prio = int(shared.prio.min())  # the lowest tier with pending gangs or candidates: every candidate a column
    floors = [(p, v) for p, v in sorted(values.items(), reverse=True) if p > prio]
    gangs = len(pre.pending) + len(pre.candidates)
    if whole and (gangs > WHOLE_SECONDARY_MAX or settings == LP_ONLY):
        return None
    large = gangs > WHOLE_SECONDARY_GANGS and not whole
    kept = shared.models.get((prio, tuple(floors))) if large else None
    shared = _growth_only(pre, shared) if large else _with_growth(pre, shared)
    if kept is None:
        model, var, gvar = _tier_model(shared, prio, floors)
    else:  # the lowest tier's own model (:func:`_tier_lp`), its growth groups freed
        from ortools.linear_solver import linear_solver_pb2

        model, var, gvar = linear_solver_pb2.MPModelProto(), kept.var, kept.gvar
        model.CopyFrom(kept.model)
        for i, upper in zip(kept.grown, kept.upper, strict=True):
            model.variable[i].upper_bound = upper
    own = np.flatnonzero((var >= 0) & (shared.prio == prio))
    rhs = values.get(prio, 0) - shared.fixed_value.get(prio, 0) - 0.5
    if rhs > 0:
        floor = Rows(model)
        _row(floor, var[own], -shared.value[own].astype(float), -rhs)
        floor.flush()
    objective, constant = _secondary_terms(pre, shared, var, gvar, len(model.variable))
    for v, c in zip(model.variable, objective.tolist(), strict=True):
        v.objective_coefficient = c
    # Whole variables (SCIP at its node limit, when the LP is fractional) on the rounds whose
    # tier models get them: a gang starts or not, so a fraction of a preferred gang in one
    # domain does not escape its spread (fragmented S 0.75: 13.5 as an LP, 12.4 whole, the
    # optimum; 10-25 ms). Larger rounds keep the LP (:data:`WHOLE_SECONDARY_GANGS`), without
    # the preferred columns, solved by CLP's dual simplex (:data:`SECONDARY_LP_SOLVER`).
    if settings != LP_ONLY and not large:
        solved = _integer_bound(model, settings, deadline=_deadline(pre))
        if solved is None:
            return None
        relaxed = solved[0]
    else:
        from ortools.linear_solver import pywraplp

        solver = pywraplp.Solver.CreateSolver(SECONDARY_LP_SOLVER) or pywraplp.Solver.CreateSolver("GLOP")
        left = _time_left(solver, _deadline(pre))  # a large round's (:func:`allow_large`)
        if solver.LoadModelFromProto(model) or not left or solver.Solve() != pywraplp.Solver.OPTIMAL:
            return None
        relaxed = float(solver.Objective().Value())
    # Secondary values are whole objective units: the optimum is at most the bound rounded down.
    return constant + math.floor(relaxed + 1e-6 * abs(relaxed) + LP_MARGIN)


def _growth_only(pre: Prefiltered, shared: _Slots) -> _Slots:
    """``shared`` with growth groups and without preferred columns (:func:`_growth_slots`): a
    large round's secondary model (:data:`WHOLE_SECONDARY_GANGS`), built once per round."""
    return pre.kept("slots-growth-only", lambda: _growth_slots(pre, shared))


def _with_growth(pre: Prefiltered, shared: _Slots) -> _Slots:
    """``shared`` for the secondary model: a column per domain of a preferred-topology gang
    (:func:`_preferred_columns`), and a *growth group* per pending column and role that may
    add pods above the gang's minimum: the pods a started gang adds take room and slots in the
    rows of its role's mask (and its column's domain) like its minimum's, worth their growth
    value (:func:`_secondary_terms`), instead of the largest growth counted for free.

    On the fragmented S round (busy 0.75) the second stage counted a rack-preferring gang's
    two more 8-GPU pods (16 GPU-eq) for free on a cluster where no node is wholly free, and no
    spread: the secondary bound was 29.4 against an optimum of 12.4 (the full model, 120 s),
    so greedy's optimal plan was reported 0.43 % short; with growth groups 13.4 (whole
    variables), with the preferred columns too 12.4. A gang gets growth groups only when its
    minimum is its role minimums (every plan's surplus is then a sum of non-negative pods per
    role), its maximum all its replicas, no role's growth value is negative and each growing
    role's mask is one of the rows' masks; the others keep the largest growth, as before."""
    return pre.kept("slots-growth", lambda: _growth_slots(pre, _preferred_columns(pre, shared)))


MAX_PREFERRED_COLUMNS = 2000
"""Most columns :func:`_preferred_columns` adds (a column per gang and domain it fits in):
above it the secondary model counts spread at 0, as before."""


def _preferred_columns(pre: Prefiltered, shared: _Slots) -> _Slots:
    """``shared`` with, per pending gang that prefers a topology level (and requires none),
    a column per domain of that level where its minimum fits alone: a started gang either
    lies in one domain (that column, its pods in the domain's rows) or spans two or more and
    pays at least the preferred level's spread cost (its first column, :func:`_secondary_terms`
    charges it there). The columns of one gang share its pending index, so at most one starts."""
    rnd = pre.rnd
    terms = ObjectiveTerms.of(rnd)
    sets = list(shared.sets)
    set_of = {np.packbits(x).tobytes(): i for i, x in enumerate(sets) if i >= shared.mask_sets}
    pending = np.flatnonzero(shared.pending).tolist()
    first = {int(shared.gang[c]): c for c in reversed(pending)}
    added: list[tuple[int, int, tuple[str, int]]] = []  # column copied, domain set, place
    for gi, c in first.items():
        gang = rnd.pending[gi]
        topo = gang.topology
        if topo is None or topo.required is not None or not terms.spread_levels(gang) or gang.maximum < 2:
            continue
        codes, names = pre.topo.codes(str(topo.preferred))
        for d in range(len(names)):
            nodes = codes == d
            key = np.packbits(nodes).tobytes()
            if key not in set_of:
                set_of[key] = len(sets)
                sets.append(nodes)
            added.append((c, set_of[key], (str(topo.preferred), d)))
        if len(added) > MAX_PREFERRED_COLUMNS:
            return shared
    if not added:
        return shared
    base = len(shared.prio)
    copied = np.asarray([c for c, _, _ in added], dtype=np.int64)
    groups = np.flatnonzero(shared.gmask >= 0)  # pending groups: the minimums
    extra_gcol: list[np.ndarray] = []
    extra_groups: list[np.ndarray] = []
    for i, c in enumerate(copied.tolist()):
        own = groups[shared.gcol[groups] == c]
        extra_gcol.append(np.full(len(own), base + i, dtype=np.int64))
        extra_groups.append(own)
    src = np.concatenate(extra_groups)
    extended = shared.widened(
        prio=np.concatenate([shared.prio, shared.prio[copied]]),
        value=np.concatenate([shared.value, shared.value[copied]]),
        pending=np.concatenate([shared.pending, np.ones(len(copied), dtype=bool)]),
        gang=np.concatenate([shared.gang, shared.gang[copied]]),
        domain_set=np.concatenate([shared.domain_set, np.asarray([s for _, s, _ in added], dtype=np.int64)]),
        minimum=np.concatenate([shared.minimum, np.zeros(len(copied), dtype=np.int64)]),
        running=np.concatenate([shared.running, np.full(len(copied), -1, dtype=np.int64)]),
        place=[*shared.place, *(p for _, _, p in added)],
        gcol=np.concatenate([shared.gcol, *extra_gcol]),
        gcount=np.concatenate([shared.gcount, shared.gcount[src]]),
        greq=np.concatenate([shared.greq, shared.greq[src]]),
        gmask=np.concatenate([shared.gmask, shared.gmask[src]]),
        gnode=np.concatenate([shared.gnode, shared.gnode[src]]),
        flex=np.concatenate([shared.flex, shared.flex[src]]),
        gpod=np.concatenate([shared.gpod, shared.gpod[src]]),
        sets=sets,
        spread=np.zeros(base + len(copied), dtype=np.int64),
        ok=None,
        rhs={},  # the sets changed: their slot counts are counted again
    )
    spread = extended.spread
    assert spread is not None
    for gi, c in first.items():
        if (extended.gang[base:] == gi).any():
            spread[c] = terms.spread_levels(rnd.pending[gi])[0][1]
    extended.fits_alone()
    return extended


def _growth_slots(pre: Prefiltered, shared: _Slots) -> _Slots:
    rnd = pre.rnd
    terms = ObjectiveTerms.of(rnd)
    elig = arrays.per_cluster(rnd.cluster, "eligibility", lambda: arrays.Eligibility(rnd))
    mask_count = shared.subset.shape[0]
    mask_of = {np.packbits(shared.sets[m]).tobytes(): m for m in range(mask_count)}
    cols: list[int] = []
    counts: list[int] = []
    requests: list[np.ndarray] = []
    masks: list[int] = []
    worth: list[int] = []
    for c in np.flatnonzero(shared.pending).tolist():
        gang = rnd.pending[int(shared.gang[c])]
        if gang.minimum != sum(gang.role_minimum(r) for r in gang.roles) or gang.maximum != gang.total_replicas:
            continue
        groups: list[tuple[int, np.ndarray, int, int]] = []
        for role in gang.roles:
            extra = role.replicas - gang.role_minimum(role)
            if extra <= 0:
                continue
            value = terms.growth_value(role)
            mask = mask_of.get(np.packbits(elig.mask(role)).tobytes())
            if value < 0 or mask is None:
                groups = []
                break
            if value > 0:
                groups.append((extra, request_vector(role, pre.resources), mask, value))
        for extra, request, mask, value in groups:
            cols.append(c)
            counts.append(extra)
            requests.append(request)
            masks.append(mask)
            worth.append(value)
    if not cols:
        return shared
    added = len(cols)
    return shared.widened(
        gcol=np.concatenate([shared.gcol, np.asarray(cols, dtype=np.int64)]),
        gcount=np.concatenate([shared.gcount, np.ones(added, dtype=np.int64)]),
        greq=np.concatenate([shared.greq, np.stack(requests).astype(np.int64)]),
        gmask=np.concatenate([shared.gmask, np.asarray(masks, dtype=np.int64)]),
        gnode=np.concatenate([shared.gnode, np.full(added, -1, np.int64)]),
        flex=np.concatenate([shared.flex, np.zeros(added, dtype=bool)]),
        gpod=np.concatenate([shared.gpod, np.full(added, -1, np.int64)]),
        grow=np.concatenate([np.zeros(len(shared.gcol), np.int64), np.asarray(counts, dtype=np.int64)]),
        grow_value=np.concatenate([np.zeros(len(shared.gcol), np.int64), np.asarray(worth, dtype=np.int64)]),
        ok=shared.fits_alone(),  # the columns' own minimums, as in the tier models
    )


def _secondary_terms(
    pre: Prefiltered, shared: _Slots, var: np.ndarray, gvar: np.ndarray, size: int
) -> tuple[np.ndarray, int]:
    """The secondary sum as the tier model's objective (per variable) plus a constant.

    A candidate v kept (``k``) with pods kept (``p_i``, elastic ones) adds ``growth(v) -
    removal(v)``, evicted it costs ``e_v``: ``-e_v + (e_v + surplus_v) k`` for a rigid one;
    ``-e_v + Σ_i (g_i + c_v) p_i + (e_v - Σ_r g_r min_r - c_v n_v) k`` for an elastic one
    (``g``: growth value, ``c``: removal cost per pod, ``n``: its pods)."""
    rnd = pre.rnd
    terms = ObjectiveTerms.of(rnd)
    growers = set(pre.growers)
    objective = np.zeros(size, dtype=float)
    constant = terms.guarantee_ceiling

    def surplus(gang: PendingGang | RunningGang, members: dict[str, int]) -> int:
        minimum = terms.min_pods(gang)
        return sum(terms.growth_value(r) * (members.get(r.name, 0) - minimum.get(r.name, 0)) for r in gang.roles)

    def added(gi: int, run: RunningGang, current: Counter[str] | dict[str, int]) -> int:
        """The most a running gang's new members can add (0 unless it may grow)."""
        if gi not in growers:
            return 0
        return sum(max(0, terms.growth_value(r)) * max(0, r.replicas - current.get(r.name, 0)) for r in run.roles)

    grown: set[int] = set()
    if shared.grow is not None and shared.grow_value is not None:
        for g in np.flatnonzero((shared.grow > 0) & (gvar >= 0)).tolist():
            objective[gvar[g]] += float(shared.grow_value[g])
            grown.add(int(shared.gcol[g]))
    if shared.spread is not None:
        spread = np.flatnonzero((shared.spread > 0) & (var >= 0))
        np.subtract.at(objective, var[spread], shared.spread[spread].astype(float))
    for c in np.flatnonzero(shared.pending & (var >= 0)).tolist():
        if c in grown:  # its growth pods take room (:func:`_with_growth`)
            continue
        gang = rnd.pending[int(shared.gang[c])]
        objective[var[c]] += max(0, surplus(gang, {r.name: r.replicas for r in gang.roles}))
    columns = {int(shared.running[c]): c for c in np.flatnonzero(~shared.pending).tolist()}
    flex = np.flatnonzero(shared.flex)
    pods_of: dict[int, list[int]] = {}
    for g, c in zip(flex.tolist(), shared.gcol[flex].tolist(), strict=True):
        pods_of.setdefault(c, []).append(g)
    # Each running gang's surplus as it stands, from the objective's table (the scoring made
    # it): the gangs that are neither columns nor growers add it and nothing else, summed at
    # once; a pass over the 16,262 running gangs of L 0.75 was 0.08 CPU-s.
    surplus_of = terms.running_base.surplus
    plain = np.ones(len(rnd.running), dtype=bool)
    plain[np.asarray([*columns, *growers], dtype=np.intp)] = False
    constant += int(np.asarray(surplus_of, dtype=np.int64)[plain].sum())
    for gi in np.flatnonzero(~plain).tolist():
        run = rnd.running[gi]
        grows = 0
        if gi in growers:
            # a gang of one role: its pods are all of it
            one = len(run.roles) == 1
            current: Counter[str] | dict[str, int] = (
                {run.roles[0].name: len(run.pods)} if one else Counter(p.role for p in run.pods)
            )
            grows = added(gi, run, current)
        kept = surplus_of[gi] + grows
        col = columns.get(gi)
        if col is None or var[col] < 0:  # cannot lose pods, or a candidate the model leaves out: at its best
            constant += kept if col is None else max(kept, -terms.eviction_cost(run))
            continue
        evict = terms.eviction_cost(run)
        constant -= evict
        pods = pods_of.get(col, [])
        if not pods:
            objective[var[col]] += evict + kept
            continue
        roles = {r.name: r for r in run.roles}
        removal = terms.pod_removal_cost(run)
        for g in pods:
            objective[gvar[g]] += terms.growth_value(roles[run.pods[int(shared.gpod[g])].role]) + removal
        floor = sum(terms.growth_value(roles[n]) * m for n, m in terms.min_pods(run).items())
        objective[var[col]] += evict - floor - removal * len(run.pods) + grows
    return objective, constant
