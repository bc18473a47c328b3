"""report.md and report.html answer what the text output answers (issue 16): mean JCT, GPU-hours,
per-priority waits; the HTML page embeds the plots and renders in a browser."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
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
    # the JCT row of the text (jobs, mean, p50, p95, p99, max), every cell of it in the report
    jct = m.jct
    assert f"{'JCT (finished)':<22}{jct.count:>7}{hours(jct.mean):>9}{hours(jct.p50):>9}" in printed
    tables = [line for line in text.splitlines() if line.startswith(f"| {policy} |")]
    cells = {c.strip() for line in tables for c in line.strip("|").split("|")}
    assert {hours(x) for x in (jct.mean, jct.p50, jct.p95, jct.p99, jct.max)} <= cells
    ended = next(line for line in text.splitlines() if line.startswith("| policy | finished |")).strip("|")
    assert [h.strip() for h in ended.split("|")][12:15] == ["JCT p95", "JCT p99", "JCT max"]
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
    # shared axes span every row: a later policy's longer queue is not cut at the first's
    taller = [TimelinePoint(0.0, 8.0, 30, 8.0, 1), TimelinePoint(3600.0, 16.0, 0, 16.0, 0)]
    timeline_figure([("short", line, 16.0), ("long", taller, 16.0)], tmp_path / "shared.png")
    shared = kept[-1]
    for ax in shared.axes:
        assert ax.get_ylim()[0] == 0
    assert shared.axes[0].get_ylim()[1] >= 30 and shared.axes[2].get_ylim()[1] >= 30
    assert shared.axes[1].get_ylim()[1] >= 16
    assert len(many.axes) == 14 and [ax.get_title(loc="left") for ax in many.axes[::2]] == [f"p{k}" for k in range(7)]
    # two policies are not overlaid either: a row each, one queue line per panel
    assert [ax.get_title(loc="left") for ax in two.axes] == ["p0", "p0", "p1", "p1"]
    assert [len(ax.get_lines()) for ax in two.axes[::2]] == [1, 1]
    assert len(one.axes) == 2 and len(one.axes[0].get_lines()) == 1
    assert (tmp_path / "many.png").stat().st_size > 0


class _Page(HTMLParser):
    """The parts of report.html the tests read: images, tables (cell texts) and headings."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.tables: list[list[list[str]]] = []
        self.headings: list[str] = []
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append({k: v or "" for k, v in attrs})
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("h1", "h2"):
            self._heading = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None
        elif tag in ("h1", "h2") and self._heading is not None:
            self.headings.append("".join(self._heading))
            self._heading = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._heading):
            if part is not None:
                part.append(data)


