"""report.md answers what the text output answers (issue 16): mean JCT, GPU-hours, per-priority waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gangopt.cli.simulate import table
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.metrics import compute_metrics, size_label
from gangopt.replay.policies import make_policy
from gangopt.replay.report import hours, slo_size_figure, timeline_figure, write_simulation_report
from gangopt.replay.simulation import SimConfig, TimelinePoint, simulate
from gangopt.replay.slo import parse_slo
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
        *((f"jobs of {size_label(g)} GPUs", s) for g, s in sorted(m.queueing_delay_by_size.items())),
    ]
    assert [label for label, _ in groups][-2:] == ["jobs of 3-4 GPUs", "jobs of 5-8 GPUs"]
    for label, s in groups:
        assert f"{label:<22}{s.count:>7}{hours(s.mean):>9}" in printed
        assert f"| {policy} | {label} | {s.count} | {hours(s.mean)} | {hours(s.p50)} | {hours(s.p95)} |" in text
    # the window is the trace's span for both policies: the last arrival (1,100 s) plus its 1,600 s run
    assert {m.window_end for _, m in runs} == {2_700.0}
    assert "the same for every policy" in text


def _figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Keep the figures the report functions close, to look at their axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", kept.append)
    return kept


def test_log_axes_of_slo_plots_start_at_zero_without_negative_ticks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = _figures(monkeypatch)
    slo = parse_slo("p95_wait<=30m")
    points = [(n, [(60.0 * 2 ** (10 - n),)]) for n in range(1, 11)]  # 512 min down to 1 min: symlog
    slo_size_figure(points, [slo], tmp_path / "slo.png", answer=6)
    (ax,) = kept[0].axes
    assert ax.get_yscale() == "symlog" and ax.get_ylim()[0] == 0
    low, high = ax.get_ylim()
    labels = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True) if low <= v <= high]
    assert labels and not any(text.startswith(("-", "−")) for text in labels)
    assert "0" in labels and "100" in labels  # plain numbers, not 10^2


def test_several_policies_get_one_row_of_panels_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _figures(monkeypatch)
    line = [TimelinePoint(0.0, 8.0, 1, 8.0, 1), TimelinePoint(3600.0, 0.0, 0, 0.0, 0)]
    timeline_figure([(f"p{k}", line, 16.0) for k in range(7)], tmp_path / "many.png")
    timeline_figure([(f"p{k}", line, 16.0) for k in range(2)], tmp_path / "two.png")
    timeline_figure([("p0", line, 16.0)], tmp_path / "one.png")
    many, two, one = kept
    assert len(many.axes) == 14 and [ax.get_title(loc="left") for ax in many.axes[::2]] == [f"p{k}" for k in range(7)]
    # two policies are not overlaid either: a row each, one queue line per panel
    assert [ax.get_title(loc="left") for ax in two.axes] == ["p0", "p0", "p1", "p1"]
    assert [len(ax.get_lines()) for ax in two.axes[::2]] == [1, 1]
    assert len(one.axes) == 2 and len(one.axes[0].get_lines()) == 1
    assert (tmp_path / "many.png").stat().st_size > 0
