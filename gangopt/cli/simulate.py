"""``gangopt simulate``: replay a workload on a cluster with one policy and print a summary.

Kept apart from :mod:`gangopt.cli` (which only registers it) so the command can grow (report
folders, plots, sweeps) without touching the round-level commands. Same error contract: an
unusable input raises :class:`~gangopt.errors.InputError` naming the JSON path or the flag,
which the CLI prints and turns into exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gangopt.errors import InputError, Problem
from gangopt.parsing import parse_model
from gangopt.replay.clusters import load_cluster
from gangopt.replay.metrics import Metrics, compute_metrics, size_label
from gangopt.replay.policies import POLICY_NAMES, make_policy
from gangopt.replay.preflight import SHOWN, preflight
from gangopt.replay.report import comparison_table, write_simulation_report
from gangopt.replay.simulation import SimConfig, job_bar, simulate
from gangopt.replay.sweep import ClusterSpec, NodeType, parse_node_shape
from gangopt.replay.workload import Workload, load_workload
from gangopt.schema import Cluster


def add_parser(sub: Any) -> None:
    """Register ``simulate`` on the CLI's subparsers."""
    p = sub.add_parser("simulate", help="replay a workload through rounds of a policy; print a summary table")
    p.add_argument("workload", metavar="WORKLOAD.json", help="a workload (see instances/workloads/)")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--cluster", metavar="CLUSTER.json", help="a cluster model (see models/)")
    where.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help="N nodes of --node-shape (default: 8 GPUs, 96 CPUs, 1Ti, racks of 16); with several shapes, "
        "N of the --vary one and --fixed counts of the others",
    )
    p.add_argument(
        "--select",
        metavar="LABEL=VALUE",
        action="append",
        default=[],
        help="use only the cluster's nodes with this label (repeatable), e.g. philly.vc=6214e9",
    )
    p.add_argument(
        "--policy",
        "--solver",
        dest="policy",
        choices=POLICY_NAMES,
        action="append",
        help="a solver name, as for 'solve --solver' (default: gangopt, i.e. cpsat); repeat to compare "
        "policies on the same workload and cluster",
    )
    add_cluster_options(p)
    add_sim_options(p)
    p.add_argument("--seed", type=int, default=0, metavar="N", help="policy seed (default 0)")
    p.add_argument("--horizon", type=float, metavar="S", help="stop at S seconds after the first arrival")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write a report folder: metrics.json/csv, jobs/rounds/timeline CSVs, PNG plots, report.md and "
        "report.html (one page, plots embedded)",
    )
    p.add_argument("--json", action="store_true", help="print the metrics as JSON instead of the table")
    p.add_argument(
        "--progress",
        action="store_true",
        help="progress bar on stderr (with several --policy, also one over all of them, with the run's ETA)",
    )
    p.set_defaults(func=run)


def add_sim_options(p: argparse.ArgumentParser) -> None:
    """Simulation flags shared by ``simulate``, ``sweep`` and ``capacity``."""
    p.add_argument("--first", type=int, metavar="N", help="replay only the workload's first N jobs (by arrival)")
    p.add_argument("--interval", type=float, default=60.0, metavar="S", help="rounds at most every S s (default 60)")
    p.add_argument("--checkpoint", type=float, default=1800.0, metavar="S", help="checkpoint interval (default 1800)")
    p.add_argument("--restart", type=float, default=0.0, metavar="S", help="restart time after preemption (default 0)")
    p.add_argument(
        "--time-limit",
        type=float,
        default=1.0,
        metavar="S",
        help="CP-SAT budget per round (default 1): deterministic work worth S seconds here, "
        "wall-clock cap 4*S, so replays repeat exactly",
    )
    p.add_argument("--no-preemption", action="store_true", help="never preempt or shrink running jobs")
    p.add_argument(
        "--drop-impossible",
        action="store_true",
        help="replay without the jobs that can never start on the cluster (default: name them and exit 2)",
    )
    p.add_argument(
        "--validate",
        choices=["always", "untrusted"],
        default="always",
        help="validate every plan (default), or skip plans gangopt.solve already validated (gangopt, greedy)",
    )


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    """``--node-shape``, ``--fixed``, ``--vary``: the parametric cluster of ``simulate --nodes``,
    ``sweep`` and ``capacity`` (:class:`gangopt.replay.sweep.ClusterSpec`)."""
    p.add_argument(
        "--node-shape",
        action="append",
        default=[],
        metavar="[NAME:]SPEC",
        help="node type, e.g. 'gpu=8,cpu=96,memory=1Ti,model=H100,rack=16' (default); repeat for several types",
    )
    p.add_argument(
        "--fixed", action="append", default=[], metavar="NAME=N", help="count of a node type that is not varied"
    )
    p.add_argument("--vary", metavar="NAME", help="the node type whose count is searched (default: the first)")


