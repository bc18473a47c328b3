"""``gangopt sweep`` and ``gangopt capacity``: many replays, in parallel, and the cluster size
that meets SLOs (see :mod:`gangopt.replay.sweep` and :mod:`gangopt.replay.capacity`).

Registered by :mod:`gangopt.cli`; same error contract (bad flags -> exit 2, naming the flag).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

from gangopt.cli.simulate import (
    add_cluster_options,
    add_sim_options,
    checked_workload,
    cluster_spec,
    load_sliced_workload,
    sim_config,
)
from gangopt.errors import InputError, Problem
from gangopt.replay.capacity import (
    CompactionResult,
    Evaluator,
    InflationResult,
    SizeVerdict,
    brute_force,
    peak_compaction,
    peak_inflation,
    peak_jobs,
    peak_reference,
    replay_compaction,
    size_cluster,
    slo_inflation,
)
from gangopt.replay.policies import POLICY_NAMES
from gangopt.replay.report import capacity_text, hours, sweep_table, write_capacity_report, write_sweep_report
from gangopt.replay.simulation import PROGRESS_SMOOTHING
from gangopt.replay.slo import SLO, format_value, parse_slo
from gangopt.replay.sweep import ClusterSpec, Outcome, sweep
from gangopt.replay.workload import Workload

CAPACITY_COST = (
    "Cost: about 8x greedy's CPU time (first 1,000 jobs of the Philly sample, 5 sizes: 77 s against "
    "9.4 s of CPU; same answer, 8 nodes); --policy greedy gives a fast first estimate."
)
"""The price of sizing for gangopt, measured (docs/capacity-planning.md, 'Which policy to size for')."""

INFLATION_TOLERANCE = 0.05
"""``--inflation replay`` narrows the largest compression to within 5 %."""


class SearchBar:
    """One progress bar over a whole sizing search, with an ETA (``--progress``): the sizes
    decided so far against an estimate of the sizes still to decide, refined after every step,
    then the inflation measure's tries (each a replay set like a size's, so one step each).
    Before, each step drew its own '0/1' bar and a search of several minutes had no overall
    progress (issue 16).

    The estimate follows :func:`gangopt.replay.capacity.size_cluster`: while no size meets, one
    more doubling plus the bisection below it; once a size meets, the k-section between the
    largest failing and the smallest meeting size, ``k`` sizes per step."""

    def __init__(
        self, min_nodes: int, max_nodes: int, per_step: int, inflation: tuple[float, float] | None = None
    ) -> None:
        """``inflation``: (largest factor, tolerance) when the inflation measure will run after
        the search, so the bar's first total counts its tries (:meth:`inflation_remaining`)."""
        from tqdm import tqdm

        self.failing = min_nodes - 1
        self.meeting: int | None = None
        self.max_nodes = max_nodes
        self.per_step = max(1, per_step)
        self.inflation_max = inflation[0] if inflation is not None else 8.0
        self.inflation_tolerance: float | None = inflation[1] if inflation is not None else None
        self.tried: list[tuple[float, bool]] = []
        self.bar = tqdm(
            total=self.remaining() + self.inflation_remaining(),
            unit="step",
            desc="capacity search",
            file=sys.stderr,
            smoothing=PROGRESS_SMOOTHING,
        )

    @classmethod
    def inflation_only(cls, per_step: int, inflation: tuple[float, float]) -> SearchBar:
        """A bar over the inflation tries alone (after ``--brute-force``, which had its own):
        a search range that is already decided (``min_nodes > max_nodes``) leaves no sizes."""
        bar = cls(2, 1, per_step, inflation)
        bar.bar.set_description("capacity: inflation")
        return bar

    def _section(self, gap: int) -> int:
        """Sizes a k-section decides inside a gap of ``gap`` nodes."""
        if gap <= 1:
            return 0
        steps = math.ceil(math.log(gap) / math.log(self.per_step + 1))
        return min(gap - 1, steps * self.per_step)

    def remaining(self) -> int:
        if self.meeting is not None:
            return self._section(self.meeting - self.failing)
        if self.failing >= self.max_nodes:
            return 0
        probe = min(self.max_nodes, max(1, 2 * self.failing))
        return 1 + self._section(probe - self.failing)

    def update(self, verdicts: list[Any]) -> None:
        for v in verdicts:
            if v.meets:
                self.meeting = v.nodes if self.meeting is None else min(self.meeting, v.nodes)
            else:
                self.failing = max(self.failing, v.nodes)
        self.bar.total = self.bar.n + len(verdicts) + self.remaining() + self.inflation_remaining()
        self.bar.update(len(verdicts))

    # The inflation measure (``--inflation replay``) runs after the search, one replay set per
    # factor tried; the bar counts its tries as steps too, so the ETA covers the whole run.

    def _halvings(self, ratio: float) -> int:
        """Tries a geometric bisection needs to narrow ``hi / lo = ratio`` to the tolerance."""
        assert self.inflation_tolerance is not None
        if ratio <= 1 + self.inflation_tolerance:
            return 0
        return math.ceil(math.log2(math.log(ratio) / math.log1p(self.inflation_tolerance)))

    def inflation_remaining(self) -> int:
        if self.inflation_tolerance is None:
            return 0
        meets = [f for f, ok in self.tried if ok]
        fails = [f for f, ok in self.tried if not ok]
        if meets and fails:
            return self._halvings(min(fails) / max(meets))
        if meets:  # doubling up from 1: one more try, then a bisection over a factor of 2
            return 0 if max(meets) * 2 > self.inflation_max else 1 + self._halvings(2.0)
        if fails:  # halving down from 1
            return 1 + self._halvings(2.0)
        return 2 + self._halvings(2.0)  # 1.0 and one doubling or halving, then the bisection

    def inflation_try(self, factor: float, meets: bool) -> None:
        self.tried.append((factor, meets))
        self.bar.set_description("capacity: inflation")
        self.bar.total = self.bar.n + 1 + self.inflation_remaining()
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def add_parsers(sub: Any) -> None:
    """Register ``sweep`` and ``capacity`` on the CLI's subparsers."""
    p = sub.add_parser("sweep", help="replay a workload for policies x cluster sizes x seeds, in parallel")
    p.add_argument("workload", metavar="WORKLOAD.json")
    p.add_argument(
        "--policy",
        "--solver",
        dest="policy",
        choices=POLICY_NAMES,
        action="append",
        help=f"repeatable; default gangopt, as for capacity (CP-SAT with --time-limit per round). {CAPACITY_COST}",
    )
    p.add_argument("--nodes", type=int, nargs="+", required=True, metavar="N", help="cluster sizes (node counts)")
    add_cluster_options(p)
    _add_run_options(p)
    p.add_argument("--slo", action="append", default=[], metavar="SLO", help="also report these SLOs per run")
    p.set_defaults(func=run_sweep)

    p = sub.add_parser("capacity", help="smallest cluster meeting SLOs; cluster compaction and workload inflation")
    p.add_argument("workload", metavar="WORKLOAD.json")
    p.add_argument(
        "--slo",
        action="append",
        required=True,
        metavar="SLO",
        help="MEASURE[FILTER]OP VALUE, repeatable: measures pNN_wait, pNN_jct, mean_wait, max_wait, mean_jct, "
        "max_jct, unstarted, unfinished, deadline_misses, deadline_miss_rate, preempted_jobs; filters on priority "
        "or queue; times in s, m, h, d. E.g. 'p95_wait<=30m', 'p100_wait[priority>=2]<=300', "
        "'deadline_miss_rate<=5%%' (grammar: docs/capacity-planning.md, gangopt/replay/slo.py)",
    )
    p.add_argument(
        "--policy",
        "--solver",
        dest="policy",
        choices=POLICY_NAMES,
        default="gangopt",
        help="the policy the cluster is sized for (default: gangopt, i.e. CP-SAT with --time-limit per round). "
        f"{CAPACITY_COST} Size for the scheduler you will run: greedy's or a peer's answer can differ by a node",
    )
    add_cluster_options(p)
    _add_run_options(p)
    p.add_argument(
        "--seed-share",
        type=float,
        default=1.0,
        metavar="Q",
        help="share of seeds that must meet each SLO (default 1: every seed)",
    )
    p.add_argument("--min-nodes", type=int, default=1, metavar="N", help="smallest size searched (default 1)")
    p.add_argument("--max-nodes", type=int, default=1024, metavar="N", help="largest size searched (default 1024)")
    p.add_argument("--brute-force", action="store_true", help="evaluate every size from --min-nodes to --max-nodes")
    p.add_argument(
        "--compaction",
        choices=["peak", "replay", "none"],
        default="peak",
        help="cluster compaction: peak snapshot packing (default), SLO replay (slow), or none",
    )
    p.add_argument("--inflation", choices=["peak", "replay", "none"], default="replay", help="default: replay")
    p.add_argument("--repeats", type=int, default=5, metavar="K", help="node permutations for compaction (default 5)")
    p.add_argument("--max-inflation", type=float, default=8.0, metavar="F", help="largest factor tried (default 8)")
    p.set_defaults(func=run_capacity)


