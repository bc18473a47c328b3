"""Capacity planning: SLOs, the sizing search (checked by brute force), packing measures,
sweeps on local processes and on Dask, report folders and the CLI."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from gangopt.cli import main
from gangopt.replay.capacity import (
    Evaluator,
    brute_force,
    compaction,
    inflation,
    peak_compaction,
    peak_fits,
    peak_jobs,
    size_cluster,
    slo_inflation,
)
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.slo import parse_slo
from gangopt.replay.sweep import ClusterSpec, NodeType, parse_node_shape, run_tasks, sweep, sweep_tasks, variant
from gangopt.replay.workload import Job, Workload, dump_workload


def job(name: str, arrival: float, duration: float, gpus: int = 8, pods: int = 1, **kw: object) -> Job:
    roles = [{"replicas": pods, "requests": {"gpu": gpus, "cpu": 1}}]
    return Job.model_validate({"name": name, "arrival": arrival, "duration": duration, "roles": roles, **kw})


def small_workload(seed: int = 3, n: int = 30) -> Workload:
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        pods = rng.choice([1, 1, 2])
        gpus = 8 if pods > 1 else rng.choice([2, 4, 8])
        jobs.append(
            job(f"j{i}", rng.uniform(0, 6_000), rng.uniform(300, 1_500), gpus, pods, priority=rng.choice([0, 2]))
        )
    return Workload(jobs=jobs)


FAST = SimConfig(interval=60.0)


# ----------------------------------------------------------------------------- SLOs


def test_parse_slo() -> None:
    s = parse_slo("p95_wait<=30m")
    assert (s.what, s.quantile, s.op, s.threshold, s.filter_key) == ("wait", 95.0, "<=", 1800.0, None)
    s = parse_slo("p100_wait[priority>=2] <= 300")
    assert (s.quantile, s.filter_key, s.filter_op, s.filter_value, s.threshold) == (100.0, "priority", ">=", "2", 300)
    assert s.label == "p100_wait[priority>=2]"
    assert parse_slo("max_jct[queue==a]<2h").quantile == 100.0
    assert parse_slo("mean_wait<=1").quantile is None
    assert parse_slo("deadline_miss_rate<=5%").threshold == pytest.approx(0.05)
    for bad in ["p95_wait", "p95_wiat<=3", "p101_wait<=1", "p95_wait<=5%", "unstarted[queue>=a]<=0", "x<=1"]:
        with pytest.raises(ValueError):
            parse_slo(bad)


def test_slo_values_match_metrics() -> None:
    wl = small_workload()
    result = simulate(wl, parametric_cluster(2), make_policy("greedy"), FAST, name="greedy")
    from gangopt.replay.metrics import compute_metrics

    m = compute_metrics(result)
    assert parse_slo("p95_wait<=1").measure(result) == pytest.approx(m.queueing_delay.p95)
    assert parse_slo("max_wait<=1").measure(result) == pytest.approx(m.queueing_delay.max)
    hi = parse_slo("mean_wait[priority>=2]<=1").measure(result)
    assert hi == pytest.approx(m.queueing_delay_by_priority[2].mean)
    assert parse_slo("unstarted<=0").measure(result) == m.unstarted
    assert parse_slo("p95_wait[priority>=9]<=0").measure(result) == 0.0  # nothing selected: vacuous


# ----------------------------------------------------------------------------- clusters and variants


def test_node_shapes_and_mixed_clusters() -> None:
    a = parse_node_shape("a100:gpu=8,model=A100,rack=4")
    assert (a.name, a.gpus, a.gpu_model, a.rack_size) == ("a100", 8, "A100", 4)
    assert parse_node_shape("gpu=4") == NodeType(gpus=4)
    with pytest.raises(ValueError):
        parse_node_shape("gpu=eight")
    spec = ClusterSpec((a, NodeType("h100", gpus=8)), (("h100", 3),), "a100")
    cluster = spec.build(5)
    assert len(cluster.nodes) == 8
    assert len({n.name for n in cluster.nodes}) == 8
    assert sum(n.labels["gpu.model"] == "A100" for n in cluster.nodes) == 5
    with pytest.raises(ValueError):
        ClusterSpec((a,), (), "b")


def test_variant_jitter_and_scale() -> None:
    wl = small_workload()
    assert variant(wl, 0, 600.0) is wl
    jittered = variant(wl, 1, 600.0)
    moved = [abs(a.arrival - b.arrival) for a, b in zip(wl.jobs, jittered.jobs, strict=True)]
    assert max(moved) <= 600.0 and max(moved) > 0
    assert variant(wl, 1, 600.0) == jittered  # deterministic
    fast = variant(wl, scale=2.0)
    a0 = min(j.arrival for j in wl.jobs)
    for a, b in zip(wl.jobs, fast.jobs, strict=True):
        assert b.arrival == pytest.approx(a0 + (a.arrival - a0) / 2)


# ----------------------------------------------------------------------------- sizing


@pytest.mark.parametrize("slos", [["p95_wait<=10m"], ["p90_wait<=20m", "max_wait[priority>=2]<=5m"]])
def test_bisection_matches_brute_force(slos: list[str]) -> None:
    wl = small_workload()
    parsed = tuple(parse_slo(s) for s in slos)
    searched = size_cluster(Evaluator(wl, parsed, policy="greedy", config=FAST, seeds=(0, 1), jitter=300.0), 1, 12)
    brute = brute_force(Evaluator(wl, parsed, policy="greedy", config=FAST, seeds=(0, 1), jitter=300.0), 1, 12)
    assert brute.nodes is not None and brute.non_monotone == []
    assert searched.nodes == brute.nodes
    assert searched.simulations < brute.simulations
    below = [v for v in brute.evaluated if v.nodes == brute.nodes - 1]
    assert not below or not below[0].meets


def test_seed_share_and_k_section() -> None:
    wl = small_workload()
    slos = (parse_slo("p95_wait<=10m"),)
    every = size_cluster(Evaluator(wl, slos, policy="greedy", config=FAST, seeds=(0, 1, 2), jitter=900.0), 1, 12)
    half = size_cluster(
        Evaluator(wl, slos, policy="greedy", config=FAST, seeds=(0, 1, 2), jitter=900.0, seed_share=0.3), 1, 12
    )
    assert every.nodes is not None and half.nodes is not None
    assert half.nodes <= every.nodes
    # several sizes per step (what idle workers allow) find the same answer
    plain = size_cluster(Evaluator(wl, slos, policy="greedy", config=FAST), 1, 12)
    k_section = size_cluster(ThreeAtOnce(wl, slos, policy="greedy", config=FAST), 1, 12)
    assert k_section.nodes == plain.nodes


class ThreeAtOnce(Evaluator):
    @property
    def parallel_sizes(self) -> int:
        return 3


def test_no_answer_in_range() -> None:
    wl = Workload(jobs=[job("big", 0, 100, 8, 4)])  # needs 4 nodes
    result = size_cluster(Evaluator(wl, (parse_slo("unstarted<=0"),), policy="greedy", config=FAST), 1, 3)
    assert result.nodes is None
    assert size_cluster(Evaluator(wl, (parse_slo("unstarted<=0"),), policy="greedy", config=FAST), 1, 8).nodes == 4


def test_library_sizes_for_the_policy_the_cli_does() -> None:
    """The library's Evaluator and ``gangopt capacity`` size for the same policy when none is
    named (gangopt's own: it was greedy in the library and gangopt in the CLI, issue 16), and
    the default really replays CP-SAT; a misspelt policy fails at construction, naming the
    known ones."""
    from gangopt.cli import build_parser

    args = build_parser().parse_args(["capacity", "w.json", "--slo", "p95_wait<=1m"])
    wl = Workload(jobs=[job("a", 0, 600), job("b", 0, 600), job("c", 60, 300, 4)])
    ev = Evaluator(wl, (parse_slo("p95_wait<=5m"),), config=FAST)
    assert ev.policy == args.policy == "gangopt"
    (verdict,) = ev.evaluate([1])
    (outcome,) = verdict.outcomes
    assert outcome.task.policy == "gangopt" and outcome.metrics.policy == "gangopt"
    with pytest.raises(ValueError, match=r"unknown policy 'gredy' \(known: .*greedy"):
        Evaluator(wl, (parse_slo("p95_wait<=5m"),), policy="gredy")


# ----------------------------------------------------------------------------- packing measures


def test_peak_and_compaction() -> None:
    wl = Workload(jobs=[job("a", 0, 100), job("b", 10, 100, 4), job("c", 20, 100, 4), job("d", 500, 10)])
    t, jobs = peak_jobs(wl)
    assert t == 20 and sorted(j.name for j in jobs) == ["a", "b", "c"]
    assert peak_fits(parametric_cluster(2), jobs)
    assert not peak_fits(parametric_cluster(1), jobs)
    result = peak_compaction(wl, parametric_cluster(6), repeats=3)
    assert result.counts == [2, 2, 2]
    # generic: the shortest fitting prefix of each permutation
    assert compaction(parametric_cluster(10), lambda c: len(c.nodes) >= 7, repeats=2) == [7, 7]


def test_inflation_search() -> None:
    factor, _ = inflation(lambda f: f <= 3.0, max_factor=16, tolerance=0.01)
    assert factor is not None and 2.95 <= factor <= 3.0
    factor, _ = inflation(lambda f: f <= 0.3, max_factor=16, tolerance=0.01)
    assert factor is not None and 0.29 <= factor <= 0.3
    assert inflation(lambda f: False)[0] is None
    wl = small_workload()
    ev = Evaluator(wl, (parse_slo("p95_wait<=10m"),), policy="greedy", config=FAST)
    answer = size_cluster(ev, 1, 12).nodes
    assert answer is not None
    result = slo_inflation(ev, answer, max_factor=4, tolerance=0.1)
    assert result.factor is not None and result.factor >= 1.0


# ----------------------------------------------------------------------------- sweeps


def test_sweep_local_processes_match_in_process() -> None:
    wl = small_workload(n=12)
    serial = sweep(wl, ["greedy", "fifo_first_fit"], [2, 3], [0, 1], config=FAST, jitter=300.0, workers=1)
    pooled = sweep(wl, ["greedy", "fifo_first_fit"], [2, 3], [0, 1], config=FAST, jitter=300.0, workers=2)
    assert len(serial) == 8
    assert [(o.task.policy, o.task.nodes, o.task.seed) for o in pooled] == [
        (o.task.policy, o.task.nodes, o.task.seed) for o in serial
    ]
    for a, b in zip(serial, pooled, strict=True):
        assert a.metrics.queueing_delay == b.metrics.queueing_delay
        assert a.waits == b.waits


def test_sweep_on_dask_local_cluster() -> None:
    distributed = pytest.importorskip("distributed")
    wl = small_workload(n=12)
    tasks = sweep_tasks(["greedy"], [2, 3], [0, 1], config=FAST, jitter=300.0, slos=[parse_slo("p95_wait<=10m")])
    expected = run_tasks(tasks, wl, workers=1)
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        got = run_tasks(tasks, wl, dask=client)
    assert [o.task for o in got] == tasks
    for a, b in zip(expected, got, strict=True):
        assert a.slo_values == b.slo_values
        assert a.metrics.queueing_delay == b.metrics.queueing_delay


def test_untrusted_validation_gives_the_same_replay() -> None:
    wl = small_workload()
    base = simulate(wl, parametric_cluster(2), make_policy("greedy"), FAST, name="greedy")
    fast = simulate(
        wl, parametric_cluster(2), make_policy("greedy"), dataclasses.replace(FAST, validate="untrusted"), name="greedy"
    )
    assert [dataclasses.astuple(j) for j in base.jobs] == [dataclasses.astuple(j) for j in fast.jobs]
    with pytest.raises(ValueError):
        SimConfig(validate="never")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- CLI and reports


def test_cli_capacity_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wl.json"
    path.write_text(dump_workload(small_workload()), encoding="utf-8")
    out = tmp_path / "cap"
    code = main(
        [
            "capacity",
            str(path),
            "--slo",
            "p95_wait<=10m",
            "--slo",
            "p100_wait[priority>=2]<=15m",
            "--seeds",
            "2",
            "--jitter",
            "300",
            "--workers",
            "1",
            "--max-nodes",
            "12",
            "--repeats",
            "2",
            "--max-inflation",
            "2",
            "--out",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "answer:" in text and "compaction (peak" in text and "inflation (replay)" in text
    data = json.loads((out / "capacity.json").read_text())
    assert isinstance(data["answer_nodes"], int)
    for name in ["report.md", "sizes.csv", "slo_vs_size.png", "timeline.png", "wait_cdf.png"]:
        assert (out / name).stat().st_size > 0, name
    assert "slo_vs_size.png" in (out / "report.md").read_text()

    code = main(["simulate", str(path), "--nodes", "2", "--policy", "greedy", "--policy", "fifo_first_fit",
                 "--out", str(tmp_path / "sim")])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0 and "fifo_first_fit" in text
    for name in ["report.md", "timeline.png", "wait_cdf.png", "greedy/metrics.json", "fifo_first_fit/jobs.csv"]:
        assert (tmp_path / "sim" / name).exists(), name

    code = main(["sweep", str(path), "--nodes", "2", "3", "--policy", "greedy", "--seeds", "2", "--workers", "1",
                 "--out", str(tmp_path / "sweep")])  # fmt: skip
    assert code == 0
    assert (tmp_path / "sweep" / "sweep.csv").read_text().count("\n") == 5
    assert (tmp_path / "sweep" / "wait_vs_size.png").exists()


def test_cli_capacity_rejects_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wl.json"
    path.write_text(dump_workload(small_workload(n=3)), encoding="utf-8")
    assert main(["capacity", str(path), "--slo", "p95_wiat<=3"]) == 2
    assert "--slo" in capsys.readouterr().err
    assert main(["capacity", str(path), "--slo", "p95_wait<=3", "--node-shape", "gpu=x"]) == 2
    assert main(["capacity", str(path), "--slo", "p95_wait<=3", "--seeds", "0"]) == 2