def cluster_spec(args: argparse.Namespace) -> ClusterSpec:
    """The :class:`ClusterSpec` of the cluster flags (default: one 8-GPU node type)."""
    try:
        types = tuple(parse_node_shape(t) for t in args.node_shape) or (NodeType(),)
        fixed = []
        for term in args.fixed:
            name, eq, count = term.partition("=")
            if not eq or not count.isdigit():
                raise ValueError(f"--fixed expects NAME=N, got {term!r}")
            fixed.append((name, int(count)))
        return ClusterSpec(types, tuple(fixed), args.vary or types[0].name)
    except ValueError as error:
        raise InputError([Problem("--node-shape", str(error))], "arguments") from None


def load_sliced_workload(args: argparse.Namespace) -> tuple[Workload, list[int]]:
    """The workload file, cut to its first ``--first`` jobs by arrival when given, and each kept
    job's index in the file (so that errors name the file's JSON paths)."""
    workload = load_workload(args.workload)
    positions = list(range(len(workload.jobs)))
    if args.first is not None:
        if args.first < 1:
            raise InputError([Problem("--first", f"must be >= 1, got {args.first}")], "arguments")
        order = sorted(range(len(workload.jobs)), key=lambda i: (workload.jobs[i].arrival, i))[: args.first]
        positions = sorted(order)
        jobs = [workload.jobs[i] for i in positions]
        note = f"replayed: the first {len(jobs)} jobs by arrival (--first {args.first})"
        workload = workload.model_copy(update={"jobs": jobs, "assumptions": [*workload.assumptions, note]})
    return workload, positions


def checked_workload(
    args: argparse.Namespace, workload: Workload, cluster: Cluster, positions: list[int] | None = None
) -> Workload:
    """The pre-flight check of every replay command (:mod:`gangopt.replay.preflight`): exit 2
    naming the jobs that can never start on ``cluster`` (at their index in the file,
    ``positions``), or, with ``--drop-impossible``, the workload without them and a warning per
    dropped job on stderr."""
    kept, dropped = preflight(
        workload, cluster, drop=args.drop_impossible, source=str(args.workload), positions=positions
    )
    for x in dropped[:SHOWN]:
        print(f"warning: {x.path}: dropped job {x.name!r}: {x.reason}", file=sys.stderr)
    if dropped:
        more = f" ({len(dropped) - SHOWN} not listed)" if len(dropped) > SHOWN else ""
        print(f"warning: dropped {len(dropped)} jobs that can never start on this cluster{more}", file=sys.stderr)
    return kept


def _cluster(args: argparse.Namespace) -> Cluster:
    if args.nodes is not None:
        if args.nodes < 1:
            raise InputError([Problem("--nodes", f"must be >= 1, got {args.nodes}")], "arguments")
        cluster = cluster_spec(args).build(args.nodes)
    else:
        for flag, value in (("--node-shape", args.node_shape), ("--fixed", args.fixed), ("--vary", args.vary)):
            if value:
                raise InputError([Problem(flag, "goes with --nodes, not --cluster")], "arguments")
        path = Path(args.cluster)
        if not path.is_file():
            raise InputError([Problem("$", f"cannot read {path}: no such file")], str(path))
        try:
            cluster = load_cluster(path)
        except json.JSONDecodeError as error:
            raise InputError([Problem("$", f"malformed JSON: {error.msg} at line {error.lineno}")], str(path)) from None
    for term in args.select:
        key, sep, value = term.partition("=")
        if not sep or not key:
            raise InputError([Problem("--select", f"expected LABEL=VALUE, got {term!r}")], "arguments")
        nodes = [n for n in cluster.nodes if n.labels.get(key) == value]
        if not nodes:
            raise InputError([Problem("--select", f"no node has label {key}={value}")], "arguments")
        cluster = parse_model(Cluster, {**cluster.model_dump(), "nodes": [n.model_dump() for n in nodes]}, "cluster")
    return cluster


