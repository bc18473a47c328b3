"""The gang forms: PodGroups (scheduler-plugins, Koordinator, Volcano), Koordinator gang
annotations, Kueue and KEP-4671 Workloads, and the assignment of each pod to one gang."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gangopt.k8s.context import Context, Obj, Source, as_count, as_mapping, as_sequence, string_map, timestamp
from gangopt.k8s.kinds import (
    KOORD,
    KOORD_GROUP,
    KOORD_POD_GROUP_LABEL,
    KUEUE,
    KUEUE_GROUP,
    SP,
    SP_POD_GROUP_LABEL,
    UPSTREAM,
    VOLCANO,
    VOLCANO_GROUP_ANNOTATION,
    VOLCANO_TASK,
)
from gangopt.k8s.pods import Pod, PriorityClasses, Shape, pod_shape
from gangopt.k8s.queues import Queues
from gangopt.k8s.topology import Topology
from gangopt.schema import NODE_LEVEL, TopologyRequest


@dataclass
class _Template:
    """A Kueue podSet with no pods yet: a role from its template."""

    role: str
    count: int
    minimum: int | None
    shape: Shape


@dataclass
class Gang:
    """One gang while it is being collected from its object and its pods."""

    name: str
    obj: Source | None
    pods: list[Pod] = field(default_factory=list)
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
    gated: list[Pod] = field(default_factory=list)  # outside the quorum and the bindings, as every peer does


class Gangs:
    """Every gang form, and the assignment of each pod to one gang."""

    def __init__(
        self,
        ctx: Context,
        kinds: dict[str, list[Source]],
        priorities: PriorityClasses,
        topology: Topology,
        queues: Queues,
        pods_resource: bool,
    ) -> None:
        self.ctx = ctx
        self.pods_resource = pods_resource
        self.priorities = priorities
        self.topology = topology
        self.queues = queues
        self.gangs: dict[str, Gang] = {}
        self.by_form: dict[tuple[str, str, str], Gang] = {}  # (group, namespace, name) -> gang
        self.kueue_owners: dict[tuple[str, str, str], Gang] = {}  # (namespace, kind, name) -> gang
        for src in kinds.get("PodGroup", []):
            self._pod_group(src)
        for src in kinds.get("Workload", []):
            if src.group == KUEUE_GROUP:
                self._kueue_workload(src)
            else:
                self._upstream_workload(src)

    # -- gang objects

    def _new(self, name: str, obj: Source | None) -> Gang:
        """A gang named ``name`` (``-2``, ``-3``... if a gang of another form took the name)."""
        base, n = name, 1
        while name in self.gangs:
            n += 1
            name = f"{base}-{n}"
        gang = Gang(name, obj, created=timestamp(self.ctx, obj) if obj else None)
        self.gangs[name] = gang
        return gang

    def _pod_group(self, src: Source) -> None:
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        gang = self._new(f"{src.namespace}/{src.name}", src)
        self.by_form[(src.group, src.namespace, src.name)] = gang
        gang.min_members = as_count(self.ctx, spec.get("minMember"), src.path(".spec.minMember"))
        if src.group == VOLCANO:
            self._volcano(src, spec, gang)
        elif src.group == KOORD_GROUP:
            self._koordinator(src, src.annotations, gang)

    def _volcano(self, src: Source, spec: Obj, gang: Gang) -> None:
        """minTaskMember -> role minimums; queue; priorityClassName; networkTopology."""
        tasks = as_mapping(self.ctx, spec.get("minTaskMember"), src.path(".spec.minTaskMember"))
        for task, n in sorted(tasks.items()):
            count = as_count(self.ctx, n, src.path(f".spec.minTaskMember.{task}"))
            if count is not None:
                gang.role_min[str(task)] = count
        if spec.get("queue"):
            gang.queue = str(spec["queue"])
        if spec.get("priorityClassName"):
            gang.priority = self.priorities.lookup(src, str(spec["priorityClassName"]))
        network = as_mapping(self.ctx, spec.get("networkTopology"), src.path(".spec.networkTopology"))
        if network:
            gang.topology = self._volcano_topology(src, network)
        if spec.get("subGroupPolicy"):
            self.ctx.warn(src, "subGroupPolicy ignored")

    def _volcano_topology(self, src: Source, network: Obj) -> TopologyRequest | None:
        """hard -> ``required`` at the ``highestTierAllowed`` tier; soft -> ``preferred`` at the
        lowest tier: soft mode scores every node by its closeness to the job's hypernode, at
        every tier, and gangopt's ``preferred`` charges its level and each level above
        (``highestTierAllowed`` bounds hard mode only)."""
        mode = network.get("mode", "hard")
        if mode not in ("hard", "soft"):
            self.ctx.error(src.path(".spec.networkTopology.mode"), f"expected hard or soft, got {mode!r}")
            return None
        if mode == "soft":
            if not self.topology.by_tier:
                self.ctx.warn(src, "soft networkTopology but no HyperNode tier in the input: ignored")
                return None
            return TopologyRequest(preferred=self.topology.by_tier[min(self.topology.by_tier)])
        tier = as_count(
            self.ctx, network.get("highestTierAllowed"), src.path(".spec.networkTopology.highestTierAllowed")
        )
        level = self.topology.by_tier.get(tier) if tier is not None else None
        if level is None:
            self.ctx.warn(src, f"networkTopology tier {tier} matches no HyperNode tier in the input: ignored")
            return None
        return TopologyRequest(required=level)

    def _koordinator(self, src: Source, marks: dict[str, str], gang: Gang) -> None:
        """Koordinator gang annotations (on pods or on its PodGroup)."""
        if KOORD + "min-available" in marks:
            gang.min_members = as_count(
                self.ctx, marks[KOORD + "min-available"], src.path(f".metadata.annotations.{KOORD}min-available")
            )
        if KOORD + "total-number" in marks:
            total = as_count(
                self.ctx, marks[KOORD + "total-number"], src.path(f".metadata.annotations.{KOORD}total-number")
            )
            gang.max_members = total or None
        if marks.get(KOORD + "mode", "Strict") == "NonStrict":
            self.ctx.warn(src, "gang mode NonStrict: gangopt always places a gang all-or-nothing (Strict)")
        if KOORD + "groups" in marks:
            gang.group = self._koordinator_group(src, gang.name, marks[KOORD + "groups"])
        if KOORD + "network-topology-spec" in marks:
            gang.topology = self._koordinator_topology(src, marks[KOORD + "network-topology-spec"])

    def _koordinator_topology(self, src: Source, value: str) -> TopologyRequest | None:
        """``gatherStrategy`` layers through the ``ClusterNetworkTopology``: the narrowest
        ``MustGather`` layer -> ``required``; the narrowest ``PreferGather`` layer below it ->
        ``preferred`` (gangopt charges extra domains there and at every level above, as
        Koordinator gathers at every layer it can)."""
        path = src.path(f".metadata.annotations.{KOORD}network-topology-spec")
        try:
            spec = json.loads(value)
        except json.JSONDecodeError:
            spec = None
        if not isinstance(spec, dict) or not isinstance(spec.get("gatherStrategy"), list):
            self.ctx.error(path, f"expected JSON with a gatherStrategy list, got {value!r}")
            return None
        levels = [*self.topology.levels_names(), NODE_LEVEL]
        wanted: dict[str, list[str]] = {"MustGather": [], "PreferGather": []}
        for entry in spec["gatherStrategy"]:
            entry = entry if isinstance(entry, dict) else {}
            layer, strategy = str(entry.get("layer", "")), str(entry.get("strategy", ""))
            level = self.topology.koord_layers.get(layer)
            if strategy not in wanted:
                self.ctx.warn(src, f"gather strategy {strategy!r} of layer {layer!r} ignored")
            elif level is None:
                self.ctx.warn(src, f"layer {layer!r} is no level of the cluster (ClusterNetworkTopology): ignored")
            else:
                wanted[strategy].append(level)
            if entry.get("podCountMultiple"):
                self.ctx.warn(src, f"podCountMultiple of layer {layer!r} ignored")
        required = max(wanted["MustGather"], key=levels.index, default=None)
        below = [lv for lv in wanted["PreferGather"] if required is None or levels.index(lv) > levels.index(required)]
        preferred = max(below, key=levels.index, default=None)
        if required is None and preferred is None:
            return None
        return TopologyRequest(required=required, preferred=preferred)

    def _koordinator_group(self, src: Source, name: str, value: str) -> str | None:
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

    def _kueue_workload(self, src: Source) -> None:
        """podSets -> roles (templates until pods exist), minCount, priority, queue, topology."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        gang = self._new(f"{src.namespace}/{src.name}", src)
        self.by_form[(KUEUE_GROUP, src.namespace, src.name)] = gang
        for owner in src.meta.get("ownerReferences") or []:
            if isinstance(owner, dict):
                self.kueue_owners[(src.namespace, str(owner.get("kind")), str(owner.get("name")))] = gang
        if spec.get("queueName"):
            gang.queue = self.queues.local_queue(src, src.namespace, str(spec["queueName"]))
        if isinstance(spec.get("priority"), int):
            gang.priority = spec["priority"]
        elif spec.get("priorityClassName"):
            gang.priority = self.priorities.lookup(src, str(spec["priorityClassName"]))
        for i, ps in enumerate(as_sequence(self.ctx, spec.get("podSets"), src.path(".spec.podSets"))):
            self._pod_set(src, gang, i, as_mapping(self.ctx, ps, src.path(f".spec.podSets[{i}]")))

    def _pod_set(self, src: Source, gang: Gang, i: int, ps: Obj) -> None:
        path = src.path(f".spec.podSets[{i}]")
        name = str(ps.get("name") or "main")
        count = as_count(self.ctx, ps.get("count", 1), f"{path}.count") or 0
        minimum = as_count(self.ctx, ps.get("minCount"), f"{path}.minCount")
        if minimum is not None:
            gang.role_min[name] = minimum
        template = as_mapping(self.ctx, ps.get("template"), f"{path}.template")
        tspec = as_mapping(self.ctx, template.get("spec"), f"{path}.template.spec")
        shape = pod_shape(self.ctx, src, tspec, self.pods_resource, f".spec.podSets[{i}].template.spec")
        if count:
            gang.templates.append(_Template(name, count, minimum, shape))
        request = as_mapping(self.ctx, ps.get("topologyRequest"), f"{path}.topologyRequest")
        marks = string_map(
            as_mapping(self.ctx, template.get("metadata"), f"{path}.template.metadata").get("annotations")
        )
        self._kueue_topology(src, gang, request, marks)

    def _kueue_topology(self, src: Source, gang: Gang, request: Obj, marks: dict[str, str]) -> None:
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
            slice_size = as_count(self.ctx, size, src.path(".spec.podSets.podSetSliceSize"))
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

    def _upstream_workload(self, src: Source) -> None:
        """KEP-4671 Workload: each ``spec.podGroups[]`` with a gang policy is a gang
        ``<ns>/<workload>`` (``<ns>/<workload>/<group>`` when there are several)."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        if "podGroupTemplates" in spec:
            self.ctx.warn(src, "podGroupTemplates (PodGroup objects) are not read; its pods are one-pod gangs")
        groups = as_sequence(self.ctx, spec.get("podGroups"), src.path(".spec.podGroups"))
        for i, g in enumerate(groups):
            group = as_mapping(self.ctx, g, src.path(f".spec.podGroups[{i}]"))
            name = str(group.get("name", f"group-{i}"))
            policy = as_mapping(self.ctx, group.get("policy"), src.path(f".spec.podGroups[{i}].policy"))
            if "gang" not in policy:
                continue  # basic policy: pods are scheduled one by one, i.e. one-pod gangs
            gang_name = f"{src.namespace}/{src.name}" + (f"/{name}" if len(groups) > 1 else "")
            gang = self._new(gang_name, src)
            gang_policy = as_mapping(self.ctx, policy["gang"], src.path(f".spec.podGroups[{i}].policy.gang"))
            gang.min_members = as_count(
                self.ctx, gang_policy.get("minCount"), src.path(f".spec.podGroups[{i}].policy.gang.minCount")
            )
            self.by_form[(UPSTREAM, src.namespace, f"{src.name}\0{name}")] = gang

    # -- pods

    def assign(self, pods: list[Pod]) -> list[Gang]:
        """Each pod to its gang (the first form that claims it), else a one-pod gang."""
        for pod in pods:
            gang, hint = self._gang_of(pod)
            if pod.gated:
                gang.gated.append(pod)
                continue
            gang.pods.append(pod)
            if hint:
                gang.hints[pod.name] = hint
            self._pod_marks(pod, gang)
        return [g for _, g in sorted(self.gangs.items())]

    def _gang_of(self, pod: Pod) -> tuple[Gang, str | None]:
        src = pod.src
        labels, annotations, ns = src.labels, src.annotations, src.namespace
        task = annotations.get(VOLCANO_TASK) or labels.get(VOLCANO_TASK)
        if VOLCANO_GROUP_ANNOTATION in annotations:
            return self._claim(pod, VOLCANO, annotations[VOLCANO_GROUP_ANNOTATION], "Volcano PodGroup"), task
        if SP_POD_GROUP_LABEL in labels:
            return self._claim(pod, SP, labels[SP_POD_GROUP_LABEL], "PodGroup"), None
        koord = labels.get(KOORD_POD_GROUP_LABEL) or annotations.get(KOORD + "name")
        if koord:
            return self._claim(pod, KOORD_GROUP, koord, None), None
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

    def _claim(self, pod: Pod, group: str, name: str, missing: str | None) -> Gang:
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

    def _kueue_workload_of(self, pod: Pod) -> Gang | None:
        labels, ns = pod.src.labels, pod.src.namespace
        for key in ("workload-name", "pod-group-name"):
            name = labels.get(KUEUE + key) or pod.src.annotations.get(KUEUE + key)
            if name and (KUEUE_GROUP, ns, name) in self.by_form:
                return self.by_form[(KUEUE_GROUP, ns, name)]
        if (ns, "Pod", pod.name) in self.kueue_owners:
            return self.kueue_owners[(ns, "Pod", pod.name)]
        for owner in pod.src.meta.get("ownerReferences") or []:
            if isinstance(owner, dict) and (ns, str(owner.get("kind")), str(owner.get("name"))) in self.kueue_owners:
                return self.kueue_owners[(ns, str(owner.get("kind")), str(owner.get("name")))]
        return None

    def _upstream_of(self, pod: Pod) -> Gang | None:
        spec = pod.src.obj.get("spec")
        ref = spec.get("workloadRef") if isinstance(spec, dict) else None
        if not isinstance(ref, dict):
            return None
        key = (UPSTREAM, pod.src.namespace, f"{ref.get('name')}\0{ref.get('podGroup')}")
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

    def _pod_marks(self, pod: Pod, gang: Gang) -> None:
        """Gang settings carried by pods: Koordinator annotations, Kueue topology annotations."""
        annotations = pod.src.annotations
        if any(k.startswith(KOORD) for k in annotations) and not gang.pods[:-1]:
            self._koordinator(pod.src, annotations, gang)
        if not gang.pods[:-1] and any(k.startswith(KUEUE + "podset-") for k in annotations):
            self._kueue_topology(pod.src, gang, {}, annotations)
