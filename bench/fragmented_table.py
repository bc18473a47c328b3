"""Print the fragmented-round table of docs/benchmarks.md: every registry solver on one
fragmented round, in the same run, with wall and CPU seconds (plan.stats.cpu_seconds: this
process and the CP-SAT child), status, the gap the bounds prove and the comparison with greedy.

    python -m bench.fragmented_table S 0.75      # size S/M/L/XL, busy share
"""

from __future__ import annotations

import sys
import time

import gangopt
from bench.rounds import fragmented_text
from gangopt.objective import lexicographic_key
from gangopt.parsing import parse_json
from gangopt.schema import Round
from gangopt.solvers import SOLVERS


def main(size: str, busy: float) -> None:
    rnd = parse_json(Round, fragmented_text(size, busy), "round")
    print("| solver | status | wall s | CPU s | proven gap | vs greedy | tiers (value / bound) |")
    print("|---|---|---:|---:|---:|---|---|")
    base = None
    for name in ["greedy", *[s for s in SOLVERS if s != "greedy"]]:
        start = time.perf_counter()
        plan = gangopt.solve(rnd, solver=name)
        wall = time.perf_counter() - start
        assert gangopt.validate(rnd, plan) == [], name
        key = lexicographic_key(plan.score)
        base = base if base is not None else key
        versus = "better" if key > base else "equal" if key == base else "worse"
        tiers = " · ".join(f"p{t.priority} {t.value:.1f} / {t.bound:.1f}" for t in plan.score.tiers)
        gap = "—" if plan.gap is None else f"{100 * plan.gap:.1f} %"
        cpu = plan.stats.cpu_seconds
        print(f"| {name} | {plan.status.value} | {wall:.2f} | {cpu:.2f} | {gap} | {versus} | {tiers} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "S", float(sys.argv[2]) if len(sys.argv) > 2 else 0.75)
