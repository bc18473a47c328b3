"""Collected gangs -> the round's running and pending gangs, with the pods export needs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gangopt.k8s.context import Context, build, quantities
from gangopt.k8s.contract import ObjectRef
from gangopt.k8s.gangs import Gang
from gangopt.k8s.pods import Pod, Shape
from gangopt.k8s.queues import Queues
from gangopt.schema import BoundPod, PendingGang, Role, RunningGang


@dataclass
class Result:
    running: list[RunningGang] = field(default_factory=list)
    pending: list[PendingGang] = field(default_factory=list)
    pending_pods: dict[str, dict[str, list[ObjectRef]]] = field(default_factory=dict)
    running_pods: dict[str, ObjectRef] = field(default_factory=dict)
    gang_objects: dict[str, ObjectRef] = field(default_factory=dict)


@dataclass
class _RoleGroup:
    name: str
    shape: Shape
    pods: list[Pod]
    minimum: int | None
    replicas: int


def assemble(ctx: Context, gangs: list[Gang], queues: Queues) -> Result:
    result = Result()
    for gang in gangs:
        if gang.gated:
            ctx.warn(
                gang.obj or gang.gated[0].src,
                f"{len(gang.gated)} pod(s) have spec.schedulingGates: not counted toward the gang's quorum "
                "and not bound until the gates are removed",
            )
        roles = _roles(gang) if gang.pods else _template_roles(ctx, gang)
        if not roles:
            if gang.obj is not None:
                ctx.warn(gang.obj, "no pods and no pod templates: nothing to schedule")
            continue
        spec = _spec_fields(ctx, gang, roles, queues)
        if spec is None:
            continue
        bound = [p for p in gang.pods if p.node is not None]
        if bound:
            _add_running(ctx, result, gang, roles, spec, bound)
        else:
            _add_pending(ctx, result, gang, roles, spec)
    return result


def _roles(gang: Gang) -> list[_RoleGroup]:
    """Pods with one role hint and one shape form a role, named after the hint (else
    ``worker``), ordered by their first pod; a second shape under one name gets ``-1``."""
    groups: dict[tuple[str, Shape], list[Pod]] = {}
    for pod in sorted(gang.pods, key=lambda p: p.name):
        groups.setdefault((gang.hints.get(pod.name, ""), pod.shape), []).append(pod)
    taken: Counter[str] = Counter()
    out = []
    for (hint, shape), pods in groups.items():
        base = hint or "worker"
        name = base if not taken[base] else f"{base}-{taken[base]}"
        minimum = gang.role_min.get(hint) if hint and not taken[base] else None
        taken[base] += 1
        out.append(_RoleGroup(name, shape, pods, minimum, len(pods)))
    return out


def _template_roles(ctx: Context, gang: Gang) -> list[_RoleGroup]:
    if gang.templates and gang.obj is not None:
        ctx.warn(
            gang.obj,
            "no pods yet: imported from its pod templates; if admitted, export writes its Kueue admission "
            "(status.admission), not Bindings",
        )
    return [_RoleGroup(t.role, t.shape, [], t.minimum, t.count) for t in gang.templates]


def _spec_fields(ctx: Context, gang: Gang, roles: list[_RoleGroup], queues: Queues) -> dict[str, Any] | None:
    """Fields shared by pending and running gangs."""
    priorities = sorted({p.priority for p in gang.pods})
    if len(priorities) > 1 and gang.priority is None and gang.obj is not None:
        ctx.warn(gang.obj, f"pods have priorities {priorities}; the highest is used")
    priority = gang.priority if gang.priority is not None else (priorities[-1] if priorities else 0)
    queue = gang.queue or next((q for q in map(queues.of_pod, gang.pods) if q), None)
    built = [_role(ctx, gang, r) for r in roles]
    if any(r is None for r in built):
        return None  # reported; the import fails once every gang has been read
    return {
        "name": gang.name,
        "priority": priority,
        "roles": built,
        "min_members": max(gang.min_members, 1) if gang.min_members is not None else None,
        "max_members": _max_members(ctx, gang, sum(r.replicas for r in roles)),
        "topology": gang.topology,
        **({"queue": queue} if queue else {}),
    }


def _max_members(ctx: Context, gang: Gang, total: int) -> int | None:
    """Koordinator's total-number caps the gang only when it is below its pod count; one below
    the gang's minimum contradicts it and is dropped (warned) rather than failing the round."""
    cap = gang.max_members
    if not cap or cap >= total:
        return None
    if cap < (gang.min_members or 1):
        ctx.warn(gang.obj or f"gang {gang.name}", f"total-number {cap} is below min-available: ignored")
        return None
    return cap


