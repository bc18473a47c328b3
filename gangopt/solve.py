"""The one door: every round, whatever the solver, goes through :func:`solve` once.

1. **Policy**: ``policy`` (if given) replaces the round's own.
2. **Look up** the solver by name in the registry (:data:`gangopt.solvers.SOLVERS`).
   A solver with ``lookahead`` (CP-SAT) decides the round's look-ahead view
   (:mod:`gangopt.lookahead`: reserved nodes, protected running gangs) and steps 3 and 4 run
   on the view; step 5 validates against the round itself.
3. **Run** it: a :class:`~gangopt.result.Result` (the plan's decisions, plus what
   the solver learned: prefiltered round, score, proven bounds).
4. **Annotate** (:mod:`gangopt.annotate`): waiting reasons, score with bounds, gap. With
   ``annotate=False`` this step is skipped (the plan keeps the solver's own short reasons,
   no score or gap): for callers that only apply the plan, such as replays, where the
   annotation cost about three times the greedy decision itself (Philly VC replay) and a
   fifth of CP-SAT's whole round (2.2 of 11.8 CPU-s on the Philly 600-job replay). The
   decisions do not depend on it: CP-SAT scores its candidates itself (step 7 of
   :mod:`gangopt.solvers.cpsat`) before the finisher runs.
5. **Validate** (:mod:`gangopt.validation`, independent of every solver). A CP-SAT plan that
   breaks a rule is replaced by the greedy plan, status ``fallback``, and the message names
   the broken rules; a greedy or peer plan that breaks one is an internal error
   (``RuntimeError``): nothing stands behind them.
6. **Time**: ``stats.total_seconds`` (wall) and ``stats.cpu_seconds`` (this process and the
   solver's child processes) cover steps 2 to 5, and so does ``policy.time_limit``: CP-SAT
   keeps time for steps 4 and 5, and the waiting reasons of step 4 stop before the limit
   (leaving time for the validator, which always runs; issue 13).

:func:`run` is steps 3 to 6 for a decider made once and kept (a replay keeps one per
simulation, so that a stateful emulation keeps its state between rounds).

Both run with the garbage collector eased (:func:`gangopt.gcpause.fewer_collections`, which
restores the caller's thresholds and is safe under threads), for library callers as the CLI
already did: a library ``solve`` of the fragmented XL round ran two full collections, 2.5 of
its 11.7 CPU-s, and none inside the block (9.8 CPU-s).
"""

from __future__ import annotations

import resource
import time

from gangopt.annotate import annotate as finish
from gangopt.annotate import slowdown
from gangopt.gcpause import fewer_collections
from gangopt.lookahead import look_ahead
from gangopt.result import Result
from gangopt.schema import Plan, Policy, Round, Status
from gangopt.solvers import Decide, Solver, get_solver
from gangopt.solvers.greedy import greedy
from gangopt.validation import Violation, validate


def solve(
    rnd: Round,
    policy: Policy | None = None,
    *,
    solver: str = "cpsat",
    annotate: bool = True,
    lp_bounds: bool | None = None,
) -> Plan:
    """Decide one round. ``policy`` overrides ``rnd.policy``; ``solver`` names any entry of
    :data:`gangopt.solvers.SOLVERS` (``ValueError`` lists them); ``annotate=False`` skips
    the annotation (reasons, bounded score, gap), not the decisions; ``lp_bounds`` adds
    (True) or leaves out (False) the LP bounds, by default the solver's
    (:attr:`~gangopt.solvers.Solver.lp_bounds`: CP-SAT only). Every plan returned has passed
    the validator."""
    start = time.perf_counter()
    cpu = cpu_seconds()
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    spec = get_solver(solver)
    return run(rnd, spec, spec.make(None), annotate=annotate, start=start, cpu=cpu, lp_bounds=lp_bounds)


def run(
    rnd: Round,
    spec: Solver,
    decide: Decide,
    *,
    annotate: bool = True,
    start: float | None = None,
    cpu: float | None = None,
    lp_bounds: bool | None = None,
) -> Plan:
    """Steps 3 to 6 of the module docstring with a decider of ``spec`` made beforehand."""
    start = time.perf_counter() if start is None else start
    cpu = cpu_seconds() if cpu is None else cpu
    with fewer_collections():
        return _run(rnd, spec, decide, annotate, start, cpu, lp_bounds)


def _run(
    rnd: Round, spec: Solver, decide: Decide, annotate: bool, start: float, cpu: float, lp_bounds: bool | None
) -> Plan:
    view = look_ahead(rnd) if spec.lookahead else None
    decided = view.round if view is not None else rnd
    deadline = start + rnd.policy.time_limit
    wall, own = time.perf_counter(), time.process_time()
    result = decide(decided)
    if rnd.policy.deterministic:  # no reserve read from the load or the host's pace
        slow = 1.0
    else:
        slow = result.slowdown if result.slowdown is not None else slowdown(wall, own, least=0.01)
    lp = spec.lp_bounds if lp_bounds is None else lp_bounds
    plan = _finished(decided, spec, result, annotate, deadline, slow, lp)
    if view is not None:
        plan = view.annotate(plan, rnd.now)
    violations = [] if result.finished and (view is None or not view.restricted) else validate(rnd, plan)
    if violations:
        if not spec.fallback:
            raise RuntimeError(f"internal: {spec.name} plan failed validation: {_details(violations)}")
        plan = _fallback(rnd, spec, result, violations, deadline, slow, lp)
    used = {"total_seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - cpu}
    return plan.model_copy(update={"stats": plan.stats.model_copy(update=used)})


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the CP-SAT search child)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _finished(
    rnd: Round, spec: Solver, result: Result, annotate: bool, deadline: float, slow: float, lp: bool
) -> Plan:
    if result.finished:
        return result.plan
    if annotate:
        return finish(
            rnd, result, explain_waiting=not spec.own_reasons, deadline=deadline, slowdown=slow, lp_bounds=lp
        )
    return result.plan.model_copy(update={"stats": result.stats})


def _fallback(
    rnd: Round, spec: Solver, result: Result, violations: list[Violation], deadline: float, slow: float, lp: bool
) -> Plan:
    """The greedy plan in place of a ``spec`` plan that broke ``violations`` (the safety net)."""
    plan = greedy(rnd).model_copy(
        update={
            "status": Status.FALLBACK,
            "message": f"internal: {spec.name} plan failed validation ({_details(violations)}); greedy plan returned",
        }
    )
    fallback = finish(
        rnd, Result(plan=plan, stats=result.stats, pre=result.pre), deadline=deadline, slowdown=slow, lp_bounds=lp
    )
    broken = validate(rnd, fallback)
    if broken:
        raise RuntimeError(f"internal: greedy plan failed validation: {_details(broken)}")
    return fallback


def _details(violations: list[Violation]) -> str:
    return "; ".join(f"{v.rule}: {v.message}" for v in violations[:3])