def _add_run_options(p: argparse.ArgumentParser) -> None:
    add_sim_options(p)
    p.add_argument("--seeds", type=int, default=1, metavar="K", help="seeds 0..K-1 (seed 0: the trace as is)")
    p.add_argument(
        "--jitter", type=float, default=600.0, metavar="S", help="seeds > 0 move arrivals by up to +-S s (default 600)"
    )
    p.add_argument("--workers", type=int, metavar="N", help="local processes (default: CPU count; 1 = in-process)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on this Dask scheduler (pip install 'gangopt[dask]')")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write a report folder (CSV/JSON, PNG plots, report.md, report.html with the plots)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument(
        "--progress",
        action="store_true",
        help="one progress bar with ETA over the whole run on stderr (results come on stdout as found)",
    )


def _slos(texts: list[str]) -> tuple[SLO, ...]:
    problems, out = [], []
    for text in texts:
        try:
            out.append(parse_slo(text))
        except ValueError as error:
            problems.append(Problem("--slo", str(error)))
    if problems:
        raise InputError(problems, "arguments")
    return tuple(out)


def _check(args: argparse.Namespace) -> None:
    checks = [("--seeds", args.seeds >= 1), ("--jitter", args.jitter >= 0)]
    if args.workers is not None:
        checks.append(("--workers", args.workers >= 1))
    problems = [Problem(flag, "invalid value") for flag, ok in checks if not ok]
    if problems:
        raise InputError(problems, "arguments")


