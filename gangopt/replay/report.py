"""Report folders for ``gangopt simulate``, ``gangopt sweep`` and ``gangopt capacity``.

Each writes, into one folder:

* data: ``metrics.json`` / ``metrics.csv`` and the per-job, per-round and timeline CSVs of
  :func:`gangopt.replay.metrics.write_report` (one sub-folder per policy when several ran),
  ``sweep.csv`` (one row per simulation) or ``capacity.json`` / ``sizes.csv``;
* plots (PNG, matplotlib's Agg backend, no display needed): ``timeline.png`` (queue length and
  GPUs allocated over time), ``wait_cdf.png`` (queueing-delay CDF per policy),
  ``slo_vs_size.png`` (each SLO's value against the cluster size);
* ``report.md``: the command, the summary table, the figures and what each number means;
* ``report.html``: the same report as one self-contained page, the plots embedded (base64 PNG),
  to open in a browser or attach to a ticket (:class:`Report` writes both from one list of
  blocks, so they cannot say different things).
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import shlex
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gangopt.replay.fairness import jain_series
from gangopt.replay.metrics import Metrics, size_label, write_report
from gangopt.replay.simulation import SimulationResult, TimelinePoint
from gangopt.replay.slo import SLO, format_value, wait
from gangopt.replay.sweep import Outcome, sweep_rows, thin_timeline

if TYPE_CHECKING:
    from gangopt.replay.capacity import CompactionResult, InflationResult, SizingResult

DPI = 80
"""Small PNGs (about 50 KB each): enough to read, cheap to commit."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def command_line() -> str:
    """The command that is running, for the report's provenance line."""
    args = sys.argv[1:]
    return "gangopt " + " ".join(shlex.quote(a) for a in args) if args else "(library call)"


def hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


# ----------------------------------------------------------------------------- documents

HTML_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1400px; margin: 2em auto;
       padding: 0 1.2em; color: #1b1b1b; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 2px solid #ddd; padding-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #e5e5e5; padding-bottom: .15em; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; font-size: .92em; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; margin: .6em 0 1em; }
