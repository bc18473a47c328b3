"""solve(): input -> prefilter -> model -> CP-SAT -> plan -> validate.

The lexicographic objective (priority tiers, then the secondary terms) is optimized in
*stages*: adjacent tiers share one stage while their weighted sum stays far inside int64 (so
CP-SAT's LP stays well scaled); each stage fixes its optimum as a constraint for the next and
hints the next with its solution. The greedy plan hints the first stage and is the fallback
when CP-SAT finds nothing within the time limit. Every plan returned has passed the
independent validator; a plan that does not is never returned (the greedy one is, and says so).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from ortools.sat.python import cp_model

from gangopt.encoding import Encoding, encode
from gangopt.expansion import ClassValues, Decision, expand, reprieve, to_plan_parts
from gangopt.objective import SCALE, score
from gangopt.prefilter import Prefiltered, prefilter
from gangopt.reasons import waiting_reasons
from gangopt.schema import Plan, Policy, Round, Stats, Status

SolverName = Literal["cpsat", "greedy"]
STAGE_LIMIT = 1 << 50
"""Largest objective range one CP-SAT stage may carry (keeps LP scaling sane)."""


Part = int | str
"""A piece of the lexicographic objective: a priority tier (int), 'secondary' or 'fifo'."""


@dataclass
class Stage:
    """One objective of the lexicographic sequence."""

    parts: list[Part]
    """What this stage optimizes, most important first."""
    weights: list[int]
    value: float = 0.0
    bound: float = 0.0
    optimal: bool = False


def solve(rnd: Round, policy: Policy | None = None, *, solver: SolverName = "cpsat") -> Plan:
    """Decide one round. ``policy`` overrides ``rnd.policy``; ``solver='greedy'`` skips CP-SAT."""
    start = time.perf_counter()
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    if solver == "greedy":
        from gangopt.baselines import greedy

        plan = greedy(rnd)
        return _finish(rnd, plan, None, Stats(total_seconds=time.perf_counter() - start))
    if solver != "cpsat":
        raise ValueError(f"unknown solver {solver!r} (use 'cpsat' or 'greedy')")
    return _solve_cpsat(rnd, start)


def _solve_cpsat(rnd: Round, start: float) -> Plan:
    deadline = start + rnd.policy.time_limit
    pre = prefilter(rnd)
    stats = {
        "prefilter_seconds": pre.seconds,
        "nodes": len(rnd.cluster.nodes),
        "nodes_pruned": pre.nodes_pruned,
        "gangs": len(rnd.pending),
        "gangs_pruned": len(pre.pruned),
    }
    t0 = time.perf_counter()
    enc = encode(pre)
    proto = enc.model.proto
    stats.update(
        build_seconds=time.perf_counter() - t0,
        node_classes=len(enc.classes),
        variables=len(proto.variables),
        constraints=len(proto.constraints),
    )
    t1 = time.perf_counter()
    stages = _stages(enc)
    _hint_with_greedy(enc, rnd)
    values, stage_status, message = _run_stages(enc, stages, deadline)
    stats.update(solve_seconds=time.perf_counter() - t1, stages=len(stages))
    if values is None:
        from gangopt.baselines import greedy

        plan = greedy(rnd)
        plan = plan.model_copy(
            update={
                "status": Status.FALLBACK,
                "message": message or "CP-SAT found no plan in time; greedy plan returned",
            }
        )
        return _finish(rnd, plan, None, Stats(**stats, total_seconds=time.perf_counter() - start))
    decision = reprieve(rnd, expand(pre, enc.classes, values))
    plan = _plan_from_decision(rnd, pre, decision, stage_status, message)
    return _finish(rnd, plan, (stages, enc), Stats(**stats, total_seconds=time.perf_counter() - start), pre)


# ----------------------------------------------------------------------------- stages


def _part_terms(enc: Encoding, part: Part) -> list[tuple[cp_model.IntVar, int]]:
    if part == "secondary":
        return enc.secondary
    if part == "fifo":
        return enc.fifo
    assert isinstance(part, int)
    return enc.tiers[part]


def _part_range(enc: Encoding, part: Part) -> int:
    return sum(abs(c) * max(abs(enc.ub(v)), abs(enc.lb(v))) for v, c in _part_terms(enc, part))


def _stages(enc: Encoding) -> list[Stage]:
    """Group the parts (tiers highest first, then secondary, then the FIFO tie-break) into
    stages whose weighted ranges fit STAGE_LIMIT."""
    order: list[Part] = [p for p in sorted(enc.tiers, reverse=True) if enc.tiers[p]]
    order += [p for p in ("secondary", "fifo") if _part_terms(enc, p)]
    parts = [(p, _part_range(enc, p)) for p in order]
    stages: list[Stage] = []
    group: list[tuple[Part, int]] = []
    for part in parts:
        if group and _weighted_range([*group, part]) > STAGE_LIMIT:
            stages.append(_make_stage(group))
            group = []
        group.append(part)
    if group:
        stages.append(_make_stage(group))
    return stages


def _weighted_range(group: list[tuple[Part, int]]) -> int:
    total = 0
    for _, rng in reversed(group):
        total = total + (total + 1) * rng
    return total


def _make_stage(group: list[tuple[Part, int]]) -> Stage:
    """Weights make the stage lexicographic: each part outweighs everything after it."""
    weights: list[int] = []
    below = 0
    for _, rng in reversed(group):
        weight = below + 1
        weights.append(weight)
        below += weight * rng
    weights.reverse()
    return Stage(parts=[p for p, _ in group], weights=weights)


def _stage_expr(enc: Encoding, stage: Stage) -> tuple[list[cp_model.IntVar], list[int]]:
    vars_: list[cp_model.IntVar] = []
    coeffs: list[int] = []
    for weight, part in zip(stage.weights, stage.parts, strict=True):
        for var, coeff in _part_terms(enc, part):
            vars_.append(var)
            coeffs.append(weight * coeff)
    return vars_, coeffs


def _run_stages(enc: Encoding, stages: list[Stage], deadline: float) -> tuple[ClassValues | None, Status, str]:
    """Optimize each stage in turn; the last stage's solution is the answer."""
    policy = enc.pre.rnd.policy
    solver = cp_model.CpSolver()
    values: ClassValues | None = None
    status = Status.OPTIMAL
    message = ""
    model = enc.model
    if not stages:
        stages = []
    for i, stage in enumerate(stages):
        remaining = deadline - time.perf_counter()
        if remaining <= 0.01:
            status, message = Status.FEASIBLE, f"time limit reached before stage {i + 1} of {len(stages)}"
            break
        vars_, coeffs = _stage_expr(enc, stage)
        model.maximize(cp_model.LinearExpr.weighted_sum(vars_, coeffs))
        _configure(solver, policy, remaining / (len(stages) - i) if i < len(stages) - 1 else remaining)
        result = solver.solve(model)
        if result not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            if values is None:
                return None, Status.FALLBACK, f"CP-SAT stage {i + 1} ended {solver.status_name(result)}"
            status, message = Status.FEASIBLE, f"stage {i + 1} found nothing better in time"
            break
        stage.value = solver.objective_value
        stage.bound = solver.best_objective_bound
        stage.optimal = result == cp_model.OPTIMAL
        if not stage.optimal:
            status = Status.FEASIBLE
            message = "time limit reached; best plan found so far"
        values = _read_values(enc, solver)
        _fix_and_hint(enc, solver, vars_, coeffs, round(stage.value))
    if values is None and not stages:
        values = ClassValues(admitted=set(), alive={g: True for g in enc.alive}, x={}, kept={}, z={})
    return values, status, message


