"""Pods: their priority (``PriorityClass``), effective requests, node constraints (selector,
required node affinity, tolerations) and whether they may be preempted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gangopt.k8s.context import Context, Obj, Source, as_mapping, as_resources, as_sequence, string_map, timestamp
from gangopt.k8s.kinds import KUEUE
from gangopt.quantities import MILLI

SYSTEM_PRIORITY = 1_000_000_000
"""Priorities at or above this are Kubernetes' system-critical classes: never preempted."""


class PriorityClasses:
    """``PriorityClass`` values by name, with the ``globalDefault`` one for pods without a class."""

    def __init__(self, ctx: Context, sources: list[Source]) -> None:
        self.ctx = ctx
        self.values: dict[str, int] = {}
        self.default = 0
        for src in sources:
            value = src.obj.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                ctx.error(src.path(".value"), f"expected an integer, got {value!r}")
                continue
            self.values[src.name] = value
            if src.obj.get("globalDefault") is True:
                self.default = value
        self.missing: set[str] = set()

    def lookup(self, src: Source, class_name: str | None) -> int:
        """The value of ``class_name``; the global default (with a warning) when it is not in
        the input, since the API server would have resolved it and we cannot."""
        if not class_name:
            return self.default
        if class_name in self.values:
            return self.values[class_name]
        if class_name not in ("system-cluster-critical", "system-node-critical"):
            self.ctx.warn(src, f"PriorityClass {class_name!r} not in the input; priority {self.default} used")
            return self.default
        return 2_000_000_000 if class_name == "system-cluster-critical" else 2_000_001_000


@dataclass(frozen=True)
class Shape:
    """What decides where a pod may go; pods of one gang with equal shapes form one role."""

    requests: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...]
    affinity: tuple[tuple[str, str, tuple[str, ...]], ...]
    tolerations: tuple[tuple[str | None, str, str, str | None], ...]


@dataclass
class Pod:
    src: Source
    shape: Shape
    priority: int
    node: str | None
    created: float | None
    preemptible: bool
    gated: bool = False  # unbound with spec.schedulingGates: the scheduler does not see it yet

    @property
    def name(self) -> str:
        return self.src.name


def read_pods(ctx: Context, sources: list[Source], priorities: PriorityClasses, pods_resource: bool) -> list[Pod]:
    """Pending and running pods, sorted by namespace/name; finished pods use nothing."""
    out = []
    for src in sources:
        status = as_mapping(ctx, src.obj.get("status"), src.path(".status"))
        phase = status.get("phase", "Pending")
        if phase in ("Succeeded", "Failed"):
            continue
        spec = as_mapping(ctx, src.obj.get("spec"), src.path(".spec"))
        node = spec.get("nodeName") or None
        if phase not in ("Pending", "Running"):
            ctx.warn(src, f"phase {phase!r} read as {'Running' if node else 'Pending'}")
        shape = pod_shape(ctx, src, spec, pods_resource)
        priority = _pod_priority(ctx, src, spec, priorities)
        gated = node is None and _gated(spec)
        out.append(Pod(src, shape, priority, node, timestamp(ctx, src), _preemptible(src, spec, priority), gated))
    return sorted(out, key=lambda p: (p.src.namespace, p.name))


def _gated(spec: Obj) -> bool:
    """Whether a gate other than Kueue's holds the pod back. Kueue's own gates
    (``kueue.x-k8s.io/topology``) are lifted once Kueue places the workload, the decision gangopt
    stands in for; any other gate (a quota controller, an operator) keeps the pod out of
    scheduling, so every peer leaves it out of its gang's quorum."""
    gates = spec.get("schedulingGates")
    names = (
        [str(g.get("name", "")) if isinstance(g, dict) else str(g) for g in gates] if isinstance(gates, list) else []
    )
    return any(not name.startswith(KUEUE) for name in names)


def _pod_priority(ctx: Context, src: Source, spec: Obj, priorities: PriorityClasses) -> int:
    """``spec.priority`` (what the API server resolved) wins over ``priorityClassName``."""
    value = spec.get("priority")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            ctx.error(src.path(".spec.priority"), f"expected an integer, got {value!r}")
            return 0
        return value
    name = spec.get("priorityClassName")
    return priorities.lookup(src, str(name) if name else None)


def _preemptible(src: Source, spec: Obj, priority: int) -> bool:
    """See the package docstring (:mod:`gangopt.k8s`): opt-out labels, system priorities, DaemonSet and static pods."""
    marks = {**src.annotations, **src.labels}
    if marks.get("quota.scheduling.koordinator.sh/preemptible") == "false":
        return False
    if marks.get("volcano.sh/preemptable") == "false":
        return False
    if priority >= SYSTEM_PRIORITY or "kubernetes.io/config.mirror" in src.annotations:
        return False
    owners = src.meta.get("ownerReferences")
    return not (isinstance(owners, list) and any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners))


def pod_shape(ctx: Context, src: Source, spec: Obj, pods_resource: bool, at: str = ".spec") -> Shape:
    """``at``: where ``spec`` sits in ``src`` (a pod's ``.spec`` or a pod template's)."""
    requests = pod_requests(ctx, src.path(at), spec)
    if pods_resource:
        requests["pods"] = MILLI
    return Shape(
        requests=tuple(sorted((k, v) for k, v in requests.items() if v)),
        node_selector=tuple(sorted(string_map(spec.get("nodeSelector")).items())),
        affinity=_affinity(ctx, src, spec, at),
        tolerations=_tolerations(ctx, src, spec, at),
    )