def _markdown_tables(text: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    previous = ""
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append([c.strip() for c in line.strip().strip("|").split("|")])
        previous = line
    return tables


def _two_runs() -> list[Any]:
    wl = _workload()
    runs = []
    for name in ("greedy", "fifo_first_fit"):
        result = simulate(wl, parametric_cluster(1), make_policy(name, wl), SimConfig(interval=0.0), name=name)
        runs.append((result, compute_metrics(result)))
    return runs


def test_html_report_embeds_the_plots_and_has_the_markdowns_tables(tmp_path: Path) -> None:
    write_simulation_report(tmp_path, _two_runs(), command="gangopt simulate w.json --out r")
    page = _Page()
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    page.feed(text)
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    # every figure of report.md is in the page, embedded: the PNG's own bytes, no file needed
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert figures == ["fairness.png", "timeline.png", "wait_cdf.png"]  # fairness: two queues
    assert [img["data-file"] for img in page.images] == figures
    for img in page.images:
        prefix = "data:image/png;base64,"
        assert img["src"].startswith(prefix)
        assert base64.b64decode(img["src"][len(prefix) :]) == (tmp_path / img["data-file"]).read_bytes()
    # the same tables, cell for cell, and the same headings
    # summary, waits per group, fairness between the workload's two queues, outcomes
    assert page.tables == _markdown_tables(markdown) and len(page.tables) == 4
    assert "Fairness between queues" in markdown
    assert page.tables[0][0][:3] == ["policy", "nodes", "jobs"] and [r[0] for r in page.tables[0][1:]] == [
        "greedy",
        "fifo_first_fit",
    ]
    assert page.headings == [line.lstrip("# ") for line in markdown.splitlines() if line.startswith("#")]
    # Markdown's inline marks became HTML, none is left as text
    assert "<code>gangopt simulate w.json --out r</code>" in text and "<em>util</em>" in text
    assert "**" not in text and "`" not in text


def test_capacity_html_report_has_the_answer_and_its_replay(tmp_path: Path) -> None:
    from gangopt.replay.capacity import Evaluator, size_cluster
    from gangopt.replay.report import write_capacity_report
    from gangopt.replay.sweep import ClusterSpec, NodeType

    wl = _workload()
    ev = Evaluator(
        wl,
        (parse_slo("p95_wait<=10m"),),
        policy="greedy",
        cluster=ClusterSpec((NodeType(),)),
        config=SimConfig(interval=0.0),
        keep_timeline=True,
    )
    sizing = size_cluster(ev, 1, 8)
    assert sizing.nodes is not None
    write_capacity_report(tmp_path, sizing, "desc", {"policy": "greedy"}, command="test")
    page = _Page()
    page.feed((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert [img["data-file"] for img in page.images] == ["slo_vs_size.png", "timeline.png", "wait_cdf.png"]
    assert f"The replay at the answer ({sizing.nodes} nodes)" in page.headings
    sizes, at_answer, _, ended = page.tables
    assert [row[0] for row in sizes[1:]] == [str(v.nodes) for v in sizing.evaluated]
    (outcome,) = next(v for v in sizing.evaluated if v.nodes == sizing.nodes).outcomes
    row = dict(zip(at_answer[0], at_answer[1], strict=True))
    assert row["policy"] == "greedy seed 0" and row["wait p95"] == hours(outcome.metrics.queueing_delay.p95)
    tail = dict(zip(ended[0], ended[1], strict=True))
    assert tail["policy"] == "greedy seed 0" and tail["JCT p99"] == hours(outcome.metrics.jct.p99)
    assert tail["finished"] == str(outcome.metrics.finished)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")

_PROBE = """<script>
window.addEventListener("load", () => {
  const shown = [...document.images].map((i) => i.naturalWidth + "x" + i.naturalHeight + ":" + i.clientWidth);
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify({images: shown, page: document.documentElement.scrollWidth, view: innerWidth});
  document.body.appendChild(out);
});
</script>
</body>"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (the structural test above still runs)")
def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    """The browser decodes every embedded plot at its PNG size, and no table pushes the page
    wider than a 1280-pixel window (the 18-column summary scrolls inside its box)."""
    import matplotlib.image

    write_simulation_report(tmp_path, _two_runs(), command="test")
    probed = tmp_path / "probed.html"
    probed.write_text((tmp_path / "report.html").read_text(encoding="utf-8").replace("</body>", _PROBE))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,2000"]
    dom = subprocess.run(
        [str(CHROMIUM), *flags, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, flags=re.S)
    assert found is not None, dom[-500:]
    probe = json.loads(html.unescape(found.group(1)))
    sizes = []
    for name in ("timeline.png", "wait_cdf.png"):
        pixels = matplotlib.image.imread(tmp_path / name)
        sizes.append(f"{pixels.shape[1]}x{pixels.shape[0]}")
    assert [s.split(":")[0] for s in probe["images"]] == sizes
    assert all(int(s.split(":")[1]) > 0 for s in probe["images"])
    assert probe["page"] <= probe["view"]


def test_sweep_plot_ticks_are_plain_numbers_and_whole_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Waits from seconds to a week on one axis: '10,000', not '1e+04'; nodes 3, 4, 5, 6, not 3.5."""
    from types import SimpleNamespace

    from gangopt.replay.report import sweep_figure

    kept = _figures(monkeypatch)
    p95 = {3: 600_000.0, 4: 4_600.0, 6: 1_800.0}  # seconds: 10,000 min down to 30 min
    outcomes = [
        SimpleNamespace(
            task=SimpleNamespace(policy=policy, nodes=n),
            metrics=SimpleNamespace(queueing_delay=SimpleNamespace(p95=v * (2 if policy == "fifo" else 1))),
        )
        for policy in ("greedy", "fifo", "kueue_like")
        for n, v in p95.items()
    ]
    sweep_figure(outcomes, tmp_path / "sweep.png")  # type: ignore[arg-type]
    (ax,) = kept[0].axes
    low, high = ax.get_ylim()
    ys = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True) if low <= v <= high]
    assert "10,000" in ys and "100" in ys and not any("e" in text for text in ys)
    left, right = ax.get_xlim()
    assert [v for v in ax.get_xticks() if left <= v <= right] == [3, 4, 5, 6]
    assert [line.get_label() for line in ax.get_lines()] == ["greedy = kueue_like", "fifo"]


def test_identical_wait_curves_share_one_line_and_the_legend_sits_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gangopt.replay.report import wait_cdf_figure

    kept = _figures(monkeypatch)
    same = [0.0, 30.0, 600.0, 4_000.0]
    wait_cdf_figure(
        [("greedy", same), ("fifo", [0.0, 3_000.0]), ("kueue_like", list(reversed(same)))], tmp_path / "c.png"
    )
    (ax,) = kept[0].axes
    assert [line.get_label() for line in ax.get_lines()] == ["greedy = kueue_like", "fifo"]
    legend = ax.get_legend()
    kept[0].canvas.draw()
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1  # right of the axes, over no curve
    assert [t.get_text() for t in ax.get_xticklabels()] == ["≤1s", "10s", "1m", "10m", "1h"]
    assert ax.get_xlim()[1] == pytest.approx(4_000 * 1.3)  # just past the longest wait, not out to 6 h
    # seven policies on one curve (a replay where nothing contends): the label wraps, the axes
    # keep most of the figure and the legend stays inside it
    names = ["greedy", "fifo_first_fit", "koordinator_like", "volcano_like", "kueue_like", "slurm_backfill_like"]
    wait_cdf_figure([(name, same) for name in [*names, "gangopt"]], tmp_path / "seven.png")
    figure = kept[1]
    (ax,) = figure.axes
    (line,) = ax.get_lines()
    label = line.get_label()
    assert label.replace(" =\n", " = ") == " = ".join([*names, "gangopt"])
    assert max(len(part) for part in label.splitlines()) <= 28
    figure.canvas.draw()
    width = figure.bbox.width
    assert ax.get_legend().get_window_extent().x1 <= width and ax.get_window_extent().width >= width / 2