def outcome_line(out: Outcome, slos: tuple[SLO, ...]) -> str:
    """One replay of a sweep in a line: what ran, its waits, and each SLO's value and verdict."""
    m, t = out.metrics, out.task
    q = m.queueing_delay
    cells = [
        f"wait mean {hours(q.mean)}, p95 {hours(q.p95)}, p99 {hours(q.p99)}",
        f"unstarted {m.unstarted}",
        f"util {m.utilization_window:.1%}",
    ]
    cells += [
        f"{s.label} {format_value(s, v)} {'ok' if ok else 'missed'}"
        for s, v, ok in zip(slos, out.slo_values, out.slo_met, strict=True)
    ]
    return f"done: {t.policy}, {t.nodes} nodes, seed {t.seed}: {', '.join(cells)}"


def run_sweep(args: argparse.Namespace) -> int:
    _check(args)
    config = sim_config(args)
    workload, positions = load_sliced_workload(args)
    spec = cluster_spec(args)
    if any(n < 0 for n in args.nodes):
        raise InputError([Problem("--nodes", "sizes must be >= 0")], "arguments")
    workload = checked_workload(args, workload, spec.build(max(args.nodes)), positions)
    slos = _slos(args.slo)
    policies = args.policy or ["gangopt"]
    total = len(policies) * len(args.nodes) * args.seeds
    started = time.perf_counter()
    done: list[Outcome] = []

    def found(out: Outcome) -> None:
        """Each replay's result as soon as it is known, on stdout unless --json (a sweep of
        gangopt replays runs for minutes; the table comes at the end)."""
        done.append(out)
        if args.json:
            return
        print(f"{outcome_line(out, slos)} [{len(done)}/{total}, {time.perf_counter() - started:.0f} s]", flush=True)

    outcomes = sweep(
        workload,
        policies,
        args.nodes,
        range(args.seeds),
        cluster=spec,
        config=config,
        jitter=args.jitter,
        slos=slos,
        workers=args.workers,
        dask=args.dask,
        progress=args.progress,
        on_done=found,
    )
    if args.out:
        write_sweep_report(args.out, outcomes)
    if args.json:
        from gangopt.replay.sweep import sweep_rows

        sys.stdout.write(json.dumps(sweep_rows(outcomes), indent=2) + "\n")
    else:
        sys.stdout.write(sweep_table(outcomes))
    return 0


