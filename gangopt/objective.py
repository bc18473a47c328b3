"""The objective: what a plan is worth, defined once for the encoder and for scoring plans.

Lexicographic, highest priority first (see docs/objective.md):

1. **Priority tiers.** For each priority level, the value of the gangs that run at their
   minimum size: pending gangs admitted and running gangs kept. A gang's value is its size in
   GPU-equivalents (dominant share of a pod's requests, measured in "one GPU's share of the
   cluster") times an urgency factor for waiting time and deadlines. A higher tier is never
   traded for any amount of lower-tier value.
2. **Secondary**, one weighted sum: elastic members above the minimum (+), GPU-hours lost to
   preemption (-), extra domains at a gang's preferred topology level and the levels above
   it (-, narrowest weighted most), and idle nodes
   opened by new pods (-, keeps whole nodes free for big gangs still to come).

All terms are integers in units of 1/SCALE so that CP-SAT works exactly.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter, itemgetter
from typing import Any, TypeVar, cast

import numpy as np

from gangopt.arrays import IntArray
from gangopt.memo import derived
from gangopt.quantities import MILLI
from gangopt.quota_tree import CohortTree
from gangopt.schema import NODE_LEVEL, Cohort, PendingGang, Plan, Queue, Role, Round, RunningGang, Score, TierScore
from gangopt.scope import NEWER, Scope, newer

T = TypeVar("T")
X = TypeVar("X")

SCALE = 10
"""Objective units per GPU-equivalent (and per GPU-hour, per domain, per node)."""

SHORT_WORK_SECONDS = 3600.0
"""The expected duration at which a gang gets half of ``Weights.short_first``."""


@dataclass(frozen=True)
class ObjectiveTerms:
    """Integer objective coefficients of one round, shared by the encoder and :func:`score`."""

    rnd: Round

    @classmethod
    def of(cls, rnd: Round) -> ObjectiveTerms:
        """The terms of ``rnd``, computed once per round object (kept on it, see
        :mod:`gangopt.memo`): a round is scored several times (warm start, plan, fallback),
        each a full pass."""
        inputs = (rnd.cluster, rnd.queues, rnd.cohorts, rnd.running, rnd.pending, rnd.policy)
        return derived(rnd, "objective-terms", inputs, lambda: cls(rnd))

    @cached_property
    def _memo(self) -> dict[str, dict[int, tuple[object, Any]]]:
        return defaultdict(dict)

    def _once(self, what: str, obj: X, compute: Callable[[X], T]) -> T:
        """``compute(obj)`` for ``obj`` (a role or gang of this round, immutable), once: a round
        is scored and bounded several times per solve, each a pass over every gang. One table
        per ``what`` keyed by the object's id, and no closure per call: on the fragmented XL
        round (68,536 running gangs) the scoring and the cheap bounds ask 750,000 times."""
        table = self._memo[what]
        hit = table.get(id(obj))
        if hit is not None and hit[0] is obj:
            return cast(T, hit[1])
        value = compute(obj)
        table[id(obj)] = (obj, value)
        return value

    @cached_property
    def base_resource(self) -> str:
        """The resource one "GPU-equivalent" is measured in: gpu when the cluster has any."""
        totals = self.totals
        for res in ("gpu", "cpu"):
            if totals.get(res, 0) > 0:
                return res
        return max(totals, key=lambda r: totals[r]) if totals else "gpu"

    @cached_property
    def totals(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for node in self.rnd.cluster.nodes:
            total.update(node.capacity)
        return dict(total)

    def pod_geq(self, role: Role) -> float:
        """A pod's size in GPU-equivalents: its largest share of any resource, scaled so that
        one GPU (or the base resource's unit) is 1. CPU-only pods count by their CPU share."""
        return self._once("geq", role, self._pod_geq)

    def _pod_geq(self, role: Role) -> float:
        """:meth:`pod_geq` by the role's requests: a round has a few shapes of pod (19 among
        the fragmented XL round's 68,536 running gangs, each with its own role object)."""
        key = tuple(role.requests.items())
        known = self._geq_of.get(key)
        if known is None:
            known = self._geq_of[key] = self._geq(role)
        return known

    @cached_property
    def _geq_of(self) -> dict[tuple[tuple[str, int], ...], float]:
        return {}

    def _geq(self, role: Role) -> float:
        base_total = self.totals.get(self.base_resource, 0)
        if base_total <= 0:
            return 1.0
        units = base_total / MILLI
        share = 0.0
        for res, amount in role.requests.items():
            total = self.totals.get(res, 0)
            if total > 0:
                share = max(share, amount / total)
        return share * units

    def pod_value(self, role: Role) -> int:
        """Integer value of one pod of ``role`` (at least 1, so every pod counts)."""
        return self._once("value", role, self._pod_value)

    def _pod_value(self, role: Role) -> int:
        return max(1, round(SCALE * self.pod_geq(role)))

    def urgency(self, gang: PendingGang) -> float:
        """1 + aging + deadline boost + short-work boost (running gangs: :attr:`kept_urgency`)."""
        w = self.rnd.policy.weights
        now = self.rnd.now
        waited_hours = max(0.0, now - gang.submit_time) / 3600.0
        factor = 1.0 + min(w.aging_cap, w.aging_per_hour * waited_hours)
        if gang.expected_duration is not None and w.short_first > 0:
            factor += w.short_first * SHORT_WORK_SECONDS / (SHORT_WORK_SECONDS + gang.expected_duration)
        if gang.deadline is not None and w.deadline_boost > 0:
            slack = gang.deadline - now
            if slack <= 0:
                factor += w.deadline_boost
            elif w.deadline_horizon > 0 and slack < w.deadline_horizon:
                factor += w.deadline_boost * (1.0 - slack / w.deadline_horizon)
        return factor

    def min_pods(self, gang: PendingGang | RunningGang) -> dict[str, int]:
        """Pods per role of the gang's minimum configuration (the cheapest roles fill any
        gang-wide minimum above the role minimums). Asked for every gang each time a plan is
        scored or bounded: computed once per gang (the caller must not modify the result)."""
        return self._once("min_pods", gang, self._min_pods)

    def _min_pods(self, gang: PendingGang | RunningGang) -> dict[str, int]:
        roles = gang.roles
        if len(roles) == 1:  # most gangs (every running gang of the fragmented rounds): no order to find
            role = roles[0]
            count = gang.role_minimum(role)
            extra = gang.minimum - count
            return {role.name: count if extra <= 0 else count + min(extra, role.replicas - count)}
        counts = {r.name: gang.role_minimum(r) for r in roles}
        extra = gang.minimum - sum(counts.values())
        if extra <= 0:  # most gangs: no order of roles to find (a third of tier_ceilings at M, 4,429 running gangs)
            return counts
        for role in sorted(gang.roles, key=lambda r: (self.pod_value(r), r.name)):
            take = min(extra, role.replicas - counts[role.name])
            counts[role.name] += take
            extra -= take
        return counts

    def tier_value(self, gang: PendingGang | RunningGang) -> int:
        """Value of running ``gang`` at its minimum size, counted in its priority tier."""
        return self._once("tier", gang, self._tier_value)

    def _tier_value(self, gang: PendingGang | RunningGang) -> int:
        if len(gang.roles) == 1:
            role = gang.roles[0]
            base = self.min_pods(gang)[role.name] * self.pod_value(role)
        else:
            roles = {r.name: r for r in gang.roles}
            base = sum(n * self.pod_value(roles[name]) for name, n in self.min_pods(gang).items())
        if isinstance(gang, PendingGang):
            factor = self.urgency(gang)
        else:
            factor = 1.0 if gang.name in self.reclaimable else self.kept_urgency
        return max(1, round(base * factor))

    @cached_property
    def reclaimable(self) -> frozenset[str]:
        """Running gangs of queues above their nominal before the round, in a cohort where
        another queue reclaims at any priority (``reclaim_within_cohort: any``): borrowed work,
        kept at urgency 1 (not :attr:`kept_urgency`), so that a lender's waiting gang of the same
        priority and size never loses tier value by taking its quota back (rule 5 decides who
        may; without this the door kept every borrower at equal priority). Likewise running
        gangs of a queue with ``within_queue: lower_or_newer_equal_priority`` submitted after a
        waiting gang of their queue and priority (Kueue admits the older one first): at the
        kept urgency the door never evicted one for an older 8-GPU gang (a 4-GPU victim was
        worth 20.0 against the waiting gang's 16.0 after 30 hours)."""
        if not Scope(self.rnd).beyond_priority:
            return frozenset()
        queues = {q.name: q for q in self.rnd.queues}
        reclaimers: dict[str | None, set[str]] = {}
        roots = self.rnd.cohort_roots
        for q in self.rnd.queues:
            if q.preemption.reclaim_within_cohort == "any":
                reclaimers.setdefault(roots[q.name], set()).add(q.name)
        usage: dict[str, Counter[str]] = {}
        for run in self.rnd.running:
            roles = {r.name: r for r in run.roles}
            total = usage.setdefault(run.queue, Counter())
            for pod in run.pods:
                total.update(roles[pod.role].requests)
        borrowing = {
            name
            for name, total in usage.items()
            if name in queues
            and queues[name].reclaimable
            and bool(reclaimers.get(roots[name], set()) - {name})
            and any(total[r] > n for r, n in queues[name].nominal.items())
        }
        newer_than_waiting = {
            g.name
            for g in self.rnd.running
            if g.queue in queues
            and queues[g.queue].preemption.within_queue == NEWER
            and any(p.queue == g.queue and p.priority == g.priority and newer(g, p) for p in self.rnd.pending)
        }
        return frozenset(g.name for g in self.rnd.running if g.queue in borrowing) | newer_than_waiting

    @cached_property
    def kept_urgency(self) -> float:
        """The factor of a running gang kept: the highest urgency a pending gang can reach
        (1 + aging_cap + short_first + deadline_boost).

        Rule 5 lets a gang be evicted only for a strictly higher priority, but which victims a
        higher-priority start takes is free, and room elsewhere is too: at urgency 1 a tier
        gained by evicting its own running gang for a higher start that could have used free
        room, and starting a waiting gang of the same priority there (same-priority preemption
        by proxy; tests/test_objective.py: a priority-2 gang evicted a running priority-1 gang so that a
        waiting priority-1 gang took the free node; greedy and every peer left it running). At
        the highest urgency, swapping running work for waiting work of the same size never
        gains in the tier."""
        w = self.rnd.policy.weights
        return 1.0 + w.aging_cap + w.short_first + w.deadline_boost

    @cached_property
    def running_base(self) -> RunningBase:
        """What every running gang adds to :func:`score` when the plan leaves it alone, and
        their sums: a plan touches a few hundred of 68,536 running gangs at fragmented XL, and
        each scoring of a plan was a pass over all of them (0.8 CPU-s per plan, 1.9 for the
        first)."""
        running = self.rnd.running
        tier: list[int] = []
        surplus: list[int] = []
        tier_sums: dict[int, int] = {}
        surplus_sum = 0
        # per shape of requests: (pod value, growth value); one-role gangs, nearly all of them,
        # are valued here without the per-object memos (7 µs a gang through them, 0.5 CPU-s)
        values: dict[tuple[tuple[str, int], ...], tuple[int, int]] = {}
        reclaimable, kept_urgency = self.reclaimable, self.kept_urgency
        for run in running:
            roles = run.roles
            role = roles[0] if len(roles) == 1 and run.pods else None
            if role is not None and (
                run.pods[0].role == role.name if len(run.pods) == 1 else all(p.role == role.name for p in run.pods)
            ):
                key = tuple(role.requests.items())
                known = values.get(key)
                if known is None:
                    known = values[key] = (self.pod_value(role), self.growth_value(role))
                value, growth = known
                least = run.role_minimum(role)  # min_pods, for one role
                extra = run.minimum - least
                least = least if extra <= 0 else least + min(extra, role.replicas - least)
                factor = 1.0 if run.name in reclaimable else kept_urgency  # as _tier_value
                t, s = max(1, round(least * value * factor)), growth * len(run.pods) - growth * least
            else:
                t, s = _running_terms(self, run, set(), Counter())
            tier.append(t)
            surplus.append(s)
            tier_sums[run.priority] = tier_sums.get(run.priority, 0) + t
            surplus_sum += s
        return RunningBase(tier, surplus, tier_sums, surplus_sum, running)

    def growth_value(self, role: Role) -> int:
        """Secondary value of one member above the minimum."""
        return round(self.rnd.policy.weights.growth * self.pod_value(role))

    def preemption_cost(self, gang: RunningGang) -> float:
        """GPU-hours lost if the whole gang is evicted; once per gang (greedy's victim order
        and the node-class LP's eviction floor both ask for every candidate: 54,869 at
        fragmented XL, 0.15 CPU-s a pass)."""
        return self._once("preemption", gang, self._preemption_cost)

    def preemption_costs(self, gangs: Iterable[RunningGang]) -> list[float]:
        """:meth:`preemption_cost` of each of ``gangs``, the same floats by the same arithmetic,
        kept in its memo, without two memo calls and a role lookup per gang: greedy's victim
        order asks for every preemptible running gang (61,768 at fragmented XL: the order 0.29 -> 0.16
        CPU-s, docs/benchmarks.md "h32-greedy")."""
        table = self._memo["preemption"]
        known = table.get
        geq_of = self._geq_of
        sums: dict[tuple[float, int], float] = {}
        out: list[float] = []
        for gang in gangs:
            hit = known(id(gang))
            if hit is not None and hit[0] is gang:
                out.append(hit[1])
                continue
            roles, pods = gang.roles, gang.pods
            if gang.preemption_cost is not None or len(roles) != 1:
                value = self._preemption_cost(gang)
            else:
                role = roles[0]
                name = role.name
                if not (pods[0].role == name if len(pods) == 1 else all(p.role == name for p in pods)):
                    value = self._preemption_cost(gang)
                else:  # as _preemption_cost's one-role sum, memoised per (pod size, pods)
                    one = geq_of.get(tuple(role.requests.items()))
                    if one is None:
                        one = self._pod_geq(role)
                    n = len(pods)
                    geq = sums.get((one, n))
                    if geq is None:
                        geq = sums[(one, n)] = sum([one] * n)
                    value = geq * (gang.seconds_since_checkpoint + gang.restart_seconds) / 3600.0
            table[id(gang)] = (gang, value)
            out.append(value)
        return out

    def running_prices(self, gangs: Sequence[RunningGang]) -> tuple[IntArray, IntArray]:
        """:meth:`tier_value` and :meth:`pod_removal_cost` of each of ``gangs``, as two int64
        arrays: the same integers by the same float operations in the same order (``round`` is
        ``np.rint``, both round half to even), a gang's attributes read once by ``map`` and the
        arithmetic in numpy, instead of two memoised method calls per gang. Gangs of several
        roles take :meth:`tier_value` itself. Greedy's cheapest room prices tens of thousands of
        running gangs at fragmented XL (22,496): 0.23 CPU-s of its pass one call each under the
        solve's collector pause, 0.12-0.14 with this (docs/benchmarks.md, "h38-prices"; 0.59-1.7
        s in a profile without the pause was mostly garbage collection). A second reading of
        :meth:`min_pods` for one-role gangs: tests/test_objective.py holds it to the scalar one
        bit for bit on random gangs."""
        n = len(gangs)
        tier = np.empty(n, dtype=np.int64)
        removal = np.empty(n, dtype=np.int64)
        if n == 0:
            return tier, removal
        costs = np.asarray(self.preemption_costs(gangs), dtype=np.float64)
        pods = np.fromiter(map(len, map(_PODS, gangs)), dtype=np.float64, count=n)
        # as eviction_cost: (SCALE * weight) * cost, rounded, at least 1; then per pod
        eviction = np.maximum(np.rint((SCALE * self.rnd.policy.weights.preemption) * costs), 1.0)
        removal[:] = np.maximum(np.rint(eviction / pods), 1.0)
        roles = list(map(_ROLES, gangs))
        one = np.fromiter(map(_ONE, map(len, roles)), dtype=np.bool_, count=n)
        several = np.flatnonzero(~one).tolist()
        if several:  # not one role: the gang's own reading (min_pods orders the roles)
            tier[several] = [self.tier_value(gangs[i]) for i in several]
            roles = [roles[i] for i in np.flatnonzero(one).tolist()]
            gangs = [gangs[i] for i in np.flatnonzero(one).tolist()]
        if not gangs:
            return tier, removal
        role = list(map(_FIRST, roles))
        # min_pods of one role: its role_minimum, topped up to the gang's minimum within replicas
        replicas = np.fromiter(map(_REPLICAS, role), dtype=np.int64, count=len(role))
        floor = [-1 if m is None else m for m in map(_MIN_REPLICAS, role)]
        members = [-1 if m is None else m for m in map(_MIN_MEMBERS, gangs)]
        given, at_least = np.asarray(floor, dtype=np.int64), np.asarray(members, dtype=np.int64)
        count = np.where(given >= 0, given, np.where(at_least < 0, replicas, 0))
        extra = np.maximum(at_least, count) - count  # minimum - count (minimum: max(count, min_members or 0))
        least = np.where(extra > 0, count + np.minimum(extra, replicas - count), count)
        value_of = self._value_of
        keys = list(map(tuple, map(dict.items, map(_REQUESTS, role))))
        for key, r in zip(keys, role, strict=True):
            if key not in value_of:
                value_of[key] = self.pod_value(r)
        value = np.fromiter(map(value_of.__getitem__, keys), dtype=np.int64, count=len(keys))
        factor = np.full(len(gangs), self.kept_urgency)
        if self.reclaimable:
            factor[np.fromiter(map(self.reclaimable.__contains__, map(_NAME, gangs)), dtype=np.bool_)] = 1.0
        # as _tier_value: the integer base (pods x pod value) times the factor, rounded, at least 1
        tier[one] = np.maximum(np.rint((least * value) * factor), 1.0)
        return tier, removal

    @cached_property
    def _value_of(self) -> dict[tuple[tuple[str, int], ...], int]:
        """:meth:`pod_value` per requests of a role (:meth:`running_prices`)."""
        return {}

    def _preemption_cost(self, gang: RunningGang) -> float:
        if gang.preemption_cost is not None:
            return gang.preemption_cost
        roles = gang.roles
        if len(roles) == 1 and all(p.role == roles[0].name for p in gang.pods):
            # one role (a map of role names per gang was half the cost of ranking the 61,768
            # victims of the fragmented XL round); the same sum, pod by pod
            one = self.pod_geq(roles[0])
            geq = sum([one] * len(gang.pods))
            return geq * (gang.seconds_since_checkpoint + gang.restart_seconds) / 3600.0
        by_name = {r.name: r for r in roles}
        geq = sum(self.pod_geq(by_name[p.role]) for p in gang.pods)
        return geq * (gang.seconds_since_checkpoint + gang.restart_seconds) / 3600.0

    def eviction_cost(self, gang: RunningGang) -> int:
        """Integer secondary cost of evicting the whole gang (at least 1 per victim gang)."""
        return max(1, round(SCALE * self.rnd.policy.weights.preemption * self.preemption_cost(gang)))

    def pod_removal_cost(self, gang: RunningGang) -> int:
        """Integer secondary cost per pod removed when shrinking (at least 1)."""
        return max(1, round(self.eviction_cost(gang) / len(gang.pods)))

    @property
    def spread_cost(self) -> int:
        return round(SCALE * self.rnd.policy.weights.spread)

    def spread_levels(self, gang: PendingGang | RunningGang) -> list[tuple[str, int]]:
        """(level, cost per extra domain) for every level a gang's ``preferred`` level charges:
        the preferred level at ``spread_cost``, and each level above it at half the cost of the
        level below (at least 1 while ``spread`` is on), up to but not including its required
        level (one domain there by rule). Charging only the preferred level left the levels
        above free: a 2-block gang under ``preferred: block`` took blocks of two spines in 9 of
        10 shuffled node orders; with the halved charges it stays in one spine in all 10
        (tests/solvers/cpsat/test_encoding.py). Narrowest weighted most: the preferred level
        keeps its meaning, the broader levels break its ties."""
        topo = gang.topology
        if topo is None or topo.preferred is None or self.spread_cost <= 0:
            return []
        levels = [*self.rnd.cluster.topology_levels, NODE_LEVEL]
        stop = levels.index(topo.required) if topo.required in levels else -1
        start = levels.index(topo.preferred)
        return [(levels[li], max(1, round(self.spread_cost / 2 ** (start - li)))) for li in range(start, stop, -1)]

    @property
    def open_node_cost(self) -> int:
        return round(SCALE * self.rnd.policy.weights.fragmentation)

    @cached_property
    def fair_shares(self) -> dict[str, float]:
        """Dominant-resource share before the round of each queue of a *weighted* cohort tree
        (one where some queue or cohort sets ``weight``): ``max_r usage_{q,r} / deserved_{q,r}``
        over the resources of the tree's nominal total (its queues' and cohorts' ``nominal``;
        a tree that holds no quota at all shares the schedulable nodes' capacity instead, as
        Volcano's weights do), with ``deserved_{q,r} = f_q · total_r``. Without cohort weights ``f_q = w_q / Σ_p w_p``
        over the tree's queues, as before trees held quota; when a cohort of the tree sets one,
        ``f`` is split down the tree: a cohort's share goes to its member queues and child
        cohorts (those with queues) by weight (:func:`tree_fractions`). Unset weights count 1;
        usage of a resource the queue deserves none of: infinite. Empty when no tree is
        weighted: the tie-break is then FIFO alone and every plan is what it was before
        weights existed."""
        roots = self.rnd.cohort_roots
        trees: dict[str, list[Queue]] = {}
        for q in self.rnd.queues:
            root = roots[q.name]
            if root is not None:
                trees.setdefault(root, []).append(q)
        parents = {c.name: c.parent for c in self.rnd.cohorts}
        in_tree: dict[str, list[Cohort]] = {}
        for c in self.rnd.cohorts:
            top = c.name
            while parents[top] is not None:
                top = parents[top]  # type: ignore[assignment]  # declared trees (checks.py)
            in_tree.setdefault(top, []).append(c)
        weighted = {
            root: members
            for root, members in trees.items()
            if any(q.weight is not None for q in members) or any(c.weight is not None for c in in_tree.get(root, []))
        }
        if not weighted:
            return {}
        usage: dict[str, Counter[str]] = {}
        for gang in self.rnd.running:
            roles = {r.name: r for r in gang.roles}
            used = usage.setdefault(gang.queue, Counter())
            for role, n in Counter(p.role for p in gang.pods).items():
                for res, amount in roles[role].requests.items():
                    used[res] += amount * n
        out: dict[str, float] = {}
        for root, members in weighted.items():
            cohorts = in_tree.get(root, [])
            fractions = tree_fractions(root, members, cohorts)
            totals: Counter[str] = Counter()
            for q in members:
                totals.update(q.nominal)
            for c in cohorts:
                totals.update(c.nominal)
            if not +totals:
                totals = self.schedulable_capacity
            for q in members:
                share = 0.0
                for res, total in sorted(totals.items()):
                    used_r = usage.get(q.name, Counter())[res]
                    if total > 0 and used_r > 0:
                        deserved = total * fractions[q.name]
                        share = max(share, used_r / deserved if deserved > 0 else math.inf)
                out[q.name] = share
        return out

    @cached_property
    def schedulable_capacity(self) -> Counter[str]:
        """Per resource, the capacity of the schedulable nodes: what the weights of a tree that
        holds no quota share (Volcano's proportion plugin: a queue deserves its weight's share
        of the cluster, with no ``capability``/``deserved`` set)."""
        total: Counter[str] = Counter()
        for node in self.rnd.cluster.nodes:
            if node.schedulable:
                total.update(node.capacity)
        return total

    def tie_break_order(self, order: list[int], group: Callable[[int], object] | None = None) -> list[int]:
        """``order`` (pending gang indices, oldest first) with the places its gangs of each
        weighted cohort hold (per ``group`` too, e.g. per priority) handed back to them least
        served queue first (:attr:`fair_shares`, then the order they had): gangs of other
        queues keep their places, so without weights the order is ``order`` itself."""
        shares = self.fair_shares
        if not shares:
            return order
        pending = self.rnd.pending
        cohort = self.rnd.cohort_roots
        places: dict[tuple[object, str | None], list[int]] = {}
        for pos, gi in enumerate(order):
            queue = pending[gi].queue
            if queue in shares:
                places.setdefault((group(gi) if group else None, cohort[queue]), []).append(pos)
        out = list(order)
        for positions in places.values():
            members = sorted((order[p] for p in positions), key=lambda gi: shares[pending[gi].queue])
            for pos, gi in zip(positions, members, strict=True):
                out[pos] = gi
        return out

    @cached_property
    def guaranteed(self) -> dict[str, int]:
        """Queues whose usage within nominal is valued (``Weights.guarantee``): those that
        reclaim at any priority, in a cohort with others; their nominal of the base resource."""
        if self.rnd.policy.weights.guarantee <= 0 or not Scope(self.rnd).beyond_priority:
            return {}
        base = self.base_resource
        return {
            q.name: q.nominal[base]
            for q in self.rnd.queues
            if q.preemption.reclaim_within_cohort == "any" and q.cohort is not None and base in q.nominal
        }

    @cached_property
    def guaranteed_cohorts(self) -> dict[str, int]:
        """Cohorts whose subtree's usage within its quota is valued (``Weights.guarantee`` in a
        cohort tree): those holding quota of the base resource of their own (rule 5: a cohort's
        own quota guarantees its subtree, Kueue's hierarchical cohorts) with a
        :attr:`guaranteed` queue in their subtree; their subtree's quota ``S`` (rule 6). Without
        it a queue of nominal 0 under a cohort holding 8 GPUs gained nothing by reclaiming what a
        borrowing branch held at its own priority, though rule 5 lets it
        (tests/test_quota_tree.py)."""
        queues = self.guaranteed
        if not queues or not any(c.nominal for c in self.rnd.cohorts):
            return {}
        tree, base = self.cohort_tree, self.base_resource
        return {
            c: tree.quota(c, base)
            for c in sorted(tree.spec)
            if base in tree.spec[c].nominal and queues.keys() & tree.queues_below(c)
        }

    @cached_property
    def cohort_tree(self) -> CohortTree:
        return CohortTree(self.rnd)

    def guarantee_value(self, usage: Mapping[str, int]) -> int:
        """Secondary value of the base resource ``usage`` (milli-units per queue: at least every
        queue of :attr:`guaranteed` and of the subtrees of :attr:`guaranteed_cohorts`) that the
        guaranteed queues hold within their nominal and the guaranteed cohorts' subtrees within
        their quota (``U`` of rule 6, read from the queues' usage)."""
        held = sum(min(usage.get(q, 0), nominal) for q, nominal in self.guaranteed.items())
        if self.guaranteed_cohorts:
            per_queue = {q: {self.base_resource: amount} for q, amount in usage.items()}
            tree = self.cohort_tree
            for c, quota in self.guaranteed_cohorts.items():
                held += min(tree.usage(c, self.base_resource, per_queue), quota)
        return self._guarantee_units(held)

    @cached_property
    def guarantee_ceiling(self) -> int:
        """The guarantee term's largest value: every guaranteed queue at its nominal and every
        guaranteed cohort's subtree at its quota (the cheap secondary bound's part)."""
        return self._guarantee_units(sum(self.guaranteed.values()) + sum(self.guaranteed_cohorts.values()))

    def _guarantee_units(self, held: int) -> int:
        return round(SCALE * self.rnd.policy.weights.guarantee * held / MILLI)


# the attributes running_prices reads of each gang, by map (C loops, no lambda per gang)
_PODS, _ROLES, _NAME, _REQUESTS, _REPLICAS, _MIN_REPLICAS, _MIN_MEMBERS = map(
    attrgetter, ("pods", "roles", "name", "requests", "replicas", "min_replicas", "min_members")
)
_FIRST = itemgetter(0)
_ONE = (1).__eq__


def score(
    rnd: Round, plan: Plan, bounds: dict[int, float] | None = None, secondary_bound: float | None = None
) -> Score:
    """Evaluate ``plan`` on ``rnd`` from its placements alone (any solver's plan).

    Assumes the plan is valid (see :mod:`gangopt.validation`); values are in GPU-equivalents.
    """
    terms = ObjectiveTerms.of(rnd)
    tiers: Counter[int] = Counter()
    secondary = 0
    new_members: Counter[tuple[str, str]] = Counter((p.gang, p.role) for p in plan.placements)
    removed: set[str] = {pod for pre in plan.preemptions for pod in pre.pods}
    admitted = set(plan.admitted)
    for gang in rnd.pending:
        tiers[gang.priority] += 0
        if gang.name not in admitted:
            continue
        tiers[gang.priority] += terms.tier_value(gang)
        secondary += _surplus(terms, gang, {r.name: new_members[(gang.name, r.name)] for r in gang.roles})
    base = terms.running_base
    if not removed and not new_members:
        # no running gang touched: each adds what the table has, their names repeated or not
        for prio, value in base.tier_sums.items():
            tiers[prio] += value
        secondary += base.surplus_sum
        touched: Iterable[int] = ()
    elif base.owner is None:  # pod or gang names repeat (a round built without checks): gang by gang
        touched = range(len(rnd.running))
    else:
        # the running gangs the plan leaves alone count as the table has them; the others again
        for prio, value in base.tier_sums.items():
            tiers[prio] += value
        secondary += base.surplus_sum
        hit = {base.owner[pod] for pod in removed if pod in base.owner}
        hit.update(base.index[g] for g, _ in new_members if g in base.index)
        touched = sorted(hit)
    for gi in touched:
        run = rnd.running[gi]
        if base.owner is not None:
            tiers[run.priority] -= base.tier[gi]
            secondary -= base.surplus[gi]
        tier, terms_of_run = _running_terms(terms, run, removed, new_members)
        tiers[run.priority] += tier
        secondary += terms_of_run
    opened = len({p.node for p in plan.placements} - base.busy) if plan.placements else 0
    secondary -= _spread_penalty(rnd, plan, terms) + opened * terms.open_node_cost
    secondary += _guarantee(rnd, plan, terms)
    unbounded = Score(
        tiers=[
            TierScore(priority=p, value=tiers[p] / SCALE, bound=tiers[p] / SCALE) for p in sorted(tiers, reverse=True)
        ],
        secondary=secondary / SCALE,
        secondary_bound=None,
    )
    return with_bounds(unbounded, bounds or {}, secondary_bound)


@dataclass(frozen=True)
class RunningBase:
    """:attr:`ObjectiveTerms.running_base`: per running gang (round order) its tier value and
    secondary terms when a plan leaves it alone, and their sums."""

    tier: list[int]
    surplus: list[int]
    tier_sums: dict[int, int]
    """Per priority of a running gang (every one, zeros too), the sum of :attr:`tier`."""
    surplus_sum: int
    running: list[RunningGang]
    """The round's running gangs, which the indexes below read on first use: a plan that
    leaves every running gang alone and places nothing (the unstarted plan of a cut-short
    solve) is scored by the sums alone, and at fragmented XL the indexes are 0.15-0.2 of the
    table's 0.4-0.47 CPU-s (74,000 pods)."""

    @cached_property
    def owner(self) -> dict[str, int] | None:
        """Running gang index per pod name; None when pod or running gang names repeat."""
        owner: dict[str, int] = {}
        pods = 0
        for gi, run in enumerate(self.running):
            pods += len(run.pods)
            for pod in run.pods:
                owner[pod.name] = gi
        return owner if len(owner) == pods and len(self.index) == len(self.running) else None

    @cached_property
    def index(self) -> dict[str, int]:
        """Running gang index per gang name."""
        return {run.name: gi for gi, run in enumerate(self.running)}

    @cached_property
    def busy(self) -> frozenset[str]:
        """Nodes with a running pod before the plan."""
        return frozenset(p.node for g in self.running for p in g.pods)


def _running_terms(
    terms: ObjectiveTerms, run: RunningGang, removed: set[str], new_members: Counter[tuple[str, str]]
) -> tuple[int, int]:
    """(tier value, secondary terms) of running gang ``run`` after a plan that removes the pods
    ``removed`` (names) and adds ``new_members`` (per gang and role)."""
    kept = Counter(p.role for p in run.pods if p.name not in removed)
    if not kept:
        return 0, -terms.eviction_cost(run)
    members = {r.name: kept[r.name] + new_members[(run.name, r.name)] for r in run.roles}
    secondary = _surplus(terms, run, members)
    lost = len(run.pods) - sum(kept.values())
    if lost:  # the cost is a pass over the gang's pods: most running gangs lose none
        secondary -= terms.pod_removal_cost(run) * lost
    return terms.tier_value(run), secondary


def with_bounds(s: Score, bounds: dict[int, float], secondary_bound: float | None) -> Score:
    """``s`` with these bounds (a tier without one is bounded by its own value): scoring a
    plan is a pass over every gang, attaching bounds is not."""
    return Score(
        tiers=[TierScore(priority=t.priority, value=t.value, bound=bounds.get(t.priority, t.value)) for t in s.tiers],
        secondary=s.secondary,
        secondary_bound=secondary_bound,
    )


def _surplus(terms: ObjectiveTerms, gang: PendingGang | RunningGang, members: dict[str, int]) -> int:
    minimum = terms.min_pods(gang)
    roles = {r.name: r for r in gang.roles}
    value = sum(terms.growth_value(roles[n]) * members[n] for n in members)
    return value - sum(terms.growth_value(roles[n]) * minimum[n] for n in minimum)


def _guarantee(rnd: Round, plan: Plan, terms: ObjectiveTerms) -> int:
    """The :meth:`ObjectiveTerms.guarantee_value` of the queues' usage after the plan."""
    if not terms.guaranteed:
        return 0
    queues = set(terms.guaranteed)
    for c in terms.guaranteed_cohorts:
        queues |= terms.cohort_tree.queues_below(c)
    base = terms.base_resource
    removed = {pod for p in plan.preemptions for pod in p.pods}
    usage: Counter[str] = Counter()
    for run in rnd.running:
        if run.queue in queues:
            roles = {r.name: r for r in run.roles}
            usage[run.queue] += sum(roles[p.role].requests.get(base, 0) for p in run.pods if p.name not in removed)
    specs = {g.name: g for g in [*rnd.pending, *rnd.running] if g.queue in queues}
    for p in plan.placements:
        gang = specs.get(p.gang)
        if gang is not None:
            role = next((r for r in gang.roles if r.name == p.role), None)
            usage[gang.queue] += role.requests.get(base, 0) if role is not None else 0
    return terms.guarantee_value(dict(usage))


def _spread_penalty(rnd: Round, plan: Plan, terms: ObjectiveTerms) -> int:
    from gangopt.topology import Topology

    if not any(g.topology and g.topology.preferred and g.name in plan.admitted for g in rnd.pending):
        return 0
    topo = Topology.of(rnd.cluster)
    nodes_of: dict[str, set[str]] = {}
    for p in plan.placements:
        nodes_of.setdefault(p.gang, set()).add(p.node)
    penalty = 0
    for gang in rnd.pending:
        if gang.name not in nodes_of:
            continue
        for level, cost in terms.spread_levels(gang):
            penalty += cost * (len({topo.domain(n, level) for n in nodes_of[gang.name]}) - 1)
    return penalty


def lexicographic_key(s: Score) -> tuple[float, ...]:
    """A key that orders scores the way the objective does (bigger is better)."""
    return (*(t.value for t in s.tiers), s.secondary)


def tree_fractions(root: str, queues: list[Queue], cohorts: list[Cohort]) -> dict[str, float]:
    """Per queue of one cohort tree, its fraction of the tree's deserved total
    (:attr:`ObjectiveTerms.fair_shares`). No cohort weight: ``w_q / Σ w`` over the tree's
    queues (a tree flattened to its root, as before trees held quota). Otherwise from the
    root down: a cohort's fraction is split between its member queues and its child cohorts
    that hold queues, by their weights (unset: 1), as Kueue's hierarchical fair sharing and
    Volcano's ``hierarchy-weights`` share a parent among its children."""
    weight = {q.name: 1.0 if q.weight is None else q.weight for q in queues}
    if all(c.weight is None for c in cohorts):
        total = sum(weight.values())
        return {name: w / total if total > 0 else 0.0 for name, w in weight.items()}
    cweight = {c.name: 1.0 if c.weight is None else c.weight for c in cohorts}
    children: dict[str, list[tuple[str, bool]]] = {}
    for q in queues:
        children.setdefault(q.cohort or root, []).append((q.name, True))
    for c in cohorts:
        if c.parent is not None:
            children.setdefault(c.parent, []).append((c.name, False))

    def holds_queues(node: str) -> bool:
        return any(is_queue or holds_queues(name) for name, is_queue in children.get(node, []))

    out: dict[str, float] = {}
    stack = [(root, 1.0)]
    while stack:
        node, fraction = stack.pop()
        kids = [(name, is_queue) for name, is_queue in children.get(node, []) if is_queue or holds_queues(name)]
        total = sum(weight[name] if is_queue else cweight[name] for name, is_queue in kids)
        for name, is_queue in kids:
            part = fraction * (weight[name] if is_queue else cweight[name]) / total if total > 0 else 0.0
            if is_queue:
                out[name] = part
            else:
                stack.append((name, part))
    return out