def _configure(solver: cp_model.CpSolver, policy: Policy, seconds: float) -> None:
    params = solver.parameters
    params.max_time_in_seconds = max(0.01, seconds)
    params.num_workers = policy.workers
    params.random_seed = policy.seed
    params.log_search_progress = False


def _read_values(enc: Encoding, solver: cp_model.CpSolver) -> ClassValues:
    return ClassValues(
        admitted={g for g, v in enc.y.items() if solver.value(v)},
        alive={g: bool(solver.value(v)) for g, v in enc.alive.items()},
        x={key: int(solver.value(v)) for key, v in enc.x.items()},
        kept={key: int(solver.value(v)) for key, v in enc.kept.items()},
        z={k: [int(solver.value(z)) for z in cm.z] for k, cm in enumerate(enc.classes) if cm.z},
    )


def _fix_and_hint(
    enc: Encoding, solver: cp_model.CpSolver, vars_: list[cp_model.IntVar], coeffs: list[int], value: int
) -> None:
    """Keep this stage's optimum for the next stages, and start them from this solution."""
    model = enc.model
    model.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs) >= value)
    model.clear_hints()  # type: ignore[no-untyped-call]
    proto = model.proto
    solution = solver.response_proto.solution
    proto.solution_hint.vars.extend(range(len(solution)))
    proto.solution_hint.values.extend(list(solution))


