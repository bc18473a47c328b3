"""Kueue: ClusterQueue admission with cohorts, borrowing, preemption and TAS.

See docs/peers.md for the decision procedure this emulation follows and what it leaves out;
the shared machinery is :mod:`gangopt.solvers.peers.common`.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cached_property
from typing import Literal

import numpy as np

from gangopt.arrays import IntArray
from gangopt.quantities import human
from gangopt.schema import NODE_LEVEL, PendingGang, Plan, Policy, Round
from gangopt.solvers.greedy.engine import Alloc, Attempt, GangView, WaitingCode, decided
from gangopt.solvers.peers.common import Peer, Stop, has_topology, stopping, victim_units

QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]


class _Kueue(Peer):
    solver = "kueue_like"
    node_score = "least"
    grows_running = False

    def __init__(self, rnd: Round, strategy: QueueingStrategy) -> None:
        super().__init__(rnd)
        self.eager = False  # an admitted workload keeps the count it was admitted with
        self.strategy = strategy
        defined = {q.name for q in rnd.queues}
        implicit = sorted({g.queue for g in (*rnd.running, *rnd.pending)} - defined)
        total = self.cap.sum(axis=0)
        self._extend_quota(
            [
                (q, j, int(total[j]), f"ClusterQueue {q} (implicit: the whole cluster)")
                for q in implicit
                for j in np.flatnonzero(total > 0).tolist()
            ]
        )
        self.nominal = {q.name: q.nominal for q in rnd.queues}
        self.cohort = rnd.cohort_roots

    def _fits_quota(self, gangs: list[GangView], counts: list[list[int]], used: IntArray | None = None) -> bool:
        demand = sum(
            (np.asarray(c, dtype=np.int64) @ g.qreq for g, c in zip(gangs, counts, strict=True)),
            start=np.zeros(self.quota.size, dtype=np.int64),
        )
        return bool(((self.used if used is None else used) + demand <= self.limit).all())

    def _queue_usage(self, q: str) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for gi, g in enumerate(self.running):
            if g.spec.queue == q:
                s, e = self.rp_start[gi], self.rp_start[gi + 1]
                vec = self.rp_rows[s:e][self.kept[s:e]].sum(axis=0)
                for j, res in enumerate(self.res):
                    out[res] += int(vec[j])
        by_name = {x.name: x for x in (*self.pending, *self.running)}
        for name, alloc in self.allocs.items():
            g = by_name[name]
            if g.spec.queue == q:
                for r, _, k in alloc:
                    for j, res in enumerate(self.res):
                        out[res] += k * int(g.reqs[r][j])
        return out

    def _borrowing(self, q: str, extra: IntArray | None = None) -> bool:
        if self.cohort.get(q) is None:
            return False
        usage = self._queue_usage(q)
        nominal = self.nominal.get(q, {})
        for j, res in enumerate(self.res):
            more = 0 if extra is None else int(extra[j])
            if res in nominal and usage[res] + more > nominal[res]:
                return True
        return False

    def _nominate(self, gangs: list[GangView]) -> tuple[str, list[list[int]]]:
        """Flavor assignment on quota: Fit with every pod; else the largest count that fits
        (partial admission, binary search) for elastic workloads; else Preempt or NoFit."""
        full = [self._full_counts(g) for g in gangs]
        if self._fits_quota(gangs, full):
            return "Fit", full
        low = [self.min_counts(g) for g in gangs]
        if len(gangs) == 1 and sum(low[0]) < sum(full[0]) and self._fits_quota(gangs, low):
            g = gangs[0]
            lo, hi = sum(low[0]), sum(full[0])
            while hi - lo > 1:
                mid = (lo + hi) // 2
                c = [a + b for a, b in zip(low[0], self.more_pods(g, low[0], mid - sum(low[0])), strict=True)]
                if self._fits_quota(gangs, [c]):
                    lo = mid
                else:
                    hi = mid
            return "Fit", [[a + b for a, b in zip(low[0], self.more_pods(g, low[0], lo - sum(low[0])), strict=True)]]
        return ("Preempt" if self.rnd.policy.preemption else "NoFit"), full

    def run(self) -> Plan:
        heads: dict[str, list[list[int]]] = defaultdict(list)
        for members in self.transactions():  # priority, then FIFO within each ClusterQueue
            heads[self.pending[members[0]].spec.queue].append(members)
        blocked: set[str] = set()
        while not self._stopped_at(heads):
            entries = []
            for q in sorted(heads):
                if heads[q] and q not in blocked:
                    gangs = [self.pending[i] for i in heads[q][0]]
                    mode, counts = self._nominate(gangs)
                    demand = sum(np.asarray(c, dtype=np.int64) @ g.reqs for g, c in zip(gangs, counts, strict=True))
                    borrow = self._borrowing(q, np.asarray(demand))
                    first = gangs[0].spec
                    assert isinstance(first, PendingGang)
                    entries.append((borrow, -first.priority, first.submit_time, first.name, q, mode, gangs, counts))
            if not entries:
                break
            admitted_before = len(self.admitted)
            for *_, q, mode, gangs, counts in sorted(entries, key=lambda e: e[:4]):
                if self._stopped_at(heads):
                    break
                if mode == "Fit" and not self._fits_quota(gangs, counts):
                    if len(self.admitted) > admitted_before:
                        continue  # "no longer fits after processing another workload": next cycle
                    mode = "Preempt" if self.rnd.policy.preemption else "NoFit"
                heads[q].pop(0)
                if self._process(gangs, counts, mode):
                    continue
                if self.strategy == "StrictFIFO":
                    blocked.add(q)
                    for members in heads[q]:
                        self._wait_as(
                            [self.pending[i] for i in members],
                            "policy",
                            f"StrictFIFO: waits behind the head of ClusterQueue {q}, {gangs[0].name}, "
                            "which cannot be admitted",
                        )
                    heads[q] = []
        self.final_reprieve()
        return self.plan() if self.stopped is None else self._stopped_plan()

    def _stopped_at(self, heads: dict[str, list[list[int]]]) -> bool:
        """Whether the pass's stop (:attr:`~gangopt.solvers.greedy.engine.GreedyEngine.stop`) has
        ended it (asked again: once it has); at its first True every workload left in ``heads``
        (the heads not yet processed included) waits "not considered" and ``heads`` is emptied."""
        if self.stopped is not None:
            return True
        if self.stop is None or not self.stop():
            return False
        self._not_considered([members for q in sorted(heads) for members in heads[q]])
        heads.clear()
        return True

    def _process(self, gangs: list[GangView], counts: list[list[int]], mode: str) -> bool:
        tas = any(has_topology(g) for g in gangs)
        result: Attempt | None = None
        if mode == "Fit":
            result = self.attempt(gangs, counts, self.free.copy(order="K"), self.used)
            if result is None and tas and self.rnd.policy.preemption:
                result = self._classical(gangs, counts)
        elif mode == "Preempt":
            result = self._classical(gangs, counts)
        if result is not None:
            self.commit(gangs, counts, result)
            return True
        code, reason = self._why(gangs, counts, mode, tas)
        self._wait_as(gangs, code, reason)
        return False

    def _why(self, gangs: list[GangView], counts: list[list[int]], mode: str, tas: bool) -> tuple[WaitingCode, str]:
        g, c = gangs[0], counts[0]
        found = self.diagnose(g, c, alone=True)
        code, reason = found if found is not None else ("capacity", "the workloads do not fit together")
        role = g.spec.roles[0].name
        if code == "quota" or (mode != "Fit" and not self._fits_quota(gangs, counts)):
            demand = np.asarray(c, dtype=np.int64) @ g.qreq
            over = np.flatnonzero(self.used + demand > self.limit)
            if over.size:
                k = int(over[0])
                res = self.res[int(self.quota.resource[k])]
                more = int(self.used[k] + demand[k] - self.limit[k])
                return "quota", (
                    f"couldn't assign flavors to pod set {role}: insufficient unused quota for {res} in flavor "
                    f"default-flavor ({self.quota.labels[k]}), {human(more, res)} more needed"
                )
        if code == "eligibility":
            return code, f"couldn't assign flavors to pod set {role}: {reason}"
        if tas:
            topo = g.spec.topology
            level = (topo.required or topo.preferred or topo.slice_level) if topo else None
            return (
                "topology",
                f"couldn't assign flavors to pod set {role}: topology \"{level}\" doesn't allow to fit "
                f"any of {sum(c)} pod(s)",
            )
        return code, (
            f"quota reserved but pods unschedulable ({self._kube_message(g, c)}); waitForPodsReady would "
            "evict and requeue the workload, so it is not started"
        )

    def _classical(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        """Classical preemption: candidates are preemptible workloads of the same ClusterQueue,
        or of cohort peers that are borrowing, that the queue's policy lets every workload of the
        transaction preempt (``withinClusterQueue``, ``reclaimWithinCohort``,
        ``borrowWithinCohort``: the round's :class:`~gangopt.schema.QueuePreemption`); other
        queues first, then lower priority, then the newest; remove in order until the workload
        fits, fill back in reverse."""
        q = gangs[0].spec.queue
        allowed = self.allowed_victims(gangs, counts, self.victim_rank)
        # Over the allowed victims at once (tens of thousands per preemption at fragmented XL):
        # other queues' gangs only when borrowing in the same cohort, asked once per queue.
        names, code = self._queue_codes
        own = names.index(q) if q in names else -1
        other = code[allowed] != own
        ok = np.asarray(
            [
                name != q
                and self.cohort.get(q) is not None
                and self.cohort.get(name) == self.cohort.get(q)
                and self._borrowing(name)
                for name in names
            ],
            dtype=np.bool_,
        )
        cands = allowed[~other | ok[code[allowed]]] if allowed.size else allowed
        if cands.size == 0:
            return None
        other = code[cands] != own
        # other queues first, then lower priority, then the newest (highest index)
        victims = self.unblocked(cands[np.lexsort((-cands, self.running_prio[cands], ~other))])
        return self.remove_then_fill(gangs, counts, *victim_units(self, victims))

    @cached_property
    def _queue_codes(self) -> tuple[list[str], IntArray]:
        """The running gangs' queues (in order of first appearance) and each gang's index there."""
        names: dict[str, int] = {}
        code = [names.setdefault(g.spec.queue, len(names)) for g in self.running]
        return list(names), np.asarray(code, dtype=np.intp)

    def place(
        self, work: IntArray, g: GangView, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        if topology and has_topology(g):
            return self._tas(work, g, counts)
        return super().place(work, g, counts, topology=topology)

    def _tas(self, work: IntArray, g: GangView, counts: list[int]) -> tuple[Alloc, int | None] | None:
        """KEP-2724 "Computing the assignment": pod counts per domain (phase 1); required: the
        domain of that level that fits with the least leftover (BestFit); preferred: that level,
        going up while no single domain fits; then down the tree, fewest domains first."""
        topo = g.spec.topology
        assert topo is not None
        offers, _, _ = self._offers(work, g, counts)
        desired = sum(counts)
        levels = self._tree()
        size = g.slice_size or 1
        slice_level = topo.slice_level if g.slice_size else None
        pick: tuple[int, int] | None = None
        if topo.required is not None or topo.preferred is not None:
            li = levels.index(topo.required or topo.preferred or NODE_LEVEL)
            while li >= 0:
                vals = offers[levels[li]]
                fits = np.flatnonzero(vals >= desired)
                if fits.size:
                    pick = (li, min(fits.tolist(), key=lambda d: (int(vals[d]) - desired, d)))
                    break
                if topo.required is not None:
                    return None
                li -= 1
        if pick is None:
            slots = self._distribute(offers, -1, np.arange(len(work), dtype=np.intp), desired, size, slice_level)
        elif levels[pick[0]] == NODE_LEVEL:
            slots = [(pick[1], desired)]
        else:
            members = self.level(levels[pick[0]])[1][pick[1]]
            slots = self._distribute(offers, pick[0], members, desired, size, slice_level)
        trial = work.copy(order="K")
        alloc = self._assign(trial, g, counts, slots)
        if alloc is None:
            return None
        work[:] = trial
        dom = int(self.level(topo.required)[0][alloc[0][1]]) if topo.required else None
        return alloc, dom


def kueue_like(
    rnd: Round, policy: Policy | None = None, *, strategy: QueueingStrategy = "BestEffortFIFO", stop: Stop = None
) -> Plan:
    """Kueue admission with classical preemption and TAS (peers.md §2.3).

    Mimics:

    * **Cycles of heads**: each cycle takes the **head** of every ClusterQueue (the round's
      queues; pending workloads ordered by priority, then submission time), nominates each on
      quota: ``Fit`` with all pods; for elastic workloads the largest count that fits (partial
      admission, binary search down to the minimum); else ``Preempt`` or ``NoFit``.
    * **Order of entries** within a cycle: not borrowing before borrowing, then priority, then
      FIFO; each is re-checked against the usage taken earlier in the cycle ("no longer fits"
      goes back to the next cycle). Cycles repeat until no head is left.
    * ``BestEffortFIFO`` (default): an inadmissible head is parked and the next workload of its
      queue becomes head; ``StrictFIFO``: the head blocks its ClusterQueue (head-of-line).
    * **Placement**: workloads with a topology request through TAS (required: BestFit — the
      domain with the least leftover; preferred: that level, going up while none fits; then down
      the tree using the fewest, largest domains); others pod by pod with kube-scheduler's
      ``LeastAllocated``. A workload whose quota fits but whose pods do not is not started:
      Kueue would reserve quota, the pods would stay unschedulable and ``waitForPodsReady``
      would evict it (Kueue #5243); without TAS there is no preemption for capacity.
    * **Classical preemption** as the preemptor's queue's policy says (``within_queue``,
      ``reclaim_within_cohort``, ``borrow_within_cohort``: Kueue's ``withinClusterQueue``,
      ``reclaimWithinCohort``, ``borrowWithinCohort``); only its own queue and cohort peers that
      borrow, as in Kueue (``other_queues`` adds nothing here): candidates from other queues
      first, then lower priority, then the newest; **removed in order until the workload fits,
      then filled back in reverse**. Also for TAS workloads whose topology does not fit.
    * Reasons as Kueue words them (``couldn't assign flavors to pod set ...: insufficient
      unused quota for gpu in flavor ..., N more needed``).

    Leaves out: resource flavors (one flavor per queue: the round's nodes), fair sharing, the
    preemptor-first and quota-reserved-first gates, admission checks,
    and running elastic workloads growing. A queue the round does not define is a
    ClusterQueue whose nominal quota is the whole cluster (its usual setup). Evictions and the
    admission they make room for land in the same plan (Kueue admits in a later cycle).
    Deviation the plan contract imposes: a victim that frees only quota, on nodes the workload
    does not use, is not evicted (then the workload waits). Gang groups are one workload.

    ``stop``: admission ends when it says so, the workloads not reached waiting "not considered"
    (:func:`~gangopt.solvers.peers.common.stopping`).
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return decided(lambda: stopping(_Kueue(rnd, strategy), stop), _Kueue.decide)
