"""Cheap bounds: how good any plan of a round could be, computed without a model.

Every plan reports a bound per priority tier and on the secondary terms, so that a plan from
any path (CP-SAT stopped early, the greedy fallback, the greedy plan that needs no model)
says how far it can be from the best. CP-SAT's own bounds are tighter when it gets to prove
them; these come from arithmetic on the prefiltered round, in milliseconds even at 16,384
nodes, and they let :mod:`gangopt.solvers.cpsat` skip the model altogether when the greedy plan
already meets them.

* **Tiers.** Every gang the prefilter kept starts and every running gang stays. When a plan
  shows that the tiers above P all reach that ceiling, every optimal plan runs all of their
  gangs, at least at their minimum; tier P then gets at most what fits in the rest of the
  cluster (:func:`packed_tier_bounds`, a fractional knapsack per resource). Under contention
  this is the tighter bound for the first tier below the ceiling.
* **Secondary.** Growth is bounded by a fractional knapsack per resource: the members above
  each role's minimum, by value per unit of that resource, into the capacity the minimums
  leave. Preemption cost and spread are bounded by zero. When the tiers are at their
  ceilings (every kept gang must run in every optimal plan), the minimum pods of pending
  gangs that cannot fit on nodes already busy must open idle nodes, which bounds the
  fragmentation term.

All values are in objective units (1/SCALE GPU-equivalents), like :mod:`gangopt.objective`.
Sums over the whole cluster are taken in Python integers (``dtype=object``): memory in
milli-bytes overflows int64 once a few thousand nodes are added up.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ortools.linear_solver import pywraplp

from gangopt.arrays import cluster_capacity, fit_counts
from gangopt.objective import SCALE, ObjectiveTerms
from gangopt.prefilter import BIG, Prefiltered, request_vector
from gangopt.schema import PendingGang, Role, Round, RunningGang


@dataclass(frozen=True)
class CheapBounds:
    """Per-priority tier ceilings and a bound on the secondary terms (objective units)."""

    tiers: dict[int, int]
    secondary: int

    def tiers_in_units(self) -> dict[int, float]:
        """The tier bounds in GPU-equivalents, as plans report them."""
        return {p: v / SCALE for p, v in self.tiers.items()}


def tier_ceilings(pre: Prefiltered) -> dict[int, int]:
    """Per priority, the value if every gang the prefilter kept started and every running gang
    stayed: a bound any plan respects. Computed once per prefiltered round and kept on it (a
    CP-SAT solve asks four times: a pass over every gang each, 13 % of the CPU profile of the
    Philly b436b2 replay's rounds before)."""
    return dict(pre.kept("tier-ceilings", lambda: ceilings_of(pre.rnd, pre.pending)))


def ceilings_of(rnd: Round, pending: Iterable[int]) -> dict[int, int]:
    """Per priority, the value if the pending gangs of indices ``pending`` started and every
    running gang stayed: :func:`tier_ceilings` for the gangs the prefilter kept; every pending
    gang's, a looser bound any plan respects too, for a finisher the clock leaves no prefilter
    (:func:`gangopt.annotate.annotate`)."""
    terms = ObjectiveTerms.of(rnd)
    ceiling: dict[int, int] = {}
    for gi in pending:
        gang = rnd.pending[gi]
        ceiling[gang.priority] = ceiling.get(gang.priority, 0) + terms.tier_value(gang)
    for prio, value in terms.running_base.tier_sums.items():  # every running gang's, summed once per round
        ceiling[prio] = ceiling.get(prio, 0) + value
    return ceiling


def cheap_bounds(pre: Prefiltered, tiers_at_ceiling: bool, lp: bool = True) -> CheapBounds:
    """The round's cheap bounds. ``tiers_at_ceiling`` says that some plan reaches every tier
    ceiling, so that every optimal plan runs every kept gang at its minimum or more; the
    secondary bound is then much tighter. Computed once per prefiltered round (a solve asks
    for the greedy plan's, then the answer's) and kept on it. ``lp=False`` leaves out the
    growth LP (OR-Tools' GLOP): the growth term is then bounded by every member added."""
    return pre.kept((CHEAP_BOUNDS, tiers_at_ceiling, lp), lambda: _cheap_bounds(pre, tiers_at_ceiling, lp))


CHEAP_BOUNDS = "cheap-bounds"
"""First part of the keys in ``pre.derived`` of :func:`cheap_bounds` (:func:`cheap_bounds_kept`)."""


def cheap_bounds_kept(pre: Prefiltered) -> bool:
    """Whether some :func:`cheap_bounds` of ``pre`` are kept already (asking again costs nothing)."""
    return any(isinstance(k, tuple) and k[:1] == (CHEAP_BOUNDS,) for k in pre.derived)


def _cheap_bounds(pre: Prefiltered, tiers_at_ceiling: bool, lp: bool) -> CheapBounds:
    ceilings = tier_ceilings(pre)
    terms = ObjectiveTerms.of(pre.rnd)
    secondary = _growth_bound(pre, tiers_at_ceiling, lp) + terms.guarantee_ceiling
    if tiers_at_ceiling:
        secondary -= _opened_nodes_bound(pre) * ObjectiveTerms.of(pre.rnd).open_node_cost
    return CheapBounds(tiers=ceilings, secondary=secondary)


def reaches_ceilings(tier_values: dict[int, float], ceilings: dict[int, int]) -> bool:
    """Whether tier values (GPU-equivalents, as in a plan's score) reach every ceiling."""
    return all(tier_values.get(p, 0.0) >= v / SCALE - 1e-9 for p, v in ceilings.items())


# ----------------------------------------------------------------------------- packed tiers


Floors = tuple[tuple[int, int], ...]
"""The tiers above one, each with the value a plan gives it: ``((priority, value), ...)``."""


def chained_tier_bounds(
    tiers: set[int],
    values: dict[int, int],
    known: dict[int, int],
    enough: float | None,
    tier_bound: Callable[[int, Floors, bool, int], int | None],
) -> dict[int, int]:
    """Tier bounds from the top down, each tier's model given *floors*: a tier above that a
    plan (``values``) proves (its bound, from ``known`` or the model, at most its value) must
    keep at least that value in every lexicographically better plan, so the tier below is
    bounded with it held there. The chain ends at the first tier not proven: below it no floor
    holds. ``tier_bound(priority, floors, chain, value)`` is asked only for ``tiers`` (those
    with pending work) that ``known`` does not already prove; ``chain`` says whether every
    tier above is proven (where a whole solution could be placed). With ``enough``, stop below
    the first tier not proven within it (a unit's margin for the caller's floats): no bound
    below could prove the plan then. The one reading of this rule for the per-node slot
    models (:mod:`gangopt.slots`) and the node-class ones (:mod:`gangopt.slot_classes`)."""
    out: dict[int, int] = {}
    floors: list[tuple[int, int]] = []
    chain = True
    for prio in sorted(tiers | set(values) | set(known), reverse=True):
        bound = known.get(prio)
        value = values.get(prio, 0)
        if prio in tiers and (bound is None or bound > value):
            lp = tier_bound(prio, tuple(floors), chain, value)
            if lp is not None:
                bound = lp if bound is None else min(bound, lp)
                out[prio] = bound
        if chain:
            floors.append((prio, value))
            chain = bound is not None and bound <= value
        if enough is not None and bound is not None and bound - value > enough * max(1, abs(value)) + 1:
            break
    return out


def lexicographic_floors(values: dict[int, int], bounds: dict[int, int]) -> dict[int, int]:
    """What every plan at least as good lexicographically as one of tier ``values`` keeps:
    going down from the highest priority, each tier the plan proves (its value at least its
    bound in ``bounds``) at that value, then the first tier it does not prove at least at its
    value (as :func:`chained_tier_bounds` floors the tier models), and every tier below at 0,
    which no tier value is under (a sum of gang values, none negative). The lexicographic
    optimum is such a plan, so a bound on the plans that keep these floors bounds it
    (:func:`gangopt.slots.secondary_bound_at`). The tiers below are listed so that a model
    under these floors keeps their gangs: a second stage without a tier's pending gangs left
    their growth out (a random round's optimum at 20.4 GPU-eq of secondary terms, such a bound
    20.2)."""
    floors: dict[int, int] = {}
    open_tier = False
    for prio in sorted(set(values) | set(bounds), reverse=True):
        floors[prio] = 0 if open_tier else values.get(prio, 0)
        open_tier = open_tier or prio not in bounds or bounds[prio] > floors[prio]
    return floors


def packed_tier_bounds(pre: Prefiltered, reached: dict[int, bool]) -> dict[int, int]:
    """Tighter tier bounds from capacity, for the tiers below a run of tiers at their ceiling.

    ``reached`` says, per priority, whether some valid plan reaches that tier's ceiling. Going
    down from the highest priority while the tiers above are all reached, every optimal plan
    runs every gang of those tiers at its minimum or more, so tier P can hold at most a
    fractional knapsack of its own movable gangs (pending gangs the prefilter kept, running
    gangs that may lose pods; value = tier value, weight = the minimum configuration's request)
    in the capacity left after the pods that never move and those tiers' minimums, per
    resource, the smallest over resources. Nodes, eligibility, topology, quotas and lower tiers
    are left out, which only loosens it. Returns only the tiers it bounds."""
    room, items, constant = _packing(pre)
    room = list(room)
    out: dict[int, int] = {}
    for prio in sorted(set(items) | set(constant), reverse=True):
        tier_items = items.get(prio, [])
        fit = min(
            (_fractional_knapsack([(v, w[k]) for v, w in tier_items], room[k]) for k in range(len(room))),
            default=sum(v for v, _ in tier_items),
        )
        out[prio] = constant[prio] + fit
        if not reached.get(prio, False):
            break  # lower tiers may not assume this one runs everything
        for k in range(len(room)):
            room[k] -= sum(w[k] for _, w in tier_items)
    return out


def _packing(pre: Prefiltered) -> tuple[list[int], dict[int, list[tuple[int, list[int]]]], Counter[int]]:
    """What :func:`packed_tier_bounds` packs, whatever the plan: the room per resource, the
    items per tier and each tier's value that never moves. Computed once per prefiltered round
    (each candidate plan asks; the caller must not modify them)."""

    def build() -> tuple[list[int], dict[int, list[tuple[int, list[int]]]], Counter[int]]:
        free = _free_after_fixed(pre, False)
        room = [int(free[:, k].astype(object).sum()) for k in range(len(pre.resources))]
        items = _tier_items(pre, ObjectiveTerms.of(pre.rnd))
        constant = Counter({p: v for p, v in tier_ceilings(pre).items()})
        for prio, tier_items in items.items():
            constant[prio] -= sum(v for v, _ in tier_items)
        return room, items, constant

    return pre.kept("packing", build)


def _tier_items(pre: Prefiltered, terms: ObjectiveTerms) -> dict[int, list[tuple[int, list[int]]]]:
    """Per priority, (tier value, minimum request per resource) of each movable gang."""
    rnd = pre.rnd
    items: dict[int, list[tuple[int, list[int]]]] = {}
    for gi in pre.pending:
        gang = rnd.pending[gi]
        items.setdefault(gang.priority, []).append((terms.tier_value(gang), _least_demand(gang, pre.resources)))
    # the running gangs' tier values from the objective's table, and their least demand per
    # shape: 54,869 movable gangs at fragmented XL, of a handful of shapes (0.36 CPU-s before)
    tier = terms.running_base.tier
    demand: dict[object, list[int]] = {}
    for gi in pre.candidates:
        run = rnd.running[gi]
        key = (run.min_members, tuple((tuple(r.requests.items()), r.replicas, r.min_replicas) for r in run.roles))
        least = demand.get(key)
        if least is None:
            least = demand[key] = _least_demand(run, pre.resources)
        items.setdefault(run.priority, []).append((tier[gi], least))
    return items


def _least_demand(gang: PendingGang | RunningGang, resources: list[str]) -> list[int]:
    """Per resource, the least any configuration the gang may start with asks for (Python ints).

    Not the request of one minimum configuration: a gang whose minimum is one pod of any role
    may start on its CPU-only role, so its least GPU demand is 0. Charging the configuration
    :meth:`~gangopt.objective.ObjectiveTerms.min_pods` values (one GPU pod) made the packed
    bound leave out a gang that fits, and a greedy plan was "proven" optimal at 17.8 where
    CP-SAT found 19.0 (issue 18; tests/fixtures/regressions/bounds-packed-least-demand.json).
    Role minimums, and the rest of the gang-wide minimum at the cheapest role for each
    resource, summed in Python ints (numpy object arrays took 0.46 s for the 14,101 movable
    gangs of the many-small-gangs 4,096-node round); :func:`_minimum_demand` is the same as an
    array."""
    requests = [[int(role.requests.get(r, 0)) for r in resources] for role in gang.roles]
    total = [0] * len(resources)
    for role, vector in zip(gang.roles, requests, strict=True):
        count = gang.role_minimum(role)
        if count:
            total = [t + count * v for t, v in zip(total, vector, strict=True)]
    extra = gang.minimum - sum(gang.role_minimum(r) for r in gang.roles)
    if extra > 0:
        total = [t + extra * min(column) for t, column in zip(total, zip(*requests, strict=True), strict=True)]
    return total


def _fractional_knapsack(items: list[tuple[int, int]], capacity: int) -> int:
    """Most value of ``(value, weight)`` items, fractions allowed, within ``capacity``,
    rounded up (plus one for the float ordering of near-equal densities) to stay a bound."""
    total = sum(v for v, w in items if w <= 0)
    left = max(0, capacity)
    for value, weight in sorted(((v, w) for v, w in items if w > 0), key=lambda t: t[0] / t[1], reverse=True):
        if weight <= left:
            total += value
            left -= weight
        else:
            if left > 0:
                total += -(-value * left // weight) + 1
            break
    return total


# ----------------------------------------------------------------------------- growth


@dataclass
class _Growth:
    """The growth term as a small LP: members that may be added (rows), what some plan must
    place in any case, and the room for both."""

    count: list[int]
    value: list[int]
    requests: list[np.ndarray]
    mandatory: list[tuple[int, np.ndarray]]
    constant: int
    owner: list[tuple[int, str]] = field(default_factory=list)
    """Per item, its pending gang's index in the round and its role's name; ``(-1, "")`` for
    a running gang's (the node-class LP places the pending ones: :mod:`gangopt.slot_classes`)."""


def growth_items(pre: Prefiltered) -> _Growth:
    """The members any plan may add (:func:`_growth_items` when not every kept gang must run),
    once per prefiltered round: the growth bound and the node-class LP's secondary ceiling
    (:func:`gangopt.slot_classes.secondary_ceiling`) read the same items."""
    return pre.kept("growth-items", lambda: _growth_items(pre, False, _free_after_fixed(pre, False)))


def _growth_bound(pre: Prefiltered, must_run: bool, lp: bool = True) -> int:
    """Bound on the growth term: the LP relaxation of adding members above role minimums.

    Pods of gangs that can never lose any stay where they are; everything else (members to
    add, and with ``must_run`` the role minimums of every kept gang) competes for the rest of
    each node. Two families of rows, both valid for any plan: per resource, the total room;
    per resource and request size ``s``, pods asking ``s`` or more number at most
    ``sum(floor(free / s))`` over nodes (fragmentation: an 8-GPU pod needs a whole free node).
    Locality, eligibility and gang-wide minimums are left out, which only loosens the bound.
    """
    free = _free_after_fixed(pre, must_run)
    growth = _growth_items(pre, must_run, free) if must_run else growth_items(pre)
    if not growth.count:
        return growth.constant
    every = growth.constant + int(sum(c * v for c, v in zip(growth.count, growth.value, strict=True)))
    if not lp:
        return every
    # Imported here: OR-Tools costs about half a second to import, and most rounds' bounds
    # (and every command that only validates or explains) never need an LP.
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver("GLOP")
    n = [solver.NumVar(0.0, float(c), "") for c in growth.count]
    for k in range(len(pre.resources)):
        _room_rows(solver, n, growth, free[:, k], k)
    solver.Maximize(sum(float(v) * x for v, x in zip(growth.value, n, strict=True)))
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return every
    # GLOP works in floating point: a margin for its tolerances keeps the bound a bound. Where
    # no row binds, every member added is the exact answer and the margin would only loosen it
    # (a greedy plan proven on every tier reported 16.2 against 16.0 with ``--lp-bounds``).
    relaxed = float(solver.Objective().Value())
    return min(every, growth.constant + math.ceil(relaxed * (1 + 1e-6)) + 1)


def _room_rows(solver: pywraplp.Solver, n: list[pywraplp.Variable], growth: _Growth, free: np.ndarray, k: int) -> None:
    """Rows of resource ``k``: total room, and pod counts per request size (scaled to 1)."""
    weight = np.array([int(r[k]) for r in growth.requests], dtype=np.int64)
    needs = [(count, int(req[k])) for count, req in growth.mandatory if req[k] > 0]
    total = float(free.sum(dtype=object) - sum(count * need for count, need in needs))
    if total <= 0:
        for i in np.flatnonzero(weight > 0):
            n[i].SetUb(0.0)
        return
    paid = np.flatnonzero(weight > 0)
    if len(paid):
        solver.Add(sum(float(weight[i]) / total * n[i] for i in paid) <= 1.0)
    for size in sorted({int(w) for w in weight[paid]}):
        slots = int((free // size).sum()) - sum(count for count, need in needs if need >= size)
        members = [n[i] for i in np.flatnonzero(weight >= size)]
        if slots <= 0:
            for x in members:
                x.SetUb(0.0)
        else:
            solver.Add(sum(members) <= float(slots))


def _growth_items(pre: Prefiltered, must_run: bool, free: np.ndarray) -> _Growth:
    """Members that may be added, per role, and what the surplus already counts.

    Surplus is members times growth value, less the same for the gang's minimum
    configuration. Gangs that may be left out count from zero (their constant is dropped, a
    loosening); with ``must_run`` their role minimums are mandatory and the difference between
    those and the minimum configuration is a constant. Running gangs that can never lose
    pods keep them where they are: only members beyond their current ones are added. A gang
    with a required topology level adds at most what fits in its best domain.
    """
    rnd = pre.rnd
    terms = ObjectiveTerms.of(rnd)
    movable = set(pre.candidates)
    out = _Growth(count=[], value=[], requests=[], mandatory=[], constant=0)
    growers = set(pre.growers)
    gangs: list[tuple[PendingGang | RunningGang, int, bool, bool]] = [
        (rnd.pending[gi], gi, True, True) for gi in pre.pending
    ]
    # When every running gang must stay, one that cannot shrink keeps all its pods in place.
    gangs += [
        (run, gi, gi in movable and (run.elastic or not must_run), gi in growers) for gi, run in enumerate(rnd.running)
    ]
    # Per shape of requests, the growth value and the request vector (read-only, shared): the
    # running gangs' roles are tens of thousands of objects of a few shapes (fragmented XL).
    shapes: dict[tuple[tuple[str, int], ...], tuple[int, np.ndarray]] = {}

    def shape(role: Role) -> tuple[int, np.ndarray]:
        key = tuple(role.requests.items())
        known = shapes.get(key)
        if known is None:
            vector = request_vector(role, pre.resources)
            vector.flags.writeable = False
            known = shapes[key] = (terms.growth_value(role), vector)
        return known

    for gang, gi, placeable, grows in gangs:
        # The minimum configuration only where a constant reads it: a placeable gang's role
        # minimums are not mandatory unless ``must_run`` (L 0.75: 14,101 of its 17,260 gangs,
        # whose ``min_pods`` nothing else asks for, 0.03 CPU-s).
        minimum = terms.min_pods(gang) if must_run or not placeable else {}
        current = _pods_per_role(gang) if isinstance(gang, RunningGang) else {}
        for role in gang.roles:
            value, request = shape(role)
            top = role.replicas if grows else current.get(role.name, 0)
            if placeable:
                base = gang.role_minimum(role)
                if must_run:
                    out.mandatory.append((base, request))
                    out.constant += value * (base - minimum[role.name])
            else:
                base = current.get(role.name, 0)
                out.constant += value * (base - minimum[role.name])
            if top <= base or value <= 0:
                continue  # no member to add (the domain's room only lowers ``top``)
            if isinstance(gang, PendingGang) or grows:
                top = min(top, _domain_room(pre, gang, gi, request, free) + (0 if placeable else base))
            if top > base:
                out.count.append(top - base)
                out.value.append(value)
                out.requests.append(request)
                out.owner.append((gi, role.name) if isinstance(gang, PendingGang) else (-1, ""))
    return out


def _pods_per_role(run: RunningGang) -> dict[str, int]:
    """Pods per role of a running gang; a gang of one role whose pods are all of it, most of
    them, without a counter (1.5 µs a gang, 68,536 gangs at fragmented XL)."""
    roles, pods = run.roles, run.pods
    if len(roles) == 1:
        name = roles[0].name
        if (len(pods) == 1 and pods[0].role == name) or all(p.role == name for p in pods):
            return {name: len(pods)}
    return Counter(p.role for p in pods)


def _domain_room(
    pre: Prefiltered, gang: PendingGang | RunningGang, gi: int, request: np.ndarray, free: np.ndarray
) -> int:
    """Pods of ``request`` that fit in the best domain a gang with a required level may use
    (a running gang: the one it is in; a pending one: those the prefilter left it)."""
    if gang.topology is None or gang.topology.required is None:
        return BIG
    codes, names = pre.topo.codes(gang.topology.required)
    if isinstance(gang, RunningGang):
        allowed = {codes[pre.topo.node_index[p.node]] for p in gang.pods}
    else:
        wanted = set(pre.required_domains.get(gi, names))
        allowed = {d for d, name in enumerate(names) if name in wanted}
    slots = fit_counts(free, request, cap=gang.maximum)
    per_domain = np.bincount(codes, weights=slots, minlength=len(names))
    return int(max((per_domain[d] for d in allowed), default=0))


def _free_after_fixed(pre: Prefiltered, must_run: bool) -> np.ndarray:
    """Per node and resource: capacity less the pods of running gangs that cannot lose any
    (with ``must_run``, every running gang stays, so those that cannot shrink too). Both
    bounds of a round ask for it: computed once per prefiltered round."""
    return pre.kept(("free-after-fixed", must_run), lambda: _fixed_free(pre, must_run))


def _fixed_free(pre: Prefiltered, must_run: bool) -> np.ndarray:
    """The pods that stay are gathered as (node row, request shape) and subtracted in one step
    per resource: a vector subtraction per pod took 0.31 CPU-s for the 68,536 running gangs of
    the fragmented XL round."""
    rnd = pre.rnd
    index = pre.topo.node_index
    free = cluster_capacity(rnd, pre.resources).copy()
    movable = set(pre.candidates)
    shapes: dict[tuple[tuple[str, int], ...], int] = {}
    vectors: list[np.ndarray] = []
    rows: list[int] = []
    kinds: list[int] = []
    for gi, run in enumerate(rnd.running):
        if gi in movable and (run.elastic or not must_run):
            continue
        of_role: dict[str, int] = {}
        for r in run.roles:
            key = tuple(r.requests.items())
            kind = shapes.get(key)
            if kind is None:
                kind = shapes[key] = len(vectors)
                vectors.append(request_vector(r, pre.resources))
            of_role[r.name] = kind
        for pod in run.pods:
            kinds.append(of_role[pod.role])
            rows.append(index[pod.node])
    if rows:
        taken = np.asarray(vectors, dtype=free.dtype)[np.asarray(kinds, dtype=np.intp)]
        at = np.asarray(rows, dtype=np.intp)
        for k in range(free.shape[1]):
            np.subtract.at(free[:, k], at, taken[:, k])
    return np.maximum(free, 0)


# ----------------------------------------------------------------------------- opened nodes


def _opened_nodes_bound(pre: Prefiltered) -> int:
    """Fewest idle nodes any plan that starts every kept gang must open.

    The pending gangs' minimum pods need room. Nodes already busy (and schedulable) offer at
    most their capacity less what their running pods keep using; the rest must go to idle
    nodes. Two counts, the larger wins: by amount (all resources pooled, the largest idle
    node taking the most) and by pod shape (pods at least as large as a shape, against the
    slots the busy nodes have for it: an 8-GPU pod cannot use four free GPUs on two nodes).
    Eligibility and locality are left out, which only loosens the bound.
    """
    rnd = pre.rnd
    busy = np.zeros(len(rnd.cluster.nodes), dtype=bool)
    for gang in rnd.running:
        for pod in gang.pods:
            busy[pre.topo.node_index[pod.node]] = True
    schedulable = np.fromiter((n.schedulable for n in rnd.cluster.nodes), dtype=bool, count=len(busy))
    idle = cluster_capacity(rnd, pre.resources)[schedulable & ~busy]
    if idle.shape[0] == 0:
        return 0
    free = _free_after_fixed(pre, must_run=True)[schedulable & busy]
    pods = [
        (rnd.pending[gi].role_minimum(role), request_vector(role, pre.resources))
        for gi in pre.pending
        for role in rnd.pending[gi].roles
    ]
    by_amount = _by_amount(pre, free, idle, schedulable)
    return max(by_amount, _by_shape(pods, free, idle))


def _by_amount(pre: Prefiltered, busy_free: np.ndarray, idle: np.ndarray, schedulable: np.ndarray) -> int:
    """Idle nodes needed for the pending minimums' total demand beyond the busy nodes' room
    (less what the elastic candidates' kept minimums must still use of that room).

    An elastic candidate keeps at least its minimum, on nodes it already holds; only the part
    that cannot sit on its cordoned nodes takes room counted in ``busy_free``. Subtracting
    the whole minimum (as before) made the bound claim idle nodes no plan needs: a gang kept
    on a cordoned node was charged against the schedulable room, and a greedy plan that opened
    one idle node was "proven" against a bound of two (issue 18, bug 1)."""
    rnd = pre.rnd
    room = busy_free.sum(axis=0, dtype=object)
    index = pre.topo.node_index
    for gi in pre.candidates:
        run = rnd.running[gi]
        if run.elastic:
            reqs = {r.name: request_vector(r, pre.resources).astype(object) for r in run.roles}
            cordoned = sum(
                (reqs[pod.role] for pod in run.pods if not schedulable[index[pod.node]]),
                np.zeros(len(pre.resources), dtype=object),
            )
            room -= np.maximum(_minimum_demand(run, pre.resources) - cordoned, 0)
    demand = np.zeros(len(pre.resources), dtype=object)
    for gi in pre.pending:
        demand += _minimum_demand(rnd.pending[gi], pre.resources)
    short = [max(0, int(d - r)) for d, r in zip(demand, room, strict=True)]
    largest = [int(x) for x in idle.max(axis=0)]
    needed = [-(-short[k] // largest[k]) for k in range(len(short)) if short[k] > 0 and largest[k] > 0]
    return max(needed, default=0)


def _by_shape(pods: list[tuple[int, np.ndarray]], busy_free: np.ndarray, idle: np.ndarray) -> int:
    """Idle nodes needed for the pods too large for the busy nodes: for each pod shape ``p``,
    the pods asking at least ``p`` on every resource fit at most ``fit(p)`` times per node."""
    needed = 0
    shapes = {tuple(int(x) for x in req): req for count, req in pods if count}
    for shape in shapes.values():
        count = sum(c for c, req in pods if (req >= shape).all())
        slots = int(fit_counts(busy_free, shape, cap=count).sum())
        per_node = int(fit_counts(idle, shape, cap=count).max())
        if count > slots and per_node > 0:
            needed = max(needed, math.ceil((count - slots) / per_node))
    return needed


def _minimum_demand(gang: PendingGang | RunningGang, resources: list[str]) -> np.ndarray:
    """The least the gang's smallest configuration requests, per resource
    (:func:`_least_demand`), as a numpy object array (exact integers)."""
    return np.array(_least_demand(gang, resources), dtype=object)
