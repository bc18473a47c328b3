"""Koordinator: gang (coscheduling) plus network-topology-aware placement.

See docs/peers.md for the decision procedure this emulation follows and what it leaves out;
the shared machinery is :mod:`gangopt.solvers.peers.common`.
"""

from __future__ import annotations

import numpy as np

from gangopt.arrays import IntArray
from gangopt.schema import NODE_LEVEL, Plan, Policy, Round
from gangopt.solvers.greedy.engine import Alloc, Attempt, GangView, WaitingCode, decided
from gangopt.solvers.peers.common import Peer, Stop, has_topology, near_domains, stopping, victim_units


class _Koordinator(Peer):
    solver = "koordinator_like"
    node_score = "least"

    def __init__(self, rnd: Round) -> None:
        super().__init__(rnd)
        self._names: dict[str, list[str]] = {}

    def min_counts(self, g: GangView) -> list[int]:
        # The network-topology solver places every pending pod (DesiredOfferSlot), not the minimum.
        return self._full_counts(g) if has_topology(g) else super().min_counts(g)

    def place(
        self, work: IntArray, g: GangView, counts: list[int], *, topology: bool = True
    ) -> tuple[Alloc, int | None] | None:
        if topology and has_topology(g):
            return self._topology_solver(work, g, counts)
        return super().place(work, g, counts, topology=topology)

    def _topology_solver(self, work: IntArray, g: GangView, counts: list[int]) -> tuple[Alloc, int | None] | None:
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
            members = self.level(level)[1][best]
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
        dom = int(self.level(topo.required)[0][alloc[0][1]]) if topo.required else None
        return alloc, dom

    def _level_names(self, level: str) -> list[str]:
        """The domain names of ``level`` in node order (kept per level: asked for every topology
        placement, each a pass over the nodes: 1.8 of the fragmented XL round's 22 CPU-s)."""
        names = self._names.get(level)
        if names is None:
            if level == NODE_LEVEL:
                names = [n.name for n in self.rnd.cluster.nodes]
            else:
                seen: dict[str, None] = {}
                for n in self.rnd.cluster.nodes:
                    seen.setdefault(n.topology[level], None)
                names = list(seen)
            self._names[level] = names
        return names

    def preempt(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        """Job preemption (core/preemption.go): dry-run remove every lower-priority preemptible
        job with a pod on a node the gang may use; cost[node] = sum over its victim jobs of the
        rank of their priority; place the gang's pods pod by pod on the cheapest feasible node
        (the topology solver for topology gangs); then reprieve victims, highest priority first.
        Victims are those the round's queue policy allows (by default: lower priority)."""
        near = near_domains(gangs, counts)
        allowed = self.allowed_victims(gangs, counts, self.victim_rank)
        if allowed.size == 0:
            return None
        # whether a kept pod of each running gang sits near: one pass over the running pods, not
        # one per victim (at fragmented XL, 68,536 running gangs: 107 of this peer's CPU-s went
        # to these per-victim loops)
        touches = np.logical_or.reduceat(near[self.rp_node] & self.kept, self.rp_start[:-1])
        victims = self.unblocked(allowed[touches[allowed]])
        if not victims:
            return None
        flat, starts, unit_victim, evict = victim_units(self, victims)
        # each victim's rank among the victims' priorities (1 = lowest) added once on each node
        # it holds (integers: exact in float64); (victim, node) pairs as one int64 key
        prio = self.running_prio[unit_victim]
        unit_rank = (np.searchsorted(np.unique(prio), prio) + 1).astype(np.float64)
        n = len(self.free)
        unit_of = np.repeat(np.arange(len(victims), dtype=np.int64), np.diff(starts))
        pairs = np.unique(unit_of * n + self.rp_node[flat])
        cost = np.zeros(n, dtype=np.float64)
        np.add.at(cost, pairs % n, unit_rank[pairs // n])
        work = self.free.copy(order="K")
        np.add.at(work, self.rp_node[flat], self.rp_rows[flat])
        used = self.used - self.rp_q[flat].sum(axis=0)
        self._node_cost = cost
        try:
            best = self.attempt(gangs, counts, work, used)
        finally:
            self._node_cost = None
        if best is None:
            return None
        removed = self.reprieve(best, flat, starts, unit_victim, evict)
        if removed is None:
            return None
        best.removed = removed
        return best

    def _phrase(self, g: GangView, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        gang = f'Gang "{g.spec.queue}/{g.name}"'
        if code in ("quota", "eligibility"):
            prefix = "Insufficient quotas" if code == "quota" else f"{gang} gets rejected"
            return code, f"{prefix}: {reason}"
        if code == "topology" or (code == "capacity" and has_topology(g)):
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


def koordinator_like(rnd: Round, policy: Policy | None = None, *, stop: Stop = None) -> Plan:
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

    ``stop``: the pass ends when it says so, the gangs not reached waiting "not considered"
    (:func:`~gangopt.solvers.peers.common.stopping`).
    """
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return decided(lambda: stopping(_Koordinator(rnd), stop), _Koordinator.decide)
