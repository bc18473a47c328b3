"""``gangopt simulate --node-shape`` and ``capacity --policy`` (issue 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangopt.cli import build_parser, main
from gangopt.cli.capacity import CAPACITY_COST

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "jobs.csv"


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    out = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(out)]) == 0
    return out


def test_node_shape_builds_the_cluster_like_capacity_does(workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    argv = ["simulate", str(workload), "--policy", "greedy", "--json", "--nodes", "2"]
    assert main([*argv, "--node-shape", "gpu=16,cpu=256,memory=2Ti"]) == 0
    assert json.loads(capsys.readouterr().out)["gpus_total"] == 32
    shapes = ["--node-shape", "big:gpu=8", "--node-shape", "small:gpu=4,cpu=64", "--fixed", "small=3"]
    assert main([*argv, *shapes]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert (metrics["nodes"], metrics["gpus_total"]) == (5, 28)


def test_node_shape_that_no_job_fits_is_caught_before_the_replay(
    workload: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["simulate", str(workload), "--nodes", "4", "--node-shape", "gpu=4"]) == 2
    err = capsys.readouterr().err
    assert "error: $.jobs[0].roles[0].requests.gpu: job 'job-00000' can never start on this cluster" in err


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--cluster", "models/philly-vc.json", "--node-shape", "gpu=4"], "error: --node-shape: goes with --nodes"),
        (["--nodes", "2", "--node-shape", "gpu=x"], "error: --node-shape: node shape term 'gpu=x'"),
    ],
)
def test_bad_cluster_flags_exit_2(
    workload: Path, extra: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(workload), *extra]) == 2
    assert error in capsys.readouterr().err


def test_capacity_sizes_for_gangopt_by_default_and_says_what_it_costs(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["capacity", "w.json", "--slo", "p95_wait<=1h"])
    assert args.policy == "gangopt"
    assert main(["capacity", "--help"]) == 0
    assert CAPACITY_COST in " ".join(capsys.readouterr().out.split())


def _bar_lines(err: str, prefix: str) -> list[str]:
    """The states a tqdm bar drew on stderr (each redraw starts with a carriage return)."""
    return [
        line.strip()
        for line in err.replace("\x1b[A", "").replace("\r", "\n").splitlines()
        if line.strip().startswith(prefix)
    ]


def test_several_policies_get_one_bar_over_the_whole_run(workload: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--progress`` with two policies: each policy's own bar, and above them one over the
    run, counting jobs x policies (2 x 12). With ``--horizon``, jobs still waiting or running
    at the end are counted when their policy ends, so the bar reaches 24/24 exactly while each
    policy's bar stops at its finished jobs; its ETA (``<``) and rate are tqdm's."""
    capsys.readouterr()
    argv = ["simulate", str(workload), "--nodes", "2", "--policy", "greedy", "--policy", "fifo_first_fit"]
    assert main([*argv, "--horizon", "5000", "--progress", "--json"]) == 0
    captured = capsys.readouterr()
    finished = {m["policy"]: m["finished"] for m in json.loads(captured.out)}
    assert all(0 < n < 12 for n in finished.values())  # the horizon leaves jobs unfinished
    overall = _bar_lines(captured.err, "simulate 2 policies")
    assert " 0/24 [" in overall[0]
    assert any(line.startswith("simulate 2 policies (1/2: greedy):") for line in overall)
    assert any(line.startswith("simulate 2 policies (2/2: fifo_first_fit):") for line in overall)
    assert "100%" in overall[-1] and " 24/24 [" in overall[-1] and "<" in overall[-1].split("[")[1]
    for policy, n in finished.items():
        assert f" {n}/12 [" in _bar_lines(captured.err, f"simulate {policy}:")[-1]
    capsys.readouterr()
    assert main([*argv[:6], "--progress"]) == 0  # one policy: its own bar only
    assert _bar_lines(capsys.readouterr().err, "simulate 2 policies") == []
