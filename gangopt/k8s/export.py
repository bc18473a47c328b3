"""Turn a plan back into the Kubernetes API objects a controller applies.

:func:`export_plan` pairs every placement with a real pod (the manifests were imported with
:mod:`gangopt.k8s`, which kept the pods of each gang and role) and returns, in the order
``docs/integration.md`` asks for:

1. a ``policy/v1 Eviction`` per preempted or shrunk pod (apply first, wait until gone);
2. a ``v1 Binding`` per placed pod;
3. a status patch per waiting gang: condition ``GangoptScheduled`` (status False, reason = the
   waiting code, message = the plan's reasons) on its PodGroup/Workload, or ``PodScheduled``
   (reason ``Unschedulable``) on each pending pod of a gang of plain pods.

Every object carries the annotation ``gangopt.io/request`` with the HTTP call that applies it
(``POST /api/v1/namespaces/<ns>/pods/<pod>/binding``), so a controller in any language needs no
knowledge of the kinds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from gangopt.errors import InputError, Problem
from gangopt.k8s.contract import Imported, ObjectRef
from gangopt.schema import Placement, Plan, Waiting

REQUEST_ANNOTATION = "gangopt.io/request"
CONDITION_TYPE = "GangoptScheduled"
_PLURALS = {"PodGroup": "podgroups", "Workload": "workloads", "Pod": "pods"}


def export_plan(plan: Plan, imported: Imported, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """Evictions, Bindings and status patches for ``plan``; raises :class:`InputError` naming
    the plan path when the plan does not match the manifests. Placements that cannot become a
    Binding yet (a Kueue Workload without pods) are reported in ``warnings`` when given."""
    problems: list[Problem] = []
    notes: list[str] = []
    evictions = _evictions(plan, imported, problems)
    bindings = _bindings(plan, imported, problems, notes)
    patches = _status_patches(plan, imported, problems)
    if problems:
        raise InputError(problems, "plan")
    if warnings is not None:
        warnings += notes
    return [*evictions, *bindings, *patches]


# ----------------------------------------------------------------------------- objects


def _metadata(ref: ObjectRef, request: str) -> dict[str, Any]:
    return {"name": ref.name, "namespace": ref.namespace, "annotations": {REQUEST_ANNOTATION: request}}


def _binding(pod: ObjectRef, node: str) -> dict[str, Any]:
    url = f"POST /api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": _metadata(pod, url),
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def _eviction(pod: ObjectRef) -> dict[str, Any]:
    url = f"POST /api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": _metadata(pod, url)}


def _status_url(ref: ObjectRef) -> str:
    """``PATCH .../status`` of the object, core (``/api/v1``) or of its API group (``/apis/g/v``)."""
    plural = _PLURALS.get(ref.kind, ref.kind.lower() + "s")
    prefix = "/api/v1" if ref.api_version == "v1" else f"/apis/{ref.api_version}"
    return f"PATCH {prefix}/namespaces/{ref.namespace}/{plural}/{ref.name}/status"


def _condition_patch(ref: ObjectRef, condition: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": _metadata(ref, _status_url(ref)),
        "status": {"conditions": [condition]},
    }


# ----------------------------------------------------------------------------- evictions


def _evictions(plan: Plan, imported: Imported, problems: list[Problem]) -> list[dict[str, Any]]:
    out = []
    for i, preemption in enumerate(plan.preemptions):
        for j, pod in enumerate(preemption.pods):
            ref = imported.running_pods.get(pod)
            if ref is None:
                problems.append(
                    Problem(f"$.preemptions[{i}].pods[{j}]", f"pod {pod!r} is not a running pod of the manifests")
                )
            else:
                out.append(_eviction(ref))
    return out


# ----------------------------------------------------------------------------- bindings


def _trailing_index(pod: str) -> int:
    """``ns/job-worker-12`` -> 12: the order in which placements take a role's pods."""
    match = re.search(r"(\d+)$", pod)
    return int(match.group(1)) if match else 0


def _bindings(plan: Plan, imported: Imported, problems: list[Problem], notes: list[str]) -> list[dict[str, Any]]:
    """Placements of one (gang, role), by their pods' trailing index, take the role's pending
    pods in name order."""
    by_role: dict[tuple[str, str], list[tuple[int, Placement]]] = defaultdict(list)
    for i, placement in enumerate(plan.placements):
        roles = imported.pending_pods.get(placement.gang)
        if roles is None:
            problems.append(Problem(f"$.placements[{i}].gang", f"unknown gang {placement.gang!r}"))
        elif placement.role not in roles:
            problems.append(
                Problem(f"$.placements[{i}].role", f"gang {placement.gang!r} has no role {placement.role!r}")
            )
        else:
            by_role[(placement.gang, placement.role)].append((i, placement))
    out = []
    for (gang, role), placed in by_role.items():
        placed.sort(key=lambda item: (_trailing_index(item[1].pod), item[0]))
        pods = imported.pending_pods[gang][role]
        if not pods and imported.gang_objects.get(gang, _NO_REF).kind == "Workload":
            notes.append(
                f"gang {gang} role {role}: {len(placed)} placements but its Workload has no pods yet: no Binding"
            )
            continue
        for k, (i, placement) in enumerate(placed):
            if k >= len(pods):
                problems.append(
                    Problem(
                        f"$.placements[{i}]",
                        f"more placements for {gang} role {role} than its {len(pods)} pending pods",
                    )
                )
            else:
                out.append(_binding(pods[k], placement.node))
    return out


_NO_REF = ObjectRef("", "", "", "")


# ----------------------------------------------------------------------------- waiting


def _status_patches(plan: Plan, imported: Imported, problems: list[Problem]) -> list[dict[str, Any]]:
    """A condition on the gang's object; a gang of plain pods gets ``PodScheduled`` on each of
    its pending pods, which is where ``kubectl describe pod`` users look."""
    now = datetime.fromtimestamp(imported.round.now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = []
    for i, waiting in enumerate(plan.waiting):
        ref = imported.gang_objects.get(waiting.gang)
        if ref is None:
            problems.append(Problem(f"$.waiting[{i}].gang", f"unknown gang {waiting.gang!r}"))
            continue
        if ref.kind != "Pod":
            out.append(_condition_patch(ref, _condition(CONDITION_TYPE, waiting.code, waiting, now)))
            continue
        pods = [p for role in imported.pending_pods.get(waiting.gang, {}).values() for p in role] or [ref]
        out += [_condition_patch(p, _condition("PodScheduled", "Unschedulable", waiting, now)) for p in pods]
    return out


def _condition(kind: str, reason: str, waiting: Waiting, now: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": "False",
        "reason": reason,
        "message": "; ".join(waiting.reasons) or f"waiting: {waiting.code}",
        "lastTransitionTime": now,
    }