def sim_config(args: argparse.Namespace) -> SimConfig:
    checks = [
        ("--horizon", getattr(args, "horizon", None), getattr(args, "horizon", None) is None or args.horizon >= 0),
        ("--interval", args.interval, args.interval >= 0),
        ("--checkpoint", args.checkpoint, args.checkpoint > 0),
        ("--restart", args.restart, args.restart >= 0),
        ("--time-limit", args.time_limit, args.time_limit > 0),
        ("--seed", getattr(args, "seed", 0), getattr(args, "seed", 0) >= 0),
    ]
    problems = [Problem(flag, f"invalid value {value}") for flag, value, ok in checks if not ok]
    if problems:
        raise InputError(problems, "arguments")
    return SimConfig(
        interval=args.interval,
        checkpoint_interval=args.checkpoint,
        restart_seconds=args.restart,
        horizon=getattr(args, "horizon", None),
        time_limit=args.time_limit,
        seed=getattr(args, "seed", 0),
        preemption=not args.no_preemption,
        progress=getattr(args, "progress", False),
        validate=args.validate,
    )


class RunBar:
    """One progress bar over a whole ``simulate`` of several policies (``--progress``), above
    each policy's own bar: jobs finished, out of jobs x policies, with the ETA of the whole run.
    Before, each policy drew its own bar and nothing said how much of the run was left (issue
    16). A policy's jobs that never finish (its replay ended with them waiting or running at
    the horizon) are counted when it ends, so the bar reaches its total exactly.

    The ETA is the average rate since the start (:data:`PROGRESS_SMOOTHING`), so it assumes the
    policies still to run cost what the ones so far did: gangopt's CP-SAT rounds cost more than
    a peer's, and the first policy named decides the early estimates."""

    def __init__(self, jobs: int, policies: list[str]) -> None:
        self.jobs = jobs
        self.policies = policies
        self.started = 0
        self.bar = job_bar(jobs * len(policies), f"simulate {len(policies)} policies")

    def start(self, policy: str) -> None:
        """Policy number ``started + 1`` begins: top up the previous one's unfinished jobs."""
        self.bar.update(self.started * self.jobs - self.bar.n)
        self.started += 1
        count = len(self.policies)
        self.bar.set_description(f"simulate {count} policies ({self.started}/{count}: {policy})")

    def finished(self, n: int) -> None:
        self.bar.update(n)

    def end(self) -> None:
        """Every policy has run: top up the last one's unfinished jobs."""
        self.bar.update(self.started * self.jobs - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def run(args: argparse.Namespace) -> int:
    config = sim_config(args)
    workload, positions = load_sliced_workload(args)
    cluster = _cluster(args)
    workload = checked_workload(args, workload, cluster, positions)
    if workload.jobs and config.horizon is not None:
        first = min(j.arrival for j in workload.jobs)
        config = SimConfig(**{**config.__dict__, "horizon": first + config.horizon})
    policies = list(dict.fromkeys(args.policy or ["gangopt"]))
    overall = RunBar(len(workload.jobs), policies) if config.progress and len(policies) > 1 else None
    runs = []
    try:
        for name in policies:
            if overall is not None:
                overall.start(name)
            hook = overall.finished if overall is not None else None
            policy = make_policy(name, workload)
            result = simulate(workload, cluster, policy, config, name=name, impossible="keep", on_finished=hook)
            runs.append((result, compute_metrics(result)))
        if overall is not None:
            overall.end()
    finally:
        if overall is not None:
            overall.close()
    if args.out:
        write_simulation_report(args.out, runs)
    if args.json:
        dumped = [m.model_dump(mode="json") for _, m in runs]
        text = json.dumps(dumped[0] if len(dumped) == 1 else dumped, indent=2) + "\n"
    else:
        text = "\n".join(table(m) for _, m in runs)
        if len(runs) > 1:
            text += "\n" + comparison_table([m for _, m in runs])
    sys.stdout.write(text)
    return 0


def _hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def table(m: Metrics) -> str:
    """The human-readable summary ``gangopt simulate`` prints."""
    q = m.queueing_delay
    lines = [
        f"policy {m.policy}: {m.nodes} nodes, {m.gpus_total:g} GPUs; simulated {_hours(m.end_time - m.start_time)} "
        f"in {m.wall_seconds:.1f}s, {m.cpu_seconds:.1f} CPU-s ({m.jobs_per_second:.1f} jobs/s, {m.rounds} rounds)",
        f"jobs        {m.jobs} total, {m.finished} finished, {m.running_at_end} running and "
        f"{m.pending_at_end} pending at the end, {m.not_arrived} not arrived",
        "",
        f"{'queueing delay':<22}{'jobs':>7}{'mean':>9}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}",
    ]

    def row(label: str, s: Any) -> str:
        return (
            f"{label:<22}{s.count:>7}{_hours(s.mean):>9}{_hours(s.p50):>9}{_hours(s.p95):>9}"
            f"{_hours(s.p99):>9}{_hours(s.max):>9}"
        )

    lines.append(row("all", q))
    lines += [row(f"priority {p}", s) for p, s in m.queueing_delay_by_priority.items()]
    if len(m.queueing_delay_by_queue) > 1:
        lines += [row(f"queue {name}", s) for name, s in m.queueing_delay_by_queue.items()]
    if len(m.queueing_delay_by_size) > 1:
        lines += [row(f"jobs of {size_label(size)} GPUs", s) for size, s in sorted(m.queueing_delay_by_size.items())]
    lines.append(row("JCT (finished)", m.jct))
    if m.fairness is not None:
        f = m.fairness
        lines += ["", f"{'fair share':<22}{'share of deserved':>19}{'starved':>9}"]
        lines += [
            f"{'queue ' + name:<22}{s.share_of_deserved:>19.2f}{_hours(s.starved_hours * 3600):>9}"
            for name, s in f.queues.items()
        ]
        lines.append(
            f"Jain's index over queues {f.jain_index:.3f} ({f.shared_hours:.1f} h shared), "
            f"{f.jain_index_contended:.3f} when contended ({f.contended_hours:.1f} h)"
        )
    lines += [
        "",
        f"unstarted jobs (delay counted to the end): {m.unstarted}",
        f"GPU utilisation          {m.utilization_window:.1%} over the trace's span "
        f"({_hours(m.window_end - m.start_time)} from the first arrival, the same for every policy); "
        f"{m.utilization_mean:.1%} over this run's own {_hours(m.end_time - m.start_time)}",
        f"GPU-hours                {m.gpu_hours_allocated:.1f} allocated, {m.gpu_hours_delivered:.1f} delivered "
        "(allocated minus lost to preemptions)",
        f"idle but needed          {m.idle_needed_gpu_hours:.1f} GPU-hours "
        f"(idle while jobs wait: {m.idle_while_waiting_gpu_hours:.1f})",
        f"preemptions              {m.preemptions} ({m.jobs_preempted} jobs), {m.lost_gpu_hours:.1f} GPU-hours lost",
        f"deadline misses          {m.deadline_misses} of {m.deadlines}"
        + (f" ({m.completion_deadlines} completion deadlines)" if m.completion_deadlines else ""),
        f"solver time per round    mean {m.solver_seconds.mean * 1000:.1f} ms, p95 "
        f"{m.solver_seconds.p95 * 1000:.1f} ms, max {m.solver_seconds.max * 1000:.1f} ms, "
        f"total {m.solver_seconds_total:.1f} s",
    ]
    return "\n".join(lines) + "\n"
