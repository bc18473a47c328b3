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
   (``RuntimeError``): nothing stands behind them. The validator's checks of the decisions
   (:func:`~gangopt.validation.validate_decisions`: admitted gangs, placements, preemptions,
   resizes, which step 4 and the look-ahead's note never change) start in a child forked on
   the second core when step 3 returns, and run beside step 4 (:mod:`gangopt.beside`); the
   door then checks the waiting list step 4 wrote (:func:`~gangopt.validation.validate_waiting`)
   on the plan returned, whose decisions it compares with those the child checked. So every
   rule is checked on the plan returned, as before, and the plan is the same. Only with a
   second CPU no other process runs on, one thread (the service solves in threads) and
   ``os.fork`` (:func:`gangopt.beside.second_core`), a solve that ran at most
   :data:`~gangopt.annotate.BESIDE_SLOWDOWN` times slower than its CPU time, and plans of at
   least :data:`BESIDE_LEAST_SECONDS` of validation; a child that fails or dies, or other
   decisions, and the whole validator runs here. What it saves is small: on the fragmented L
   round (4,096 nodes) the parent's CPU after CP-SAT returns, 0.62-0.66 CPU-s (finisher
   0.44-0.46, validator 0.19-0.20), became 0.52-0.56 (the finisher 0.07-0.08 more: the pages
   it writes are copied after the fork), at most 0.1 s of wall time on an idle second core
   (docs/benchmarks.md, "h33-beside").
6. **Time**: ``stats.total_seconds`` (wall) and ``stats.cpu_seconds`` (this process and the
   solver's child processes) cover steps 2 to 5, and so does ``policy.time_limit``: CP-SAT
   keeps time for steps 4 and 5, and the waiting reasons of step 4 stop before the limit
   (leaving time for the validator, which always runs; issue 13): with the decisions' checks
   beside them, the waiting list's check before the limit, or the child's expected end if
   later, unless the machine is loaded (:func:`gangopt.annotate.reasons_deadline`).
   ``stats.cpu_seconds`` counts the child (reaped before it is read).

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

from gangopt.annotate import (
    BESIDE_SLOWDOWN,
    close_reasons_beside,
    close_reasons_beside_of,
    slowdown,
    validator_seconds,
)
from gangopt.annotate import annotate as finish
from gangopt.beside import Beside, beside
from gangopt.gcpause import fewer_collections
from gangopt.lookahead import look_ahead
from gangopt.result import Result
from gangopt.schema import Plan, Policy, Round, Status
from gangopt.solvers import Decide, Solver, get_solver
from gangopt.solvers.greedy import greedy
from gangopt.validation import Violation, same_decisions, validate, validate_decisions, validate_waiting


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
    try:
        result = decide(decided)
    except BaseException:
        close_reasons_beside_of(decided)  # a child the raising solver started: its result never came
        raise
    if rnd.policy.deterministic:  # no reserve read from the load or the host's pace
        slow = 1.0
    else:
        slow = result.slowdown if result.slowdown is not None else slowdown(wall, own, least=0.01)
    lp = spec.lp_bounds if lp_bounds is None else lp_bounds
    checks = not result.finished or (view is not None and view.restricted)
    # Beside the finisher only: with ``annotate=False`` (a replay) nothing would run beside the
    # child, and the door would wait for it after paying the fork.
    checker = _decisions_beside(rnd, result.plan, slow) if checks and annotate and not result.finished else None
    try:
        end = None if checker is None or rnd.policy.deterministic else checker[1]
        plan = _finished(decided, spec, result, annotate, deadline, slow, lp, end)
        if view is not None:
            plan = view.annotate(plan, rnd.now)
        violations = _validated(rnd, plan, result.plan, checker) if checks else []
    finally:
        if checker is not None:
            checker[0].close()
        close_reasons_beside(result.pre)  # a child the finisher did not collect (annotate=False)
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


BESIDE_LEAST_SECONDS = 0.1
"""Expected seconds of the validator's checks of the decisions (:func:`validator_seconds`) below
which they are not forked beside the finisher (:func:`_decisions_beside`). The fork costs the
parent more than its milliseconds: each page the finisher then writes (reference counts, new
objects in old arenas) is copied, 12,300 faults and 0.07 CPU-s at L (4,096 nodes: a 0.19 CPU-s
validation moved off its core). At 0.05 the fragmented M round (4,632 pods, 0.03 s of
validation) forked, and its command took 0.46-0.48 s instead of 0.43-0.44."""


def _decisions_beside(rnd: Round, plan: Plan, slow: float) -> tuple[Beside[list[Violation]], float] | None:
    """The validator's checks of ``plan``'s decisions (:func:`validate_decisions`), started in a
    child beside the finisher (:mod:`gangopt.beside`), and the instant they are expected to end
    (:func:`validator_seconds`, times ``slow``); None where they are too short to pay
    (:data:`BESIDE_LEAST_SECONDS`), where the solve ran more than
    :data:`~gangopt.annotate.BESIDE_SLOWDOWN` times slower than its CPU time (the machine's cores
    are taken: at L on a machine at load 2.7 the finisher took 1.15-1.29 s of wall time beside
    the child, 0.56-0.69 s and the validator 0.20-0.34 s without it), or where no child can run
    beside: the door validates in-process."""
    seconds = validator_seconds(rnd, plan)
    if seconds < BESIDE_LEAST_SECONDS or slow > BESIDE_SLOWDOWN:
        return None
    child = beside(lambda: validate_decisions(rnd, plan))
    return None if child is None else (child, time.perf_counter() + seconds * slow)


BESIDE_PATIENCE_SECONDS = 5.0
"""Seconds past its expected end (:func:`_decisions_beside`) the door waits for the validator's
child before it kills it and validates in-process: a child that never answers (a lock some
other thread held at the fork, for instance) must not hold the solve. The validator of the
fragmented XL round takes 0.6-0.8 CPU-s."""


def _validated(
    rnd: Round, plan: Plan, checked: Plan, checker: tuple[Beside[list[Violation]], float] | None
) -> list[Violation]:
    """Every violation of ``plan`` (:func:`validate`): the child's of the decisions of
    ``checked`` when ``plan`` decides the same, and the waiting list's checked here; else (no
    child, or it failed, died or did not answer in time, or other decisions) the whole
    validator, in-process."""
    if checker is not None and same_decisions(checked, plan):
        child, end = checker
        found = child.result(timeout=max(0.0, end - time.perf_counter()) + BESIDE_PATIENCE_SECONDS)
        if found is not None:
            return found + validate_waiting(rnd, plan)
    return validate(rnd, plan)


def _finished(
    rnd: Round,
    spec: Solver,
    result: Result,
    annotate: bool,
    deadline: float,
    slow: float,
    lp: bool,
    validator_end: float | None = None,
) -> Plan:
    if result.finished:
        return result.plan
    if annotate:
        return finish(
            rnd,
            result,
            explain_waiting=not spec.own_reasons,
            deadline=deadline,
            slowdown=slow,
            lp_bounds=lp,
            validator_end=validator_end,
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