def _measures(
    args: argparse.Namespace,
    ev: Evaluator,
    workload: Workload,
    spec: ClusterSpec,
    nodes: int | None,
    on_try: Callable[[float, SizeVerdict], None],
) -> tuple[CompactionResult | None, InflationResult | None, list[str]]:
    """Compaction and inflation at the answer ``nodes`` (Verma et al.), as the flags ask."""
    compaction: CompactionResult | None = None
    inflation: InflationResult | None = None
    extra: list[str] = []
    if nodes is None:
        return compaction, inflation, extra
    pack_limit = max(ev.config.time_limit, 10.0)
    if args.compaction == "peak":
        t_peak, jobs = peak_jobs(workload)
        reference = peak_reference(workload, spec, nodes, args.max_nodes, time_limit=pack_limit)
        gpus = sum(j.gpus() for j in jobs)
        extra.append(f"peak demand (every job started on arrival): {len(jobs)} jobs, {gpus:g} GPUs at t={t_peak:.0f}s")
        if reference is None:
            extra.append(f"peak snapshot does not fit {args.max_nodes} nodes; no compaction")
        else:
            compaction = peak_compaction(workload, spec.build(reference), args.repeats, time_limit=pack_limit)
    elif args.compaction == "replay":
        compaction = replay_compaction(ev, nodes, args.repeats)
    if args.inflation == "replay":
        inflation = slo_inflation(ev, nodes, args.max_inflation, INFLATION_TOLERANCE, on_try=on_try)
    elif args.inflation == "peak":
        inflation = peak_inflation(workload, spec.build(nodes), args.max_inflation, time_limit=pack_limit)
    return compaction, inflation, extra


