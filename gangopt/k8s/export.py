"""Turn a plan back into the Kubernetes API objects a controller applies.

:func:`export_plan` pairs every placement with a real pod (the manifests were imported with
:mod:`gangopt.k8s`, which kept the pods of each gang and role) and returns, in the order
``docs/integration.md`` asks for:

1. a ``policy/v1 Eviction`` per preempted or shrunk pod (apply first, wait until gone);
2. a ``v1 Binding`` per placed pod; for an admitted Kueue ``Workload`` whose pods do not exist
   yet, its admission instead (below);
3. a status patch per admitted gang of a ``PodGroup``, as its own scheduler writes it once the
   gang's minimum is placed: Volcano (``scheduling.volcano.sh``) ``phase: Running`` and the
   condition ``Scheduled``; scheduler-plugins and Koordinator (``scheduling.x-k8s.io``,
   ``scheduling.sigs.k8s.io``) ``phase: Scheduled`` and ``scheduled``, the pods placed;
4. a status patch per waiting gang: condition ``GangoptScheduled`` (status False, reason = the
   waiting code, message = the plan's reasons) on its PodGroup/Workload, or ``PodScheduled``
   (reason ``Unschedulable``) on each pending pod of a gang of plain pods.

Every object carries the annotation ``gangopt.io/request`` with the HTTP call that applies it
(``POST /api/v1/namespaces/<ns>/pods/<pod>/binding``), so a controller in any language needs no
knowledge of the kinds.

**Kueue admission.** A Workload imported from its pod templates has no pods to bind: Kueue
creates them once the Workload is admitted. Its export is the status patch Kueue's own
scheduler writes when it reserves quota (``kueue.x-k8s.io`` ``Workload``, v1beta1 or v1beta2):
``status.admission`` with ``clusterQueue`` (the gang's queue) and one ``podSetAssignments``
entry per pod set placed: ``name``, ``count`` (its pods in the plan), ``resourceUsage`` (count x
the pod's requests, GPUs under the nodes' resource name), ``flavors`` for each resource the
ClusterQueue offers in exactly one flavor (several: left out, with a warning), and, when the
levels came from a Kueue ``Topology``, a ``topologyAssignment``: ``levels`` are its node labels
(only ``kubernetes.io/hostname`` when that is a level, as Kueue writes it) and ``domains`` the
label values of the nodes the plan chose with their pod counts (``v1beta2``: one slice,
``valuesPerLevel[].roots`` and ``podCounts``); plus the condition ``QuotaReserved``. Kueue
then admits the Workload (its admission checks permitting), unsuspends the job, and TAS pins
each pod to its domain.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from gangopt.errors import InputError, Problem
from gangopt.k8s.contract import Imported, ObjectRef
from gangopt.k8s.topology import HOSTNAME_LABEL
from gangopt.quantities import format_quantity
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
    scheduled = _pod_group_patches(plan, imported)
    patches = _status_patches(plan, imported, problems)
    if problems:
        raise InputError(problems, "plan")
    if warnings is not None:
        warnings += notes
    return [*evictions, *bindings, *scheduled, *patches]


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
    admissions: dict[str, dict[str, list[Placement]]] = defaultdict(dict)
    for (gang, role), placed in by_role.items():
        placed.sort(key=lambda item: (_trailing_index(item[1].pod), item[0]))
        pods = imported.pending_pods[gang][role]
        ref = imported.gang_objects.get(gang, _NO_REF)
        if not pods and ref.kind == "Workload" and ref.api_version.startswith("kueue.x-k8s.io/"):
            admissions[gang][role] = [p for _, p in placed]
            continue
        if not pods and ref.kind == "Workload":
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
    for gang in sorted(admissions):
        out.append(_kueue_admission(imported, gang, admissions[gang], notes))
    return out


# ----------------------------------------------------------------------------- Kueue admission


def _kueue_admission(
    imported: Imported, gang: str, placed: dict[str, list[Placement]], notes: list[str]
) -> dict[str, Any]:
    """The ``status.admission`` patch of a Kueue Workload (see the module docstring)."""
    ref = imported.gang_objects[gang]
    spec = next(g for g in imported.round.pending if g.name == gang)
    queue = spec.queue
    offered = imported.kueue.flavors.get(queue, {})
    if not offered:
        notes.append(f"gang {gang}: ClusterQueue {queue} not in the input: its admission names no flavors")
    roles = {r.name: r for r in spec.roles}
    assignments = []
    for role in (r.name for r in spec.roles if r.name in placed):
        pods = placed[role]
        usage = {
            _k8s_name(imported, res): format_quantity(amount * len(pods), res)
            for res, amount in sorted(roles[role].requests.items())
            if res != "pods"
        }
        flavors = {}
        for res in usage:
            names = offered.get(res, [])
            if len(names) == 1:
                flavors[res] = names[0]
            elif len(names) > 1:
                notes.append(f"gang {gang} pod set {role}: {res} has flavors {names} in {queue}: flavor left out")
        assignment: dict[str, Any] = {"name": role, **({"flavors": flavors} if flavors else {})}
        assignment |= {"resourceUsage": usage, "count": len(pods)}
        if imported.kueue.topology:
            topology = _topology_assignment(imported, pods)
            assignment["topologyAssignment"] = _v1beta2(topology) if ref.api_version.endswith("/v1beta2") else topology
        assignments.append(assignment)
    now = _timestamp(imported)
    condition = {
        "type": "QuotaReserved",
        "status": "True",
        "reason": "QuotaReserved",
        "message": f"Quota reserved in ClusterQueue {queue} (decided by gangopt)",
        "lastTransitionTime": now,
    }
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "metadata": _metadata(ref, _status_url(ref)),
        "status": {
            "admission": {"clusterQueue": queue, "podSetAssignments": assignments},
            "conditions": [condition],
        },
    }


def _k8s_name(imported: Imported, resource: str) -> str:
    return imported.kueue.gpu if resource == "gpu" else resource


def _topology_assignment(imported: Imported, pods: list[Placement]) -> dict[str, Any]:
    """Pods per lowest-level domain, named by node label values, highest level first; only the
    hostname when it is a level (Kueue's own form: it names a node alone)."""
    labels = imported.kueue.topology
    if HOSTNAME_LABEL in labels:
        labels = [HOSTNAME_LABEL]
    nodes = {n.name: n for n in imported.round.cluster.nodes}
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for p in pods:
        node = nodes[p.node]
        values = tuple(node.labels.get(label, p.node if label == HOSTNAME_LABEL else "") for label in labels)
        counts[values] += 1
    return {
        "levels": list(labels),
        "domains": [{"values": list(values), "count": n} for values, n in sorted(counts.items())],
    }


def _v1beta2(assignment: dict[str, Any]) -> dict[str, Any]:
    """The same assignment in ``kueue.x-k8s.io/v1beta2``'s form: one slice, the values arranged
    by level (``valuesPerLevel[].roots``), then ``podCounts`` (no prefixes extracted)."""
    domains = assignment["domains"]
    return {
        "levels": assignment["levels"],
        "slices": [
            {
                "domainCount": len(domains),
                "valuesPerLevel": [
                    {"roots": [d["values"][i] for d in domains]} for i in range(len(assignment["levels"]))
                ],
                "podCounts": [d["count"] for d in domains],
            }
        ],
    }


def _timestamp(imported: Imported) -> str:
    return datetime.fromtimestamp(imported.round.now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_NO_REF = ObjectRef("", "", "", "")


# ----------------------------------------------------------------------------- PodGroup status


VOLCANO_READY = "tasks in gang are ready to be scheduled"
"""The reason Volcano's scheduler gives its ``Scheduled`` PodGroup condition."""


def _pod_group_patches(plan: Plan, imported: Imported) -> list[dict[str, Any]]:
    """The status an admitted gang's PodGroup gets from its own scheduler (module docstring)."""
    now = _timestamp(imported)
    placed: dict[str, int] = defaultdict(int)
    for p in plan.placements:
        placed[p.gang] += 1
    out = []
    for gang in plan.admitted:
        ref = imported.gang_objects.get(gang)
        if ref is None or ref.kind != "PodGroup" or not placed[gang]:
            continue
        if ref.api_version.startswith("scheduling.volcano.sh/"):
            condition = {
                "type": "Scheduled",
                "status": "True",
                "reason": VOLCANO_READY,
                "message": f"{placed[gang]} pods placed by gangopt",
                "lastTransitionTime": now,
            }
            status: dict[str, Any] = {"phase": "Running", "conditions": [condition]}
        else:
            status = {"phase": "Scheduled", "scheduled": placed[gang]}
        out.append(
            {
                "apiVersion": ref.api_version,
                "kind": ref.kind,
                "metadata": _metadata(ref, _status_url(ref)),
                "status": status,
            }
        )
    return out


# ----------------------------------------------------------------------------- waiting


def _status_patches(plan: Plan, imported: Imported, problems: list[Problem]) -> list[dict[str, Any]]:
    """A condition on the gang's object; a gang of plain pods gets ``PodScheduled`` on each of
    its pending pods, which is where ``kubectl describe pod`` users look."""
    now = _timestamp(imported)
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
