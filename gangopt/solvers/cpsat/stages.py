"""The lexicographic objective as a sequence of CP-SAT solves ("stages").

Adjacent priority tiers share one stage while their weighted sum stays far inside int64 (so
CP-SAT's LP stays well scaled); each stage fixes its optimum as a constraint for the next and
starts from the best complete solution seen so far (the warm start first), so the answer is
never worse than the warm start, stage by stage. Work limits are deterministic, so reruns
agree; the wall clock is only the safety net. :func:`proven_bounds` turns what the stages
proved into per-tier and secondary bounds for the finisher.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from gangopt.objective import SCALE
from gangopt.result import ProvenBounds
from gangopt.schema import SAFETY_NET, Policy, Status
from gangopt.solvers.cpsat.encoding import Encoding
from gangopt.solvers.cpsat.expansion import ClassValues

STAGE_LIMIT = 1 << 24
"""Largest weighted objective range one CP-SAT stage may carry. Small on purpose: measured on
a 128-node round, one stage per large tier found far better plans in the same time than one
stage carrying every tier with weights near 2^40 (which wrecks the LP's scaling)."""

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
    ran: bool = False
    part_values: list[int] = field(default_factory=list)
    """Each part's value (model units, without constants) at the stage's answer."""


def _part_terms(enc: Encoding, part: Part) -> list[tuple[cp_model.IntVar, int]]:
    if part == "secondary":
        return enc.secondary
    if part == "fifo":
        return enc.fifo
    assert isinstance(part, int)
    return enc.tiers[part]


def _part_range(enc: Encoding, part: Part) -> int:
    return sum(abs(c) * max(abs(enc.ub(v)), abs(enc.lb(v))) for v, c in _part_terms(enc, part))


def plan_stages(enc: Encoding) -> list[Stage]:
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

PRESOLVE_MIN_VARIABLES = 5_000
"""Models with fewer variables are solved without CP-SAT's presolve. On a replay's small rounds
(6 nodes, tens of gangs, a few hundred variables, three or four stages each) presolve was most
of every solve's cost: the Philly 600-job replay went from 5.3 to 3.9 CPU-s without it, the
FIFO tie-break stage alone from 1.49 to 0.41 CPU-s over 72 solves; on instances/scale-S.json
(1,733 variables) the same optimum in 0.38 instead of 0.40 CPU-s. Large models keep it."""



def small_model(params: cp_model.SatParameters, variables: int) -> None:
    """Below :data:`PRESOLVE_MIN_VARIABLES`, no presolve. Tried and left out (2026-12-03): no
    symmetry detection and no probing either made the 177 solves of the Philly 600-job replay,
    re-solved alone, 1.66 -> 1.00 CPU-s with the same status and objective in every one, but
    the whole openb replay no cheaper (31.4 vs 29.7 CPU-s) and its outcome worse (other optimal
    plans among ties: mean wait 67.6 -> 86.6 min, p95 4.7 -> 6.2 h, deadline misses 76 -> 93)."""
    params.cp_model_presolve = variables >= PRESOLVE_MIN_VARIABLES


FIRST_STAGE_SHARE = 0.6
"""Share of the remaining time a stage may use when later stages follow: earlier stages
decide higher priorities, so they get more; time a stage does not use flows on."""


def run_stages(
    enc: Encoding, stages: list[Stage], deadline: float, start: list[int] | None
) -> tuple[ClassValues | None, Status, str]:
    """Optimize each stage in turn, starting from the complete warm start ``start``.

    Every full solution seen (the warm start and each stage's answer) stays in a pool; each
    stage starts from the pooled solution that is best for it among those that keep the
    earlier stages' optima. A stage that finds nothing better keeps that solution, so the
    answer is never worse than the warm start, stage by stage.
    """
    policy = enc.pre.rnd.policy
    solver = cp_model.CpSolver()
    pool: list[list[int]] = [start] if start is not None else []
    fixed: list[tuple[list[cp_model.IntVar], list[int], int]] = []
    incumbent = start
    status, message = Status.OPTIMAL, ""
    wall_hit = False
    # Work budgets derive from the policy, never from the clock, so that reruns agree.
    work = policy.work
    work_used = 0.0
    for i, stage in enumerate(stages):
        remaining = deadline - time.perf_counter()
        if remaining <= 0.01:
            status, message = Status.FEASIBLE, f"time limit reached before stage {i + 1} of {len(stages)}"
            if policy.deterministic:
                message = f"{SAFETY_NET}: {message} (a rerun may differ)"
            break
        vars_, coeffs = _stage_expr(enc, stage)
        incumbent = _best_in_pool(pool, fixed, vars_, coeffs)
        ceiling = _ceiling(enc, vars_, coeffs)
        if incumbent is not None and _objective_at(incumbent, vars_, coeffs) == ceiling:
            # The incumbent already reaches the largest value this stage could take (e.g.
            # every gang of these tiers starts): optimal without a solve.
            stage.ran = stage.optimal = True
            stage.value = stage.bound = float(ceiling)
            stage.part_values = [sum(c * incumbent[v.index] for v, c in _part_terms(enc, part)) for part in stage.parts]
            fixed.append((vars_, coeffs, ceiling))
            enc.model.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs) >= ceiling)
            continue
        if incumbent is not None:
            _hint(enc, incumbent)
        enc.model.maximize(cp_model.LinearExpr.weighted_sum(vars_, coeffs))
        last = i == len(stages) - 1
        work_left = max(0.0, work - work_used)
        _configure(solver, policy, work_left if last else work_left * FIRST_STAGE_SHARE, remaining)
        small_model(solver.parameters, len(enc.model.proto.variables))
        _gap_limits(solver, enc, stages[:i], stage, incumbent)
        result = solver.solve(enc.model)
        work_used += solver.deterministic_time
        wall_hit |= solver.wall_time >= solver.parameters.max_time_in_seconds * 0.99
        before = _objective_at(incumbent, vars_, coeffs)
        if result == cp_model.FEASIBLE and before is not None and solver.objective_value < before:
            result = cp_model.UNKNOWN  # the pooled solution was better: keep it
        if result in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            incumbent = list(solver.response_proto.solution)
            pool.append(incumbent)
            stage.value, stage.bound = solver.objective_value, solver.best_objective_bound
            # CP-SAT also says OPTIMAL when a gap limit stopped it: only a closed gap counts.
            stage.ran, stage.optimal = True, result == cp_model.OPTIMAL and stage.bound <= stage.value
        elif incumbent is not None:
            stage.ran = True
            stage.value = float(before or 0)
            stage.bound = _proven_bound(enc, stage, solver, result)
        else:
            return None, Status.FALLBACK, f"CP-SAT stage {i + 1} ended {solver.status_name(result)}"
        if not stage.optimal:
            within = result == cp_model.OPTIMAL
            status = Status.FEASIBLE
            message = message or (
                f"search stopped within the {policy.gap_limit:.2%} gap limit"
                if within
                else "time limit reached; best plan found so far"
            )
        if incumbent is not None:
            stage.part_values = [sum(c * incumbent[v.index] for v, c in _part_terms(enc, part)) for part in stage.parts]
        fixed.append((vars_, coeffs, round(stage.value)))
        enc.model.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs) >= round(stage.value))
    if incumbent is None and not stages:
        return ClassValues(admitted=set(), alive={g: True for g in enc.alive}, x={}, kept={}, z={}), status, ""
    if wall_hit:
        net = f"{SAFETY_NET}: " if policy.deterministic else ""
        message += f" ({net}stopped by the wall clock, not the work limit: a rerun may differ)"
    values = _values_from(enc, incumbent) if incumbent is not None else None
    return values, status, message.strip()