table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d6d6d6; padding: .2em .45em; white-space: nowrap; }
th { background: #f0f3f7; white-space: normal; vertical-align: bottom; min-width: 3.5em; }
td.num { text-align: right; }
tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e5e5e5; }
figcaption { font-size: .85em; color: #555; }
p.note { font-size: .9em; color: #333; }
"""
"""The HTML report's look: tables scroll sideways instead of squeezing 18 columns, numbers
right-aligned, plots at most the page's width (checked by eye in headless Chromium)."""

_NUMERIC = re.compile(r"^[-+]?[\d.]+(?:[%smhd]|/\d+)?(?: \(\d+/\d+\))?$")


def _inline_html(text: str) -> str:
    """The Markdown inline markup the reports use (`code`, **bold**, *italic*) as HTML."""
    parts = re.split(r"(`[^`]*`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        escaped = html.escape(part)
        escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
        escaped = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", escaped)
        out.append(escaped)
    return "".join(out)


@dataclass
class Report:
    """A report as a list of blocks (headings, paragraphs, tables, figures, bullet lists),
    written as ``report.md`` and as ``report.html`` from the same blocks. The HTML page is
    self-contained: each figure is embedded as a base64 PNG (about 50 KB each at :data:`DPI`),
    so the page survives being mailed or attached without its folder."""

    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def heading(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def para(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.blocks.append(("table", (list(header), [list(r) for r in rows])))

    def figure(self, file: str, alt: str) -> None:
        self.blocks.append(("figure", (file, alt)))

    def bullets(self, items: Sequence[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def markdown(self) -> str:
        lines = [f"# {self.title}", ""]
        for kind, value in self.blocks:
            if kind == "h2":
                lines += [f"## {value}", ""]
            elif kind == "p":
                lines += [value, ""]
            elif kind == "table":
                lines += [_table(value[0], value[1], markdown=True)]
            elif kind == "figure":
                lines += [f"![{value[1]}]({value[0]})", ""]
            elif kind == "ul":
                lines += [*(f"- {item}" for item in value), ""]
        return "\n".join(lines)

    def html(self, folder: Path) -> str:
        """The page; figures are read from ``folder`` and embedded."""
        body = [f"<h1>{_inline_html(self.title)}</h1>"]
        for kind, value in self.blocks:
            if kind == "h2":
                body.append(f"<h2>{_inline_html(value)}</h2>")
            elif kind == "p":
                body.append(f"<p>{_inline_html(value)}</p>")
            elif kind == "table":
                header, rows = value
                head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
                cells = [
                    "".join(
                        f'<td class="num">{html.escape(c)}</td>' if _NUMERIC.match(c) else f"<td>{html.escape(c)}</td>"
                        for c in row
                    )
                    for row in rows
                ]
                trs = "\n".join(f"<tr>{c}</tr>" for c in cells)
                table = f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{trs}\n</tbody></table>"
                body.append(f'<div class="scroll">{table}</div>')
            elif kind == "figure":
                file, alt = value
                data = base64.b64encode((folder / file).read_bytes()).decode("ascii")
                body.append(
                    f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" '
                    f'data-file="{html.escape(file)}"><figcaption>{html.escape(alt)} '
                    f"(<code>{html.escape(file)}</code>)</figcaption></figure>"
                )
            elif kind == "ul":
                items = "".join(f"<li>{_inline_html(item)}</li>" for item in value)
                body.append(f"<ul>{items}</ul>")
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(self.title)}</title>\n<style>{HTML_STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body)
            + "\n</body>\n</html>\n"
        )

    def write(self, folder: Path) -> Path:
        """``report.md`` and ``report.html`` in ``folder`` (its figures written already);
        returns the Markdown's path."""
        (folder / "report.md").write_text(self.markdown(), encoding="utf-8")
        (folder / "report.html").write_text(self.html(folder), encoding="utf-8")
        return folder / "report.md"


# ----------------------------------------------------------------------------- figures


SMALL_MULTIPLES = 1
"""More series than this: one row of panels per series instead of overlaid lines. Seven
overlaid policies were hard to tell apart (issue 16), and so were three: in the HTML report of
a 300-job Philly replay, the queue spikes of greedy, gangopt and FIFO drew over each other."""

TIME_TICKS = (
    (1.0, "≤1s"),
    (10.0, "10s"),
    (60.0, "1m"),
    (600.0, "10m"),
    (3600.0, "1h"),
    (6 * 3600.0, "6h"),
    (86400.0, "1d"),
    (7 * 86400.0, "1w"),
    (30 * 86400.0, "30d"),
)
"""Ticks of the wait CDF's log axis, in words (a wait of 0 plots at 1 s). Powers of ten in
seconds had to be converted in the head, and the grey '30m'/'1h' marks beside them overlapped."""


def timeline_figure(series: Sequence[tuple[str, Sequence[TimelinePoint], float]], path: Path) -> Path:
    """Queue length (jobs waiting) and GPUs allocated over time; ``series`` = (label, timeline,
    GPUs in the cluster). Times in hours since the first point of each series. One series gets
    two panels; several get a row each (small multiples: shared axes, so rows compare at a
    glance, the label as each row's title)."""
    plt = _pyplot()
    drawn = [item for item in series if item[1]]
    multiples = len(drawn) > SMALL_MULTIPLES
    rows = len(drawn) if multiples else 1
    if multiples:
        fig, axes = plt.subplots(rows, 2, figsize=(10, 1.6 * rows + 0.9), sharex=True, sharey="col", squeeze=False)
    else:
        fig, column = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
        axes = [[column[0], column[1]]]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, timeline, total) in enumerate(drawn):
        top, bottom = axes[k] if multiples else axes[0]
        t0 = timeline[0].time
        x = [(p.time - t0) / 3600 for p in timeline]
        color = colors[k % len(colors)]
        top.step(x, [p.pending for p in timeline], where="post", label=label, linewidth=0.8, color=color)
        bottom.step(x, [p.gpus_allocated for p in timeline], where="post", label=label, linewidth=0.8, color=color)
        bottom.axhline(total, color="grey", linewidth=0.6, linestyle=":")
        if multiples:
            top.set_title(label, loc="left", fontsize=9, fontweight="bold")
            bottom.set_title(label, loc="left", fontsize=9, fontweight="bold")
            top.set_ylabel("jobs waiting", fontsize=8)
            bottom.set_ylabel("GPUs allocated", fontsize=8)
            for ax in (top, bottom):
                ax.tick_params(labelsize=8)
    if multiples:
        # once every row is drawn: the shared limits then span every row's data (set inside the
        # loop, they froze at the first row's, and later rows ran off the top of their panels)
        for ax in axes[0]:
            ax.set_ylim(bottom=0)
    for row in axes:
        row[0].yaxis.get_major_locator().set_params(integer=True)  # whole jobs, not 0.5
        for ax in row:
            ax.grid(alpha=0.3)
    if multiples:
        axes[0][1].set_title("dotted: the cluster's GPUs", loc="right", fontsize=8, color="grey")
        for ax in axes[-1]:
            ax.set_xlabel("hours since the first arrival", fontsize=9)
    else:
        top, bottom = axes[0]
        top.set_ylabel("jobs waiting")
        bottom.set_ylabel("GPUs allocated")
        bottom.set_xlabel("hours since the first arrival")
        top.set_title(drawn[0][0] if drawn else "", loc="left", fontsize=9, fontweight="bold")
        bottom.set_title("dotted: the cluster's GPUs", loc="right", fontsize=8, color="grey")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _save_with_legend_outside(plt: Any, fig: Any, ax: Any, path: Path) -> Path:
    """Grid, the legend to the right of the axes, and the PNG at ``path`` (the line figures'
    shared ending)."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def wait_cdf_figure(series: Sequence[tuple[str, Sequence[float]]], path: Path) -> Path:
    """Empirical CDF of queueing delay per label (log time axis labelled in words, see
    :data:`TIME_TICKS`; a wait of 0 plots at 1 s). Labels with the very same waits share one
    line, named 'a = b = c': in a six-policy Philly replay three policies' curves were
    identical and only the last one drawn showed. The legend sits right of the axes, where it
    covers no curve (inside, lower right, it hid the waits between 10 min and 1 h)."""
    plt = _pyplot()
    groups: dict[tuple[float, ...], list[str]] = {}
    for label, waits in series:
        if len(waits):
            key = tuple(np.sort(np.maximum(np.asarray(waits, dtype=float), 1.0)).tolist())
            groups.setdefault(key, []).append(label)
    fig, ax = plt.subplots(figsize=(8.6, 4))
    longest = 1.0
    for values, labels in groups.items():
        x = np.asarray(values)
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(x, y, where="post", label=_shared_label(labels), linewidth=1.0)
        longest = max(longest, float(x[-1]))
    ax.set_xscale("log")
    ticks = [(t, name) for t, name in TIME_TICKS if t <= longest * 1.5] or [TIME_TICKS[0]]
    from matplotlib.ticker import NullLocator

    ax.set_xticks([t for t, _ in ticks], [name for _, name in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(0.8, max(ticks[-1][0] * 1.25, longest * 1.3))  # not out to the next tick: 1.2 h of waits drew to 6 h
    ax.set_xlabel("queueing delay (log scale; unstarted jobs censored at the end)")
    ax.set_ylabel("share of jobs")
    ax.set_ylim(0, 1.01)
    return _save_with_legend_outside(plt, fig, ax, path)


def fairness_figure(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], path: Path) -> Path:
    """Jain's index over the queues per hour, one line per policy (``series`` = (label,
    :func:`~gangopt.replay.fairness.jain_series`)); hours since the first point."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for label, points in series:
        if not points:
            continue
        t0 = points[0][0]
        ax.plot([(t - t0) / 3600 for t, _ in points], [v for _, v in points], label=label, linewidth=0.9)
    ax.set_xlabel("hours since the first arrival")
    ax.set_ylabel("Jain's index (held / deserved)")
    ax.set_ylim(0, 1.02)
    return _save_with_legend_outside(plt, fig, ax, path)


LEGEND_WIDTH = 28
"""Characters per line of a shared curve's legend label ('a = b = c', wrapped). Unwrapped, the
seven policies of a small Philly replay on its own 64 nodes (all identical) made one 90-character
label that squeezed the axes to a fifth of the figure and ran off its right edge."""


def _shared_label(labels: Sequence[str]) -> str:
    """'a = b = c' for labels sharing one curve, wrapped at :data:`LEGEND_WIDTH` characters."""
    lines = [labels[0]]
    for label in labels[1:]:
        if len(lines[-1]) + 3 + len(label) <= LEGEND_WIDTH:
            lines[-1] += f" = {label}"
        else:
            lines[-1] += " ="
            lines.append(label)
    return "\n".join(lines)


def slo_size_figure(
    points: Sequence[tuple[int, Sequence[Sequence[float]]]], slos: Sequence[SLO], path: Path, answer: int | None = None
) -> Path:
    """One panel per SLO: its value at each evaluated size (a dot per seed, a line through the
    worst deciding value), the bound as a dashed line, the answer as a vertical line."""
    plt = _pyplot()
    n = max(1, len(slos))
    fig, axes = plt.subplots(1, n, figsize=(max(6.0, 4.6 * n), 3.8), squeeze=False)
    for i, slo in enumerate(slos):
        ax = axes[0][i]
        scale, unit = (60.0, "min") if slo.what in ("wait", "jct") else (1.0, "")
        xs: list[int] = []
        worst: list[float] = []
        for nodes, per_seed in sorted(points, key=lambda p: p[0]):
            values = [seed_values[i] for seed_values in per_seed]
            ax.scatter([nodes] * len(values), [v / scale for v in values], s=10, color="tab:blue", alpha=0.6)
            xs.append(nodes)
            worst.append((min(values) if slo.op in (">=", ">") else max(values)) / scale)
        ax.plot(xs, worst, color="tab:blue", linewidth=0.8)
        ax.axhline(slo.threshold / scale, color="tab:red", linestyle="--", linewidth=0.8, label="bound")
        if answer is not None:
            ax.axvline(answer, color="tab:green", linewidth=0.8, label=f"answer: {answer}")
        if slo.what in ("wait", "jct") and worst and max(worst) > 0 and max(worst) / max(min(worst), 1e-3) > 50:
            _symlog_from_zero(ax, max(slo.threshold / scale, 1e-3), max(worst))
        elif min(worst, default=0.0) >= 0 and slo.threshold >= 0:
            ax.set_ylim(bottom=0)
        ax.set_title(slo.text, fontsize=9)
        ax.set_xlabel("nodes")
        ax.set_ylabel(f"{slo.label} ({unit})" if unit else slo.label)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _symlog_from_zero(ax: Any, linthresh: float, top: float) -> None:
    """A symlog axis for non-negative values up to ``top``: linear up to ``linthresh``,
    logarithmic above, starting at 0 (symlog's default margins showed ticks like -10^1 below
    zero, issue 16), ticks as plain numbers and no minor ticks. The ticks are 0, a round number
    or two below ``linthresh``, ``linthresh`` (the SLO's bound, where the plot has one) and
    round numbers above it (1-2-5, or powers of
    ten when those are more than five): matplotlib's own locator put only '0' and '10' on a
    0-86 min axis with a 30 min bound, so no value above the bound could be read."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    upper = max(top, linthresh) * 1.6
    ax.set_yscale("symlog", linthresh=linthresh)
    ax.set_ylim(0, upper)
    decades = range(math.floor(math.log10(linthresh)) - 1, math.ceil(math.log10(upper)) + 1)
    nice = [m * 10.0**k for k in decades for m in (1, 2, 5)]
    above = [v for v in nice if linthresh * 1.4 <= v <= upper]
    if len(above) > 5:
        above = [v for v in above if abs(math.log10(v) - round(math.log10(v))) < 1e-9]
    below = [v for v in nice if linthresh * 0.3 <= v <= linthresh * 0.75][-2:]  # the linear part
    ax.yaxis.set_major_locator(FixedLocator([0.0, *below, linthresh, *above]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _plain(value)))


def _plain(value: float) -> str:
    """A tick as a plain number: '10,000', not '1e+04' (the sweep's waits span 0.5 to 10,000 min)."""
    if value < 0:
        return ""
    return f"{value:,.0f}" if value >= 1 else f"{value:.2g}"


def sweep_figure(outcomes: Sequence[Outcome], path: Path, stat: str = "p95") -> Path:
    """Queueing delay (the ``stat`` percentile, median over seeds) against nodes, per policy;
    policies with the very same values share a line named 'a = b', legend right of the axes
    (as :func:`wait_cdf_figure`)."""
    plt = _pyplot()
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        by[o.task.policy][o.task.nodes].append(float(getattr(o.metrics.queueing_delay, stat)))
    lines: dict[tuple[tuple[int, float], ...], list[str]] = {}
    for policy, sizes in by.items():
        key = tuple((x, float(np.median(sizes[x])) / 60) for x in sorted(sizes))
        lines.setdefault(key, []).append(policy)
    fig, ax = plt.subplots(figsize=(7.6, 4))
    for points, policies in lines.items():
        ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=" = ".join(policies), linewidth=1.0)
    _symlog_from_zero(ax, 1.0, max((y for points in lines for _, y in points), default=1.0))
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"{stat} queueing delay (min, median over seeds)")
    return _save_with_legend_outside(plt, fig, ax, path)


# ----------------------------------------------------------------------------- tables


def comparison_table(metrics: Sequence[Metrics], markdown: bool = False) -> str:
    """One row per run: waits, JCT, utilization over the common window (the trace's span, the
    same for every policy), GPU-hours delivered, idle-but-needed, preemptions and GPU-hours
    they lost, deadline misses, solver time."""
    return _table(*comparison_rows(metrics), markdown)


def comparison_rows(metrics: Sequence[Metrics]) -> tuple[list[str], list[list[str]]]:
    """:func:`comparison_table`'s header and rows."""
    header = [
        "policy",
        "nodes",
        "jobs",
        "unstarted",
        "wait mean",
        "wait p50",
        "wait p95",
        "wait p99",
        "JCT mean",
        "JCT p50",
        "util",
        "GPU-h delivered",
        "idle-needed GPU-h",
        "preempt",
        "GPU-h lost",
        "deadline miss",
        "solver s",
        "wall s",
        "CPU s",
    ]
    rows = [
        [
            m.policy,
            str(m.nodes),
            str(m.arrived),
            str(m.unstarted),
            hours(m.queueing_delay.mean),
            hours(m.queueing_delay.p50),
            hours(m.queueing_delay.p95),
            hours(m.queueing_delay.p99),
            hours(m.jct.mean),
            hours(m.jct.p50),
            f"{m.utilization_window:.1%}",
            f"{m.gpu_hours_delivered:.0f}",
            f"{m.idle_needed_gpu_hours:.0f}",
            str(m.preemptions),
            f"{m.lost_gpu_hours:.1f}",
            f"{m.deadline_misses}/{m.deadlines}",
            f"{m.solver_seconds_total:.1f}",
            f"{m.wall_seconds:.1f}",
            f"{m.cpu_seconds:.1f}",
        ]
        for m in metrics
    ]
    return header, rows


def priority_table(metrics: Sequence[Metrics], markdown: bool = False) -> str:
    """Queueing delay per priority, per queue (when there are several) and per job size, one
    row per policy and group: the per-group rows ``gangopt simulate`` prints, side by side."""
    return _table(*priority_rows(metrics), markdown)


def priority_rows(metrics: Sequence[Metrics]) -> tuple[list[str], list[list[str]]]:
    """:func:`priority_table`'s header and rows."""
    header = ["policy", "jobs of", "jobs", "wait mean", "wait p50", "wait p95", "wait p99", "wait max"]
    rows = []
    for m in metrics:
        groups = [(f"priority {p}", s) for p, s in m.queueing_delay_by_priority.items()]
        if len(m.queueing_delay_by_queue) > 1:
            groups += [(f"queue {q}", s) for q, s in m.queueing_delay_by_queue.items()]
        groups += [(f"jobs of {size_label(size)} GPUs", s) for size, s in sorted(m.queueing_delay_by_size.items())]
        for label, q in groups:
            rows.append(
                [m.policy, label, str(q.count), hours(q.mean), hours(q.p50), hours(q.p95), hours(q.p99), hours(q.max)]
            )
    return header, rows


def outcome_rows(metrics: Sequence[Metrics]) -> tuple[list[str], list[list[str]]]:
    """Per run, the lines of ``gangopt simulate``'s text the summary table has no column for:
    where the jobs ended, utilisation over the run's own span, GPU-hours allocated, GPUs idle
    while jobs waited, jobs preempted, completion deadlines, the JCT's tail and the solver's
    time per round."""
    header = [
        "policy",
        "finished",
        "running at end",
        "pending at end",
        "not arrived",
        "simulated",
        "rounds",
        "util (own span)",
        "GPU-h allocated",
        "idle while waiting GPU-h",
        "jobs preempted",
        "completion deadlines",
        "JCT p95",
        "JCT p99",
        "JCT max",
        "solver ms/round mean",
        "p95",
        "max",
    ]
    rows = [
        [
            m.policy,
            str(m.finished),
            str(m.running_at_end),
            str(m.pending_at_end),
            str(m.not_arrived),
            hours(m.end_time - m.start_time),
            str(m.rounds),
            f"{m.utilization_mean:.1%}",
            f"{m.gpu_hours_allocated:.0f}",
            f"{m.idle_while_waiting_gpu_hours:.0f}",
            str(m.jobs_preempted),
            str(m.completion_deadlines),
            hours(m.jct.p95),
            hours(m.jct.p99),
            hours(m.jct.max),
            f"{m.solver_seconds.mean * 1000:.1f}",
            f"{m.solver_seconds.p95 * 1000:.1f}",
            f"{m.solver_seconds.max * 1000:.1f}",
        ]
        for m in metrics
    ]
    return header, rows


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    out += [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows
    ]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- simulate


def fairness_rows(metrics: Sequence[Metrics]) -> tuple[list[str], list[list[str]]]:
    """Per policy and queue: share of deserved GPUs and starved hours; per policy Jain's index
    (the metrics of replays with several queues)."""
    header = ["policy", "queue", "demand h", "deserved GPU-h", "held GPU-h", "share", "starved h", "Jain (contended)"]
    rows = []
    for m in metrics:
        if m.fairness is None:
            continue
        f = m.fairness
        jain = f"{f.jain_index:.3f} ({f.jain_index_contended:.3f})"
        for q, s in f.queues.items():
            rows.append(
                [
                    m.policy,
                    q,
                    f"{s.demand_hours:.1f}",
                    f"{s.deserved_gpu_hours:.1f}",
                    f"{s.allocated_gpu_hours:.1f}",
                    f"{s.share_of_deserved:.2f}",
                    f"{s.starved_hours:.1f}",
                    jain,
                ]
            )
    return header, rows


def write_simulation_report(
    folder: str | Path, runs: Sequence[tuple[SimulationResult, Metrics]], command: str | None = None
) -> Path:
    """Report folder for one or more replays of the same workload (one per policy)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    if len(runs) == 1:
        write_report(runs[0][0], runs[0][1], out)
    else:
        for result, metrics in runs:
            write_report(result, metrics, out / result.policy)
    series = [(r.policy, thin_timeline(r.timeline), r.gpus_total) for r, _ in runs]
    timeline_figure(series, out / "timeline.png")
    waits = [(r.policy, [wait(j, r.end_time) for j in r.jobs if j.state != "not_arrived"]) for r, _ in runs]
    wait_cdf_figure(waits, out / "wait_cdf.png")
    all_metrics = [m for _, m in runs]
    first = runs[0][0]
    where = f"{first.nodes} nodes, {first.gpus_total:g} GPUs" if runs else ""
    config = first.config
    window = max(m.window_end - m.start_time for m in all_metrics) if all_metrics else 0.0
    data = "metrics.json, metrics.csv, jobs.csv, rounds.csv, timeline.csv"
    doc = Report("Simulation report")
    doc.para(f"Command: `{command or command_line()}`")
    doc.para(
        f"Cluster: {where}. Rounds at most every {config.interval:g} s; checkpoints every "
        f"{config.checkpoint_interval:g} s; CP-SAT time limit {config.time_limit:g} s per round; "
        f"preemption {'on' if config.preemption else 'off'}."
    )
    doc.heading("Summary")
    doc.table(*comparison_rows(all_metrics))
    doc.para(
        "Waits are first start minus arrival; a job that never started counts with its wait up to the end "
        "(censored). JCT (job completion time) is finish minus arrival, over finished jobs. *util*: GPUs "
        f"allocated over the common window, the trace's span ({hours(window)} from the first arrival: when "
        "the last job would finish if every job started on arrival), the same for every policy, so a policy "
        "with a shorter makespan does not look better packed. *GPU-h delivered*: GPU-hours allocated minus "
        "those preemptions rolled back (*GPU-h lost*). *idle-needed*: GPU-hours that sat free while waiting "
        "jobs needed them (fragmentation or head-of-line blocking). Deadlines: a start deadline is missed by "
        "starting after it, a completion deadline by finishing after it. Definitions: "
        "`gangopt/replay/metrics.py`."
    )
    doc.heading("Queueing delay per priority, queue and job size")
    doc.table(*priority_rows(all_metrics))
    fair = [m for m in all_metrics if m.fairness is not None]
    if fair:
        doc.heading("Fairness between queues")
        doc.table(*fairness_rows(fair))
        jains = [
            (r.policy, jain_series(r.queue_timeline, r.end_time, r.gpus_total, r.config.queues)) for r, _ in runs
        ]
        fairness_figure(jains, out / "fairness.png")
        doc.para(
            "*deserved*: per instant, each queue's nominal GPU quota capped at its demand (GPUs held plus "
            "what its waiting jobs need), then the rest of the cluster by weighted max-min fairness; *share*: "
            "GPU-hours held over GPU-hours deserved while it had demand; *starved*: hours below half its "
            "deserved GPUs; *Jain*: Jain's index of held / deserved over the queues, time-weighted, over all "
            "shared time and over the contended time (demand above the cluster). Definitions: "
            "`gangopt/replay/fairness.py`."
        )
        doc.figure("fairness.png", "Jain's index per hour")
    doc.heading("Queue and allocation over time")
    doc.figure("timeline.png", "timeline")
    doc.heading("Queueing delay, CDF per policy")
    doc.figure("wait_cdf.png", "wait CDF")
    doc.heading("Where the jobs ended, utilisation over each run's own span, solver time")
    doc.table(*outcome_rows(all_metrics))
    doc.para(
        "*util (own span)*: GPUs allocated over the run's own span (first arrival to its last event), which "
        "flatters a policy with a shorter makespan; compare policies by *util* above. *idle while waiting*: "
        "GPU-hours free while any job waited (needed or not; *idle-needed* above counts those a waiting job "
        "could use). *jobs preempted*: jobs evicted at least once (the summary's *preempt* counts evictions)."
    )
    doc.heading("Data")
    doc.para(f"{data} in this folder." if len(runs) == 1 else f"Per policy, in a sub-folder named after it: {data}.")
    return doc.write(out)


# ----------------------------------------------------------------------------- sweep


def _csv_text(rows: Sequence[dict[str, Any]]) -> str:
    import csv
    import io

    if not rows:
        return ""
    buffer = io.StringIO()
    keys = list(dict.fromkeys(k for r in rows for k in r))
    writer = csv.DictWriter(buffer, keys, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def sweep_table(outcomes: Sequence[Outcome], markdown: bool = False) -> str:
    """Per policy and size: median over seeds of the wait percentiles, utilization over the
    common window (the trace's span, the same for every policy and size), wall time."""
    return _table(*sweep_rows_table(outcomes), markdown)


def sweep_rows_table(outcomes: Sequence[Outcome]) -> tuple[list[str], list[list[str]]]:
    """:func:`sweep_table`'s header and rows."""
    groups: dict[tuple[str, int], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.task.policy, o.task.nodes)].append(o)
    header = [
        "policy",
        "nodes",
        "seeds",
        "wait mean",
        "wait p50",
        "wait p95",
        "wait p99",
        "unstarted",
        "util",
        "wall s",
    ]
    rows = []
    for (policy, nodes), group in sorted(groups.items()):

        def med(f: Any, group: list[Outcome] = group) -> float:
            return float(np.median([f(o.metrics) for o in group]))

        rows.append(
            [
                policy,
                str(nodes),
                str(len(group)),
                hours(med(lambda m: m.queueing_delay.mean)),
                hours(med(lambda m: m.queueing_delay.p50)),
                hours(med(lambda m: m.queueing_delay.p95)),
                hours(med(lambda m: m.queueing_delay.p99)),
                f"{med(lambda m: m.unstarted):.0f}",
                f"{med(lambda m: m.utilization_window):.1%}",
                f"{sum(o.metrics.wall_seconds for o in group):.1f}",
            ]
        )
    return header, rows


def write_sweep_report(folder: str | Path, outcomes: Sequence[Outcome], command: str | None = None) -> Path:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.csv").write_text(_csv_text(sweep_rows(outcomes)), encoding="utf-8")
    sweep_figure(outcomes, out / "wait_vs_size.png")
    # CDF and timeline at the smallest size, seed 0 (the most contended runs)
    smallest = min(o.task.nodes for o in outcomes)
    chosen = [o for o in outcomes if o.task.nodes == smallest and o.task.seed == min(x.task.seed for x in outcomes)]
    wait_cdf_figure([(o.task.policy, o.waits) for o in chosen], out / "wait_cdf.png")
    timeline_figure([(o.task.policy, o.timeline, o.metrics.gpus_total) for o in chosen], out / "timeline.png")
    doc = Report("Sweep report")
    doc.para(f"Command: `{command or command_line()}`")
    doc.heading("Summary (median over seeds)")
    doc.table(*sweep_rows_table(outcomes))
    doc.heading("Queueing delay against cluster size")
    doc.figure("wait_vs_size.png", "p95 wait vs size")
    doc.heading(f"At the smallest size ({smallest} nodes, first seed)")
    doc.figure("wait_cdf.png", "wait CDF")
    doc.figure("timeline.png", "timeline")
    doc.para("One row per simulation in `sweep.csv`.")
    return doc.write(out)


# ----------------------------------------------------------------------------- capacity


def sizes_table(sizing: SizingResult, markdown: bool = False) -> str:
    """Per evaluated size: seeds meeting each SLO and its deciding value."""
    if not sizing.evaluated:
        return ""
    return _table(*sizes_rows(sizing), markdown)


def sizes_rows(sizing: SizingResult) -> tuple[list[str], list[list[str]]]:
    """:func:`sizes_table`'s header and rows (``sizing`` evaluated at least one size)."""
    slos = sizing.evaluated[0].slos
    header = ["nodes", *[f"{s.label} (seeds met)" for s in slos], "verdict"]
    rows = []
    for v in sizing.evaluated:
        cells = [f"{format_value(s, v.worst(i))} ({v.seeds_meeting[i]}/{len(v.outcomes)})" for i, s in enumerate(slos)]
        rows.append([str(v.nodes), *cells, "meets" if v.meets else "fails"])
    return header, rows


def _simulations(sizing: SizingResult, total: int | None) -> str:
    if total is None or total <= sizing.simulations:
        return f"simulations: {sizing.simulations}"
    return f"simulations: {sizing.simulations} for the search, {total} in all (the measures below replayed too)"


def capacity_text(
    sizing: SizingResult,
    describe: str,
    compaction: CompactionResult | None = None,
    inflation: InflationResult | None = None,
    extra: Sequence[str] = (),
    simulations_total: int | None = None,
) -> str:
    """The summary ``gangopt capacity`` prints (``simulations_total``: the search's and the
    measures' replays together, when the measures replayed too)."""
    lines = [sizes_table(sizing)]
    if sizing.nodes is None:
        lines.append(f"no size in [{sizing.min_nodes}, {sizing.max_nodes}] meets every SLO")
    else:
        lines.append(f"answer: {sizing.nodes} nodes ({describe})")
    if sizing.non_monotone:
        lines.append(f"warning: not monotone; these larger sizes fail: {sizing.non_monotone}")
    lines.append(_simulations(sizing, simulations_total))
    if compaction is not None:
        lines.append(compaction.summary())
    if inflation is not None:
        lines.append(inflation.summary())
    lines += list(extra)
    return "\n".join(lines) + "\n"


def write_capacity_report(
    folder: str | Path,
    sizing: SizingResult,
    describe: str,
    settings: dict[str, Any],
    compaction: CompactionResult | None = None,
    inflation: InflationResult | None = None,
    extra: Sequence[str] = (),
    command: str | None = None,
    simulations_total: int | None = None,
) -> Path:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    slos = sizing.evaluated[0].slos if sizing.evaluated else ()
    data: dict[str, Any] = {
        "answer_nodes": sizing.nodes,
        "cluster": describe,
        "settings": settings,
        "slos": [s.text for s in slos],
        "lower_bound_nodes": sizing.lower_bound,
        "simulations": sizing.simulations,
        "non_monotone": sizing.non_monotone,
        "sizes": [
            {
                "nodes": v.nodes,
                "meets": v.meets,
                "seeds_meeting": v.seeds_meeting,
                "runs": [
                    {
                        "seed": o.task.seed,
                        "values": dict(zip([s.label for s in slos], o.slo_values, strict=True)),
                        "wait_p95": o.metrics.queueing_delay.p95,
                        "utilization": o.metrics.utilization_mean,
                        "utilization_window": o.metrics.utilization_window,
                        "jct_mean": o.metrics.jct.mean,
                        "gpu_hours_delivered": o.metrics.gpu_hours_delivered,
                        "lost_gpu_hours": o.metrics.lost_gpu_hours,
                        "wall_seconds": o.metrics.wall_seconds,
                    }
                    for o in v.outcomes
                ],
            }
            for v in sizing.evaluated
        ],
    }
    if compaction is not None:
        data["compaction"] = {
            "mode": compaction.mode,
            "nodes_total": compaction.nodes_total,
            "counts": compaction.counts,
        }
    if inflation is not None:
        data["inflation"] = {
            "mode": inflation.mode,
            "nodes": inflation.nodes,
            "factor": inflation.factor,
            "tried": inflation.tried,
        }
    (out / "capacity.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    rows = [
        {
            "nodes": v.nodes,
            "seed": o.task.seed,
            "meets": v.meets,
            **dict(zip([s.label for s in slos], o.slo_values, strict=True)),
        }
        for v in sizing.evaluated
        for o in v.outcomes
    ]
    (out / "sizes.csv").write_text(_csv_text(rows), encoding="utf-8")
    points = [(v.nodes, [tuple(o.slo_values) for o in v.outcomes]) for v in sizing.evaluated]
    slo_size_figure(points, slos, out / "slo_vs_size.png", sizing.nodes)
    doc = Report("Capacity report")
    doc.para(f"Command: `{command or command_line()}`")
    doc.para("Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
    doc.heading("Answer")
    doc.para(
        f"**{sizing.nodes} nodes** ({describe})" if sizing.nodes is not None else "**no size in range meets the SLOs**"
    )
    doc.para("SLOs: " + ", ".join(f"`{s.text}`" for s in slos))
    notes = [_simulations(sizing, simulations_total)]
    if sizing.non_monotone:
        notes.append(f"warning: not monotone; these larger sizes fail: {sizing.non_monotone}")
    doc.bullets(notes)
    doc.heading("Sizes evaluated")
    doc.para(
        "Each cell is the SLO's deciding value (the worst over the seeds that must meet it) and how many seeds met it."
    )
    if sizing.evaluated:
        doc.table(*sizes_rows(sizing))
    doc.heading("SLO against cluster size")
    doc.figure("slo_vs_size.png", "SLO vs size")
    answer = [v for v in sizing.evaluated if v.nodes == sizing.nodes]
    if answer:
        runs = [
            o.metrics.model_copy(update={"policy": f"{o.metrics.policy} seed {o.task.seed}"})
            for o in answer[0].outcomes
        ]
        doc.heading(f"The replay at the answer ({sizing.nodes} nodes)")
        doc.table(*comparison_rows(runs))
        doc.para(
            "The columns of `gangopt simulate`'s summary (definitions in its report and in "
            "`gangopt/replay/metrics.py`); *util* is over the trace's span."
        )
        doc.table(*priority_rows(runs))
        doc.table(*outcome_rows(runs))
        doc.para(
            "Where the jobs ended, the JCT's tail and the solver's time per round, as in `gangopt simulate`'s "
            "report; *util (own span)* flatters a short makespan, compare by *util* above."
        )
    if answer and answer[0].outcomes[0].timeline:
        chosen = answer[0].outcomes[0]
        timeline_figure([(f"{sizing.nodes} nodes", chosen.timeline, chosen.metrics.gpus_total)], out / "timeline.png")
        below = [v for v in sizing.evaluated if v.nodes < (sizing.nodes or 0)]
        cdfs = [(f"{sizing.nodes} nodes (answer)", chosen.waits)]
        if below and below[-1].outcomes[0].waits:
            cdfs.append((f"{below[-1].nodes} nodes (fails)", below[-1].outcomes[0].waits))
        wait_cdf_figure(cdfs, out / "wait_cdf.png")
        doc.figure("timeline.png", "timeline at the answer")
        doc.figure("wait_cdf.png", "wait CDF")
    if compaction is not None or inflation is not None or extra:
        doc.heading("Packing measures (Verma et al.)")
        doc.bullets(
            [
                *([compaction.summary()] if compaction is not None else []),
                *([inflation.summary()] if inflation is not None else []),
                *extra,
            ]
        )
    return doc.write(out)
