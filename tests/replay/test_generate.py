"""The benchmark round generator (issue 3): valid, deterministic, shaped as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangopt.cli import main
from gangopt.io import load_round
from gangopt.replay.generate import (
    MAX_GANG_GPUS,
    SIZES,
    Spec,
    dump_round,
    generate,
    philly_table,
    pod_shape,
    size_mix,
    size_spec,
)
from gangopt.schema import Round

ROOT = Path(__file__).resolve().parents[2]


def _gpus(role_requests: dict[str, int]) -> int:
    return role_requests.get("gpu", 0) // 1000


def test_philly_table_is_the_trace_summary() -> None:
    table = philly_table()
    assert sum(jobs for _, jobs, _ in table) == 82_247
    assert dict((g, j) for g, j, _ in table)[1] == 76_627
    assert max(g for g, _, _ in table) == 128


def test_size_mix_is_a_distribution_reaching_1024() -> None:
    for alpha in (0.0, 1.0, 2.0):
        mix = size_mix(alpha, MAX_GANG_GPUS)
        assert abs(sum(mix.values()) - 1.0) < 1e-9
        assert min(mix) == 1 and max(mix) == 1024
    assert max(size_mix(1.0, 64)) <= 64
    # the tilt moves weight to big jobs
    assert size_mix(1.0, 1024)[1] < size_mix(0.0, 1024)[1]


@pytest.mark.parametrize(("gpus", "shape"), [(1, (1, 1)), (8, (1, 8)), (12, (2, 6)), (24, (3, 8)), (1024, (128, 8))])
def test_pod_shape(gpus: int, shape: tuple[int, int]) -> None:
    assert pod_shape(gpus) == shape


@pytest.mark.parametrize("contention", [False, True])
def test_generated_round_matches_its_description(contention: bool) -> None:
    rnd, info = generate(Spec(nodes=256, gangs=60, seed=3, contention=contention))
    assert len(rnd.cluster.nodes) == 256 and len(rnd.pending) == 60
    assert all(n.capacity["gpu"] == 8000 for n in rnd.cluster.nodes)
    racks = {n.topology["rack"] for n in rnd.cluster.nodes}
    assert len(racks) == 16  # racks of 16
    busy = sum(_gpus(g.roles[0].requests) * len(g.pods) for g in rnd.running)
    assert busy == info.busy_gpus
    assert 0.6 <= busy / 2048 <= 0.9
    assert len({g.priority for g in rnd.running}) > 1
    demand = sum(_gpus(r.requests) * r.replicas for g in rnd.pending for r in g.roles)
    assert demand == info.demand_gpus
    free = 2048 - busy
    if contention:
        assert busy / 2048 >= 0.8 and demand > free
    assert all(1 <= _gpus(r.requests) * r.replicas <= 1024 for g in rnd.pending for r in g.roles)
    assert rnd.policy.preemption


def test_generation_is_deterministic_and_seeded() -> None:
    first, _ = generate(size_spec("S", seed=5))
    second, _ = generate(size_spec("S", seed=5))
    other, _ = generate(size_spec("S", seed=6))
    assert dump_round(first) == dump_round(second)
    assert dump_round(first) != dump_round(other)


def test_dump_round_reads_back() -> None:
    rnd, _ = generate(Spec(nodes=64, gangs=20, seed=1))
    text = dump_round(rnd)
    assert text.startswith("{\n")
    assert Round.model_validate_json(text) == rnd


@pytest.mark.parametrize("size", ["S", "M"])
def test_committed_scale_rounds_are_reproducible(size: str) -> None:
    path = ROOT / "instances" / f"scale-{size}.json"
    rnd, _ = generate(size_spec(size, seed=0))
    assert path.read_text(encoding="utf-8") == dump_round(rnd)
    assert len(load_round(path).cluster.nodes) == SIZES[size][0]


def test_cli_generate_writes_a_round(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "round.json"
    assert main(["generate", "--nodes", "32", "--gangs", "10", "--seed", "2", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "32 nodes" in captured.err
    rnd = load_round(out)
    assert len(rnd.cluster.nodes) == 32 and len(rnd.pending) == 10
    assert main(["generate", "--size", "S", "--contention"]) == 0
    assert Round.model_validate_json(capsys.readouterr().out).pending


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["generate"], "one of the arguments --size --nodes is required"),
        (["generate", "--nodes", "8"], "error: --gangs: required with --nodes"),
        (["generate", "--nodes", "0", "--gangs", "1"], "error: --nodes: nodes must be >= 1"),
        (["generate", "--size", "S", "--busy", "1.5"], "error: --busy: busy must be in [0, 1)"),
        (["generate", "--size", "XXL"], "invalid choice"),
        (["generate", "--size", "S", "--nodes", "8"], "not allowed with argument"),
    ],
)
def test_cli_generate_bad_flags_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err


@pytest.mark.parametrize("busy", [0.6, 0.75, 0.9])
def test_fragmented_rounds_scatter_the_free_gpus(busy: float) -> None:
    """Issue 13's rounds: no node wholly free, holes of every size, a fabric selector on about
    30 % of the pending gangs, the busy share as asked; the same spec gives the same round."""
    import numpy as np

    from gangopt.arrays import free_capacity, resource_names
    from gangopt.replay.generate import FABRIC_LABEL, FRAGMENTED_SHARES

    elastic, required, preferred = FRAGMENTED_SHARES
    spec = Spec(
        nodes=256,
        gangs=100,
        seed=3,
        fragmented=True,
        busy=busy,
        elastic_share=elastic,
        required_share=required,
        preferred_share=preferred,
    )
    rnd, info = generate(spec)
    assert greedy_plan_validates(rnd)
    resources = resource_names(rnd)
    free = free_capacity(rnd, resources)[:, resources.index("gpu")] // 1000
    holes = np.bincount(free, minlength=9)
    assert holes[8] == 0  # no node wholly free
    assert (holes[1:8] > 0).sum() >= 4  # partial holes of many sizes
    assert abs(info.busy_gpus / info.gpus - busy) < 0.06
    selected = sum(1 for g in rnd.pending if FABRIC_LABEL in g.roles[0].node_selector)
    assert 15 <= selected <= 45
    assert generate(spec)[0] == rnd
    assert "fragmented" in info.line()


def test_fragmented_rounds_run_many_small_gangs_like_the_issues() -> None:
    """Issue 13's rounds run about 57 k gangs on 16,384 nodes (3.5 per node; 68,536 here): Philly's job-count
    mix, mostly single-GPU. The default fragmented mix is that one (here 256 nodes); the tilted
    mix (``running_mix="tilted"``) runs fewer, larger gangs on the same busy share."""
    from dataclasses import replace

    spec = Spec(nodes=256, gangs=100, seed=3, fragmented=True, busy=0.75)
    many, info = generate(spec)
    few, _ = generate(replace(spec, running_mix="tilted"))
    assert len(many.running) >= 2 * 256  # 2.5 per node here (the mix has a 1,024-GPU tail)
    assert len(many.running) > 2 * len(few.running)
    single = sum(1 for g in many.running if len(g.pods) == 1 and g.roles[0].requests["gpu"] <= 1000)
    assert single >= 0.6 * len(many.running)
    assert abs(info.busy_gpus / info.gpus - 0.75) < 0.06


def greedy_plan_validates(rnd: Round) -> bool:
    """The generated round is a valid round whose greedy plan validates."""
    import gangopt

    plan = gangopt.solve(rnd, solver="greedy", annotate=False)
    return gangopt.validate(rnd, plan) == []
