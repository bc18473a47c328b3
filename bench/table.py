"""Print issue 3's table for the current code: per round size, gangopt vs greedy.

    python bench/table.py [--sizes S,M,L,XL] [--runs 5] [--time-limit S] [--contention]

Each size runs in its own subprocess (so its peak memory, ``ru_maxrss``, is its own): the
end-to-end library call (parse + validate input, solve, validate plan) ``--runs`` times for
gangopt (CP-SAT) and for the greedy baseline, medians reported. Progress goes to stderr, the
Markdown table to stdout.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.rounds import check_valid, end_to_end, round_text  # noqa: E402
from gangopt.objective import ObjectiveTerms, lexicographic_key  # noqa: E402
from gangopt.replay.generate import SIZES  # noqa: E402
from gangopt.schema import Plan, Round  # noqa: E402


def started_gpus_by_priority(rnd: Round, plan: Plan) -> dict[int, int]:
    """GPUs in the minimum configuration of the pending gangs the plan starts, per priority.

    This is the work the priority tiers of the objective rank (docs/objective.md); members
    above the minimum (elastic growth) are secondary and counted in ``placed_gpus``."""
    minimum = ObjectiveTerms.of(rnd).min_pods
    admitted = set(plan.admitted)
    out = {g.priority: 0 for g in rnd.pending}
    for g in rnd.pending:
        if g.name in admitted:
            counts = minimum(g)
            out[g.priority] += sum(r.requests.get("gpu", 0) * counts[r.name] for r in g.roles) // 1000
    return out


def placed_gpus(rnd: Round, plan: Plan) -> int:
    """GPUs placed by the plan for pending gangs (minimums plus growth)."""
    gpu = {(g.name, r.name): r.requests.get("gpu", 0) for g in rnd.pending for r in g.roles}
    return sum(gpu.get((p.gang, p.role), 0) for p in plan.placements) // 1000


def by_priority(ours: dict[str, int], greedy: dict[str, int]) -> str:
    """'10: 354/354 · 0: 63/50', highest priority first (JSON keys are strings)."""
    return " · ".join(f"{p}: {ours[p]:,}/{greedy[p]:,}" for p in sorted(ours, key=int, reverse=True))


def worker(path: str, runs: int, time_limit: float | None) -> dict[str, Any]:
    text = Path(path).read_text(encoding="utf-8")
    out: dict[str, Any] = {}
    plans: dict[str, Plan] = {}
    rnd: Round | None = None
    for solver in ("greedy", "cpsat"):
        times, prefilter = [], []
        for i in range(runs):
            t0 = time.perf_counter()
            rnd, plan = end_to_end(text, solver, time_limit)
            times.append(time.perf_counter() - t0)
            check_valid(rnd, plan, solver)
            prefilter.append(plan.stats.prefilter_seconds)
            print(f"  {solver} run {i + 1}/{runs}: {times[-1]:.2f} s ({plan.status})", file=sys.stderr, flush=True)
        plans[solver] = plan
        out[solver] = {"median": statistics.median(times), "times": times, "prefilter": statistics.median(prefilter)}
    assert rnd is not None
    ours, base = plans["cpsat"], plans["greedy"]
    key, base_key = lexicographic_key(ours.score), lexicographic_key(base.score)
    out.update(
        nodes=len(rnd.cluster.nodes),
        gangs=len(rnd.pending),
        status=str(ours.status),
        gap=ours.gap,
        tier_gap=max(((t.bound - t.value) / max(abs(t.value), 0.1) for t in ours.score.tiers), default=0.0),
        vs_greedy="better" if key > base_key else "equal" if key == base_key else "worse",
        started_ours={str(p): v for p, v in started_gpus_by_priority(rnd, ours).items()},
        started_greedy={str(p): v for p, v in started_gpus_by_priority(rnd, base).items()},
        placed_ours=placed_gpus(rnd, ours),
        placed_greedy=placed_gpus(rnd, base),
        admitted_ours=len(ours.admitted),
        admitted_greedy=len(base.admitted),
        peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return out


def row(size: str, r: dict[str, Any]) -> str:
    ours, greedy = r["cpsat"]["median"], r["greedy"]["median"]
    gap = "—" if r["gap"] is None else f"{100 * r['gap']:.3f} %"
    tier_gap = f"{100 * r['tier_gap']:.3f} %"
    return (
        f"| {size} | {r['nodes']:,} | {r['gangs']:,} | {ours:.2f} s | {greedy:.2f} s | {ours / greedy:.1f}× | "
        f"{gap} | {tier_gap} | {r['status']} | {r['vs_greedy']} | "
        f"{by_priority(r['started_ours'], r['started_greedy'])} | {r['placed_ours']:,} / {r['placed_greedy']:,} | "
        f"{r['admitted_ours']} / {r['admitted_greedy']} | {r['peak_mib']:,.0f} MiB | "
        f"{1000 * r['cpsat']['prefilter']:.0f} ms |"
    )


HEADER = (
    "| round | nodes | pending | gangopt (median) | greedy (median) | ratio | gap | worst tier gap | status "
    "| objective vs greedy "
    "| GPUs started per priority, gang minimums (gangopt/greedy) | GPUs placed incl. growth (gangopt / greedy) "
    "| gangs admitted | peak memory | prefilter |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description="Print issue 3's benchmark table.")
    parser.add_argument("--sizes", default="S,M", help="comma-separated sizes (default S,M)")
    parser.add_argument("--runs", type=int, default=5, help="runs per solver and size (default 5)")
    parser.add_argument("--time-limit", type=float, help="override policy.time_limit (default: the round's)")
    parser.add_argument("--contention", action="store_true", help="use the contention variant of each round")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE", help="also write the raw results here")
    parser.add_argument("--worker", nargs=1, metavar="ROUND.json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.runs, args.time_limit)))
        return
    sizes = [s.strip().upper() for s in args.sizes.split(",") if s.strip()]
    for s in sizes:
        if s not in SIZES:
            parser.error(f"unknown size {s!r} (sizes: {', '.join(SIZES)})")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            label = f"{size} (contention)" if args.contention else size
            print(f"{label}: generating", file=sys.stderr, flush=True)
            path = Path(tmp) / f"{size}.json"
            path.write_text(round_text(size, args.seed, args.contention), encoding="utf-8")
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(path), "--runs", str(args.runs)]
            if args.time_limit is not None:
                cmd += ["--time-limit", str(args.time_limit)]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
            results[label] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{label}: done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(HEADER)
    for label, r in results.items():
        print(row(label, r))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
