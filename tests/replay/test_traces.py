"""The CSV importer and its post-processing (gangopt/replay/traces.py)."""

from __future__ import annotations

import pytest

from gangopt.errors import InputError
from gangopt.replay.traces import (
    CsvOptions,
    assign_deadlines,
    csv_workload,
    detect_format,
    parse_seconds,
    scale_load,
    trace_workload,
    window,
)

CSV = """job_id,Submit,runtime,num_gpus,deadline,priority,vc
b,2024-01-01 00:10:00,600,16,2024-01-01 01:00:00,2,research
a,2024-01-01 00:00:00,0,1,,0,prod
c,2024-01-01 00:10:00,60,12,,,prod
"""


def test_csv_columns_by_alias_sorted_by_submission_with_completion_deadlines() -> None:
    wl = csv_workload(CSV, source="t.csv")
    assert [j.name for j in wl.jobs] == ["a", "b", "c"]  # by submission; ties keep file order
    a, b, c = wl.jobs
    assert [j.arrival for j in wl.jobs] == [0.0, 600.0, 600.0]
    assert a.duration == 1.0 and a.gpus() == 1 and a.queue == "prod" and a.deadline is None
    assert b.deadline == 3600.0 and b.deadline_kind == "completion" and b.start_deadline == 3000.0
    assert b.priority == 2 and b.queue == "research" and c.priority == 0
    assert [(r.name, r.replicas, r.requests["gpu"]) for r in b.roles] == [("worker", 2, 8000)]
    assert [(r.replicas, r.requests["gpu"]) for r in c.roles] == [(2, 6000)]
    assert any("deadline column read as a completion deadline" in x for x in wl.assumptions)


def test_column_overrides_node_size_and_start_deadlines() -> None:
    text = "t,d,g,dl\n100,50,8,150\n"
    options = CsvOptions(columns={"submit": "t", "duration": "d", "gpus": "g", "deadline": "dl"}, gpus_per_node=4)
    (job,) = csv_workload(text, options).jobs
    assert job.arrival == 0.0 and job.deadline == 50.0 and job.deadline_kind == "completion"
    assert [(r.replicas, r.requests["gpu"]) for r in job.roles] == [(2, 4000)]
    (start,) = csv_workload(text, CsvOptions(columns=options.columns, deadline_kind="start")).jobs
    assert start.deadline_kind == "start" and start.start_deadline == 50.0


def test_errors_name_the_row_column_and_what_was_expected() -> None:
    with pytest.raises(InputError) as error:
        csv_workload("submit,duration,gpus\n0,10,1\n5,ten,0.5\n,10,2\n", source="t.csv")
    problems = [(p.path, p.message) for p in error.value.problems]
    assert problems[:2] == [
        ("line 3, column 'duration'", "expected run time in seconds at the job's full size (0 becomes 1 s), got 'ten'"),
        ("line 3, column 'gpus'", "expected GPUs of the whole job, a whole number >= 1, got '0.5'"),
    ]
    assert len(problems) == 3 and problems[2][0] == "line 4, column 'submit'"
    assert problems[2][1].startswith("expected submission time") and problems[2][1].endswith("got ''")
    with pytest.raises(InputError) as error:
        csv_workload("when,how_long,cards\n0,1,1\n")
    messages = [p.message for p in error.value.problems]
    assert len(messages) == 3 and all("--column" in m for m in messages)
    assert "no column for 'gpus'" in messages[2] and "Header: when, how_long, cards" in messages[2]
    with pytest.raises(InputError, match="header has no column 'nope'"):
        csv_workload("submit,duration,gpus\n0,1,1\n", CsvOptions(columns={"gpus": "nope"}))


def test_cpu_only_rows_are_refused_with_the_way_out_or_skipped_and_counted() -> None:
    text = "submit,duration,gpus\n0,10,1\n5,10,0\n9,10,0\n12,10,2\n"
    with pytest.raises(InputError) as error:
        csv_workload(text, source="t.csv")
    problems = [(p.path, p.message) for p in error.value.problems]
    assert [path for path, _ in problems] == ["line 3, column 'gpus'", "line 4, column 'gpus'"]
    assert all("without GPUs" in m and "--skip-zero-gpus" in m for _, m in problems)
    wl = csv_workload(text, CsvOptions(skip_zero_gpus=True))
    assert [(j.arrival, j.gpus()) for j in wl.jobs] == [(0.0, 1), (12.0, 2)]
    assert [j.name for j in wl.jobs] == ["job-00000", "job-00001"]
    assert "left out 2 rows of 0 GPUs (CPU-only jobs; --skip-zero-gpus)" in wl.assumptions
    # a fraction or a negative count is still a bad cell, skipped or not
    with pytest.raises(InputError, match="a whole number >= 1, got '-1'"):
        csv_workload("submit,duration,gpus\n0,10,-1\n", CsvOptions(skip_zero_gpus=True))


