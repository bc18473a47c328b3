"""Print the fragmented-round table of docs/benchmarks.md: every registry solver on one
fragmented round, in the same run, with wall and CPU seconds (plan.stats.cpu_seconds: this
process and the CP-SAT child), status, the gap the bounds prove and the comparison with greedy.

    python -m bench.fragmented_table S 0.75          # size S/M/L/XL, busy share
    python -m bench.fragmented_table S 0.75 --true   # also the true tier gaps (small rounds)
    python -m bench.fragmented_table 256/100 0.75    # any nodes/gangs (seed 0)
    python -m bench.fragmented_table 256/100/1 0.6   # nodes/gangs/seed
    python -m bench.fragmented_table 1024/200/2 0.6 --tilted  # the tests' running mix
    python -m bench.fragmented_table XL 0.6 --seed 1 --no-preemption  # seed, preemption off

The "victims" column counts the plan's evictions and shrinks and the tier value the evicted
gangs held (GPU-eq, every priority): issue 13's headroom at M is in which running gangs make
room (large-neighbourhood search, gangopt/solvers/cpsat/lns.py), not in which gangs start.

With ``--true`` the round's tier optimum comes from the independent per-node reference model
(tests/reference.py, run long, outside the timed calls), and two more columns say how far
each plan's tiers are from it ("true gap": the largest shortfall of a tier below the optimum,
relative to the plan's value) and how far the bounds the plan reports are above it ("bound
excess": the largest, relative to the optimum). The reference covers the tiers only, not the
secondary terms.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from typing import Literal

import gangopt
from bench.rounds import fragmented_text
from gangopt.objective import SCALE, ObjectiveTerms, lexicographic_key
from gangopt.parsing import parse_json
from gangopt.schema import Plan, Round
from gangopt.solvers import SOLVERS


def round_text(
    size: str,
    busy: float,
    running_mix: Literal["jobs", "tilted"] | None = None,
    seed: int = 0,
    preemption: bool = True,
) -> str:
    """The fragmented round of a named size, or of ``nodes/gangs``, or ``nodes/gangs/seed`` (the
    seed in the name wins over ``seed``); ``running_mix`` as
    :attr:`gangopt.replay.generate.Spec.running_mix` (default: the benchmark family's);
    ``preemption`` off as ``--no-preemption`` (the family has each round both ways)."""
    parts = size.split("/")
    if len(parts) == 3:
        size, seed = "/".join(parts[:2]), int(parts[2])
    return fragmented_text(size, busy, seed, running_mix, preemption)


def victims(rnd: Round, plan: Plan) -> str:
    """Evictions / shrinks, and the tier value (GPU-eq) of the evicted gangs."""
    terms = ObjectiveTerms.of(rnd)
    running = {g.name: g for g in rnd.running}
    evicted = [p.gang for p in plan.preemptions if p.kind == "evict"]
    value = sum(terms.tier_value(running[g]) for g in evicted) / SCALE
    return f"{len(evicted)} / {len(plan.preemptions) - len(evicted)} ({value:,.1f})"


def true_gaps(plan: Plan, optimum: dict[int, int]) -> tuple[float, float]:
    """(true gap, bound excess) of ``plan`` against the tier ``optimum`` (objective units)."""
    shortfall, excess = 0.0, 0.0
    for tier in plan.score.tiers:
        best = optimum.get(tier.priority, 0) / SCALE
        shortfall = max(shortfall, max(0.0, best - tier.value) / max(1.0 / SCALE, tier.value))
        excess = max(excess, max(0.0, tier.bound - best) / max(1.0 / SCALE, best))
    return shortfall, excess


def digest(plan: Plan) -> str:
    """A hash of everything the plan says but its timings (``stats``): two runs of one solver on
    one round must give the same digest (same input + seed = same plan)."""
    data = plan.model_dump(mode="json", exclude={"stats"})
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def measure(rnd: Round, optimum: dict[int, int] | None = None) -> list[dict[str, object]]:
    """Every registry solver on ``rnd`` in the same run (greedy first), each plan checked by the
    validator and judged by the same bounds (``lp_bounds``): one dict a solver, the table's row
    and the figure's point (bench/fragmented_figure.py)."""
    rows: list[dict[str, object]] = []
    base = None
    for name in ["greedy", *[s for s in SOLVERS if s != "greedy"]]:
        # The peers' whole passes (as replays run them): run alone they are clocked since stop 31
        # and a pass cut at a loaded machine's deadline would flatter CP-SAT's comparison.
        whole = None if name in ("greedy", "cpsat") else rnd.policy.model_copy(update={"deterministic": True})
        start = time.perf_counter()
        plan = gangopt.solve(rnd, whole, solver=name, lp_bounds=True)  # every plan judged by the same bounds
        wall = time.perf_counter() - start
        assert gangopt.validate(rnd, plan) == [], name
        key = lexicographic_key(plan.score)
        base = base if base is not None else key
        row: dict[str, object] = {
            "solver": name,
            "status": plan.status.value,
            "wall": wall,
            "cpu": plan.stats.cpu_seconds,
            "gap": plan.gap,
            "versus": "better" if key > base else "equal" if key == base else "worse",
            "victims": victims(rnd, plan),
            "tiers": " · ".join(f"p{t.priority} {t.value:.1f} / {t.bound:.1f}" for t in plan.score.tiers),
            "tier_values": {str(t.priority): t.value for t in plan.score.tiers},
            "tier_bounds": {str(t.priority): t.bound for t in plan.score.tiers},
            "key": key,
            "secondary_bound": plan.score.secondary_bound,
            "digest": digest(plan),
        }
        if optimum is not None:
            row["true_gap"], row["bound_excess"] = true_gaps(plan, optimum)
        rows.append(row)
    return rows


def main(
    size: str,
    busy: float,
    true: bool = False,
    seconds_per_tier: float = 120.0,
    running_mix: Literal["jobs", "tilted"] | None = None,
    seed: int = 0,
    preemption: bool = True,
) -> None:
    rnd = parse_json(Round, round_text(size, busy, running_mix, seed, preemption), "round")
    optimum: dict[int, int] | None = None
    if true:
        from tests.reference import reference_optimum

        start = time.perf_counter()
        ref = reference_optimum(rnd, seconds_per_tier=seconds_per_tier, workers=2)
        tiers = " · ".join(f"p{p} {v / SCALE:.1f}" for p, v in sorted(ref.tiers.items(), reverse=True))
        print(f"reference: {tiers} ({'proven' if ref.proven else 'NOT proven'}, {time.perf_counter() - start:.0f} s)")
        optimum = ref.tiers
    extra = " true gap | bound excess |" if optimum is not None else ""
    head = f"| solver | status | wall s | CPU s | proven gap |{extra} vs greedy | victims: evict / shrink (value) |"
    print(f"{head} tiers (value / bound) |")
    print("|---|---|---:|---:|---:|" + ("---:|---:|" if optimum is not None else "") + "---|---|---|")
    rows = measure(rnd, optimum)
    for r in rows:
        gap = "—" if r["gap"] is None else f"{100 * float(r['gap']):.1f} %"  # type: ignore[arg-type]
        columns = ""
        if optimum is not None:
            columns = f" {100 * float(r['true_gap']):.1f} % | {100 * float(r['bound_excess']):.1f} % |"  # type: ignore[arg-type]
        line = f"| {r['solver']} | {r['status']} | {r['wall']:.2f} | {r['cpu']:.2f} | {gap} |{columns} {r['versus']}"
        print(f"{line} | {r['victims']} | {r['tiers']} |")


if __name__ == "__main__":
    argv = sys.argv[1:]
    seed = int(argv.pop(argv.index("--seed") + 1)) if "--seed" in argv else 0
    args = [a for a in argv if not a.startswith("--")]
    main(
        args[0] if args else "S",
        float(args[1]) if len(args) > 1 else 0.75,
        true="--true" in argv,
        running_mix="tilted" if "--tilted" in argv else None,
        seed=seed,
        preemption="--no-preemption" not in argv,
    )
