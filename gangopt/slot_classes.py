"""Tier bounds for rounds too large for per-node slot models: node classes by capacity, one LP.

:mod:`gangopt.slots` bounds every tier by pod slots per node, with a column per pending gang
and per candidate running gang; at 16,384 nodes with 54,869 candidates (issue 13's XL round)
its LPs alone take 125 CPU-s, so the round got only the tier ceilings (priority 0: 226,862
GPU-eq against greedy's 177,914, a 13 % reported gap). This module relaxes the same question
until its model no longer grows with the running gangs:

* **Nodes by capacity, not by pods.** Per node, the room in units of the binding resource
  (``gpu``; the largest unit dividing every pending pod's request): ``f`` free whatever the
  plan does (capacity less pods that stay, less candidates of the LP's tiers and above), and
  ``c_i`` held by candidates of *band* ``i`` (priorities from the LP's tier ``L_i`` up to the
  next, ``L_{i+1}``; candidates of the top tier or above are evicted by no pod of the LP and
  stay). Nodes with the same eligibility for the pending roles, ``f`` and ``c`` are one class.
* **States per node.** A node of a class is in one state ``e`` (units evicted per band,
  ``0 <= e_i <= c_i``); ``z[k, e]`` counts the class's nodes in state ``e`` (an LP over
  ``sum_e z[k, e] = n_k``). Pods of priority ``L_j`` fit in ``f + sum_{i<j} e_i`` (room of
  strictly lower victims, rule 5), and only on nodes where no band ``>= j`` lost a unit
  (rule 5's node form: a node a victim left receives only strictly higher pods).
* **Slots per state.** Per eligibility set, level and size ``t`` (in units), pods asking
  ``s`` count ``floor(s / t)`` slots, a node in state ``e`` offers ``floor(R_j(e) / t)``
  (superadditive: exact for one node's pods, :mod:`gangopt.slots`); the other resources by
  amount over the set (every lower candidate gone).
* **Value lost, cheapest first.** The units a class evicts in band ``i`` cost tier ``L_i``
  at least its candidates' cheapest units: each rigid candidate's tier value shared over its
  units, an elastic one's at 0 (it may shed pods and stay). So the LP's tier values are never
  below a real plan's: evicting a gang loses all its units' shares, its value.
* **Value lost per node too** (:func:`_node_losses`): a node in state ``e`` loses at least its
  own cheapest pods summing to exactly ``e_i`` units (a rigid gang's pods on it together, at
  their share of its value; pods valued 0 one by one), so a tier loses at least the sum over
  states of the least such loss among the class's nodes, and a state no node of its class can
  reach holds none. Charged only to the class's cheapest units, an evicting state could be
  paid for by cheap pods on the class's other nodes, which stay.
* **Lexicographic floors**, as in :mod:`gangopt.slots`: the tiers above, down to the first one
  the plan does not prove, at least the plan's values.
* **The preemptions' cost** (:func:`eviction_floor`): the lowest tier's LP again, its objective
  the least eviction cost of its node states (each node its own cheapest pods, at their gangs'
  eviction cost per pod; a state's nodes at least the cheapest of their class's own costs for
  it, in :data:`EVICTION_SEGMENTS` steps), a floor under the secondary cost of every plan that
  keeps the floors: on issue 13's XL round 2,499.8 GPU-eq (greedy pays 4,792.7) in 0.64-0.67
  CPU-s, the secondary bound 3,960.2 -> 1,460.4 and the reported gap 4.8 % -> 4.2 %
  (docs/benchmarks.md, "h30-XLgap").
* **Growth and preemptions together** (:func:`class_secondary_bound`): the same LP, its
  objective the growth of the pending gangs it starts (their members above their roles'
  minimums as columns in the capacity rows, each at most its count times its gang's start)
  less that eviction cost. The cheap growth bound let every pending gang grow in the room that
  every candidate's eviction frees, gangs no plan at least as good can start included; and an
  evicted pod also pays the growth value the cheap bound's items count for it
  (:attr:`_Pool.pod_surplus`): on issue 13's XL round the secondary bound of greedy's plan
  1,460.4 -> 412.6 -> 296.5 GPU-eq (plan -3,380.0), the reported gap 4.22 % -> 3.99 % -> 3.96 %,
  in 0.8-1.1 CPU-s where the eviction floor's LP took 0.7-1.0 (h32-XLbound).

Left out (each only loosens the bound): topology (required and preferred), gang groups,
quotas, slices, growth, and the other resources per node. So it is a relaxation of the
per-node slot model's LP in the candidates (a gang may lose part of its pods, at part of its
value) and of the round, and a bound on the lexicographic optimum's tiers
(tests/test_slot_classes.py checks it against the reference optimum on small rounds).

The per-node loss (h29-XLplan, docs/benchmarks.md) took greedy's XL plan's priority-0 bound
from 193,857.9 to 191,577.1 GPU-eq (the per-node LP: 190,409.7) and L's from 52,631.2 to
51,387.2 (51,020.5), at the same cost (CPU-s in benchmarks.md). Before it (stop 28), measured
on issue 13's XL round (fragmented, busy 0.75; docs/benchmarks.md, "h28-XL"), on
greedy's plan (priority 5 178,311.9, priority 0 177,914.4 GPU-eq): priority 5 at most
178,889.7 (ceiling 180,780.9; the per-node LP: 178,889.8), priority 0 at most 193,857.9
(ceiling 226,862.3; the per-node LP, 125 CPU-s offline: 190,409.7), in 1.3 CPU-s (the round's
pool 0.4, two LPs of 3,016 and 6,658 rows 0.9). At L (4,096 nodes), where the per-node models
run when the clock allows: priority 0 at most 52,631.2 against their 51,019.9 (the optimum's:
a placed plan reaches it), 0.5 CPU-s against 2.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import reduce
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from gangopt import arrays
from gangopt.bounds import Floors, chained_tier_bounds, growth_items
from gangopt.objective import ObjectiveTerms
from gangopt.prefilter import Prefiltered, request_vector

if TYPE_CHECKING:
    from ortools.linear_solver import linear_solver_pb2

MAX_STATES = 200_000
"""Most node-state variables (``z``) one tier's LP may have; a round past it gets no bound
here (its bands hold too many units per node: the model would grow with the running pods)."""

SECONDS_PER_CANDIDATE_POD = 3.5e-5
"""Estimated CPU seconds of the class bounds (both tiers' LPs and the round's pool) and of
:func:`class_secondary_bound`'s LP per pod of a candidate running gang: 1.3-1.4 CPU-s for the 59,283
candidate pods of issue 13's XL round (the pool 0.4, the models 0.6, GLOP 0.3) on a machine at
load 9, rounded up for a busier one (3e-5); the eviction floor adds 0.64-0.67 CPU-s there
(1.9-2.3 in all at load 5-7: 2.07 estimated now, h30-XLgap). At stop 32 in process after
greedy's pass: the pool 0.49-0.58 (1.35 before it read ``running_base``), both tiers' models
and LPs 0.94-1.14, the secondary bound's LP 0.84 (h32-XLbound); the estimate is kept."""

SHARE = 0.25
"""The class bounds run when their estimate is at most this share of ``policy.time_limit``
(a rule on the round, not the clock: the same bounds on a loaded machine): XL at a 10 s limit
(estimate 2.1 s), not at 3 s."""


def affordable(pre: Prefiltered) -> bool:
    """Whether the round's size allows the class bounds within its time limit (:data:`SHARE`)."""
    pods = pre.kept("slot-classes-pods", lambda: sum(len(pre.rnd.running[gi].pods) for gi in pre.candidates))
    return SECONDS_PER_CANDIDATE_POD * pods <= SHARE * pre.rnd.policy.time_limit


POOL_KEY = "slot-classes-pool"
"""Key in ``pre.derived`` of the round's :class:`_Pool` (built once, with every tier's LP
solution: :mod:`gangopt.class_choice` reads them)."""

LP_MARGIN = 0.05
"""Objective units added to GLOP's optimum before rounding down (its tolerances move the
value by far less), as :mod:`gangopt.slots` does."""


