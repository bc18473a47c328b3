"""Why each waiting gang waits, in plain words (the field every peer's tracker asks for).

Reasons come from two places: the prefilter (the gang could not fit even with every allowed
preemption, or not within one domain, or not within its quota), and the plan itself (it could
have fit, but the capacity went to other gangs that outrank it, or its group partner waits).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

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
    out = []
    for gang in waiting:
        if gang.name in pre.pruned:
            pruned = pre.pruned[gang.name]
            out.append(Waiting(gang=gang.name, code=pruned.code, reasons=[pruned.reason]))
            continue
        out.append(_after_plan(rnd, gang, free, users, prio, admitted, resources))
    return out


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
    free: dict[str, dict[str, int]],
    users: dict[str, set[str]],
    prio: dict[str, int],
    admitted: set[str],
    resources: list[str],
) -> Waiting:
    if gang.group:
        partners = [g.name for g in rnd.pending if g.group == gang.group and g.name != gang.name]
        if partners and not any(p in admitted for p in partners):
            fits_alone = _fit_count(rnd, gang, free, resources) >= gang.minimum
            if fits_alone:
                return Waiting(
                    gang=gang.name,
                    code="group",
                    reasons=[f"its gang group {gang.group!r} cannot start as a whole (with {', '.join(partners)})"],
                )
    eligible = _eligible_nodes(rnd, gang)
    rivals = sorted(
        {u for n in eligible for u in users.get(n, set()) if u != gang.name and prio[u] >= gang.priority},
        key=lambda u: (-prio[u], u),
    )
    main = "gpu" if any(r.requests.get("gpu") for r in gang.roles) else resources[0] if resources else "gpu"
    need = sum(r.requests.get(main, 0) * gang.role_minimum(r) for r in gang.roles)
    need = max(need, min((r.requests.get(main, 0) for r in gang.roles), default=0) * gang.minimum)
    have = sum(max(0, free[n].get(main, 0)) for n in eligible)
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
    pre_roles = gang.roles
    out = []
    for node in rnd.cluster.nodes:
        if not node.schedulable:
            continue
        if any(all(node.labels.get(k) == v for k, v in r.node_selector.items()) for r in pre_roles):
            out.append(node.name)
    return out


def _fit_count(rnd: Round, gang: PendingGang, free: dict[str, dict[str, int]], resources: list[str]) -> int:
    total = 0
    for role in gang.roles:
        req = request_vector(role, resources)
        for node in _eligible_nodes(rnd, gang):
            room = np.array([free[node].get(r, 0) for r in resources], dtype=np.int64)
            positive = req > 0
            total += int((room[positive] // req[positive]).min()) if positive.any() else role.replicas
    return total


def _quota_text(rnd: Round, gang: PendingGang) -> str | None:
    queue = next((q for q in rnd.queues if q.name == gang.queue), None)
    if queue is None or not queue.nominal:
        return None
    return f"queue {queue.name!r} has no quota left for its minimum of {gang.minimum} pods"
