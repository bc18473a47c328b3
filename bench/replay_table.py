"""Issue 12's replay benchmark: every policy on each contended replay, in one process, and
gangopt's targets as PASS/FAIL.

    python -m bench.replay_table [--quick] [--policy NAME ...] [--replay NAME ...] [--json OUT]
                                 [--seeds N | --seeds 0,3,7] [--jitter S] [--lookahead JSON]
                                 [--reuse OLD.json | --reprint OLD.json]

For each replay (:data:`REPLAYS`: the openb window on 2 nodes, the Philly 6-node slice and
the Philly VC b436b2 window on 6 nodes) every policy of :data:`POLICIES` replays the same
workload on the same cluster with the same settings (``gangopt simulate``'s defaults: rounds
at most every 60 s, CP-SAT budget 1 s of deterministic work per round, checkpoints every
1,800 s, preemption on). One Markdown table per replay: waits, JCT, deadline misses,
preemptions, the priority-2 p95 wait, the p95 wait of the largest size class
(:func:`gangopt.replay.metrics.largest_class`), the policy's wall and CPU seconds (summed
``plan.stats``), the replay's CPU seconds (this process and its finished children, around the
whole replay) and jobs per wall second. Then :func:`evaluate` prints issue 12's targets for
gangopt. Progress goes to stderr, tables to stdout.

``--policy gangopt --reuse OUT.json`` reruns gangopt alone and takes every other policy's row
from an earlier ``--json OUT.json`` of the same replays and settings (marked "reused"): the
peers' replays take most of the run (fifo_first_fit alone about 4 CPU minutes on the openb
window), and a change to gangopt's objective does not change them. A change to shared code
(validator, simulator, the greedy engine the peers use) does: rerun everything then.

``--reprint OLD.json`` replays nothing and prints the tables and targets of an earlier run.

``--seeds N`` replays every replay under seeds 0..N-1 (``--seeds 0,3,7``: those), every
policy under each seed in the same run, and then prints, per policy, the median and the
min/max across seeds of each metric and, per target, on how many seeds it passed
(:func:`summarize`, :func:`target_passes`). A seed is :func:`gangopt.replay.sweep.variant`'s
(the one ``gangopt capacity --seeds`` uses): seed 0 is the trace as it is, seed ``s > 0`` moves
every arrival by a uniform draw in ``[-jitter, +jitter]`` seconds (``--jitter``, default
:data:`JITTER`; sha256 per job name, a deadline moves with its arrival) and is also CP-SAT's
random seed (``policy.seed``). Why both: the seed alone varies only gangopt (greedy and every
peer draw no random numbers), so it would measure gangopt's luck against fixed peers; the
jitter changes which 60-s round a job arriving near a round boundary falls in and the order of
jobs arriving within seconds of each other, which is what the peers' tie-breaking (queue
order, first fit) and gangopt's equal-value optima turn on, without changing the load, the job
mix, priorities or deadlines' slack. With ``--reuse``, each seed's runs are taken from the same
seed of the earlier file.

``--lookahead JSON`` (e.g. ``'{"commit_hours": 12}'``, the rest defaults) sets gangopt's
:class:`~gangopt.schema.LookAhead`; only the cpsat solver reads it, so the peers' rows do not
depend on it and may be ``--reuse``d from a run without it (gangopt's row may not: refused).

``--quick`` replays a prefix of each workload (:data:`QUICK_FIRST`) to check the plumbing in
about a minute; its numbers are not the benchmark's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.metrics import Metrics, compute_metrics
from gangopt.replay.policies import SchedulingPolicy, make_policy
from gangopt.replay.report import hours
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.sweep import variant
from gangopt.replay.workload import Workload, load_workload
from gangopt.schema import LookAhead, Plan, Round
from gangopt.solve import cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ROOT / "instances" / "workloads"

OURS = "gangopt"
POLICIES: tuple[str, ...] = (
    "gangopt",
    "greedy",
    "fifo_first_fit",
    "koordinator_like",
    "volcano_like",
    "kueue_like",
    "slurm_backfill_like",
)
"""gangopt first, then greedy and the five emulations: its six peers."""

HEADLINE: tuple[str, ...] = ("mean_wait", "p95_wait", "p99_wait", "mean_jct", "deadline_misses")
"""The metrics of the 'no peer better on more than one' and 'worst on none' targets (lower is better)."""


@dataclass(frozen=True)
class Replay:
    name: str
    workload: str
    """File under instances/workloads/."""
    nodes: int
    first: int | None = None
    """Replay only the first N jobs by arrival (``--first``)."""

    def command(self) -> str:
        first = f" --first {self.first}" if self.first else ""
        return f"gangopt simulate instances/workloads/{self.workload}{first} --nodes {self.nodes}"


REPLAYS: tuple[Replay, ...] = (
    Replay("openb-11M-12M", "openb-11M-12M.json", nodes=2),
    Replay("philly-6214e9", "philly-6214e9.json", nodes=6, first=600),
    Replay("philly-b436b2", "philly-b436b2-06000.json", nodes=6),
)
QUICK_FIRST: dict[str, int] = {"openb-11M-12M": 300, "philly-6214e9": 200, "philly-b436b2": 200}
JITTER = 5.0
"""Default ``--jitter`` (seconds) of seeds > 0: a few seconds, a twelfth of a 60-s round. It
moves the jobs that arrive within 5 s of a round's batching boundary into the next or previous
round and reorders jobs that arrive within seconds of each other, and leaves the load, job mix
and every wait's scale as they are."""


