"""The slot placer: the integer slot model's choice put on nodes by the greedy engine (issue 13).

On fragmented rounds with preemption on, the integer slot model (:mod:`gangopt.slots`) finds
the tier optimum in a fraction of a second: which pending gangs start, in which required
domain, which candidate running gangs stay and which pods of a kept elastic one go. What it
does not say is *where* each pod goes. CP-SAT placing that choice node by node
(``bench/bound_truth.py``) reaches the bound but costs 7-15 s at 1,024 nodes. This module
places it with the greedy engine's own machinery (:class:`~gangopt.solvers.greedy.engine.GreedyEngine`:
eligibility, required domains, rule 5's reserved nodes, reprieve, growth, plan assembly), with
four changes through its hooks:

* **Victims first**: the chosen evictions and shrinks are applied before any gang is placed
  (:meth:`~gangopt.solvers.greedy.engine.GreedyEngine.remove`), so a node a victim left
  receives only strictly higher pods (rule 5, the engine's reserved nodes). Candidates of the
  decided tiers are no one's victims after that; the engine's own preemption may still take
  candidates of the open tiers below when a chosen gang does not fit.
* **Chosen gangs first**, highest priority first, within a priority those with a required
  level first, then the largest pods first (first-fit decreasing), each in the domain the
  model chose (:meth:`domain_order`); then the victims no gang used go back (reprieve), and
  the other gangs are decided as greedy decides them.
* **Best fit by slots**: each role's pods go to the nodes where the fewest of them fit first
  (:meth:`node_order`), so that the holes of a fragmented cluster are used before whole nodes.
* **Deferred growth**: elastic gangs grow after every gang had its minimum (the model counts
  minimums only).
* **Whole nodes kept** (:attr:`SlotPlacer.consolidate`, the last passes of :func:`placed`):
  the nodes that can hold a chosen gang's largest pod once the lower tiers' candidates go
  (:attr:`SlotPlacer.big`) are kept for those pods while the chosen gangs are placed, and
  victims are taken node by node (:meth:`SlotPlacer.preempt`). Greedy's victim order (lowest
  cost first, wherever they are) and best fit alone left 7 priority-5 gangs of 8-GPU pods out
  at M busy 0.6 (seed 0: priority 5 at 9,783.5 GPU-eq of the model's 9,820.9, which needs all
  193 such nodes); consolidating, none (docs/benchmarks.md, "h31-plan").

The plan is a candidate like greedy's: the door keeps it only when it validates and is better
lexicographically than the plan it would replace (:func:`place_choices`).
Deterministic: no clock, no randomness (the model's solution is SCIP's under a node limit).

Measured (docs/benchmarks.md, "The slot placer"): at M 0.75 (1,024 nodes) every tier reaches
its bound (priority 0: 12,916.0 GPU-eq; greedy 12,176.0, the large-neighbourhood search
12,346.0) and CP-SAT's whole solve costs 1.5 CPU-s instead of 5.0; at M 0.6 priority 0 goes
from 4,288.8 to 5,878.8 of its 6,138.8 bound, and to the bound with a second pass that sets
the chosen gangs' preferred levels aside (:meth:`SlotPlacer.place`; docs/benchmarks.md, "M end
to end and the secondary gap"). One placement pass is 0.05-0.15 CPU-s.
Node order alone did not matter at M 0.6 (five orders of the keys below, the same gang left
out); gang order did: most constrained (fewest eligible nodes) before largest placed every
chosen gang at M 0.75, priority-then-largest left one 8-GPU fabric-selector gang out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from gangopt.arrays import BoolArray, IndexArray, IntArray, fit_counts
from gangopt.class_choice import class_choice
from gangopt.objective import SCALE, lexicographic_key, score
from gangopt.prefilter import Prefiltered
from gangopt.schema import Plan, Round, Score, Status
from gangopt.slots import MAX_COLUMNS, SlotChoice, slot_choice
from gangopt.solvers.greedy.engine import Alloc, Attempt, EngineState, GangView, GreedyEngine

PASSES = 3
"""Placer passes per choice and gang order at most (see :func:`placed`)."""
LARGEST_FIRST: tuple[str, ...] = ("failed", "largest", "nodes", "priority")
"""The chosen gangs' order of :func:`placed`'s second round of passes, when the first (highest
priority first) falls short of the model's value: largest pods first whatever their priority
(every chosen gang is wanted, so their order need not follow the priorities), then fewest
eligible nodes. At fragmented M busy 0.6 (1,024 nodes, jobs mix) the priority-5 choice's 32-
and 4-node gangs of whole-node pods found too few whole nodes once the priority-10 gangs'
whole-node pods had gone first (the choice fits node by node: the reference model with it
fixed reaches 9,820.9): priority 5 went from 9,673.8 to 9,783.5 GPU-eq of the model's
9,820.9 (seed 0), 9,670.6 to 9,712.0 of 9,728.2 (seed 1); on the tilted seed-2 round
priority 0 from 8,020.0 to 10,090.0, the bound (docs/benchmarks.md, "h30-M06"). A pass there is 0.05-0.15 CPU-s."""
CONSOLIDATE = True
"""Whether :func:`placed` tries, while short of the model's value or leaving a chosen gang out
after both gang orders, the same orders again (largest first, then by priority) with whole
nodes kept for the largest pods (:attr:`SlotPlacer.consolidate`). At fragmented M busy 0.6
(jobs mix) the door's plan went from 6.1 % / 2.4 % to 0.5 % / 0.1 % on seeds 0 and 1, proven
by the cheap bounds (docs/benchmarks.md, "h31-plan")."""
MAX_CHOICES = 4
"""Choices placed per solve at most: one per open tier, going down while each placement
improves the plan (the fragmented rounds have three tiers)."""


class SlotPlacer(GreedyEngine):
    """The greedy engine deciding a round from a :class:`~gangopt.slots.SlotChoice` (see the
    module docstring)."""

    node_keys: tuple[str, ...] = ("wanted", "slots", "room", "floor")
    gang_keys: tuple[str, ...] = ("priority", "failed", "nodes", "largest")

    explain = False
    """Its plan is one of CP-SAT's candidates: the finisher explains the answer."""

    spares_spread = False
    """Greedy's spare (:meth:`GreedyEngine.spare_spread`) is not made here: the choice already
    says which gangs start, and on the fragmented 16,384-node round at a 30 s limit the spare
    made each pass dearer (2 passes instead of 4-5) and left priority 0 at 177,704.4 GPU-eq
    against 179,239.4 without it (priority 5 the same, 178,419.7)."""

    def __init__(
        self,
        rnd: Round,
        choice: SlotChoice,
        first: frozenset[str] = frozenset(),
        *,
        spread: bool = True,
        like: GreedyEngine | None = None,
        gang_keys: tuple[str, ...] | None = None,
        consolidate: bool = False,
        resume: EngineState | None = None,
    ) -> None:
        super().__init__(rnd, "deferred", like=like)  # greedy's candidate's views and pod index
        self.decided: frozenset[tuple[int, ...]] = frozenset()
        """Transactions ``resume`` decided (greedy's highest priority): not decided again."""
        self._grown: frozenset[str] = frozenset()
        """Gangs of :attr:`decided`: greedy grew them as it admitted them (eager growth)."""
        if resume is not None:
            self.restore(resume)
            self.decided = resume.decided
            self._grown = frozenset(rnd.pending[i].name for t in resume.decided for i in t)
        self.choice = choice
        self.consolidate = consolidate
        """Whether whole nodes are kept for the chosen gangs' largest pods (:attr:`big`): every
        pod goes first to the nodes only its priority may use (:meth:`node_order`); while no
        more of those nodes are free than largest pods are left, no other pod takes one
        (:meth:`_kept_whole`); a largest pod's victims are taken node by node, other pods'
        first where no largest pod fits (:meth:`_consolidated`)."""
        self._order: tuple[IndexArray, IntArray] | None = None
        """The victim order of the transaction being preempted for (:attr:`consolidate`)."""
        if gang_keys is not None:
            self.gang_keys = gang_keys
        self.first = first
        """Chosen gangs placed before the others of their priority (they failed a pass before)."""
        self.spread = spread
        """Whether a chosen gang with a preferred level (and no required one) is placed into as
        few of its domains as it can (greedy's way), or by best fit over every node (False)."""
        self.chosen = {rnd.pending[i].name: place for i, place in choice.started.items()}
        self._rest = False
        self._wide = False
        self.widened: set[str] = set()
        """Chosen gangs placed only by evicting a candidate the model kept."""
        self._want: list[int] | None = None
        """Pods per role of the placement in progress (:meth:`place`): :meth:`node_order` sorts
        only the nodes that can be among the first that many."""
        masks: dict[bytes, BoolArray] = {}
        for g in self.pending:
            if g.name in self.chosen:
                for mask in g.elig:
                    masks.setdefault(np.packbits(mask).tobytes(), mask)
        self.wanted: IntArray = np.sum(list(masks.values()), axis=0, dtype=np.int64) if masks else np.zeros(0, np.int64)
        """Per node, how many distinct eligibility masks of the chosen gangs' roles hold it."""
        pods: list[IndexArray] = []
        for gi in sorted(choice.evicted):
            pods.append(np.arange(self.rp_start[gi], self.rp_start[gi + 1], dtype=np.intp))
        for gi, shed in sorted(choice.shed.items()):
            pods.append(self.rp_start[gi] + np.asarray(sorted(shed), dtype=np.intp))
        self.remove(pods)

    @cached_property
    def _victims(self) -> dict[bool, tuple[IndexArray, IntArray]]:
        """Greedy's victims in its order with their priorities: all of them (True), or less
        the candidates of the decided tiers (False: the model kept them)."""
        rank = self.ranked_victims()
        prio = np.asarray([self.running[gi].spec.priority for gi in rank.tolist()], dtype=np.int64)
        own = ~np.isin(prio, list(self.choice.levels))
        return {True: (rank, prio), False: (rank[own], prio[own])}

    @property
    def victim_rank(self) -> IndexArray:
        return self._victims[self._wide][0] if self._order is None else self._order[0]

    @property
    def victim_prio(self) -> IntArray:
        return self._victims[self._wide][1] if self._order is None else self._order[1]

    @cached_property
    def _biggest(self) -> list[IntArray]:
        """The chosen gangs' largest pod shapes (the largest share of a node's capacity)."""
        shapes = [
            (int(share), g.reqs[r])
            for g in self.pending
            if g.name in self.chosen
            for r, share in enumerate(self._share(g))
        ]
        top = max((sh for sh, _ in shapes), default=0)
        return list({tuple(req.tolist()): req for sh, req in shapes if sh == top}.values())

    @cached_property
    def big(self) -> IntArray:
        """Per node, how many of the chosen gangs' largest pods (:attr:`_biggest`) its room for
        the chosen tier holds: its capacity less the pods no chosen gang may take (every kept
        pod but those of preemptible gangs below the choice's priority)."""
        movable = np.asarray([bool(getattr(g.spec, "preemptible", False)) for g in self.running], dtype=np.bool_)
        fixed = self.kept & ~(movable[self.rp_gang] & (self.rp_priority < self.choice.priority))
        room = self.cap.copy(order="F")
        pods = np.flatnonzero(fixed)
        np.subtract.at(room, self.rp_node[pods], self.rp_rows[pods])
        out = np.zeros(len(room), dtype=np.int64)
        for req in self._biggest:
            out = np.maximum(out, fit_counts(room, req))
        return out

    def _is_big(self, g: GangView, r: int) -> bool:
        return any(np.array_equal(g.reqs[r], req) for req in self._biggest)

    @cached_property
    def _whole(self) -> list[int]:
        """[nodes of :attr:`big` no new pod took yet, chosen largest pods not yet placed]."""
        left = sum(
            n
            for g in self.pending
            if g.name in self.chosen
            for r, n in enumerate(self.min_counts(g))
            if self._is_big(g, r)
        )
        return [int((self.big > 0).sum()), left]

    @cached_property
    def _open(self) -> BoolArray:
        """Per node, whether it is one of :attr:`big` and no new pod took it yet."""
        return self.big > 0

    def _record_new(self, alloc: Alloc, g: GangView) -> None:
        super()._record_new(alloc, g)
        if self.consolidate and alloc:
            rows = np.asarray([node for _, node, _ in alloc], dtype=np.intp)
            self._whole[0] -= int(self._open[rows].sum())
            self._open[rows] = False
            if g.name in self.chosen:
                self._whole[1] -= sum(n for r, _, n in alloc if self._is_big(g, r))

    def _kept_whole(self, nodes: IndexArray) -> BoolArray | None:
        """Of ``nodes``, those kept for the chosen gangs' largest pods: while the chosen gangs
        are placed, every node of :attr:`big` no new pod took when there are no more of them
        than largest pods left to place (at M busy 0.6 as many as 8-GPU pods: all kept); None
        when there are more (the fragmented XL round's class choice: keeping them all cost
        priority 5 3,915 GPU-eq)."""
        if not self.consolidate or self._rest:
            return None
        free_whole, left = self._whole
        if free_whole > left:
            return None
        kept: BoolArray = self._open[nodes]
        return kept

    @cached_property
    def _victim_cost(self) -> npt.NDArray[np.float64]:
        """Per running gang, its preemption cost (0 for a gang no one may preempt)."""
        cost = np.zeros(len(self.running), dtype=np.float64)
        for gi in self._victims[True][0].tolist():
            cost[gi] = self._cost(gi)
        return cost

    def _consolidated(self, gangs: list[GangView], counts: list[list[int]]) -> tuple[IndexArray, IntArray]:
        """The victim order for :attr:`consolidate`, priority by priority as greedy's: for a
        transaction with a largest pod, the victims of the node cheapest to clear first (a
        node that cannot hold a largest pod is never cleared for one); for any other, the
        victims on no node that can hold a largest pod first."""
        rank, prio = self._victims[self._wide]
        if rank.size == 0:
            return rank, prio
        nodes = self.rp_node
        kept = self.kept
        big_nodes = self.big[nodes] > 0
        first = self.rp_start[rank]
        lengths = self.rp_start[rank + 1] - first
        owner = np.repeat(np.arange(rank.size), lengths)
        pods = np.arange(int(lengths.sum())) + np.repeat(first - (np.cumsum(lengths) - lengths), lengths)
        live = kept[pods]
        if any(self._is_big(g, r) for g, c in zip(gangs, counts, strict=True) for r, n in enumerate(c) if n):
            cost = self._victim_cost[rank]
            node_cost = np.zeros(len(self.cap), dtype=np.float64)
            lp = pods[live]
            np.add.at(node_cost, nodes[lp], cost[owner[live]] / np.maximum(lengths[owner[live]], 1))
            # Nodes by the highest floor the transaction may use first (rule 5: a node only
            # its priority may use wastes nothing), then by what clearing them costs; a node
            # that cannot hold a largest pod last.
            floor = np.maximum(self.floor, -(1 << 40)).astype(np.float64)
            floor[floor >= min(g.spec.priority for g in gangs)] = -np.inf
            node_rank = np.empty(len(node_cost), dtype=np.float64)
            node_rank[np.lexsort((node_cost, -floor, self.big == 0))] = np.arange(len(node_cost))
            pod_key = np.where(live, node_rank[nodes[pods]], np.inf)
            key = np.full(rank.size, np.inf)
            np.minimum.at(key, owner, pod_key)
        else:
            touch = np.zeros(rank.size, dtype=np.float64)
            np.maximum.at(touch, owner, (live & big_nodes[pods]).astype(np.float64))
            key = touch
        order = np.lexsort((np.arange(rank.size), key, prio))
        return rank[order], prio[order]

    def preempt(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        """Greedy's preemption among the candidates the model left open; for a chosen gang that
        still does not fit, among all (a lower tier's kept candidate gives way: lexicographically
        better than leaving the chosen gang out: at M 0.6 one priority-5 gang found no whole node
        among the model's victims, and priority 0 stayed at 4,288.8 GPU-eq instead of 5,878.8).
        With :attr:`consolidate`, each over the victims in :meth:`_consolidated`'s order."""
        found = self._preempt_once(gangs, counts)
        if found is not None or not all(g.name in self.chosen for g in gangs):
            return found
        self._wide = True
        try:
            found = self._preempt_once(gangs, counts)
        finally:
            self._wide = False
        if found is not None:
            self.widened.update(g.name for g in gangs)
        return found

    def _preempt_once(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        """Greedy's preemption over the victims :attr:`_wide` opens, in :meth:`_consolidated`'s
        order with :attr:`consolidate`."""
        if not self.consolidate:
            return super().preempt(gangs, counts)
        self._order = self._consolidated(gangs, counts)
        try:
            return super().preempt(gangs, counts)
        finally:
            self._order = None

    def transactions(self) -> list[list[int]]:
        """The chosen gangs (a group only when all of it is chosen) by priority, required level
        first, largest pod first; then the others in greedy's order."""
        order = [t for t in super().transactions() if tuple(t) not in self.decided]
        chosen = [t for t in order if all(self.pending[i].name in self.chosen for i in t)]
        rest = [t for t in order if not all(self.pending[i].name in self.chosen for i in t)]
        position = {tuple(t): k for k, t in enumerate(order)}

        def key(t: list[int]) -> tuple[int, ...]:
            gangs = [self.pending[i] for i in t]
            required = any(g.spec.topology is not None and g.spec.topology.required for g in gangs)
            largest = max(int(self._share(g).max()) for g in gangs)
            failed = any(g.name in self.first for g in gangs)
            nodes = min(len(idx) for g in gangs for idx in g.idx)
            parts = {
                "priority": -min(g.spec.priority for g in gangs),
                "failed": int(not failed),
                "required": int(not required),
                "largest": -largest,
                "nodes": nodes,
            }
            return (*(parts[k] for k in self.gang_keys), position[tuple(t)])

        return sorted(chosen, key=key) + rest

    def _share(self, g: GangView) -> IntArray:
        """Per role, its pods' largest share of a node's capacity (parts per million)."""
        biggest = np.maximum(self.cap.max(axis=0), 1)
        share: IntArray = (g.reqs * 1_000_000 // biggest).max(axis=1)
        return share

    def admit(self, gangs: list[GangView]) -> None:
        if not self._rest and not all(g.name in self.chosen for g in gangs):
            # The chosen gangs are placed: the victims none of them used go back before the
            # other gangs may take their room.
            self._rest = True
            self.final_reprieve()
        super().admit(gangs)

    def _grow_pending(self, g: GangView) -> None:
        if g.name not in self._grown:  # else grown once already, by greedy: its counts are its minimum's
            super()._grow_pending(g)

    def place(
        self, work: IntArray, g: GangView, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        """Greedy's placement; without :attr:`spread`, a chosen gang whose topology is only
        preferred goes by best fit over every node: its preferred level is a secondary term the
        model's choice does not hold, and keeping a gang in one rack can take the whole nodes
        a lower tier's chosen gang needs (M 0.6: a priority-10 gang took 7 of the 203 nodes the
        priority-5 gangs' 203 whole-node pods needed, in its rack, instead of 7 nodes only
        priority 10 could use)."""
        topo = g.spec.topology
        # Not a gang placed in slices: with the topology set aside the engine drops its slices
        # too (a slice-of-2 gang went one pod per rack: the door's validator caught it).
        unsliced = topo is not None and topo.required is None and g.slice_size == 0
        if not self.spread and g.name in self.chosen and unsliced:
            topology = False
        self._want = counts
        try:
            return super().place(work, g, counts, topology=topology)
        finally:
            self._want = None

    def domain_order(self, g: GangView, order: IndexArray) -> IndexArray:
        """The model's domain first, then greedy's best fit."""
        place = self.chosen.get(g.name)
        if place is None or place[0] != (g.spec.topology.required if g.spec.topology else None):
            return order
        first = order == place[1]
        out: IndexArray = np.concatenate([order[first], order[~first]])
        return out

    def node_order(self, rows: IntArray, nodes: IndexArray | None, g: GangView, r: int, cand: IndexArray) -> IndexArray:
        """Best fit by slots: each role's pods first on the nodes where the fewest of them fit
        (nodes where none fits left out)."""
        slots = fit_counts(rows, g.reqs[r], rows=cand)
        usable = slots > 0
        whole = self.consolidate and not self._is_big(g, r)
        kept = self._kept_whole(cand if nodes is None else nodes[cand]) if whole else None
        if kept is not None:
            usable &= ~kept
        cand, slots = cand[usable], slots[usable]
        # Nodes only this priority's peers may use first (a victim of a higher priority left
        # them: rule 5), then those the fewest chosen roles may use (a node selector's nodes
        # stay for the roles that need them), then the tightest: the roomier holes stay for
        # the gangs after.
        rows_of = cand if nodes is None else nodes[cand]
        floor = np.maximum(self.floor[rows_of], -(1 << 40))  # no overflow on -
        wanted = self.wanted[rows_of] if self.wanted.size else np.zeros(len(cand), np.int64)
        keys = {"wanted": wanted, "floor": -floor, "slots": slots}
        node_keys = self.node_keys
        if self.consolidate:
            # The nodes only this priority's peers may use first (a higher pod there wastes
            # nothing a lower one could use: at M busy 0.6, 64 of the 193 nodes that can hold
            # an 8-GPU pod are priority 10's alone).
            node_keys = ("floor", *(k for k in node_keys if k != "floor"))
        want = self._want[r] if self._want is not None and r < len(self._want) else 0
        if 0 < want < len(cand):
            # Every node here takes at least one pod, so first fit uses only the first ``want``
            # nodes of the order: sort only the nodes whose leading keys are at most the
            # ``want``-th smallest (the same first ``want`` nodes, ties in the same order).
            # At L 0.75 a role's few pods were sorted among ~4,000 nodes, 981 times a pass.
            lead = self._lead(keys, node_keys)
            if lead is not None:
                keep = lead <= np.partition(lead, want - 1)[want - 1]
                cand, rows_of = cand[keep], rows_of[keep]
                keys = {k: v[keep] for k, v in keys.items()}
        if "room" in node_keys:
            keys["room"] = (np.maximum(rows[cand], 0) / self._largest).sum(axis=1)
        ordered: IndexArray = cand[np.lexsort(tuple(keys[k] for k in reversed(node_keys)))]
        return ordered

    def _lead(self, keys: dict[str, IntArray], node_keys: tuple[str, ...]) -> IntArray | None:
        """The first two integer keys of ``node_keys`` as one (None when the first is the
        room, a float)."""
        first = node_keys[0]
        if first not in keys:
            return None
        lead = keys[first].astype(np.int64)
        second = node_keys[1] if len(node_keys) > 1 else None
        if second in keys and len(lead):
            low = keys[second].astype(np.int64)
            span = int(low.max()) - int(low.min()) + 1
            if span * (int(np.abs(lead).max()) + 1) < 1 << 60:
                lead = lead * span + (low - int(low.min()))
        return lead

    @cached_property
    def _largest(self) -> IntArray:
        """Per resource, the largest node capacity (at least 1): the room key's unit."""
        largest: IntArray = np.maximum(self.cap.max(axis=0), 1)
        return largest


def placed(
    rnd: Round,
    choice: SlotChoice,
    until: float | None = None,
    like: GreedyEngine | None = None,
    ahead: frozenset[str] = frozenset(),
    resume: EngineState | None = None,
    start: Order | None = None,
    won: list[Order] | None = None,
    hurry: bool = False,
    keep: float = 0.0,
    once: Beat | None = None,
) -> tuple[Plan, Score]:
    """The plan :class:`SlotPlacer` makes of ``choice`` (solver ``cpsat``; not yet validated),
    with its score.

    When chosen gangs do not fit, or fit only by evicting a candidate the model kept
    (:attr:`SlotPlacer.widened`), the pass is repeated with them placed first in their
    priority, at most :data:`PASSES` passes, and the best-scoring pass is kept; while the best
    is short of the model's value, the same again with the chosen gangs largest first
    (:data:`LARGEST_FIRST`). A choice valued above its own bound (:func:`_over`) is chased
    only to within the round's gap limit of the bound (L 0.75 with the free-room cut: 1 pass
    instead of 12-15, the same plan). At M 0.75 the
    first pass places every chosen gang (0.05-0.1 CPU-s). On the fragmented 4,096-node round
    (busy 0.75) the first pass placed every chosen gang but evicted 4 kept priority-0
    candidates for them (priority 0: 46,348.6 GPU-eq of the model's 46,863.6); the second,
    with those gangs first, reached 46,738.6 (0.85 CPU-s per pass there). With ``until`` (a
    :func:`time.perf_counter` instant) a further pass starts only when a pass as long as the
    last one would end before it: then a loaded machine may try fewer passes (the plan
    repeats whenever the passes end in time). ``like``: an engine of the round whose setup
    the passes share (greedy's candidate's; else the first pass's: :class:`GreedyEngine`).
    ``ahead``: chosen gangs placed first in their priority from every order's first pass on
    (:func:`place_choices` passes the node-class LP's chosen gangs its seed plan left out).
    On the fragmented 16,384-node round (busy 0.75) the class LP's choice for priority 5 is
    greedy's admissions and 3 gangs of 4-8 whole 8-GPU nodes that greedy's plan leaves out;
    the first pass in the default order left the same 3 out (priority 5 178,297.1 GPU-eq,
    below greedy's 178,311.9: not kept) and only a second pass, with them first, placed some;
    with them ahead the first pass is that pass (one of 4.2 CPU-s instead of two): priority 5
    178,367.4, priority 0 180,419.4 against greedy's 177,914.4 (docs/benchmarks.md, "h33-XL").
    ``resume``: every pass starts from this state (greedy's after its highest priority:
    :func:`place_choices`) and decides the other transactions only.
    ``hurry`` (:data:`LARGE_HURRY`): when the first order's first pass leaves chosen gangs out,
    the next order with them first, no more passes in the first order.
    ``start``: the gang order (and the gangs placed first in it) tried first, before the
    default ones (:func:`place_choices` passes the order of the taken choice's best pass to the
    same choice's gangs placed under it, :func:`_under`); ``won``: the order of the best pass is
    appended to it. ``keep``: seconds before ``until`` by which the passes after the first must
    end (:func:`place_choices` keeps the finisher's secondary LP at the plan's tiers its time).
    ``once``: no pass follows one that beats it (:class:`Beat`, :data:`LARGE_UNDER_ONCE`)."""
    chosen = {rnd.pending[i].name for i in choice.started}
    ahead = ahead & chosen
    over = _over(choice)
    best: tuple[Plan, Score] | None = None
    tried = 0
    took = 0.0
    later = None if until is None else until - keep
    """When the passes after the first must end."""

    def beaten() -> bool:
        """A pass beat ``once``: no more."""
        return once is not None and best is not None and once.beaten(best[1], choice.priority)

    def short(missing: bool = False) -> bool:
        """The best plan is below the model's value (with ``missing``, or leaves a chosen gang
        out) and one more pass ends in time; for a choice over its bound (:func:`_over`),
        below the bound by more than the round's gap limit."""
        assert best is not None
        value = _tier_value(best[1], choice.priority)
        if over:
            below = value < choice.bound - rnd.policy.gap_limit * abs(choice.bound)
        else:
            below = value < choice.value or (missing and not chosen <= set(best[0].admitted))
        return below and (later is None or time.perf_counter() + took <= later)

    orders = [(SlotPlacer.gang_keys, False), (LARGEST_FIRST, False)]
    if CONSOLIDATE:
        # After the other orders, so that the plan is never below theirs: placed before the
        # largest-first order, it reached the value first with a lower plan on 2 of 49 small
        # fragmented rounds with a choice (64-256 nodes, busy 0.6-0.9, seeds 0-4, both mixes;
        # priority 0 40 GPU-eq lower on 256 nodes, busy 0.6, seed 1), higher on 2; after
        # them, higher on 1 (256 nodes, busy 0.6, seed 4: priority 0 +5), lower on none.
        orders += [(LARGEST_FIRST, True), (SlotPlacer.gang_keys, True)]
    if start is not None:
        orders = [(start.keys, start.consolidate), *(o for o in orders if o != (start.keys, start.consolidate))]
    best_order: Order | None = None
    longest = 0.0
    carried: frozenset[str] = frozenset()
    for index, (keys, consolidate) in enumerate(orders):
        if best is not None and (beaten() or not short(consolidate)):
            continue  # the model's value reached (or no time left): not this order
        first = ahead | carried
        if start is not None and (keys, consolidate) == (start.keys, start.consolidate):
            first = ahead | (start.first & chosen)
        order_best: tuple[float, ...] | None = None
        order_first = first
        passes = 0
        while passes < PASSES:
            if tried and (beaten() or (later is not None and time.perf_counter() + took > later)):
                break
            tried += 1
            passes += 1
            began = time.perf_counter()
            placer = SlotPlacer(rnd, choice, first, like=like, gang_keys=keys, consolidate=consolidate, resume=resume)
            like = like or placer
            plan = placer.run()
            plan_score = score(rnd, plan)
            key = lexicographic_key(plan_score)
            if order_best is None or key > order_best:
                order_best, order_first = key, first
            if best is None or key > lexicographic_key(best[1]):
                best, best_order = (plan, plan_score), Order(keys, consolidate, first)
            took = time.perf_counter() - began
            longest = max(longest, took)
            missed = (chosen - set(plan.admitted)) | placer.widened
            if not missed or missed <= first or (over and not short()):
                break  # every chosen gang placed, the same left out, or a choice over its bound placed near enough
            first = first | missed
            if hurry and index == 0:
                carried = first  # the next order, with these gangs first (:data:`LARGE_HURRY`)
                break
        if short(consolidate) and not (index == 0 and carried) and not beaten():
            # Short of the model's value: this order's best pass once more with the chosen
            # gangs' preferred levels set aside (M 0.6: priority 0 5,878.8 to 6,138.8, the
            # bound; 0.15 CPU-s), if it ends in time. The best pass's order, not the last
            # one's: at M 0.6 the three passes tie at 5,878.8, and set aside after the third
            # (11 gangs first) reached 6,098.8 only.
            tried += 1
            plan = SlotPlacer(
                rnd,
                choice,
                order_first,
                spread=False,
                like=like,
                gang_keys=keys,
                consolidate=consolidate,
                resume=resume,
            ).run()
            plan_score = score(rnd, plan)
            assert best is not None
            if lexicographic_key(plan_score) > lexicographic_key(best[1]):
                best, best_order = (plan, plan_score), Order(keys, consolidate, order_first)
    assert best is not None and best_order is not None
    if won is not None:
        won.append(replace(best_order, seconds=longest))
    source = "integer slot model" if choice.levels else "node-class LP"  # :mod:`gangopt.class_choice`
    note = (
        f"slot placer: the {source}'s choice for priority {choice.priority} "
        f"(model value {choice.value / SCALE:,.1f}) placed by best fit ({tried} pass(es))"
    )
    return best[0].model_copy(update={"solver": "cpsat", "status": Status.FEASIBLE, "message": note}), best[1]


@dataclass(frozen=True)
class Beat:
    """What a pass of :func:`placed` must reach for no pass to follow it (``once``): a plan
    lexicographically above ``key`` whose value of the choice's tier is at least ``tier``."""

    key: tuple[float, ...]
    tier: int

    @classmethod
    def of(cls, plan: Score, choice: SlotChoice) -> Beat:
        """Above the plan scoring ``plan``, with :data:`UNDER_ONCE_SHARE` of what ``choice``'s
        value adds to the plan's value of its tier."""
        now = _tier_value(plan, choice.priority)
        return cls(lexicographic_key(plan), now + math.ceil(UNDER_ONCE_SHARE * max(0, choice.value - now)))

    def beaten(self, s: Score, priority: int) -> bool:
        """Whether a plan scoring ``s`` reaches it (``priority``: the choice's tier)."""
        return lexicographic_key(s) > self.key and _tier_value(s, priority) >= self.tier


UNDER_ONCE_SHARE = 0.5
"""The share of what the choice's value adds to the plan's value of its tier that the first
pass under the taken choice must gain for :data:`LARGE_UNDER_ONCE` to stop there. On the
fragmented 4,096-node busy-0.6 round that pass gains 1,535.0 GPU-eq of the 2,175.0 (71 %); on
the 1,024-node rounds of L busy 0.75's shape (``bench.xl_shape 1024 0,1``) it gained 10.0 and
0 (a secondary value only), and the further passes, the choice as it is or SCIP's whole choice
then gained 125.0 and 290.0: stopped at any gain, those were lost (docs/benchmarks.md,
"h38-L06")."""


@dataclass(frozen=True)
class Order:
    """A gang order of :func:`placed`'s passes: the chosen gangs' sort keys, whether whole
    nodes are kept (:attr:`SlotPlacer.consolidate`), and the chosen gangs placed first."""

    keys: tuple[str, ...]
    consolidate: bool
    first: frozenset[str]
    seconds: float = field(default=0.0, compare=False)
    """The longest pass of the placement it won (wall): what one more pass is taken to cost."""


LARGE_HURRY = True
"""Whether, on a round over :data:`~gangopt.slots.MAX_COLUMNS` pending and candidate gangs,
an integer slot model's choice whose first pass (priority order) leaves chosen gangs out goes
straight to the next order (largest first) with those gangs first (:func:`placed`'s
``hurry``), instead of two more passes in the priority order and one with the preferred levels
set aside. On the fragmented 4,096-node busy-0.6 round the priority-5 choice's gangs of
whole-node pods found too few whole nodes in the priority order (3 passes, priority 5 at most
35,738.5 GPU-eq), and largest first needed 3 more to reach the model's 35,816.4 (6 passes, 3.5
CPU-s); hurried, the second pass reaches it (2 passes, 1.1 CPU-s, the same plan), which leaves a
10 s limit the time to place the priority-0 choice after it (docs/benchmarks.md, "h36-L06").
Starting largest first instead reached it in 3 passes, but at L busy 0.75, where the first
pass in the priority order places the choice, it gave the same tiers with a secondary value
of 149.4 against 163.3 (gap 0.093 % against 0.082 %); hurried, the plan there is the same."""


LARGE_UNDER_ONCE = True
"""Whether, on a round over :data:`~gangopt.slots.MAX_COLUMNS` pending and candidate gangs, an
integer slot model's choice of the plan's lowest tier placed under the taken choice, when
every tier above is at its bound (:func:`finisher_keeps`), stops at its first pass that beats
the plan with :data:`UNDER_ONCE_SHARE` of the tier's promised gain, and then neither the choice
as it is nor SCIP's whole choice follows: the search after the placer has their time, beginning
with the victims of the open tier worth most
(:func:`gangopt.solvers.cpsat.lns._regional_victim_hoods`). On the fragmented 4,096-node
busy-0.6 round at 10 s only that first pass ever raised the plan (priority 0 38,057.7; its 7
more passes, 2 s, and the choice as it is lost priority 10 every time: h37-L06), and the
LP's rounded choice evicts a 640 GPU-eq gang the best plan known keeps; the search's first
regional victim neighbourhood keeps it (0.3-0.6 CPU-s): priority 0 38,357.7, the reported gap
1.212 % -> 0.81 % (docs/benchmarks.md, "h38-L06"). A first pass that does not beat the plan
so (on 256-node rounds it can lose priority 5; on 1,024-node ones gain 0-10 GPU-eq) goes on as
before."""


LAZY_CHECK = True
"""Whether :func:`place_choices` validates a plan it takes only once no further choice's
placement replaces it (then, should it break a rule, the plan it replaced stands), rather than
each plan as it is taken. The placements go on from a plan either way; a later plan that
replaces it is validated itself (or proven, and validated by the door), and the one returned is
validated as before. On the fragmented 4,096-node busy-0.6 round the priority-5 choice's plan
was validated (0.11-0.16 CPU-s) only to be replaced by the priority-0 choice's placed under it
0.3 s later: one validation instead of two before the search after the placer (docs/benchmarks.md,
"h39-L06load"). No validation has failed there since the sliced gangs' fix (:meth:`SlotPlacer.place`)."""


UNDER_PASS_SHARE = 0.5
"""The share of the taken placement's longest pass that the first pass of the next choice,
placed under the taken one (:func:`_under`), is taken to last when :func:`place_choices`
decides whether it starts before the deadline. On the fragmented 4,096-node busy-0.6 round
that pass took 0.29 s against priority 5's 0.69 s (load 0.2) and 0.82 s against 1.71 s (load
4.8): the taken choice's tiers above go in first where its best pass put them. Gated by the
whole pass, at load 4-5 the priority-0 choice never started at a 10 s limit (4.022 % on 12 of
12 runs of 955cf04's code, the command ending 8.5-9.1 s in: the finisher's reserve is 1.67 s
and it took about 0.8); with half, 4 of 6 runs at load 3.9-4.2 placed it and ended at 1.212 %
(9.71-10.27 s; 955cf04 1 of 6; docs/benchmarks.md, "h37-L06")."""


@dataclass
class Placed:
    """What :func:`place_choices` returns: the best plan, its score, and the choices tried."""

    plan: Plan
    score: Score
    tried: int = 0
    improved: int = 0
    keep: float = 0.0
    """Seconds the finisher's secondary LP at the plan's tiers may need (:func:`finisher_keeps`
    of the choice whose placement is :attr:`plan`): what follows the placer keeps them too."""


def place_choices(
    rnd: Round,
    pre: Prefiltered,
    seed: Plan,
    seed_score: Score,
    proven: Callable[[Plan, Score], Plan | None],
    until: float | None = None,
    like: GreedyEngine | None = None,
) -> tuple[Placed, Plan | None]:
    """From ``seed`` (scored ``seed_score``, already judged by ``proven``, which computed its slot
    bounds): place the slot model's choice for the first tier it leaves open; keep the plan when
    it validates and is lexicographically better (as the door chooses among its candidates: a
    higher tier gained may cost a lower one, which is what the model's choice does); go on down
    the tiers while that improves. Returns the best plan and, when ``proven`` (the cheap bounds
    within the gap limit) holds for it, that plan marked as the answer. The plan returned is
    validated here (not one a later choice's plan replaced: :data:`LAZY_CHECK`); the answer is
    validated by the door (:func:`gangopt.solve.run`, which returns greedy's plan should it
    break a rule: seen once, a sliced gang's slices set aside by the last pass, fixed in
    :meth:`SlotPlacer.place`), not twice: at 4,096 nodes one validation of the placed plan costs
    0.5-0.7 CPU-s. With ``until`` (a :func:`time.perf_counter` instant) no pass nor choice
    starts that would end after it, a pass taken to last as long as the last one and a choice as
    long as the longest pass of the last placement (:func:`placed`, :attr:`Order.seconds`: on L
    busy 0.6 the priority-5 choice's whole placement, 3.5 s, kept priority 0's out of a 10 s
    limit); ``like``: an engine of the round whose setup the placer's engines share (greedy's
    candidate's).

    A choice that is the LP's own solution (:attr:`~gangopt.slots.SlotChoice.rounded`: a large
    round, no SCIP) whose placed plan is not proven gets a second chance: SCIP's whole solution
    for the same tier, placed too (when it ends in time), and the better plan goes on. At L 0.75
    the LP's choice is proven at once (0.10 %); the tilted L round needs SCIP's.

    A choice below the taken one is placed first under the taken choice's decisions above its
    tier (:func:`_under`), in the order of the taken choice's best pass, and then as it is when
    that still ends in time; the better plan goes on. At L busy 0.6 the LP's priority-0 choice
    as it is lost 176.7 GPU-eq on priority 10 on every pass and was refused; under the
    priority-5 choice it holds priorities 10 and 5 and gains 1,100 on priority 0 (h34-lower,
    deterministic, after 14 passes), 1,535 in the priority-5 choice's order on its first pass:
    inside a 10 s limit since h36-L06 (4.0 % -> 2.2 %)."""
    from gangopt.validation import validate  # judges a plan; no cycle (validation imports no solver)

    out = Placed(plan=seed, score=seed_score)
    taken: list[Placed] = []
    """The placer's results each taken plan replaced, the seed first: the last is validated
    once no further choice replaces it (:data:`LAZY_CHECK`)."""
    tried: list[SlotChoice] = []
    above: SlotChoice | None = None
    """The choice whose placement is ``out.plan``."""
    above_order: Order | None = None
    """The order of ``above``'s best pass (:func:`placed`'s ``won``)."""
    took = step = 0.0
    large = len(pre.pending) + len(pre.candidates) > MAX_COLUMNS
    while out.tried < MAX_CHOICES:
        # Only after an integer slot model's choice (levels: the measured case); XL's node-class
        # choices (4 s passes against a capped reserve) keep the whole pass.
        if out.tried and not _next_in_time(step, until, above is not None and bool(above.levels)):
            break  # not one pass of the next placement would end in time
        began = time.perf_counter()
        values = {t.priority: round(t.value * SCALE) for t in out.score.tiers}
        choice = slot_choice(pre, values) or class_choice(pre, values, until)
        if choice is None or choice.value <= values.get(choice.priority, 0) or _seen(choice, tried):
            break
        tried.append(choice)
        out.tried += 1
        # The node-class LP's choice (no levels: :mod:`gangopt.class_choice`): the gangs it
        # starts that the plan it bounded left out go first (:func:`placed`'s ``ahead``).
        ahead = frozenset() if choice.levels else _left_out(rnd, choice, out.plan)
        won: list[Order] = []
        # Under the taken choice first (its decisions above this tier, this choice's at it and
        # below, in the taken placement's order), then the choice as it is when a pass of the
        # first placement's length still ends in time; the better goes on. On L busy 0.6 the
        # priority-0 choice as it is lost priority 10 on every pass (the LP spread priority-10
        # gangs over racks), and at a 10 s limit its passes took the time the placement under
        # the priority-5 choice needed (priority 0 38,057.7 GPU-eq on its first pass, against
        # the plan's 36,522.7: docs/benchmarks.md, "h36-L06").
        tries: list[tuple[SlotChoice, Order | None]] = []
        lower = _under(rnd, choice, above)
        if lower is not None:
            tries.append((lower, above_order))
        keep = finisher_keeps(pre, out.score, choice, above)
        # A large round's lowest tier under the taken choice: no pass after the first that pays
        # (:class:`Beat`), nothing after the placement, then the search (:data:`LARGE_UNDER_ONCE`).
        once = LARGE_UNDER_ONCE and large and keep > 0 and lower is not None and bool(choice.levels)
        tries.append((choice, None))
        beat = Beat.of(out.score, choice) if once else None
        """What the placement under the taken choice beats with one pass to stop there."""
        stopped = False
        later = None if until is None else until - keep
        """When what follows the first pass under the taken choice must end (:func:`finisher_keeps`)."""
        placement: tuple[Plan, Score, SlotChoice, Order] | None = None
        for this, start in tries:
            if placement is not None and (stopped or (later is not None and time.perf_counter() + step > later)):
                break
            ahead = frozenset() if this.levels else _left_out(rnd, this, out.plan)
            resume = _resume(rnd, this, out.plan, like, ahead)
            hurry = LARGE_HURRY and large and bool(this.levels) and start is None
            once_key = beat if start is not None else None
            other, other_score = placed(
                rnd, this, until, like, ahead, resume, start=start, won=won, hurry=hurry, keep=keep, once=once_key
            )
            stopped = beat is not None and start is not None and beat.beaten(other_score, choice.priority)
            took = time.perf_counter() - began
            step = max(step, won[-1].seconds) if placement is not None else won[-1].seconds
            if placement is None or lexicographic_key(other_score) > lexicographic_key(placement[1]):
                placement = (other, other_score, this, won[-1])
        assert placement is not None
        plan, plan_score, choice, order = placement
        better = lexicographic_key(plan_score) > lexicographic_key(out.score)
        answer = proven(plan, plan_score) if better else None
        # Placed to the tier's bound and taken: SCIP's whole choice cannot do better on the
        # tier (M busy 0.6 seed 0: 1.9 s of the clock's 8 s went to placing it again).
        reached = better and _tier_value(plan_score, choice.priority) >= choice.bound
        retry = choice.rounded and answer is None and not reached and not stopped
        if retry and (later is None or time.perf_counter() + took <= later):
            # The LP's own solution placed (no SCIP, :func:`gangopt.slots.slot_choice`) is not
            # proven: SCIP's whole solution, placed, as before the LP's choice (tilted L 0.75).
            whole = slot_choice(pre, values, whole=True)
            if whole is not None and whole.value > values.get(whole.priority, 0) and not _seen(whole, tried):
                tried.append(whole)
                other, other_score = placed(rnd, whole, until, like, won=won)
                took = time.perf_counter() - began
                if lexicographic_key(other_score) > lexicographic_key(plan_score):
                    plan, plan_score, choice, order = other, other_score, whole, won[-1]
                    better = lexicographic_key(plan_score) > lexicographic_key(out.score)
                    answer = proven(plan, plan_score) if better else None
        if not better:
            break  # not taken, so not validated
        if answer is None and not LAZY_CHECK and validate(rnd, plan):
            break  # never seen: the engine keeps every rule; the plan stays as it was
        if answer is None:
            taken.append(replace(out))  # what it replaces, the seed first (:data:`LAZY_CHECK`)
        out.plan, out.score, above, above_order = plan, plan_score, choice, order
        out.improved += 1
        out.keep = keep
        if answer is not None:
            return out, answer
    while LAZY_CHECK and taken and validate(rnd, out.plan):
        # Never seen: the engine keeps every rule. The plan it replaced stands.
        out = replace(taken.pop(), tried=out.tried)
    return out, None


def finisher_keeps(pre: Prefiltered, plan: Score, choice: SlotChoice, above: SlotChoice | None) -> float:
    """Seconds the passes after the first must leave before the placer's deadline when
    ``choice`` is placed under ``above`` (:func:`_under`), whose placement is the plan scoring
    ``plan``: when ``above`` reached its bound and ``choice`` is of the plan's lowest tier, every
    tier but the lowest is closed, and the finisher's secondary LP at the plan's tiers
    (:func:`gangopt.annotate.at_plan_seconds`) may be what proves the plan; else none.

    On the fragmented 4,096-node busy-0.6 round at 10 s the placement under priority 5's
    choice reached priority 0 = 38,057.7 GPU-eq on its first pass and its 7 more passes found
    nothing (5.3-7.7 s: h37-L06 in docs/benchmarks.md), and the LP they squeezed is what makes
    the plan's gap 1.21 % instead of 2.20 %. Which passes ever paid, placer pass by pass: under
    the taken choice only the first, on that round at 10 and 30 s and on the 1,024-node rounds
    of its shape (16 passes each, ``bench.xl_shape`` L path); on the 256- and 512-node ones a
    later pass gained 3.6 or 10.5 GPU-eq of priority 5 or 5.0 of priority 0, and the choice as
    it is beat the placement under the taken one on 3 of the 5 rounds with one. Those rounds
    keep about 0.1 s (256 nodes); the 13 L paths end the same but one, 1024/250/1, whose SCIP
    whole-choice retry (+5.0 on priority 0) no longer fits its 10 s."""
    from gangopt.annotate import at_plan_seconds  # the finisher's own estimate; no cycle at run time

    if above is None or above.priority <= choice.priority:
        return 0.0
    if _tier_value(plan, above.priority) < above.bound or choice.priority > min(t.priority for t in plan.tiers):
        return 0.0
    return at_plan_seconds(pre)


def _next_in_time(step: float, until: float | None, under: bool) -> bool:
    """Whether the next choice's first pass ends by ``until`` (None: no clock), taken to last
    ``step`` (the longest pass of the last placement), or :data:`UNDER_PASS_SHARE` of it when
    it is placed ``under`` the taken choice first (:func:`_under`)."""
    share = UNDER_PASS_SHARE if under else 1.0
    return until is None or time.perf_counter() + share * step <= until


def _resume(
    rnd: Round, choice: SlotChoice, plan: Plan, like: GreedyEngine | None, ahead: frozenset[str]
) -> EngineState | None:
    """Greedy's state after its highest priority (:attr:`GreedyEngine.top_state`), for the
    node-class LP's choice (no victims named) of a lower tier, none of whose gangs to place
    first is of that priority, from a plan that admits what greedy admitted there (greedy's
    own): the placer's passes then leave that priority as greedy decided it and start after.
    At XL (16,384 nodes, busy 0.75) greedy's priority-10 transactions are 1.3 of its pass's 3.9
    CPU-s; the placer's pass so started gave priority 5 178,382.4 GPU-eq and priority 0
    179,949.4, against 178,367.4 and 180,419.4 placing priority 10 again by best fit and
    greedy's 178,311.9 and 177,914.4 (docs/benchmarks.md, "h33-XL")."""
    state = like.top_state if like is not None and not choice.levels else None
    if state is None:
        return None
    decided = {rnd.pending[i].name for t in state.decided for i in t}
    if choice.priority >= max(rnd.pending[i].priority for t in state.decided for i in t) or decided & ahead:
        return None
    return state if decided & set(plan.admitted) == decided & set(state.admitted) else None


def _under(rnd: Round, choice: SlotChoice, above: SlotChoice | None) -> SlotChoice | None:
    """``choice`` (of tier p) with the tiers above p decided as ``above`` (the choice of a
    higher tier whose placement is the plan) decided them: its started gangs and victims above
    p, ``choice``'s at p and below. None without ``above`` or when it is not of a higher tier.

    On L busy 0.6 (4,096 nodes, ``python -m bench.fragmented_table L 0.6``; in process,
    deterministic) the LP's priority-0 choice placed reaches priority 0 39,182.7 GPU-eq, 2,660
    above the plan of the priority-5 choice (36,522.7), but loses 176.7 on priority 10: the
    LP spread three priority-10 gangs over racks. The gain is all in the victims (774 priority-0
    evictions, 708 placed so; the same 396 priority-0 gangs start): the same choice with the
    tiers above pinned where the plan has them (the placer resumed from the plan's pass's state
    once its tiers were decided) gained nothing (36,522.7: no room freed for priority 0). With
    the priority-5 choice's gangs and victims above and the LP's priority-0 victims, priority
    10 and 5 hold (23,208.3, 35,816.4) and priority 0 is 37,622.7: +1,100 GPU-eq, taken
    (docs/benchmarks.md, "h34-lower")."""
    if above is None or above.priority <= choice.priority:
        return None
    p = choice.priority
    high = {i for i in choice.started if rnd.pending[i].priority > p}
    return replace(
        choice,
        started={**{i: d for i, d in choice.started.items() if i not in high}, **above.started},
        evicted=frozenset(i for i in choice.evicted if rnd.running[i].priority <= p)
        | frozenset(i for i in above.evicted if rnd.running[i].priority > p),
        shed={
            **{i: pods for i, pods in choice.shed.items() if rnd.running[i].priority <= p},
            **{i: pods for i, pods in above.shed.items() if rnd.running[i].priority > p},
        },
    )


def _over(choice: SlotChoice) -> bool:
    """Whether ``choice`` is valued above its own bound: the LP's solution read at one half
    (:attr:`~gangopt.slots.SlotChoice.rounded`) that cannot fit whole, so no placement reaches
    its value and some chosen gangs must stay out; no pass can gain more on its tier than the
    bound less the best pass.

    Seen on the fragmented 4,096-node round (busy 0.75) once the prefilter holds the gangs
    that may preempt nothing to the free room (49 more gangs pruned): priority 0's choice is
    valued 51,099.9 GPU-eq against its bound of 51,020.5, and the first pass reaches 51,019.9.
    Chasing the value, :func:`placed` ran every order, 12-15 passes of 0.25-0.48 s, each
    leaving 2 chosen gangs out at 51,019.9 (the missed gangs only traded places) and none
    better: the solve went from 2.4 to 6.9 s. Not seen on any other round measured (L busy
    0.6, M busy 0.6 and 0.75, 90 small fragmented rounds of 64-256 nodes: value at or under
    the bound; docs/benchmarks.md, "h35-prune"). That a further pass with the same shortfall
    proves nothing in general: on 64 nodes (busy 0.75, seed 2) the largest-first order's
    second pass reached the value after the first order and its own first pass had left the
    same gang out at the same value; on 256 nodes (busy 0.75, seed 1, tilted) the pass
    with preferred levels set aside did, after three passes at the same value, a gang traded
    each time."""
    return choice.value > choice.bound


def _left_out(rnd: Round, choice: SlotChoice, plan: Plan) -> frozenset[str]:
    """The gangs ``choice`` starts that ``plan`` does not admit."""
    return frozenset(rnd.pending[i].name for i in choice.started) - set(plan.admitted)


def _tier_value(s: Score, priority: int) -> int:
    """The value of tier ``priority`` in ``s``, in objective units."""
    return next((round(t.value * SCALE) for t in s.tiers if t.priority == priority), 0)


def _seen(choice: SlotChoice, tried: list[SlotChoice]) -> bool:
    return any(
        c.priority == choice.priority and c.started == choice.started and c.evicted == choice.evicted for c in tried
    )


__all__ = ["MAX_CHOICES", "Placed", "SlotPlacer", "place_choices", "placed"]
