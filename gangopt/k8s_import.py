"""Build a gangopt :class:`~gangopt.schema.Round` from what ``kubectl get ... -o yaml`` prints.

A controller that wants gangopt's decisions does not have to write a Round by hand: it dumps
nodes, pods and the gang objects of whichever scheduler its users know (scheduler-plugins and
Koordinator ``PodGroup``, Koordinator gang annotations, Volcano ``PodGroup``, Kueue
``Workload``, the upstream ``scheduling.k8s.io`` Workload of KEP-4671) and this module maps them.
What cannot be mapped is reported as a warning naming the object (``Kind namespace/name: ...``),
never silently dropped; input that cannot be used raises :class:`~gangopt.errors.InputError`
whose paths name the object and field (``items[3] (Pod default/t-0).spec.containers[0]...``).

Mapping decisions (see also the report of the k8s import for docs):

* Nodes: ``status.allocatable`` is the capacity; ``nvidia.com/gpu`` and ``amd.com/gpu`` become
  ``gpu``; cpu, memory and gpu are always kept, other resources only when some pod requests
  them. ``pods`` (the kubelet's pod limit) is kept as resource ``pods`` when every node reports
  it, and every pod then requests 1 of it, so a node full of small pods is full for gangopt
  too. Cordoned (``spec.unschedulable``) and not-Ready nodes are ``schedulable: false``.
* Pods: requests follow Kubernetes' effective-request rule: max(sum of containers (+ sidecar
  init containers), every regular init container (+ sidecars started before it)), plus
  ``spec.overhead``; a resource with only a limit requests its limit.
* Gangs are named ``<namespace>/<name>``; bound pods are named ``<namespace>/<pod>`` in the round.
* Preemptible: a running gang is *not* preemptible when one of its pods has the Koordinator
  label ``quota.scheduling.koordinator.sh/preemptible: "false"`` or Volcano's
  ``volcano.sh/preemptable: "false"`` (label or annotation), has a priority of at least
  1,000,000,000 (Kubernetes reserves those for system-critical classes), is owned by a
  DaemonSet (it would be recreated on the same node) or is a static (mirror) pod.
* ``submit_time`` is the gang object's ``creationTimestamp`` (else its oldest pod's), in seconds
  since the epoch; ``policy.now`` is the latest ``creationTimestamp`` in the input.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gangopt.errors import InputError, Problem, problems_from_validation
from gangopt.quantities import MILLI, format_quantity, parse_quantity
from gangopt.schema import (
    NODE_LEVEL,
    BoundPod,
    Cluster,
    MatchExpression,
    Node,
    PendingGang,
    Policy,
    Queue,
    Role,
    Round,
    RunningGang,
    Taint,
    Toleration,
    TopologyRequest,
)

Obj = dict[str, Any]

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_NAMES = {"nvidia.com/gpu": "gpu", "amd.com/gpu": "gpu"}
ALWAYS_KEPT = ("cpu", "memory", "gpu")
SYSTEM_PRIORITY = 1_000_000_000
"""Priorities at or above this are Kubernetes' system-critical classes: never preempted."""

# Gang forms: labels and annotations read from pods.
SP_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
KOORD_POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
KOORD = "gang.scheduling.koordinator.sh/"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK = "volcano.sh/task-spec"
KUEUE = "kueue.x-k8s.io/"
KOORD_QUOTA_LABEL = "quota.scheduling.koordinator.sh/name"
KOORD_QUOTA_PARENT = "quota.scheduling.koordinator.sh/parent"

_VOLCANO = "scheduling.volcano.sh"
_SP = "scheduling.x-k8s.io"
_KOORD_GROUP = "scheduling.sigs.k8s.io"
_KUEUE_GROUP = "kueue.x-k8s.io"
_UPSTREAM = "scheduling.k8s.io"

_IGNORED_KINDS = {
    "Job": "its pods carry what gangopt needs",
    "Deployment": "its pods carry what gangopt needs",
    "StatefulSet": "its pods carry what gangopt needs",
    "ReplicaSet": "its pods carry what gangopt needs",
    "DaemonSet": "its pods carry what gangopt needs",
    "ResourceFlavor": "flavors are summed into their ClusterQueue's quota",
}


# ----------------------------------------------------------------------------- contract