@dataclass(frozen=True)
class Outcome:
    """What the targets compare, per policy: seconds, counts."""

    mean_wait: float
    p95_wait: float
    p99_wait: float
    mean_jct: float
    deadline_misses: int
    preemptions: int
    p2_p95_wait: float | None
    """p95 queueing delay of priority-2 jobs; None when the workload has none."""
    largest_p95_wait: float
    jobs_per_cpu_second: float = 0.0

    @classmethod
    def of(cls, m: Metrics, replay_cpu: float) -> Outcome:
        p2 = m.queueing_delay_by_priority.get(2)
        return cls(
            mean_wait=m.queueing_delay.mean,
            p95_wait=m.queueing_delay.p95,
            p99_wait=m.queueing_delay.p99,
            mean_jct=m.jct.mean,
            deadline_misses=m.deadline_misses,
            preemptions=m.preemptions,
            p2_p95_wait=None if p2 is None else p2.p95,
            largest_p95_wait=m.queueing_delay_largest_class.p95,
            jobs_per_cpu_second=m.arrived / replay_cpu if replay_cpu > 0 else 0.0,
        )


@dataclass(frozen=True)
class Target:
    name: str
    passed: bool
    detail: str


def _gap(peer: float, ours: float) -> str:
    """How much lower the peer's value is than ours, relative to ours ("-12 %")."""
    if not ours:
        return f"{peer:g} vs {ours:g}"
    share = 100 * (peer - ours) / ours
    return f"{share:+.1f} %" if abs(share) >= 0.1 else f"{share:+.3f} %"


def _better(a: float, b: float) -> bool:
    """``a`` strictly lower than ``b`` beyond float noise."""
    return a < b - 1e-9 * max(1.0, abs(b))


