"""XL's priority-0 gap on rounds small enough for an exact answer: is it the bound or the plan?

Issue 13's fragmented XL round (16,384 nodes, 2,000 pending gangs, busy 0.75) reports 3.96 %
at 10 s, all of it in priority 0, against the node-class LP bound (:mod:`gangopt.slot_classes`).
What sets XL apart from L (4,096 / 1,000) in :func:`gangopt.replay.generate.generate` is the
free capacity per pending gang: the queue's demand is 0.8 of the free GPUs whatever the size,
so XL's 2,000 gangs for 32,768 free GPUs ask 13.1 GPUs each on average (the mix tilted toward
multi-node gangs: ``fit_alpha``) where L's ask 6.5; and its 32-node racks (16 up to 1,024
nodes). The running gangs per node are the same (Philly's job mix, cap 1,024 GPUs at both).
This script makes rounds of any size with XL's nodes per gang (``--per-gang``, default
16,384 / 2,000) and its rack size, and compares per tier:

* greedy's and CP-SAT's plans (``gangopt.solve``, the round's 10 s limit), and "XL path": the slot
  placer from greedy's plan with the node-class LP's choice only, as CP-SAT runs at XL (:func:`xl_path`);
* "L path": CP-SAT's own solve with the switches a 4,096-node round throws (large-round slot
  models and placer order, no whole model: the large-neighbourhood search instead), with one
  slot choice placed at most (what a 10 s limit placed at L busy 0.6 before h36-L06) and with
  all (:func:`l_path`);
* the class LP bound (:func:`gangopt.slot_classes.class_tier_bounds`) and the per-node slot LP
  (:func:`gangopt.slots.slot_tier_bounds` with its LPs only, as XL's ``--lp-bounds`` solves
  them), each under the floors of the lexicographically best of these plans;
* the bound CP-SAT's plan reports (on these rounds the per-node slot models' integer solve);
* the exact reference (``tests/reference.py``: CP-SAT over every node and pod, a relaxation of
  the rules whose tiers are the optimum when a valid plan reaches them), cached as JSON in
  ``$GANGOPT_REF_CACHE`` (default ``/tmp/gangopt-ref``).

    python -m bench.xl_shape 256 0,1,2                  # 256 nodes, XL's ratio, seeds 0-2
    python -m bench.xl_shape 512 0 --per-gang=4.096     # L's ratio
    python -m bench.xl_shape 256 0 --no-reference       # bounds and plans only
    python -m bench.xl_shape 512 0,1 --per-gang=4.096 --busy=0.6    # L busy 0.6's shape (32-node racks, as at L)

Figures: docs/benchmarks.md, "h35-xlbound" (XL's shape) and "h36-L06" (L busy 0.6's).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import gangopt
from gangopt import slots
from gangopt.bounds import tier_ceilings
from gangopt.objective import SCALE
from gangopt.prefilter import prefilter
from gangopt.replay.generate import FRAGMENTED_SHARES, SIZES, Spec, generate
from gangopt.schema import Plan, Round
from gangopt.slot_classes import class_tier_bounds

XL_NODES_PER_GANG = SIZES["XL"][0] / SIZES["XL"][1]
"""16,384 / 2,000 = 8.192 nodes per pending gang (L: 4.096)."""

XL_RACK = 32
"""XL's nodes per rack (``generate``: 32 above 1,024 nodes, 16 up to it)."""


def shape_spec(
    nodes: int, seed: int = 0, per_gang: float = XL_NODES_PER_GANG, busy: float = 0.75, rack: int = XL_RACK
) -> Spec:
    """A fragmented round of ``nodes`` nodes with ``per_gang`` nodes per pending gang (XL's by
    default) and ``rack`` nodes per rack: the issue-13 mix and busy share otherwise."""
    elastic, required, preferred = FRAGMENTED_SHARES
    return Spec(
        nodes=nodes,
        gangs=max(1, round(nodes / per_gang)),
        seed=seed,
        fragmented=True,
        busy=busy,
        rack_size=rack,
        elastic_share=elastic,
        required_share=required,
        preferred_share=preferred,
    )


def values_of(plan: Plan) -> dict[int, int]:
    """A plan's tier values in objective units."""
    return {t.priority: round(t.value * SCALE) for t in plan.score.tiers}


def lp_bounds(rnd: Round, values: dict[int, int]) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """(ceilings, class LP bounds, per-node slot LP bounds) of the tiers under the floors of a
    plan of tier ``values``, each on a fresh prefiltered round. The per-node models are solved
    as LPs only (:data:`gangopt.slots.LP_ONLY`, XL's ``--lp-bounds``), whatever the round's size."""
    pre = prefilter(rnd)
    ceilings = tier_ceilings(pre)
    classes = class_tier_bounds(pre, values, ceilings)
    pre = prefilter(rnd)
    with patch.object(slots, "_scip_settings", lambda _pre: slots.LP_ONLY):
        per_node = slots.slot_tier_bounds(pre, values, ceilings)
    return ceilings, classes, per_node


