"""Reference cluster models: a parametric generator, a loader, and converters from real inventories.

Benchmarks and examples need clusters that look like real GPU fleets. Public traces give node
inventories (GPU model, GPU count, CPU, memory) but almost never racks or switches, and the one
trace with a real network topology (Alibaba Lingjun 2023) has no capacities. The converters here
turn those inventories into :class:`~gangopt.schema.Cluster` objects and fill the gaps with
*declared* assumptions (see ``models/README.md``): every synthesized level or assumed shape is a
modelling choice, not data.

The converters take already-parsed CSV rows (``Mapping[str, str]``), never paths into the trace
folders: the library must stand alone, so only ``scripts/convert_traces.py`` reads the raw
traces and the results are committed under ``models/``.

All models use the levels ``zone > block > rack`` (plus the implicit ``node``), so one round can
say ``required: rack`` against any of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gangopt.parsing import parse_model
from gangopt.schema import Cluster, Node

LEVELS: list[str] = ["zone", "block", "rack"]
"""Topology levels of every shipped model, broadest first."""

GPU_MODEL_LABEL = "gpu.model"
"""Node label holding the GPU model; roles select a model with ``node_selector``."""

SYNTHETIC_LABEL = "gangopt.io/synthetic-topology"
"""Set to ``"true"`` on nodes whose zone/block/rack were invented by a converter."""


# ----------------------------------------------------------------------------- parametric


def parametric_cluster(
    nodes: int,
    gpus_per_node: int = 8,
    cpu: str = "96",
    memory: str = "1Ti",
    gpu_model: str = "H100",
    rack_size: int = 16,
    racks_per_block: int = 8,
    blocks_per_zone: int = 4,
) -> Cluster:
    """A homogeneous cluster of ``nodes`` identical nodes filled rack by rack.

    Node ``i`` sits in rack ``i // rack_size``, racks fill blocks and blocks fill zones in
    order, so the last rack (and block, zone) may be partial. Names are positional and
    deterministic (``z0-b1-r2-n3`` = zone 0, block 1 of that zone, rack 2 of that block,
    node 3 of that rack) so that two runs, or two machines, produce identical rounds.
    Domain names carry their full path (``z0-b1-r2``) because the schema requires a domain
    to have one parent. ``gpus_per_node=0`` gives CPU-only nodes without a ``gpu`` resource.
    """
    if nodes < 0:
        raise ValueError(f"nodes must be >= 0, got {nodes}")
    sizes = {"rack_size": rack_size, "racks_per_block": racks_per_block, "blocks_per_zone": blocks_per_zone}
    for name, value in sizes.items():
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if gpus_per_node < 0:
        raise ValueError(f"gpus_per_node must be >= 0, got {gpus_per_node}")
    capacity: dict[str, Any] = {"cpu": cpu, "memory": memory}
    labels: dict[str, str] = {}
    if gpus_per_node > 0:
        capacity = {"gpu": gpus_per_node, **capacity}
        labels[GPU_MODEL_LABEL] = gpu_model
    out: list[Node] = []
    for i in range(nodes):
        rack, n = divmod(i, rack_size)
        block, r = divmod(rack, racks_per_block)
        zone, b = divmod(block, blocks_per_zone)
        zone_name = f"z{zone}"
        block_name = f"{zone_name}-b{b}"
        rack_name = f"{block_name}-r{r}"
        out.append(
            Node.model_validate(
                {
                    "name": f"{rack_name}-n{n}",
                    "capacity": capacity,
                    "labels": labels,
                    "topology": {"zone": zone_name, "block": block_name, "rack": rack_name},
                }
            )
        )
    return Cluster(topology_levels=list(LEVELS), nodes=out)


# ----------------------------------------------------------------------------- loading, saving


def load_cluster(path: str | Path) -> Cluster:
    """Read a cluster model (a ``Cluster`` JSON object) from ``path``.

    A whole round (an object with a ``cluster`` key) is accepted too, so a model can be cut
    out of any instance. Raises :class:`gangopt.errors.InputError` naming the bad JSON path.
    """
    source = Path(path)
    data = json.loads(source.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "nodes" not in data and isinstance(data.get("cluster"), dict):
        data = data["cluster"]
    return parse_model(Cluster, data, str(source))


def dump_cluster(cluster: Cluster) -> str:
    """Compact, deterministic JSON for a model file (one node per line keeps diffs readable)."""
    data = cluster.model_dump(mode="json", exclude_defaults=True)
    nodes = data.pop("nodes")
    head = "".join(f"{json.dumps(k)}:{json.dumps(v, separators=(',', ':'))}," for k, v in data.items())
    lines = [json.dumps(n, separators=(",", ":"), sort_keys=True) for n in nodes]
    return "{" + head + '"nodes":[\n' + ",\n".join(lines) + "\n]}\n"  # a cluster without levels too


# ----------------------------------------------------------------------------- synthesized racks


@dataclass(frozen=True)
class NodeSpec:
    """One machine of an inventory before it is placed in a (synthesized) topology."""

    name: str
    gpus: int
    cpu_milli: int
    memory: str | None
    gpu_model: str | None
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[str, int]:
        """Racks hold one shape only (GPU model and count), as real racks hold one server SKU."""
        return (self.gpu_model or "cpu", self.gpus)


@dataclass(frozen=True)
class RackPlan:
    """How a converter invents racks: at most ``gpus_per_rack`` GPUs and ``max_nodes`` nodes
    per rack (so 4 eight-GPU servers, 8 four-GPU, 16 smaller ones with the defaults, about
    what a 30-40 kW rack holds), ``racks_per_block`` racks per block and ``blocks_per_zone``
    blocks per zone."""

    gpus_per_rack: int = 32
    max_nodes: int = 16
    racks_per_block: int = 8
    blocks_per_zone: int = 4

    def rack_size(self, gpus: int) -> int:
        return max(1, min(self.max_nodes, self.gpus_per_rack // gpus)) if gpus > 0 else self.max_nodes


def synthesize_topology(specs: Sequence[NodeSpec], plan: RackPlan | None = None) -> Cluster:
    """Place an inventory into invented zones, blocks and racks.

    Nodes are grouped by shape (first-seen order of shapes, input order inside a shape); each
    shape fills its own racks and its own blocks, so no rack or block mixes server types
    (racks are bought and cabled per SKU). Blocks of all shapes then fill zones in order.
    Every node gets the label :data:`SYNTHETIC_LABEL` so nobody mistakes this for data.
    """
    plan = plan or RackPlan()
    groups: dict[tuple[str, int], list[NodeSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.shape, []).append(spec)
    out: list[Node] = []
    block_counter = 0
    for (_, gpus), members in groups.items():
        size = plan.rack_size(gpus)
        for rack_index in range(0, (len(members) + size - 1) // size):
            local_block, r = divmod(rack_index, plan.racks_per_block)
            zone, b = divmod(block_counter + local_block, plan.blocks_per_zone)
            topology = {"zone": f"z{zone}", "block": f"z{zone}-b{b}", "rack": f"z{zone}-b{b}-r{r}"}
            for spec in members[rack_index * size : (rack_index + 1) * size]:
                out.append(_node(spec, topology, synthetic=True))
        block_counter += (len(members) + size * plan.racks_per_block - 1) // (size * plan.racks_per_block)
    return Cluster(topology_levels=list(LEVELS), nodes=out)


def _node(spec: NodeSpec, topology: dict[str, str], *, synthetic: bool) -> Node:
    capacity: dict[str, Any] = {}
    if spec.gpus > 0:
        capacity["gpu"] = spec.gpus
    capacity["cpu"] = f"{spec.cpu_milli}m"
    if spec.memory is not None:
        capacity["memory"] = spec.memory
    labels = dict(spec.extra_labels)
    if spec.gpu_model and spec.gpus > 0:
        labels[GPU_MODEL_LABEL] = spec.gpu_model
    if synthetic:
        labels[SYNTHETIC_LABEL] = "true"
    return Node.model_validate({"name": spec.name, "capacity": capacity, "labels": labels, "topology": topology})


# ----------------------------------------------------------------------------- converters


def openb_cluster(rows: Iterable[Mapping[str, str]], plan: RackPlan | None = None) -> Cluster:
    """Alibaba cluster-trace-gpu-v2023 (openb) node list -> cluster with synthesized racks.

    Columns ``sn,cpu_milli,memory_mib,gpu,model``. Nodes keep their trace names; ``model``
    becomes the ``gpu.model`` label (``G1``-``G3`` are Alibaba's undisclosed codes). Rows
    without GPUs become CPU-only nodes (the ``gpu_node`` list has none).
    """
    specs = [
        NodeSpec(
            name=row["sn"],
            gpus=int(row["gpu"]),
            cpu_milli=int(row["cpu_milli"]),
            memory=f"{int(row['memory_mib'])}Mi",
            gpu_model=row["model"] or None,
        )
        for row in rows
    ]
    return synthesize_topology(specs, plan)


def pai2020_cluster(rows: Iterable[Mapping[str, str]], plan: RackPlan | None = None) -> Cluster:
    """Alibaba PAI 2020 machine spec -> cluster with synthesized racks.

    Columns ``machine,gpu_type,cap_cpu,cap_mem,cap_gpu`` (``cap_mem`` in GB, read as GiB:
    the trace's own README gives GB without saying which). Machine names are 24-hex hashes,
    prefixed ``pai-``. ``gpu_type`` ``CPU`` gives CPU-only nodes; ``MISC`` stays a label value.
    """
    specs = []
    for row in rows:
        gpus = int(row["cap_gpu"])
        model = row["gpu_type"]
        specs.append(
            NodeSpec(
                name=f"pai-{row['machine']}",
                gpus=gpus,
                cpu_milli=int(row["cap_cpu"]) * 1000,
                memory=f"{int(row['cap_mem'])}Gi",
                gpu_model=None if model == "CPU" or gpus == 0 else model,
            )
        )
    return synthesize_topology(specs, plan)


def spot2026_cluster(
    rows: Iterable[Mapping[str, str]], memory_per_cpu_gib: int = 8, plan: RackPlan | None = None
) -> Cluster:
    """Alibaba cluster-trace-v2026-spot-gpu node list -> cluster with synthesized racks.

    Columns ``gpu_model,gpu_capacity_num,cpu_num,node_name``. The trace has no memory; each
    node gets ``memory_per_cpu_gib`` GiB per vCPU (an assumption, stated in models/README.md)
    so that rounds asking memory still fit.
    """
    specs = [
        NodeSpec(
            name=f"spot-{int(row['node_name'])}",
            gpus=int(row["gpu_capacity_num"]),
            cpu_milli=int(row["cpu_num"]) * 1000,
            memory=f"{int(row['cpu_num']) * memory_per_cpu_gib}Gi",
            gpu_model=row["gpu_model"],
        )
        for row in rows
    ]
    return synthesize_topology(specs, plan)


@dataclass(frozen=True)
class HostShape:
    """The node shape assumed where a trace gives topology but no capacities."""

    gpus: int = 8
    cpu: str = "192"
    memory: str = "2Ti"
    gpu_model: str = "H800"
    extra: Mapping[str, str] = field(default_factory=lambda: {"rdma/hca": "8"})


def lingjun_cluster(rows: Iterable[Mapping[str, str]], shape: HostShape | None = None, name_chars: int = 12) -> Cluster:
    """Alibaba Lingjun 2023 ``topo.csv`` (``ip,DSW,PSW,ASW``) -> cluster with the real Clos tree.

    zone = core switch (DSW), block = aggregation switch / pod (PSW), rack = ToR (ASW). ASW
    names repeat under different PSWs, so domains are named by their path (``G6-P10-S14``).
    Every host gets the same assumed ``shape`` (the trace has no capacities). Host names are
    ``h-`` plus the first ``name_chars`` hex digits of the hashed IP; a collision is an error.
    """
    shape = shape or HostShape()
    capacity: dict[str, Any] = {"gpu": shape.gpus, "cpu": shape.cpu, "memory": shape.memory, **shape.extra}
    labels = {GPU_MODEL_LABEL: shape.gpu_model, "gangopt.io/assumed-shape": "true"}
    out: list[Node] = []
    seen: dict[str, str] = {}
    for row in rows:
        name = f"h-{row['ip'][:name_chars]}"
        if name in seen and seen[name] != row["ip"]:
            raise ValueError(f"host name {name!r} is not unique at {name_chars} hex digits")
        seen[name] = row["ip"]
        zone = row["DSW"]
        block = f"{zone}-{row['PSW']}"
        rack = f"{block}-{row['ASW']}"
        topology = {"zone": zone, "block": block, "rack": rack}
        out.append(Node.model_validate({"name": name, "capacity": capacity, "labels": labels, "topology": topology}))
    out.sort(key=lambda n: (n.topology["zone"], _natural(n.topology["block"]), _natural(n.topology["rack"]), n.name))
    return Cluster(topology_levels=list(LEVELS), nodes=out)


def _natural(text: str) -> tuple[tuple[int, str], ...]:
    """Sort key that puts S2 before S10."""
    parts: list[tuple[int, str]] = []
    for chunk in text.split("-"):
        digits = chunk.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        prefix = chunk[: len(chunk) - len(digits)]
        parts.append((int(digits) if digits.isdigit() else -1, prefix))
    return tuple(parts)


def philly_vc_sizes(rows: Iterable[Mapping[str, str]]) -> dict[str, int]:
    """``philly_vc.csv`` (``vc,node num``) -> VC name to node count, in file order."""
    return {row["vc"]: int(row["node num"]) for row in rows}


PHILLY_VC_LABEL = "philly.vc"


def philly_vc_cluster(vc_sizes: Mapping[str, int], rack_size: int = 16, racks_per_block: int = 4) -> Cluster:
    """A Philly-sized cluster: the Helios authors' VC node counts, their default node
    (8 GPUs, 96 CPUs; memory assumed 512Gi; GPU model unknown, labelled ``philly-24GB``
    after the 24 GB GPUs of the official README's example server), each VC on its own contiguous racks.

    Philly's VCs are quota partitions rather than network domains, and its real rack layout
    is unknown; giving every VC whole racks (its last rack may be partial) is our choice. Nodes
    carry ``philly.vc=<hash>`` so rounds can pin roles to a VC with ``node_selector``.
    """
    out: list[Node] = []
    racks_before = 0
    for vc, count in vc_sizes.items():
        for i in range(count):
            rack = racks_before + i // rack_size
            block, r = divmod(rack, racks_per_block)
            topology = {"zone": "z0", "block": f"z0-b{block}", "rack": f"z0-b{block}-r{r}"}
            spec = NodeSpec(
                name=f"philly-{vc}-n{i}",
                gpus=8,
                cpu_milli=96_000,
                memory="512Gi",
                gpu_model="philly-24GB",
                extra_labels={PHILLY_VC_LABEL: vc},
            )
            out.append(_node(spec, topology, synthetic=True))
        racks_before += (count + rack_size - 1) // rack_size
    return Cluster(topology_levels=list(LEVELS), nodes=out)


def write_cluster(cluster: Cluster, path: str | Path) -> int:
    """Write ``cluster`` as compact JSON to ``path``; returns the bytes written."""
    text = dump_cluster(cluster)
    Path(path).write_text(text, encoding="utf-8")
    return len(text.encode("utf-8"))