def evaluate(outcomes: Mapping[str, Outcome], interval: float) -> list[Target]:
    """Issue 12's targets for :data:`OURS` against every other policy in ``outcomes``.

    1. No peer better on more than one of :data:`HEADLINE` (strictly lower).
    2. gangopt worst on none of them: not the highest value of all policies unless every
       policy has that value (ties at the top with a peer count as worst; all equal does not).
    3. Preemptions <= greedy's (skipped when greedy did not run).
    4. Priority-2 p95 wait <= 2 rounds (2 x ``interval``); passes when there is no priority 2.
    5. Largest-size-class p95 wait <= 1.1 x the best peer's.
    6. (issue 12, "Faster replays") replay jobs per CPU second >= half of greedy's; CPU, not
       wall, because the machine is shared (skipped when greedy did not run).
    """
    ours = outcomes[OURS]
    peers = {name: o for name, o in outcomes.items() if name != OURS}
    targets: list[Target] = []
    if not peers:
        return targets
    beaten = {name: [k for k in HEADLINE if _better(getattr(o, k), getattr(ours, k))] for name, o in peers.items()}
    offenders = {name: ks for name, ks in beaten.items() if len(ks) > 1}

    def gaps(name: str, keys: Sequence[str]) -> str:
        return ", ".join(f"{k} {_gap(getattr(peers[name], k), getattr(ours, k))}" for k in keys)

    targets.append(
        Target(
            "no peer better on more than one of mean/p95/p99 wait, mean JCT, deadline misses",
            not offenders,
            "; ".join(f"{n} better on {gaps(n, ks)}" for n, ks in offenders.items())
            or "at most one each: "
            + ("; ".join(f"{n} on {gaps(n, ks)}" for n, ks in beaten.items() if ks) or "no peer better on any"),
        )
    )
    worst = []
    for k in HEADLINE:
        values = [getattr(o, k) for o in outcomes.values()]
        if getattr(ours, k) >= max(values) and _better(min(values), getattr(ours, k)):
            worst.append(k)
    targets.append(Target("gangopt worst on none of them", not worst, ", ".join(worst) or "-"))
    if "greedy" in peers:
        g = peers["greedy"].preemptions
        targets.append(Target("preemptions <= greedy's", ours.preemptions <= g, f"{ours.preemptions} vs greedy {g}"))
    bound = 2 * interval
    p2 = ours.p2_p95_wait
    targets.append(
        Target(
            f"priority-2 p95 wait <= 2 rounds ({bound:g} s)",
            p2 is None or p2 <= bound,
            "no priority-2 job" if p2 is None else hours(p2),
        )
    )
    best_name, best = min(((n, o.largest_p95_wait) for n, o in peers.items()), key=lambda item: item[1])
    targets.append(
        Target(
            "largest-size-class p95 wait <= 1.1 x the best peer's",
            ours.largest_p95_wait <= 1.1 * best + 1e-9,
            f"{hours(ours.largest_p95_wait)} vs {best_name} {hours(best)}",
        )
    )
    if "greedy" in peers:
        ratio = (
            ours.jobs_per_cpu_second / peers["greedy"].jobs_per_cpu_second
            if peers["greedy"].jobs_per_cpu_second
            else 0.0
        )
        targets.append(
            Target(
                "replay speed >= half of greedy's (jobs per CPU second)",
                ratio >= 0.5,
                f"{ours.jobs_per_cpu_second:.0f} vs greedy {peers['greedy'].jobs_per_cpu_second:.0f} ({ratio:.2f}x)",
            )
        )
    return targets


# ----------------------------------------------------------------------------- across seeds


@dataclass(frozen=True)
class Spread:
    """One metric of one policy across seeds."""

    median: float
    low: float
    high: float
    seeds: int
    """Seeds with a value (a priority-2 wait is None on a seed without priority-2 jobs)."""


def spread(values: Sequence[float]) -> Spread:
    """Median, min and max of ``values`` (at least one)."""
    if not values:
        raise ValueError("spread of no values")
    return Spread(float(statistics.median(values)), float(min(values)), float(max(values)), len(values))


Row = Mapping[str, float | None]
"""One policy's numbers on one seed: :class:`Outcome`'s fields and the CPU/wall seconds."""

COST_FIELDS: tuple[str, ...] = ("policy_wall_seconds", "policy_cpu_seconds", "replay_cpu_seconds")


def summarize(rows: Mapping[int, Mapping[str, Row]]) -> dict[str, dict[str, Spread]]:
    """Per policy and metric, the :class:`Spread` over the seeds (``rows[seed][policy]``) that
    ran the policy; a metric with no value on any seed is left out. Policies keep the order in
    which they first appear."""
    out: dict[str, dict[str, Spread]] = {}
    policies = list(dict.fromkeys(name for per_seed in rows.values() for name in per_seed))
    for name in policies:
        per_policy = [per_seed[name] for per_seed in rows.values() if name in per_seed]
        keys = list(dict.fromkeys(k for row in per_policy for k in row))
        values = {k: [float(v) for row in per_policy if (v := row.get(k)) is not None] for k in keys}
        out[name] = {k: spread(vs) for k, vs in values.items() if vs}
    return out


