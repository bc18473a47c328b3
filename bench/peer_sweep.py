"""Issue 13's "never worse than any peer on any bench round": every registry solver on a sweep
of fragmented rounds (the benchmark family: many small running gangs, preemption on), in one
process, CPU seconds and wall per solver, and whether CP-SAT's plan is below any other's
lexicographically (tier by tier, then the secondary terms).

    python -m bench.peer_sweep                          # 128/50, 256/100, 1024/200 x busy 0.6/0.75/0.9 x seeds 0-2
    python -m bench.peer_sweep 128/50 256/100 --seeds 5 # other sizes, seeds 0-4

Each row: the round, CP-SAT's status, reported gap, CPU s and wall, greedy's CPU s and wall,
the peers' CPU s range, and the solvers whose plan is better than CP-SAT's (none expected: the
portfolio floor). Every plan goes through the validator, outside the timed calls.
"""

from __future__ import annotations

import sys
import time

from bench.rounds import check_valid, end_to_end, fragmented_spec
from gangopt.objective import lexicographic_key
from gangopt.replay.generate import dump_round, generate
from gangopt.solvers import SOLVERS

SIZES = ["128/50", "256/100", "1024/200"]
BUSY = [0.6, 0.75, 0.9]


def sweep(sizes: list[str], seeds: int) -> int:
    """Print the table; return how many rounds had a solver better than CP-SAT."""
    print("| round | cpsat status | gap | cpsat CPU s / wall | greedy CPU s / wall | peers CPU s | better than cpsat |")
    print("|---|---|---:|---:|---:|---:|---|")
    below = 0
    for size in sizes:
        nodes, gangs = (int(x) for x in size.split("/"))
        for busy in BUSY:
            for seed in range(seeds):
                text = dump_round(generate(fragmented_spec(nodes, gangs, busy, seed))[0])
                keys: dict[str, tuple[float, ...]] = {}
                cost: dict[str, tuple[float, float]] = {}
                status = gap = ""
                for name in ["greedy", *[s for s in SOLVERS if s != "greedy"]]:
                    wall = time.perf_counter()
                    rnd, plan = end_to_end(text, name)
                    cost[name] = (plan.stats.cpu_seconds, time.perf_counter() - wall)
                    check_valid(rnd, plan, name)
                    keys[name] = lexicographic_key(plan.score)
                    if name == "cpsat":
                        status = plan.status.value
                        gap = "—" if plan.gap is None else f"{100 * plan.gap:.2f} %"
                better = [s for s, k in keys.items() if k > keys["cpsat"]]
                below += bool(better)
                peers = [c for s, (c, _) in cost.items() if s not in ("cpsat", "greedy")]
                print(
                    f"| {size} {busy} s{seed} | {status} | {gap} | {cost['cpsat'][0]:.2f} / {cost['cpsat'][1]:.2f} | "
                    f"{cost['greedy'][0]:.2f} / {cost['greedy'][1]:.2f} | {min(peers):.2f}-{max(peers):.2f} | "
                    f"{', '.join(better) or 'none'} |",
                    flush=True,
                )
    print(f"rounds where a solver beat cpsat: {below}")
    return below


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seeds = int(sys.argv[sys.argv.index("--seeds") + 1]) if "--seeds" in sys.argv else 3
    sizes = [a for a in args if "/" in a] or SIZES
    sys.exit(1 if sweep(sizes, seeds) else 0)
