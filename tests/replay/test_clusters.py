"""Shipped cluster models load as valid clusters; the parametric generator has the asked shape."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gangopt.quantities import parse_quantity
from gangopt.replay.clusters import (
    GPU_MODEL_LABEL,
    LEVELS,
    HostShape,
    NodeSpec,
    lingjun_cluster,
    load_cluster,
    openb_cluster,
    parametric_cluster,
    philly_vc_cluster,
    synthesize_topology,
)
from gangopt.schema import Round

MODELS = Path(__file__).resolve().parents[2] / "models"
MODEL_FILES = sorted(MODELS.glob("*.json"))

EXPECTED = {
    # file: (nodes, GPUs) straight from the traces' SOURCE.md (converter must not lose machines)
    "openb.json": (1213, 6212),
    "lingjun.json": (847, 847 * 8),
    "philly-vc.json": (352, 352 * 8),
    "pai2020.json": (1897, 6742),
    "spot2026.json": (4278, 10412),
}


def test_every_expected_model_is_shipped() -> None:
    assert {p.name for p in MODEL_FILES} >= set(EXPECTED)


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.name)
def test_model_loads_as_valid_cluster(path: Path) -> None:
    cluster = load_cluster(path)
    assert cluster.topology_levels == LEVELS
    assert path.stat().st_size < 2_000_000
    # A round over the model runs every cross-field check (unique names, one parent per domain).
    Round(cluster=cluster)
    if path.name in EXPECTED:
        nodes, gpus = EXPECTED[path.name]
        assert len(cluster.nodes) == nodes
        assert sum(n.capacity.get("gpu", 0) for n in cluster.nodes) == gpus * 1000
    for node in cluster.nodes:
        if node.capacity.get("gpu", 0) > 0:
            assert GPU_MODEL_LABEL in node.labels


def test_lingjun_keeps_real_tor_groups() -> None:
    """119 ToR groups of 2-8 hosts under 3 aggregation switches (SOURCE.md)."""
    cluster = load_cluster(MODELS / "lingjun.json")
    racks = Counter(n.topology["rack"] for n in cluster.nodes)
    assert len(racks) == 119
    assert max(racks.values()) == 8 and min(racks.values()) == 2
    assert len({n.topology["block"] for n in cluster.nodes}) == 3


@pytest.mark.parametrize("nodes", [0, 1, 15, 16, 17, 128, 129, 600])
def test_parametric_node_count_and_structure(nodes: int) -> None:
    cluster = parametric_cluster(nodes)
    assert len(cluster.nodes) == nodes
    assert len({n.name for n in cluster.nodes}) == nodes
    racks = Counter(n.topology["rack"] for n in cluster.nodes)
    assert all(count <= 16 for count in racks.values())
    assert len(racks) == -(-nodes // 16)
    racks_per_block = Counter(rack.rsplit("-", 1)[0] for rack in racks)
    assert all(count <= 8 for count in racks_per_block.values())
    assert len(racks_per_block) == -(-nodes // (16 * 8))
    blocks_per_zone = Counter(block.split("-")[0] for block in racks_per_block)
    assert all(count <= 4 for count in blocks_per_zone.values())
    Round(cluster=cluster)


def test_parametric_names_shape_and_labels() -> None:
    cluster = parametric_cluster(
        300,
        gpus_per_node=4,
        cpu="64",
        memory="512Gi",
        gpu_model="A100",
        rack_size=10,
        racks_per_block=3,
        blocks_per_zone=2,
    )
    first, last = cluster.nodes[0], cluster.nodes[-1]
    assert first.name == "z0-b0-r0-n0"
    assert first.topology == {"zone": "z0", "block": "z0-b0", "rack": "z0-b0-r0"}
    # node 299: rack 29 -> block 9 (rack 2 in it) -> zone 4 (block 1 in it), node 9 of its rack
    assert last.name == "z4-b1-r2-n9"
    assert first.capacity == {"gpu": 4000, "cpu": 64000, "memory": parse_quantity("512Gi")}
    assert first.labels == {GPU_MODEL_LABEL: "A100"}
    assert parametric_cluster(300, rack_size=10) == parametric_cluster(300, rack_size=10)


def test_parametric_cpu_only() -> None:
    node = parametric_cluster(1, gpus_per_node=0).nodes[0]
    assert "gpu" not in node.capacity and GPU_MODEL_LABEL not in node.labels


def test_parametric_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError):
        parametric_cluster(4, rack_size=0)
    with pytest.raises(ValueError):
        parametric_cluster(-1)


def test_converters_on_tiny_inputs() -> None:
    openb = openb_cluster(
        [
            {"sn": "a", "cpu_milli": "96000", "memory_mib": "393216", "gpu": "8", "model": "G2"},
            {"sn": "b", "cpu_milli": "16000", "memory_mib": "122880", "gpu": "2", "model": "P100"},
            {"sn": "c", "cpu_milli": "96000", "memory_mib": "393216", "gpu": "8", "model": "G2"},
        ]
    )
    racks = {n.name: n.topology["rack"] for n in openb.nodes}
    assert racks["a"] == racks["c"] != racks["b"]  # racks hold one server shape
    assert openb.nodes[0].capacity["memory"] == parse_quantity("384Gi")
    lingjun = lingjun_cluster(
        [
            {"ip": "ab" * 32, "DSW": "G6", "PSW": "P8", "ASW": "S1"},
            {"ip": "cd" * 32, "DSW": "G6", "PSW": "P10", "ASW": "S1"},
        ],
        HostShape(gpus=4, extra={}),
    )
    assert {n.topology["rack"] for n in lingjun.nodes} == {"G6-P8-S1", "G6-P10-S1"}
    assert lingjun.nodes[0].capacity["gpu"] == 4000
    philly = philly_vc_cluster({"vc1": 3, "vc2": 2}, rack_size=2)
    assert Counter(n.labels["philly.vc"] for n in philly.nodes) == {"vc1": 3, "vc2": 2}
    assert len({n.topology["rack"] for n in philly.nodes}) == 3  # vc1: 2 racks, vc2: 1 (no sharing)
    mixed = synthesize_topology([NodeSpec(f"n{i}", 8, 96000, "1Ti", "H100") for i in range(9)])
    assert Counter(n.topology["rack"] for n in mixed.nodes).most_common(1)[0][1] == 4  # 32 GPUs per rack


def test_load_cluster_accepts_a_round(tmp_path: Path) -> None:
    rnd = Round(cluster=parametric_cluster(3))
    path = tmp_path / "round.json"
    path.write_text(rnd.model_dump_json(), encoding="utf-8")
    assert load_cluster(path) == rnd.cluster
