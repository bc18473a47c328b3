"""solve(): input -> prefilter -> model -> CP-SAT -> plan -> validate.

The lexicographic objective (priority tiers, then the secondary terms) is optimized in
*stages*: adjacent tiers share one stage while their weighted sum stays far inside int64 (so
CP-SAT's LP stays well scaled); each stage fixes its optimum as a constraint for the next and
hints the next with its solution. The greedy plan hints the first stage and is the fallback
when CP-SAT finds nothing within the time limit. Every plan returned has passed the
independent validator; a plan that does not is never returned (the greedy one is, and says so).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Literal

from ortools.sat.python import cp_model

from gangopt.bounds import CheapBounds, cheap_bounds, packed_tier_bounds, reaches_ceilings, tier_ceilings
from gangopt.objective import SCALE, lexicographic_key, score, with_bounds
from gangopt.prefilter import Prefiltered, prefilter
from gangopt.reasons import waiting_reasons
from gangopt.schema import Plan, Policy, Round, Score, Stats, Status, TierScore
from gangopt.solvers.cpsat.encoding import Encoding, encode
from gangopt.solvers.cpsat.expansion import ClassValues, Decision, expand, reprieve, to_plan_parts
from gangopt.solvers.cpsat.hints import COMPLETION_SECONDS, warm_start
from gangopt.solvers.cpsat.neighbourhood import restrict
from gangopt.solvers.greedy.engine import greedy

if TYPE_CHECKING:
    from gangopt.validation import Violation

SolverName = Literal[
    "cpsat", "greedy", "koordinator_like", "volcano_like", "kueue_like", "slurm_backfill_like", "fifo_first_fit"
]
"""cpsat (the optimizer), greedy (the baseline), or an emulated peer scheduler (docs/peers.md)."""
STAGE_LIMIT = 1 << 24
"""Largest weighted objective range one CP-SAT stage may carry. Small on purpose: measured on
a 128-node round, one stage per large tier found far better plans in the same time than one
stage carrying every tier with weights near 2^40 (which wrecks the LP's scaling)."""
DETERMINISTIC_SHARE = 0.3
"""CP-SAT's deterministic time limit, as a share of a stage's wall-clock budget. One worker
stopped by deterministic time gives the same plan on every run; measured here, a second of
wall time buys 0.3 to 0.5 deterministic units, so the deterministic limit normally binds first
and the wall-clock limit is the safety net."""


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


def solve(rnd: Round, policy: Policy | None = None, *, solver: SolverName = "cpsat", annotate: bool = True) -> Plan:
    """Decide one round. ``policy`` overrides ``rnd.policy``; ``solver='greedy'`` skips CP-SAT.

    ``annotate=False`` (not for ``solver='cpsat'``, which needs the score to choose its
    answer) returns the solver's plan without the annotation: no score, bounds or gap (left at
    their defaults), the solver's own short waiting reasons instead of the explained ones, and
    stats with ``total_seconds`` only. The plan is validated all the same. It is for callers
    that only apply the plan, such as the simulator's ``greedy`` policy: measured on a replay
    of the Philly VC, the annotation (prefilter, explained reasons, score, the cheap bounds'
    LP) cost about three times the greedy decision itself.
    """
    start = time.perf_counter()
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    if solver not in ("cpsat", "greedy"):
        from gangopt.solvers.peers.common import (  # imported here: peers builds on this module's siblings
            SOLVERS,
            decide,
        )

        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r} (use cpsat, greedy or one of {', '.join(SOLVERS)})")
        return decide(rnd, solver, policy, annotate=annotate)
    if solver == "greedy":
        plan = greedy(rnd)
        if not annotate:
            return _validated_greedy(rnd, plan, start)
        return _finish(rnd, plan, None, Stats(total_seconds=time.perf_counter() - start))
    if solver != "cpsat":
        raise ValueError(f"unknown solver {solver!r} (use 'cpsat' or 'greedy')")
    if not annotate:
        raise ValueError("annotate=False needs a solver other than 'cpsat' (CP-SAT chooses its plan by the score)")
    return _solve_cpsat(rnd, start)