@dataclass(frozen=True)
class Tally:
    """One target across seeds."""

    name: str
    passed: tuple[int, ...]
    """Seeds it passed on."""
    seeds: tuple[int, ...]
    """Seeds it was judged on."""

    @property
    def always(self) -> bool:
        return len(self.passed) == len(self.seeds)


def target_passes(targets: Mapping[int, Sequence[Target]]) -> list[Tally]:
    """Per target (by name, in the order first seen), the seeds it passed on out of those that
    judged it (a target judged on some seeds only, e.g. with greedy missing, counts those)."""
    names = list(dict.fromkeys(t.name for ts in targets.values() for t in ts))
    tallies = []
    for name in names:
        judged = [(seed, t.passed) for seed, ts in targets.items() for t in ts if t.name == name]
        tallies.append(Tally(name, tuple(s for s, ok in judged if ok), tuple(s for s, _ in judged)))
    return tallies


def parse_seeds(text: str) -> list[int]:
    """``"3"``: seeds 0, 1, 2; ``"0,4,9"`` (a comma anywhere, ``"5,"`` too): those seeds."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()] if "," in text else list(range(int(text)))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes N or a comma list of seeds, got {text!r}") from None
    if not seeds or any(seed < 0 for seed in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds needs at least one seed, none negative or repeated, got {text!r}")
    return seeds


# ----------------------------------------------------------------------------- running


class CpuMeter:
    """A policy that sums the wall and CPU seconds of the plans it returns (``plan.stats``:
    this process and CP-SAT's child processes, :func:`gangopt.solve.run`)."""

    def __init__(self, policy: SchedulingPolicy) -> None:
        self.policy = policy
        self.validated = getattr(policy, "validated", False)
        self.wall = 0.0
        self.cpu = 0.0

    def __call__(self, rnd: Round) -> Plan:
        plan = self.policy(rnd)
        self.wall += plan.stats.total_seconds
        self.cpu += plan.stats.cpu_seconds
        return plan


@dataclass(frozen=True)
class Run:
    policy: str
    metrics: Metrics
    replay_cpu: float
    """CPU seconds of the whole replay (simulation, policy, validation): this process and its
    finished children."""
    solver_cpu: float
    solver_wall: float
    reused: bool = False
    """Taken from an earlier ``--json`` file (``--reuse``), not replayed in this run."""

    @property
    def outcome(self) -> Outcome:
        return Outcome.of(self.metrics, self.replay_cpu)

    def row(self) -> dict[str, float | None]:
        """What :func:`summarize` aggregates: the outcome and the CPU/wall seconds."""
        return {
            **asdict(self.outcome),
            "policy_wall_seconds": self.solver_wall,
            "policy_cpu_seconds": self.solver_cpu,
            "replay_cpu_seconds": self.replay_cpu,
        }


def load(replay: Replay, first: int | None) -> Workload:
    workload = load_workload(WORKLOADS / replay.workload)
    if first is not None:
        order = sorted(range(len(workload.jobs)), key=lambda i: (workload.jobs[i].arrival, i))[:first]
        workload = workload.model_copy(update={"jobs": [workload.jobs[i] for i in sorted(order)]})
    return workload


def run_policy(workload: Workload, nodes: int, policy: str, config: SimConfig) -> Run:
    cluster = parametric_cluster(nodes)
    meter = CpuMeter(make_policy(policy, workload))
    cpu = cpu_seconds()
    result = simulate(workload, cluster, meter, config, name=policy)
    replay_cpu = cpu_seconds() - cpu
    return Run(policy, compute_metrics(result), replay_cpu, meter.cpu, meter.wall)


def reused(
    old: dict[str, Any] | None,
    command: str,
    config: SimConfig,
    ran: Sequence[str],
    seed: int = 0,
    jitter: float = JITTER,
) -> list[Run]:
    """The runs of ``old`` (one replay of an earlier ``--json``) on ``seed`` for policies not in
    ``ran``; refuses a file made with another command or other settings, or without that seed
    (a file from before ``--seeds`` holds seed 0 only)."""
    if old is None:
        return []
    settings = (old.get("command"), old.get("interval"), old.get("time_limit"))
    if settings != (command, config.interval, config.time_limit):
        raise SystemExit(
            f"--reuse: the file's replay was {settings}, this one is {(command, config.interval, config.time_limit)}"
        )
    entry = old.get("seeds", {}).get(str(seed)) if "seeds" in old else (old if seed == 0 else None)
    if entry is None:
        raise SystemExit(f"--reuse: the file has no seed {seed} of {command!r}")
    if seed != 0 and old.get("jitter") != jitter:
        raise SystemExit(f"--reuse: the file's seeds jitter arrivals by {old.get('jitter')} s, this run by {jitter} s")
    mine = None if config.lookahead is None else config.lookahead.model_dump(mode="json")
    if ran and OURS in entry["runs"] and OURS not in ran and old.get("lookahead") != mine:  # not for --reprint
        raise SystemExit(f"--reuse: the file's {OURS} ran with look-ahead {old.get('lookahead')}, this run has {mine}")
    return [
        Run(
            policy=name,
            metrics=Metrics.model_validate(data["metrics"]),
            replay_cpu=data["replay_cpu_seconds"],
            solver_cpu=data["policy_cpu_seconds"],
            solver_wall=data["policy_wall_seconds"],
            reused=True,
        )
        for name, data in entry["runs"].items()
        if name not in ran
    ]


# ----------------------------------------------------------------------------- printing


def _class_label(m: Metrics) -> str:
    c = m.largest_size_class
    n = m.queueing_delay_largest_class.count
    if c <= 0:
        return f"CPU-only and up, {n} jobs"
    lower = c // 2
    return f"> {lower:g} GPUs, {n} jobs" if c > 1 else f"all GPU jobs, {n} jobs"


def table(runs: Sequence[Run]) -> str:
    """One Markdown table: a row per policy."""
    label = _class_label(runs[0].metrics) if runs else ""
    mark = any(not r.reused for r in runs)  # a reprint reuses every row: no marks then
    lines = [
        "| policy | mean wait | p95 wait | p99 wait | mean JCT | deadline misses | preemptions (max/job) "
        f"| priority-2 p95 wait | largest class p95 wait ({label}) | policy wall s | policy CPU s "
        "| replay CPU s | jobs/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        m = r.metrics
        p2 = m.queueing_delay_by_priority.get(2)
        lines.append(
            f"| {r.policy}{' (reused)' if r.reused and mark else ''} | {hours(m.queueing_delay.mean)} "
            f"| {hours(m.queueing_delay.p95)} "
            f"| {hours(m.queueing_delay.p99)} | {hours(m.jct.mean)} "
            f"| {m.deadline_misses} of {m.deadlines} | {m.preemptions} ({m.max_preemptions_per_job}) "
            f"| {'-' if p2 is None else hours(p2.p95)} | {hours(m.queueing_delay_largest_class.p95)} "
            f"| {r.solver_wall:.1f} | {r.solver_cpu:.1f} | {r.replay_cpu:.1f} | {m.jobs_per_second:.0f} |"
        )
    return "\n".join(lines) + "\n"


def targets_table(targets: Sequence[Target]) -> str:
    lines = ["| target (gangopt) | result | detail |", "|---|---|---|"]
    lines += [f"| {t.name} | {'PASS' if t.passed else 'FAIL'} | {t.detail} |" for t in targets]
    return "\n".join(lines) + "\n"


SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("mean_wait", "mean wait"),
    ("p95_wait", "p95 wait"),
    ("p99_wait", "p99 wait"),
    ("mean_jct", "mean JCT"),
    ("deadline_misses", "deadline misses"),
    ("preemptions", "preemptions"),
    ("p2_p95_wait", "priority-2 p95 wait"),
    ("largest_p95_wait", "largest class p95 wait"),
    ("policy_wall_seconds", "policy wall s"),
    ("policy_cpu_seconds", "policy CPU s"),
    ("replay_cpu_seconds", "replay CPU s"),
)
SECONDS = {"mean_wait", "p95_wait", "p99_wait", "mean_jct", "p2_p95_wait", "largest_p95_wait"}


def _cell(key: str, sp: Spread | None, seeds: int) -> str:
    if sp is None:
        return "-"

    def fmt(value: float) -> str:
        if key in SECONDS:
            return hours(value)
        return f"{value:.1f}" if key in COST_FIELDS else f"{value:g}"

    low, high = fmt(sp.low), fmt(sp.high)
    cell = fmt(sp.median) if low == high else f"{fmt(sp.median)} [{low}, {high}]"
    return cell if sp.seeds == seeds else f"{cell} ({sp.seeds} seeds)"


def summary_table(summary: Mapping[str, Mapping[str, Spread]], seeds: int, reused: Sequence[str] = ()) -> str:
    """One Markdown table: a row per policy, each cell the median [min, max] across seeds (a
    single value when every seed gave the same)."""
    lines = [
        "| policy | " + " | ".join(label for _, label in SUMMARY_COLUMNS) + " |",
        "|---|" + "---:|" * len(SUMMARY_COLUMNS),
    ]
    for name, metrics in summary.items():
        cells = [_cell(k, metrics.get(k), seeds) for k, _ in SUMMARY_COLUMNS]
        lines.append(f"| {name}{' (reused)' if name in reused else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def tally_table(tallies: Sequence[Tally]) -> str:
    lines = ["| target (gangopt) | seeds passed | failed on seeds |", "|---|---:|---|"]
    for t in tallies:
        failed = [s for s in t.seeds if s not in t.passed]
        lines.append(f"| {t.name} | {len(t.passed)} of {len(t.seeds)} | {', '.join(map(str, failed)) or '-'} |")
    return "\n".join(lines) + "\n"


def _run_json(r: Run) -> dict[str, Any]:
    return {
        "metrics": r.metrics.model_dump(mode="json"),
        "replay_cpu_seconds": r.replay_cpu,
        "policy_cpu_seconds": r.solver_cpu,
        "policy_wall_seconds": r.solver_wall,
        "outcome": asdict(r.outcome),
        "reused": r.reused,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="replay short prefixes (plumbing check, not the benchmark)"
    )
    parser.add_argument("--policy", action="append", choices=POLICIES, help="only this policy (repeatable)")
    parser.add_argument(
        "--replay", action="append", choices=[r.name for r in REPLAYS], help="only this replay (repeatable)"
    )
    parser.add_argument("--first", type=int, metavar="N", help="replay the first N jobs of every replay")
    parser.add_argument("--interval", type=float, default=60.0, metavar="S", help="round interval (default 60)")
    parser.add_argument("--time-limit", type=float, default=1.0, metavar="S", help="CP-SAT budget per round")
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        metavar="N|S,S,...",
        help="replay under seeds 0..N-1 (or the listed seeds) and report median [min, max] across them "
        "(default: seed 0, the trace as it is)",
    )
    parser.add_argument(
        "--jitter",
        type=float,
        default=JITTER,
        metavar="S",
        help=f"seeds > 0 move each arrival by up to +-S seconds (default {JITTER:g})",
    )
    parser.add_argument(
        "--lookahead", metavar="JSON", help="gangopt's look-ahead settings, e.g. '{\"commit_hours\": 12}'"
    )
    parser.add_argument("--json", metavar="OUT", help="write every metric, the CPU seconds and the targets here")
    parser.add_argument(
        "--reuse", metavar="OLD.json", help="take the policies not run now from this earlier --json output"
    )
    parser.add_argument(
        "--reprint", metavar="OLD.json", help="replay nothing: print the tables and targets of an earlier --json output"
    )
    args = parser.parse_args(argv)
    if args.jitter < 0:
        parser.error("--jitter must be >= 0")
    if args.reprint:
        if args.policy or args.reuse:
            parser.error("--reprint takes neither --policy nor --reuse")
        args.reuse, args.policy = args.reprint, []
    previous: dict[str, Any] = json.loads(Path(args.reuse).read_text(encoding="utf-8")) if args.reuse else {}
    policies = list(dict.fromkeys(POLICIES if args.policy is None else args.policy))
    replays = [r for r in REPLAYS if not args.replay or r.name in args.replay]
    try:
        lookahead = None if args.lookahead is None else LookAhead.model_validate_json(args.lookahead)
    except ValueError as exc:
        parser.error(f"--lookahead: {exc}")
    config = SimConfig(interval=args.interval, time_limit=args.time_limit, lookahead=lookahead)
    out: dict[str, Any] = {}
    started = time.perf_counter()
    for replay in replays:
        if args.reprint and replay.name not in previous:
            continue
        seeds: list[int] = args.seeds or [0]
        if args.reprint and args.seeds is None and "seeds" in previous[replay.name]:
            seeds = [int(s) for s in previous[replay.name]["seeds"]]
        first = args.first or (QUICK_FIRST[replay.name] if args.quick else replay.first)
        base = load(replay, first)
        command = Replay(replay.name, replay.workload, replay.nodes, first).command()
        rows: dict[int, dict[str, Row]] = {}
        judged: dict[int, list[Target]] = {}
        per_seed: dict[str, Any] = {}
        all_reused = set(POLICIES)
        for seed in seeds:
            workload = variant(base, seed, args.jitter)
            seeded = dataclasses.replace(config, seed=seed)
            runs = []
            for policy in policies:
                t0 = time.perf_counter()
                runs.append(run_policy(workload, replay.nodes, policy, seeded))
                print(
                    f"{replay.name} seed {seed} {policy}: {time.perf_counter() - t0:.1f} s wall, "
                    f"{runs[-1].replay_cpu:.1f} s CPU",
                    file=sys.stderr,
                    flush=True,
                )
            runs += reused(previous.get(replay.name), command, config, [r.policy for r in runs], seed, args.jitter)
            runs.sort(key=lambda r: POLICIES.index(r.policy))
            all_reused &= {r.policy for r in runs if r.reused}
            outcomes = {r.policy: r.outcome for r in runs}
            targets = evaluate(outcomes, args.interval) if OURS in outcomes else []
            rows[seed] = {r.policy: r.row() for r in runs}
            judged[seed] = targets
            where = "" if seeds == [0] else f", seed {seed}" + ("" if seed == 0 else f" (arrivals +-{args.jitter:g} s)")
            print(f"### {replay.name}: {len(workload.jobs)} jobs on {replay.nodes} nodes{where}\n")
            print(f"`{command}` (every policy, one process)\n")
            print(table(runs))
            if targets:
                print(targets_table(targets))
            per_seed[str(seed)] = {
                "runs": {r.policy: _run_json(r) for r in runs},
                "targets": [asdict(t) for t in targets],
            }
        summary = summarize(rows)
        tallies = target_passes(judged)
        if len(seeds) > 1:
            print(f"### {replay.name}: median [min, max] over seeds {', '.join(map(str, seeds))}\n")
            marked = sorted(all_reused) if set(summary) - all_reused else []  # a reprint: no marks
            print(summary_table(summary, len(seeds), marked))
            if tallies:
                print(tally_table(tallies))
                print(f"{sum(t.always for t in tallies)} of {len(tallies)} targets pass on every seed\n")
        first_seed = per_seed[str(seeds[0])]
        out[replay.name] = {
            "command": command,
            "interval": config.interval,
            "time_limit": config.time_limit,
            "jobs": len(base.jobs),
            "nodes": replay.nodes,
            "runs": first_seed["runs"],
            "targets": first_seed["targets"],
            "jitter": args.jitter,
            "lookahead": None if lookahead is None else lookahead.model_dump(mode="json"),
            "seeds": per_seed,
            "summary": {name: {k: asdict(sp) for k, sp in m.items()} for name, m in summary.items()},
            "target_passes": [asdict(t) for t in tallies],
        }
    print(f"total {time.perf_counter() - started:.0f} s wall", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
