"""Fragmented rounds against their exact reference optimum: every solver in one process, per
round its status, CPU and wall seconds, the gap its bounds prove, the true gap (the largest tier
shortfall below the reference, :func:`bench.fragmented_table.true_gaps`), and whether any other
solver's plan is lexicographically above CP-SAT's (issue 13: "on 256-node fragmented rounds the
120 s optimum found within 10 s").

    python -m bench.true_sweep                      # 256 nodes / 100 gangs, seeds 0-4, busy 0.6
    python -m bench.true_sweep 256/100 0,1,2,3,4 0.6,0.75,0.9
    python -m bench.true_sweep 256/100 1 0.6 --solvers cpsat,greedy

The reference (``tests/reference.py``: CP-SAT over every node and pod, 120 s per tier, 2
workers, 1-3 minutes a round) is cached as JSON in ``$GANGOPT_REF_CACHE`` (default
``/tmp/gangopt-ref``), one file per round, and computed only when missing; a reference that
is not proven is printed as such (its tiers are then bounds, not the optimum).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import gangopt
from bench.fragmented_table import round_text, true_gaps
from gangopt.objective import lexicographic_key
from gangopt.parsing import parse_json
from gangopt.schema import Round
from gangopt.solvers import SOLVERS


def reference(size: str, seed: int, busy: str, rnd: Round) -> tuple[dict[int, int], bool]:
    """The round's reference tiers (objective units) and whether they are proven, cached."""
    cache = Path(os.environ.get("GANGOPT_REF_CACHE", "/tmp/gangopt-ref"))
    path = cache / f"{size.replace('/', '-')}-{seed}-{busy}.json"
    if not path.exists():
        from tests.reference import reference_optimum

        began = time.perf_counter()
        ref = reference_optimum(rnd, seconds_per_tier=120.0, workers=2)
        cache.mkdir(parents=True, exist_ok=True)
        record = {"tiers": {str(k): v for k, v in ref.tiers.items()}, "proven": ref.proven}
        path.write_text(json.dumps({**record, "seconds": time.perf_counter() - began}))
    data = json.loads(path.read_text())
    return {int(k): v for k, v in data["tiers"].items()}, bool(data["proven"])


def main(size: str, seeds: list[int], busys: list[str], solvers: list[str]) -> None:
    print(f"# {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")
    print("| busy | seed | solver | status | CPU s | wall s | proven gap | true gap | vs cpsat | tiers |")
    print("|---|---|---|---|---:|---:|---:|---:|---|---|")
    for busy in busys:
        for seed in seeds:
            rnd = parse_json(Round, round_text(f"{size}/{seed}", float(busy)), "round")
            optimum, proven = reference(size, seed, busy, rnd)
            keys = {}
            for name in solvers:
                began = time.perf_counter()
                plan = gangopt.solve(rnd, solver=name, lp_bounds=True)
                wall = time.perf_counter() - began
                assert gangopt.validate(rnd, plan) == [], name
                keys[name] = lexicographic_key(plan.score)
                short, _ = true_gaps(plan, optimum)
                versus = (
                    ""
                    if name == "cpsat" or "cpsat" not in keys
                    else ("ABOVE" if keys[name] > keys["cpsat"] else "not above")
                )
                tiers = " ".join(f"p{t.priority} {t.value:.1f}" for t in plan.score.tiers)
                gap = 100 * (plan.gap or 0.0)
                true = f"{100 * short:.2f} %" + ("" if proven else " (reference not proven)")
                print(
                    f"| {busy} | {seed} | {name} | {plan.status.value} | {plan.stats.cpu_seconds:.2f} | {wall:.2f} "
                    f"| {gap:.2f} % | {true} | {versus} | {tiers} |",
                    flush=True,
                )
    print(f"# end {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chosen = ["cpsat", "greedy", *[s for s in SOLVERS if s not in ("cpsat", "greedy")]]
    if "--solvers" in sys.argv:
        chosen = sys.argv[sys.argv.index("--solvers") + 1].split(",")
        args = [a for a in args if a != sys.argv[sys.argv.index("--solvers") + 1]]
    main(
        args[0] if args else "256/100",
        [int(x) for x in (args[1] if len(args) > 1 else "0,1,2,3,4").split(",")],
        (args[2] if len(args) > 2 else "0.6").split(","),
        chosen,
    )