@dataclass(frozen=True)
class ObjectRef:
    """A Kubernetes object, enough to address it in an API call."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass
class ImportOptions:
    """How to read the manifests.

    ``levels``: (level name, node label) pairs, coarsest first, e.g. ``[("block", "x/block"),
    ("rack", "x/rack")]``; they override a Kueue Topology or Volcano HyperNodes in the input.
    ``policy``: the round's policy (``now`` is filled in from the input when unset).
    """

    levels: list[tuple[str, str]] = field(default_factory=list)
    policy: Policy | None = None


@dataclass
class Imported:
    """The round plus what export needs to turn a plan back into API calls."""

    round: Round
    warnings: list[str]
    pending_pods: dict[str, dict[str, list[ObjectRef]]]
    running_pods: dict[str, ObjectRef]
    gang_objects: dict[str, ObjectRef]


# ----------------------------------------------------------------------------- documents


def load_documents(sources: list[str | Path] | None = None, text: str | None = None) -> list[dict[str, Any]]:
    """Read Kubernetes objects from files (``-`` is stdin) and/or ``text``: JSON, YAML or
    multi-document YAML; ``List`` kinds (what ``kubectl get -o yaml`` prints) are flattened
    so that ``items[i]`` in error paths counts objects in the order read."""
    texts = [(str(s), _read(s)) for s in sources or []]
    if text is not None:
        texts.append(("input", text))
    out: list[Obj] = []
    for name, content in texts:
        for document in _parse_text(name, content):
            out += _flatten(name, document)
    return out


def _read(source: str | Path) -> str:
    if str(source) == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise InputError([Problem(str(source), f"cannot read: {error.strerror}")], str(source)) from None


def _parse_text(name: str, content: str) -> list[Any]:
    """JSON first (fast, exact), then YAML (a superset, and multi-document)."""
    stripped = content.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(content)]
        except json.JSONDecodeError:
            pass
    try:
        return [d for d in yaml.safe_load_all(content) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError([Problem(name, f"malformed YAML/JSON: {problem}{where}")], name) from None


def _flatten(name: str, document: Any) -> list[Obj]:
    """``{"kind": "List", "items": [...]}`` (and ``PodList`` etc.) -> its items; a bare JSON
    array -> its elements."""
    if isinstance(document, list):
        return [o for d in document for o in _flatten(name, d)]
    if not isinstance(document, dict):
        raise InputError([Problem(name, f"expected a Kubernetes object, got {type(document).__name__}")], name)
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        return [o for d in document["items"] for o in _flatten(name, d)]
    return [document]


# ----------------------------------------------------------------------------- sources, context


@dataclass(frozen=True)
class _Source:
    """One input object and where it sits, for paths and warnings."""

    index: int
    obj: Obj

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def meta(self) -> Obj:
        meta = self.obj.get("metadata")
        return meta if isinstance(meta, dict) else {}

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def labels(self) -> dict[str, str]:
        return _string_map(self.meta.get("labels"))

    @property
    def annotations(self) -> dict[str, str]:
        return _string_map(self.meta.get("annotations"))

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.api_version, self.kind, self.namespace, self.name)

    @property
    def subject(self) -> str:
        """``Pod default/trainer-0`` (``Node n1`` for cluster-scoped objects)."""
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"

    def path(self, suffix: str = "") -> str:
        return f"items[{self.index}] ({self.subject}){suffix}"


def _string_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


class _Context:
    """Warnings and problems collected over the whole input, so one run reports them all."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []
        self.problems: list[Problem] = []

    def warn(self, src: _Source | str, message: str) -> None:
        self.warnings.append((src.subject if isinstance(src, _Source) else src, message))

    def error(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def raise_problems(self) -> None:
        if self.problems:
            raise InputError(self.problems, "manifests")

    def warning_lines(self) -> list[str]:
        """One line per message; the same message on many pods is said once ("and N more"),
        because a 64-pod gang with one odd field would otherwise print it 64 times."""
        subjects: dict[str, list[str]] = defaultdict(list)
        for subject, message in self.warnings:
            if subject not in subjects[message]:
                subjects[message].append(subject)
        lines = []
        for message, who in subjects.items():
            more = f" (and {len(who) - 1} more)" if len(who) > 1 else ""
            lines.append(f"{who[0]}{more}: {message}")
        return lines


def _mapping(ctx: _Context, value: Any, path: str) -> Obj:
    if value is None:
        return {}
    if not isinstance(value, dict):
        ctx.error(path, f"expected an object, got {type(value).__name__}")
        return {}
    return value


def _sequence(ctx: _Context, value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        ctx.error(path, f"expected a list, got {type(value).__name__}")
        return []
    return value


def _quantity(ctx: _Context, value: Any, path: str) -> int:
    try:
        return parse_quantity(value)
    except ValueError as error:
        ctx.error(path, str(error))
        return 0


def _count(ctx: _Context, value: Any, path: str) -> int | None:
    """A member count (minMember, minCount, ...): a non-negative integer or an error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if isinstance(value, str) and value.isdigit():
            return int(value)  # annotations carry numbers as strings
        ctx.error(path, f"expected a non-negative integer, got {value!r}")
        return None
    return value


def _timestamp(ctx: _Context, src: _Source) -> float | None:
    value = src.meta.get("creationTimestamp")
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        ctx.error(src.path(".metadata.creationTimestamp"), f"not an RFC 3339 time: {value!r}")
        return None


def _resource(name: str) -> str:
    return GPU_NAMES.get(name, name)


def _resources(ctx: _Context, value: Any, path: str) -> dict[str, int]:
    """A Kubernetes resource list -> gangopt resources in milli-units (GPU names unified)."""
    out: dict[str, int] = defaultdict(int)
    for name, amount in _mapping(ctx, value, path).items():
        out[_resource(str(name))] += _quantity(ctx, amount, f"{path}.{name}")
    return dict(out)


def _quantities(amounts: dict[str, int]) -> dict[str, str]:
    """Milli-units back to quantity strings: the schema's fields parse what they are given."""
    return {k: format_quantity(v, k) for k, v in amounts.items()}


def _add(into: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(into)
    for k, v in more.items():
        out[k] = out.get(k, 0) + v
    return out


def _peak(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: max(a.get(k, 0), b.get(k, 0)) for k in {*a, *b}}


# ----------------------------------------------------------------------------- entry point


def import_documents(objects: list[dict[str, Any]], options: ImportOptions | None = None) -> Imported:
    """Map Kubernetes objects to a round. Deterministic: nodes, gangs and pods are sorted by
    name, so the same objects (in any order, JSON or YAML) give the same round."""
    options = options or ImportOptions()
    ctx = _Context()
    sources = _sources(ctx, objects)
    ctx.raise_problems()
    kinds = _by_kind(ctx, sources)
    priorities = _PriorityClasses(ctx, kinds.get("PriorityClass", []))
    node_sources = kinds.get("Node", [])
    pods_resource = bool(node_sources) and all(_has_pods_allocatable(s) for s in node_sources)
    pods = _pods(ctx, kinds.get("Pod", []), priorities, pods_resource)
    requested = {r for p in pods for r, _ in p.shape.requests}
    requested |= {r for s in kinds.get("Workload", []) for r in _template_resources(ctx, s)}
    nodes = [_node(ctx, s, requested, pods_resource) for s in node_sources]
    topology = _topology(ctx, nodes, kinds, options)
    _check_bindings(ctx, pods, {n.name for n in nodes})
    queues = _Queues(ctx, kinds)
    gangs = _Gangs(ctx, kinds, priorities, topology, queues, pods_resource).assign(pods)
    ctx.raise_problems()
    result = _assemble(ctx, gangs, queues)
    policy = _policy(ctx, sources, options.policy)
    cluster = Cluster(
        topology_levels=[name for name, _ in topology.levels],
        nodes=[n.build(topology.domains[n.name]) for n in sorted(nodes, key=lambda n: n.name)],
    )
    try:
        rnd = Round(
            cluster=cluster,
            queues=queues.build(result.running, result.pending),
            running=result.running,
            pending=result.pending,
            policy=policy,
        )
    except ValidationError as error:
        raise InputError(problems_from_validation(error), "imported round") from None
    return Imported(rnd, ctx.warning_lines(), result.pending_pods, result.running_pods, result.gang_objects)


def _sources(ctx: _Context, objects: list[Obj]) -> list[_Source]:
    out = []
    for i, obj in enumerate(objects):
        src = _Source(i, obj if isinstance(obj, dict) else {})
        if not src.kind or not src.api_version:
            ctx.error(f"items[{i}]", "not a Kubernetes object: apiVersion and kind are required")
        elif not src.name:
            ctx.error(src.path(".metadata.name"), "missing")
        else:
            out.append(src)
    return out


_KNOWN_GROUPS = {
    "Node": {""},
    "Pod": {""},
    "PriorityClass": {"scheduling.k8s.io"},
    "PodGroup": {_VOLCANO, _SP, _KOORD_GROUP},
    "Workload": {_KUEUE_GROUP, _UPSTREAM},
    "ClusterQueue": {_KUEUE_GROUP},
    "LocalQueue": {_KUEUE_GROUP},
    "Topology": {_KUEUE_GROUP},
    "ElasticQuota": {_KOORD_GROUP},
    "HyperNode": {"topology.volcano.sh"},
    "Queue": {_VOLCANO},
}


def _by_kind(ctx: _Context, sources: list[_Source]) -> dict[str, list[_Source]]:
    """Objects of the kinds gangopt reads; every other object is a warning, except a gang kind
    of an unknown API group, which is an error: its pods would silently lose their gang."""
    out: dict[str, list[_Source]] = defaultdict(list)
    for src in sources:
        groups = _KNOWN_GROUPS.get(src.kind)
        if groups is None:
            reason = _IGNORED_KINDS.get(src.kind, f"kind {src.kind} ({src.api_version}) is not read by gangopt")
            ctx.warn(src, f"ignored: {reason}")
        elif src.group not in groups:
            ctx.error(src.path(".apiVersion"), f"unsupported apiVersion {src.api_version!r} for {src.kind}")
        else:
            out[src.kind].append(src)
    return out


# ----------------------------------------------------------------------------- priorities


class _PriorityClasses:
    """``PriorityClass`` values by name, with the ``globalDefault`` one for pods without a class."""

    def __init__(self, ctx: _Context, sources: list[_Source]) -> None:
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

    def lookup(self, src: _Source, class_name: str | None) -> int:
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


# ----------------------------------------------------------------------------- pods


@dataclass(frozen=True)
class _Shape:
    """What decides where a pod may go; pods of one gang with equal shapes form one role."""

    requests: tuple[tuple[str, int], ...]
    node_selector: tuple[tuple[str, str], ...]
    affinity: tuple[tuple[str, str, tuple[str, ...]], ...]
    tolerations: tuple[tuple[str | None, str, str, str | None], ...]


@dataclass
class _Pod:
    src: _Source
    shape: _Shape
    priority: int
    node: str | None
    created: float | None
    preemptible: bool

    @property
    def name(self) -> str:
        return self.src.name


def _pods(ctx: _Context, sources: list[_Source], priorities: _PriorityClasses, pods_resource: bool) -> list[_Pod]:
    """Pending and running pods, sorted by namespace/name; finished pods use nothing."""
    out = []
    for src in sources:
        status = _mapping(ctx, src.obj.get("status"), src.path(".status"))
        phase = status.get("phase", "Pending")
        if phase in ("Succeeded", "Failed"):
            continue
        spec = _mapping(ctx, src.obj.get("spec"), src.path(".spec"))
        node = spec.get("nodeName") or None
        if phase not in ("Pending", "Running"):
            ctx.warn(src, f"phase {phase!r} read as {'Running' if node else 'Pending'}")
        shape = _shape(ctx, src, spec, pods_resource)
        priority = _pod_priority(ctx, src, spec, priorities)
        out.append(_Pod(src, shape, priority, node, _timestamp(ctx, src), _preemptible(src, spec, priority)))
    return sorted(out, key=lambda p: (p.src.namespace, p.name))


def _pod_priority(ctx: _Context, src: _Source, spec: Obj, priorities: _PriorityClasses) -> int:
    """``spec.priority`` (what the API server resolved) wins over ``priorityClassName``."""
    value = spec.get("priority")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int):
            ctx.error(src.path(".spec.priority"), f"expected an integer, got {value!r}")
            return 0
        return value
    name = spec.get("priorityClassName")
    return priorities.lookup(src, str(name) if name else None)


def _preemptible(src: _Source, spec: Obj, priority: int) -> bool:
    """See the module docstring: opt-out labels, system priorities, DaemonSet and static pods."""
    marks = {**src.annotations, **src.labels}
    if marks.get("quota.scheduling.koordinator.sh/preemptible") == "false":
        return False
    if marks.get("volcano.sh/preemptable") == "false":
        return False
    if priority >= SYSTEM_PRIORITY or "kubernetes.io/config.mirror" in src.annotations:
        return False
    owners = src.meta.get("ownerReferences")
    return not (isinstance(owners, list) and any(isinstance(o, dict) and o.get("kind") == "DaemonSet" for o in owners))


def _shape(ctx: _Context, src: _Source, spec: Obj, pods_resource: bool, at: str = ".spec") -> _Shape:
    """``at``: where ``spec`` sits in ``src`` (a pod's ``.spec`` or a pod template's)."""
    requests = _pod_requests(ctx, src.path(at), spec)
    if pods_resource:
        requests["pods"] = MILLI
    return _Shape(
        requests=tuple(sorted((k, v) for k, v in requests.items() if v)),
        node_selector=tuple(sorted(_string_map(spec.get("nodeSelector")).items())),
        affinity=_affinity(ctx, src, spec, at),
        tolerations=_tolerations(ctx, src, spec, at),
    )


def _pod_requests(ctx: _Context, path: str, spec: Obj) -> dict[str, int]:
    """Effective requests (Kubernetes' rule): max(sum of containers + sidecars, each regular
    init container + the sidecars started before it), plus ``overhead``."""
    containers: dict[str, int] = {}
    for i, c in enumerate(_sequence(ctx, spec.get("containers"), f"{path}.containers")):
        containers = _add(containers, _container_requests(ctx, c, f"{path}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(_sequence(ctx, spec.get("initContainers"), f"{path}.initContainers")):
        requests = _container_requests(ctx, c, f"{path}.initContainers[{i}]")
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, requests)
        else:
            init_peak = _peak(init_peak, _add(requests, sidecars))
    total = _peak(_add(containers, sidecars), init_peak)
    return _add(total, _resources(ctx, spec.get("overhead"), f"{path}.overhead"))


def _container_requests(ctx: _Context, container: Any, path: str) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests the limit (API default)."""
    c = _mapping(ctx, container, path)
    resources = _mapping(ctx, c.get("resources"), f"{path}.resources")
    limits = _resources(ctx, resources.get("limits"), f"{path}.resources.limits")
    requests = _resources(ctx, resources.get("requests"), f"{path}.resources.requests")
    return {**limits, **requests}


def _affinity(ctx: _Context, src: _Source, spec: Obj, at: str) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The first required nodeSelectorTerm's In/NotIn/Exists/DoesNotExist expressions.

    Later terms (ORed) are dropped: placing only where the first holds stays correct. Gt/Lt,
    matchFields, preferred terms and pod (anti-)affinity cannot be expressed: warned."""
    path = src.path(f"{at}.affinity")
    affinity = _mapping(ctx, spec.get("affinity"), path)
    for key in ("podAffinity", "podAntiAffinity"):
        if affinity.get(key):
            ctx.warn(src, f"{key} ignored (gangopt places by node constraints only)")
    if spec.get("topologySpreadConstraints"):
        ctx.warn(src, "topologySpreadConstraints ignored")
    node = _mapping(ctx, affinity.get("nodeAffinity"), f"{path}.nodeAffinity")
    if node.get("preferredDuringSchedulingIgnoredDuringExecution"):
        ctx.warn(src, "preferred node affinity ignored")
    required = _mapping(
        ctx, node.get("requiredDuringSchedulingIgnoredDuringExecution"), f"{path}.nodeAffinity.required"
    )
    terms = _sequence(ctx, required.get("nodeSelectorTerms"), f"{path}.nodeAffinity.nodeSelectorTerms")
    if not terms:
        return ()
    if len(terms) > 1:
        ctx.warn(src, f"required node affinity has {len(terms)} nodeSelectorTerms; only the first is used")
    term = _mapping(ctx, terms[0], f"{path}.nodeAffinity.nodeSelectorTerms[0]")
    if term.get("matchFields"):
        ctx.warn(src, "node affinity matchFields ignored")
    out = []
    for i, e in enumerate(_sequence(ctx, term.get("matchExpressions"), f"{path}.nodeAffinity.matchExpressions")):
        expr = _mapping(ctx, e, f"{path}.nodeAffinity.nodeSelectorTerms[0].matchExpressions[{i}]")
        op = str(expr.get("operator", ""))
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            ctx.warn(src, f"node affinity operator {op!r} on {expr.get('key')!r} ignored")
            continue
        out.append((str(expr.get("key", "")), op, tuple(str(v) for v in expr.get("values") or [])))
    return tuple(sorted(out))


def _tolerations(
    ctx: _Context, src: _Source, spec: Obj, at: str
) -> tuple[tuple[str | None, str, str, str | None], ...]:
    out = []
    for i, t in enumerate(_sequence(ctx, spec.get("tolerations"), src.path(f"{at}.tolerations"))):
        tol = _mapping(ctx, t, src.path(f"{at}.tolerations[{i}]"))
        op = str(tol.get("operator") or "Equal")
        effect = tol.get("effect") or None
        if op not in ("Equal", "Exists") or effect not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
            ctx.error(src.path(f"{at}.tolerations[{i}]"), f"unknown operator {op!r} or effect {effect!r}")
            continue
        key = tol.get("key") or None
        out.append((None if key is None else str(key), op, str(tol.get("value") or ""), effect))
    return tuple(sorted(out, key=repr))


def _check_bindings(ctx: _Context, pods: list[_Pod], nodes: set[str]) -> None:
    for pod in pods:
        if pod.node is not None and pod.node not in nodes:
            ctx.error(pod.src.path(".spec.nodeName"), f"bound to node {pod.node!r}, which is not in the input")


# ----------------------------------------------------------------------------- nodes


@dataclass
class _NodeInfo:
    name: str
    src: _Source
    capacity: dict[str, int]
    labels: dict[str, str]
    taints: list[Taint]
    schedulable: bool

    def build(self, topology: dict[str, str]) -> Node:
        return Node(
            name=self.name,
            capacity=_quantities(self.capacity),
            labels=self.labels,
            taints=self.taints,
            schedulable=self.schedulable,
            topology=topology,
        )


def _has_pods_allocatable(src: _Source) -> bool:
    status = src.obj.get("status")
    allocatable = status.get("allocatable") if isinstance(status, dict) else None
    return isinstance(allocatable, dict) and "pods" in allocatable


def _node(ctx: _Context, src: _Source, requested: set[str], pods_resource: bool) -> _NodeInfo:
    status = _mapping(ctx, src.obj.get("status"), src.path(".status"))
    spec = _mapping(ctx, src.obj.get("spec"), src.path(".spec"))
    field_name = "allocatable" if "allocatable" in status else "capacity"
    if field_name == "capacity":
        ctx.warn(src, "no status.allocatable; status.capacity used")
    amounts = _resources(ctx, status.get(field_name), src.path(f".status.{field_name}"))
    keep = {*ALWAYS_KEPT, *requested} | ({"pods"} if pods_resource else set())
    capacity = {r: a for r, a in sorted(amounts.items()) if r in keep}
    schedulable = not spec.get("unschedulable", False)
    if schedulable and not _ready(status):
        ctx.warn(src, "not Ready: marked unschedulable")
        schedulable = False
    return _NodeInfo(src.name, src, capacity, src.labels, _taints(ctx, src, spec), schedulable)


def _ready(status: Obj) -> bool:
    """Ready unless a Ready condition says otherwise (hand-written manifests often omit it)."""
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return True


def _taints(ctx: _Context, src: _Source, spec: Obj) -> list[Taint]:
    out = []
    for i, t in enumerate(_sequence(ctx, spec.get("taints"), src.path(".spec.taints"))):
        taint = _mapping(ctx, t, src.path(f".spec.taints[{i}]"))
        effect = taint.get("effect", "NoSchedule")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not taint.get("key"):
            ctx.error(src.path(f".spec.taints[{i}]"), f"a taint needs a key and a known effect, got {taint!r}")
            continue
        out.append(Taint(key=str(taint["key"]), value=str(taint.get("value") or ""), effect=effect))
    return out


# ----------------------------------------------------------------------------- topology


@dataclass
class _Topology:
    """Levels (name, node label or ``tier<N>``) coarsest first, each node's domains, and how
    peers name levels (node label or Volcano tier) -> gangopt level."""

    levels: list[tuple[str, str]]
    domains: dict[str, dict[str, str]]
    by_label: dict[str, str]
    by_tier: dict[int, str] = field(default_factory=dict)

    def level_of_label(self, label: str) -> str | None:
        return NODE_LEVEL if label == HOSTNAME_LABEL else self.by_label.get(label)


def _topology(
    ctx: _Context, nodes: list[_NodeInfo], kinds: dict[str, list[_Source]], options: ImportOptions
) -> _Topology:
    """Levels from ``options.levels``, else a Kueue ``Topology``, else Volcano ``HyperNode``
    tiers, else the zone label; the first found wins and the others are warned about."""
    hypernodes = kinds.get("HyperNode", [])
    kueue = sorted(kinds.get("Topology", []), key=lambda s: s.name)
    if options.levels:
        for src in [*kueue, *hypernodes]:
            ctx.warn(src, "ignored: topology levels were given as options")
        return _label_topology(ctx, nodes, _with_zone(nodes, options.levels))
    if kueue:
        for src in [*kueue[1:], *hypernodes]:
            ctx.warn(src, f"ignored: topology taken from Topology {kueue[0].name}")
        return _label_topology(ctx, nodes, _with_zone(nodes, _kueue_levels(ctx, kueue[0])))
    if hypernodes:
        return _hypernode_topology(ctx, nodes, hypernodes)
    return _label_topology(ctx, nodes, _with_zone(nodes, []))


def _with_zone(nodes: list[_NodeInfo], levels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The zone label is a level whenever nodes carry it and the caller did not list it."""
    if any(label == ZONE_LABEL for _, label in levels) or not any(ZONE_LABEL in n.labels for n in nodes):
        return levels
    return [("zone", ZONE_LABEL), *levels]


def _kueue_levels(ctx: _Context, src: _Source) -> list[tuple[str, str]]:
    """``spec.levels[].nodeLabel`` named after the label's last word (``.../topology-block`` ->
    ``block``); the hostname level is gangopt's implicit ``node`` level."""
    spec = _mapping(ctx, src.obj.get("spec"), src.path(".spec"))
    out: list[tuple[str, str]] = []
    for i, level in enumerate(_sequence(ctx, spec.get("levels"), src.path(".spec.levels"))):
        label = str(_mapping(ctx, level, src.path(f".spec.levels[{i}]")).get("nodeLabel", ""))
        if not label:
            ctx.error(src.path(f".spec.levels[{i}].nodeLabel"), "missing")
        elif label != HOSTNAME_LABEL:
            out.append((_level_name(label, {n for n, _ in out}), label))
    return out


def _level_name(label: str, taken: set[str]) -> str:
    word = label.rpartition("/")[2].removeprefix("topology-").removeprefix("topology.") or label
    if label == ZONE_LABEL:
        word = "zone"
    if word in taken or word == NODE_LEVEL:
        word = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")
    return word


def _label_topology(ctx: _Context, nodes: list[_NodeInfo], levels: list[tuple[str, str]]) -> _Topology:
    """Each node's domain per level is its label value; a node without the label is its own
    domain (warned). Values reused under different parents (rack "1" in two blocks) are
    qualified by their parents' values so the domains form a tree."""
    names = [name for name, _ in levels]
    raw: dict[str, list[str]] = {}
    for node in nodes:
        values = []
        for name, label in levels:
            value = node.labels.get(label)
            if value is None:
                ctx.warn(node.src, f"no label {label!r}: it forms its own {name} domain")
                value = f"{node.name}(no {name})"
            values.append(value)
        raw[node.name] = values
    return _Topology(levels, _tree_domains(names, raw), {label: name for name, label in levels})


def _tree_domains(names: list[str], raw: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    qualify = []
    for depth in range(len(names)):
        parents: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        for values in raw.values():
            parents[values[depth]].add(tuple(values[:depth]))
        qualify.append(any(len(p) > 1 for p in parents.values()))
    return {
        node: {
            name: "/".join(values[: depth + 1]) if qualify[depth] else values[depth] for depth, name in enumerate(names)
        }
        for node, values in raw.items()
    }


def _hypernode_topology(ctx: _Context, nodes: list[_NodeInfo], sources: list[_Source]) -> _Topology:
    """Volcano HyperNodes: one level per tier (``tier2`` above ``tier1``); a node's domain at a
    tier is the HyperNode of that tier above it. Members match by exact name, regex or labels."""
    tiers: dict[str, int] = {}
    parent: dict[str, str] = {}
    node_parent: dict[str, str] = {}
    hyper_names = {s.name for s in sources}
    for src in sorted(sources, key=lambda s: s.name):
        spec = _mapping(ctx, src.obj.get("spec"), src.path(".spec"))
        tier = _count(ctx, spec.get("tier"), src.path(".spec.tier"))
        tiers[src.name] = tier or 1
        for i, m in enumerate(_sequence(ctx, spec.get("members"), src.path(".spec.members"))):
            member = _mapping(ctx, m, src.path(f".spec.members[{i}]"))
            is_node = member.get("type", "Node") == "Node"
            candidates = [(n.name, n.labels) for n in nodes] if is_node else [(h, {}) for h in sorted(hyper_names)]
            target = node_parent if is_node else parent
            for name in _members(ctx, src, i, member, candidates):
                target.setdefault(name, src.name)
    levels = [(f"tier{t}", f"tier{t}") for t in sorted(set(tiers.values()), reverse=True)]
    raw: dict[str, list[str]] = {}
    for node in nodes:
        chain: dict[str, str] = {}
        current = node_parent.get(node.name)
        while current is not None and current not in chain.values():
            chain.setdefault(f"tier{tiers[current]}", current)
            current = parent.get(current)
        for name, _ in levels:
            if name not in chain:
                ctx.warn(node.src, f"in no HyperNode of {name}: it forms its own {name} domain")
        raw[node.name] = [chain.get(name, f"{node.name}(no {name})") for name, _ in levels]
    names = [name for name, _ in levels]
    by_tier = {t: f"tier{t}" for t in tiers.values()}
    return _Topology(levels, _tree_domains(names, raw), {}, by_tier)


def _members(
    ctx: _Context, src: _Source, i: int, member: Obj, candidates: list[tuple[str, dict[str, str]]]
) -> list[str]:
    selector = _mapping(ctx, member.get("selector"), src.path(f".spec.members[{i}].selector"))
    if "exactMatch" in selector:
        name = str(_mapping(ctx, selector["exactMatch"], src.path(f".spec.members[{i}]")).get("name", ""))
        return [c for c, _ in candidates if c == name]
    if "regexMatch" in selector:
        pattern = str(_mapping(ctx, selector["regexMatch"], src.path(f".spec.members[{i}]")).get("pattern", ""))
        try:
            regex = re.compile(pattern)
        except re.error as error:
            ctx.error(src.path(f".spec.members[{i}].selector.regexMatch.pattern"), f"bad regex: {error}")
            return []
        return [c for c, _ in candidates if regex.search(c)]
    if "labelMatch" in selector:
        match = _string_map(_mapping(ctx, selector["labelMatch"], src.path(f".spec.members[{i}]")).get("matchLabels"))
        return [c for c, labels in candidates if all(labels.get(k) == v for k, v in match.items())]
    ctx.warn(src, f"members[{i}] has no exactMatch, regexMatch or labelMatch selector: ignored")
    return []


# ----------------------------------------------------------------------------- queues


class _Queues:
    """Kueue ClusterQueues (via LocalQueues), Koordinator ElasticQuotas and Volcano Queues."""

    def __init__(self, ctx: _Context, kinds: dict[str, list[_Source]]) -> None:
        self.ctx = ctx
        self.queues: dict[str, Queue] = {}
        self.local: dict[tuple[str, str], str] = {}
        self.quota_by_namespace: dict[str, list[str]] = defaultdict(list)
        for src in kinds.get("ClusterQueue", []):
            self._cluster_queue(src)
        for src in kinds.get("LocalQueue", []):
            spec = _mapping(ctx, src.obj.get("spec"), src.path(".spec"))
            self.local[(src.namespace, src.name)] = str(spec.get("clusterQueue", ""))
        for src in kinds.get("ElasticQuota", []):
            self._elastic_quota(src)
        for src in kinds.get("Queue", []):
            self._volcano_queue(src)

    def _cluster_queue(self, src: _Source) -> None:
        """nominalQuota summed over resource groups and flavors; the borrowing limit likewise,
        unlimited when one flavor sets none."""
        spec = _mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        nominal: dict[str, int] = {}
        borrow: dict[str, int] = {}
        unlimited: set[str] = set()
        for g, group in enumerate(_sequence(self.ctx, spec.get("resourceGroups"), src.path(".spec.resourceGroups"))):
            gpath = src.path(f".spec.resourceGroups[{g}]")
            for f, flavor in enumerate(_sequence(self.ctx, _mapping(self.ctx, group, gpath).get("flavors"), gpath)):
                fpath = f"{gpath}.flavors[{f}]"
                flavor_map = _mapping(self.ctx, flavor, fpath)
                for r, res in enumerate(_sequence(self.ctx, flavor_map.get("resources"), f"{fpath}.resources")):
                    rpath = f"{fpath}.resources[{r}]"
                    entry = _mapping(self.ctx, res, rpath)
                    name = _resource(str(entry.get("name", "")))
                    nominal[name] = nominal.get(name, 0) + _quantity(
                        self.ctx, entry.get("nominalQuota", 0), f"{rpath}.nominalQuota"
                    )
                    if entry.get("borrowingLimit") is None:
                        unlimited.add(name)
                    else:
                        limit = _quantity(self.ctx, entry["borrowingLimit"], f"{rpath}.borrowingLimit")
                        borrow[name] = borrow.get(name, 0) + limit
                    if entry.get("lendingLimit") is not None:
                        self.ctx.warn(src, f"lendingLimit of {name} ignored")
        cohort = spec.get("cohort") or spec.get("cohortName") or None
        limits = {r: v for r, v in borrow.items() if r not in unlimited}
        self.queues[src.name] = Queue(
            name=src.name, cohort=cohort, nominal=_quantities(nominal), borrowing_limit=_quantities(limits)
        )

    def _elastic_quota(self, src: _Source) -> None:
        """min -> nominal, max - min -> borrowing limit, inside the cohort of its parent quota."""
        spec = _mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        low = _resources(self.ctx, spec.get("min"), src.path(".spec.min"))
        high = _resources(self.ctx, spec.get("max"), src.path(".spec.max"))
        borrow = {r: max(0, high[r] - low.get(r, 0)) for r in high}
        cohort = src.labels.get(KOORD_QUOTA_PARENT) or "koordinator-root"
        self.queues[src.name] = Queue(
            name=src.name, cohort=cohort, nominal=_quantities(low), borrowing_limit=_quantities(borrow)
        )
        self.quota_by_namespace[src.namespace].append(src.name)

    def _volcano_queue(self, src: _Source) -> None:
        """``capability`` is a hard cap: nominal quota outside any cohort."""
        spec = _mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        capability = _resources(self.ctx, spec.get("capability"), src.path(".spec.capability"))
        ignored = sorted(k for k in ("weight", "guarantee", "deserved", "reclaimable", "parent") if k in spec)
        if ignored:
            self.ctx.warn(src, f"{', '.join(ignored)} ignored (only capability is mapped)")
        self.queues[src.name] = Queue(name=src.name, nominal=_quantities(capability))

    def local_queue(self, src: _Source, namespace: str, name: str) -> str:
        """A LocalQueue name -> its ClusterQueue (warned and kept as is when unknown)."""
        target = self.local.get((namespace, name))
        if target is None:
            self.ctx.warn(src, f"LocalQueue {namespace}/{name} not in the input; queue {name!r} used")
            return name
        return target

    def of_pod(self, pod: _Pod) -> str | None:
        labels = pod.src.labels
        if KUEUE + "queue-name" in labels:
            return self.local_queue(pod.src, pod.src.namespace, labels[KUEUE + "queue-name"])
        if KOORD_QUOTA_LABEL in labels:
            return labels[KOORD_QUOTA_LABEL]
        quotas = self.quota_by_namespace.get(pod.src.namespace, [])
        return quotas[0] if len(quotas) == 1 else None

    def build(self, running: list[RunningGang], pending: list[PendingGang]) -> list[Queue]:
        """The queues; a queue named by a gang but absent from the input is added without
        limits (warned), since the round requires every gang's queue to exist."""
        if not self.queues:
            return []
        out = dict(self.queues)
        for gang in [*running, *pending]:
            if gang.queue not in out:
                self.ctx.warn(f"queue {gang.queue}", f"no quota object in the input (gang {gang.name}): unlimited")
                out[gang.queue] = Queue(name=gang.queue)
        return [out[k] for k in sorted(out)]


# ----------------------------------------------------------------------------- gangs


@dataclass
class _Template:
    """A Kueue podSet with no pods yet: a role from its template."""

    role: str
    count: int
    minimum: int | None
    shape: _Shape


@dataclass
class _Gang:
    """One gang while it is being collected from its object and its pods."""

    name: str
    obj: _Source | None
    pods: list[_Pod] = field(default_factory=list)
    hints: dict[str, str] = field(default_factory=dict)
    min_members: int | None = None
    role_min: dict[str, int] = field(default_factory=dict)
    max_members: int | None = None
    priority: int | None = None
    queue: str | None = None
    group: str | None = None
    topology: TopologyRequest | None = None
    templates: list[_Template] = field(default_factory=list)
    created: float | None = None


class _Gangs:
    """Every gang form, and the assignment of each pod to one gang."""

    def __init__(
        self,
        ctx: _Context,
        kinds: dict[str, list[_Source]],
        priorities: _PriorityClasses,
        topology: _Topology,
        queues: _Queues,
        pods_resource: bool,
    ) -> None:
        self.ctx = ctx
        self.pods_resource = pods_resource
        self.priorities = priorities
        self.topology = topology
        self.queues = queues
        self.gangs: dict[str, _Gang] = {}
        self.by_form: dict[tuple[str, str, str], _Gang] = {}  # (group, namespace, name) -> gang
        self.kueue_owners: dict[tuple[str, str, str], _Gang] = {}  # (namespace, kind, name) -> gang
        for src in kinds.get("PodGroup", []):
            self._pod_group(src)
        for src in kinds.get("Workload", []):
            if src.group == _KUEUE_GROUP:
                self._kueue_workload(src)
            else:
                self._upstream_workload(src)

    # -- gang objects

    def _new(self, name: str, obj: _Source | None) -> _Gang:
        """A gang named ``name`` (``-2``, ``-3``... if a gang of another form took the name)."""
        base, n = name, 1
        while name in self.gangs:
            n += 1
            name = f"{base}-{n}"
        gang = _Gang(name, obj, created=_timestamp(self.ctx, obj) if obj else None)
        self.gangs[name] = gang
        return gang

    def _pod_group(self, src: _Source) -> None:
        spec = _mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        gang = self._new(f"{src.namespace}/{src.name}", src)
        self.by_form[(src.group, src.namespace, src.name)] = gang
        gang.min_members = _count(self.ctx, spec.get("minMember"), src.path(".spec.minMember"))
        if src.group == _VOLCANO:
            self._volcano(src, spec, gang)
        elif src.group == _KOORD_GROUP:
            self._koordinator(src, src.annotations, gang)

    def _volcano(self, src: _Source, spec: Obj, gang: _Gang) -> None:
        """minTaskMember -> role minimums; queue; priorityClassName; networkTopology."""
        tasks = _mapping(self.ctx, spec.get("minTaskMember"), src.path(".spec.minTaskMember"))
        for task, n in sorted(tasks.items()):
            count = _count(self.ctx, n, src.path(f".spec.minTaskMember.{task}"))
            if count is not None:
                gang.role_min[str(task)] = count
        if spec.get("queue"):
            gang.queue = str(spec["queue"])
        if spec.get("priorityClassName"):
            gang.priority = self.priorities.lookup(src, str(spec["priorityClassName"]))
        network = _mapping(self.ctx, spec.get("networkTopology"), src.path(".spec.networkTopology"))
        if network:
            gang.topology = self._volcano_topology(src, network)
        if spec.get("subGroupPolicy"):
            self.ctx.warn(src, "subGroupPolicy ignored")

    def _volcano_topology(self, src: _Source, network: Obj) -> TopologyRequest | None:
        mode = network.get("mode", "hard")
        tier = _count(self.ctx, network.get("highestTierAllowed"), src.path(".spec.networkTopology.highestTierAllowed"))
        level = self.topology.by_tier.get(tier) if tier is not None else None
        if level is None:
            self.ctx.warn(src, f"networkTopology tier {tier} matches no HyperNode tier in the input: ignored")
            return None
        if mode not in ("hard", "soft"):
            self.ctx.error(src.path(".spec.networkTopology.mode"), f"expected hard or soft, got {mode!r}")
            return None
        return TopologyRequest(required=level) if mode == "hard" else TopologyRequest(preferred=level)

    def _koordinator(self, src: _Source, marks: dict[str, str], gang: _Gang) -> None:
        """Koordinator gang annotations (on pods or on its PodGroup)."""
        if KOORD + "min-available" in marks:
            gang.min_members = _count(
                self.ctx, marks[KOORD + "min-available"], src.path(f".metadata.annotations.{KOORD}min-available")
            )
        if KOORD + "total-number" in marks:
            total = _count(
                self.ctx, marks[KOORD + "total-number"], src.path(f".metadata.annotations.{KOORD}total-number")
            )
            gang.max_members = total or None
        if marks.get(KOORD + "mode", "Strict") == "NonStrict":
            self.ctx.warn(src, "gang mode NonStrict: gangopt always places a gang all-or-nothing (Strict)")
        if KOORD + "groups" in marks:
            gang.group = self._koordinator_group(src, gang.name, marks[KOORD + "groups"])
        if KOORD + "network-topology-spec" in marks:
            self.ctx.warn(src, "network-topology-spec ignored (use --level and a Kueue or Volcano form)")

    def _koordinator_group(self, src: _Source, name: str, value: str) -> str | None:
        """The GangGroup: every member lists the same gangs, so the sorted list names it."""
        try:
            members = json.loads(value)
        except json.JSONDecodeError:
            members = None
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            self.ctx.error(
                src.path(f".metadata.annotations.{KOORD}groups"), f"expected a JSON list of names, got {value!r}"
            )
            return None
        return ",".join(sorted({*members, name}))[:253]

    def _kueue_workload(self, src: _Source) -> None:
        """podSets -> roles (templates until pods exist), minCount, priority, queue, topology."""
        spec = _mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        gang = self._new(f"{src.namespace}/{src.name}", src)
        self.by_form[(_KUEUE_GROUP, src.namespace, src.name)] = gang
        for owner in src.meta.get("ownerReferences") or []:
            if isinstance(owner, dict):
                self.kueue_owners[(src.namespace, str(owner.get("kind")), str(owner.get("name")))] = gang
        if spec.get("queueName"):
            gang.queue = self.queues.local_queue(src, src.namespace, str(spec["queueName"]))
        if isinstance(spec.get("priority"), int):
            gang.priority = spec["priority"]
        elif spec.get("priorityClassName"):
            gang.priority = self.priorities.lookup(src, str(spec["priorityClassName"]))
        for i, ps in enumerate(_sequence(self.ctx, spec.get("podSets"), src.path(".spec.podSets"))):
            self._pod_set(src, gang, i, _mapping(self.ctx, ps, src.path(f".spec.podSets[{i}]")))

    def _pod_set(self, src: _Source, gang: _Gang, i: int, ps: Obj) -> None:
        path = src.path(f".spec.podSets[{i}]")
        name = str(ps.get("name") or "main")
        count = _count(self.ctx, ps.get("count", 1), f"{path}.count") or 0
        minimum = _count(self.ctx, ps.get("minCount"), f"{path}.minCount")
        if minimum is not None:
            gang.role_min[name] = minimum
        template = _mapping(self.ctx, ps.get("template"), f"{path}.template")
        tspec = _mapping(self.ctx, template.get("spec"), f"{path}.template.spec")
        shape = _shape(self.ctx, src, tspec, self.pods_resource, f".spec.podSets[{i}].template.spec")
        if count:
            gang.templates.append(_Template(name, count, minimum, shape))
        request = _mapping(self.ctx, ps.get("topologyRequest"), f"{path}.topologyRequest")
        marks = _string_map(
            _mapping(self.ctx, template.get("metadata"), f"{path}.template.metadata").get("annotations")
        )
        self._kueue_topology(src, gang, request, marks)

    def _kueue_topology(self, src: _Source, gang: _Gang, request: Obj, marks: dict[str, str]) -> None:
        """``topologyRequest`` fields or the podset annotations, mapped through node labels."""
        wanted = {
            "required": request.get("required") or marks.get(KUEUE + "podset-required-topology"),
            "preferred": request.get("preferred") or marks.get(KUEUE + "podset-preferred-topology"),
            "slice_level": request.get("podSetSliceRequiredTopology")
            or marks.get(KUEUE + "podset-slice-required-topology"),
        }
        size = request.get("podSetSliceSize") or marks.get(KUEUE + "podset-slice-size")
        if marks.get(KUEUE + "podset-unconstrained-topology") or request.get("unconstrained"):
            return
        fields: dict[str, Any] = {}
        for key, label in wanted.items():
            if not label:
                continue
            level = self.topology.level_of_label(str(label))
            if level is None:
                self.ctx.warn(src, f"topology label {label!r} is no level of the cluster: {key} ignored")
            else:
                fields[key] = level
        if "slice_level" in fields:
            slice_size = _count(self.ctx, size, src.path(".spec.podSets.podSetSliceSize"))
            if slice_size:
                fields["slice_size"] = slice_size
            else:
                del fields["slice_level"]
        if fields:
            request_model = TopologyRequest(**fields)
            if gang.topology is not None and gang.topology != request_model:
                self.ctx.warn(src, "pod sets ask for different topologies; the first is used for the whole gang")
            else:
                gang.topology = request_model

    def _upstream_workload(self, src: _Source) -> None:
        """KEP-4671 Workload: each ``spec.podGroups[]`` with a gang policy is a gang
        ``<ns>/<workload>`` (``<ns>/<workload>/<group>`` when there are several)."""
        spec = _mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        if "podGroupTemplates" in spec:
            self.ctx.warn(src, "podGroupTemplates (PodGroup objects) are not read; its pods are one-pod gangs")
        groups = _sequence(self.ctx, spec.get("podGroups"), src.path(".spec.podGroups"))
        for i, g in enumerate(groups):
            group = _mapping(self.ctx, g, src.path(f".spec.podGroups[{i}]"))
            name = str(group.get("name", f"group-{i}"))
            policy = _mapping(self.ctx, group.get("policy"), src.path(f".spec.podGroups[{i}].policy"))
            if "gang" not in policy:
                continue  # basic policy: pods are scheduled one by one, i.e. one-pod gangs
            gang_name = f"{src.namespace}/{src.name}" + (f"/{name}" if len(groups) > 1 else "")
            gang = self._new(gang_name, src)
            gang_policy = _mapping(self.ctx, policy["gang"], src.path(f".spec.podGroups[{i}].policy.gang"))
            gang.min_members = _count(
                self.ctx, gang_policy.get("minCount"), src.path(f".spec.podGroups[{i}].policy.gang.minCount")
            )
            self.by_form[(_UPSTREAM, src.namespace, f"{src.name}\0{name}")] = gang

    # -- pods

    def assign(self, pods: list[_Pod]) -> list[_Gang]:
        """Each pod to its gang (the first form that claims it), else a one-pod gang."""
        for pod in pods:
            gang, hint = self._gang_of(pod)
            gang.pods.append(pod)
            if hint:
                gang.hints[pod.name] = hint
            self._pod_marks(pod, gang)
        return [g for _, g in sorted(self.gangs.items())]

    def _gang_of(self, pod: _Pod) -> tuple[_Gang, str | None]:
        src = pod.src
        labels, annotations, ns = src.labels, src.annotations, src.namespace
        task = annotations.get(VOLCANO_TASK) or labels.get(VOLCANO_TASK)
        if VOLCANO_GROUP_ANNOTATION in annotations:
            return self._claim(pod, _VOLCANO, annotations[VOLCANO_GROUP_ANNOTATION], "Volcano PodGroup"), task
        if SP_POD_GROUP_LABEL in labels:
            return self._claim(pod, _SP, labels[SP_POD_GROUP_LABEL], "PodGroup"), None
        koord = labels.get(KOORD_POD_GROUP_LABEL) or annotations.get(KOORD + "name")
        if koord:
            return self._claim(pod, _KOORD_GROUP, koord, None), None
        workload = self._kueue_workload_of(pod)
        podset = labels.get(KUEUE + "podset")
        if workload is not None:
            if podset is None and len(workload.templates) == 1:
                podset = workload.templates[0].role
            return workload, podset
        upstream = self._upstream_of(pod)
        if upstream is not None:
            return upstream, None
        return self._new(f"{ns}/{pod.name}", src), None

    def _claim(self, pod: _Pod, group: str, name: str, missing: str | None) -> _Gang:
        """The gang object named by the pod; without one, a gang of the pods naming it
        (Koordinator annotations need no object; the others are warned)."""
        ns = pod.src.namespace
        gang = self.by_form.get((group, ns, name))
        if gang is None:
            if missing is not None:
                self.ctx.warn(pod.src, f"{missing} {ns}/{name} not in the input: all its pods form the gang")
            gang = self._new(f"{ns}/{name}", None)
            self.by_form[(group, ns, name)] = gang
        return gang

    def _kueue_workload_of(self, pod: _Pod) -> _Gang | None:
        labels, ns = pod.src.labels, pod.src.namespace
        for key in ("workload-name", "pod-group-name"):
            name = labels.get(KUEUE + key) or pod.src.annotations.get(KUEUE + key)
            if name and (_KUEUE_GROUP, ns, name) in self.by_form:
                return self.by_form[(_KUEUE_GROUP, ns, name)]
        if (ns, "Pod", pod.name) in self.kueue_owners:
            return self.kueue_owners[(ns, "Pod", pod.name)]
        for owner in pod.src.meta.get("ownerReferences") or []:
            if isinstance(owner, dict) and (ns, str(owner.get("kind")), str(owner.get("name"))) in self.kueue_owners:
                return self.kueue_owners[(ns, str(owner.get("kind")), str(owner.get("name")))]
        return None

    def _upstream_of(self, pod: _Pod) -> _Gang | None:
        spec = pod.src.obj.get("spec")
        ref = spec.get("workloadRef") if isinstance(spec, dict) else None
        if not isinstance(ref, dict):
            return None
        key = (_UPSTREAM, pod.src.namespace, f"{ref.get('name')}\0{ref.get('podGroup')}")
        if ref.get("podGroupReplicaKey"):
            self.ctx.warn(pod.src, "workloadRef.podGroupReplicaKey ignored: all replicas form one gang")
        gang = self.by_form.get(key)
        if gang is None:
            self.ctx.warn(
                pod.src,
                f"workloadRef to {ref.get('name')}/{ref.get('podGroup')}, no gang pod group of "
                "a Workload in the input: scheduled as a one-pod gang",
            )
        return gang

    def _pod_marks(self, pod: _Pod, gang: _Gang) -> None:
        """Gang settings carried by pods: Koordinator annotations, Kueue topology annotations."""
        annotations = pod.src.annotations
        if any(k.startswith(KOORD) for k in annotations) and not gang.pods[:-1]:
            self._koordinator(pod.src, annotations, gang)
        if not gang.pods[:-1] and any(k.startswith(KUEUE + "podset-") for k in annotations):
            self._kueue_topology(pod.src, gang, {}, annotations)


# ----------------------------------------------------------------------------- assembly


@dataclass
class _Result:
    running: list[RunningGang] = field(default_factory=list)
    pending: list[PendingGang] = field(default_factory=list)
    pending_pods: dict[str, dict[str, list[ObjectRef]]] = field(default_factory=dict)
    running_pods: dict[str, ObjectRef] = field(default_factory=dict)
    gang_objects: dict[str, ObjectRef] = field(default_factory=dict)


@dataclass
class _RoleGroup:
    name: str
    shape: _Shape
    pods: list[_Pod]
    minimum: int | None
    replicas: int


def _assemble(ctx: _Context, gangs: list[_Gang], queues: _Queues) -> _Result:
    result = _Result()
    for gang in gangs:
        roles = _roles(gang) if gang.pods else _template_roles(ctx, gang)
        if not roles:
            if gang.obj is not None:
                ctx.warn(gang.obj, "no pods and no pod templates: nothing to schedule")
            continue
        spec = _spec_fields(ctx, gang, roles, queues)
        bound = [p for p in gang.pods if p.node is not None]
        if bound:
            _add_running(ctx, result, gang, roles, spec, bound)
        else:
            _add_pending(ctx, result, gang, roles, spec)
    return result


def _roles(gang: _Gang) -> list[_RoleGroup]:
    """Pods with one role hint and one shape form a role, named after the hint (else
    ``worker``), ordered by their first pod; a second shape under one name gets ``-1``."""
    groups: dict[tuple[str, _Shape], list[_Pod]] = {}
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


def _template_roles(ctx: _Context, gang: _Gang) -> list[_RoleGroup]:
    if gang.templates and gang.obj is not None:
        ctx.warn(
            gang.obj, "no pods yet: imported from its pod templates; its bindings cannot be exported until pods exist"
        )
    return [_RoleGroup(t.role, t.shape, [], t.minimum, t.count) for t in gang.templates]


def _spec_fields(ctx: _Context, gang: _Gang, roles: list[_RoleGroup], queues: _Queues) -> dict[str, Any]:
    """Fields shared by pending and running gangs."""
    priorities = sorted({p.priority for p in gang.pods})
    if len(priorities) > 1 and gang.priority is None and gang.obj is not None:
        ctx.warn(gang.obj, f"pods have priorities {priorities}; the highest is used")
    priority = gang.priority if gang.priority is not None else (priorities[-1] if priorities else 0)
    queue = gang.queue or next((q for q in map(queues.of_pod, gang.pods) if q), None)
    return {
        "name": gang.name,
        "priority": priority,
        "roles": [_role(r) for r in roles],
        "min_members": max(gang.min_members, 1) if gang.min_members is not None else None,
        "max_members": _max_members(ctx, gang, sum(r.replicas for r in roles)),
        "topology": gang.topology,
        **({"queue": queue} if queue else {}),
    }


def _max_members(ctx: _Context, gang: _Gang, total: int) -> int | None:
    """Koordinator's total-number caps the gang only when it is below its pod count; one below
    the gang's minimum contradicts it and is dropped (warned) rather than failing the round."""
    cap = gang.max_members
    if not cap or cap >= total:
        return None
    if cap < (gang.min_members or 1):
        ctx.warn(gang.obj or f"gang {gang.name}", f"total-number {cap} is below min-available: ignored")
        return None
    return cap


def _role(group: _RoleGroup) -> Role:
    shape = group.shape
    return Role(
        name=group.name,
        replicas=group.replicas,
        min_replicas=group.minimum,
        requests=_quantities(dict(shape.requests)),
        node_selector=dict(shape.node_selector),
        node_affinity=[MatchExpression(key=k, operator=op, values=list(v)) for k, op, v in shape.affinity],
        tolerations=[Toleration(key=k, operator=op, value=v, effect=e) for k, op, v, e in shape.tolerations],
    )


def _submit_time(gang: _Gang) -> float:
    times = [p.created for p in gang.pods if p.created is not None]
    return gang.created if gang.created is not None else min(times, default=0.0)


def _add_pending(ctx: _Context, result: _Result, gang: _Gang, roles: list[_RoleGroup], spec: dict[str, Any]) -> None:
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
    ctx: _Context, result: _Result, gang: _Gang, roles: list[_RoleGroup], spec: dict[str, Any], bound: list[_Pod]
) -> None:
    """A gang with bound pods runs; its unbound pods are growth. When fewer pods are bound than
    its minimum (a gang caught mid-binding), the minimum is lowered to what is bound, warned."""
    pods = [
        BoundPod(name=f"{p.src.namespace}/{p.name}", role=r.name, node=p.node or "")
        for r in roles
        for p in r.pods
        if p.node is not None
    ]
    model = RunningGang(**spec, pods=pods, preemptible=all(p.preemptible for p in gang.pods))
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


def _template_resources(ctx: _Context, src: _Source) -> set[str]:
    """Resources requested by Kueue pod templates (so nodes keep them in their capacity)."""
    spec = src.obj.get("spec")
    out: set[str] = set()
    for ps in (spec.get("podSets") if isinstance(spec, dict) else None) or []:
        template = ps.get("template") if isinstance(ps, dict) else None
        tspec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(tspec, dict):
            out |= set(_pod_requests(_Context(), "", tspec))
    return out


# ----------------------------------------------------------------------------- policy


def _policy(ctx: _Context, sources: Iterable[_Source], policy: Policy | None) -> Policy:
    """``now`` = the latest creationTimestamp in the input, unless the caller set it."""
    policy = policy or Policy()
    if policy.now is not None:
        return policy
    times = [t for t in (_timestamp(ctx, s) for s in sources) if t is not None]
    return policy.model_copy(update={"now": max(times)}) if times else policy
