"""Report folders for ``gangopt simulate``, ``gangopt sweep`` and ``gangopt capacity``.

Each writes, into one folder:

* data: ``metrics.json`` / ``metrics.csv`` and the per-job, per-round and timeline CSVs of
  :func:`gangopt.replay.metrics.write_report` (one sub-folder per policy when several ran),
  ``sweep.csv`` (one row per simulation) or ``capacity.json`` / ``sizes.csv``;
* plots (PNG, matplotlib's Agg backend, no display needed): ``timeline.png`` (queue length and
  GPUs allocated over time), ``wait_cdf.png`` (queueing-delay CDF per policy),
  ``slo_vs_size.png`` (each SLO's value against the cluster size);
* ``report.md``: the command, the summary table, the figures and what each number means.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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


# ----------------------------------------------------------------------------- figures


SMALL_MULTIPLES = 3
"""More series than this: one row of panels per series instead of overlaid lines (seven
overlaid policies were hard to tell apart, issue 16)."""


def timeline_figure(series: Sequence[tuple[str, Sequence[TimelinePoint], float]], path: Path) -> Path:
    """Queue length (jobs waiting) and GPUs allocated over time; ``series`` = (label, timeline,
    GPUs in the cluster). Times in hours since the first point of each series. Up to
    :data:`SMALL_MULTIPLES` series share two panels; more get a row each (same axes, so rows
    compare at a glance)."""
    plt = _pyplot()
    drawn = [item for item in series if item[1]]
    multiples = len(drawn) > SMALL_MULTIPLES
    rows = len(drawn) if multiples else 1
    if multiples:
        fig, axes = plt.subplots(rows, 2, figsize=(10, 1.5 * rows + 0.8), sharex=True, sharey="col", squeeze=False)
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
            top.set_ylabel("jobs waiting", fontsize=8)
            bottom.set_ylabel("GPUs allocated", fontsize=8)
    for row in axes:
        for ax in row:
            ax.grid(alpha=0.3)
    if multiples:
        axes[0][1].set_title("dotted: the cluster's GPUs", loc="right", fontsize=8)
        for ax in axes[-1]:
            ax.set_xlabel("hours since the first arrival")
    else:
        top, bottom = axes[0]
        top.set_ylabel("jobs waiting")
        bottom.set_ylabel("GPUs allocated")
        bottom.set_xlabel("hours since the first arrival")
        top.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def wait_cdf_figure(series: Sequence[tuple[str, Sequence[float]]], path: Path) -> Path:
    """Empirical CDF of queueing delay per label (log time axis; a wait of 0 plots at 1 s)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, waits in series:
        if not len(waits):
            continue
        x = np.sort(np.maximum(np.asarray(waits, dtype=float), 1.0))
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(x, y, where="post", label=label, linewidth=1.0)
    ax.set_xscale("log")
    ax.set_xlabel("queueing delay (s, log; unstarted jobs censored at the end)")
    ax.set_ylabel("share of jobs")
    for seconds, name in ((60, "1m"), (1800, "30m"), (3600, "1h"), (86400, "1d")):
        ax.axvline(seconds, color="grey", linewidth=0.5, linestyle=":")
        ax.text(seconds, 0.02, name, fontsize=7, color="grey")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def slo_size_figure(
    points: Sequence[tuple[int, Sequence[Sequence[float]]]], slos: Sequence[SLO], path: Path, answer: int | None = None
) -> Path:
    """One panel per SLO: its value at each evaluated size (a dot per seed, a line through the
    worst deciding value), the bound as a dashed line, the answer as a vertical line."""
    plt = _pyplot()
    n = max(1, len(slos))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False)
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
            _symlog_from_zero(ax, max(slo.threshold / scale, 1e-3))
        elif min(worst, default=0.0) >= 0 and slo.threshold >= 0:
            ax.set_ylim(bottom=0)
        ax.set_title(slo.text, fontsize=9)
        ax.set_xlabel("nodes")
        ax.set_ylabel(unit or "value")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _symlog_from_zero(ax: Any, linthresh: float) -> None:
    """A symlog axis for non-negative values: linear up to ``linthresh``, logarithmic above,
    starting at 0 (symlog's default margins showed ticks like -10^1 below zero, issue 16),
    ticks as plain numbers (1, 10, 100) rather than powers, and no minor ticks."""
    from matplotlib.ticker import FuncFormatter, NullLocator, SymmetricalLogLocator

    ax.set_yscale("symlog", linthresh=linthresh)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(SymmetricalLogLocator(base=10, linthresh=linthresh))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}" if value >= 0 else ""))


