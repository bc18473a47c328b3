"""Why each waiting gang waits, in plain words (the field every peer's tracker asks for).

Reasons come from two places: the prefilter (the gang could not fit even with every allowed
preemption, or not within one domain, or not within its quota), and the plan itself (it could
have fit, but the capacity went to other gangs that outrank it, or its group partner waits).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gangopt.arrays import Eligibility, RoleSignature, per_cluster, role_signature
from gangopt.prefilter import Prefiltered, prefilter, request_vector, resource_names
from gangopt.quantities import human
from gangopt.schema import PendingGang, Plan, Round, Waiting

MAX_NAMES = 5


def waiting_reasons(rnd: Round, plan: Plan, pre: Prefiltered | None = None) -> list[Waiting]:
    """One :class:`Waiting` per pending gang the plan does not admit, in input order."""
    admitted = set(plan.admitted)
    waiting = [g for g in rnd.pending if g.name not in admitted]
    if not waiting:
        return []
    pre = pre or prefilter(rnd)
    free = _free_after(rnd, plan)
    prio = {g.name: g.priority for g in [*rnd.pending, *rnd.running]}
    users: dict[str, set[str]] = defaultdict(set)
    for p in plan.placements:
        users[p.node].add(p.gang)
    resources = resource_names(rnd)  # once per round, not once per waiting gang
    views = _NodeViews(rnd, free, users)
    out = []
    for gang in waiting:
        if gang.name in pre.pruned:
            pruned = pre.pruned[gang.name]
            out.append(Waiting(gang=gang.name, code=pruned.code, reasons=[pruned.reason]))
            continue
        out.append(_after_plan(rnd, gang, views, prio, admitted, resources))
    return out


class _NodeViews:
    """What the reasons read per set of node selectors, computed once per distinct set: a
    contended round has hundreds of waiting gangs, thousands of nodes and a few selectors."""

    def __init__(self, rnd: Round, free: dict[str, dict[str, int]], users: dict[str, set[str]]) -> None:
        self.rnd, self.free, self.users = rnd, free, users
        self._eligible: dict[tuple[RoleSignature, ...], list[str]] = {}
        self._users: dict[tuple[RoleSignature, ...], set[str]] = {}
        self._have: dict[tuple[tuple[RoleSignature, ...], str], int] = {}

    @staticmethod
    def _key(gang: PendingGang) -> tuple[RoleSignature, ...]:
        return tuple(role_signature(r) for r in gang.roles)

    def eligible(self, gang: PendingGang) -> list[str]:
        """Nodes some role of the gang may use (:class:`gangopt.arrays.Eligibility`: cordon,
        selector, affinity, taints and tolerations), in input order."""
        key = self._key(gang)
        if key not in self._eligible:
            self._eligible[key] = _eligible_nodes(self.rnd, gang)
        return self._eligible[key]

    def users_on_eligible(self, gang: PendingGang) -> set[str]:
        """Gangs with new pods on the gang's eligible nodes."""
        key = self._key(gang)
        if key not in self._users:
            eligible = set(self.eligible(gang))
            self._users[key] = {u for n, us in self.users.items() if n in eligible for u in us}
        return self._users[key]

    def have(self, gang: PendingGang, resource: str) -> int:
        """Free ``resource`` after the plan on the gang's eligible nodes."""
        key = (self._key(gang), resource)
        if key not in self._have:
            self._have[key] = sum(max(0, self.free[n].get(resource, 0)) for n in self.eligible(gang))
        return self._have[key]


def _free_after(rnd: Round, plan: Plan) -> dict[str, dict[str, int]]:
    removed = {pod for pre in plan.preemptions for pod in pre.pods}
    free = {n.name: dict(n.capacity) for n in rnd.cluster.nodes}
    roles = {(g.name, r.name): r for g in [*rnd.running, *rnd.pending] for r in g.roles}
    for gang in rnd.running:
        for pod in gang.pods:
            if pod.name not in removed:
                for res, amount in roles[(gang.name, pod.role)].requests.items():
                    free[pod.node][res] = free[pod.node].get(res, 0) - amount
    for p in plan.placements:
        for res, amount in roles[(p.gang, p.role)].requests.items():
            free[p.node][res] = free[p.node].get(res, 0) - amount
    return free


def _after_plan(
    rnd: Round,
    gang: PendingGang,
    views: _NodeViews,
    prio: dict[str, int],
    admitted: set[str],
    resources: list[str],
) -> Waiting:
    if gang.group:
        partners = [g.name for g in rnd.pending if g.group == gang.group and g.name != gang.name]
        if partners and not any(p in admitted for p in partners):
            fits_alone = _fit_count(gang, views, resources) >= gang.minimum
            if fits_alone:
                return Waiting(
                    gang=gang.name,
                    code="group",
                    reasons=[f"its gang group {gang.group!r} cannot start as a whole (with {', '.join(partners)})"],
                )
    rivals = sorted(
        (u for u in views.users_on_eligible(gang) if u != gang.name and prio[u] >= gang.priority),
        key=lambda u: (-prio[u], u),
    )
    main = "gpu" if any(r.requests.get("gpu") for r in gang.roles) else resources[0] if resources else "gpu"
    need = sum(r.requests.get(main, 0) * gang.role_minimum(r) for r in gang.roles)
    need = max(need, min((r.requests.get(main, 0) for r in gang.roles), default=0) * gang.minimum)
    have = views.have(gang, main)
    where = f" within one {gang.topology.required}" if gang.topology and gang.topology.required else ""
    text = (
        f"needs {human(need, main)} for {gang.minimum} pods{where}; "
        f"eligible nodes have {human(have, main)} free after this plan"
    )
    if rivals:
        names = ", ".join(rivals[:MAX_NAMES]) + (
            f" and {len(rivals) - MAX_NAMES} more" if len(rivals) > MAX_NAMES else ""
        )
        return Waiting(gang=gang.name, code="outranked", reasons=[f"{text}; its capacity went to {names}"])
    quota = _quota_text(rnd, gang)
    if quota:
        return Waiting(gang=gang.name, code="quota", reasons=[quota])
    return Waiting(
        gang=gang.name, code="capacity", reasons=[f"{text} (fragmented, or held by pods it may not preempt)"]
    )


def _eligible_nodes(rnd: Round, gang: PendingGang) -> list[str]:
    elig = per_cluster(rnd.cluster, "eligibility", lambda: Eligibility(rnd))
    mask = np.zeros(len(rnd.cluster.nodes), dtype=bool)
    for role in gang.roles:
        mask |= elig.mask(role)
    return [rnd.cluster.nodes[i].name for i in np.flatnonzero(mask).tolist()]


def _fit_count(gang: PendingGang, views: _NodeViews, resources: list[str]) -> int:
    total = 0
    for role in gang.roles:
        req = request_vector(role, resources)
        for node in views.eligible(gang):
            room = np.array([views.free[node].get(r, 0) for r in resources], dtype=np.int64)
            positive = req > 0
            total += int((room[positive] // req[positive]).min()) if positive.any() else role.replicas
    return total


def _quota_text(rnd: Round, gang: PendingGang) -> str | None:
    queue = next((q for q in rnd.queues if q.name == gang.queue), None)
    if queue is None or not queue.nominal:
        return None
    return f"queue {queue.name!r} has no quota left for its minimum of {gang.minimum} pods"
