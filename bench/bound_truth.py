"""Is the slot bound reached? The integer slot model's choice for the lowest tier not proven
(which pending gangs start, which candidates' pods stay) placed node by node with CP-SAT, made
a plan and judged by the validator (docs/benchmarks.md, "Slot bounds that are reached").

    python -m bench.bound_truth M 0.75          # size S/M/L/XL or nodes/gangs (seed 0), busy

The floors of the tiers above come from greedy's plan, as in a solve. When the placement
exists and the plan is valid, its tier value is the bound: the tier's true optimum, however far
the solvers' plans are below it. Heavy at M (the placement: 10-20 s on 2 workers); one run at
a time.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from typing import Literal

import numpy as np
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

import gangopt
from bench.fragmented_table import round_text
from gangopt import slots
from gangopt.bounds import tier_ceilings
from gangopt.objective import SCALE, score
from gangopt.parsing import parse_json
from gangopt.prefilter import prefilter, request_vector
from gangopt.schema import Plan, Round
from gangopt.solvers.cpsat.expansion import Decision, reprieve
from gangopt.solvers.cpsat.lns import _plan


def main(
    size: str, busy: float, running_mix: Literal["jobs", "tilted"] | None = None
) -> tuple[Round, Plan | None, int] | None:
    """Print the check; return the round, the plan made of the integer model's choice (None
    if it did not fit node by node) and the tier's bound (objective units), or None when
    greedy's plan reaches every tier ceiling. ``running_mix``: as
    :func:`bench.fragmented_table.round_text`."""
    rnd = parse_json(Round, round_text(size, busy, running_mix), "round")
    seed = gangopt.solve(rnd, solver="greedy")
    values = {t.priority: round(t.value * SCALE) for t in score(rnd, seed).tiers}
    pre = prefilter(rnd)
    ceilings = tier_ceilings(pre)
    shared = slots._shared(pre)
    floors: list[tuple[int, int]] = []
    prio = None
    for p in sorted(ceilings, reverse=True):
        if values.get(p, 0) < ceilings[p]:
            prio = p
            break
        floors.append((p, values.get(p, 0)))
    if prio is None:
        print("greedy reaches every tier ceiling: nothing to check")
        return None
    start = time.process_time()
    model, _, gvar = slots._tier_model(shared, prio, floors)
    for v in model.variable:
        v.is_integer = True
    mip = pywraplp.Solver.CreateSolver("SCIP")
    mip.LoadModelFromProto(model)
    mip.Solve()
    x = np.array([v.solution_value() for v in mip.variables()])
    bound = shared.fixed_value.get(prio, 0) + mip.Objective().Value()
    print(
        f"tier {prio}: greedy {values.get(prio, 0) / SCALE:,.1f}, integer slot model {bound / SCALE:,.1f} "
        f"({time.process_time() - start:.2f} CPU-s)"
    )
    levels = sorted({prio, *dict(floors)})
    active = np.isin(shared.prio, levels) & (shared.prio >= prio)
    gact = active[shared.gcol]
    kept = np.zeros(len(shared.gcol), dtype=bool)
    kept[gact] = x[gvar[gact]] > 0.5
    # Candidate pod groups follow the pending ones, one per pod, in the round's order.
    movable = set(pre.candidates)
    pod_names = [p.name for gi, run in enumerate(rnd.running) if gi in movable for p in run.pods]
    first = int((shared.gmask >= 0).sum())
    pinned = np.flatnonzero(shared.gnode >= 0)
    stays = pinned[~gact[pinned] | kept[pinned]]
    gone = pinned[gact[pinned] & ~kept[pinned]]
    room = shared.capacity - shared.fixed
    np.subtract.at(room, shared.gnode[stays], shared.greq[stays])
    lost_at: dict[int, int] = defaultdict(lambda: -1)  # rule 5: highest priority that lost pods there
    for g in gone.tolist():
        node = int(shared.gnode[g])
        lost_at[node] = max(lost_at[node], int(shared.prio[shared.gcol[g]]))
    model_cp = cp_model.CpModel()
    use: dict[tuple[int, int], list[tuple[cp_model.IntVar, int]]] = defaultdict(list)
    placed: list[tuple[str, str, int, cp_model.IntVar]] = []
    admitted: set[str] = set()
    for g in np.flatnonzero((shared.gmask >= 0) & kept).tolist():
        col = shared.gcol[g]
        gang = rnd.pending[int(shared.gang[col])]
        admitted.add(gang.name)
        role = next(r for r in gang.roles if (request_vector(r, pre.resources) == shared.greq[g]).all())
        nodes = shared.sets[int(shared.gmask[g])]
        if shared.domain_set[col] >= 0:
            nodes = nodes & shared.sets[int(shared.domain_set[col])]
        req, count = shared.greq[g], int(shared.gcount[g])
        xs = []
        for n in np.flatnonzero(nodes).tolist():
            if lost_at[n] >= shared.prio[col] or (req > room[n]).any():
                continue
            var = model_cp.new_int_var(0, count, "")
            xs.append(var)
            placed.append((gang.name, role.name, n, var))
            for k in np.flatnonzero(req).tolist():
                use[(n, k)].append((var, int(req[k])))
        model_cp.add(sum(xs) == count)
    for (n, k), terms in use.items():
        model_cp.add(sum(c * v for v, c in terms) <= int(room[n, k]))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.max_time_in_seconds = 300
    wall = time.perf_counter()
    status = solver.solve(model_cp)
    print(f"placement node by node: {solver.status_name(status)} ({time.perf_counter() - wall:.1f} s)")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return rnd, None, round(bound)
    names = [node.name for node in rnd.cluster.nodes]
    new_pods = [(g, r, names[n]) for g, r, n, v in placed for _ in range(solver.value(v))]
    removed = {pod_names[g - first] for g in gone.tolist()}
    plan = _plan(rnd, seed, reprieve(rnd, Decision(admitted=admitted, new_pods=new_pods, removed=removed)))
    problems = gangopt.validate(rnd, plan)
    tiers = " · ".join(f"p{t.priority} {t.value:,.1f}" for t in score(rnd, plan).tiers)
    print(f"plan: {tiers}; validator: {len(problems)} violations {problems[:3]}")
    return rnd, plan, round(bound)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "M", float(args[1]) if len(args) > 1 else 0.75)
