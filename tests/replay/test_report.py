"""report.md answers what the text output answers (issue 16): mean JCT, GPU-hours, per-priority waits."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangopt.cli.simulate import table
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.metrics import compute_metrics
from gangopt.replay.policies import make_policy
from gangopt.replay.report import hours, write_simulation_report
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.workload import Job, Workload


def _workload() -> Workload:
    jobs = [
        Job.model_validate(
            {
                "name": f"j{i}",
                "arrival": 100.0 * i,
                "duration": 1_000.0 + 300 * (i % 3),
                "priority": i % 3,
                "queue": "a" if i % 2 else "b",
                "roles": [{"replicas": 1, "requests": {"gpu": 4 + 4 * (i % 2)}}],
            }
        )
        for i in range(12)
    ]
    return Workload(jobs=jobs)


@pytest.mark.parametrize("policy", ["greedy", "fifo_first_fit"])
def test_report_md_has_the_texts_numbers(tmp_path: Path, policy: str) -> None:
    wl = _workload()
    runs = []
    for name in ("greedy", "fifo_first_fit"):
        result = simulate(wl, parametric_cluster(1), make_policy(name, wl), SimConfig(interval=0.0), name=name)
        runs.append((result, compute_metrics(result)))
    text = write_simulation_report(tmp_path, runs, command="test").read_text()
    m = next(m for _, m in runs if m.policy == policy)
    summary = next(line for line in text.splitlines() if line.startswith(f"| {policy} | 1 |"))
    cells = summary.strip("|").split("|")
    header = next(line for line in text.splitlines() if line.startswith("| policy | nodes |")).strip("|").split("|")
    row = dict(zip([h.strip() for h in header], [c.strip() for c in cells], strict=True))
    assert row["JCT mean"] == hours(m.jct.mean) and row["GPU-h lost"] == f"{m.lost_gpu_hours:.1f}"
    assert row["util"] == f"{m.utilization_window:.1%}" and row["GPU-h delivered"] == f"{m.gpu_hours_delivered:.0f}"
    # every per-priority (and, with two queues, per-queue) row of the text output is in the report
    printed = table(m)
    groups = [
        *((f"priority {p}", s) for p, s in m.queueing_delay_by_priority.items()),
        *((f"queue {q}", s) for q, s in m.queueing_delay_by_queue.items()),
        *((f"jobs of {g} GPUs", s) for g, s in m.queueing_delay_by_gpus.items()),
    ]
    assert [label for label, _ in groups][-2:] == ["jobs of 2-4 GPUs", "jobs of 5-8 GPUs"]
    for label, s in groups:
        assert f"{label:<22}{s.count:>7}{hours(s.mean):>9}" in printed
        assert f"| {policy} | {label} | {s.count} | {hours(s.mean)} | {hours(s.p50)} | {hours(s.p95)} |" in text
    # the window is the trace's span for both policies: the last arrival (1,100 s) plus its 1,600 s run
    assert {m.window_end for _, m in runs} == {2_700.0}
    assert "the same for every policy" in text
