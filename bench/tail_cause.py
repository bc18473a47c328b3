"""Why gangopt's tail on a replay is worse than a peer's: when each policy started one job, and
gangopt's outcome had it started that job later (a counterfactual).

    python -m bench.tail_cause [--replay NAME] [--job NAME] [--policy NAME ...]
                               [--hold-as POLICY | --hold-until HOURS | --no-hold]
                               [--setting JSON ...] [--first N]

Each ``--policy`` (default: gangopt and koordinator_like) replays the workload as
:mod:`bench.replay_table` does (same cluster, same settings); then gangopt replays it again with
``--job`` held back until the time ``--hold-as`` started it (or ``--hold-until`` hours), as if
it had been submitted then. The held replay's metrics count the job's wait and JCT from its
real arrival (:func:`restore_arrivals`), so every row compares with the replay table's rows.
Each ``--setting`` (JSON, e.g. ``'{"lookahead": {"reservations": 0}}'`` or ``'{"weights":
{"short_first": 0}, "preemption": false}'``) adds a row: gangopt with those
:class:`~gangopt.replay.simulation.SimConfig` settings (an ablation).

Measured with it (issue 12, docs/capacity-planning.md "Why gangopt's openb tail is long"): on
the openb window every gangopt setting starts the 8-GPU, 58-hour priority-2 pod
``openb-pod-4406`` at 190.2 h, 23 minutes after it arrives, and it holds one of the two nodes
through the 226-248 h burst of 1-GPU priority-2 pods; koordinator_like's spreading keeps it
waiting until 285.9 h. Held back until then, gangopt's p95 wait goes from 4.7 h to 16 min.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.replay_table import REPLAYS, Replay, load
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.metrics import Metrics, compute_metrics
from gangopt.replay.policies import make_policy
from gangopt.replay.report import hours
from gangopt.replay.simulation import SimConfig, SimulationResult, simulate
from gangopt.replay.workload import Workload
from gangopt.schema import LookAhead, Weights
from gangopt.solve import cpu_seconds

DEFAULT_JOB = "openb-pod-4406"


def hold_back(workload: Workload, name: str, until: float) -> Workload:
    """``workload`` with job ``name`` submitted at ``until`` instead (never earlier than its own
    arrival). ``ValueError`` for an unknown job or one whose deadline falls before ``until``."""
    found = [j for j in workload.jobs if j.name == name]
    if not found:
        raise ValueError(f"no job named {name!r} in the workload")
    job = found[0]
    at = max(job.arrival, until)
    if job.deadline is not None and job.deadline < at:
        raise ValueError(f"job {name!r} has a deadline ({job.deadline:g} s) before {at:g} s: cannot hold it back")
    moved = job.model_copy(update={"arrival": at})
    return workload.model_copy(update={"jobs": [moved if j.name == name else j for j in workload.jobs]})


def restore_arrivals(result: SimulationResult, arrivals: Mapping[str, float]) -> SimulationResult:
    """``result`` with every job's arrival set back to ``arrivals`` (the workload before
    :func:`hold_back`), so that waits and JCTs count from the real submission. Modifies the
    records in place and returns ``result``."""
    for rec in result.jobs:
        rec.arrival = arrivals[rec.name]
    return result


@dataclass(frozen=True)
class Row:
    label: str
    job_start: float | None
    metrics: Metrics
    cpu: float


def config_of(setting: str) -> SimConfig:
    """The replay settings of one ``--setting`` JSON object: ``weights`` and ``lookahead``
    (partial, the rest defaults) and ``preemption``; ``ValueError`` names an unknown key."""
    data = json.loads(setting)
    if not isinstance(data, dict):
        raise ValueError(f"--setting must be a JSON object, got {setting!r}")
    unknown = sorted(set(data) - {"weights", "lookahead", "preemption"})
    if unknown:
        raise ValueError(f"--setting: unknown key(s) {', '.join(unknown)} (known: weights, lookahead, preemption)")
    return SimConfig(
        weights=Weights.model_validate(data["weights"]) if "weights" in data else None,
        lookahead=LookAhead.model_validate(data["lookahead"]) if "lookahead" in data else None,
        preemption=bool(data.get("preemption", True)),
    )


def replay(
    workload: Workload,
    nodes: int,
    policy: str,
    arrivals: Mapping[str, float],
    job: str,
    label: str,
    config: SimConfig | None = None,
) -> Row:
    cpu = cpu_seconds()
    cluster = parametric_cluster(nodes)
    result = simulate(workload, cluster, make_policy(policy, workload), config or SimConfig(), name=policy)
    restore_arrivals(result, arrivals)
    start = next((r.first_start for r in result.jobs if r.name == job), None)
    return Row(label, start, compute_metrics(result), cpu_seconds() - cpu)


def table(rows: Sequence[Row], job: str) -> str:
    lines = [
        f"| run | {job} starts | mean wait | p95 wait | p99 wait | mean JCT | deadline misses | preemptions "
        "| priority-2 p95 wait | largest class p95 wait | replay CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m = r.metrics
        p2 = m.queueing_delay_by_priority.get(2)
        start = "-" if r.job_start is None else f"{r.job_start / 3600:.1f} h"
        lines.append(
            f"| {r.label} | {start} | {hours(m.queueing_delay.mean)} | {hours(m.queueing_delay.p95)} "
            f"| {hours(m.queueing_delay.p99)} | {hours(m.jct.mean)} | {m.deadline_misses} of {m.deadlines} "
            f"| {m.preemptions} | {'-' if p2 is None else hours(p2.p95)} "
            f"| {hours(m.queueing_delay_largest_class.p95)} | {r.cpu:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", default=REPLAYS[0].name, choices=[r.name for r in REPLAYS])
    parser.add_argument("--job", default=DEFAULT_JOB, help=f"the job to follow and hold back (default {DEFAULT_JOB})")
    parser.add_argument(
        "--policy", action="append", help="policies to replay as they are (default: gangopt, koordinator_like)"
    )
    hold = parser.add_mutually_exclusive_group()
    hold.add_argument(
        "--hold-as", metavar="POLICY", default="koordinator_like", help="hold the job until this policy started it"
    )
    hold.add_argument("--hold-until", type=float, metavar="HOURS", help="hold the job until this time (hours)")
    hold.add_argument("--no-hold", action="store_true", help="no counterfactual row")
    parser.add_argument(
        "--setting", action="append", default=[], metavar="JSON", help="add a gangopt row with these settings"
    )
    parser.add_argument("--first", type=int, metavar="N", help="replay the first N jobs only")
    args = parser.parse_args(argv)
    spec: Replay = next(r for r in REPLAYS if r.name == args.replay)
    workload = load(spec, args.first or spec.first)
    arrivals = {j.name: j.arrival for j in workload.jobs}
    if args.job not in arrivals and not args.no_hold:
        parser.error(f"--job: no job named {args.job!r} in {spec.workload} (--no-hold to only replay)")
    try:
        settings = [(s, config_of(s)) for s in args.setting]
    except ValueError as e:
        parser.error(str(e))
    policies = list(dict.fromkeys(args.policy or ["gangopt", "koordinator_like"]))
    if not args.no_hold and args.hold_until is None and args.hold_as not in policies:
        policies.append(args.hold_as)
    rows = []
    for policy in policies:
        t0 = time.perf_counter()
        rows.append(replay(workload, spec.nodes, policy, arrivals, args.job, policy))
        print(f"{policy}: {time.perf_counter() - t0:.0f} s wall", file=sys.stderr, flush=True)
    for text, config in settings:
        t0 = time.perf_counter()
        rows.append(replay(workload, spec.nodes, "gangopt", arrivals, args.job, f"gangopt `{text}`", config))
        print(f"gangopt {text}: {time.perf_counter() - t0:.0f} s wall", file=sys.stderr, flush=True)
    if not args.no_hold:
        until = args.hold_until * 3600 if args.hold_until is not None else None
        if until is None:
            until = next(r.job_start for r in rows if r.label == args.hold_as)
        if until is None:
            parser.error(f"--hold-as: {args.hold_as} never started {args.job}")
        held = hold_back(workload, args.job, until)
        label = f"gangopt, {args.job} held until {until / 3600:.1f} h"
        rows.append(replay(held, spec.nodes, "gangopt", arrivals, args.job, label))
    print(f"### {spec.name}: {len(workload.jobs)} jobs on {spec.nodes} nodes ({spec.command()})\n")
    print(table(rows, args.job))
    return 0


if __name__ == "__main__":
    sys.exit(main())
