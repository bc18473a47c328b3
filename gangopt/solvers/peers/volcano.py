"""Volcano: allocate with proportion (deserved shares), preempt and reclaim.

See docs/peers.md for the decision procedure this emulation follows and what it leaves out;
the shared machinery is :mod:`gangopt.solvers.peers.common`.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gangopt.arrays import IntArray
from gangopt.quantities import human
from gangopt.schema import NODE_LEVEL, Plan, Policy, Round
from gangopt.solvers.greedy.engine import Alloc, Attempt, GangView, WaitingCode, decided
from gangopt.solvers.peers.common import FloatArray, Peer, Stop, near_domains, stopping


class _Volcano(Peer):
    solver = "volcano_like"
    node_score = "most"

    def __init__(self, rnd: Round) -> None:
        super().__init__(rnd)
        self.deserved, real = self._proportion()
        self._qrows: dict[str, list[int]] = defaultdict(list)
        extra: list[tuple[str, int, int, str]] = []
        deserved_at: list[int] = []
        for q, vec in self.deserved.items():
            for j in np.flatnonzero(self._request[q] > 0).tolist():
                self._qrows[q].append(self.quota.size + len(extra))
                extra.append((q, j, int(real[q][j]), f"queue {q} (capability)"))
                deserved_at.append(int(vec[j]))
        base = self.quota.size
        self._extend_quota(extra)
        self._deserved_at = np.zeros(self.quota.size, dtype=np.int64)
        self._deserved_at[base:] = deserved_at

    def _proportion(self) -> tuple[dict[str, FloatArray], dict[str, FloatArray]]:
        """proportion plugin: deserved share per queue by water-filling (weight 1 each,
        capability = the queue's gangopt limit, guarantee = its nominal quota); and each queue's
        ``realCapability`` = min(capability, total - the other queues' guarantees)."""
        names = sorted({g.queue for g in (*self.rnd.running, *self.rnd.pending)})
        defined = {q.name: q for q in self.rnd.queues}
        nres = len(self.res)
        col = {r: j for j, r in enumerate(self.res)}
        request = {q: np.zeros(nres) for q in names}
        if len(self.rp_rows):  # every running pod's requests, summed per queue at once
            row = {q: i for i, q in enumerate(names)}
            per_queue = np.zeros((len(names), nres), dtype=np.int64)
            gang_row = np.asarray([row[g.spec.queue] for g in self.running], dtype=np.intp)
            np.add.at(per_queue, gang_row[self.rp_gang], self.rp_rows)
            for q, i in row.items():
                request[q] += per_queue[i]
        for g in self.pending:
            request[g.spec.queue] += np.asarray(self._full_counts(g), dtype=np.float64) @ g.reqs
        self._request = request
        capability = {q: np.full(nres, np.inf) for q in names}
        guarantee = {q: np.zeros(nres) for q in names}
        for q in names:
            spec = defined.get(q)
            if spec is None:
                continue
            for res, amount in spec.nominal.items():
                guarantee[q][col[res]] = amount
                if spec.cohort is None:
                    capability[q][col[res]] = amount
                elif res in spec.borrowing_limit:
                    capability[q][col[res]] = amount + spec.borrowing_limit[res]
        sched = np.asarray([n.schedulable for n in self.rnd.cluster.nodes], dtype=np.bool_)
        remaining = self.cap[sched].sum(axis=0).astype(np.float64)
        deserved = {q: np.zeros(nres) for q in names}
        met: set[str] = set()
        for _ in range(64):
            active = [q for q in names if q not in met]
            if not active or remaining.sum() <= 0:
                break
            share = remaining / len(active)
            moved = np.zeros(nres)
            for q in active:
                old = deserved[q].copy()
                new = np.minimum(np.minimum(old + share, capability[q]), request[q])
                new = np.maximum(new, guarantee[q])
                deserved[q] = new
                moved += new - old
                if (request[q] <= new).all() or (new >= capability[q]).all():
                    met.add(q)
            remaining = np.maximum(remaining - moved, 0)
            if moved.sum() <= 1e-9:
                break
        total = self.cap[sched].sum(axis=0).astype(np.float64)
        guaranteed = sum((guarantee[q] for q in names), start=np.zeros(nres))
        real = {q: np.minimum(capability[q], np.maximum(total - (guaranteed - guarantee[q]), 0)) for q in names}
        return {q: np.floor(v) for q, v in deserved.items()}, {q: np.floor(v) for q, v in real.items()}

    def _share(self, q: str) -> float:
        rows = self._qrows.get(q, [])
        if not rows:
            return 0.0
        return float(max(self.used[c] / max(1, self._deserved_at[c]) for c in rows))

    def _overused(self, q: str) -> bool:
        rows = self._qrows.get(q, [])
        return bool(rows) and all(self.used[c] >= self._deserved_at[c] for c in rows)

    def run(self) -> Plan:
        queues: dict[str, list[list[int]]] = defaultdict(list)
        for members in self.transactions():
            queues[self.pending[members[0]].spec.queue].append(members)
        while any(queues.values()):
            if self.stop is not None and self.stop():
                self._not_considered([members for jobs in queues.values() for members in jobs])
                break
            open_ = [q for q, jobs in queues.items() if jobs and not self._overused(q)]
            if not open_:
                for q, jobs in queues.items():
                    for members in jobs:
                        self._wait_as(
                            [self.pending[i] for i in members],
                            "quota",
                            f"queue {q} is overused: allocated reached its deserved share ({self._deserved_text(q)})",
                        )
                break
            q = min(open_, key=lambda name: (self._share(name), name))
            self.admit([self.pending[i] for i in queues[q].pop(0)])
        self.final_reprieve()
        if self.stopped is not None:  # no growth past the deadline (as the engine's run)
            return self._stopped_plan()
        for gi in range(len(self.running)):
            if self.stop is not None and self.running[gi].elastic and self.stop():
                self.stopped = 0
                return self._stopped_plan()
            self.grow_running(gi)
        return self.plan()

    def _deserved_text(self, q: str) -> str:
        parts = []
        for c in self._qrows.get(q, []):
            res = self.res[int(self.quota.resource[c])]
            parts.append(f"{res} {human(int(self._deserved_at[c]), res)}")
        return ", ".join(parts)

    def place(
        self, work: IntArray, g: GangView, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        topo = g.spec.topology
        if topology and topo is not None and topo.required is not None:
            return self._gradients(work, g, counts)
        if topology and topo is not None and topo.preferred is not None and not g.slice_size:
            return self._soft(work, g, counts)
        return super().place(work, g, counts, topology=topology)

    def _soft(self, work: IntArray, g: GangView, counts: list[int]) -> tuple[Alloc, int | None] | None:
        """Soft topology: no gradients; tasks go one at a time to the node closest to the job's
        allocated hypernode (the lowest domain holding every task placed so far: closeness is
        the number of levels, from the broadest, on which the node shares it), then by the
        ``binpack`` score, then in node order. The first task has no hypernode yet and takes
        the best bin-pack node, which is how the LCA drifts up (Volcano #4343)."""
        codes = [self.level(level)[0] for level in self._tree()]
        trial = work.copy(order="K")
        chosen: list[int] = []
        out: Alloc = []
        for r, n in enumerate(counts):
            if not n:
                continue
            idx, req = g.idx[r], g.reqs[r]
            sub = trial[idx]
            cap = np.maximum(self.cap[idx], 1).astype(np.float64)
            dims = np.flatnonzero(req > 0)
            placed = np.zeros(idx.size, dtype=np.int64)
            for _ in range(n):
                ok = (sub >= req).all(axis=1)
                if not ok.any():
                    return None
                if chosen:
                    close = np.zeros(idx.size, dtype=np.int64)
                    inside = np.ones(idx.size, dtype=np.bool_)
                    for code in codes:
                        shared = np.unique(code[chosen])
                        if shared.size != 1:
                            break
                        inside &= code[idx] == shared[0]
                        close += inside
                    ok &= close == close[ok].max()
                after = (sub[:, dims] - req[dims]) / cap[:, dims]
                score = 1.0 - after.mean(axis=1) if dims.size else np.zeros(idx.size)
                i = int(np.argmax(np.where(ok, score, -np.inf)))
                sub[i] -= req
                placed[i] += 1
                chosen.append(int(idx[i]))
            trial[idx] = sub
            out += [(r, int(idx[i]), int(placed[i])) for i in np.flatnonzero(placed).tolist()]
        work[:] = trial
        return out, None

    def _gradients(self, work: IntArray, g: GangView, counts: list[int]) -> tuple[Alloc, int | None] | None:
        """Hard topology: HyperNode gradients from the lowest tier up to the required level;
        in each tier, dry-run the job in every hypernode with idle >= its minimum resources and
        commit the best bin-pack score (ties: more tasks placed, then domain order)."""
        topo = g.spec.topology
        assert topo is not None and topo.required is not None
        levels = self._tree()
        top = levels.index(topo.required)
        tiers = [levels[top]] if topo.required == NODE_LEVEL else list(reversed(levels[top:-1]))
        demand = np.asarray(counts, dtype=np.int64) @ g.reqs
        dims = np.flatnonzero(demand > 0)
        req_codes = self.level(topo.required)[0]
        for level in tiers:
            codes, groups = self.level(level)
            idle = np.stack(
                [np.bincount(codes, weights=work[:, j], minlength=len(groups)) for j in range(work.shape[1])], 1
            )
            best: tuple[float, int, int, IntArray, Alloc] | None = None
            for d in np.flatnonzero((idle >= demand).all(axis=1)).tolist():
                nodes = groups[d]
                rows = work[nodes]
                alloc = self.fill(rows, nodes, g, counts, sliced=g.slice_size > 0)
                if alloc is None:
                    continue
                cap = np.maximum(self.cap[nodes][:, dims].sum(axis=0), 1)
                used = cap - rows[:, dims].sum(axis=0)
                binpack = float((used / cap).mean()) if dims.size else 0.0
                key = (binpack, sum(k for _, _, k in alloc), -d)
                if best is None or key > best[:3]:
                    best = (*key, rows, alloc)
            if best is not None:
                _, _, neg_d, rows, alloc = best
                work[groups[-neg_d]] = rows
                return alloc, int(req_codes[alloc[0][1]])
        return None

    def preempt(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        """preempt (same queue), then reclaim (queues above their deserved share): victims are
        running tasks the gang plugin lets go, i.e. only pods above their job's MinAvailable, that
        the round's queue policy lets the job preempt (by default: lower priority; a queue
        imported from Volcano reclaims at any priority), lowest priority first, until the
        starving job fits."""
        near = near_domains(gangs, counts)
        queue = gangs[0].spec.queue
        lower = [
            int(gi)
            for gi in self.allowed_victims(gangs, counts, self.victim_rank).tolist()
            if near[self.rp_node[self.rp_start[gi] : self.rp_start[gi + 1]]].any()
        ]
        same = [gi for gi in lower if self.running[gi].spec.queue == queue]
        other = [
            gi
            for gi in lower
            if self.running[gi].spec.queue != queue and self._reclaimable(self.running[gi].spec.queue)
        ]
        for victims in (self.unblocked(same), self.unblocked(other)):
            if not victims:
                continue
            flat, starts, unit_victim, evict = self.units(np.asarray(victims, dtype=np.intp))
            spare = int((~evict).sum())
            if spare == 0:
                continue
            found = self.remove_then_fill(
                gangs, counts, flat[: starts[spare]], starts[: spare + 1], unit_victim[:spare], evict[:spare]
            )
            if found is not None:
                return found
        return None

    def _reclaimable(self, q: str) -> bool:
        rows = self._qrows.get(q, [])
        return any(self.used[c] > self._deserved_at[c] for c in rows)

    def _phrase(self, g: GangView, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        total = g.maximum
        work = self.free.copy(order="K")
        fit = 0
        for r, n in enumerate(self._full_counts(g)):
            if n:
                got = self._pods(work, None, g, r, n, partial=True) or []
                fit += sum(k for _, _, k in got)
        fit = min(fit, total)
        pod = f"{g.name}-{g.spec.roles[0].name}-0"
        if code == "quota" and "(capability)" in reason and self.place(self.free.copy(order="K"), g, counts) is None:
            code = "capacity"  # the queue's share is used up, but so are the nodes: say the latter
        if code == "quota":
            origin = f"queue resource quota insufficient: {reason}"
        elif code == "topology":
            origin = (
                f"no hypernode of tier {g.spec.topology.required if g.spec.topology else '?'} fits the job: {reason}"
            )
        else:
            origin = f"{pod}: {self._kube_message(g, counts)}"
        return code, (
            f"{total - fit}/{total} tasks in gang unschedulable: pod group is not ready, "
            f"{g.minimum} minAvailable, {total} Pending; Pending: {total - fit} Unschedulable, {fit} Schedulable. "
            f"Origin reason is {origin}"
        )


def volcano_like(rnd: Round, policy: Policy | None = None, *, stop: Stop = None) -> Plan:
    """Volcano's scheduler session with actions ``allocate`` (then ``preempt``, ``reclaim``
    when ``policy.preemption``) and plugins ``priority, gang, proportion, binpack`` (peers.md §2.2).

    Mimics:

    * **proportion**: each queue's *deserved* share by water-filling the schedulable capacity
      over queues (weight 1 each, as Volcano's default), clipped to the queue's capability
      (gangopt limit: nominal, or nominal + borrowing limit in a cohort) and to its request
      (running + every pending pod), and raised to its guarantee (= nominal quota). A queue
      whose allocation reached its deserved share (in every resource it requests) is
      *overused* and skipped. ``Allocatable`` keeps a queue within its ``realCapability``
      (capability, less the other queues' guarantees), as proportion.go does since v1.7;
      peers.md reads it as a deserved check, which would starve forever every gang larger than
      its queue's share even on an idle cluster (Volcano #1096).
    * **allocate**: repeatedly the least-served open queue (share = max allocated/deserved),
      then its next job (priority, submission time, name); tasks go pod by pod to the node with
      the best ``binpack`` score (most used after placing); the job's statement is
      **committed** if it reaches ``minMember`` (and every role minimum), otherwise
      **discarded** (nothing held); then further tasks up to the job's maximum.
    * **Hard topology** (``required``): HyperNode gradients, lowest tier first up to the
      required one; in each tier the job is dry-run in every hypernode with enough idle
      resources and the best bin-pack score commits.
    * **Soft topology** (``preferred``): task by task to the node closest to the job's
      allocated hypernode (the lowest domain holding its tasks so far), then by bin-pack; the
      first task has no hypernode and takes the best bin-pack node (the drift of #4343).
    * **preempt / reclaim**: the gang plugin only releases tasks **above their job's
      MinAvailable**, so victims are surplus pods of elastic lower-priority jobs, lowest
      priority first, from the same queue (preempt) then from queues above their deserved share
      (reclaim), until the starving job fits. Whole gangs are never evicted.
    * Reasons as Volcano's PodGroup condition words them (``x/y tasks in gang unschedulable:
      pod group is not ready, ... Origin reason is ...``).

    Leaves out: ``enqueue``/overcommit (every pending gang is Inqueue), DRF and queue
    priorities, pipelining on releasing resources, soft topology with slices (greedy's placement),
    ``sla``, ``backfill`` (BestEffort pods only), and ``gangPreempt``. Slices use the shared
    first-fit slice placement inside the chosen hypernode. The round's quotas stay hard
    limits (Volcano has no cohorts). Two deviations the plan contract imposes: preempt/reclaim
    victims are reprieved when the plan does not need them, and reclaim only takes lower
    priorities. Gang groups are decided as one job.

    ``stop``: the session ends when it says so, the jobs not reached waiting "not considered"
    (:func:`~gangopt.solvers.peers.common.stopping`).
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return decided(lambda: stopping(_Volcano(rnd), stop), _Volcano.decide)