_POD_FIELDS = {
    "requests": ".containers",
    "node_selector": ".nodeSelector",
    "node_affinity": ".affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
    "tolerations": ".tolerations",
    "name": " (role name)",
}
"""Role field -> where it comes from in a pod's spec, for problems found only by the model."""


def _role(ctx: Context, gang: Gang, group: _RoleGroup) -> Role | None:
    shape = group.shape
    if group.pods:
        where = group.pods[0].src.path(".spec")
    else:
        where = gang.obj.path(".spec.podSets") if gang.obj is not None else f"gang {gang.name}"
    return build(
        ctx,
        Role,
        where,
        _POD_FIELDS,
        name=group.name,
        replicas=group.replicas,
        min_replicas=group.minimum,
        requests=quantities(dict(shape.requests)),
        node_selector=dict(shape.node_selector),
        node_affinity=[{"key": k, "operator": op, "values": list(v)} for k, op, v in shape.affinity],
        tolerations=[{"key": k, "operator": op, "value": v, "effect": e} for k, op, v, e in shape.tolerations],
    )


def _submit_time(gang: Gang) -> float:
    times = [p.created for p in gang.pods if p.created is not None]
    return gang.created if gang.created is not None else min(times, default=0.0)


def _add_pending(ctx: Context, result: Result, gang: Gang, roles: list[_RoleGroup], spec: dict[str, Any]) -> None:
    """A pending gang; one that has fewer pods than its minimum waits for them, outside the
    round (the peers' PreFilter does the same), with a warning."""
    model = PendingGang(**spec, submit_time=_submit_time(gang), group=gang.group)
    short = [r.name for r in model.roles if model.role_minimum(r) > r.replicas]
    if model.minimum > model.total_replicas or short:
        subject = gang.obj if gang.obj is not None else f"gang {gang.name}"
        ctx.warn(
            subject,
            f"{model.total_replicas} pods exist, fewer than its minimum {model.minimum}: "
            "left out until they are created",
        )
        return
    result.pending.append(model)
    result.pending_pods[gang.name] = {r.name: [p.src.ref for p in r.pods] for r in roles}
    result.gang_objects[gang.name] = (gang.obj or gang.pods[0].src).ref


def _add_running(
    ctx: Context, result: Result, gang: Gang, roles: list[_RoleGroup], spec: dict[str, Any], bound: list[Pod]
) -> None:
    """A gang with bound pods runs; its unbound pods are growth. When fewer pods are bound than
    its minimum (a gang caught mid-binding), the minimum is lowered to what is bound, warned."""
    pods = [
        BoundPod(name=f"{p.src.namespace}/{p.name}", role=r.name, node=p.node or "")
        for r in roles
        for p in r.pods
        if p.node is not None
    ]
    created = [p.created for p in bound if p.created is not None]
    model = RunningGang(
        **spec,
        pods=pods,
        preemptible=all(p.preemptible for p in gang.pods),
        submit_time=_submit_time(gang) if gang.created is not None or created else None,
        started_at=max(created) if created else None,
    )
    if len(bound) < model.minimum:
        subject = gang.obj if gang.obj is not None else f"gang {gang.name}"
        ctx.warn(
            subject, f"only {len(bound)} of its minimum {model.minimum} pods are bound: minimum lowered to {len(bound)}"
        )
        per_role = Counter(p.role for p in pods)
        new_roles = [
            r.model_copy(update={"min_replicas": min(model.role_minimum(r), per_role[r.name])}) for r in model.roles
        ]
        model = model.model_copy(update={"roles": new_roles, "min_members": len(bound), "max_members": None})
    result.running.append(model)
    for r in roles:
        for p in r.pods:
            if p.node is not None:
                result.running_pods[f"{p.src.namespace}/{p.name}"] = p.src.ref
    result.pending_pods[gang.name] = {r.name: [p.src.ref for p in r.pods if p.node is None] for r in roles}
    result.gang_objects[gang.name] = (gang.obj or gang.pods[0].src).ref
