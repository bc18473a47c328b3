"""A choice to place from the node-class LP (:mod:`gangopt.slot_classes`): XL's plan (issue 13).

On rounds too large for the per-node slot models (16,384 nodes, 54,869 candidate running
gangs at fragmented XL) the slot placer (:mod:`gangopt.solvers.cpsat.placer`) had no choice to
place, so CP-SAT returned greedy's plan. The class LP that bounds such a round's tiers says,
per tier, which pending gangs start (and in which required domain) and, per node class, how
many of its nodes are in which eviction state (units of the binding resource freed per
priority band). This module reads that solution as a :class:`~gangopt.slots.SlotChoice`:

* **Started gangs**: the pending gangs the LP starts at one half or more, each in its largest
  required-domain column.
* **Evictions, node by node**: per class, its state counts rounded to whole nodes (largest
  remainders), and each evicting state given to the nodes of the class where it is cheapest:
  per node and band, the least tier value whose running pods sum to exactly the state's units
  (a rigid gang whole, at its tier value, nothing once it is evicted elsewhere; an elastic
  gang's pods above its minimum for free, the rest of it at its value), the higher band's
  loss first. A rigid gang with a pod on a chosen node goes whole; an elastic one sheds the
  chosen pods or, past its spare ones, goes whole.

The slot placer then places the choice (victims first, the chosen gangs by best fit, greedy's
preemption for what does not fit, the reprieve) and the door keeps its plan only when it
validates and is lexicographically better (:func:`gangopt.solvers.cpsat.placer.place_choices`).
Deterministic: no clock, no randomness.
"""

from __future__ import annotations

import numpy as np

from gangopt.objective import ObjectiveTerms
from gangopt.prefilter import Prefiltered
from gangopt.slot_classes import POOL_KEY, ClassSolution, _Pool
from gangopt.slots import SlotChoice

_Cost = tuple[float, ...]
"""A state's tier value lost per band, the highest band first (compared lexicographically)."""


def class_choice(pre: Prefiltered, values: dict[int, int]) -> SlotChoice | None:
    """The class LP's choice for the first tier a plan of tier ``values`` (objective units)
    leaves open, once :func:`gangopt.slot_classes.class_tier_bounds` has bounded that plan;
    None when it did not, or proved every tier."""
    pool = pre.derived.get(POOL_KEY)
    if not isinstance(pool, _Pool):
        return None
    opened = pool.cache.get(("open", tuple(sorted(values.items()))))
    if opened is None:
        return None
    prio, floors = opened  # type: ignore[misc]
    solution = pool.cache.get(("solution", prio, floors))
    if not isinstance(solution, ClassSolution):
        return None
    return pool.cache.setdefault(("choice", prio, floors), _choice(pre, pool, solution))  # type: ignore[return-value]


def _choice(pre: Prefiltered, pool: _Pool, sol: ClassSolution) -> SlotChoice:
    started: dict[int, tuple[str, int] | None] = {}
    for g in np.flatnonzero(sol.started > 0.5).tolist():
        started[int(pre.pending[g])] = sol.domains.get(g)
    evicted, shed, lost = _Evictions(pre, pool, sol).choose()
    prio = sol.priority
    value = pool.fixed_value.get(prio, 0) - lost + int(pool.value[(sol.started > 0.5) & (pool.prio == prio)].sum())
    return SlotChoice(
        priority=prio,
        levels=frozenset(sol.levels),
        value=value,
        bound=sol.bound,
        started=started,
        evicted=frozenset(evicted),
        shed={gi: tuple(sorted(p)) for gi, p in sorted(shed.items()) if gi not in evicted and p},
    )


