"""The pre-flight check: jobs that can never start are named before any replay (issue 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gangopt.cli import main
from gangopt.errors import InputError
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.policies import make_policy
from gangopt.replay.preflight import SHOWN, impossible_jobs, preflight
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.workload import Job, Workload, dump_workload
from gangopt.schema import Queue


def job(name: str, arrival: float = 0.0, gpus: float = 8, pods: int = 1, **kw: object) -> Job:
    role: dict[str, object] = {"replicas": pods, "requests": {"gpu": gpus, "cpu": 1}}
    role.update(kw.pop("role", {}))  # type: ignore[call-overload]
    return Job.model_validate({"name": name, "arrival": arrival, "duration": 100, "roles": [role], **kw})


def test_each_kind_of_impossible_job_is_named_at_its_json_path() -> None:
    wl = Workload(
        jobs=[
            job("ok"),
            job("big-pod", gpus=16),
            job("too-many", pods=5),
            job("selector", gpus=1, role={"node_selector": {"gpu.model": "A100"}}),
            job("rack", pods=3, topology={"required": "rack"}),
            job("cpu", gpus=1, role={"requests": {"gpu": 1, "cpu": 120}}),
            job("elastic", pods=5, min_members=2),
        ]
    )
    found = impossible_jobs(wl, parametric_cluster(4, rack_size=2))
    assert [(x.index, x.name, x.path) for x in found] == [
        (1, "big-pod", "$.jobs[1].roles[0].requests.gpu"),
        (2, "too-many", "$.jobs[2]"),
        (3, "selector", "$.jobs[3].roles[0].node_selector"),
        (4, "rack", "$.jobs[4].topology.required"),
        (5, "cpu", "$.jobs[5].roles[0].requests.cpu"),
    ]
    reasons = {x.name: x.reason for x in found}
    assert reasons["big-pod"] == "role 'worker': one pod asks 16 gpu; the largest node has 8 gpu"
    assert "gpu.model=A100" in reasons["selector"]
    assert "room for 4" in reasons["too-many"] and "within one rack" in reasons["rack"]


def test_quota_that_can_never_admit_a_job_points_at_its_queue() -> None:
    wl = Workload(jobs=[job("fits", queue="q"), job("over", pods=2, queue="q")])
    found = impossible_jobs(wl, parametric_cluster(4), (Queue(name="q", nominal={"gpu": 8}),))
    assert [(x.name, x.path) for x in found] == [("over", "$.jobs[1].queue")]


def test_jobs_of_one_shape_are_all_named() -> None:
    wl = Workload(jobs=[job(f"j{i}", arrival=i, gpus=16 if i % 2 else 1) for i in range(20)])
    found = impossible_jobs(wl, parametric_cluster(1))
    assert [x.index for x in found] == list(range(1, 20, 2))
    with pytest.raises(InputError) as error:
        preflight(wl, parametric_cluster(1))
    problems = error.value.problems
    assert [p.path for p in problems] == [f"$.jobs[{i}].roles[0].requests.gpu" for i in (1, 3, 5, 7, 9)] + ["$.jobs"]
    assert len(problems) == SHOWN + 1
    assert "10 of 20 jobs can never start" in problems[-1].message and "5 more not shown" in problems[-1].message
    kept, dropped = preflight(wl, parametric_cluster(1), drop=True)
    assert [j.name for j in kept.jobs] == [f"j{i}" for i in range(0, 20, 2)] and len(dropped) == 10
    assert "dropped before the replay" in kept.assumptions[-1]


def test_a_fitting_workload_passes_unchanged() -> None:
    wl = Workload(jobs=[job("a"), job("b", pods=2)])
    kept, dropped = preflight(wl, parametric_cluster(2))
    assert kept is wl and dropped == []


def test_fifo_does_not_deadlock_once_impossible_jobs_are_dropped() -> None:
    """Strict FIFO never passes a head that cannot start: unchecked, one impossible job blocks
    every later one for good; the pre-flight drop lets all of them run."""
    small = [job(f"s{i}", 20 + i, 2) for i in range(4)]
    wl = Workload(jobs=[job("first", 0, gpus=4), job("huge", 10, gpus=16), *small])
    config = SimConfig(interval=0.0)
    blocked = simulate(wl, parametric_cluster(1), make_policy("fifo_first_fit"), config, impossible="keep")
    assert sum(1 for r in blocked.jobs if r.first_start is None) == 5
    kept, _ = preflight(wl, parametric_cluster(1), drop=True)
    ran = simulate(kept, parametric_cluster(1), make_policy("fifo_first_fit"), config)
    assert [r.state for r in ran.jobs] == ["finished"] * 5


@pytest.fixture
def impossible_file(tmp_path: Path) -> Path:
    path = tmp_path / "w.json"
    path.write_text(dump_workload(Workload(jobs=[job("a", 0, 1), job("b", 5, 16), job("c", 9, 2)])))
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "--nodes", "2"],
        ["simulate", "--nodes", "2", "--policy", "fifo_first_fit"],
        ["sweep", "--nodes", "1", "2", "--workers", "1"],
        ["capacity", "--slo", "p95_wait<=1h", "--workers", "1", "--max-nodes", "4"],
    ],
)
def test_every_replay_command_refuses_impossible_jobs(
    impossible_file: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command[0], str(impossible_file), *command[1:]]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error: $.jobs[1].roles[0].requests.gpu: job 'b' can never start on this cluster" in captured.err
    assert "--drop-impossible" in captured.err


def test_drop_impossible_replays_the_rest_and_says_so(
    impossible_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", str(impossible_file), "--nodes", "1", "--policy", "fifo_first_fit", "--json"]
    argv.append("--drop-impossible")
    assert main(argv) == 0
    captured = capsys.readouterr()
    metrics = json.loads(captured.out)
    assert (metrics["jobs"], metrics["finished"], metrics["unstarted"]) == (2, 2, 0)
    assert "warning: $.jobs[1].roles[0].requests.gpu: dropped job 'b'" in captured.err
    assert "dropped 1 jobs that can never start" in captured.err


def test_paths_name_the_files_index_when_replaying_the_first_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--first 2`` replays jobs 1 and 3 of the file (the two earliest arrivals): the error
    names ``$.jobs[3]``, where the job is in the file, not its place in the slice."""
    path = tmp_path / "w.json"
    jobs = [job("a", 50, 1), job("b", 0, 1), job("c", 60, 1), job("d", 10, 16)]
    path.write_text(dump_workload(Workload(jobs=jobs)))
    assert main(["simulate", str(path), "--nodes", "1", "--first", "2"]) == 2
    assert "error: $.jobs[3].roles[0].requests.gpu: job 'd' can never start" in capsys.readouterr().err


