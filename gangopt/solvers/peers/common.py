"""Emulations of the schedulers users would otherwise run, one round at a time.

Each emulation follows the decision procedure of its scheduler as docs/peers.md describes it
(from the shared research notes on the peers, §2, section named in its docstring) closely
enough to show that peer's characteristic behaviour, and says what it leaves out. They share
the greedy engine's machinery (:class:`gangopt.solvers.greedy.engine.GreedyEngine`: numpy free
capacity, quota rows, placement, removal units, reprieve, plan assembly) and differ where the
peers differ: the order in which gangs are decided, how nodes are chosen, whom they preempt,
and how they word a waiting reason.

Every plan obeys docs/plan-semantics.md (``gangopt.validate(rnd, plan) == []``). Where a peer
would do something the contract forbids (Kueue evicting a workload only to free quota,
Volcano evicting pods it then does not use), the emulation does the closest valid thing and
its docstring says so. ``fifo_first_fit`` (the floor) lives in :mod:`gangopt.solvers.fifo`.

Entry points: :func:`koordinator_like`, :func:`volcano_like`, :func:`kueue_like`,
:func:`slurm_backfill_like` (or :class:`SlurmBackfillLike` to keep reservations' clock between
rounds); by name through the registry (:data:`gangopt.solvers.SOLVERS`) and the door
(:func:`gangopt.solve`), which annotate and validate their plans.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from typing import Literal, TypeVar

import numpy as np
import numpy.typing as npt

from gangopt.arrays import BoolArray, IndexArray, IntArray, QuotaLimits, fit_counts
from gangopt.schema import NODE_LEVEL, Plan, Round, Waiting
from gangopt.solvers.greedy.engine import Alloc, GangView, GreedyEngine, WaitingCode

FloatArray = npt.NDArray[np.float64]
NodeScore = Literal["first", "least", "most"]
"""How a peer picks a node for each pod: first fit in input order (Slurm), kube-scheduler's
``LeastAllocated`` (spread: most free share first) or Volcano's ``binpack`` (most used first)."""
Slots = list[tuple[int, int]]
"""An ordered node list with pods per node: ``(node row, pods)``."""


P = TypeVar("P", bound="Peer")
Stop = Callable[[], bool] | None
"""A pass's stop (:attr:`gangopt.solvers.greedy.engine.GreedyEngine.stop`; None: the pass runs whole)."""


def stopping(peer: P, stop: Stop) -> P:
    """``peer`` with ``stop`` as its pass's stop: run alone (``gangopt solve --solver PEER``) a
    peer gets the time limit's promise greedy gets (the registry makes the stop:
    :func:`gangopt.annotate.stop_by`); the gangs it did not reach wait "not considered"."""
    peer.stop = stop
    return peer


# ----------------------------------------------------------------------------- shared machinery


class ExtraColumns:
    """Quota constraints ``(queue, resource column, limit, label)`` a peer appends to the
    round's: the columns they add to the per-pod quota usage. Appending columns leaves the
    existing ones as they are, so the greedy state is extended rather than rebuilt (a replay
    builds a peer for every round, with every running pod in it)."""

    def __init__(self, extra: list[tuple[str, int, int, str]]) -> None:
        self.queues = np.asarray([e[0] for e in extra], dtype=object)
        self.resource = np.asarray([e[1] for e in extra], dtype=np.intp)
        self._by_shape: dict[tuple[str, int], IntArray] = {}

    def of(self, queue: npt.NDArray[np.object_], requests: IntArray) -> IntArray:
        """The added columns for pods of ``queue`` (one per row of ``requests``)."""
        mine = queue.reshape(-1, 1) == self.queues.reshape(1, -1)
        return np.where(mine, requests[:, self.resource], 0).astype(np.int64)

    def added_to(self, gang: GangView) -> GangView:
        """``gang`` with the added columns in its ``qreq``; gangs of one shape (the same
        ``reqs`` array) share the result, as :meth:`GreedyEngine._gang` shares their arrays."""
        key = (gang.spec.queue, id(gang.reqs))
        qreq = self._by_shape.get(key)
        if qreq is None:
            queue = np.full(len(gang.reqs), gang.spec.queue, dtype=object)
            qreq = np.hstack([gang.qreq, self.of(queue, gang.reqs)])
            qreq.flags.writeable = False
            self._by_shape[key] = qreq
        return replace(gang, qreq=qreq)


