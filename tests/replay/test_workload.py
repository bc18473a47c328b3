"""Workload models and trace loaders, on small inline CSV fixtures."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest

from gangopt.errors import InputError
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.workload import (
    Job,
    Workload,
    dump_workload,
    load_openb,
    load_philly,
    load_workload,
    openb_jobs,
    philly_jobs,
    philly_roles,
)

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,aaa
2017-10-09 06:13:03,2951.0,12,35412.0,aaa
2017-10-09 06:13:03,0.0,16,0.0,aaa
2017-10-09 06:00:00,100.0,4,400.0,bbb
2017-10-09 08:00:00,10.0,20,200.0,aaa
"""

OPENB = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0001,6000,12288,1,460,,BE,Running,50,1050,60
openb-pod-0000,12000,16384,2,1000,V100M16|V100M32,LS,Running,0,5000,0
openb-pod-0002,4000,8192,0,0,,Burstable,Pending,70,900,
"""


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_philly_sorts_filters_and_shapes_gangs() -> None:
    wl = philly_jobs(rows(PHILLY), vc="aaa")
    assert [j.name for j in wl.jobs] == [f"philly-aaa-0000{i}" for i in range(4)]
    # ties on the timestamp keep file order: the 12-GPU row comes before the 16-GPU row
    assert [j.arrival for j in wl.jobs] == [0.0, 0.0, 2932.0, 6417.0]
    assert [j.gpus() for j in wl.jobs] == [12, 16, 1, 20]
    twelve, sixteen, one, twenty = wl.jobs
    assert [(r.name, r.replicas, r.requests["gpu"]) for r in twelve.roles] == [("worker", 2, 6000)]
    assert [(r.replicas, r.requests["gpu"]) for r in sixteen.roles] == [(2, 8000)]
    assert sixteen.duration == 1.0  # zero durations are clamped to one second
    assert [(r.replicas, r.requests["gpu"]) for r in one.roles] == [(1, 1000)]
    assert [(r.name, r.replicas, r.requests["gpu"]) for r in twenty.roles] == [("worker", 2, 8000), ("tail", 1, 4000)]
    assert one.roles[0].requests["cpu"] == 12000 and one.roles[0].requests["memory"] == 64 * 2**30 * 1000
    assert all(j.queue == "aaa" for j in wl.jobs)
    assert not one.elastic
    assert "CC BY 4.0" in wl.licence and any("priority" in a for a in wl.assumptions)


def test_philly_limit_all_vcs_and_seeded_assignment() -> None:
    wl = philly_jobs(rows(PHILLY), limit=2)
    assert [j.queue for j in wl.jobs] == ["bbb", "aaa"]
    assert len(wl.jobs) == 2
    again = philly_jobs(rows(PHILLY), limit=2)
    assert again == wl
    many = [f"2017-10-09 06:00:{s:02d},10.0,16,160.0,v" for s in range(60)]
    big = philly_jobs(rows("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(many)), seed=3)
    assert {j.priority for j in big.jobs} == {0, 1, 2}
    elastic = [j for j in big.jobs if j.elastic]
    assert 0 < len(elastic) < 60 and all(j.minimum == 1 and j.maximum == 2 for j in elastic)
    other = philly_jobs(rows("timestamp,duration,num_gpus,gpu_time,cluster\n" + "\n".join(many)), seed=4)
    assert [j.priority for j in other.jobs] != [j.priority for j in big.jobs]


def test_philly_roles_rejects_zero() -> None:
    with pytest.raises(ValueError):
        philly_roles(0)
    assert sum(r.replicas for r in philly_roles(128)) == 16


def test_openb_pods_become_single_pod_jobs() -> None:
    wl = openb_jobs(rows(OPENB))
    assert [j.name for j in wl.jobs] == ["openb-pod-0000", "openb-pod-0001", "openb-pod-0002"]
    full, shared, cpu_only = wl.jobs
    assert full.roles[0].requests["gpu"] == 2000 and full.priority == 2
    assert full.roles[0].node_affinity[0].values == ["V100M16", "V100M32"]
    assert shared.roles[0].requests["gpu"] == 460 and shared.priority == 0
    assert shared.arrival == 50 and shared.duration == 990
    assert "gpu" not in cpu_only.roles[0].requests and cpu_only.priority == 1
    assert cpu_only.duration == 830  # never scheduled: deletion - creation


def test_loaders_read_paths(tmp_path: Path) -> None:
    (tmp_path / "p.csv").write_text(PHILLY)
    (tmp_path / "o.csv").write_text(OPENB)
    assert len(load_philly(tmp_path / "p.csv", vc="bbb").jobs) == 1
    assert len(load_openb(tmp_path / "o.csv").jobs) == 3


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    wl = philly_jobs(rows(PHILLY))
    path = tmp_path / "w.json"
    path.write_text(dump_workload(wl))
    assert load_workload(path) == wl


def test_gzip_workloads_load_like_plain_ones(tmp_path: Path) -> None:
    wl = philly_jobs(rows(PHILLY))
    path = tmp_path / "w.json.gz"
    path.write_bytes(gzip.compress(dump_workload(wl).encode("utf-8")))
    assert load_workload(path) == wl
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="cannot read"):
        load_workload(broken)


def test_bad_workload_names_json_paths(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        '{"jobs": [{"name": "a", "arrival": -1, "duration": 5, "roles": [{"replicas": 1, "requests": {}}]}]}'
    )
    with pytest.raises(InputError) as error:
        load_workload(path)
    assert error.value.problems[0].path == "$.jobs[0].arrival"
    with pytest.raises(InputError):
        load_workload(tmp_path / "missing.json")


def test_job_and_workload_checks() -> None:
    role = {"replicas": 2, "requests": {"gpu": 1}}
    with pytest.raises(ValueError, match="duplicate job name"):
        Workload.model_validate({"jobs": [{"name": "a", "arrival": 0, "duration": 1, "roles": [role]}] * 2})
    with pytest.raises(ValueError, match="deadline"):
        Job.model_validate({"name": "a", "arrival": 5, "duration": 1, "roles": [role], "deadline": 1})
    job = Job.model_validate({"name": "a", "arrival": 0, "duration": 1, "roles": [role], "min_members": 1})
    assert job.elastic and job.minimum == 1 and job.maximum == 2


def test_copies_keep_or_recompute_the_cached_totals() -> None:
    role = {"replicas": 4, "requests": {"gpu": 1}}
    job = Job.model_validate({"name": "a", "arrival": 0, "duration": 1, "roles": [role], "min_members": 2})
    assert (job.minimum, job.maximum, job.elastic) == (2, 4, True)
    later = job.model_copy(update={"arrival": 5.0})
    assert (later.minimum, later.maximum, later.total_replicas) == (2, 4, 4)
    fixed = job.model_copy(update={"min_members": 3, "max_members": 3})
    assert (fixed.minimum, fixed.maximum, fixed.elastic) == (3, 3, False)
    wider = job.model_copy(update={"roles": [*job.roles, job.roles[0].model_copy(update={"name": "b"})]})
    assert (wider.total_replicas, wider.minimum, wider.maximum) == (8, 2, 8)


def test_shipped_philly_sample() -> None:
    path = Path(__file__).resolve().parents[2] / "instances" / "workloads" / "philly-6214e9.json"
    assert path.stat().st_size < 2_000_000
    wl = load_workload(path)
    assert len(wl.jobs) == 8000 and "CC BY 4.0" in wl.licence
    assert all(j.queue == "6214e9" for j in wl.jobs)
    assert [j.arrival for j in wl.jobs] == sorted(j.arrival for j in wl.jobs)


def test_shipped_full_philly_vc() -> None:
    """The whole VC, compressed: the same jobs as the sample at its start."""
    folder = Path(__file__).resolve().parents[2] / "instances" / "workloads"
    full = load_workload(folder / "philly-6214e9-full.json.gz")
    sample = load_workload(folder / "philly-6214e9.json")
    assert len(full.jobs) == 41226 and "CC BY 4.0" in full.licence
    assert full.jobs[: len(sample.jobs)] == sample.jobs


def _clipped_gpu_load(wl: Workload, gpus: float) -> float:
    """GPU-seconds within [first, last arrival] over ``gpus`` x that span (the README's load)."""
    start, end = wl.jobs[0].arrival, wl.jobs[-1].arrival
    used = sum(j.gpus() * (min(end, j.arrival + j.duration) - j.arrival) for j in wl.jobs)
    return used / (gpus * (end - start))


def test_shipped_openb_window() -> None:
    """Issue 12's openb window: 2,392 pods, 455 start deadlines of the documented form on GPU
    pods only, every pod fits a ``--nodes`` node, 77 % GPU load on 2 nodes."""
    path = Path(__file__).resolve().parents[2] / "instances" / "workloads" / "openb-11M-12M.json"
    assert path.stat().st_size < 2_000_000
    wl = load_workload(path)
    assert len(wl.jobs) == 2392 and "research or study" in wl.licence
    assert all(0 <= j.arrival < 1_000_000 for j in wl.jobs)
    with_deadline = [j for j in wl.jobs if j.deadline is not None]
    assert len(with_deadline) == 455
    assert all(j.gpus() > 0 and j.deadline == j.arrival + max(60.0, 0.5 * j.duration) for j in with_deadline)
    node = parametric_cluster(1).nodes[0].capacity
    assert all(r.requests.get(k, 0) <= node[k] for j in wl.jobs for r in j.roles for k in r.requests)
    assert 0.76 < _clipped_gpu_load(wl, 16.0) < 0.78


def test_shipped_philly_b436b2_window() -> None:
    """The second contended window: VC b436b2's jobs 6,000 on, 41 multi-node gangs, 73 % GPU
    load on 6 nodes."""
    path = Path(__file__).resolve().parents[2] / "instances" / "workloads" / "philly-b436b2-06000.json"
    assert path.stat().st_size < 2_000_000
    wl = load_workload(path)
    assert len(wl.jobs) == 1423 and wl.jobs[0].name == "philly-b436b2-06000" and wl.jobs[0].arrival == 0
    assert all(j.queue == "b436b2" for j in wl.jobs)
    assert sum(1 for j in wl.jobs if j.total_replicas > 1) == 41
    assert 0.70 < _clipped_gpu_load(wl, 48.0) < 0.76


def test_deadline_kind_is_explicit_and_converted_to_a_start_deadline() -> None:
    base = {"name": "j", "arrival": 100.0, "duration": 600.0, "roles": [{"replicas": 1, "requests": {"gpu": 1}}]}
    start = Job.model_validate({**base, "deadline": 1_000.0})
    done = Job.model_validate({**base, "deadline": 1_000.0, "deadline_kind": "completion"})
    tight = Job.model_validate({**base, "deadline": 300.0, "deadline_kind": "completion"})
    assert start.deadline_kind == "start" and start.start_deadline == 1_000.0
    assert done.start_deadline == 400.0
    assert tight.start_deadline == -300.0  # no start can meet it: still urgent, and counted missed
    assert Job.model_validate(base).start_deadline is None
    with pytest.raises(ValueError, match="deadline_kind"):
        Job.model_validate({**base, "deadline": 1_000.0, "deadline_kind": "finish"})
    # the kind survives a round trip, and the default is not written
    wl = Workload(jobs=[start, done.model_copy(update={"name": "k"})])
    text = dump_workload(wl)
    assert text.count('"deadline_kind":"completion"') == 1 and '"start"' not in text


def test_workload_schema_states_the_deadline_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    from gangopt.cli import main
    from gangopt.replay.workload import workload_schema

    schema = workload_schema()
    kind = schema["$defs"]["Job"]["properties"]["deadline_kind"]
    assert kind["enum"] == ["start", "completion"] and kind["default"] == "start"
    assert main(["schema", "workload"]) == 0
    assert json.loads(capsys.readouterr().out) == schema


def test_shipped_philly_tenants_window() -> None:
    """Jobs 52,000 ... 53,499 of all Philly VCs, one weighted tenant queue per VC (issue 15)."""
    path = Path(__file__).resolve().parents[2] / "instances" / "workloads" / "philly-all-52000.json"
    wl = load_workload(path)
    assert len(wl.jobs) == 1500 and wl.jobs[0].arrival == 0
    names = {q.name for q in wl.queues}
    assert names == {j.queue for j in wl.jobs} and len(names) == 12
    assert all(q.cohort == "philly" and q.weight is not None and not q.nominal for q in wl.queues)
    assert {q.name: q.weight for q in wl.queues}["6214e9"] == 64  # philly_vc.csv: 64 nodes
    assert 0.54 < _clipped_gpu_load(wl, 320.0) < 0.60


@pytest.mark.parametrize(
    ("queues", "path", "word"),
    [
        ([{"name": "a", "nominal": {"gpu": 4}, "lending_limit": {"gpu": 2}}], "$.queues[0].lending_limit", "no cohort"),
        (
            [{"name": "a", "cohort": "c", "nominal": {"gpu": 4}, "lending_limit": {"gpu": 8}}],
            "$.queues[0].lending_limit.gpu",
            "more than the nominal",
        ),
        ([{"name": "a", "nominal": {"gpu": -1}}], "$.queues[0].nominal.gpu", "negative"),
    ],
)
def test_a_workloads_queues_obey_the_rounds_rules(tmp_path: Path, queues: list[object], path: str, word: str) -> None:
    """The tenants of a workload are checked as a round's queues are, at load, naming the path:
    a replay never starts on queues no round would accept."""
    data = {"jobs": [{"name": "j", "arrival": 0, "duration": 10, "roles": [{"replicas": 1, "requests": {"gpu": 1}}]}]}
    file = tmp_path / "w.json"
    file.write_text(json.dumps({**data, "queues": queues}))
    with pytest.raises(InputError) as caught:
        load_workload(file)
    assert caught.value.problems[0].path == path and word in caught.value.problems[0].message