def test_pods_cut_by_the_import_point_at_its_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A CSV imported with the default 8 GPUs a pod, sized on 4-GPU nodes: every job of more
    than 4 GPUs is refused, and the error says which import flags cut the pods; re-imported
    with ``--gpus-per-node 4`` the same trace passes the check. A workload written by hand
    (no import assumption) gets no such hint."""
    trace = tmp_path / "jobs.csv"
    trace.write_text("submit,duration,gpus\n0,600,2\n10,600,8\n20,600,16\n")
    shape = ["--node-shape", "gpu=4,cpu=64,memory=512Gi", "--policy", "greedy", "--workers", "1"]
    argv = ["capacity", str(tmp_path / "w.json"), "--slo", "p95_wait<=1h", *shape, "--max-nodes", "8"]
    assert main(["import", "trace", str(trace), "-o", str(tmp_path / "w.json")]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error: $.jobs: 2 of 3 jobs can never start" in err
    assert "error: $.assumptions: the import assumed 'gang: ceil(GPUs/8) pods" in err
    assert "--gpus-per-node 4 for 4-GPU nodes" in err
    assert main(["import", "trace", str(trace), "--gpus-per-node", "4", "-o", str(tmp_path / "w.json")]) == 0
    assert main([*argv, "--compaction", "none", "--inflation", "none"]) == 0
    assert "answer: " in capsys.readouterr().out
    with pytest.raises(InputError) as caught:
        preflight(Workload(jobs=[job("a", gpus=8)]), parametric_cluster(1, gpus_per_node=4))
    assert not any(p.path == "$.assumptions" for p in caught.value.problems)