def _validated_greedy(rnd: Round, plan: Plan, start: float) -> Plan:
    """A greedy plan, unannotated, once it has passed the validator (``annotate=False``)."""
    from gangopt.validation import validate

    _raise_if_invalid_greedy(validate(rnd, plan))
    return plan.model_copy(update={"stats": Stats(total_seconds=time.perf_counter() - start)})


def _raise_if_invalid_greedy(violations: list[Violation]) -> None:
    """A greedy plan that breaks a rule is a bug with no fallback behind it: raise."""
    if violations:
        details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
        raise RuntimeError(f"internal: greedy plan failed validation: {details}")


BUILD_SECONDS_PER_VARIABLE = 3.5e-5
"""Measured model build cost per *estimated* variable on this project's 2-core machines
(``instances/scale-M.json``: 58,658 estimated, 61,330 built, 1.8 s)."""
BUILD_SHARE = 0.5
RESTRICTED_SHARE = 4
"""A restricted model aims at this fraction (1/n) of the build budget: its classes split into
single nodes more often, so it builds more variables per candidate placement."""
"""A model whose estimated build takes more than this share of the time limit is not built."""


def _estimated_variables(pre: Prefiltered) -> int:
    """Pod-count variables the model would create (the bulk of it), from the fit table."""
    kept = set(pre.pending)
    growers = set(pre.growers)
    return sum(
        int((fit > 0).sum())
        for key, fit in pre.fits.items()
        if key.gang in (kept if key.kind == "pending" else growers)
    )


HARD_GRACE = 0.25
"""Seconds (plus 5 % of the time limit) the child may run past the limit before it is killed."""
IN_PROCESS_VARIABLES = 5_000
"""Models estimated below this many variables are searched in-process even with
``policy.hard_limit``: CP-SAT keeps its own limits on models this small (the overruns the
child guards against are presolves of large models), and the fork costs about 45 ms, a fifth
of a 128-node round (``instances/scale-S.json``: 0.175 s in-process, 0.221 s forked, medians of
15 alternating runs)."""


def _search_in_child(rnd: Round, start: float, pre: Prefiltered, baseline: Plan, stats: dict[str, Any]) -> Plan:
    """Search in a forked child; kill it if it overruns and answer with the greedy plan.

    CP-SAT can run far past its own limits on large models (presolve, or-tools #5163), and
    memory cannot be capped reliably (#1944): a process that can be killed is the only
    guarantee (optimization-notes §3.6). The child inherits the prefiltered round and the
    greedy plan (fork copies nothing up front); the parent explains and validates the greedy
    fallback meanwhile, on the second core.
    """
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(rnd, start, pre, baseline, stats, sender), daemon=True)
    child.start()
    sender.close()
    # The complete fallback answer (explained and validated) is ready before the deadline, so
    # a kill costs no time after it.
    fallback = _finish(
        rnd,
        baseline.model_copy(
            update={
                "status": Status.FALLBACK,
                "message": f"CP-SAT did not return within the {rnd.policy.time_limit:g} s limit and was stopped; "
                "greedy plan returned",
            }
        ),
        None,
        Stats(**stats),
        pre,
    )
    wait = start + rnd.policy.time_limit * 1.05 + HARD_GRACE - time.perf_counter()
    try:
        if receiver.poll(max(0.0, wait)):
            kind, payload = receiver.recv()
            child.join()
            if kind == "plan":
                assert isinstance(payload, Plan)
                return payload
            raise RuntimeError(f"CP-SAT child failed: {payload}")
    except EOFError:
        pass  # the child died without answering (e.g. out of memory): fall back below
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        receiver.close()
    final = fallback.stats.model_copy(update={"total_seconds": time.perf_counter() - start})
    return fallback.model_copy(update={"stats": final})


def _child_main(
    rnd: Round, start: float, pre: Prefiltered, baseline: Plan, stats: dict[str, Any], sender: Connection
) -> None:
    """Entry point of the solving child: send ("plan", Plan) or ("error", text), then exit."""
    try:
        sender.send(("plan", _search(rnd, start, pre, baseline, stats)))
    except BaseException as error:
        sender.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        sender.close()
        os._exit(0)  # no atexit handlers or buffered output of the parent's copy


SEARCH_SHARE = 0.85
"""Share of the time limit the search may use; the rest is kept for expanding the answer to
nodes, explaining it and validating it."""


