"""Nodes: capacity from ``status.allocatable``, taints, and whether they take new pods."""

from __future__ import annotations

from dataclasses import dataclass

from gangopt.k8s.context import Context, Obj, Source, as_mapping, as_resources, as_sequence, build, quantities
from gangopt.schema import Node, Taint, node_name_problem

ALWAYS_KEPT = ("cpu", "memory", "gpu")
_NODE_FIELDS = {
    "name": ".metadata.name",
    "labels": ".metadata.labels",
    "taints": ".spec.taints",
    "capacity": ".status.allocatable",
    "topology": ".metadata.labels (a topology label)",
}


@dataclass
class NodeInfo:
    name: str
    src: Source
    capacity: dict[str, int]
    labels: dict[str, str]
    taints: list[Taint]
    schedulable: bool

    def build(self, ctx: Context, topology: dict[str, str]) -> Node | None:
        return build(
            ctx,
            Node,
            self.src.path(""),
            _NODE_FIELDS,
            name=self.name,
            capacity=quantities(self.capacity),
            labels=self.labels,
            taints=self.taints,
            schedulable=self.schedulable,
            topology=topology,
        )


def has_pods_allocatable(src: Source) -> bool:
    status = src.obj.get("status")
    allocatable = status.get("allocatable") if isinstance(status, dict) else None
    return isinstance(allocatable, dict) and "pods" in allocatable


def read_node(ctx: Context, src: Source, requested: set[str], pods_resource: bool) -> NodeInfo:
    problem = node_name_problem(src.name)
    if problem is not None:
        ctx.error(src.path(".metadata.name"), problem)
    status = as_mapping(ctx, src.obj.get("status"), src.path(".status"))
    spec = as_mapping(ctx, src.obj.get("spec"), src.path(".spec"))
    field_name = "allocatable" if "allocatable" in status else "capacity"
    if field_name == "capacity":
        ctx.warn(src, "no status.allocatable; status.capacity used")
    amounts = as_resources(ctx, status.get(field_name), src.path(f".status.{field_name}"))
    keep = {*ALWAYS_KEPT, *requested} | ({"pods"} if pods_resource else set())
    capacity = {r: a for r, a in sorted(amounts.items()) if r in keep}
    schedulable = not spec.get("unschedulable", False)
    if schedulable and not _ready(status):
        ctx.warn(src, "not Ready: marked unschedulable")
        schedulable = False
    return NodeInfo(src.name, src, capacity, src.labels, _taints(ctx, src, spec), schedulable)


def _ready(status: Obj) -> bool:
    """Ready unless a Ready condition says otherwise (hand-written manifests often omit it)."""
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return True


def _taints(ctx: Context, src: Source, spec: Obj) -> list[Taint]:
    out = []
    for i, t in enumerate(as_sequence(ctx, spec.get("taints"), src.path(".spec.taints"))):
        taint = as_mapping(ctx, t, src.path(f".spec.taints[{i}]"))
        effect = taint.get("effect", "NoSchedule")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not taint.get("key"):
            ctx.error(src.path(f".spec.taints[{i}]"), f"a taint needs a key and a known effect, got {taint!r}")
            continue
        where = src.path(f".spec.taints[{i}]")
        built = build(ctx, Taint, where, {}, key=str(taint["key"]), value=str(taint.get("value") or ""), effect=effect)
        if built is not None:
            out.append(built)
    return out