@dataclass
class _Pool:
    """The round's pending pods and node rooms, per binding-resource unit (built once)."""

    unit: int
    k: int
    """Column of the binding resource in ``pre.resources``."""
    prio: np.ndarray
    """Per pending gang (kept), its priority."""
    value: np.ndarray
    """Per pending gang, its tier value (objective units)."""
    pod_gang: np.ndarray
    pod_count: np.ndarray
    pod_units: np.ndarray
    """Per pending pod group (a role's minimum pods), the units each pod asks (rounded up)."""
    pod_req: np.ndarray
    pod_mask: np.ndarray
    masks: list[np.ndarray]
    """Eligibility sets: each pending role's mask, then their union."""
    subset: np.ndarray
    """``subset[m, s]``: mask ``m`` lies within set ``s``."""
    free: np.ndarray
    """Per node and resource: capacity less pods that stay whatever the plan does."""
    pod_node: np.ndarray
    pod_prio: np.ndarray
    pod_use: np.ndarray
    """Per candidate pod, its request (all resources)."""
    pod_share: np.ndarray
    """Per candidate pod, its share of its gang's tier value (0 for elastic gangs)."""
    pod_gang_index: np.ndarray
    """Per candidate pod group, its running gang's index."""
    pod_pods: np.ndarray
    """Per candidate pod group (one gang's pods of one role on one node), its pods."""
    pod_evict: np.ndarray
    """Per candidate pod group, the least secondary cost (objective units) one of its pods
    costs when it leaves: its gang's eviction cost over its pods, and for an elastic gang no
    more than the cost of shedding one pod (:meth:`~gangopt.objective.ObjectiveTerms.pod_removal_cost`)."""
    pod_elastic: np.ndarray
    """Per candidate pod group, whether its gang is elastic (its pods may leave one by one)."""
    pod_surplus: np.ndarray
    """Per candidate pod group, the growth value (objective units) each of its pods holds in
    the cheap growth bound's items: its gang's members above its role minimum at their growth
    value, shared over its pods (one role, not a grower: :func:`gangopt.bounds.growth_items`
    counts exactly those members; 0 otherwise). A pod that leaves takes at least that much
    out of the secondary terms, the whole gang's pods exactly its items' value."""
    pod_spare_value: np.ndarray
    """Per candidate pod group, 1 when its gang is elastic and in :attr:`spare`, 2 when it is
    in :attr:`whole`, else 0 (its units at their share of its gang's value)."""
    whole: dict[int, float]
    """Per rigid candidate with pods on two or more nodes, its tier value: a variable of its
    own says how much of it is evicted, and each class's bucket of its units holds at most
    that share of them. A 32-node gang then pays its whole value for the one node a whole-node
    pod needs, as in the per-node model (at its share per unit, one pod of it cost 1/32)."""
    spare: dict[int, tuple[float, float]]
    """Per elastic candidate, ``(nu, spare)``: it may shed pods of up to ``spare`` units (its
    largest pods above its minimum) and stay, and an eviction of ``a`` units costs it at least
    ``nu (a - spare)``, ``nu`` its tier value over its units past the spare ones (so evicting
    all of them costs at most its value)."""
    fixed_value: dict[int, int]
    """Per priority, the tier value of running gangs that are not candidates, plus every
    candidate's (what the tier has when no candidate loses a pod)."""
    required: dict[int, tuple[np.ndarray, list[int]]]
    """Per pending gang with a required topology level: each node's domain at that level, and
    the domains the gang may use."""
    required_level: dict[int, str]
    """Per pending gang with a required topology level, that level."""
    pending_index: dict[int, int]
    """Per pending gang the prefilter kept (its index in the round), its index here."""
    role_mask: dict[tuple[int, str], int]
    """Per pending gang (index here) and role name, the role's eligibility set."""
    exact_minimum: np.ndarray
    """Per pending gang, whether its minimum is its roles' minimums (no pods beyond them that
    any role may supply): its members above them are then exactly its growth."""
    cache: dict[object, object]
    """Rooms, fitting domains and domain rows, computed once per round (the LPs of every tier
    and plan share them)."""

    def room(self, priority: int) -> np.ndarray:
        """Per node and resource, the most a new pod of ``priority`` can have: capacity less
        pods that stay less candidates of ``priority`` or higher."""
        key = ("room", priority)
        if key not in self.cache:
            cand = self.pod_prio >= priority
            room = self.free.copy()
            np.subtract.at(room, self.pod_node[cand], self.pod_use[cand])
            self.cache[key] = np.maximum(room, 0)
        return self.cache[key]  # type: ignore[return-value]

    def fitting_domains(self) -> dict[int, list[int]]:
        """Per pending gang with a required level, the allowed domains where its minimum fits
        alone in the room of its own priority (every lower candidate gone)."""
        if "domains" not in self.cache:
            out: dict[int, list[int]] = {}
            for g, (codes, allowed) in self.required.items():
                room = self.room(int(self.prio[g]))
                ok = np.zeros(int(codes.max()) + 1, dtype=bool)
                ok[allowed] = True
                for p in self.pods_of(g).tolist():
                    fit = arrays.fit_counts(room, self.pod_req[p], cap=int(self.pod_count[p]))
                    fit = np.where(self.masks[int(self.pod_mask[p])], fit, 0)
                    ok &= np.bincount(codes, weights=fit, minlength=len(ok)) >= self.pod_count[p]
                out[g] = np.flatnonzero(ok).tolist()
            self.cache["domains"] = out
        return self.cache["domains"]  # type: ignore[return-value]

    def pods_of(self, g: int) -> np.ndarray:
        """Pending gang ``g``'s pod groups (indices), found once per round: XL's 2,012 domain
        rows asked for them again, a pass over every pod group each (h32-XLbound)."""
        found = self.cache.get("pods-of")
        if not isinstance(found, dict):
            order = np.argsort(self.pod_gang, kind="stable")
            cuts = np.searchsorted(self.pod_gang[order], np.arange(len(self.prio) + 1))
            found = {q: order[cuts[q] : cuts[q + 1]] for q in range(len(self.prio))}
            self.cache["pods-of"] = found
        return found[g]

    def domain_rows(
        self, level_name: str, d: int, priority: int, gangs: list[int]
    ) -> list[tuple[int, np.ndarray, float]]:
        """Per pod size ``t`` (units) of ``gangs`` (required at ``level_name``), what each
        gang's minimum takes of domain ``d``'s ``t``-slots, and those slots in the room of
        ``priority``."""
        codes = self.required[gangs[0]][0]
        key = ("domain", level_name, d, priority)
        if key not in self.cache:
            self.cache[key] = self.room(priority)[codes == d, self.k] // self.unit
        room_units: np.ndarray = self.cache[key]  # type: ignore[assignment]
        pods = [self.pods_of(g) for g in gangs]
        sizes = np.unique(np.concatenate([self.pod_units[ps] for ps in pods]))
        out = []
        for t in sizes[sizes > 0].tolist():
            usage = np.asarray([(self.pod_count[ps] * (self.pod_units[ps] // t)).sum() for ps in pods], dtype=float)
            out.append((t, usage, float((room_units // t).sum())))
        return out


def class_tier_bounds(
    pre: Prefiltered, values: dict[int, int], known: dict[int, int], enough: float | None = None
) -> dict[int, int]:
    """Per priority with kept pending gangs, a bound on the lexicographic optimum's value of
    that tier (objective units), never above ``known``; the arguments as
    :func:`gangopt.slots.slot_tier_bounds` takes them (``values``: a valid plan's tiers, whose
    proven ones floor the tiers below; ``enough``: stop below the first tier not within it)."""
    key = ("slot-classes", tuple(sorted(values.items())), tuple(sorted(known.items())), enough)
    return dict(pre.kept(key, lambda: _bounds(pre, values, known, enough)))


def open_solution(pre: Prefiltered, values: dict[int, int]) -> ClassSolution | None:
    """The class LP's solution for the first tier a plan of tier ``values`` (objective units)
    leaves open, once :func:`class_tier_bounds` has bounded that plan (the slot placer's choice
    there: :mod:`gangopt.class_choice`); None when it did not, or proved every tier."""
    found = _asked(pre, "open", values)
    if found is None:
        return None
    pool, opened = found
    solution = pool.cache.get(("solution", *opened))
    return solution if isinstance(solution, ClassSolution) else None


def _asked(pre: Prefiltered, kind: str, values: dict[int, int]) -> tuple[_Pool, tuple[int, Floors]] | None:
    """The round's pool and the (tier, floors) of the class LP that :func:`class_tier_bounds`
    solved for a plan of tier ``values``: ``kind`` "open", the first tier it leaves open;
    "lowest", its lowest tier. None when there is no such LP."""
    pool = pre.derived.get(POOL_KEY)
    if not isinstance(pool, _Pool):
        return None
    asked = pool.cache.get((kind, tuple(sorted(values.items()))))
    return (pool, asked) if isinstance(asked, tuple) else None


def _bounds(pre: Prefiltered, values: dict[int, int], known: dict[int, int], enough: float | None) -> dict[int, int]:
    pool = pre.kept(POOL_KEY, lambda: _pool(pre))
    if pool is None:
        return {}

    plan = tuple(sorted(values.items()))
    lowest = int(pool.prio.min())

    def tier_bound(prio: int, floors: Floors, chain: bool, value: int) -> int | None:
        key = ("lp", prio, floors)  # plans (and callers' ``enough``) that agree above share it
        if key not in pool.cache:
            pool.cache[key] = _tier_bound(pool, prio, list(floors))
        lp = pool.cache[key]
        assert lp is None or isinstance(lp, int)
        if prio == lowest:
            pool.cache[("lowest", plan)] = (prio, floors)  # :func:`eviction_floor`'s premise
        if chain and lp is not None and lp > value and ("open", plan) not in pool.cache:
            pool.cache[("open", plan)] = (prio, floors)  # the first tier the plan leaves open
        return lp

    return chained_tier_bounds({int(p) for p in pool.prio}, values, known, enough, tier_bound)


def _pool(pre: Prefiltered) -> _Pool | None:
    """Pending pods and node rooms; None when no pending pod asks for the binding resource."""
    rnd = pre.rnd
    terms = ObjectiveTerms.of(rnd)
    resources = pre.resources
    if not resources or not pre.pending:
        return None
    k = 0  # gpu first when the round names it (:func:`gangopt.prefilter.resource_names`)
    elig = arrays.per_cluster(rnd.cluster, "eligibility", lambda: arrays.Eligibility(rnd))
    masks: list[np.ndarray] = []
    mask_ids: dict[bytes, int] = {}
    gangs: list[tuple[int, int]] = []
    pods: list[tuple[int, int, np.ndarray, int]] = []  # gang, count, request, mask
    required: dict[int, tuple[np.ndarray, list[int]]] = {}
    required_level: dict[int, str] = {}
    pending_index: dict[int, int] = {}
    role_mask: dict[tuple[int, str], int] = {}
    exact_minimum: list[bool] = []
    for gi in pre.pending:
        gang = rnd.pending[gi]
        g = len(gangs)
        gangs.append((gang.priority, terms.tier_value(gang)))
        level = gang.topology.required if gang.topology is not None else None
        if level is not None:
            codes, names = pre.topo.codes(level)
            wanted = set(pre.required_domains.get(gi, names))
            required[g] = (codes, [d for d, name in enumerate(names) if name in wanted])
            required_level[g] = level
        growing: list[tuple[np.ndarray, np.ndarray]] = []
        pending_index[gi] = g
        for role in gang.roles:
            request, mask = request_vector(role, resources), elig.mask(role)
            count = gang.role_minimum(role)
            key = np.packbits(mask).tobytes()
            if key not in mask_ids:
                mask_ids[key] = len(masks)
                masks.append(np.asarray(mask, dtype=bool))
            role_mask[(g, role.name)] = mask_ids[key]
            if count:
                pods.append((g, count, request, mask_ids[key]))
            if role.replicas > count:
                growing.append((request, mask))
        extra = gang.minimum - sum(gang.role_minimum(r) for r in gang.roles)
        exact_minimum.append(extra <= 0)
        if extra > 0 and growing:
            # Pods beyond the role minimums may be of any role with room to grow: the least
            # each could ask, in the union of their masks (as :mod:`gangopt.slots` counts them).
            union = np.logical_or.reduce([m for _, m in growing])
            key = np.packbits(union).tobytes()
            if key not in mask_ids:
                mask_ids[key] = len(masks)
                masks.append(union)
            pods.append((g, extra, np.min(np.stack([r for r, _ in growing]), axis=0), mask_ids[key]))
    if not pods:
        return None
    req = np.stack([p[2] for p in pods]).astype(np.int64)
    sizes = req[:, k]
    if not (sizes > 0).any():
        return None
    unit = reduce(math.gcd, np.unique(sizes[sizes > 0]).tolist())
    mask_count = len(masks)
    sets = list(masks)
    if mask_count > 1:
        sets.append(np.logical_or.reduce(masks))
    subset = np.array([[not (m & ~s).any() for s in sets] for m in masks], dtype=bool)
    # Node rooms: capacity less the pods that stay (the prefilter's classes know them), and
    # every candidate pod on its node.
    n = len(rnd.cluster.nodes)
    capacity = arrays.cluster_capacity(rnd, resources).astype(np.int64)
    free = capacity.copy()
    node_rows: list[int] = []
    cand_pods: list[tuple[int, str, int]] = []  # gang, role, count per node
    for cls in pre.classes:
        for node in cls.nodes:
            free[node] = cls.free
            for (gi, role_name), count in cls.candidates.items():
                node_rows.append(node)
                cand_pods.append((gi, role_name, count))
    # Nodes the prefilter dropped: no kept pending role may use them (left with no room here).
    seen = np.zeros(n, dtype=bool)
    for cls in pre.classes:
        seen[cls.nodes] = True
    free[~seen] = 0
    running = rnd.running
    # Every candidate role's request, in one matrix (one row per distinct request).
    row_of: dict[tuple[int, str], int] = {}
    requests: list[dict[str, int]] = []
    for gi in dict.fromkeys(gi for gi, _, _ in cand_pods):
        for role in running[gi].roles:
            row_of[(gi, role.name)] = len(requests)
            requests.append(role.requests)
    table = arrays.request_matrix(requests, resources) if requests else np.zeros((0, len(resources)), np.int64)
    rows = np.fromiter((row_of[(gi, name)] for gi, name, _ in cand_pods), dtype=np.intp, count=len(cand_pods))
    pods_in = np.fromiter((c for _, _, c in cand_pods), dtype=np.int64, count=len(cand_pods))
    use = table[rows].astype(np.int64) * pods_in[:, None]
    cand_gang = np.fromiter((gi for gi, _, _ in cand_pods), dtype=np.int64, count=len(cand_pods))
    pod_node = np.asarray(node_rows, dtype=np.int64)
    # Each rigid candidate's tier value shared over its units of the binding resource in the
    # model (pods on dropped nodes keep theirs: never evicted here); elastic ones at 0.
    units = -(-(use[:, k] // np.maximum(pods_in, 1)) // unit) * pods_in  # each pod rounded up
    gang_units = np.bincount(cand_gang, weights=units, minlength=len(running)) if len(cand_gang) else np.zeros(0)
    # Every running gang's tier value as the plans' scores count it, computed once per round
    # (a pass of ``terms.tier_value`` over XL's 68,536 running gangs was 1.07 of the pool's
    # 1.82 cProfiled seconds; h32-XLbound).
    base = terms.running_base
    worth = base.tier
    fixed_value = dict(base.tier_sums)
    value = np.asarray(worth, dtype=float)[cand_gang] if len(cand_gang) else np.zeros(0)
    # Per candidate gang (not per pod group) its flags, then spread over its groups.
    gangs_in = np.unique(cand_gang)
    gang_elastic = np.zeros(len(running), dtype=bool)
    gang_prio = np.zeros(len(running), dtype=np.int64)
    for gi in gangs_in.tolist():
        run = running[gi]
        gang_elastic[gi] = run.elastic
        gang_prio[gi] = run.priority
    elastic = gang_elastic[cand_gang]
    share = np.where(
        elastic | (units == 0), 0.0, value * units / np.maximum(gang_units[cand_gang] if len(cand_gang) else 1, 1)
    )
    prio = gang_prio[cand_gang]
    spare: dict[int, tuple[float, float]] = {}
    flex = np.flatnonzero(elastic)
    for gi in np.unique(cand_gang[flex]).tolist():
        run = running[gi]
        mine = flex[cand_gang[flex] == gi]
        # Units per pod (groups hold ``count`` pods of one role on one node).
        per_pod = np.repeat(units[mine] // np.maximum(pods_in[mine], 1), pods_in[mine])
        shed = max(0, len(run.pods) - run.minimum)
        spare_units = float(np.sort(per_pod)[::-1][:shed].sum())
        total = float(per_pod.sum())
        if total > spare_units:
            spare[gi] = (worth[gi] / (total - spare_units), spare_units)
    spare_value = np.isin(cand_gang, np.fromiter(spare, dtype=np.int64, count=len(spare))).astype(float)
    gang_evict = np.zeros(len(running), dtype=float)
    for gi in gangs_in.tolist():
        run = running[gi]
        per = terms.eviction_cost(run) / max(1, len(run.pods))
        gang_evict[gi] = min(per, float(terms.pod_removal_cost(run))) if gang_elastic[gi] else per
    evict = gang_evict[cand_gang]
    gang_surplus = np.zeros(len(running), dtype=float)
    growers = set(pre.growers)
    for gi in gangs_in.tolist():
        run = running[gi]
        if gi in growers or len(run.roles) != 1 or not run.pods:
            continue
        role = run.roles[0]
        extra = len(run.pods) - run.role_minimum(role)
        if extra > 0 and all(p.role == role.name for p in run.pods):
            gang_surplus[gi] = max(0, terms.growth_value(role)) * extra / len(run.pods)
    # Rigid candidates with pods on two or more nodes: evicted whole or kept whole.
    groups_of = np.bincount(cand_gang, minlength=len(running)) if len(cand_gang) else np.zeros(0, np.int64)
    whole_gangs = np.flatnonzero((groups_of >= 2) & (gang_units > 0))
    whole_gangs = whole_gangs[~gang_elastic[whole_gangs]]
    whole = {int(gi): float(worth[gi]) for gi in whole_gangs.tolist()}
    spare_value[np.isin(cand_gang, whole_gangs)] = 2.0
    return _Pool(
        unit=unit,
        k=k,
        prio=np.asarray([p for p, _ in gangs], dtype=np.int64),
        value=np.asarray([v for _, v in gangs], dtype=np.int64),
        pod_gang=np.asarray([p[0] for p in pods], dtype=np.int64),
        pod_count=np.asarray([p[1] for p in pods], dtype=np.int64),
        pod_units=-(-sizes // unit),
        pod_req=req,
        pod_mask=np.asarray([p[3] for p in pods], dtype=np.int64),
        masks=sets,
        subset=subset,
        free=free,
        pod_node=pod_node,
        pod_prio=prio,
        pod_use=use,
        pod_share=share,
        pod_gang_index=cand_gang,
        pod_pods=pods_in,
        pod_evict=evict,
        pod_elastic=elastic,
        pod_surplus=gang_surplus[cand_gang],
        pod_spare_value=spare_value,
        spare=spare,
        whole=whole,
        fixed_value=fixed_value,
        required=required,
        required_level=required_level,
        pending_index=pending_index,
        role_mask=role_mask,
        exact_minimum=np.asarray(exact_minimum, dtype=bool),
        cache={},
    )


def _tier_bound(pool: _Pool, prio: int, floors: list[tuple[int, int]]) -> int | None:
    """The class LP's bound on tier ``prio`` given the ``floors`` of the tiers above."""
    from ortools.linear_solver import linear_solver_pb2, pywraplp

    built = _tier_model(pool, prio, floors)
    if built is None:
        return None
    if prio == int(pool.prio.min()):
        pool.cache[("model", prio, tuple(floors))] = built  # :func:`eviction_floor` reads it again
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver.LoadModelFromProto(built.model) or solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    relaxed = float(solver.Objective().Value())
    bound = pool.fixed_value.get(prio, 0) + math.floor(relaxed + 1e-6 * abs(relaxed) + LP_MARGIN)
    response = linear_solver_pb2.MPSolutionResponse()
    solver.FillSolutionResponseProto(response)
    x = np.asarray(response.variable_value, dtype=float)
    gang_var = built.gang_var
    pool.cache[("solution", prio, tuple(floors))] = ClassSolution(
        priority=prio,
        levels=built.levels,
        bound=bound,
        started=np.where(gang_var >= 0, x[np.maximum(gang_var, 0)], 0.0),
        domains={g: (pool.required_level[g], d[int(np.argmax(x[cols]))]) for g, (cols, d) in built.domain_of.items()},
    )
    return bound


def eviction_floor(pre: Prefiltered, values: dict[int, int]) -> int:
    """A lower bound (objective units, at least 0) on the secondary cost of the preemptions of
    every plan lexicographically at least as good as one of tier ``values`` (objective units),
    once :func:`class_tier_bounds` has bounded that plan's lowest tier: 0 otherwise.

    The secondary terms' cheap bound (:func:`gangopt.bounds.cheap_bounds`) counts growth and
    leaves the preemptions' cost out (0: any plan might evict nothing). But such a plan keeps
    the tiers above, down to the first one it leaves open, at least at its values (the floors
    of the lowest tier's LP), and on a fragmented round that takes evictions: the same LP,
    its objective now the least cost of the units its node states evict (a node in state ``e``
    pays at least its own cheapest pods summing to ``e_i`` units per band, at their gangs'
    eviction cost per pod: a rigid gang's pods on one node together, an elastic one's pod by
    pod at no more than shedding one costs), bounds that cost from below. Measured on issue
    13's XL round (docs/benchmarks.md, "h30-XLgap")."""
    found = _asked(pre, "lowest", values)
    if found is None:
        return 0
    pool, asked = found
    key = ("evict", *asked)
    if key not in pool.cache:
        pool.cache[key] = _eviction_floor(pool, *asked)
    floor = pool.cache[key]
    assert isinstance(floor, int)
    return floor


EVICTION_SEGMENTS = 1024
"""Segments per node state of a class in :func:`eviction_floor`'s and
:func:`class_secondary_bound`'s LPs: the state's nodes pay at least the cheapest of the class's
own costs for it, sorted, in up to this many steps (each at its segment's least; neighbours at
the same least one step). With the class's least cost alone (one segment) the floor at XL was
734.4 GPU-eq; with 4, 8, 16 and 32: 2,167.0, 2,499.8, 2,633.8 and 2,714.2, in 0.58, 0.65, 0.78
and 0.96 CPU-s (GLOP 0.44-0.69; load 7.6). The secondary bound of greedy's XL plan (-3,320.5)
with 8, 16, 32, 64, 256 and every node a step: 296.5, 130.5, 52.5, 11.3, -13.9 and -15.3 GPU-eq,
its LP 0.65 -> 0.91 CPU-s (load 1.9), the reported gap 3.68 % -> 3.61 % (docs/benchmarks.md,
"h36-xlsec"); at L busy 0.6 no dearer in :func:`gangopt.annotate.cheap_bounds_for`."""


def _eviction_floor(pool: _Pool, prio: int, floors: Floors) -> int:
    """:func:`eviction_floor` for the LP of tier ``prio`` under ``floors``.

    Each node's cost of each state is its own cheapest pods (per band, summed over the bands);
    ``z[k, e]`` nodes of class ``k`` in state ``e`` pay at least the ``z[k, e]`` cheapest of
    the class's nodes' costs for ``e`` (a plan's nodes in that state are some of them), as a
    convex piecewise cost of :data:`EVICTION_SEGMENTS` steps, each at its least."""
    from ortools.linear_solver import linear_solver_pb2, pywraplp

    built = pool.cache.get(("model", prio, floors))
    if not isinstance(built, _Model):
        return 0
    model = linear_solver_pb2.MPModelProto()
    model.CopyFrom(built.model)
    for var in model.variable:
        var.objective_coefficient = 0.0
    tables = _eviction_tables(pool, built)
    if not tables:
        return 0
    for v, cost in zip(*_state_costs(model, built, tables, EVICTION_SEGMENTS), strict=True):
        model.variable[v].objective_coefficient = -cost
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver.LoadModelFromProto(model) or solver.Solve() != pywraplp.Solver.OPTIMAL:
        return 0
    least_cost = -float(solver.Objective().Value())
    return max(0, math.floor(least_cost - 1e-6 * abs(least_cost) - LP_MARGIN))


def _eviction_tables(pool: _Pool, built: _Model, surplus: bool = False) -> list[tuple[int, np.ndarray]]:
    """Per band whose evictions are priced: (band, per node and units, the least eviction
    cost of the node's own pods summing to that many units), as :func:`eviction_floor` and
    :func:`class_secondary_bound` charge them; with ``surplus`` each pod also at the growth
    value it takes out of the cheap bound's items (:attr:`_Pool.pod_surplus`)."""
    tables: list[tuple[int, np.ndarray]] = []
    for i, picked in enumerate(built.band_pods):
        width = int(built.ze[:, i].max(initial=0)) + 1
        if width <= 1 or width > NODE_LOSS_WIDTH or not picked.any():
            continue  # no cost counted for the band: looser, still a bound
        g = np.flatnonzero(picked)
        cost = pool.pod_evict[g] + (pool.pod_surplus[g] if surplus else 0.0)
        per = np.floor(cost * 1000.0) / 1000.0  # never above the real cost
        rigid = ~pool.pod_elastic[g]
        tables.append((i, _node_table(pool, g, per * pool.pod_pods[g], rigid, per, built.units, built.per_pod, width)))
    return tables


def class_secondary_bound(pre: Prefiltered, values: dict[int, int], cheap: int) -> int:
    """A bound (objective units) on the secondary terms of every plan lexicographically at least
    as good as one of tier ``values``, given ``cheap``, the cheap bound on them
    (:func:`gangopt.bounds.cheap_bounds`: every member any plan may add, growth at its most,
    and no preemption cost), once :func:`class_tier_bounds` has bounded that plan's lowest
    tier: ``cheap`` otherwise.

    Growth and preemptions in one LP (:func:`_secondary_ceiling`): the lowest tier's class LP,
    its objective the growth of the pending gangs it starts (members above their roles'
    minimums, in the slots beside every gang's minimum) less the eviction cost of its node
    states (:func:`eviction_floor`'s); the other members (running gangs', gangs of tiers the LP
    leaves out) at their most. A gang the LP cannot start cannot grow either, where the cheap
    bound let every pending gang grow in the room that all candidates' evictions free. When
    the cheap growth bound is below every member at its most (its own LP binds), the cheap
    bound less :func:`eviction_floor` is kept too (the least of both)."""
    found_lp = _asked(pre, "lowest", values)
    if found_lp is None:
        return cheap
    pool, asked = found_lp
    key = ("ceiling", *asked)
    if key not in pool.cache:
        pool.cache[key] = _secondary_ceiling(pre, pool, *asked)
    found = pool.cache[key]
    assert isinstance(found, tuple)
    ceiling: int | None = found[0]
    most: int = found[1]
    if ceiling is None or cheap < most:
        return min(cheap - eviction_floor(pre, values), cheap if ceiling is None else ceiling)
    return min(cheap, ceiling)


def _secondary_ceiling(pre: Prefiltered, pool: _Pool, prio: int, floors: Floors) -> tuple[int | None, int]:
    """(:func:`class_secondary_bound`'s LP bound, None when it has none; the secondary terms'
    most with every member added and nothing evicted: the cheap bound's when its LP does not
    bind)."""
    from ortools.linear_solver import linear_solver_pb2, pywraplp

    items = growth_items(pre)
    most = items.constant + ObjectiveTerms.of(pre.rnd).guarantee_ceiling
    most += sum(c * v for c, v in zip(items.count, items.value, strict=True))
    built = pool.cache.get(("model", prio, floors))
    if not isinstance(built, _Model):
        return None, most
    model = linear_solver_pb2.MPModelProto()
    model.CopyFrom(built.model)
    for var in model.variable:
        var.objective_coefficient = 0.0
    constant = items.constant + ObjectiveTerms.of(pre.rnd).guarantee_ceiling
    placed: list[tuple[int, int, int, np.ndarray, int, int]] = []  # gang, count, units, request, mask, column
    for count, value, request, (gi, role) in zip(items.count, items.value, items.requests, items.owner, strict=True):
        g = pool.pending_index.get(gi, -1)
        if g < 0 or not pool.exact_minimum[g] or built.gang_var[g] < 0:
            constant += count * value  # at its most
            continue
        column = len(model.variable)
        model.variable.add(lower_bound=0.0, upper_bound=float(count), objective_coefficient=float(value))
        model.constraint.add(
            var_index=[column, int(built.gang_var[g])],
            coefficient=[1.0, -float(count)],
            lower_bound=-math.inf,
            upper_bound=0.0,
        )  # a gang grows only when it starts
        placed.append((g, count, int(request[pool.k]) // pool.unit, request, pool.role_mask[(g, role)], column))
    # The capacity rows again, the growth beside the minimums (the old ones left free).
    for r in range(*built.capacity):
        model.constraint[r].upper_bound = math.inf
    growth = _Growth(
        gang=np.asarray([p[0] for p in placed], dtype=np.int64),
        count=np.asarray([p[1] for p in placed], dtype=np.int64),
        units=np.asarray([p[2] for p in placed], dtype=np.int64),
        req=np.asarray([p[3] for p in placed], dtype=np.int64).reshape(len(placed), pool.free.shape[1]),
        mask=np.asarray([p[4] for p in placed], dtype=np.int64),
        var=np.asarray([p[5] for p in placed], dtype=np.int64),
    )
    _capacity_rows(model, pool, built, growth)
    tables = _eviction_tables(pool, built, surplus=True)
    if tables:
        for v, cost in zip(*_state_costs(model, built, tables, EVICTION_SEGMENTS), strict=True):
            model.variable[v].objective_coefficient -= cost
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver.LoadModelFromProto(model) or solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None, most
    best = float(solver.Objective().Value())
    return constant + math.ceil(best + 1e-6 * abs(best) + LP_MARGIN), most


def _state_costs(
    model: linear_solver_pb2.MPModelProto,
    built: _Model,
    tables: list[tuple[int, np.ndarray]],
    segments: int,
) -> tuple[list[int], list[float]]:
    """What the nodes in each node state pay at least, as terms (variable, cost) of ``model``.

    A node's cost of a state is the sum over ``tables`` (band, per node and units) at the
    state's units per band; ``z[k, e]`` nodes of class ``k`` in state ``e`` are some of the
    class's nodes, so they pay at least the ``z[k, e]`` cheapest of the class's own costs for
    ``e``: a convex piecewise cost of up to ``segments`` steps, each at its segment's least
    (one step: the class's least cost, on ``z`` itself). Adds the steps' variables and rows,
    fixes at 0 the states no node of the class can reach, and leaves out terms of cost 0."""
    out_vars: list[int] = []
    out_costs: list[float] = []
    by_class = np.argsort(built.class_of, kind="stable")
    node_start = np.searchsorted(built.class_of[by_class], np.arange(built.classes + 1))
    z_start = np.searchsorted(built.zc, np.arange(built.classes + 1))
    for q in range(built.classes):
        nodes = by_class[node_start[q] : node_start[q + 1]]
        states = np.arange(z_start[q], z_start[q + 1])
        if not len(nodes) or not len(states):
            continue
        cost = np.zeros((len(nodes), len(states)))
        for i, table in tables:
            cost += table[nodes[:, None], built.ze[states, i][None, :]]
        cost.sort(axis=0)  # per state, the class's nodes cheapest first (inf: cannot)
        cuts = np.unique(np.linspace(0, len(nodes), min(segments, len(nodes)) + 1).astype(np.int64))
        for j, state in enumerate(states.tolist()):
            z = int(built.zvar[state])
            least = cost[cuts[:-1], j]
            if not np.isfinite(least[0]):
                model.variable[z].upper_bound = 0.0  # no node of the class can lose that
                continue
            if len(cuts) == 2 or least[-1] == least[0]:
                if least[0] > 0:
                    out_vars.append(z)
                    out_costs.append(float(least[0]))
                continue
            # Neighbouring segments at the same least are one step (the same LP, fewer columns).
            keep = arrays.run_starts(least)
            starts = cuts[:-1][keep]
            row = model.constraint.add(lower_bound=0.0, upper_bound=0.0)
            row.var_index.append(z)
            row.coefficient.append(1.0)
            ends = [*starts[1:].tolist(), int(cuts[-1])]
            for c, lo, hi in zip(least[keep].tolist(), starts.tolist(), ends, strict=True):
                if not math.isfinite(c):
                    break  # the nodes past here cannot be in this state
                row.var_index.append(len(model.variable))
                row.coefficient.append(-1.0)
                model.variable.add(lower_bound=0.0, upper_bound=float(hi - lo))
                if c > 0:
                    out_vars.append(len(model.variable) - 1)
                    out_costs.append(float(c))
    return out_vars, out_costs


@dataclass
class _Model:
    """One tier's class LP (:func:`_tier_model`) and what its solutions are read by."""

    model: linear_solver_pb2.MPModelProto
    levels: tuple[int, ...]
    gang_var: np.ndarray
    domain_of: dict[int, tuple[list[int], list[int]]]
    zvar: np.ndarray
    """The node-state variables: class :attr:`zc`, units evicted per band :attr:`ze`."""
    zc: np.ndarray
    ze: np.ndarray
    band_pods: list[np.ndarray]
    """Per band, the candidate pod groups its states evict (a mask over the pool's groups)."""
    units: np.ndarray
    per_pod: np.ndarray
    class_of: np.ndarray
    classes: int
    room_of: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    """Per state and level ``j``, the units a pod of ``L_j`` may use: ``f + sum_{i<j} e_i``."""
    class_in: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    member: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    capacity: tuple[int, int] = (0, 0)
    """The capacity rows' range (:func:`_capacity_rows`)."""


def _tier_model(pool: _Pool, prio: int, floors: list[tuple[int, int]]) -> _Model | None:
    """The class LP of tier ``prio`` given the ``floors`` of the tiers above (its objective:
    the tier's value); None when its states would be too many (:data:`MAX_STATES`)."""
    from ortools.linear_solver import linear_solver_pb2

    floor_of = dict(floors)
    levels = sorted({prio, *floor_of})
    top = levels[-1]
    bands = len(levels) - 1
    k, unit = pool.k, pool.unit
    n = pool.free.shape[0]
    # Per node: f (units free whatever the plan: capacity less pods that stay less candidates
    # of priority >= prio) and c_i (units of band i's candidates); candidates below ``prio``
    # are room, those of the top tier or above stay.
    cand = pool.pod_prio >= prio
    stay = pool.pod_prio >= top
    room = pool.free.copy()
    np.subtract.at(room, pool.pod_node[cand], pool.pod_use[cand])
    f = np.maximum(room[:, k], 0) // unit
    band_of = np.searchsorted(np.asarray(levels), pool.pod_prio, side="right") - 1
    movable = cand & ~stay
    per_pod = -(-(pool.pod_use[:, k] // np.maximum(pool.pod_pods, 1)) // unit)
    units = per_pod * pool.pod_pods
    # Per band and pod size (units), the pods each node holds: a node's state evicts a sum of
    # its own pods' sizes (half of one 4-GPU pod frees nothing).
    shapes: list[tuple[int, int]] = []
    columns: list[np.ndarray] = []
    for i in range(bands):
        picked = movable & (band_of == i) & (per_pod > 0)
        for size in np.unique(per_pod[picked]).tolist():
            which = picked & (per_pod == size)
            column = np.zeros(n, dtype=np.int64)
            np.add.at(column, pool.pod_node[which], pool.pod_pods[which])
            shapes.append((i, int(size)))
            columns.append(column)
    member = np.stack(pool.masks, axis=1)  # node x set
    nm = len(pool.subset)
    # What a state may evict per band is a sum of the node's own pods: as a bit set of the
    # reachable sums (bit x: x units) when they stay below 63 units, nodes with the same sets
    # are one class whatever pods give them (pooling their pods only loosens the cheapest-first
    # loss); else by the pods' sizes.
    reach = np.ones((n, bands), dtype=np.int64)
    for (i, size), column in zip(shapes, columns, strict=True):
        for j in range(1, int(column.max(initial=0)) + 1):
            more = column >= j
            reach[more, i] |= reach[more, i] << size
    total_units = np.zeros((n, bands), dtype=np.int64)
    for (i, size), column in zip(shapes, columns, strict=True):
        total_units[:, i] += size * column
    bits = bool(bands) and int(total_units.max(initial=0)) < 63
    held_key = [reach] if bits else [col[:, None] for col in columns]
    key = np.concatenate([member[:, :nm].astype(np.int64), f[:, None], *held_key], axis=1)
    classes, first, class_of, count = np.unique(key, axis=0, return_index=True, return_inverse=True, return_counts=True)
    class_of = class_of.reshape(-1)
    class_in = member[first]  # class x set
    f_of = classes[:, nm]
    held = classes[:, nm + 1 :]
    reachable: list[list[list[int]]] = []  # per class and band, the units a node can lose
    total = 0
    for q in range(len(classes)):
        if bits:
            sums = [[x for x in range(63) if (b >> x) & 1] for b in held[q].tolist()]
        else:
            found: list[set[int]] = [{0} for _ in range(bands)]
            for (i, size), pods in zip(shapes, held[q].tolist(), strict=True):
                for _ in range(pods):
                    found[i] = found[i] | {x + size for x in found[i]}
            sums = [sorted(x) for x in found]
        reachable.append(sums)
        total += math.prod(len(x) for x in sums)
        if total > MAX_STATES:
            return None
    model = linear_solver_pb2.MPModelProto()
    model.maximize = True
    # Pending gangs of the LP's tiers: y in [0, 1].
    gang_on = np.isin(pool.prio, levels) & (pool.prio >= prio)
    gang_var = np.full(len(pool.prio), -1, dtype=np.int64)
    for g in np.flatnonzero(gang_on).tolist():
        gang_var[g] = len(model.variable)
        coeff = float(pool.value[g]) if pool.prio[g] == prio else 0.0
        model.variable.add(lower_bound=0.0, upper_bound=1.0, objective_coefficient=coeff)
    # A gang with a required level starts in one domain where its minimum fits alone (every
    # lower candidate gone): a column per such domain, and per domain, level and size the
    # required gangs' pods within its room (they alone: the other pods are in the set rows).
    in_domain: dict[tuple[str, int], list[tuple[int, int]]] = {}  # (level, domain) -> (column, gang)
    domain_of: dict[int, tuple[list[int], list[int]]] = {}  # gang -> its domain columns, domains
    for g, domains in pool.fitting_domains().items():
        if gang_var[g] < 0:
            continue
        if not domains:
            model.variable[int(gang_var[g])].upper_bound = 0.0
            continue
        domain_cols = list(range(len(model.variable), len(model.variable) + len(domains)))
        for col_index, d in zip(domain_cols, domains, strict=True):
            model.variable.add(lower_bound=0.0, upper_bound=1.0)
            in_domain.setdefault((pool.required_level[g], d), []).append((col_index, g))
        domain_of[g] = (domain_cols, domains)
        model.constraint.add(
            var_index=[int(gang_var[g]), *domain_cols],
            coefficient=[1.0, *([-1.0] * len(domain_cols))],
            lower_bound=0.0,
            upper_bound=0.0,
        )
    for (level_name, d), members in sorted(in_domain.items()):
        for level in sorted({int(pool.prio[g]) for _, g in members}):
            under = [(v, g) for v, g in members if pool.prio[g] <= level]
            idx = np.asarray([v for v, _ in under], dtype=np.int64)
            for _t, usage, rhs in pool.domain_rows(level_name, d, level, [g for _, g in under]):
                _row(model, idx, usage, np.zeros(0, np.int64), np.zeros(0), rhs)
    # Node states per class.
    z_class: list[int] = []
    z_state: list[tuple[int, ...]] = []
    for q in range(len(classes)):
        for e in product(*reachable[q]):
            z_class.append(q)
            z_state.append(e)
    zc = np.asarray(z_class, dtype=np.int64)
    ze = np.asarray(z_state, dtype=np.int64).reshape(len(z_state), bands)
    z0 = len(model.variable)
    for q in zc.tolist():
        model.variable.add(lower_bound=0.0, upper_bound=float(count[q]))
    zvar = np.arange(z0, z0 + len(zc))
    z_start = np.searchsorted(zc, np.arange(len(classes) + 1))  # zc is ascending
    for q in range(len(classes)):
        idx = zvar[z_start[q] : z_start[q + 1]]
        model.constraint.add(
            var_index=idx.tolist(),
            coefficient=[1.0] * len(idx),
            lower_bound=float(count[q]),
            upper_bound=float(count[q]),
        )
    # Value lost per band's own tier, cheapest units first over each class's pool.
    loss: dict[int, tuple[list[int], list[float]]] = {lv: ([], []) for lv in levels}
    for i in range(bands):
        level = levels[i]
        counted = level == prio or level in floor_of
        in_band = movable & (band_of == i) & (units > 0)
        own = in_band & (pool.pod_prio == level)
        per_unit = np.zeros(len(units), dtype=float)
        per_unit[own] = pool.pod_share[own] / units[own]
        # Buckets: per class and per-unit value (rounded down to 1e-3: never above the real).
        vals = np.floor(per_unit * 1000.0) / 1000.0 if counted else np.zeros(len(units))
        # An elastic candidate of the tier keeps its value while it sheds at most its spare
        # pods: its units are a bucket per class and gang, and the gang loses
        # ``nu (evicted - spare)`` at least (:attr:`_Pool.spare`).
        flexible = own & (pool.pod_spare_value > 0) if counted else np.zeros(len(units), dtype=bool)
        vals[flexible] = 0.0  # their loss is their gang's (below)
        pc = class_of[pool.pod_node[in_band]]
        tag = np.where(flexible[in_band], pool.pod_gang_index[in_band], -1)
        bk = np.stack([pc, (vals[in_band] * 1000).astype(np.int64), tag], axis=1)
        buckets, where = np.unique(bk, axis=0, return_inverse=True)
        amount = np.bincount(where.reshape(-1), weights=units[in_band], minlength=len(buckets))
        w0 = len(model.variable)
        for (_q, v, _), a in zip(buckets.tolist(), amount.tolist(), strict=True):
            model.variable.add(lower_bound=0.0, upper_bound=float(a))
            if counted and v > 0:
                loss[level][0].append(len(model.variable) - 1)
                loss[level][1].append(v / 1000.0)
        wvar = np.arange(w0, len(model.variable))
        for gi in np.unique(buckets[:, 2][buckets[:, 2] >= 0]).tolist():
            if gi in pool.whole:
                evicted = len(model.variable)
                model.variable.add(lower_bound=0.0, upper_bound=1.0)
                loss[level][0].append(evicted)
                loss[level][1].append(pool.whole[gi])
                for b in np.flatnonzero(buckets[:, 2] == gi).tolist():
                    model.constraint.add(
                        var_index=[int(wvar[b]), evicted],
                        coefficient=[1.0, -float(amount[b])],
                        lower_bound=-math.inf,
                        upper_bound=0.0,
                    )
                continue
            nu, spare = pool.spare[gi]
            lam = len(model.variable)
            model.variable.add(lower_bound=0.0, upper_bound=math.inf)
            loss[level][0].append(lam)
            loss[level][1].append(1.0)
            mine = wvar[buckets[:, 2] == gi]
            model.constraint.add(
                var_index=[*mine.tolist(), lam],
                coefficient=[*([nu] * len(mine)), -1.0],
                lower_bound=-math.inf,
                upper_bound=nu * spare,
            )
        # Units evicted in band i over the class's nodes = sum of its buckets.
        w_start = np.searchsorted(buckets[:, 0], np.arange(len(classes) + 1))  # buckets sorted by class
        for q in range(len(classes)):
            zi = z_start[q] + np.flatnonzero(ze[z_start[q] : z_start[q + 1], i] > 0)
            wi = wvar[w_start[q] : w_start[q + 1]]
            if not len(zi) and not len(wi):
                continue
            model.constraint.add(
                var_index=[*zvar[zi].tolist(), *wi.tolist()],
                coefficient=[*ze[zi, i].astype(float).tolist(), *([-1.0] * len(wi))],
                lower_bound=0.0,
                upper_bound=0.0,
            )
    # Value lost per node, not only per class's pool: a node in state ``e`` loses at least the
    # cheapest of its own pods summing to ``e_i`` (a rigid gang's units on it at its share of
    # the gang's value, whole), and the ``z[k, e]`` nodes of a class in state ``e`` at least
    # the cheapest of the class's own such losses (:func:`_state_costs`, :func:`loss_segments`);
    # a state no node of its class can reach holds no node.
    built = _Model(
        model=model,
        levels=tuple(levels),
        gang_var=gang_var,
        domain_of=domain_of,
        zvar=zvar,
        zc=zc,
        ze=ze,
        band_pods=[movable & (band_of == i) & (units > 0) for i in range(bands)],
        units=units,
        per_pod=per_pod,
        class_of=class_of,
        classes=len(classes),
    )
    for i in range(bands):
        level = levels[i]
        if not (level == prio or level in floor_of):
            continue
        width = int(ze[:, i].max(initial=0)) + 1
        table = _node_losses(pool, built.band_pods[i], level, units, per_pod, width)
        if table is None:
            continue
        node_vars, node_costs = _state_costs(model, built, [(i, table)], loss_segments(len(pool.free)))
        if not node_vars:
            continue
        lost = len(model.variable)
        model.variable.add(lower_bound=0.0, upper_bound=math.inf)
        old_vars, old_costs = loss[level]
        model.constraint.add(
            var_index=[lost, *old_vars],
            coefficient=[1.0, *(-c for c in old_costs)],
            lower_bound=0.0,
            upper_bound=math.inf,
        )
        model.constraint.add(
            var_index=[lost, *node_vars],
            coefficient=[1.0, *(-c for c in node_costs)],
            lower_bound=0.0,
            upper_bound=math.inf,
        )
        loss[level] = ([lost], [1.0])
    objective_loss = loss.get(prio, ([], []))
    for v, cost in zip(*objective_loss, strict=True):
        model.variable[v].objective_coefficient = -cost
    # Capacity: per level j, set s and size t, slots of pods of priority <= L_j over every
    # state, and of priority L_j over the states where no band >= j lost a unit.
    room_of = f_of[zc][:, None] + np.concatenate(
        [np.zeros((len(zc), 1), np.int64), np.cumsum(ze, axis=1)], axis=1
    )  # per state and level j: f + sum_{i<j} e_i
    built.room_of, built.class_in, built.member = room_of, class_in, member
    first_row = len(model.constraint)
    _capacity_rows(model, pool, built, None)
    built.capacity = (first_row, len(model.constraint))
    # Floors of the tiers above.
    for level, floor_value in floor_of.items():
        base = pool.fixed_value.get(level, 0)
        gv = gang_var[(pool.prio == level) & gang_on]
        gain = [float(x) for x in pool.value[(pool.prio == level) & gang_on].tolist()]
        lost_vars, costs = loss.get(level, ([], []))
        rhs = floor_value - base - 0.5
        model.constraint.add(
            var_index=[*gv.tolist(), *lost_vars],
            coefficient=[*gain, *(-c for c in costs)],
            lower_bound=rhs,
            upper_bound=math.inf,
        )
    return built


@dataclass
class _Growth:
    """Members above pending gangs' role minimums as columns of a class LP: per item (a role
    of a gang whose minimum is its role minimums), its gang (pool index), pods at most, units
    per pod (rounded down: a pod asking ``s`` fits where ``s`` does), request, mask and the
    column."""

    gang: np.ndarray
    count: np.ndarray
    units: np.ndarray
    req: np.ndarray
    mask: np.ndarray
    var: np.ndarray


def _capacity_rows(model: linear_solver_pb2.MPModelProto, pool: _Pool, built: _Model, growth: _Growth | None) -> None:
    """The class LP's capacity rows (:func:`_tier_model`): per level ``j``, eligibility set and
    size ``t``, the slots pods of priority ``<= L_j`` take over every state, and those of
    ``L_j`` over the states where no band ``>= j`` lost a unit; the other resources by amount.
    With ``growth`` its members take slots beside their gangs' minimums."""
    levels, gang_var, zc, ze, zvar = built.levels, built.gang_var, built.zc, built.ze, built.zvar
    k, bands = pool.k, len(levels) - 1
    cand = pool.pod_prio >= levels[0]
    gang_of_pod = pool.pod_gang
    pod_on = (gang_var >= 0)[gang_of_pod]
    none = np.zeros(0, dtype=np.int64)
    g_gang = growth.gang if growth is not None else none
    for j, level in enumerate(levels):
        clean = ~(ze[:, j:] > 0).any(axis=1) if bands else np.ones(len(zc), dtype=bool)
        for exact in (False, True):
            pods = pod_on & (pool.prio[gang_of_pod] == level if exact else pool.prio[gang_of_pod] <= level)
            grown = pool.prio[g_gang] == level if exact else pool.prio[g_gang] <= level
            if not pods.any() and not grown.any():
                continue
            states = clean if exact else np.ones(len(zc), dtype=bool)
            sizes = np.unique(pool.pod_units[pods & (pool.pod_units > 0)]).tolist()
            if growth is not None:
                sizes = sorted({*sizes, *growth.units[grown & (growth.units > 0)].tolist()})
            if 1 not in sizes:
                sizes.append(1)
            for s in range(pool.subset.shape[1]):
                inside = pods & pool.subset[pool.pod_mask, s]
                extra = grown & pool.subset[growth.mask, s] if growth is not None else np.zeros(0, dtype=bool)
                if not inside.any() and not extra.any():
                    continue
                in_set = built.class_in[zc, s] & states
                cols = np.concatenate(
                    [gang_var[gang_of_pod[inside]], growth.var[extra] if growth is not None else none]
                )
                for t in sizes:
                    slots = built.room_of[in_set, j] // t
                    usage = pool.pod_count[inside] * (pool.pod_units[inside] // t)
                    if growth is not None:
                        usage = np.concatenate([usage, growth.units[extra] // t])
                    _row(model, cols, usage, zvar[in_set], slots)
                # The other resources by amount: every candidate below L_j gone (only when the
                # binding resource is not the only one).
                for r in range(pool.free.shape[1]):
                    if r == k:
                        continue
                    lower = cand & (pool.pod_prio >= level)
                    avail = pool.free[:, r].copy()
                    np.subtract.at(avail, pool.pod_node[lower], pool.pod_use[lower, r])
                    cap = float(np.maximum(avail[built.member[:, s]], 0).sum(dtype=object))
                    need = pool.pod_count[inside] * pool.pod_req[inside, r]
                    if growth is not None:
                        need = np.concatenate([need, growth.req[extra, r]])
                    _row(model, cols, need, none, np.zeros(0), cap)


@dataclass
class ClassSolution:
    """The class LP's solution of one tier (what :mod:`gangopt.class_choice` turns into a
    choice to place): kept per tier and floors beside its bound."""

    priority: int
    levels: tuple[int, ...]
    """The LP's tiers, ascending: ``priority`` and those floored above it; band ``i`` holds the
    candidates of priorities ``levels[i]`` up to ``levels[i + 1]``."""
    bound: int
    started: np.ndarray
    """Per pending gang (kept, as :attr:`_Pool.prio`), its share started (0 outside the LP)."""
    domains: dict[int, tuple[str, int]]
    """Per pending gang with a required level: that level and its largest domain column."""


NODE_LOSS_WIDTH = 64
"""Most units per band a node may lose for :func:`_node_losses` (the bit-set classes' limit)."""

LOSS_SEGMENTS = 1
"""Segments per node state of a class for the tier value a state's nodes lose
(:func:`_state_costs`), as :data:`EVICTION_SEGMENTS` for the eviction floor, on rounds of at
most :data:`FINE_LOSS_NODES` nodes. At XL (greedy's plan) 8 and 64 would lower priority 0's
bound 191,577.1 -> 191,413.1 and 191,365.8 GPU-eq, but the class bounds cost about 0.05-0.1
CPU-s more at L busy 0.6 (0.61 -> 0.66-0.71 in :func:`gangopt.annotate.cheap_bounds_for`),
where the finisher's clock then let the secondary LP at the plan's tiers run in 2 of 10 runs
against the base's 6 of 10 (gap 2.2 % not 1.2 %): kept at 1 there (docs/benchmarks.md,
"h36-xlsec")."""

FINE_LOSS_NODES = 8192
"""Rounds with more nodes than this get :data:`FINE_LOSS_SEGMENTS` loss steps. Above it the
per-node slot LPs do not fit the clock (33-72 CPU-s at XL, h35-xlbound), so neither does the
per-node second stage at the plan's tiers (:func:`gangopt.slots.secondary_bound_at`) that finer
steps would take time from; at or below it (L, 4,096 nodes) they may cost that LP its turn. At
XL (the 10 s plan, tiers 99,056.2 / 178,380.5 / 180,769.4) priority 0's bound 191,028.3 ->
190,817.0 GPU-eq with 64 steps (8: 190,864.3; 1,024: 190,817.0) and the secondary bound -103.1
-> -132.4, the reported gap 2.986 % -> 2.933 %; :func:`gangopt.annotate.cheap_bounds_for` 3.28
CPU-s median on both codes (4 pairs; docs/benchmarks.md, "h37-xlbound")."""

FINE_LOSS_SEGMENTS = 64
"""Loss steps per node state above :data:`FINE_LOSS_NODES` nodes (more gave XL nothing)."""


def loss_segments(nodes: int) -> int:
    """The loss steps per node state (:data:`LOSS_SEGMENTS`, :data:`FINE_LOSS_SEGMENTS`) on a
    round of ``nodes`` nodes."""
    return FINE_LOSS_SEGMENTS if nodes > FINE_LOSS_NODES else LOSS_SEGMENTS


def _node_losses(
    pool: _Pool,
    picked: np.ndarray,
    level: int,
    units: np.ndarray,
    per_pod: np.ndarray,
    width: int,
) -> np.ndarray | None:
    """Per node and units ``x`` (``< width``), the least value of tier ``level`` the node loses
    when exactly ``x`` units of the ``picked`` candidate pod groups leave it (inf: it cannot). A
    rigid gang's groups on a node go together at their shares of its value (their sum over its
    nodes is its value: a plan evicting it loses that); a pod group valued 0 (an elastic
    gang's, another tier's) pod by pod for nothing. None past :data:`NODE_LOSS_WIDTH`."""
    if width > NODE_LOSS_WIDTH or not picked.any():
        return None
    g = np.flatnonzero(picked)
    cost = np.where(pool.pod_prio[g] == level, np.floor(pool.pod_share[g] * 1000.0) / 1000.0, 0.0)
    # Valued groups merged per node and gang; the others one item per pod, for nothing.
    return _node_table(pool, g, cost, cost > 0, np.zeros(len(g)), units, per_pod, width)


def _node_table(
    pool: _Pool,
    g: np.ndarray,
    cost: np.ndarray,
    whole: np.ndarray,
    pod_cost: np.ndarray,
    units: np.ndarray,
    per_pod: np.ndarray,
    width: int,
) -> np.ndarray:
    """Per node and units ``x`` (``< width``), the least cost the node pays when exactly ``x``
    units of the candidate pod groups ``g`` leave it (inf: it cannot): the groups ``whole`` go
    together per node and gang at their summed ``cost``, the others pod by pod at ``pod_cost``
    each (per group)."""
    n = pool.free.shape[0]
    valued = g[whole]
    key = np.stack([pool.pod_node[valued], pool.pod_gang_index[valued]], axis=1)
    merged, where = np.unique(key, axis=0, return_inverse=True)
    where = where.reshape(-1)
    m_units = np.bincount(where, weights=units[valued], minlength=len(merged)).astype(np.int64)
    m_cost = np.bincount(where, weights=cost[whole], minlength=len(merged))
    loose = g[~whole]
    p_node = np.repeat(pool.pod_node[loose], pool.pod_pods[loose])
    p_units = np.repeat(per_pod[loose], pool.pod_pods[loose])
    p_cost = np.repeat(pod_cost[~whole], pool.pod_pods[loose])
    item_node = np.concatenate([merged[:, 0], p_node]).astype(np.int64)
    item_units = np.concatenate([m_units, p_units]).astype(np.int64)
    item_cost = np.concatenate([m_cost, p_cost])
    order = np.lexsort((item_units, item_node))
    item_node, item_units, item_cost = item_node[order], item_units[order], item_cost[order]
    slot = np.arange(len(item_node)) - np.searchsorted(item_node, item_node, side="left")
    table = np.full((n, width), np.inf)
    table[:, 0] = 0.0
    x = np.arange(width)
    for j in range(int(slot.max(initial=-1)) + 1):
        sel = slot == j
        rows, u, c = item_node[sel], item_units[sel], item_cost[sel]
        src = x[None, :] - u[:, None]
        shifted = np.where(src >= 0, table[rows[:, None], np.maximum(src, 0)] + c[:, None], np.inf)
        table[rows] = np.minimum(table[rows], shifted)
    return table


def _row(
    model: linear_solver_pb2.MPModelProto,
    gvars: np.ndarray,
    usage: np.ndarray,
    zvars: np.ndarray,
    slots: np.ndarray,
    rhs: float = 0.0,
) -> None:
    """``sum(usage · y) - sum(slots · z) <= rhs``, summed per variable and scaled to unit size
    (amounts are in milli-units)."""
    keep = usage > 0
    if not keep.any():
        return
    idx, where = np.unique(gvars[keep], return_inverse=True)
    coeff = np.bincount(where.reshape(-1), weights=usage[keep].astype(float), minlength=len(idx))
    zkeep = slots > 0
    if rhs > 0 and not len(zvars) and coeff.sum() <= rhs:
        return  # every gang fits by amount
    scale = max(abs(rhs), float(coeff.max()), 1.0)
    model.constraint.add(
        var_index=[*idx.tolist(), *zvars[zkeep].tolist()],
        coefficient=[*(coeff / scale).tolist(), *(-slots[zkeep].astype(float) / scale).tolist()],
        lower_bound=-math.inf,
        upper_bound=rhs / scale,
    )
