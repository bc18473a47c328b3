"""Emulations of the schedulers users would otherwise run, one round at a time.

Each emulation follows the decision procedure written out in ``/work/shared/docs/peers.md``
§2 (section named in its docstring) closely enough to show that peer's characteristic
behaviour, and says what it leaves out. They share the greedy baseline's machinery
(:class:`gangopt.solvers.greedy.engine._Greedy`: numpy free capacity, quota rows, placement, removal units,
reprieve, plan assembly) and differ where the peers differ: the order in which gangs are
decided, how nodes are chosen, whom they preempt, and how they word a waiting reason.

Every plan obeys docs/plan-semantics.md (``gangopt.validate(rnd, plan) == []``). Where a peer
would do something the contract forbids (Kueue evicting a workload only to free quota,
Volcano evicting pods it then does not use), the emulation does the closest valid thing and
its docstring says so. ``fifo_first_fit`` (the floor) lives in :mod:`gangopt.replay.policies`.

Entry points: :func:`koordinator_like`, :func:`volcano_like`, :func:`kueue_like`,
:func:`slurm_backfill_like` (or :class:`SlurmBackfillLike` to keep reservations' clock between
rounds), and :func:`decide` (by name, with score and stats filled in and the plan validated).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from gangopt.arrays import BoolArray, IndexArray, IntArray, QuotaLimits, fit_counts
from gangopt.objective import score
from gangopt.quantities import human
from gangopt.schema import NODE_LEVEL, PendingGang, Plan, Policy, Round, Stats, Waiting
from gangopt.solvers.greedy.engine import Alloc, WaitingCode, _Gang, _Greedy, _Try

FloatArray = npt.NDArray[np.float64]
NodeScore = Literal["first", "least", "most"]
"""How a peer picks a node for each pod: first fit in input order (Slurm), kube-scheduler's
``LeastAllocated`` (spread: most free share first) or Volcano's ``binpack`` (most used first)."""
Slots = list[tuple[int, int]]
"""An ordered node list with pods per node: ``(node row, pods)``."""


# ----------------------------------------------------------------------------- shared machinery


class _ExtraColumns:
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

    def added_to(self, gang: _Gang) -> _Gang:
        """``gang`` with the added columns in its ``qreq``; gangs of one shape (the same
        ``reqs`` array) share the result, as :meth:`_Greedy._gang` shares their arrays."""
        key = (gang.spec.queue, id(gang.reqs))
        qreq = self._by_shape.get(key)
        if qreq is None:
            queue = np.full(len(gang.reqs), gang.spec.queue, dtype=object)
            qreq = np.hstack([gang.qreq, self.of(queue, gang.reqs)])
            qreq.flags.writeable = False
            self._by_shape[key] = qreq
        return replace(gang, qreq=qreq)


