"""Warm starts: turn a plan (greedy, or the previous round's) into a complete CP-SAT hint.

CP-SAT only profits from complete hints (cpsat-primer; optimization-notes §3.4), and on our
models a single worker may not find even the trivial "start nothing" solution quickly. So a
plan is mapped to the decision variables (y, alive, x, kept), and a short feasibility solve
with those values fixed fills in every auxiliary variable (patterns, topology, indicators).
If the plan does not map cleanly, the trivial plan (nothing starts, nothing is preempted)
is completed instead, which is always feasible.
"""

from __future__ import annotations

from collections import Counter

from ortools.sat.python import cp_model

from gangopt.prefilter import RoleKey
from gangopt.schema import Plan
from gangopt.solvers.cpsat.encoding import Encoding

COMPLETION_SECONDS = 2.0


def plan_values(enc: Encoding, plan: Plan) -> dict[int, int]:
    """Decision-variable values (by variable index) that reproduce ``plan`` at class level."""
    pre = enc.pre
    rnd = pre.rnd
    class_of = {node: k for k, cm in enumerate(enc.classes) for node in cm.cls.nodes}
    node_index = pre.topo.node_index
    pending_index = {g.name: i for i, g in enumerate(rnd.pending)}
    running_index = {g.name: i for i, g in enumerate(rnd.running)}
    admitted = set(plan.admitted)
    removed = {pod for p in plan.preemptions for pod in p.pods}
    values: dict[int, int] = {}
    for gi, var in enc.y.items():
        values[var.index] = int(rnd.pending[gi].name in admitted)
    new: Counter[tuple[RoleKey, int]] = Counter()
    for p in plan.placements:
        k = class_of.get(node_index[p.node])
        kind, gi = ("pending", pending_index[p.gang]) if p.gang in pending_index else ("running", running_index[p.gang])
        ri = next(i for i, r in enumerate(pre.gang(kind, gi).roles) if r.name == p.role)
        if k is not None:
            new[(RoleKey(kind, gi, ri), k)] += 1
    for key, var in enc.x.items():
        values[var.index] = new.get(key, 0)
    kept: Counter[tuple[int, str, int]] = Counter()
    for gi in enc.alive:
        for pod in rnd.running[gi].pods:
            k = class_of.get(node_index[pod.node])
            if k is not None and pod.name not in removed:
                kept[(gi, pod.role, k)] += 1
    for gi, var in enc.alive.items():
        if gi in pre.candidates:
            values[var.index] = int(any(pod.name not in removed for pod in rnd.running[gi].pods))
    for key3, var in enc.kept.items():
        values[var.index] = kept.get(key3, 0)
    return values


def trivial_values(enc: Encoding) -> dict[int, int]:
    """Nothing starts, nothing is preempted: always feasible."""
    values = {var.index: 0 for var in [*enc.y.values(), *enc.x.values()]}
    for gi, var in enc.alive.items():
        if gi in enc.pre.candidates:
            values[var.index] = 1
    for (gi, name, k), var in enc.kept.items():
        cm = enc.classes[k]
        values[var.index] = cm.cls.candidates[(gi, name)] * cm.cls.size
    return values


def complete(
    enc: Encoding, values: dict[int, int], seconds: float, seed: int, hard: float | None = None
) -> list[int] | None:
    """Every variable's value for a solution that agrees with ``values``, or None. It stops on
    ``seconds / 4`` deterministic units or ``seconds`` of wall time; with ``hard``
    (``policy.deterministic``: the search's safety net) on the work alone, unless ``hard``
    seconds pass."""
    model = enc.model.clone()
    model.clear_objective()  # type: ignore[no-untyped-call]
    model.clear_hints()  # type: ignore[no-untyped-call]
    hint = model.proto.solution_hint
    hint.vars.extend(list(values))
    hint.values.extend(list(values.values()))
    solver = cp_model.CpSolver()
    solver.parameters.fix_variables_to_their_hinted_value = True
    solver.parameters.max_time_in_seconds = max(0.05, seconds if hard is None else hard)
    solver.parameters.max_deterministic_time = max(0.02, seconds / 4)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return list(solver.response_proto.solution)


def warm_start(enc: Encoding, plan: Plan | None, seconds: float, hard: float | None = None) -> list[int] | None:
    """Hint the model with the completed ``plan`` (else the trivial plan) and return that
    solution, which is also the incumbent should CP-SAT find nothing better in time
    (``hard``: see :func:`complete`)."""
    seed = enc.pre.rnd.policy.seed
    solution = complete(enc, plan_values(enc, plan), seconds, seed, hard) if plan is not None else None
    if solution is None:
        solution = complete(enc, trivial_values(enc), seconds, seed, hard)
    if solution is None:
        return None
    enc.model.clear_hints()  # type: ignore[no-untyped-call]
    enc.model.proto.solution_hint.vars.extend(range(len(solution)))
    enc.model.proto.solution_hint.values.extend(solution)
    return solution