def xl_path(rnd: Round, seed: Plan) -> dict[int, int]:
    """The tiers of what CP-SAT does at XL from ``seed`` (greedy's plan): the slot placer with
    the node-class LP's choice only (:func:`gangopt.class_choice.class_choice`; the per-node
    slot models' choice, which small rounds get, left out), no time limit, no search after it."""
    from gangopt.objective import score
    from gangopt.solvers.cpsat import placer

    pre = prefilter(rnd)
    ceilings = tier_ceilings(pre)

    def proven(plan: Plan, _score: Any) -> None:
        class_tier_bounds(pre, values_of(plan), ceilings)  # the choice's LP for the plan's open tier

    first = score(rnd, seed)
    class_tier_bounds(pre, {t.priority: round(t.value * SCALE) for t in first.tiers}, ceilings)
    with patch.object(placer, "slot_choice", lambda *_a, **_k: None):
        out, _ = placer.place_choices(rnd, pre, seed, first, proven)
    assert gangopt.validate(rnd, out.plan) == []
    return {t.priority: round(t.value * SCALE) for t in out.score.tiers}


def l_path(rnd: Round, choices: int = 4) -> dict[int, int]:
    """The tiers of what CP-SAT does at L (4,096 nodes), on a small round: its own solve (the
    round's 10 s) with the switches a round of L's size throws. Its slot models are solved as a
    round over :data:`gangopt.slots.MAX_COLUMNS` pending and candidate gangs is (the clock's
    leave, :data:`gangopt.slots.LARGE_SCIP_SETTINGS`: the LP's own solution as the choice where
    the plan is far below it, CP-SAT's integer solve near it; the placer's large-round order,
    :data:`gangopt.solvers.cpsat.placer.LARGE_START`), the whole model is never built (its
    estimate over the build budget: the large-neighbourhood search instead), and at most
    ``choices`` slot choices are placed (at L busy 0.6 a 10 s limit placed one before
    h36-L06)."""
    import gangopt.solvers.cpsat as cpsat
    from gangopt.solvers.cpsat import placer

    with (
        patch.object(slots, "MAX_COLUMNS", 0),
        patch.object(placer, "MAX_COLUMNS", 0),
        patch.object(placer, "MAX_CHOICES", choices),
        patch.object(cpsat, "build_budget", lambda _search: 0),
    ):
        plan = gangopt.solve(rnd, solver="cpsat")
    assert gangopt.validate(rnd, plan) == []
    return values_of(plan)


def reference(rnd: Round, key: str, seconds: float) -> tuple[dict[int, int], bool, float]:
    """The reference tiers (objective units), whether proven, and the seconds it took (cached)."""
    cache = Path(os.environ.get("GANGOPT_REF_CACHE", "/tmp/gangopt-ref"))
    path = cache / f"xlshape-{key}.json"
    if not path.exists():
        from tests.reference import reference_optimum

        began = time.perf_counter()
        ref = reference_optimum(rnd, seconds_per_tier=seconds, workers=2)
        cache.mkdir(parents=True, exist_ok=True)
        record = {"tiers": {str(k): v for k, v in ref.tiers.items()}, "proven": ref.proven}
        path.write_text(json.dumps({**record, "seconds": time.perf_counter() - began}))
    data = json.loads(path.read_text())
    return {int(k): v for k, v in data["tiers"].items()}, bool(data["proven"]), float(data["seconds"])


def measure(spec: Spec, with_reference: bool = True, seconds: float = 120.0) -> dict[str, Any]:
    """One round's row: per tier the plans' values, the bounds and the reference (GPU-eq)."""
    rnd = generate(spec)[0]
    row: dict[str, Any] = {"nodes": spec.nodes, "gangs": spec.gangs, "seed": spec.seed, "running": len(rnd.running)}
    plans = {}
    greedy = None
    for name in ("greedy", "cpsat"):
        began = time.process_time()
        plan = gangopt.solve(rnd, solver=name)
        assert gangopt.validate(rnd, plan) == [], name
        plans[name] = values_of(plan)
        if name == "cpsat":  # the bound it reports: on small rounds the integer slot model's
            row["cpsat_bound"] = {t.priority: round(t.bound * SCALE) for t in plan.score.tiers}
        row[f"{name}_cpu"] = time.process_time() - began
        row[f"{name}_gap"] = plan.gap
        greedy = plan if name == "greedy" else greedy
    assert greedy is not None
    began = time.process_time()
    plans["xl path"] = xl_path(rnd, greedy)
    row["xl path_cpu"] = time.process_time() - began
    began = time.process_time()
    plans["l path 1"] = l_path(rnd, 1)
    plans["l path"] = l_path(rnd)
    row["l path_cpu"] = time.process_time() - began
    best = max(plans.values(), key=lambda v: [v.get(p, 0) for p in sorted(v, reverse=True)])
    began = time.process_time()
    ceilings, classes, per_node = lp_bounds(rnd, best)
    row["bounds_cpu"] = time.process_time() - began
    row["ceilings"], row["classes"], row["per_node"] = ceilings, classes, per_node
    row["plans"] = plans
    if with_reference:
        key = f"{spec.nodes}-{spec.gangs}-{spec.seed}-{spec.busy}-{spec.rack_size}"
        row["reference"], row["proven"], row["ref_seconds"] = reference(rnd, key, seconds)
    return row