def _gap_limits(
    solver: cp_model.CpSolver, enc: Encoding, done: list[Stage], stage: Stage, incumbent: list[int] | None
) -> None:
    """Let a stage stop once what is left is within ``policy.gap_limit`` (0: prove it).

    A tier stage may stop when each of its tiers is within the limit of the incumbent's value
    for it: an absolute gap of the limit times the smallest weighted tier value (a relative
    gap on the weighted sum would let a heavy first tier hide the later ones). The secondary
    stage may stop when what is left is within the limit of the total value; the tiers are
    fixed by then, so their sum sets the absolute gap allowed."""
    params = solver.parameters
    params.relative_gap_limit = params.absolute_gap_limit = 0.0
    limit = enc.pre.rnd.policy.gap_limit
    if limit <= 0:
        return
    if stage.parts[0] == "fifo":
        params.relative_gap_limit = limit  # the FIFO tie-break: no value of its own
        return
    if stage.parts[0] == "secondary":
        tiers = sum(
            value + enc.tier_constant.get(part, 0)
            for s in done
            for part, value in zip(s.parts, s.part_values, strict=False)
            if isinstance(part, int)
        )
        params.absolute_gap_limit = max(0.0, limit * tiers * stage.weights[0])
        return
    if incumbent is None:
        return
    smallest = min(
        weight * (sum(c * incumbent[v.index] for v, c in _part_terms(enc, part)) + enc.tier_constant.get(part, 0))
        for part, weight in zip(stage.parts, stage.weights, strict=True)
        if isinstance(part, int)
    )
    params.absolute_gap_limit = max(0.0, limit * smallest)