def sweep_figure(outcomes: Sequence[Outcome], path: Path, stat: str = "p95") -> Path:
    """Queueing delay (the ``stat`` percentile, median over seeds) against nodes, per policy."""
    plt = _pyplot()
    by: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        by[o.task.policy][o.task.nodes].append(float(getattr(o.metrics.queueing_delay, stat)))
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy, sizes in by.items():
        xs = sorted(sizes)
        ax.plot(xs, [float(np.median(sizes[x])) / 60 for x in xs], marker="o", label=policy, linewidth=1.0)
    _symlog_from_zero(ax, 1.0)
    ax.set_xlabel("nodes")
    ax.set_ylabel(f"{stat} queueing delay (min, median over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- tables


def comparison_table(metrics: Sequence[Metrics], markdown: bool = False) -> str:
    """One row per run: waits, JCT, utilization over the common window (the trace's span, the
    same for every policy), GPU-hours delivered, idle-but-needed, preemptions and GPU-hours
    they lost, deadline misses, solver time."""
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
        ]
        for m in metrics
    ]
    return _table(header, rows, markdown)


def priority_table(metrics: Sequence[Metrics], markdown: bool = False) -> str:
    """Queueing delay per priority, per queue (when there are several) and per job size, one
    row per policy and group: the per-group rows ``gangopt simulate`` prints, side by side."""
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
    return _table(header, rows, markdown)


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
    lines = [
        "# Simulation report",
        "",
        f"Command: `{command or command_line()}`",
        "",
        f"Cluster: {where}. Rounds at most every {config.interval:g} s; checkpoints every "
        f"{config.checkpoint_interval:g} s; CP-SAT time limit {config.time_limit:g} s per round; "
        f"preemption {'on' if config.preemption else 'off'}.",
        "",
        "## Summary",
        "",
        comparison_table(all_metrics, markdown=True),
        "Waits are first start minus arrival; a job that never started counts with its wait up to the end "
        "(censored). JCT (job completion time) is finish minus arrival, over finished jobs. *util*: GPUs "
        f"allocated over the common window, the trace's span ({hours(window)} from the first arrival: when "
        "the last job would finish if every job started on arrival), the same for every policy, so a policy "
        "with a shorter makespan does not look better packed. *GPU-h delivered*: GPU-hours allocated minus "
        "those preemptions rolled back (*GPU-h lost*). *idle-needed*: GPU-hours that sat free while waiting "
        "jobs needed them (fragmentation or head-of-line blocking). Deadlines: a start deadline is missed by "
        "starting after it, a completion deadline by finishing after it. Definitions: "
        "`gangopt/replay/metrics.py`.",
        "",
        "## Queueing delay per priority, queue and job size",
        "",
        priority_table(all_metrics, markdown=True),
        "## Queue and allocation over time",
        "",
        "![timeline](timeline.png)",
        "",
        "## Queueing delay, CDF per policy",
        "",
        "![wait CDF](wait_cdf.png)",
        "",
        "## Data",
        "",
        (f"{data} in this folder." if len(runs) == 1 else f"Per policy, in a sub-folder named after it: {data}."),
        "",
    ]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"


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
    return _table(header, rows, markdown)


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
    lines = [
        "# Sweep report",
        "",
        f"Command: `{command or command_line()}`",
        "",
        "## Summary (median over seeds)",
        "",
        sweep_table(outcomes, markdown=True),
        "## Queueing delay against cluster size",
        "",
        "![p95 wait vs size](wait_vs_size.png)",
        "",
        f"## At the smallest size ({smallest} nodes, first seed)",
        "",
        "![wait CDF](wait_cdf.png)",
        "",
        "![timeline](timeline.png)",
        "",
        "One row per simulation in `sweep.csv`.",
        "",
    ]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"