def test_formats_are_detected_and_a_wrong_file_says_what_was_expected() -> None:
    assert detect_format(["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]) == "philly"
    assert detect_format(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"]) == "openb"
    assert detect_format(["submit", "duration", "gpus"]) == "csv"
    philly = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,aaa\n"
    wl, fmt = trace_workload(philly)
    assert fmt == "philly" and wl.jobs[0].queue == "aaa"
    expected = "not in the philly format \\(no column timestamp, num_gpus, cluster\\); expected the Pollux extract"
    with pytest.raises(InputError, match=expected):
        trace_workload("submit,duration,gpus\n0,1,1\n", "philly")
    with pytest.raises(InputError, match="this is JSON, not a CSV"):
        trace_workload('{"jobs": []}')


def test_window_scale_and_seeded_deadlines() -> None:
    text = "submit,duration,gpus\n" + "".join(f"{i * 600},{300 + i},1\n" for i in range(10))
    wl = csv_workload(text)
    cut = window(wl, parse_seconds("1h"), parse_seconds("1.5h"))
    assert [j.arrival for j in cut.jobs] == [0.0, 600.0, 1200.0]  # submitted at 3600, 4200, 4800
    assert [j.duration for j in cut.jobs] == [306, 307, 308]
    fast = scale_load(wl, 2.0)
    assert [j.arrival for j in fast.jobs] == [i * 300.0 for i in range(10)]
    assert scale_load(wl, 1.0) is wl
    some = assign_deadlines(wl, 0.5, (0.5, 1.0), seed=3)
    again = assign_deadlines(wl, 0.5, (0.5, 1.0), seed=3)
    assert some == again
    dated = [j for j in some.jobs if j.deadline is not None]
    assert 0 < len(dated) < 10 and all(j.deadline_kind == "completion" for j in dated)
    assert all(j.arrival + 1.5 * j.duration <= j.deadline <= j.arrival + 2 * j.duration for j in dated)
    assert len([j for j in assign_deadlines(wl, 1.0, (0, 0)).jobs if j.deadline is not None]) == 10
    with pytest.raises(ValueError):
        parse_seconds("soon")


PAI_TASKS = """\
j1,worker,4,Terminated,1000,4600,600,29.3,100,V100
j1,ps,1,Terminated,1000,4600,800,40,,
j2,worker,2,Failed,1600,1700,400,10,50,MISC
j3,worker,1,Running,1700,,100,5,100,T4
j4,evaluator,1,Terminated,2000,1500,100,1,25,T4
"""
"""pai_task_table rows as published (no header): j1 a PS + 4 workers gang, j2 shares GPUs,
j3 is still running (left out), j4 ends before it starts (kept at 1 s)."""


def test_pai_task_table_as_published_becomes_one_gang_per_job() -> None:
    wl, fmt = trace_workload(PAI_TASKS, "pai")
    assert fmt == "pai"
    assert [j.name for j in wl.jobs] == ["j1", "j2", "j4"]
    j1 = wl.jobs[0]
    assert j1.arrival == 0.0 and j1.duration == 3600.0
    assert [(r.name, r.replicas) for r in j1.roles] == [("ps", 1), ("worker", 4)]
    ps, worker = j1.roles
    assert "gpu" not in ps.requests and ps.requests["cpu"] == 8000
    assert worker.requests["gpu"] == 1000 and worker.requests["cpu"] == 6000
    assert worker.node_affinity[0].values == ["V100"]
    j2 = wl.jobs[1]
    assert j2.arrival == 600.0 and j2.roles[0].requests["gpu"] == 500 and not j2.roles[0].node_affinity
    assert wl.jobs[2].duration == 1.0
    assert any("inst_num" in a for a in wl.assumptions)
    # with the documented header it is found without --format
    header = "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
    assert trace_workload(header + PAI_TASKS)[1] == "pai"
    with pytest.raises(InputError, match="not in the pai format"):
        trace_workload("submit,duration,gpus\n0,1,1\n", "pai")
