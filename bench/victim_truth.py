"""Where the gap of a fragmented round lies: greedy's plan, the large-neighbourhood search
(gangopt/solvers/cpsat/lns.py) alone, the best victim choice for greedy's admissions, the
independent reference optimum and the slot bound, per tier (docs/benchmarks.md, "Victim
choice"). One round, one process; heavy (the last two columns take minutes at 512 nodes and
up), run one at a time.

    python -m bench.victim_truth 128/50 0.6                 # nodes/gangs (seed 0) or S/M/L/XL, busy
    python -m bench.victim_truth M 0.75 --best --no-reference   # the best victims (90 s at M)

``--best``: the whole round as one LNS neighbourhood (:func:`gangopt.solvers.cpsat.lns.best_victims`,
60 deterministic units); ``--no-reference``: skip the reference model (``--seconds S`` per
tier, default 120, 2 workers).
"""

from __future__ import annotations

import sys
import time

import gangopt
from bench.fragmented_table import round_text
from gangopt.objective import SCALE, score
from gangopt.parsing import parse_json
from gangopt.prefilter import prefilter
from gangopt.schema import Plan, Round
from gangopt.solvers.cpsat.lns import best_victims, improve
from gangopt.solvers.greedy import greedy


def tiers(rnd: Round, plan: Plan) -> str:
    return " · ".join(f"p{t.priority} {t.value:,.1f}" for t in score(rnd, plan).tiers)


def main(size: str, busy: float, best: bool, reference: bool, seconds: float) -> None:
    rnd = parse_json(Round, round_text(size, busy), "round")
    bounded = gangopt.solve(rnd, solver="greedy", lp_bounds=True)
    print("greedy:", " · ".join(f"p{t.priority} {t.value:,.1f} / {t.bound:,.1f}" for t in bounded.score.tiers))
    seed = greedy(rnd)
    wall, cpu = time.perf_counter(), time.process_time()
    out = improve(rnd, prefilter(rnd), seed, score(rnd, seed), time.perf_counter() + 600)
    assert gangopt.validate(rnd, out.plan) == []
    print(
        f"lns: {tiers(rnd, out.plan)} ({out.improvements} improvements, {out.neighbourhoods} neighbourhoods, "
        f"{time.perf_counter() - wall:.2f} s wall, {time.process_time() - cpu:.2f} CPU-s)"
    )
    if best:
        wall = time.perf_counter()
        plan, status = best_victims(rnd, prefilter(rnd), seed, work=60.0)
        assert gangopt.validate(rnd, plan) == []
        print(
            f"best victims for greedy's admissions: {tiers(rnd, plan)} ({status}, {time.perf_counter() - wall:.0f} s)"
        )
    if reference:
        from tests.reference import reference_optimum

        wall = time.perf_counter()
        ref = reference_optimum(rnd, seconds_per_tier=seconds, workers=2)
        values = " · ".join(f"p{p} {v / SCALE:,.1f}" for p, v in sorted(ref.tiers.items(), reverse=True))
        closed = "proven" if ref.proven else "NOT proven: a bound on the optimum"
        print(f"reference: {values} ({closed}, {time.perf_counter() - wall:.0f} s)")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    seconds = 120.0
    if "--seconds" in sys.argv:
        seconds = float(sys.argv[sys.argv.index("--seconds") + 1])
        args = [a for a in args if a != sys.argv[sys.argv.index("--seconds") + 1]]
    main(
        args[0] if args else "S",
        float(args[1]) if len(args) > 1 else 0.75,
        best="--best" in sys.argv,
        reference="--no-reference" not in sys.argv,
        seconds=seconds,
    )