class Peer(GreedyEngine):
    """The greedy state plus the hooks the peers share: pod-by-pod scored node choice, extra
    quota rows (Volcano's deserved shares, Kueue's implicit ClusterQueues), peer-worded reasons."""

    solver = "peer"
    node_score: NodeScore = "first"
    fair_share = False
    grows_running = True
    """Whether running elastic gangs get new pods after the pending ones (as greedy does)."""
    spares_spread = False
    """The peers' schedulers choose victims by their own rules (docs/peers.md): not greedy's
    second placement that keeps a spread victim (:meth:`GreedyEngine.spare_spread`)."""

    def __init__(self, rnd: Round) -> None:
        super().__init__(rnd, "eager")
        self._real = np.ones(self.quota.size, dtype=np.bool_)
        """Quota rows the plan contract knows (the rest are the peer's own accounting)."""
        self._node_cost: FloatArray | None = None
        """Per-node preemption cost; when set, pods go to the cheapest feasible node first."""

    def decide(self) -> Plan:
        return self.run()

    # ------------------------------------------------------------------ quota rows

    def _extend_quota(self, extra: list[tuple[str, int, int, str]]) -> None:
        """Add constraints ``(queue, resource column, limit, label)`` after the round's quota
        rows, for queues the round may not define, and extend the per-gang and per-pod arrays."""
        if not extra:
            return
        q = self.quota
        queues = list(q.queues)
        for name, _, _, _ in extra:
            if name not in queues:
                queues.append(name)
        members = np.zeros((len(queues), q.size + len(extra)), dtype=np.bool_)
        members[: len(q.queues), : q.size] = q.members
        for c, (name, _, _, _) in enumerate(extra):
            members[queues.index(name), q.size + c] = True
        self.quota = QuotaLimits(
            queues=queues,
            members=members,
            resource=np.concatenate([q.resource, np.asarray([e[1] for e in extra], dtype=np.intp)]),
            limit=np.concatenate([q.limit, np.asarray([e[2] for e in extra], dtype=np.int64)]),
            labels=[*q.labels, *(e[3] for e in extra)],
        )
        self._real = np.concatenate([self._real, np.zeros(len(extra), dtype=np.bool_)])
        columns = ExtraColumns(extra)
        self.pending = [columns.added_to(g) for g in self.pending]
        self.running = [columns.added_to(g) for g in self.running]
        pod_queue = np.asarray([g.spec.queue for g in self.running], dtype=object)[self.rp_gang]
        self.rp_q = np.hstack([self.rp_q, columns.of(pod_queue, self.rp_rows)])
        before = self.rp_q.sum(axis=0)  # every running pod's quota rows: the usage before the plan
        self.used = before.copy()
        self.limit = self.quota.effective_limit(before)

    def put_back(self, work: IntArray, used: IntArray, pods: IndexArray) -> bool:
        """Reprieve checks only the contract's quota rows: a victim the plan does not need for
        capacity or a real quota goes back even if the peer's own share accounting objects
        (otherwise the validator would rightly call the eviction needless)."""
        nodes, rows = self.rp_node[pods], self.rp_rows[pods]
        if len(pods) > 1:
            nodes, inverse = np.unique(nodes, return_inverse=True)
            agg = np.zeros((len(nodes), len(self.res)), dtype=np.int64)
            np.add.at(agg, inverse, rows)
            rows = agg
        quota = self.rp_q[pods].sum(axis=0)
        if (work[nodes] < rows).any() or ((used + quota > self.limit) & self._real).any():
            return False
        work[nodes] -= rows
        used += quota
        return True

    # ------------------------------------------------------------------ node choice

    def fill(
        self, rows: IntArray, nodes: IndexArray | None, g: GangView, counts: list[int], *, sliced: bool
    ) -> Alloc | None:
        if sliced or (self.node_score == "first" and self._node_cost is None):
            return super().fill(rows, nodes, g, counts, sliced=sliced)
        out: Alloc = []
        for r, n in enumerate(counts):
            if n:
                got = self._pods(rows, nodes, g, r, n, partial=False)
                if got is None:
                    return None
                out.extend(got)
        return out

    def _pods(
        self, rows: IntArray, nodes: IndexArray | None, g: GangView, r: int, n: int, *, partial: bool
    ) -> Alloc | None:
        """Place ``n`` pods of role ``r`` one at a time, each on the best-scoring node where it
        fits (ties: input order), as kube-scheduler's Filter/Score cycle does per pod."""
        local = g.idx[r] if nodes is None else np.flatnonzero(g.elig[r][nodes])
        rowsel = local if nodes is None else nodes[local]
        req = g.reqs[r]
        sub = rows[local]
        cap = np.maximum(self.cap[rowsel], 1).astype(np.float64)
        dims = np.flatnonzero(req > 0)
        cost = None if self._node_cost is None else self._node_cost[rowsel]
        placed = np.zeros(local.size, dtype=np.int64)
        for _ in range(n):
            ok = (sub >= req).all(axis=1)
            if not ok.any():
                break
            if cost is not None:
                ok &= cost == cost[ok].min()
            if dims.size == 0 or self.node_score == "first":
                i = int(np.argmax(ok))
            else:
                after = (sub[:, dims] - req[dims]) / cap[:, dims]
                share = after.mean(axis=1) if self.node_score == "least" else 1.0 - after.mean(axis=1)
                i = int(np.argmax(np.where(ok, share, -np.inf)))
            sub[i] -= req
            placed[i] += 1
        if placed.sum() < n and not partial:
            return None
        rows[local] = sub
        got = np.flatnonzero(placed)
        return [(r, int(rowsel[i]), int(placed[i])) for i in got.tolist()]

    def grow(self, g: GangView, current: list[int], nodes: IndexArray | None) -> Alloc:
        """Greedy's growth, with the peer's node choice for unsliced gangs."""
        if g.slice_size or self.node_score == "first":
            return super().grow(g, current, nodes)
        total = sum(current)
        rows = self.free if nodes is None else self.free[nodes]
        out: Alloc = []
        for r, role in enumerate(g.spec.roles):
            want = min(role.replicas - current[r], g.maximum - total)
            per_pod = g.qreq[r]
            limited = per_pod > 0
            if limited.any():
                want = min(want, int(((self.limit - self.used)[limited] // per_pod[limited]).min()))
            if want <= 0:
                continue
            got = self._pods(rows, nodes, g, r, want, partial=True) or []
            k = sum(p for _, _, p in got)
            out.extend(got)
            self.used += k * per_pod
            current[r] += k
            total += k
        if nodes is not None:
            self.free[nodes] = rows
        return out

    def grow_running(self, gi: int) -> None:
        if self.grows_running:
            super().grow_running(gi)

    # ------------------------------------------------------------------ topology offers

    def _tree(self) -> list[str]:
        return [*self.rnd.cluster.topology_levels, NODE_LEVEL]

    def _offers(
        self, work: IntArray, g: GangView, counts: list[int]
    ) -> tuple[dict[str, IntArray], IntArray, BoolArray]:
        """Pods of the gang each domain of each level can take (Koordinator's ``offerSlot``,
        Kueue TAS phase 1): per node, copies of the gang's element-wise largest pod that fit
        (both peers assume one pod shape per gang), summed up the tree and floored to whole
        slices at the slice level. Also returns that pod and the nodes every used role may use."""
        used = [r for r, n in enumerate(counts) if n]
        req = g.reqs[used].max(axis=0)
        elig = np.logical_and.reduce([g.elig[r] for r in used])
        desired = sum(counts)
        size = g.slice_size or 1
        slice_level = g.spec.topology.slice_level if g.spec.topology and g.slice_size else None
        offer = np.where(elig, fit_counts(work, req, cap=desired), 0).astype(np.int64)
        levels = self._tree()
        if slice_level == NODE_LEVEL:
            offer = offer // size * size
        offers = {NODE_LEVEL: offer}
        child_vals, child_codes = offer, self.level(NODE_LEVEL)[0]
        for level in reversed(levels[:-1]):
            codes, groups = self.level(level)
            parent = np.zeros(len(child_vals), dtype=np.int64)
            parent[child_codes] = codes
            vals = np.bincount(parent, weights=child_vals, minlength=len(groups)).astype(np.int64)
            if level == slice_level:
                vals = vals // size * size
            offers[level] = vals
            child_vals, child_codes = vals, codes
        return offers, req, elig

    def _distribute(
        self,
        offers: dict[str, IntArray],
        li: int,
        members: IndexArray,
        remaining: int,
        size: int,
        slice_level: str | None,
    ) -> Slots:
        """Spread ``remaining`` pods over the children (at level ``li + 1``) of the domain whose
        nodes are ``members``: children with the larger offer first (then domain order), each
        taking as many as it offers, recursively down to nodes."""
        levels = self._tree()
        level = levels[li + 1]
        codes, groups = self.level(level)
        children = np.unique(codes[members])
        vals = offers[level][children]
        out: Slots = []
        for c, v in sorted(zip(children.tolist(), vals.tolist(), strict=True), key=lambda t: (-t[1], t[0])):
            if remaining <= 0:
                break
            take = min(remaining, v)
            if level == slice_level:
                take = take // size * size
            if take <= 0:
                continue
            if level == NODE_LEVEL:
                out.append((c, take))
            else:
                out.extend(self._distribute(offers, li + 1, groups[c], take, size, slice_level))
            remaining -= take
        return out

    def _assign(self, work: IntArray, g: GangView, counts: list[int], slots: Slots) -> Alloc | None:
        """Pods sorted by name (role name, index) onto the ordered node list."""
        if sum(k for _, k in slots) < sum(counts):
            return None
        order = sorted((r for r, n in enumerate(counts) for _ in range(n)), key=lambda r: g.spec.roles[r].name)
        out: dict[tuple[int, int], int] = defaultdict(int)
        it = iter(order)
        for row, k in slots:
            for _ in range(k):
                r = next(it, None)
                if r is None:
                    break
                if (work[row] < g.reqs[r]).any():
                    return None
                work[row] -= g.reqs[r]
                out[(r, row)] += 1
        return [(r, row, k) for (r, row), k in out.items()]

    def _full_counts(self, g: GangView) -> list[int]:
        """Every pod the gang wants (its maximum; whole slices), at least its minimum."""
        low = GreedyEngine.min_counts(self, g)
        target = g.maximum
        if g.slice_size > 1:
            target = target // g.slice_size * g.slice_size
        extra = max(0, target - sum(low))
        return [a + b for a, b in zip(low, self.more_pods(g, low, extra), strict=True)]

    # ------------------------------------------------------------------ waiting reasons

    def wait(self, gangs: list[GangView], counts: list[list[int]]) -> None:
        start = len(self.waiting)
        super().wait(gangs, counts)
        by_name = {g.name: (g, c) for g, c in zip(gangs, counts, strict=True)}
        for k in range(start, len(self.waiting)):
            w = self.waiting[k]
            if w.code == "group":
                continue
            g, c = by_name[w.gang]
            code, text = self._phrase(g, c, w.code, w.reasons[0].replace(PREEMPT_NOTE, ""))
            self.waiting[k] = Waiting(gang=w.gang, code=code, reasons=[text])

    def _phrase(self, g: GangView, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        """The waiting code and reason in the peer's own words (default: gangopt's)."""
        return code, reason

    def _wait_as(self, gangs: list[GangView], code: WaitingCode, reason: str) -> None:
        for g in gangs:
            self.waiting.append(Waiting(gang=g.name, code=code, reasons=[reason]))

    def _kube_message(self, g: GangView, counts: list[int]) -> str:
        """kube-scheduler's FitError for the first role that does not fit: ``0/8 nodes are
        available: 2 Insufficient gpu, 1 node(s) had untolerated taint(s), ...``."""
        role_i = next((r for r, n in enumerate(counts) if n), 0)
        role = g.spec.roles[role_i]
        req = g.reqs[role_i]
        elig = self.elig
        n = elig.size
        reasons: Counter_ = defaultdict(int)
        unsched = ~elig.schedulable
        reasons["node(s) were unschedulable"] += int(unsched.sum())
        match = elig.schedulable.copy()
        for key, value in role.node_selector.items():
            match &= elig.labels.isin(key, [value])
        for term in role.node_affinity:
            match &= elig.labels.matches(term)
        reasons["node(s) didn't match Pod's node affinity/selector"] += int((elig.schedulable & ~match).sum())
        ok = g.elig[role_i]
        reasons["node(s) had untolerated taint(s)"] += int((match & ~ok).sum())
        short = ok & ~(self.free >= req).all(axis=1)
        for j in np.flatnonzero(req > 0).tolist():
            lack = int((short & (self.free[:, j] < req[j])).sum())
            if lack:
                reasons[f"Insufficient {self.res[j]}"] += lack
        fits = int((ok & ~short).sum())
        parts = ", ".join(f"{k} {text}" for text, k in sorted(reasons.items()) if k)
        if fits and not parts:
            parts = f"{fits} node(s) fit one pod but not all {counts[role_i]}"
        return f"0/{n} nodes are available: {parts or 'no node fits'}."


Counter_ = defaultdict[str, int]
PREEMPT_NOTE = " (preempting lower-priority gangs does not make room)"
"""The greedy diagnosis' remark, dropped: each peer says in its own words what it tried."""


def victim_units(self: Peer, victims: list[int]) -> tuple[IndexArray, IndexArray, IndexArray, BoolArray]:
    """Whole-gang removal units (kept pods of each victim), in the given order. In one pass
    over the victims' pods, not a loop per victim (tens of thousands of victims per preemption
    on the fragmented XL round)."""
    chosen = np.asarray(victims, dtype=np.intp)
    lengths = self.rp_start[chosen + 1] - self.rp_start[chosen]
    before = np.cumsum(lengths) - lengths
    pods = np.arange(int(lengths.sum()), dtype=np.intp) + np.repeat(self.rp_start[chosen] - before, lengths)
    keep = self.kept[pods]
    flat = pods[keep].astype(np.intp)
    per_victim = np.bincount(np.repeat(np.arange(chosen.size), lengths)[keep], minlength=chosen.size)
    starts = np.concatenate([[0], np.cumsum(per_victim)]).astype(np.intp)
    return flat, starts, chosen, np.ones(len(victims), dtype=np.bool_)


def near_domains(gangs: list[GangView], counts: list[list[int]]) -> BoolArray:
    near = np.zeros(len(gangs[0].elig[0]), dtype=np.bool_)
    for g, c in zip(gangs, counts, strict=True):
        for r, n in enumerate(c):
            if n:
                near |= g.elig[r]
    return near


def has_topology(g: GangView) -> bool:
    t = g.spec.topology
    return t is not None and (t.required is not None or t.preferred is not None or g.slice_size > 0)