# ----------------------------------------------------------------------------- capacity


def sizes_table(sizing: SizingResult, markdown: bool = False) -> str:
    """Per evaluated size: seeds meeting each SLO and its deciding value."""
    if not sizing.evaluated:
        return ""
    slos = sizing.evaluated[0].slos
    header = ["nodes", *[f"{s.label} (seeds met)" for s in slos], "verdict"]
    rows = []
    for v in sizing.evaluated:
        cells = [f"{format_value(s, v.worst(i))} ({v.seeds_meeting[i]}/{len(v.outcomes)})" for i, s in enumerate(slos)]
        rows.append([str(v.nodes), *cells, "meets" if v.meets else "fails"])
    return _table(header, rows, markdown)


def capacity_text(
    sizing: SizingResult,
    describe: str,
    compaction: CompactionResult | None = None,
    inflation: InflationResult | None = None,
    extra: Sequence[str] = (),
) -> str:
    """The summary ``gangopt capacity`` prints."""
    lines = [sizes_table(sizing)]
    if sizing.nodes is None:
        lines.append(f"no size in [{sizing.min_nodes}, {sizing.max_nodes}] meets every SLO")
    else:
        lines.append(f"answer: {sizing.nodes} nodes ({describe})")
    if sizing.non_monotone:
        lines.append(f"warning: not monotone; these larger sizes fail: {sizing.non_monotone}")
    lines.append(f"simulations: {sizing.simulations}")
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
    figures = ["![SLO vs size](slo_vs_size.png)", ""]
    answer = [v for v in sizing.evaluated if v.nodes == sizing.nodes]
    if answer and answer[0].outcomes[0].timeline:
        chosen = answer[0].outcomes[0]
        timeline_figure([(f"{sizing.nodes} nodes", chosen.timeline, chosen.metrics.gpus_total)], out / "timeline.png")
        below = [v for v in sizing.evaluated if v.nodes < (sizing.nodes or 0)]
        cdfs = [(f"{sizing.nodes} nodes (answer)", chosen.waits)]
        if below and below[-1].outcomes[0].waits:
            cdfs.append((f"{below[-1].nodes} nodes (fails)", below[-1].outcomes[0].waits))
        wait_cdf_figure(cdfs, out / "wait_cdf.png")
        figures += ["![timeline at the answer](timeline.png)", "", "![wait CDF](wait_cdf.png)", ""]
    lines = [
        "# Capacity report",
        "",
        f"Command: `{command or command_line()}`",
        "",
        "Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()),
        "",
        "## Answer",
        "",
        (
            f"**{sizing.nodes} nodes** ({describe})"
            if sizing.nodes is not None
            else "**no size in range meets the SLOs**"
        ),
        "",
        "SLOs: " + ", ".join(f"`{s.text}`" for s in slos),
        "",
        "## Sizes evaluated",
        "",
        "Each cell is the SLO's deciding value (the worst over the seeds that must meet it) and how many seeds met it.",
        "",
        sizes_table(sizing, markdown=True),
        "## SLO against cluster size",
        "",
        *figures,
    ]
    if compaction is not None or inflation is not None or extra:
        lines += ["## Packing measures (Verma et al.)", ""]
        if compaction is not None:
            lines += [f"- {compaction.summary()}"]
        if inflation is not None:
            lines += [f"- {inflation.summary()}"]
        lines += [f"- {e}" for e in extra]
        lines.append("")
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"