class _Evictions:
    """The victims of the LP's node states, node by node (module docstring)."""

    def __init__(self, pre: Prefiltered, pool: _Pool, sol: ClassSolution) -> None:
        self.rnd = pre.rnd
        self.pool = pool
        self.sol = sol
        self.terms = ObjectiveTerms.of(pre.rnd)
        self.resource = pre.resources[pool.k]
        levels = np.asarray(sol.levels)
        self.bands = len(levels) - 1
        self.band = np.searchsorted(levels, pool.pod_prio, side="right") - 1
        movable = (pool.pod_prio >= sol.priority) & (pool.pod_prio < levels[-1])
        per_pod = -(-(pool.pod_use[:, pool.k] // np.maximum(pool.pod_pods, 1)) // pool.unit)
        self.units = per_pod * pool.pod_pods
        groups = np.flatnonzero(movable & (per_pod > 0))
        order = groups[np.argsort(pool.pod_node[groups], kind="stable")]
        self.groups = order
        self.group_start = np.searchsorted(pool.pod_node[order], np.arange(len(pool.free) + 1))
        self.evicted: set[int] = set()
        self.shed: dict[int, set[int]] = {}
        self.lost = 0.0
        """Tier value of the LP's own tier lost by the victims chosen."""
        self.spare: dict[int, int] = {}
        """Per elastic gang touched, pods it may still shed (its own minimum kept)."""

    def choose(self) -> tuple[set[int], dict[int, set[int]], int]:
        sol = self.sol
        counts = _whole_nodes(sol)
        by_class = np.argsort(sol.class_of, kind="stable")
        class_start = np.searchsorted(sol.class_of[by_class], np.arange(len(sol.count) + 1))
        evicting = np.flatnonzero((counts > 0) & (sol.states.sum(axis=1) > 0))
        for q in np.unique(sol.state_class[evicting]).tolist():
            nodes = by_class[class_start[q] : class_start[q + 1]].tolist()
            mine = evicting[sol.state_class[evicting] == q]
            # Larger states first: they have the fewest nodes to choose among.
            for s in sorted(mine.tolist(), key=lambda s: (-int(sol.states[s].sum()), s)):
                want = sol.states[s].tolist()
                costs = [(self._cost(v, want), v) for v in nodes]
                picked = sorted(c for c in costs if c[0] is not None)[: int(counts[s])]
                for _, v in picked:
                    self._evict(v, want)
                taken = {v for _, v in picked}
                nodes = [v for v in nodes if v not in taken]
        return self.evicted, self.shed, round(self.lost)

    def _items(self, v: int, band: int) -> list[tuple[int, float, int, bool]]:
        """Node ``v``'s removal items in ``band``: (units, tier value lost, gang, whole?)."""
        pool = self.pool
        lo, hi = self.group_start[v], self.group_start[v + 1]
        per_gang: dict[int, int] = {}
        for g in self.groups[lo:hi].tolist():
            if self.band[g] == band:
                gi = int(pool.pod_gang_index[g])
                per_gang[gi] = per_gang.get(gi, 0) + int(self.units[g])
        items: list[tuple[int, float, int, bool]] = []
        for gi, units in sorted(per_gang.items()):
            if gi in self.evicted:
                items.append((units, 0.0, gi, True))
                continue
            worth = float(self.terms.tier_value(self.rnd.running[gi]))
            run = self.rnd.running[gi]
            if run.elastic:
                free = self._free_pods(gi, v)
                for p in free:
                    items.append((self._pod_units(gi, p), 0.0, gi, False))
                rest = units - sum(self._pod_units(gi, p) for p in free)
                if rest > 0:
                    items.append((units, worth, gi, True))
                continue
            items.append((units, worth, gi, True))
        return items

    def _best(self, v: int, band: int, target: int) -> tuple[float, list[tuple[int, float, int, bool]]] | None:
        """The least-value items of node ``v`` in ``band`` summing to exactly ``target``."""
        if target == 0:
            return 0.0, []
        items = self._items(v, band)
        best: dict[int, tuple[float, list[int]]] = {0: (0.0, [])}
        for k, (units, cost, _, _) in enumerate(items):
            for total, (c, picks) in sorted(best.items(), reverse=True):
                nt = total + units
                if nt > target:
                    continue
                cand = (c + cost, [*picks, k])
                if nt not in best or cand[0] < best[nt][0]:
                    best[nt] = cand
        found = best.get(target)
        if found is None:
            return None
        return found[0], [items[k] for k in found[1]]

    def _cost(self, v: int, want: list[int]) -> _Cost | None:
        out: list[float] = []
        for band in reversed(range(self.bands)):
            found = self._best(v, band, int(want[band]))
            if found is None:
                return None
            out.append(found[0])
        return tuple(out)

    def _evict(self, v: int, want: list[int]) -> None:
        for band in range(self.bands):
            found = self._best(v, band, int(want[band]))
            if found is None:
                continue
            for _, cost, gi, whole in found[1]:
                if whole:
                    if gi not in self.evicted:
                        self.evicted.add(gi)
                        if self.rnd.running[gi].priority == self.sol.priority:
                            self.lost += cost
                    continue
                pods = self._free_pods(gi, v)
                if pods:
                    self.shed.setdefault(gi, set()).add(pods[0])
                    self.spare[gi] -= 1

    def _free_pods(self, gi: int, v: int) -> list[int]:
        """Pods of elastic gang ``gi`` on node ``v`` it may still shed, its last pods first
        (within the gang's and each role's minimum)."""
        run = self.rnd.running[gi]
        if gi not in self.spare:
            self.spare[gi] = len(run.pods) - run.minimum
        left = self.spare[gi]
        if left <= 0:
            return []
        name = self.rnd.cluster.nodes[v].name
        shed = self.shed.get(gi, set())
        role_left = {r.name: sum(p.role == r.name for p in run.pods) - run.role_minimum(r) for r in run.roles}
        for p in shed:
            role_left[run.pods[p].role] -= 1
        out: list[int] = []
        for p in reversed(range(len(run.pods))):
            pod = run.pods[p]
            if pod.node == name and p not in shed and role_left[pod.role] > 0 and len(out) < left:
                role_left[pod.role] -= 1
                out.append(p)
        return out

    def _pod_units(self, gi: int, p: int) -> int:
        run = self.rnd.running[gi]
        role = next(r for r in run.roles if r.name == run.pods[p].role)
        request = int(role.requests.get(self.resource, 0))
        return -(-request // self.pool.unit)


def _whole_nodes(sol: ClassSolution) -> np.ndarray:
    """Per state, whole nodes: each class's fractional counts rounded by largest remainder to
    its node count (ties: the state listed first)."""
    z = np.maximum(sol.nodes_in_state, 0.0)
    out = np.floor(z + 1e-9).astype(np.int64)
    start = np.searchsorted(sol.state_class, np.arange(len(sol.count) + 1))  # ascending
    for q in range(len(sol.count)):
        idx = np.arange(start[q], start[q + 1])
        short = int(sol.count[q]) - int(out[idx].sum())
        if short > 0:
            frac = z[idx] - out[idx]
            order = idx[np.lexsort((np.arange(len(idx)), -frac))]
            out[order[:short]] += 1
    return out


__all__ = ["class_choice"]