def _hint_with_greedy(enc: Encoding, rnd: Round) -> None:
    """Start CP-SAT from the greedy plan: gangs it admits and running gangs it keeps."""
    try:
        from gangopt.baselines import greedy
    except ImportError:  # pragma: no cover - baselines ship with the package
        return
    plan = greedy(rnd)
    admitted = set(plan.admitted)
    evicted = {p.gang for p in plan.preemptions if p.kind == "evict"}
    for gi, var in enc.y.items():
        enc.model.add_hint(var, rnd.pending[gi].name in admitted)
    for gi, var in enc.alive.items():
        if gi in enc.pre.candidates:
            enc.model.add_hint(var, rnd.running[gi].name not in evicted)


# ----------------------------------------------------------------------------- plan


def _plan_from_decision(rnd: Round, pre: Prefiltered, decision: Decision, status: Status, message: str) -> Plan:
    placements, preemptions, resizes = to_plan_parts(rnd, decision)
    return Plan(
        status=status,
        solver="cpsat",
        message=message,
        admitted=sorted(decision.admitted),
        placements=placements,
        preemptions=preemptions,
        resizes=resizes,
    )


def _finish(
    rnd: Round,
    plan: Plan,
    solved: tuple[list[Stage], Encoding] | None,
    stats: Stats,
    pre: Prefiltered | None = None,
) -> Plan:
    """Add waiting reasons, the score with bounds and gap, and stats; then validate."""
    from gangopt.validation import validate

    waiting = waiting_reasons(rnd, plan, pre)
    bounds, secondary_bound, gap = _bounds(solved)
    plan = plan.model_copy(update={"waiting": waiting, "stats": stats})
    plan = plan.model_copy(update={"score": score(rnd, plan, bounds, secondary_bound), "gap": gap})
    violations = validate(rnd, plan)
    if violations and plan.solver != "greedy":
        from gangopt.baselines import greedy

        details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
        fallback = greedy(rnd).model_copy(
            update={
                "status": Status.FALLBACK,
                "message": f"internal: CP-SAT plan failed validation ({details}); greedy plan returned",
            }
        )
        return _finish(rnd, fallback, None, stats, pre)
    if violations:
        details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
        raise RuntimeError(f"internal: greedy plan failed validation: {details}")
    return plan


def _bounds(solved: tuple[list[Stage], Encoding] | None) -> tuple[dict[int, float], float | None, float | None]:
    """Per-tier bounds and the overall gap from the stages (None when no CP-SAT ran).

    A stage proven optimal bounds every part at its value. Otherwise the stage bound bounds its
    first part (divided by its weight) and the later parts only by their own ranges.
    """
    if solved is None:
        return {}, None, None
    stages, enc = solved
    bounds: dict[int, float] = {}
    secondary_bound: float | None = None
    gap = 0.0
    for stage in stages:
        gap = max(gap, abs(stage.bound - stage.value) / max(1.0, abs(stage.value)))
        if stage.optimal:
            continue
        for i, part in enumerate(stage.parts):
            top = stage.bound // stage.weights[0] if i == 0 else _part_range(enc, part)
            if isinstance(part, int):
                bounds[part] = (top + enc.tier_constant.get(part, 0)) / SCALE
            elif part == "secondary":
                secondary_bound = (top + enc.secondary_constant) / SCALE
    return bounds, secondary_bound, gap