def _solve_cpsat(rnd: Round, start: float) -> Plan:
    """Prefilter and greedy in this process; then the answer at once if the cheap bounds
    prove the greedy plan good enough, else the CP-SAT search (in a child that can be killed,
    with ``policy.hard_limit``)."""
    pre = prefilter(rnd)
    stats: dict[str, Any] = {
        "prefilter_seconds": pre.seconds,
        "nodes": len(rnd.cluster.nodes),
        "nodes_pruned": pre.nodes_pruned,
        "gangs": len(rnd.pending),
        "gangs_pruned": len(pre.pruned),
    }
    baseline, proven = _best_greedy(rnd, pre)
    if proven is not None:
        return _finish(rnd, proven, None, Stats(**stats, total_seconds=time.perf_counter() - start), pre)
    forkable = "fork" in multiprocessing.get_all_start_methods()
    if rnd.policy.hard_limit and forkable and _estimated_variables(pre) >= IN_PROCESS_VARIABLES:
        return _search_in_child(rnd, start, pre, baseline, stats)
    return _search(rnd, start, pre, baseline, stats)


def _search(rnd: Round, start: float, pre: Prefiltered, baseline: Plan, stats: dict[str, Any]) -> Plan:
    """Build the CP-SAT model (whole, or restricted around ``baseline`` when too large to
    build in time), run the stages from ``baseline`` and turn the answer into a plan."""
    deadline = start + rnd.policy.time_limit * SEARCH_SHARE
    estimate = _estimated_variables(pre)
    budget = int(BUILD_SHARE * rnd.policy.time_limit / BUILD_SECONDS_PER_VARIABLE)
    allowed = None
    if estimate > budget:
        # Too large to model whole in time: model the neighbourhood of the greedy plan.
        allowed = restrict(pre, baseline, budget // RESTRICTED_SHARE)
        restricted = sum(len(classes) for classes in allowed.values())
        if restricted > budget:
            plan = baseline.model_copy(
                update={
                    "status": Status.FALLBACK,
                    "message": f"even a restricted model would have about {restricted:,} variables, too many "
                    f"to build and solve within the {rnd.policy.time_limit:g} s time limit; greedy plan returned",
                }
            )
            return _finish(rnd, plan, None, Stats(**stats, total_seconds=time.perf_counter() - start), pre)
    t0 = time.perf_counter()
    enc = encode(pre, allowed)
    proto = enc.model.proto
    stats.update(
        build_seconds=time.perf_counter() - t0,
        node_classes=len(enc.classes),
        variables=len(proto.variables),
        constraints=len(proto.constraints),
    )
    t1 = time.perf_counter()
    stages = _stages(enc)
    start_solution = warm_start(enc, baseline, min(COMPLETION_SECONDS, 0.1 * rnd.policy.time_limit))
    values, stage_status, message = _run_stages(enc, stages, deadline, start_solution)
    stats.update(solve_seconds=time.perf_counter() - t1, stages=len(stages))
    if values is None:
        plan = baseline.model_copy(
            update={
                "status": Status.FALLBACK,
                "message": message or "CP-SAT found no plan in time; greedy plan returned",
            }
        )
        return _finish(rnd, plan, None, Stats(**stats, total_seconds=time.perf_counter() - start))
    decision = reprieve(rnd, expand(pre, enc.classes, values))
    if decision.yielded:
        # The model does not see that quota a victim held went to its own priority (rule 5):
        # the repaired plan is valid but no longer the model's proven optimum.
        stage_status = Status.FEASIBLE
        note = f"{', '.join(decision.yielded)} left waiting so that a running gang of the same priority keeps its place"
        message = f"{message}; {note}" if message else note
    plan = _plan_from_decision(rnd, pre, decision, stage_status, message)
    if lexicographic_key(score(rnd, plan)) < lexicographic_key(score(rnd, baseline)):
        # The class-level answer, put on nodes, scored below the greedy plan (the secondary
        # terms see node-level detail the model only approximates), or the search never
        # caught up with a warm start it could not use: the greedy plan is the answer, and
        # CP-SAT's bounds (when the model was whole) still bound it.
        plan = baseline.model_copy(
            update={
                "status": Status.FEASIBLE if allowed is None else Status.FALLBACK,
                "message": f"the greedy plan scores better than CP-SAT's own in time. {message}".strip(),
            }
        )
        # (Not after a repair: the stages' secondary bound holds only at their tier optima.)
        solved = (stages, enc) if allowed is None and not decision.yielded else None
        return _finish(rnd, plan, solved, Stats(**stats, total_seconds=time.perf_counter() - start), pre)
    if allowed is not None:
        # Bounds of a restricted model do not bound the round: report the round's cheap ones.
        kept = sum(len(classes) for classes in allowed.values())
        note = f"large round: restricted model around the greedy plan ({kept:,} of {estimate:,} candidate placements)"
        plan = plan.model_copy(
            update={"status": Status.FEASIBLE, "message": f"{note}; {plan.message}" if plan.message else note}
        )
        return _finish(rnd, plan, None, Stats(**stats, total_seconds=time.perf_counter() - start), pre)
    # A repaired plan is not the model's optimum, so the stages' proofs (the secondary bound
    # holds only for plans at the tiers' optima) do not bound it: report the cheap bounds.
    solved = None if decision.yielded else (stages, enc)
    return _finish(rnd, plan, solved, Stats(**stats, total_seconds=time.perf_counter() - start), pre)


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


FIRST_STAGE_SHARE = 0.6
"""Share of the remaining time a stage may use when later stages follow: earlier stages
decide higher priorities, so they get more; time a stage does not use flows on."""


def _run_stages(
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
    work = policy.work_limit if policy.work_limit is not None else DETERMINISTIC_SHARE * policy.time_limit
    work_used = 0.0
    for i, stage in enumerate(stages):
        remaining = deadline - time.perf_counter()
        if remaining <= 0.01:
            status, message = Status.FEASIBLE, f"time limit reached before stage {i + 1} of {len(stages)}"
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
        message += " (stopped by the wall clock, not the work limit: a rerun may differ)"
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


def _best_greedy(rnd: Round, pre: Prefiltered) -> tuple[Plan, Plan | None]:
    """The better (by the objective) of the two greedy variants, and that plan marked as the
    answer when the cheap bounds already prove it within ``policy.gap_limit`` (else None).

    The better plan is CP-SAT's warm start and fallback: starting from it is what makes
    CP-SAT's plan never worse than greedy's. The second variant is skipped when the first is
    already proven good enough or reaches every tier's ceiling (it costs seconds on the
    largest rounds)."""
    eager = greedy(rnd)
    eager_score = score(rnd, eager)
    proven = _proven_by_cheap_bounds(rnd, pre, eager, eager_score)
    if proven is not None or reaches_ceilings(_tier_values(eager_score), tier_ceilings(pre)):
        return eager, proven
    deferred = greedy(rnd, growth="deferred")
    deferred_score = score(rnd, deferred)
    if lexicographic_key(deferred_score) <= lexicographic_key(eager_score):
        return eager, None
    return deferred, _proven_by_cheap_bounds(rnd, pre, deferred, deferred_score)


def _proven_by_cheap_bounds(rnd: Round, pre: Prefiltered, plan: Plan, unbounded: Score) -> Plan | None:
    """``plan`` (a greedy one, scored ``unbounded``) marked as the answer when the cheap
    bounds prove it within ``policy.gap_limit``: every tier's own relative gap and the
    total-value gap within the limit. No model is built then. None otherwise.

    Checking every tier, not just the total, keeps the limit from hiding a high-priority gang
    that could have started: at 16,384 nodes one 1,024-GPU gang is under 1 % of the total but
    several percent of its tier."""
    limit = rnd.policy.gap_limit
    bounds = _cheap_bounds_for(pre, unbounded)
    s = with_bounds(unbounded, bounds.tiers_in_units(), bounds.secondary / SCALE)
    gap = _plan_gap(s)
    if gap is None or gap > limit or any(_tier_gap(t) > limit for t in s.tiers):
        return None
    return plan.model_copy(
        update={
            "status": Status.OPTIMAL if gap <= 0 else Status.FEASIBLE,
            "message": f"greedy plan proven within {gap:.3%} of the round's cheap bounds, every tier "
            f"within {max((_tier_gap(t) for t in s.tiers), default=0.0):.3%} (gap limit {limit:.2%}); "
            "no model needed",
        }
    )


def _tier_gap(tier: TierScore) -> float:
    return max(0.0, tier.bound - tier.value) / max(1.0 / SCALE, abs(tier.value))


def _cheap_bounds_for(pre: Prefiltered, unbounded: Score) -> CheapBounds:
    """The cheap bounds, tight on the secondary terms when a plan scoring ``unbounded``
    shows that every tier's ceiling can be reached (every optimal plan then runs every kept
    gang); when it shows that only the top tiers can, the first tier below them is bounded by
    what fits beside them (:func:`~gangopt.bounds.packed_tier_bounds`)."""
    values, ceilings = _tier_values(unbounded), tier_ceilings(pre)
    bounds = cheap_bounds(pre, reaches_ceilings(values, ceilings))
    reached = {p: values.get(p, 0.0) >= v / SCALE - 1e-9 for p, v in ceilings.items()}
    if all(reached.values()):
        return bounds  # every tier at its ceiling: nothing to tighten
    packed = packed_tier_bounds(pre, reached)
    tiers = {p: min(v, packed.get(p, v)) for p, v in bounds.tiers.items()}
    return CheapBounds(tiers=tiers, secondary=bounds.secondary)


def _tier_values(s: Score) -> dict[int, float]:
    return {t.priority: t.value for t in s.tiers}


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
    """Add waiting reasons, the score with bounds and gap, and stats; then validate. The time
    this takes is added to ``stats.total_seconds`` (seconds on large contended rounds)."""
    from gangopt.validation import validate

    began = time.perf_counter()
    pre = pre or prefilter(rnd)
    waiting = waiting_reasons(rnd, plan, pre)
    plan = plan.model_copy(update={"waiting": waiting, "stats": stats})
    unbounded = score(rnd, plan)
    bounds, secondary_bound = _combined_bounds(_bounds(solved), _cheap_bounds_for(pre, unbounded))
    plan = plan.model_copy(update={"score": with_bounds(unbounded, bounds, secondary_bound)})
    plan = plan.model_copy(update={"gap": _plan_gap(plan.score)})
    violations = validate(rnd, plan)
    if violations and plan.solver != "greedy":
        details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
        fallback = greedy(rnd).model_copy(
            update={
                "status": Status.FALLBACK,
                "message": f"internal: CP-SAT plan failed validation ({details}); greedy plan returned",
            }
        )
        return _finish(rnd, fallback, None, stats, pre)
    _raise_if_invalid_greedy(violations)
    total = stats.total_seconds + time.perf_counter() - began
    return plan.model_copy(update={"stats": stats.model_copy(update={"total_seconds": total})})


def _combined_bounds(
    proven: tuple[dict[int, float], float | None], cheap: CheapBounds
) -> tuple[dict[int, float], float]:
    """The tighter of CP-SAT's proven bounds and the cheap ones, part by part (both hold)."""
    tiers, secondary = proven
    combined = {p: min(v, tiers.get(p, v)) for p, v in cheap.tiers_in_units().items()}
    cheap_secondary = cheap.secondary / SCALE
    return combined, cheap_secondary if secondary is None else min(secondary, cheap_secondary)


def _ceiling_of(enc: Encoding, stage: Stage) -> float:
    vars_, coeffs = _stage_expr(enc, stage)
    return float(_ceiling(enc, vars_, coeffs))


def _plan_gap(s: Score) -> float | None:
    """Relative gap of the total value (tiers plus secondary, all in GPU-equivalents) to the
    sum of the bounds, over the total value. The order stays lexicographic; this is the one
    number that says how much value any plan could add. None when the secondary is unbounded."""
    if s.secondary_bound is None:
        return None
    value = sum(t.value for t in s.tiers) + s.secondary
    bound = sum(t.bound for t in s.tiers) + s.secondary_bound
    return max(0.0, bound - value) / max(1.0 / SCALE, abs(value))


def _bounds(solved: tuple[list[Stage], Encoding] | None) -> tuple[dict[int, float], float | None]:
    """Per-tier bounds and the secondary bound proven by the stages.

    A stage proven optimal bounds each of its parts at the value it reached. Otherwise the
    stage bound bounds its first part (divided by its weight) and the later parts only by their
    own ranges; a stage the time limit never reached is bounded by its ranges alone.
    """
    if solved is None:
        return {}, None
    stages, enc = solved
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
    return bounds, secondary_bound