def pod_requests(ctx: Context, path: str, spec: Obj) -> dict[str, int]:
    """Effective requests (Kubernetes' rule): max(sum of containers + sidecars, each regular
    init container + the sidecars started before it), plus ``overhead``."""
    containers: dict[str, int] = {}
    for i, c in enumerate(as_sequence(ctx, spec.get("containers"), f"{path}.containers")):
        containers = _add(containers, _container_requests(ctx, c, f"{path}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(as_sequence(ctx, spec.get("initContainers"), f"{path}.initContainers")):
        requests = _container_requests(ctx, c, f"{path}.initContainers[{i}]")
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, requests)
        else:
            init_peak = _peak(init_peak, _add(requests, sidecars))
    total = _peak(_add(containers, sidecars), init_peak)
    return _add(total, as_resources(ctx, spec.get("overhead"), f"{path}.overhead"))


def _container_requests(ctx: Context, container: Any, path: str) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests the limit (API default)."""
    c = as_mapping(ctx, container, path)
    resources = as_mapping(ctx, c.get("resources"), f"{path}.resources")
    limits = as_resources(ctx, resources.get("limits"), f"{path}.resources.limits")
    requests = as_resources(ctx, resources.get("requests"), f"{path}.resources.requests")
    return {**limits, **requests}


def _add(into: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(into)
    for k, v in more.items():
        out[k] = out.get(k, 0) + v
    return out


def _peak(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in {*a, *b}}


def _affinity(ctx: Context, src: Source, spec: Obj, at: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The first required nodeSelectorTerm's In/NotIn/Exists/DoesNotExist expressions.

    Later terms (ORed) are dropped: placing only where the first holds stays correct. Gt/Lt,
    matchFields, preferred terms and pod (anti-)affinity cannot be expressed: warned."""
    path = src.path(f"{at}.affinity")
    affinity = as_mapping(ctx, spec.get("affinity"), path)
    for key in ("podAffinity", "podAntiAffinity"):
        if affinity.get(key):
            ctx.warn(src, f"{key} ignored (gangopt places by node constraints only)")
    if spec.get("topologySpreadConstraints"):
        ctx.warn(src, "topologySpreadConstraints ignored")
    node = as_mapping(ctx, affinity.get("nodeAffinity"), f"{path}.nodeAffinity")
    if node.get("preferredDuringSchedulingIgnoredDuringExecution"):
        ctx.warn(src, "preferred node affinity ignored")
    required = as_mapping(
        ctx, node.get("requiredDuringSchedulingIgnoredDuringExecution"), f"{path}.nodeAffinity.required"
    )
    terms = as_sequence(ctx, required.get("nodeSelectorTerms"), f"{path}.nodeAffinity.nodeSelectorTerms")
    if not terms:
        return ()
    if len(terms) > 1:
        ctx.warn(src, f"required node affinity has {len(terms)} nodeSelectorTerms; only the first is used")
    term = as_mapping(ctx, terms[0], f"{path}.nodeAffinity.nodeSelectorTerms[0]")
    if term.get("matchFields"):
        ctx.warn(src, "node affinity matchFields ignored")
    out = []
    for i, e in enumerate(as_sequence(ctx, term.get("matchExpressions"), f"{path}.nodeAffinity.matchExpressions")):
        expr = as_mapping(ctx, e, f"{path}.nodeAffinity.nodeSelectorTerms[0].matchExpressions[{i}]")
        op = str(expr.get("operator", ""))
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            ctx.warn(src, f"node affinity operator {op!r} on {expr.get('key')!r} ignored")
            continue
        out.append((str(expr.get("key", "")), op, tuple(str(v) for v in expr.get("values") or [])))
    return tuple(sorted(out))


def _tolerations(ctx: Context, src: Source, spec: Obj, at: str) -> tuple[tuple[str | None, str, str, str | None], ...]:
    out = []
    for i, t in enumerate(as_sequence(ctx, spec.get("tolerations"), src.path(f"{at}.tolerations"))):
        tol = as_mapping(ctx, t, src.path(f"{at}.tolerations[{i}]"))
        op = str(tol.get("operator") or "Equal")
        effect = tol.get("effect") or None
        if op not in ("Equal", "Exists") or effect not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
            ctx.error(src.path(f"{at}.tolerations[{i}]"), f"unknown operator {op!r} or effect {effect!r}")
            continue
        key = tol.get("key") or None
        out.append((None if key is None else str(key), op, str(tol.get("value") or ""), effect))
    return tuple(sorted(out, key=repr))


def check_bindings(ctx: Context, pods: list[Pod], nodes: set[str]) -> None:
    for pod in pods:
        if pod.node is not None and pod.node not in nodes:
            ctx.error(pod.src.path(".spec.nodeName"), f"bound to node {pod.node!r}, which is not in the input")


def template_resources(ctx: Context, src: Source) -> set[str]:
    """Resources requested by Kueue pod templates (so nodes keep them in their capacity)."""
    spec = src.obj.get("spec")
    out: set[str] = set()
    for ps in (spec.get("podSets") if isinstance(spec, dict) else None) or []:
        template = ps.get("template") if isinstance(ps, dict) else None
        tspec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(tspec, dict):
            out |= set(pod_requests(Context(), "", tspec))
    return out