def run_capacity(args: argparse.Namespace) -> int:
    _check(args)
    if not 1 <= args.min_nodes <= args.max_nodes:
        raise InputError([Problem("--min-nodes", "need 1 <= --min-nodes <= --max-nodes")], "arguments")
    if not 0 < args.seed_share <= 1:
        raise InputError([Problem("--seed-share", "must be in (0, 1]")], "arguments")
    config = sim_config(args)
    workload, positions = load_sliced_workload(args)
    spec = cluster_spec(args)
    slos = _slos(args.slo)
    workload = checked_workload(args, workload, spec.build(args.max_nodes), positions)
    ev = Evaluator(
        workload,
        slos,
        policy=args.policy,
        cluster=spec,
        config=config,
        seeds=tuple(range(args.seeds)),
        seed_share=args.seed_share,
        jitter=args.jitter,
        workers=args.workers,
        dask=args.dask,
        progress=args.progress and args.brute_force,  # a search gets one bar over all of it instead
        keep_timeline=bool(args.out),
    )
    searching = args.progress and not args.brute_force
    measures = (args.max_inflation, INFLATION_TOLERANCE) if args.inflation == "replay" else None
    bar = SearchBar(args.min_nodes, args.max_nodes, ev.parallel_sizes, measures) if searching else None
    started = time.perf_counter()

    def say(what: str, v: Any, simulations: int | None = None) -> None:
        """A verdict as soon as it is known (a gangopt sizing runs for minutes; the table comes
        at the end), on stdout unless --json."""
        if args.json:
            return
        cells = ", ".join(
            f"{s.label} {format_value(s, v.worst(i))} ({v.seeds_meeting[i]}/{len(v.outcomes)} seeds)"
            for i, s in enumerate(slos)
        )
        elapsed = time.perf_counter() - started
        print(
            f"{what} {'meet' if v.meets else 'fail'}: {cells} "
            f"[{ev.simulations if simulations is None else simulations} simulations, {elapsed:.0f} s]",
            flush=True,
        )

    arrived: dict[int, list[Outcome]] = {}

    def replayed(out: Outcome) -> None:
        """--brute-force: a size's verdict as soon as all its seeds are in (any order)."""
        arrived.setdefault(out.task.nodes, []).append(out)
        outs = sorted(arrived[out.task.nodes], key=lambda o: o.task.seed)
        if len(outs) == len(ev.seeds):
            verdict = SizeVerdict(out.task.nodes, outs, slos, ev.needed)
            say(f"brute force: {out.task.nodes} nodes", verdict, sum(map(len, arrived.values())))

    def step(verdicts: list[Any]) -> None:
        if bar is not None:
            bar.update(verdicts)
        for v in verdicts:
            say(f"searching: {v.nodes} nodes", v)

    def inflation_try(factor: float, v: Any) -> None:
        if bar is not None:
            bar.inflation_try(factor, v.meets)
        say(f"inflation: {v.nodes} nodes, arrivals x{factor:.3g}", v)

    try:
        if args.brute_force:
            ev.on_done = replayed
            sizing = brute_force(ev, args.min_nodes, args.max_nodes)
            ev.on_done = None
            if args.progress and measures is not None:
                # the sizes had one bar over all of them; the inflation tries get one more
                # (not a '0/1' bar per try), whose total counts them all
                ev.progress = False
                bar = SearchBar.inflation_only(ev.parallel_sizes, measures)
        else:
            sizing = size_cluster(ev, args.min_nodes, args.max_nodes, on_step=step)
        compaction, inflation, extra = _measures(args, ev, workload, spec, sizing.nodes, inflation_try)
    finally:
        if bar is not None:
            bar.close()
    describe = spec.describe(sizing.nodes) if sizing.nodes is not None else "none"
    settings = {
        "policy": args.policy,
        "seeds": args.seeds,
        "seed_share": args.seed_share,
        "jitter_s": args.jitter,
        "jobs": len(workload.jobs),
        **{
            k: v
            for k, v in dataclasses.asdict(config).items()
            if k in ("interval", "checkpoint_interval", "time_limit")
        },
    }
    if args.out:
        write_capacity_report(
            args.out, sizing, describe, settings, compaction, inflation, extra, simulations_total=ev.simulations
        )
    if args.json:
        data = {
            "nodes": sizing.nodes,
            "cluster": describe,
            "evaluated": {v.nodes: v.meets for v in sizing.evaluated},
            "simulations": sizing.simulations,
            "compaction": compaction.counts if compaction else None,
            "inflation": inflation.factor if inflation else None,
            # the replay at the answer, per seed: every metric of 'simulate --json' (waits per
            # priority, queue and job size, JCT, utilisation over the trace's span, GPU-hours)
            "at_answer": [
                {"seed": o.task.seed, **o.metrics.model_dump(mode="json")}
                for v in sizing.evaluated
                if v.nodes == sizing.nodes
                for o in v.outcomes
            ],
        }
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        sys.stdout.write(capacity_text(sizing, describe, compaction, inflation, extra, ev.simulations))
    return 0