def _proven_bound(enc: Encoding, stage: Stage, solver: cp_model.CpSolver, result: cp_model.CpSolverStatus) -> float:
    """The bound CP-SAT proved for a stage it did not improve; its ranges if it proved none."""
    if result == cp_model.INFEASIBLE:  # cannot happen: the pooled solution is feasible
        return stage.value
    bound = solver.best_objective_bound
    if result == cp_model.UNKNOWN or not math.isfinite(bound):  # UNKNOWN reports no bound
        bound = float(sum(w * _part_range(enc, p) for w, p in zip(stage.weights, stage.parts, strict=True)))
    return max(stage.value, bound)


def _ceiling(enc: Encoding, vars_: list[cp_model.IntVar], coeffs: list[int]) -> int:
    """The largest value the stage's objective could take, from variable bounds alone."""
    return sum(c * (enc.ub(v) if c > 0 else enc.lb(v)) for v, c in zip(vars_, coeffs, strict=True))


def _best_in_pool(
    pool: list[list[int]],
    fixed: list[tuple[list[cp_model.IntVar], list[int], int]],
    vars_: list[cp_model.IntVar],
    coeffs: list[int],
) -> list[int] | None:
    """The pooled solution best for this stage among those keeping every earlier optimum."""
    keeps = [s for s in pool if all((_objective_at(s, v, c) or 0) >= value for v, c, value in fixed)]
    return max(keeps, key=lambda s: _objective_at(s, vars_, coeffs) or 0, default=None)


def _configure(solver: cp_model.CpSolver, policy: Policy, work: float, hard: float) -> None:
    """The stage stops on deterministic ``work``, so reruns agree; the wall clock (``hard``:
    all the time left) is only the safety net."""
    params = solver.parameters
    params.max_time_in_seconds = max(0.01, hard)
    params.max_deterministic_time = max(0.005, work)
    params.num_workers = policy.workers
    params.random_seed = policy.seed
    # The full LP relaxation (level 2) is what proves the secondary terms: measured on the
    # S round, 0.3 s to proven optimal against 2.8 s at the default level; no slower on
    # the contention rounds S and M (2026-12-02).
    params.linearization_level = 2
    params.log_search_progress = False


def _objective_at(solution: list[int] | None, vars_: list[cp_model.IntVar], coeffs: list[int]) -> int | None:
    if solution is None:
        return None
    return sum(c * solution[v.index] for v, c in zip(vars_, coeffs, strict=True))


def _values_from(enc: Encoding, solution: list[int]) -> ClassValues:
    """The decisions in a full solution vector (indexed like the model's variables)."""
    return ClassValues(
        admitted={g for g, v in enc.y.items() if solution[v.index]},
        alive={g: bool(solution[v.index]) for g, v in enc.alive.items()},
        x={key: solution[v.index] for key, v in enc.x.items()},
        kept={key: solution[v.index] for key, v in enc.kept.items()},
        z={k: [solution[z.index] for z in cm.z] for k, cm in enumerate(enc.classes) if cm.z},
    )


def _hint(enc: Encoding, solution: list[int]) -> None:
    """Start the next solve from ``solution`` (a complete assignment)."""
    enc.model.clear_hints()  # type: ignore[no-untyped-call]
    enc.model.proto.solution_hint.vars.extend(range(len(solution)))
    enc.model.proto.solution_hint.values.extend(solution)


def _ceiling_of(enc: Encoding, stage: Stage) -> float:
    vars_, coeffs = _stage_expr(enc, stage)
    return float(_ceiling(enc, vars_, coeffs))


def proven_bounds(enc: Encoding, stages: list[Stage]) -> ProvenBounds:
    """Per-tier bounds and the secondary bound proven by the stages.

    A stage proven optimal bounds each of its parts at the value it reached. Otherwise the
    stage bound bounds its first part (divided by its weight) and the later parts only by their
    own ranges; a stage the time limit never reached is bounded by its ranges alone.
    """
    bounds: dict[int, float] = {}
    secondary_bound: float | None = None
    for stage in stages:
        for i, part in enumerate(stage.parts):
            proven = True
            if stage.optimal and stage.part_values:
                top = float(stage.part_values[i])
            elif i == 0 and stage.ran and stage.bound < _ceiling_of(enc, stage):
                top = float(stage.bound // stage.weights[0])
            else:
                top, proven = float(_part_range(enc, part)), False
            if isinstance(part, int):
                bounds[part] = (top + enc.tier_constant.get(part, 0)) / SCALE
            elif part == "secondary" and proven:
                secondary_bound = (top + enc.secondary_constant) / SCALE
    return ProvenBounds(tiers=bounds, secondary=secondary_bound)