def line(row: dict[str, Any], prio: int) -> str:
    """The table's line for one tier of a row (GPU-eq)."""

    def g(x: int | None) -> str:
        return "—" if x is None else f"{x / SCALE:,.1f}"

    ref = row.get("reference", {}).get(prio)
    greedy, cpsat = row["plans"]["greedy"].get(prio, 0), row["plans"]["cpsat"].get(prio, 0)
    xl = row["plans"]["xl path"].get(prio, 0)
    l1, lall = row["plans"]["l path 1"].get(prio, 0), row["plans"]["l path"].get(prio, 0)
    cls, node = row["classes"].get(prio), row["per_node"].get(prio)
    own = row["cpsat_bound"].get(prio)

    def pct(bound: int | None) -> str:
        return "—" if bound is None or ref is None else f"{100 * (bound - ref) / max(1, ref):.2f} %"

    def short(value: int) -> str:
        return "—" if ref is None else f"{100 * (ref - value) / max(1, value):.2f} %"

    proven = "" if row.get("proven", True) else " (not proven)"
    return (
        f"| {row['nodes']}/{row['gangs']}/{row['seed']} | p{prio} | {g(greedy)} | {g(xl)} | {g(l1)} | {g(lall)} "
        f"| {g(cpsat)} "
        f"| {g(ref)}{proven} "
        f"| {g(cls)} ({pct(cls)}) | {g(node)} ({pct(node)}) | {g(own)} ({pct(own)}) | {g(row['ceilings'].get(prio))} "
        f"| {short(greedy)} "
        f"| {short(xl)} | {short(l1)} | {short(lall)} | {short(cpsat)} |"
    )


HEADER = (
    "| round | tier | greedy | XL path | L path, 1 choice | L path | cpsat | reference | class LP (over ref) "
    "| per-node LP (over ref) | cpsat's bound (over ref) | ceiling | greedy short | XL path short "
    "| L path 1 short | L path short | cpsat short |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    nodes = int(args[0]) if args else 256
    seeds = [int(s) for s in (args[1] if len(args) > 1 else "0").split(",")]
    per_gang = XL_NODES_PER_GANG
    busy = 0.75
    rack = XL_RACK
    seconds = 120.0
    for a in argv:
        if a.startswith("--per-gang="):
            per_gang = float(a.split("=", 1)[1])
        if a.startswith("--busy="):
            busy = float(a.split("=", 1)[1])
        if a.startswith("--rack="):
            rack = int(a.split("=", 1)[1])
        if a.startswith("--seconds="):
            seconds = float(a.split("=", 1)[1])
    with_reference = "--no-reference" not in argv
    print(
        f"# {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}; {nodes} nodes, "
        f"{per_gang} nodes per gang, busy {busy}, rack {rack}"
    )
    print(HEADER)
    for seed in seeds:
        row = measure(shape_spec(nodes, seed, per_gang, busy, rack), with_reference, seconds)
        for prio in sorted(row["ceilings"], reverse=True):
            print(line(row, prio), flush=True)
        extra = f", reference {row['ref_seconds']:.0f} s" if "ref_seconds" in row else ""
        print(
            f"<!-- running {row['running']}; greedy {row['greedy_cpu']:.1f} CPU-s "
            f"gap {100 * (row['greedy_gap'] or 0):.2f} %, "
            f"cpsat {row['cpsat_cpu']:.1f} CPU-s gap {100 * (row['cpsat_gap'] or 0):.2f} %; "
            f"XL path {row['xl path_cpu']:.1f} CPU-s; L paths {row['l path_cpu']:.1f} CPU-s; "
            f"bounds {row['bounds_cpu']:.1f} CPU-s{extra} -->",
            flush=True,
        )
    print(f"# end {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