class _Peer(_Greedy):
    """The greedy state plus the hooks the peers share: pod-by-pod scored node choice, extra
    quota rows (Volcano's deserved shares, Kueue's implicit ClusterQueues), peer-worded reasons."""

    solver = "peer"
    node_score: NodeScore = "first"
    grows_running = True
    """Whether running elastic gangs get new pods after the pending ones (as greedy does)."""

    def __init__(self, rnd: Round) -> None:
        super().__init__(rnd, "eager")
        self._real = np.ones(self.quota.size, dtype=np.bool_)
        """Quota rows the plan contract knows (the rest are the peer's own accounting)."""
        self._node_cost: FloatArray | None = None
        """Per-node preemption cost; when set, pods go to the cheapest feasible node first."""

    def decide(self) -> Plan:
        return self.run().model_copy(update={"solver": self.solver})

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
        columns = _ExtraColumns(extra)
        self.pending = [columns.added_to(g) for g in self.pending]
        self.running = [columns.added_to(g) for g in self.running]
        pod_queue = np.asarray([g.spec.queue for g in self.running], dtype=object)[self.rp_gang]
        self.rp_q = np.hstack([self.rp_q, columns.of(pod_queue, self.rp_rows)])
        before = self.rp_q.sum(axis=0)  # every running pod's quota rows: the usage before the plan
        self.used = before.copy()
        self.limit = self.quota.effective_limit(before)

    def _put_back(self, work: IntArray, used: IntArray, pods: IndexArray) -> bool:
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

    def _fill(
        self, rows: IntArray, nodes: IndexArray | None, g: _Gang, counts: list[int], *, sliced: bool
    ) -> Alloc | None:
        if sliced or (self.node_score == "first" and self._node_cost is None):
            return super()._fill(rows, nodes, g, counts, sliced=sliced)
        out: Alloc = []
        for r, n in enumerate(counts):
            if n:
                got = self._pods(rows, nodes, g, r, n, partial=False)
                if got is None:
                    return None
                out.extend(got)
        return out

    def _pods(
        self, rows: IntArray, nodes: IndexArray | None, g: _Gang, r: int, n: int, *, partial: bool
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

    def _grow(self, g: _Gang, current: list[int], nodes: IndexArray | None) -> Alloc:
        """Greedy's growth, with the peer's node choice for unsliced gangs."""
        if g.slice_size or self.node_score == "first":
            return super()._grow(g, current, nodes)
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

    def _grow_running(self, gi: int) -> None:
        if self.grows_running:
            super()._grow_running(gi)

    # ------------------------------------------------------------------ topology offers

    def _tree(self) -> list[str]:
        return [*self.rnd.cluster.topology_levels, NODE_LEVEL]

    def _offers(self, work: IntArray, g: _Gang, counts: list[int]) -> tuple[dict[str, IntArray], IntArray, BoolArray]:
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
        child_vals, child_codes = offer, self._level(NODE_LEVEL)[0]
        for level in reversed(levels[:-1]):
            codes, groups = self._level(level)
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
        codes, groups = self._level(level)
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

    def _assign(self, work: IntArray, g: _Gang, counts: list[int], slots: Slots) -> Alloc | None:
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

    def _full_counts(self, g: _Gang) -> list[int]:
        """Every pod the gang wants (its maximum; whole slices), at least its minimum."""
        low = _Greedy._min_counts(self, g)
        target = g.maximum
        if g.slice_size > 1:
            target = target // g.slice_size * g.slice_size
        extra = max(0, target - sum(low))
        return [a + b for a, b in zip(low, self._more_pods(g, low, extra), strict=True)]

    # ------------------------------------------------------------------ waiting reasons

    def _wait(self, gangs: list[_Gang], counts: list[list[int]]) -> None:
        start = len(self.waiting)
        super()._wait(gangs, counts)
        by_name = {g.name: (g, c) for g, c in zip(gangs, counts, strict=True)}
        for k in range(start, len(self.waiting)):
            w = self.waiting[k]
            if w.code == "group":
                continue
            g, c = by_name[w.gang]
            code, text = self._phrase(g, c, w.code, w.reasons[0].replace(_PREEMPT_NOTE, ""))
            self.waiting[k] = Waiting(gang=w.gang, code=code, reasons=[text])

    def _phrase(self, g: _Gang, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        """The waiting code and reason in the peer's own words (default: gangopt's)."""
        return code, reason

    def _wait_as(self, gangs: list[_Gang], code: WaitingCode, reason: str) -> None:
        for g in gangs:
            self.waiting.append(Waiting(gang=g.name, code=code, reasons=[reason]))

    def _kube_message(self, g: _Gang, counts: list[int]) -> str:
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
_PREEMPT_NOTE = " (preempting lower-priority gangs does not make room)"
"""The greedy diagnosis' remark, dropped: each peer says in its own words what it tried."""


def _victim_units(self: _Peer, victims: list[int]) -> tuple[IndexArray, IndexArray, IndexArray, BoolArray]:
    """Whole-gang removal units (kept pods of each victim), in the given order."""
    pods = []
    for gi in victims:
        s, e = self.rp_start[gi], self.rp_start[gi + 1]
        pods.append(s + np.flatnonzero(self.kept[s:e]))
    flat = np.concatenate(pods).astype(np.intp) if pods else np.zeros(0, dtype=np.intp)
    starts = np.concatenate([[0], np.cumsum([len(p) for p in pods])]).astype(np.intp)
    return flat, starts, np.asarray(victims, dtype=np.intp), np.ones(len(victims), dtype=np.bool_)


def _near(gangs: list[_Gang], counts: list[list[int]]) -> BoolArray:
    near = np.zeros(len(gangs[0].elig[0]), dtype=np.bool_)
    for g, c in zip(gangs, counts, strict=True):
        for r, n in enumerate(c):
            if n:
                near |= g.elig[r]
    return near


def _has_topology(g: _Gang) -> bool:
    t = g.spec.topology
    return t is not None and (t.required is not None or t.preferred is not None or g.slice_size > 0)


# ----------------------------------------------------------------------------- Koordinator


class _Koordinator(_Peer):
    solver = "koordinator_like"
    node_score = "least"

    def _min_counts(self, g: _Gang) -> list[int]:
        # The network-topology solver places every pending pod (DesiredOfferSlot), not the minimum.
        return self._full_counts(g) if _has_topology(g) else super()._min_counts(g)

    def _place(
        self, work: IntArray, g: _Gang, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        if topology and _has_topology(g):
            return self._topology_solver(work, g, counts)
        return super()._place(work, g, counts, topology=topology)

    def _topology_solver(self, work: IntArray, g: _Gang, counts: list[int]) -> tuple[Alloc, int | None] | None:
        """core/network_topology_solver.go ``PlacePods``, steps 1-5 (peers.md §2.1)."""
        topo = g.spec.topology
        assert topo is not None
        offers, _, _ = self._offers(work, g, counts)
        desired = sum(counts)
        levels = self._tree()
        size = g.slice_size or 1
        slice_level = topo.slice_level if g.slice_size else None
        start = levels.index(topo.required) if topo.required else -1
        if start < 0 and int(offers[levels[0]].sum()) < desired:
            return None
        deepest = start
        for li in range(max(start, 0), len(levels)):
            if (offers[levels[li]] >= desired).any():
                deepest = li
            else:
                break
        if deepest < 0:  # only the cluster root holds it: distribute from the root
            slots = self._distribute(offers, -1, np.arange(len(work), dtype=np.intp), desired, size, slice_level)
        elif not (offers[levels[deepest]] >= desired).any():
            return None
        else:
            level = levels[deepest]
            vals = offers[level]
            cands = np.flatnonzero(vals >= desired)
            names = self._level_names(level)
            best = min(cands.tolist(), key=lambda d: (int(vals[d]), names[d]))  # bin-pack: smallest offer
            members = self._level(level)[1][best]
            slots = (
                [(best, desired)]
                if level == NODE_LEVEL
                else self._distribute(offers, deepest, members, desired, size, slice_level)
            )
        trial = work.copy(order="K")
        alloc = self._assign(trial, g, counts, slots)
        if alloc is None:
            return None
        work[:] = trial
        dom = int(self._level(topo.required)[0][alloc[0][1]]) if topo.required else None
        return alloc, dom

    def _level_names(self, level: str) -> list[str]:
        if level == NODE_LEVEL:
            return [n.name for n in self.rnd.cluster.nodes]
        seen: dict[str, None] = {}
        for n in self.rnd.cluster.nodes:
            seen.setdefault(n.topology[level], None)
        return list(seen)

    def _preempt(self, gangs: list[_Gang], counts: list[list[int]]) -> _Try | None:
        """Job preemption (core/preemption.go): dry-run remove every lower-priority preemptible
        job with a pod on a node the gang may use; cost[node] = sum over its victim jobs of the
        rank of their priority; place the gang's pods pod by pod on the cheapest feasible node
        (the topology solver for topology gangs); then reprieve victims, highest priority first."""
        floor = min(g.spec.priority for g in gangs)
        near = _near(gangs, counts)
        victims = [
            int(gi)
            for gi in self.victim_rank.tolist()
            if self.alive[gi]
            and self.running[gi].spec.priority < floor
            and (
                near[self.rp_node[self.rp_start[gi] : self.rp_start[gi + 1]]]
                & self.kept[self.rp_start[gi] : self.rp_start[gi + 1]]
            ).any()
        ]
        victims = self._unblocked(victims)
        if not victims:
            return None
        flat, starts, unit_victim, evict = _victim_units(self, victims)
        prios = sorted({self.running[gi].spec.priority for gi in victims})
        rank = {p: i + 1 for i, p in enumerate(prios)}
        cost = np.zeros(len(self.free), dtype=np.float64)
        for u, gi in enumerate(victims):
            cost[np.unique(self.rp_node[flat[starts[u] : starts[u + 1]]])] += rank[self.running[gi].spec.priority]
        work = self.free.copy(order="K")
        np.add.at(work, self.rp_node[flat], self.rp_rows[flat])
        used = self.used - self.rp_q[flat].sum(axis=0)
        self._node_cost = cost
        try:
            best = self._attempt(gangs, counts, work, used)
        finally:
            self._node_cost = None
        if best is None:
            return None
        removed = self._reprieve(best, flat, starts, unit_victim, evict)
        if removed is None:
            return None
        best.removed = removed
        return best

    def _phrase(self, g: _Gang, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        gang = f'Gang "{g.spec.queue}/{g.name}"'
        if code in ("quota", "eligibility"):
            prefix = "Insufficient quotas" if code == "quota" else f"{gang} gets rejected"
            return code, f"{prefix}: {reason}"
        if code == "topology" or (code == "capacity" and _has_topology(g)):
            offers, _, _ = self._offers(self.free, g, counts)
            topo = g.spec.topology
            level = (topo.required if topo else None) or self._tree()[0]
            names = self._level_names(level)
            slots = ", ".join(f"{names[d]}={int(v)}" for d, v in enumerate(offers[level].tolist()))
            return code, (
                f"{gang} gets rejected: network topology solver found no {level} with offerSlot >= "
                f"{sum(counts)} (offerSlot: {slots})"
            )
        pod = f"{g.name}-{g.spec.roles[0].name}-0"
        kube = self._kube_message(g, counts)
        return code, f'{gang} gets rejected due to member Pod "{pod}" is unschedulable with reason "{kube}"'


def koordinator_like(rnd: Round, policy: Policy | None = None) -> Plan:
    """Koordinator koord-scheduler with the coscheduling plugin, ``Strict`` mode (peers.md §2.1).

    Mimics:

    * **Queue**: one gang group at a time, by priority, then submission time, then name; a gang
      group is one transaction (``Permit`` allows the group only when every gang has its
      minimum; ``Strict``: the first failure rejects every waiting pod of the group).
    * **Gangs without topology**: pod by pod through Filter (eligibility, capacity) and Score
      with kube's default ``LeastAllocated`` (the node with the largest free share of what the
      pod requests; ties in node order, where kube picks at random). The minimum must be
      assumed (all-or-nothing); further members schedule as ordinary pods (``once-satisfied``).
    * **Topology gangs** (``required``/``preferred``/slices): the network-topology solver for
      **all** pending pods (``DesiredOfferSlot``), steps 1–5: offerSlot per node, summed up the
      tree and floored to ``podCountMultiple`` (the slice size) at the slice level; roots are
      the ``MustGather`` level's domains (``required``) or the cluster; the candidates are the
      domains of the deepest level where one offers ≥ desired, the one with the **smallest**
      offer wins (bin-pack); pods go down the tree to children with the **larger** offer first;
      pods sorted by name fill the resulting node list.
    * **Job preemption** (``enablePreemption``; here when ``policy.preemption``): dry-run
      removal of every lower-priority preemptible job with a pod on a node the gang may use;
      ``cost[node]`` = Σ over its victim jobs of the rank of their priority; pods go pod by pod
      to the cheapest feasible node (the topology solver for topology gangs); then victims are
      reprieved one by one, highest priority first, if every placed pod still fits. Victims
      are whole jobs (a job is never left below its minimum).
    * Reasons as Koordinator words them (``Gang "q/name" gets rejected due to member Pod ... is
      unschedulable with reason "0/N nodes are available: ..."``, offerSlot per domain).

    Leaves out: ``NonStrict`` mode and Permit timeouts (a round has no time), the score
    plugins beyond ``LeastAllocated`` and ``ExistingPodNum`` (pending gangs have no pods yet),
    ElasticQuota's runtime water-filling (the round's quotas are checked as hard limits) and its
    background over-quota killer, and the "terminating victims" check. Roles of different
    shapes are counted as copies of their element-wise largest pod by the topology solver,
    which assumes homogeneous member pods. An elastic topology gang needs room for its maximum.
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return _Koordinator(rnd).decide()


# ----------------------------------------------------------------------------- Volcano


class _Volcano(_Peer):
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
        for members in self._transactions():
            queues[self.pending[members[0]].spec.queue].append(members)
        while any(queues.values()):
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
            self._admit([self.pending[i] for i in queues[q].pop(0)])
        self._final_reprieve()
        for gi in range(len(self.running)):
            self._grow_running(gi)
        return self._plan()

    def _deserved_text(self, q: str) -> str:
        parts = []
        for c in self._qrows.get(q, []):
            res = self.res[int(self.quota.resource[c])]
            parts.append(f"{res} {human(int(self._deserved_at[c]), res)}")
        return ", ".join(parts)

    def _place(
        self, work: IntArray, g: _Gang, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        topo = g.spec.topology
        if topology and topo is not None and topo.required is not None:
            return self._gradients(work, g, counts)
        return super()._place(work, g, counts, topology=topology)

    def _gradients(self, work: IntArray, g: _Gang, counts: list[int]) -> tuple[Alloc, int | None] | None:
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
        req_codes = self._level(topo.required)[0]
        for level in tiers:
            codes, groups = self._level(level)
            idle = np.stack(
                [np.bincount(codes, weights=work[:, j], minlength=len(groups)) for j in range(work.shape[1])], 1
            )
            best: tuple[float, int, int, IntArray, Alloc] | None = None
            for d in np.flatnonzero((idle >= demand).all(axis=1)).tolist():
                nodes = groups[d]
                rows = work[nodes]
                alloc = self._fill(rows, nodes, g, counts, sliced=g.slice_size > 0)
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

    def _preempt(self, gangs: list[_Gang], counts: list[list[int]]) -> _Try | None:
        """preempt (same queue), then reclaim (queues above their deserved share): victims are
        lower-priority running tasks the gang plugin lets go, i.e. only pods above their job's
        MinAvailable, lowest priority first, until the starving job fits."""
        floor = min(g.spec.priority for g in gangs)
        near = _near(gangs, counts)
        queue = gangs[0].spec.queue
        lower = [
            int(gi)
            for gi in self.victim_rank.tolist()
            if self.alive[gi]
            and self.running[gi].spec.priority < floor
            and near[self.rp_node[self.rp_start[gi] : self.rp_start[gi + 1]]].any()
        ]
        same = [gi for gi in lower if self.running[gi].spec.queue == queue]
        other = [
            gi
            for gi in lower
            if self.running[gi].spec.queue != queue and self._reclaimable(self.running[gi].spec.queue)
        ]
        for victims in (self._unblocked(same), self._unblocked(other)):
            if not victims:
                continue
            flat, starts, unit_victim, evict = self._units(np.asarray(victims, dtype=np.intp))
            spare = int((~evict).sum())
            if spare == 0:
                continue
            found = self._remove_then_fill(
                gangs, counts, flat[: starts[spare]], starts[: spare + 1], unit_victim[:spare], evict[:spare]
            )
            if found is not None:
                return found
        return None

    def _reclaimable(self, q: str) -> bool:
        rows = self._qrows.get(q, [])
        return any(self.used[c] > self._deserved_at[c] for c in rows)

    def _phrase(self, g: _Gang, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        total = g.maximum
        work = self.free.copy(order="K")
        fit = 0
        for r, n in enumerate(self._full_counts(g)):
            if n:
                got = self._pods(work, None, g, r, n, partial=True) or []
                fit += sum(k for _, _, k in got)
        fit = min(fit, total)
        pod = f"{g.name}-{g.spec.roles[0].name}-0"
        if code == "quota" and "(capability)" in reason and self._place(self.free.copy(order="K"), g, counts) is None:
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


def volcano_like(rnd: Round, policy: Policy | None = None) -> Plan:
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
    * **preempt / reclaim**: the gang plugin only releases tasks **above their job's
      MinAvailable**, so victims are surplus pods of elastic lower-priority jobs, lowest
      priority first, from the same queue (preempt) then from queues above their deserved share
      (reclaim), until the starving job fits. Whole gangs are never evicted.
    * Reasons as Volcano's PodGroup condition words them (``x/y tasks in gang unschedulable:
      pod group is not ready, ... Origin reason is ...``).

    Leaves out: ``enqueue``/overcommit (every pending gang is Inqueue), DRF and queue
    priorities, pipelining on releasing resources, soft topology (approximated by binpack),
    ``sla``, ``backfill`` (BestEffort pods only), and ``gangPreempt``. Slices use the shared
    first-fit slice placement inside the chosen hypernode. The round's quotas stay hard
    limits (Volcano has no cohorts). Two deviations the plan contract imposes: preempt/reclaim
    victims are reprieved when the plan does not need them, and reclaim only takes lower
    priorities. Gang groups are decided as one job.
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return _Volcano(rnd).decide()


# ----------------------------------------------------------------------------- Kueue

QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]


class _Kueue(_Peer):
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
        self.cohort = {q.name: q.cohort for q in rnd.queues}

    def _fits_quota(self, gangs: list[_Gang], counts: list[list[int]], used: IntArray | None = None) -> bool:
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

    def _nominate(self, gangs: list[_Gang]) -> tuple[str, list[list[int]]]:
        """Flavor assignment on quota: Fit with every pod; else the largest count that fits
        (partial admission, binary search) for elastic workloads; else Preempt or NoFit."""
        full = [self._full_counts(g) for g in gangs]
        if self._fits_quota(gangs, full):
            return "Fit", full
        low = [self._min_counts(g) for g in gangs]
        if len(gangs) == 1 and sum(low[0]) < sum(full[0]) and self._fits_quota(gangs, low):
            g = gangs[0]
            lo, hi = sum(low[0]), sum(full[0])
            while hi - lo > 1:
                mid = (lo + hi) // 2
                c = [a + b for a, b in zip(low[0], self._more_pods(g, low[0], mid - sum(low[0])), strict=True)]
                if self._fits_quota(gangs, [c]):
                    lo = mid
                else:
                    hi = mid
            return "Fit", [[a + b for a, b in zip(low[0], self._more_pods(g, low[0], lo - sum(low[0])), strict=True)]]
        return ("Preempt" if self.rnd.policy.preemption else "NoFit"), full

    def run(self) -> Plan:
        heads: dict[str, list[list[int]]] = defaultdict(list)
        for members in self._transactions():  # priority, then FIFO within each ClusterQueue
            heads[self.pending[members[0]].spec.queue].append(members)
        blocked: set[str] = set()
        while True:
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
        self._final_reprieve()
        return self._plan()

    def _process(self, gangs: list[_Gang], counts: list[list[int]], mode: str) -> bool:
        tas = any(_has_topology(g) for g in gangs)
        result: _Try | None = None
        if mode == "Fit":
            result = self._attempt(gangs, counts, self.free.copy(order="K"), self.used)
            if result is None and tas and self.rnd.policy.preemption:
                result = self._classical(gangs, counts)
        elif mode == "Preempt":
            result = self._classical(gangs, counts)
        if result is not None:
            self._commit(gangs, counts, result)
            return True
        code, reason = self._why(gangs, counts, mode, tas)
        self._wait_as(gangs, code, reason)
        return False

    def _why(self, gangs: list[_Gang], counts: list[list[int]], mode: str, tas: bool) -> tuple[WaitingCode, str]:
        g, c = gangs[0], counts[0]
        found = self._diagnose(g, c, alone=True)
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

    def _classical(self, gangs: list[_Gang], counts: list[list[int]]) -> _Try | None:
        """Classical preemption: candidates are lower-priority preemptible workloads of the same
        ClusterQueue, or of cohort peers that are borrowing; other queues first, then lower
        priority, then the newest; remove in order until the workload fits, fill back in reverse."""
        q = gangs[0].spec.queue
        floor = min(g.spec.priority for g in gangs)
        cands = []
        for gi in self.victim_rank.tolist():
            v = self.running[gi].spec
            if not self.alive[gi] or v.priority >= floor:
                continue
            other = v.queue != q
            if other and not (
                self.cohort.get(q) is not None
                and self.cohort.get(v.queue) == self.cohort.get(q)
                and self._borrowing(v.queue)
            ):
                continue
            cands.append((0 if other else 1, v.priority, -gi, int(gi)))
        if not cands:
            return None
        victims = self._unblocked(gi for *_, gi in sorted(cands))
        return self._remove_then_fill(gangs, counts, *_victim_units(self, victims))

    def _place(
        self, work: IntArray, g: _Gang, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        if topology and _has_topology(g):
            return self._tas(work, g, counts)
        return super()._place(work, g, counts, topology=topology)

    def _tas(self, work: IntArray, g: _Gang, counts: list[int]) -> tuple[Alloc, int | None] | None:
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
            members = self._level(levels[pick[0]])[1][pick[1]]
            slots = self._distribute(offers, pick[0], members, desired, size, slice_level)
        trial = work.copy(order="K")
        alloc = self._assign(trial, g, counts, slots)
        if alloc is None:
            return None
        work[:] = trial
        dom = int(self._level(topo.required)[0][alloc[0][1]]) if topo.required else None
        return alloc, dom


def kueue_like(rnd: Round, policy: Policy | None = None, *, strategy: QueueingStrategy = "BestEffortFIFO") -> Plan:
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
    * **Classical preemption** (``withinClusterQueue: LowerPriority``, ``reclaimWithinCohort:
      LowerPriority``): candidates from other queues of the cohort that borrow, first, then lower
      priority, then the newest; **removed in order until the workload fits, then filled back in
      reverse**. Also for TAS workloads whose topology does not fit.
    * Reasons as Kueue words them (``couldn't assign flavors to pod set ...: insufficient
      unused quota for gpu in flavor ..., N more needed``).

    Leaves out: resource flavors (one flavor per queue: the round's nodes), fair sharing, the
    preemptor-first and quota-reserved-first gates, ``borrowWithinCohort``, admission checks,
    and running elastic workloads growing. A queue the round does not define is a
    ClusterQueue whose nominal quota is the whole cluster (its usual setup). Evictions and the
    admission they make room for land in the same plan (Kueue admits in a later cycle).
    Deviation the plan contract imposes: a victim that frees only quota, on nodes the workload
    does not use, is not evicted (then the workload waits). Gang groups are one workload.
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return _Kueue(rnd, strategy).decide()


# ----------------------------------------------------------------------------- Slurm


class _Slurm(_Peer):
    solver = "slurm_backfill_like"
    node_score = "first"
    grows_running = False

    def __init__(self, rnd: Round, durations: Mapping[str, float] | None, started: Mapping[str, float]) -> None:
        super().__init__(rnd)
        self.durations = durations
        self.now = rnd.now
        self.reserved = np.zeros(len(self.free), dtype=np.bool_)
        self.reservations: list[tuple[str, float | None, BoolArray]] = []
        self.ends: dict[str, float | None] = {}
        self._pending_by_name = {g.name: g for g in self.pending}
        for g in rnd.running:
            self.ends[g.name] = self._end(g.name, started.get(g.name))

    def _end(self, name: str, start: float | None) -> float | None:
        """Expected end: start + duration (start unknown: now + the whole duration)."""
        if self.durations is None or name not in self.durations:
            return None
        return (self.now if start is None else start) + self.durations[name]

    def _preempt(self, gangs: list[_Gang], counts: list[list[int]]) -> _Try | None:
        return None  # PreemptType=preempt/none, Slurm's default

    def _phrase(self, g: _Gang, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        if code == "quota":
            return code, f"Reason=AssocGrpGRES: {reason}"
        return code, f"Reason=Resources: {reason}"

    def _admit(self, gangs: list[_Gang]) -> None:
        counts = [self._min_counts(g) for g in gangs]
        if not self._fits(gangs, counts) or any(self._hopeless(g, c) for g, c in zip(gangs, counts, strict=True)):
            self._wait(gangs, counts)  # held by a limit (Assoc/QOS) or never fits: no reservation
            return
        ends = [self._end(g.name, self.now) for g in gangs]
        end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
        # may use a reservation's nodes only if it surely ends before that reservation starts
        blocked = self.reserved.copy()
        for _, start, nodes in self.reservations:
            if end is not None and start is not None and end <= start:
                blocked &= ~nodes
        work = self.free.copy(order="K")
        work[blocked] = 0
        result = self._attempt(gangs, counts, work, self.used)
        if result is not None:
            result.free[blocked] = self.free[blocked]
            for g, e in zip(gangs, ends, strict=True):
                self.ends[g.name] = e
            self._commit(gangs, counts, result)
            return
        outranked = self._attempt(gangs, counts, self.free.copy(order="K"), self.used) is not None
        start, held = self._reserve(gangs, counts)
        node_names = [self.rnd.cluster.nodes[i].name for i in np.flatnonzero(held).tolist()] if held is not None else []
        when = (
            "when the jobs running there end (no time limits known)"
            if start is None
            else f"at t+{max(0.0, start - self.now):.0f}s"
        )
        where = f"; reserved {', '.join(node_names)} {when}" if node_names else "; no start time can be planned"
        if outranked:
            holder = next((name for name, _, n in self.reservations if (n & blocked).any()), "?")
            self._wait_as(
                gangs,
                "outranked",
                f"Reason=Priority: starting now would delay the reservation of higher-priority job {holder}{where}",
            )
        else:
            found = self._diagnose(gangs[0], counts[0], alone=len(gangs) == 1)
            code, reason = found if found is not None else ("capacity", "the jobs of its group do not fit together")
            self._wait_as(gangs, code, f"Reason=Resources: {reason.replace(_PREEMPT_NOTE, '')}{where}")
        if held is not None:
            self.reservations.append((gangs[0].name, start, held))
            self.reserved |= held

    def _fits(self, gangs: list[_Gang], counts: list[list[int]]) -> bool:
        demand = sum(
            (np.asarray(c, dtype=np.int64) @ g.qreq for g, c in zip(gangs, counts, strict=True)),
            start=np.zeros(self.quota.size, dtype=np.int64),
        )
        return bool((self.used + demand <= self.limit).all())

    @cached_property
    def _running_releases(self) -> dict[float, list[tuple[IndexArray, IntArray]]]:
        """What the running jobs give back and when: per expected end, their pods' nodes and
        requests (without durations all end ``now``). Computed once per round, not once per
        waiting job: Slurm preempts nothing, so the running pods do not change during a round."""
        timed = self.durations is not None
        events: dict[float, list[tuple[IndexArray, IntArray]]] = defaultdict(list)
        for gi, g in enumerate(self.running):
            s, e = self.rp_start[gi], self.rp_start[gi + 1]
            end = self.ends.get(g.name) if timed else self.now
            if end is not None:
                pods = s + np.flatnonzero(self.kept[s:e])
                events[end].append((self.rp_node[pods], self.rp_rows[pods]))
        return dict(events)

    def _reserve(self, gangs: list[_Gang], counts: list[list[int]]) -> tuple[float | None, BoolArray | None]:
        """Earliest start and the whole nodes it would use then, on nodes no earlier
        reservation holds. With expected ends: release running jobs (and jobs started this
        round) in order of their end. Without: every job has the same time limit, so the running
        jobs all end first and the reservation is where it would go once they have."""
        timed = self.durations is not None
        events = defaultdict(list, {t: list(v) for t, v in self._running_releases.items()})
        if timed:
            for name, alloc in self.allocs.items():
                end = self.ends.get(name)
                if end is not None and alloc:
                    g = self._pending_by_name[name]
                    nodes = np.asarray([node for _, node, _ in alloc], dtype=np.intp)
                    rows = np.stack([k * g.reqs[r] for r, _, k in alloc])
                    events[end].append((nodes, rows))
        base = self.free.copy(order="K")
        open_ = ~self.reserved
        failed = False
        for t in sorted(events):
            touched = False
            for nodes, rows in events[t]:
                if open_[nodes].any():  # what frees up on held nodes is zeroed in every trial
                    np.add.at(base, nodes, rows)
                    touched = True
            if failed and not touched:
                # only held nodes freed up: the trial equals the one that just failed. In a full
                # cluster most jobs wait and every node soon holds a reservation; retrying would
                # cost each waiting job one placement per running job (O(pending x running)).
                continue
            trial = base.copy(order="K")
            trial[self.reserved] = 0
            found = self._attempt(gangs, counts, trial, self.used)
            if found is not None:
                held = np.zeros(len(self.free), dtype=np.bool_)
                for alloc, _ in found.allocs:
                    held[[node for _, node, _ in alloc]] = True
                return (t if timed else None), held
            failed = True
        return None, None


class SlurmBackfillLike:
    """Slurm's main scheduler plus ``sched/backfill`` (peers.md §2.6), as a policy that keeps
    the start times of the jobs it started between rounds (a simulation's fresh instance).

    Mimics:

    * **Strict priority order** (priority, then age = submission time): a job that cannot start
      gets a **reservation**: the earliest time enough resources free up, from running jobs'
      expected ends, and the **whole nodes** it would use then.
    * **Backfill**: a later job starts now only if it fits on nodes no earlier reservation
      holds, or if it surely ends (start + expected run time) before that reservation starts.
    * ``--nodes=min-max``: an elastic job starts with as many members as fit at once (never
      on reserved nodes).
    * ``topology/tree``: a ``required`` gang goes to the tightest domain that fits (best fit);
      slices each fill one domain of their level; first fit in node order otherwise.
    * Reasons as ``squeue`` shows them: ``Reason=Resources`` (waits for resources, with its
      reservation), ``Reason=Priority`` (would delay a higher-priority job's reservation);
      a job over its queue's quota (``AssocGrp*`` limits) or that can never fit gets no
      reservation.

    **Run times.** The round carries none. ``durations`` (gang name → expected run time in
    seconds, e.g. the workload's durations, or users' time limits) gives expected ends: a job
    started by this instance ends at its start + duration; a running job it did not start ends
    at ``now`` + its full duration (conservative); a job without a duration never ends within
    the plan. **Without durations** (a single round from the CLI) every job is treated as
    having the same time limit: all running jobs end before any job started now, so a blocked
    job's reservation is the set of nodes it would take once the running jobs have ended, and
    backfill jobs may not touch those nodes at all ("the blocked job's nodes are held").

    Leaves out: the multifactor priority (fair share, QOS, job size: the round's priority is
    used), partitions (one partition: the whole cluster), ``bf_window``/``bf_resolution``/
    ``bf_max_job_test`` limits, ``--time-min``, ``--switches`` waits, and preemption (Slurm's
    default ``PreemptType=preempt/none``). Running jobs never grow or shrink.
    """

    __name__ = "slurm_backfill_like"

    def __init__(self, durations: Mapping[str, float] | None = None) -> None:
        self.durations = durations
        self.started: dict[str, float] = {}

    def __call__(self, rnd: Round) -> Plan:
        plan = _Slurm(rnd, self.durations, self.started).decide()
        live = {g.name for g in rnd.running}
        self.started = {k: v for k, v in self.started.items() if k in live}
        for name in plan.admitted:
            self.started[name] = rnd.now
        return plan


def slurm_backfill_like(
    rnd: Round, policy: Policy | None = None, *, durations: Mapping[str, float] | None = None
) -> Plan:
    """One round of :class:`SlurmBackfillLike` (see there for what it mimics and leaves out)."""
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return SlurmBackfillLike(durations)(rnd)


# ----------------------------------------------------------------------------- by name

PEERS: dict[str, Callable[[Round], Plan]] = {
    "koordinator_like": koordinator_like,
    "volcano_like": volcano_like,
    "kueue_like": kueue_like,
    "slurm_backfill_like": slurm_backfill_like,
}
"""The peer emulations by name (single-round functions)."""

SOLVERS = (*PEERS, "fifo_first_fit")
"""Names :func:`decide` accepts: the peers and the FIFO floor."""


def decide(rnd: Round, name: str, policy: Policy | None = None, *, annotate: bool = True) -> Plan:
    """Decide ``rnd`` with the emulation ``name`` (one of :data:`SOLVERS`); fills in the
    score (gangopt's objective, for comparison; skipped with ``annotate=False``) and the time
    taken, and validates the plan (``RuntimeError`` naming the broken rules if it is not
    valid: an emulation bug)."""
    from gangopt.replay.policies import fifo_first_fit
    from gangopt.validation import validate

    start = time.perf_counter()
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    if name == "fifo_first_fit":
        plan = fifo_first_fit(rnd)
    elif name in PEERS:
        plan = PEERS[name](rnd)
    else:
        raise ValueError(f"unknown solver {name!r} (known: {', '.join(SOLVERS)})")
    stats = Stats(nodes=len(rnd.cluster.nodes), gangs=len(rnd.pending), total_seconds=time.perf_counter() - start)
    plan = plan.model_copy(update={"stats": stats, "score": score(rnd, plan)} if annotate else {"stats": stats})
    violations = validate(rnd, plan)
    if violations:
        details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
        raise RuntimeError(f"internal: {name} plan failed validation: {details}")
    return plan


__all__ = [
    "PEERS",
    "SOLVERS",
    "SlurmBackfillLike",
    "decide",
    "koordinator_like",
    "kueue_like",
    "slurm_backfill_like",
    "volcano_like",
]
