"""The CP-SAT solver: one round as one model, the lexicographic objective in stages.

:func:`solve_cpsat` is the whole path, as numbered steps (Kueue's scheduling cycle is the
model for reading it top to bottom):

1. **Prefilter** the round (:mod:`gangopt.prefilter`): node arrays, eligibility, node
   classes, gangs that cannot start pruned with their reason.
2. **Candidates**: greedy (:mod:`gangopt.solvers.greedy`, eager growth); the best candidate
   is the warm start and the fallback. When the round's cheap bounds already prove a
   candidate within ``policy.gap_limit``, it is the answer and no model is built (nor CP-SAT
   imported: its wrapper pulls in pandas, 0.3 CPU-s).
   **Slot placer** (:mod:`~gangopt.solvers.cpsat.placer`): the integer slot model's choice for
   the first tier the best candidate leaves open (the model that bounded it), placed by the
   greedy engine; a valid, lexicographically better plan replaces the candidate, and is the
   answer when the cheap bounds prove it (M 0.75: every tier at its bound, and the secondary
   terms within 0.3 % of their bound at the tiers' optimum: 0.45 CPU-s for the whole solve).
   Then the other candidates: greedy with deferred growth and, on a round whose model is too
   large to build whole (:func:`peers_first`), every peer emulation, before the model; the
   placer again from a peer's plan that beat its own. When every tier of the warm start is
   at its bound, the search below is skipped.
   **Large-neighbourhood search** (:mod:`~gangopt.solvers.cpsat.lns`): the best candidate's
   victims and placements re-decided a neighbourhood at a time at node level (one mover gang,
   one domain), for at most :data:`LNS_SHARE` of the time limit; only validated, strictly
   better plans replace it, and an improved plan the cheap bounds prove is the answer. Seeded
   by the slot placer's plan it also stops after :data:`~gangopt.solvers.cpsat.lns.STALL_AFTER_PLACER`
   neighbourhoods in a row gain nothing (L 0.75: 9 neighbourhoods, 3.0 CPU-s, instead of 40 to a
   30 s limit, 8.6 CPU-s; the same plan). On a
   round whose model is too large to build whole, the search has the whole search time and
   its plan is the answer: it replaces the restricted model (steps 3 to 7), which never
   improved on its warm start at 512 or 1,024 nodes.
3. **Guard** (:mod:`~gangopt.solvers.cpsat.guard`): a model too large to build in time is
   restricted around the greedy plan (:mod:`~gangopt.solvers.cpsat.neighbourhood`) or not
   built; with ``policy.hard_limit`` a large search runs in a child that can be killed
   (:mod:`~gangopt.solvers.cpsat.child`).
4. **Encode** (:mod:`~gangopt.solvers.cpsat.encoding`): variables over node classes,
   capacity by packing patterns, topology, quotas, preemption rules, the objective's terms.
5. **Search in stages** (:mod:`~gangopt.solvers.cpsat.stages`), warm-started from the
   greedy plan (:mod:`~gangopt.solvers.cpsat.hints`).
6. **Expand** class counts to nodes and pods, and **repair** what the model does not see
   (:mod:`~gangopt.solvers.cpsat.expansion`: the reprieve of unneeded evictions and of quota
   handed to a victim's own priority).
7. **Choose**: CP-SAT's plan unless the greedy plan scores better; the bounds the stages
   proved travel with it in the :class:`~gangopt.result.Result`.
8. **Portfolio floor**: unless the chosen plan is within ``policy.gap_limit`` of the bounds
   the stages proved, on every tier and on the total (then no plan is better by more than the
   gap the caller accepts), every peer emulation not already tried is scored, and a better
   one is the answer. So CP-SAT's answer is never worse than greedy's, nor than any peer's
   beyond the gap limit (0 by default; issue 13), and a round the search proves costs no peers.

The finisher (:mod:`gangopt.annotate`) and the validator run after, in the door
(:mod:`gangopt.solve`), as for every solver.

**Two ways to count** (``policy.deterministic``). By default ``policy.time_limit`` is held end
to end: the steps above are gated by the wall clock (the candidates' and the placer's shares of
the limit, the placer's passes, the search's deadline and build-time guard, the cuts, the
portfolio floor), scaled by how much slower than its CPU time the solve has run
(:func:`~gangopt.annotate.slowdown`), so a loaded machine may try less. Under
``policy.deterministic`` (replays, capacity planning) every gate counts work instead: every
candidate runs, the placer is bounded by its pass and choice caps, the search by CP-SAT's
deterministic time (``policy.work``), the large-neighbourhood search by its sub-solves'
deterministic time (:data:`LNS_SHARE` of ``policy.work``), the build guard by the model's
estimated size against the round's search seconds; the clock only stops a solve past the
limit, and a plan it cut says :data:`~gangopt.schema.SAFETY_NET` in its message.
Measured: a replay of the Philly slice's first 150 jobs (6 nodes, 0.1 s budget) with the clock
running 5x faster: before, other plans from round 33 on, 48 rounds instead of 46, other
metrics; now the same plans and metrics (tests/replay/test_simulation.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from gangopt import slots
from gangopt.annotate import (
    LIMIT_TOLERANCE,
    REASONS_BESIDE_SECONDS_PER_POD,
    bounds_in_time,
    cheap_bounds_for,
    finish_reserve,
    leave_out,
    pass_hopeless,
    pass_reserve,
    plan_gap,
    plan_pods,
    reasons_beside,
    slowdown,
    stop_by,
    tier_gap,
    tier_values,
    validation_reserve,
    validator_seconds,
)
from gangopt.arrays import running_pod_count
from gangopt.bounds import reaches_ceilings, tier_ceilings
from gangopt.objective import SCALE, lexicographic_key, score, with_bounds
from gangopt.prefilter import Prefiltered, prefilter
from gangopt.result import ProvenBounds, Result
from gangopt.schema import SAFETY_NET, Plan, Round, Score, Stats, Status, Waiting
from gangopt.scope import Scope, licences_after
from gangopt.solvers.cpsat.expansion import Decision, expand, reprieve, to_plan_parts
from gangopt.solvers.cpsat.guard import (
    BUILD_SECONDS_PER_VARIABLE,
    IN_PROCESS_VARIABLES,
    RESTRICTED_SHARE,
    build_budget,
    estimated_variables,
)
from gangopt.solvers.cpsat.lns import (
    ACCEPT_SECONDS_PER_POD,
    AIMED_NODES,
    FIRST_RESTORE_SECONDS_PER_POD,
    STALL_AFTER_PLACER,
    Outcome,
    applicable,
    improve,
)
from gangopt.solvers.cpsat.neighbourhood import restrict
from gangopt.solvers.cpsat.placer import place_choices
from gangopt.solvers.greedy import greedy
from gangopt.solvers.greedy.engine import GreedyEngine, unstarted

SEARCH_SHARE = 0.85
"""Share of the time limit the search may use; the rest is kept for expanding the answer to
nodes, explaining it and validating it."""
MAX_FINISH_SHARE = 0.4
"""Most of the time limit kept for explaining and validating the plan
(:func:`~gangopt.annotate.finish_reserve`); past it the waiting reasons are cut short
(:data:`gangopt.reasons.UNCHECKED`) rather than the search."""
EXPANSION_SECONDS_PER_POD = 1e-4
"""Seconds kept per pod (running and new) for what follows the search before the finisher:
expanding the answer to nodes, the reprieve, scoring, and (with ``policy.hard_limit``) the
answer's way back from the child: measured 1.03 s for the 8,989 pods of the fragmented L round
(load 2), the reprieve 0.66 s of it."""
MAX_CUTS = 8
"""Most (start, preemption) pairs the repair may cut off before its answer stands (step 6): a
hypothesis round needed one (tests/test_regressions.py); each costs a second model."""
MIN_SEARCH_SHARE = 0.05
"""A search left less than this share of the time limit is not started: the greedy plan is
returned (status ``fallback``) and the message says where the time went."""


def solve_cpsat(rnd: Round, start: float | None = None) -> Result:
    """Decide ``rnd`` with CP-SAT within ``rnd.policy.time_limit`` counted from ``start``
    (a :func:`time.perf_counter` instant; default now), steps in the module doc."""
    start = time.perf_counter() if start is None else start
    wall, cpu = time.perf_counter(), time.process_time()
    clocked = not rnd.policy.deterministic  # the wall clock gates the steps (module doc)
    # Clocked, the first greedy pass stops where only the work after it still fits in the limit;
    # a pass that would stop at its first ask is not built, and when the prefilter would not
    # change that, it does not run either (the finisher then bounds by the clock).
    end = start + (1 + LIMIT_TOLERANCE) * rnd.policy.time_limit
    if clocked and pass_hopeless(rnd, end, pass_reserve(rnd, prefiltered=False), wall, cpu):
        stats = Stats(nodes=len(rnd.cluster.nodes), gangs=len(rnd.pending))
        return _not_built(rnd, None, stats, _slowdown(rnd, wall, cpu))
    # 1. Prefilter.
    pre = prefilter(rnd)
    stats = Stats(
        prefilter_seconds=pre.seconds,
        nodes=len(rnd.cluster.nodes),
        nodes_pruned=pre.nodes_pruned,
        gangs=len(rnd.pending),
        gangs_pruned=len(pre.pruned),
    )
    # 2. Candidates; the answer already if the cheap bounds prove one.
    early = peers_first(rnd, pre)
    engines: list[GreedyEngine] = []  # greedy's engine: the slot placer's share its setup
    reserve = pass_reserve(rnd)
    if clocked and pass_hopeless(rnd, end, reserve, wall, cpu):  # it would stop at its first ask: not built
        return _not_built(rnd, pre, stats, _slowdown(rnd, wall, cpu))
    stop = stop_by(end, reserve, wall, cpu) if clocked else None
    makers = _candidates(engines, stop)
    first = _best_greedy(rnd, pre, wall, makers[:1], slots_by=(start, wall, cpu), engines=engines)
    baseline, baseline_score, proven = first
    candidates_took = time.perf_counter() - wall
    # Steps 1 and 2 run on one thread: how much slower than CPU time they ran scales the
    # time kept for finishing (the search's threads and the child would blur the measure).
    slow = _slowdown(rnd, wall, cpu)
    if any(e.stopped is not None for e in engines):
        return _cut_short(pre, baseline, baseline_score, stats, slow)
    if proven is not None:
        return Result(plan=proven, stats=stats, pre=pre, score=baseline_score, slowdown=slow, bounds_decide=True)
    # 2a. The slot placer: the integer slot model's choice, placed by the greedy engine. Then
    # the other candidates: greedy with deferred growth and, on a round whose model is too
    # large to build whole, the peer emulations (after the placer: at M 0.75 its plan is
    # proven, and the 0.1 and 0.5 CPU-s they cost are saved); the placer again from one that
    # beat its plan.
    others = makers[1:] if early else makers[1:2]
    if not any(g.elastic for g in rnd.pending):
        del others[0]  # deferred growth differs from eager growth only for pending elastic gangs
    seen: set[str] = set()
    placed = False  # whether the best candidate is the slot placer's plan
    keep = 0.0  # the placer's plan's :attr:`~gangopt.solvers.cpsat.placer.Placed.keep`
    for again in (False, True):
        if again:
            if not others or reaches_ceilings(tier_values(baseline_score), tier_ceilings(pre)):
                break  # no candidate can do better on a tier (and none was tried here before)
            before, began = baseline, time.perf_counter()
            baseline, baseline_score, proven = _best_greedy(rnd, pre, wall, others, (baseline, baseline_score))
            candidates_took += time.perf_counter() - began
            slow = _slowdown(rnd, wall, cpu)
            if proven is not None:
                return Result(
                    plan=proven, stats=stats, pre=pre, score=baseline_score, slowdown=slow, bounds_decide=True
                )
            if baseline is before:
                break
            placed = False
        late = clocked and time.perf_counter() > _placer_by(rnd, pre, start, baseline, slow)
        if rnd.queues or baseline.solver in seen or late:
            continue
        seen.add(baseline.solver)
        slot, proven = place_choices(
            rnd,
            pre,
            baseline,
            baseline_score,
            lambda plan, s: _proven_by_cheap_bounds(rnd, pre, plan, s),
            until=_placer_until(rnd, start, baseline, slow, pre) if clocked else None,  # else its caps
            like=engines[0] if engines else None,
        )
        if proven is not None:
            plan = proven.model_copy(update={"message": f"{slot.plan.message}; {proven.message}"})
            return Result(plan=plan, stats=stats, pre=pre, score=slot.score, slowdown=slow, bounds_decide=True)
        placed = placed or slot.improved > 0
        keep = slot.keep if slot.improved else keep
        baseline, baseline_score = slot.plan, slot.score
    if slots.placer_passed(pre) and not placed:  # the slot LPs left for the placer: now
        proven = _proven_by_cheap_bounds(rnd, pre, baseline, baseline_score)
        if proven is not None:
            return Result(plan=proven, stats=stats, pre=pre, score=baseline_score, slowdown=slow, bounds_decide=True)
    engines.clear()  # no longer shared: greedy's engine goes
    limit = rnd.policy.time_limit
    # ``slow`` and ``candidates_took`` cover every candidate tried, as before the placer went
    # first (the reserve and the floor's first estimate are read from them).
    timing = _timing(rnd, start, baseline, slow, pre)
    # 2b. Large-neighbourhood search over victim sets, from the best candidate. On a round
    # whose model would be restricted, it replaces that model and has the search's time.
    instead = estimated_variables(pre) > build_budget(timing.search) and applicable(rnd, pre)
    if clocked:
        # When the clock already refuses the model (step 3's guard), the search has its time.
        whole = instead or _model_refused(pre, timing)
        lns_deadline, lns_work = (timing.deadline if whole else min(start + LNS_SHARE * limit, timing.deadline)), None
        # The finisher's secondary LP at the placed plan's tiers keeps its time (h37-L06); at L
        # that time and the reasons' alone, by the slowdown (:func:`_before_at_plan`).
        lns_deadline -= keep
        if instead and keep > 0 and len(rnd.cluster.nodes) < AIMED_NODES:
            lns_deadline = max(lns_deadline, _before_at_plan(rnd, start, baseline, slow, keep))
        if whole:  # at XL the finisher's measured need, not its reserve, bounds the search
            lns_deadline = max(lns_deadline, _restoring_by(rnd, start, baseline, slow))
    else:  # the deadline is the safety net; the work decides
        lns_deadline, lns_work = timing.deadline, rnd.policy.work * (1.0 if instead else LNS_SHARE)
    # With every tier at its bound the search cannot improve a tier (its sub-models only keep
    # more victim value): at M 0.75 after the slot placer it ran 19 neighbourhoods for nothing.
    closed = _tiers_at_cheap_bounds(pre, baseline_score)
    # After the slot placer the victims are the slot model's: the search stops once they stay.
    stall = STALL_AFTER_PLACER if placed else None
    outcome = Outcome(baseline, baseline_score)
    if not closed:
        # After the slot placer, waiting gangs of the tiers still open may enter (lns.improve's
        # ``trade``): the placer can leave out a gang the slot model chose (for which it evicts).
        evicts = any(p.kind == "evict" for p in baseline.preemptions)
        trade = _open_tiers(pre, baseline_score) if placed and evicts else frozenset()
        # It stops at the first plan the cheap bounds prove within the gap limit (``done``).
        done = lambda plan, s: _proven_by_cheap_bounds(rnd, pre, plan, s) is not None  # noqa: E731
        outcome = improve(rnd, pre, baseline, baseline_score, lns_deadline, stall, lns_work, trade, done)
    if instead and closed and (not clocked or time.perf_counter() < lns_deadline):  # else the guard says: no time
        note = (
            f"every tier at its bound; large round (a model of about {estimated_variables(pre):,} variables): "
            f"the secondary terms are not searched. {baseline.message}"
        ).strip()
        plan = baseline.model_copy(update={"status": Status.FEASIBLE, "message": note})
        return Result(plan=plan, stats=stats, pre=pre, score=baseline_score, slowdown=slow)
    if outcome.improvements:
        note = outcome.summary()
        baseline = outcome.plan.model_copy(update={"message": note})
        baseline_score = outcome.score
        proven = _proven_by_cheap_bounds(rnd, pre, baseline, baseline_score)
        if proven is not None:
            plan = proven.model_copy(update={"message": f"{note}; {proven.message}"})
            return Result(plan=plan, stats=stats, pre=pre, score=baseline_score, slowdown=slow)
    if instead and outcome.neighbourhoods:  # with none searched, the guard says why (no time)
        note = (
            f"large round (a model of about {estimated_variables(pre):,} variables): "
            f"{outcome.summary()} instead of a restricted model"
        )
        if baseline.message and not outcome.improvements:
            note = f"{note}; {baseline.message}"  # the slot placer's plan
        plan = baseline.model_copy(update={"status": Status.FEASIBLE, "message": note})
        result = Result(plan=plan, stats=stats, pre=pre, score=baseline_score, slowdown=slow)
    else:
        result = _guarded_search(rnd, start, pre, Candidate(baseline, baseline_score), stats, timing)
        if outcome.improvements and outcome.summary() not in result.plan.message:
            note = f"{outcome.summary()}; {result.plan.message}".rstrip("; ")
            result = replace(result, plan=result.plan.model_copy(update={"message": note}))
    # 8. Portfolio floor: the peers, unless they were candidates or the plan is proven best.
    if early or not peers_affordable(rnd) or _at_proven_bounds(rnd, result):
        return result
    if not clocked:  # every peer, unless the limit itself has passed (the safety net)
        return portfolio_floor(rnd, result, deadline=start + limit)
    return portfolio_floor(rnd, result, deadline=start + limit - timing.reserve, estimate=candidates_took)


def _guarded_search(
    rnd: Round, start: float, pre: Prefiltered, candidate: Candidate, stats: Stats, timing: Timing
) -> Result:
    """Steps 3 to 7 from ``candidate``: no search without time for one; a large search with a
    hard limit runs in a child that can be killed."""
    limit = rnd.policy.time_limit
    slow = timing.slow
    left = timing.deadline - time.perf_counter()
    if rnd.policy.deterministic and left <= 0:
        message = f"{SAFETY_NET}: the search's deadline passed before the model; greedy plan returned"
        return replace(_fallback(candidate, stats, pre, message), slowdown=slow)
    if not rnd.policy.deterministic and left < MIN_SEARCH_SHARE * limit:
        message = (
            f"time limit: {time.perf_counter() - start:.2f} s of the {limit:g} s went to the prefilter and the "
            f"candidates; a search had to end by {timing.deadline - start:.2f} s, keeping {timing.reserve:.2f} s "
            "to expand, explain and validate its plan; no time left for a model; greedy plan returned"
        )
        return replace(_fallback(candidate, stats, pre, message), slowdown=slow)
    # The child's modules (multiprocessing, subprocess, signal: 32 M instructions, 2 % of the
    # S round's CLI solve) are imported only by a solve that reaches the search (issue 13).
    # CP-SAT imported here, in this process, before a child is forked: a long-lived process
    # (a replay, the service) pays for the import once, not once per searched round.
    import multiprocessing

    import gangopt.solvers.cpsat.stages  # noqa: F401
    from gangopt.solvers.cpsat.child import search_in_child

    forkable = "fork" in multiprocessing.get_all_start_methods()
    if rnd.policy.hard_limit and forkable and estimated_variables(pre) >= IN_PROCESS_VARIABLES:
        fallback = Result(plan=candidate.plan, stats=stats, pre=pre, score=candidate.score, slowdown=slow)
        result = search_in_child(rnd, start, lambda: _search(rnd, start, pre, candidate, stats, timing), fallback)
    else:
        result = replace(_search(rnd, start, pre, candidate, stats, timing), slowdown=slow)
    return _honest(result)


class Candidate(NamedTuple):
    """A plan with its unbounded score (scored once)."""

    plan: Plan
    score: Score


class Timing(NamedTuple):
    """When the search must end and how long it may be, from the round and the clock."""

    deadline: float
    """The search's wall-clock deadline (:func:`time.perf_counter`)."""
    search: float
    """Seconds the round's size leaves the search (the clock not counted): sizes the model."""
    reserve: float
    """Seconds kept after the search for expanding, explaining and validating."""
    slow: float
    """How much slower than CPU time the solve ran so far (:func:`~gangopt.annotate.slowdown`)."""


def _timing(rnd: Round, start: float, baseline: Plan, slow: float, pre: Prefiltered | None = None) -> Timing:
    """The search's deadline and share. With ``pre``: on a round whose whole model is too large
    to build in the search's share (the large-neighbourhood search replaces it), nothing is
    expanded after the search, so the deadline keeps no :data:`EXPANSION_SECONDS_PER_POD` (the
    share that sizes the model keeps it, so that the decision does not move). On the
    fragmented 4,096-node busy-0.6 round that is 1.57 s of the 3.16 s kept (15,743 pods): the
    slot placer's passes stopped 3.3-3.7 s before a 10 s limit and the command ended at 7.2 s
    with the priority-0 choice placed under the priority-5 one or not at all as the load went
    (docs/benchmarks.md, "h36-L06")."""
    limit = rnd.policy.time_limit
    pods = running_pod_count(rnd) + len(baseline.placements)
    finish = finish_reserve(rnd, baseline)
    reserve = finish + EXPANSION_SECONDS_PER_POD * pods
    search = ends = min(limit * SEARCH_SHARE, limit - min(reserve, MAX_FINISH_SHARE * limit))
    if pre is not None and estimated_variables(pre) > build_budget(search) and applicable(rnd, pre):
        reserve = finish
        ends = min(limit * SEARCH_SHARE, limit - min(reserve, MAX_FINISH_SHARE * limit))
    reserve = min(reserve * slow, MAX_FINISH_SHARE * limit)
    return Timing(start + min(ends, limit - reserve), search, reserve, slow)


def _placer_until(rnd: Round, start: float, plan: Plan, slow: float, pre: Prefiltered) -> float:
    """When the slot placer's passes stop: the search's deadline (:func:`_timing`), and at XL
    sooner, :data:`PLACER_OVERRUN` first restores
    (:data:`~gangopt.solvers.cpsat.lns.FIRST_RESTORE_SECONDS_PER_POD`) before the finisher's
    need (:func:`_finisher_by`), where that still leaves the placer as much from now: at a 60
    s limit its passes ran to 49-51 s of the 56 s the finisher leaves, one restore fitting after
    them in one of three runs; at 30 s the placer keeps its time (it would have none)."""
    until = _timing(rnd, start, plan, slow, pre).deadline
    by = _finisher_by(rnd, start, plan, slow)
    if by is None:
        return until
    room = PLACER_OVERRUN * FIRST_RESTORE_SECONDS_PER_POD * plan_pods(rnd, plan) * slow
    return min(until, by - room) if by - room - time.perf_counter() >= room else until


PLACER_OVERRUN = 2.0
"""XL: the slot placer stops this many times the search's first restore before the finisher's
need (:func:`_placer_until`): it looks at its ``until`` between passes of about 2.6 s at XL
(5 passes from 8.0 to 20.9 s of a 30 s command, load 2.4), and stopped with one such time left
it ended 2 s past it."""


def _restoring_by(rnd: Round, start: float, plan: Plan, slow: float) -> float:
    """On a round of at least :data:`~gangopt.solvers.cpsat.lns.AIMED_NODES` nodes, when the
    search from ``plan`` (its restoring neighbourhoods) may end: before the limit, the
    validator and the finisher's own reasons of a plan the search changed (the reasons' child
    checked ``plan``'s, which a change voids), their expected CPU seconds times ``slow``; -inf
    (the search keeps :func:`_timing`'s deadline) on a smaller round, or when that leaves less
    than the search's setup and first accepted plan
    (:data:`~gangopt.solvers.cpsat.lns.FIRST_RESTORE_SECONDS_PER_POD`). :func:`_timing`'s
    reserve is :func:`~gangopt.annotate.finish_reserve`, 8.6 s at XL (its validator at 6e-5 per
    pod, 4.6 s, measured 0.6): at a 30 s limit the slot placer's passes end at the search's
    deadline, 8.6 s before the limit, and the command ended 5 s before it
    (docs/benchmarks.md, "h39-xlsearch")."""
    by = _finisher_by(rnd, start, plan, slow)
    pods = plan_pods(rnd, plan)
    if by is None or time.perf_counter() + FIRST_RESTORE_SECONDS_PER_POD * pods * slow > by:
        return -math.inf
    return by - ACCEPT_SECONDS_PER_POD * pods * slow  # a plan found by then is accepted by ``by``


def _finisher_by(rnd: Round, start: float, plan: Plan, slow: float) -> float | None:
    """On a round of at least :data:`~gangopt.solvers.cpsat.lns.AIMED_NODES` nodes, the limit
    less what the finisher of a plan changed from ``plan`` is expected to take, the validator
    and its own reasons (:data:`~gangopt.annotate.REASONS_BESIDE_SECONDS_PER_POD`), times
    ``slow``; None on a smaller round."""
    if len(rnd.cluster.nodes) < AIMED_NODES:
        return None
    pods = plan_pods(rnd, plan)
    return start + rnd.policy.time_limit - (validator_seconds(rnd, plan) + REASONS_BESIDE_SECONDS_PER_POD * pods) * slow


def _search(rnd: Round, start: float, pre: Prefiltered, baseline: Candidate, stats: Stats, timing: Timing) -> Result:
    """Steps 3 to 7: guard the model size, encode, search in stages from ``baseline``,
    expand and repair the answer, and choose between it and ``baseline``."""
    # Imported here, not with the package: the encoding, the stages and the hints import
    # CP-SAT, whose Python wrapper pulls in pandas (0.3 CPU-s with bytecode cached). A round the
    # cheap bounds prove (greedy's plan, the slot placer's) never reaches this step.
    from gangopt.solvers.cpsat.encoding import cut, encode
    from gangopt.solvers.cpsat.hints import COMPLETION_SECONDS, warm_start
    from gangopt.solvers.cpsat.stages import plan_stages, proven_bounds, run_stages

    deadline, search = timing.deadline, timing.search
    estimate = estimated_variables(pre)
    budget = build_budget(search)  # from the round, not the clock: the same model on a loaded machine
    allowed = None
    view = pre
    if estimate > budget:
        # Too large to model whole in time: model the neighbourhood of the greedy plan.
        view, allowed = restrict(pre, baseline.plan, budget // RESTRICTED_SHARE)
        restricted = sum(len(classes) for classes in allowed.values())
        if restricted > budget:
            message = (
                f"even a restricted model would have about {restricted:,} variables, too many "
                f"to build and solve within the {rnd.policy.time_limit:g} s time limit; greedy plan returned"
            )
            return _fallback(baseline, stats, pre, message)
    size = estimate if allowed is None else sum(len(classes) for classes in allowed.values())
    build = BUILD_SECONDS_PER_VARIABLE * size * timing.slow
    clocked = not rnd.policy.deterministic
    if not clocked and build > search:
        message = (
            f"building the model (about {size:,} variables, {build:.1f} s) would take longer than the "
            f"{search:.1f} s the round's size leaves the search; greedy plan returned"
        )
        return _fallback(baseline, stats, pre, message)
    if clocked and time.perf_counter() + build > deadline:
        # On a loaded machine the neighbourhood alone took 4.4 s of a 10 s limit (fragmented L).
        message = (
            f"time limit: building the model (about {size:,} variables, {build:.1f} s) would end after the "
            f"search's deadline, {deadline - start:.1f} s into the {rnd.policy.time_limit:g} s limit; "
            "greedy plan returned"
        )
        return _fallback(baseline, stats, pre, message)
    # 4.-6. Encode, search in stages from the greedy plan, expand and repair; again with cuts
    # when the repair had to take gangs out (rule 5's quota check, which the model does not see).
    cuts: list[tuple[str, str]] = []
    while True:
        t0 = time.perf_counter()
        enc = encode(view, allowed)
        cut(enc, cuts)
        proto = enc.model.proto
        stats = stats.model_copy(
            update={
                "build_seconds": stats.build_seconds + time.perf_counter() - t0 if cuts else time.perf_counter() - t0,
                "node_classes": len(enc.classes),
                "variables": len(proto.variables),
                "constraints": len(proto.constraints),
            }
        )
        t1 = time.perf_counter()
        stages = plan_stages(enc)
        # Under policy.deterministic the completion stops on its work, the clock only at the deadline.
        hard = None if clocked else max(0.05, deadline - time.perf_counter())
        start_solution = warm_start(enc, baseline.plan, min(COMPLETION_SECONDS, 0.1 * rnd.policy.time_limit), hard)
        values, stage_status, message = run_stages(enc, stages, deadline, start_solution)
        solved = time.perf_counter() - t1
        stats = stats.model_copy(
            update={"solve_seconds": stats.solve_seconds + solved if cuts else solved, "stages": len(stages)}
        )
        if values is None:
            return _fallback(baseline, stats, pre, message or "CP-SAT found no plan in time; greedy plan returned")
        decision = reprieve(rnd, expand(enc.pre, enc.classes, values))
        fresh = [pair for pair in decision.yielded_to if pair not in cuts]
        again = BUILD_SECONDS_PER_VARIABLE * size * timing.slow + solved
        if not fresh or len(cuts) >= MAX_CUTS or (clocked and time.perf_counter() + again > deadline):
            break
        if not clocked and time.perf_counter() > deadline:
            note = f"{SAFETY_NET}: not searched again after the repair (a rerun may differ)"
            message = f"{message}; {note}" if message else note
            break
        cuts += fresh
    if cuts:
        held = sorted({gang for gang, _ in cuts} - decision.admitted)
        note = "searched again after the repair (rule 5: a victim's quota may not go to its own priority)"
        if held:
            note = f"{', '.join(held)} left waiting so that a running gang of the same priority keeps its place; {note}"
        message = f"{message}; {note}" if message else note
        stage_status = Status.FEASIBLE
    if decision.yielded:
        # The model does not see that quota a victim held went to its own priority (rule 5):
        # the repaired plan is valid but no longer the model's proven optimum.
        stage_status = Status.FEASIBLE
        note = f"{', '.join(decision.yielded)} left waiting so that a running gang of the same priority keeps its place"
        message = f"{message}; {note}" if message else note
    if enc.stricter and stage_status == Status.OPTIMAL:
        stage_status = Status.FEASIBLE
        note = (
            "optimal for a model stricter than rule 5 under a quota (pods outside a restricted model"
            " left out, or rule 6's rows under a lending limit exceeded before the round)"
        )
        message = f"{message}; {note}" if message else note
    plan = _plan_from_decision(rnd, pre, decision, stage_status, message)
    plan_score = score(rnd, plan)
    # The model licenses cohort reclaims on its own usage after the plan (gangopt.scope,
    # encoding._reclaim_licence); the reprieve above may put pods back and move a queue
    # across its nominal, which can void a reclaim: that plan is not offered.
    broken = _broken_rule_5(rnd, plan)
    # 7. Choose. The stages' bounds hold for the round only when the model was whole, and
    # their secondary bound only for plans at the tiers' optima (not after a repair or a cut),
    # and only for a model no stricter than the round's rules.
    whole = allowed is None and not decision.yielded and not cuts and not enc.stricter
    proven = proven_bounds(enc, stages) if whole else None
    if broken or lexicographic_key(plan_score) < lexicographic_key(baseline.score):
        # The class-level answer, put on nodes, scored below the greedy plan (the secondary
        # terms see node-level detail the model only approximates), or the search never
        # caught up with a warm start it could not use: the greedy plan is the answer, and
        # CP-SAT's bounds (when the model was whole) still bound it.
        chosen = baseline.plan.model_copy(
            update={
                "status": Status.FEASIBLE if allowed is None else Status.FALLBACK,
                "message": (
                    f"CP-SAT's plan {broken}; {_warm_start_name(baseline.plan)} returned. "
                    if broken
                    else f"the {_warm_start_name(baseline.plan)} scores better than CP-SAT's own in time. "
                )
                + message,
            }
        )
        return Result(plan=chosen, stats=stats, pre=pre, score=baseline.score, proven=_for_plan(proven, baseline.score))
    if allowed is not None:
        # Bounds of a restricted model do not bound the round: the cheap ones will.
        kept = sum(len(classes) for classes in allowed.values())
        note = f"large round: restricted model around the greedy plan ({kept:,} of {estimate:,} candidate placements)"
        plan = plan.model_copy(
            update={"status": Status.FEASIBLE, "message": f"{note}; {plan.message}" if plan.message else note}
        )
    return Result(plan=plan, stats=stats, pre=pre, score=plan_score, proven=proven)


def _broken_rule_5(rnd: Round, plan: Plan) -> str:
    """How ``plan`` breaks rule 5 as :func:`~gangopt.scope.reclaims_hold` re-reads it ("" when
    it does not): a cohort reclaim's licence lost in the repair, or a new pod put on a node where
    a victim it may never preempt lost pods (the message said "licence" for both; a two-victim
    class of tests/test_regressions.py was of the second kind)."""
    scope = Scope(rnd)
    if scope.plain or not plan.preemptions:
        return ""
    refused = [pair for pair, ok in licences_after(rnd, plan, scope).items() if not ok]
    if not refused:
        return ""
    specs = {g.name: g for g in [*rnd.pending, *rnd.running]}
    running = {g.name: g for g in rnd.running}
    if any(scope.reclaim_needs(specs[gang], running[victim]) != "never" for gang, victim in refused):
        return "lost a cohort reclaim's licence in its repair"
    gang, victim = refused[0]
    return f"put {gang} where {victim} lost pods, which {gang} may not preempt (rule 5)"


def _for_plan(proven: ProvenBounds | None, plan_score: Score) -> ProvenBounds | None:
    """The stages' bounds as they bound a plan other than the model's: the tier bounds hold for
    every plan, the secondary bound only for plans whose tiers reach the proven tier optima (the
    secondary stage runs with the tiers held there). A greedy plan returned below them keeps
    the cheap secondary bound alone: a hypothesis round (cohort quotas, the repair voiding a
    reclaim) had greedy's plan at secondary 11.6 under CP-SAT's proven 7.3, one tier 14.4 of
    16.8."""
    if proven is None or proven.secondary is None:
        return proven
    values = tier_values(plan_score)
    if all(values.get(p, 0.0) >= v - 1e-9 for p, v in proven.tiers.items()):
        return proven
    return ProvenBounds(tiers=proven.tiers, secondary=None)


def _warm_start_name(plan: Plan) -> str:
    """How a message names the warm start: greedy's plan, or the one step 2b improved."""
    if plan.solver == "cpsat":
        return f"warm start ({plan.message})"
    return f"{plan.solver} plan" if plan.solver != "greedy" else "greedy plan"


def _fallback(baseline: Candidate, stats: Stats, pre: Prefiltered, message: str) -> Result:
    if baseline.plan.solver == "cpsat":
        # The warm start is step 2b's plan: searched and validated, not greedy's fallback.
        message = message.replace("greedy plan returned", "the warm start (searched, validated) returned")
        note = f"{baseline.plan.message}; {message}"
        plan = baseline.plan.model_copy(update={"status": Status.FEASIBLE, "message": note})
        return Result(plan=plan, stats=stats, pre=pre, score=baseline.score)
    plan = baseline.plan.model_copy(update={"status": Status.FALLBACK, "message": message})
    return Result(plan=plan, stats=stats, pre=pre, score=baseline.score)


def _best_greedy(
    rnd: Round,
    pre: Prefiltered,
    start: float,
    makers: list[Callable[[Round], Plan]],
    seed: tuple[Plan, Score] | None = None,
    slots_by: tuple[float, float, float] | None = None,
    engines: list[GreedyEngine] | None = None,
) -> tuple[Plan, Score, Plan | None]:
    """The best of ``seed`` and the plans of ``makers`` (by the objective) with its score, and
    that plan marked as the answer when the cheap bounds already prove it within
    ``policy.gap_limit`` (else None). ``slots_by`` (the solve's start, wall and CPU clocks at
    the solve's start): after the first plan, whether a large round's slot bounds get leave
    (:func:`_allow_large_slots`).

    The best candidate is CP-SAT's warm start and fallback: starting from it is what makes
    CP-SAT's plan never worse than greedy's. Candidates, cheapest first (:func:`_candidates`),
    stopping as soon as one is proven good enough or reaches every tier's ceiling: greedy with
    eager growth; after the slot placer, greedy with deferred growth and (on a round whose
    model is too large to build whole) each peer emulation; step 8 tries the peers after the
    search otherwise. No candidate after the first starts once :data:`CANDIDATE_SHARE` of the
    time limit since ``start`` is spent (``start``: after CP-SAT's import, which a process pays
    once, so that the same round gets the same candidates in a fresh process as in a
    long-lived one where it can). ``engines``: the first maker's (greedy's); when its pass
    stopped at its deadline, its plan is returned at once, every LP left out of the bounds
    (:func:`_cut_short`)."""
    ceilings = tier_ceilings(pre)
    best: tuple[Plan, Score] | None = seed
    clocked = not rnd.policy.deterministic  # else every candidate runs: a count, not a clock
    for make in makers:
        if best is not None and clocked and time.perf_counter() - start > CANDIDATE_SHARE * rnd.policy.time_limit:
            break
        began = time.perf_counter()
        plan = make(rnd)
        plan_score = score(rnd, plan)
        if best is None and engines and any(e.stopped is not None for e in engines):
            leave_out(pre, "lp", "bounds without their LPs (time limit; the gap is against looser bounds)")
            return plan, plan_score, None
        if best is None and slots_by is not None:
            # Its waiting gangs' reasons in a child beside the rest (XL: this plan is the answer).
            reasons_beside(pre, plan, slots_by[0] + rnd.policy.time_limit, _slowdown(rnd, *slots_by[1:]))
            if clocked:
                solve_start, wall, cpu = slots_by
                by = _placer_by(rnd, pre, solve_start, plan, slowdown(wall, cpu))
                large = by > solve_start + PLACER_SHARE * rnd.policy.time_limit  # the placer ends by it
                placing = time.perf_counter() - began if large else 0.0
                _allow_large_slots(pre, by, wall, cpu, placing, deadline=solve_start + rnd.policy.time_limit)
                _bounds_in_time(pre, plan, solve_start, wall, cpu)
            else:
                _allow_large_slots(pre)
        if best is not None and lexicographic_key(plan_score) <= lexicographic_key(best[1]):
            continue
        best = (plan, plan_score)
        proven = _proven_by_cheap_bounds(rnd, pre, plan, plan_score)
        if proven is not None or reaches_ceilings(tier_values(plan_score), ceilings):
            return plan, plan_score, proven
    assert best is not None
    return best[0], best[1], None


def _allow_large_slots(
    pre: Prefiltered,
    by: float | None = None,
    wall: float = 0.0,
    cpu: float = 0.0,
    placing: float = 0.0,
    deadline: float | None = None,
) -> None:
    """Give the slot bounds of a round over :data:`gangopt.slots.MAX_COLUMNS` gangs leave to run
    when their estimated cost, scaled by how much slower than CPU time the solve has run since
    ``wall`` and ``cpu``, and ``placing`` (one pass of the slot placer, as long as the greedy
    candidate took, when the placer must *end* by ``by``; 0 when ``by`` is when it must start:
    :func:`_placer_by`) end before ``by`` (the placer reads their integer model's choice); else
    the LPs alone (:data:`gangopt.slots.LP_ONLY`: the bounds, no choice, no placer) when they
    end before ``by``. Otherwise the round keeps the bounds it had before: on the fragmented
    4,096-node round at load 4-5 the bounds took the solve from 10 to 16 s of wall time (4.1
    CPU-s) for a 10 s limit. Until stop 27 the placer had to end by :data:`PLACER_SHARE` of the
    limit on every round, which refused the many-small-gangs 4,096-node round on a quiet
    machine (2.0 s into the solve, 2.0 s of bounds, 1.7 s of greedy: 5.7 s against 5), whose
    placed plan is then proven within 0.5 % (greedy's: 6.8 %, after a search to the limit).

    Without ``by`` (``policy.deterministic``) the same leave from the estimated cost alone
    against :data:`PLACER_SHARE` of the time limit (no clock, no slowdown, the greedy pass not
    counted), so that a round gets the same slot bounds whatever the load. ``deadline`` (the end
    of the time limit; clocked solves): the models given leave stop by it whatever their
    estimate said (:func:`gangopt.slots.allow_large`)."""
    estimate = slots.large_estimate(pre)
    if estimate <= 0:
        # Not large: no leave needed, but the secondary stage's SCIP (node limit only) stops by
        # the deadline too (its dual bound holds however early it stops). On the bin-packed
        # M contention round (seed 0) it took 2.3 CPU-s in the fallback's finisher, after the
        # limit: 14.2 s of wall for a 10 s limit at load 5 (h30-sweep).
        if deadline is not None:
            slots.allow_large(pre, False, deadline)
        return
    if not slots.large_affordable(pre):
        slots.allow_large(pre, False)
        return
    if by is None:
        now, slow, by, placing = 0.0, 1.0, PLACER_SHARE * pre.rnd.policy.time_limit, 0.0
    else:
        now, slow = time.perf_counter(), slowdown(wall, cpu)
    if now + estimate * slow + placing <= by:
        slots.allow_large(pre, True, deadline)
    else:  # the LPs alone: the bounds, not the placer's choice
        lp = now + slots.large_estimate(pre, lp_only=True) * slow <= by
        slots.allow_large(pre, "lp" if lp else False, deadline)


def _bounds_in_time(pre: Prefiltered, plan: Plan, start: float, wall: float, cpu: float) -> None:
    """After the first greedy pass (``plan``; clocked solves), leave out the bounds the time limit
    counted from ``start`` cannot cover (:func:`gangopt.annotate.bounds_in_time`, with the
    validator's expected cost, :func:`gangopt.annotate.validator_seconds`, scaled by how much
    slower than CPU time the solve ran since ``wall`` and ``cpu``: the validator measured
    0.80-0.89 CPU-s at XL under load 2-4, the same 1e-5 per pod once that slowdown is taken
    out). At XL with a 10 s limit the solve gets about 8.1 s after the import and the parse,
    and the first greedy pass ends 5-5.5 s in on a quiet machine: the bounds (1.3-1.8 s) fit;
    on a loaded one they are what pushed the command from 11 to 12-17 s."""
    slow = slowdown(wall, cpu)
    validator = validator_seconds(pre.rnd, plan) * slow
    bounds_in_time(pre, start, slow, validator)


def _placer_by(rnd: Round, pre: Prefiltered, start: float, plan: Plan, slow: float) -> float:
    """When the slot placer must have started (a :func:`time.perf_counter` instant; clocked
    solves): :data:`PLACER_SHARE` of the time limit from the solve's ``start``; on a round whose
    model is too large to build whole in the search's time, the search's deadline (the placer
    must then also *end* by it: :func:`_allow_large_slots` counts one pass). On such a round the
    search after the placer is the large-neighbourhood search instead of a model, which on the
    many-small-gangs 4,096-node round (busy 0.75) ran 1-3 neighbourhoods to the limit for
    nothing (greedy's plan, 6.8 % reported) while the slot bounds and one placer pass prove a
    plan within 0.5 % (2.0 and 1.0-1.7 CPU-s, from 2.0 s into the solve: past 5 s of a 10 s
    limit on a machine at load 2-4)."""
    timing = _timing(rnd, start, plan, slow, pre)
    if estimated_variables(pre) > build_budget(timing.search):
        return max(timing.deadline, start + PLACER_SHARE * rnd.policy.time_limit)
    return start + PLACER_SHARE * rnd.policy.time_limit


def _before_at_plan(rnd: Round, start: float, plan: Plan, slow: float, keep: float) -> float:
    """When the search after the slot placer ends on a round of fewer than
    :data:`~gangopt.solvers.cpsat.lns.AIMED_NODES` nodes whose plan may ask the finisher's
    secondary LP at its tiers (``keep``: :attr:`~gangopt.solvers.cpsat.placer.Placed.keep`, that
    LP's and the validator's CPU seconds at the host's pace): what follows is that LP, the
    waiting reasons (:func:`~gangopt.annotate.finish_reserve` less its validation part) and the
    validator, all scaled by the slowdown ``slow``, before the end of the limit. The search's
    deadline otherwise keeps the finisher's whole reserve (its validation part at
    :data:`~gangopt.annotate.VALIDATION_SECONDS_PER_POD`, 6e-5 a pod: 1.16 s for the 19,400 pods
    of the fragmented 4,096-node busy-0.6 round, whose validator takes 0.09-0.16 CPU-s) and the
    LP's seconds unscaled on top: at load 3 (slowdown 1.45) that ended the search at 6.3 s,
    before the placer was done, so the regional victim neighbourhood that keeps the 640 GPU-eq
    victim never ran and the plan stayed at 1.212 %; the finisher after the LP needed 2.3 s of
    the 3.5 s kept (docs/benchmarks.md, "h39-L06load")."""
    reasons = finish_reserve(rnd, plan) - validation_reserve(rnd, plan)
    return start + rnd.policy.time_limit - slow * (keep + reasons)


def _model_refused(pre: Prefiltered, timing: Timing) -> bool:
    """Whether step 3's guard would refuse the whole model from now on (clocked solves): its
    estimated build, scaled by the slowdown, and :data:`MIN_SEARCH_SHARE` of the limit to
    search it end after the search's deadline. The large-neighbourhood search then runs to
    that deadline instead of :data:`LNS_SHARE` of the limit, which had passed before it could
    start at 256 nodes / 100 gangs (busy 0.6, seed 1) on a machine at load 9 (greedy and the
    slot placer: 1 CPU-s in 7 s of wall time); the model was refused too and the placer's plan
    returned, 34.1 GPU-eq of priority 5 short, which the search's first neighbourhood finds
    (0.3 CPU-s)."""
    estimate = estimated_variables(pre)
    if estimate > build_budget(timing.search):
        return False  # restricted, or replaced by the search (``instead``)
    build = BUILD_SECONDS_PER_VARIABLE * estimate * timing.slow
    return time.perf_counter() + build + MIN_SEARCH_SHARE * pre.rnd.policy.time_limit > timing.deadline


def _slowdown(rnd: Round, wall: float, cpu: float) -> float:
    """:func:`~gangopt.annotate.slowdown` since ``wall`` and ``cpu``; 1 under
    ``policy.deterministic``, where no reserve may depend on the machine's load."""
    return slowdown(wall, cpu) if not rnd.policy.deterministic else 1.0


LNS_SHARE = 0.3
"""Share of the time limit (counted from the solve's start) by which the large-neighbourhood
search (step 2b) ends; it ends sooner when a pass improves nothing (under
``policy.deterministic``: the share of ``policy.work`` its sub-solves may spend). At M (fragmented, busy
0.75, 1,024 nodes) its first neighbourhood (the 128-pod priority-10 gang's placement with
every victim free) takes 0.3 s and gives the whole improvement (priority 0: 12,176 to 12,346
GPU-eq); the full pass of 51 neighbourhoods finds nothing more and costs 8.4 CPU-s."""


PLACER_SHARE = 0.5
"""Share of the time limit (from the solve's start) after which the slot placer (step 2a) is
not started. Later than :data:`CANDIDATE_SHARE`: it costs one integer slot solve (0.1-0.6
CPU-s at M) and 0.05-0.1 CPU-s per pass, far less than the search after it, and on a loaded
machine greedy alone took 3 s of wall time at M 0.6 (1.0 CPU-s), past the candidates' 25 %
of a 10 s limit: the placer lifted priority 0 there from 4,288.8 to 5,878.8 GPU-eq."""


CANDIDATE_SHARE = 0.25
"""Share of the time limit after which no further candidate starts (the first, greedy, always
runs: it is the fallback). One greedy pass cost 1.3 CPU-s on stop 26's fragmented XL round
(16,384 nodes, 6,382 running gangs), 3-4 s of wall time on a loaded 2-core machine, where the
second pass pushed the whole solve past its 10 s limit; on the issue-13 round of 68,536 running
gangs it costs 4.9 CPU-s (stop 27), so no second candidate starts there at a 10 s limit. On a
loaded machine this can leave out a candidate an idle one tries: the rule only binds on rounds
this large or limits this short."""


PORTFOLIO_CELLS_PER_SECOND = 250_000
"""The peer emulations join the candidates when ``nodes x (pending + running gangs)`` is at most
this many per second of ``policy.time_limit``. Measured on fragmented rounds: the five peers
together cost 0.55 CPU-s at M (1,024 nodes x 701 gangs = 0.72 M cells) and 6.2 CPU-s at L
(12.7 M cells), about 0.8 µs per cell, so they take at most about a fifth of the limit. A rule
on the round's size, not on the time the candidates took, so that the same round gets the same
candidates on a loaded machine too (replays repeat exactly: issue 12)."""


def peers_affordable(rnd: Round) -> bool:
    """Whether the peer emulations are cheap enough to try as candidates (see above)."""
    cells = len(rnd.cluster.nodes) * (len(rnd.pending) + len(rnd.running))
    return cells <= PORTFOLIO_CELLS_PER_SECOND * rnd.policy.time_limit


def peers_first(rnd: Round, pre: Prefiltered) -> bool:
    """Whether the peer emulations are candidates before the model (step 2, after the slot
    placer) rather than a floor after the search (step 8): when affordable and the model is
    too large to build whole in the time limit. Then one of them, proven by the cheap bounds,
    saves the model, and the best is the warm start of the restricted search. After the
    placer, because a placed plan the cheap bounds prove makes them unnecessary: at M 0.75
    they cost 0.5 of the solve's 1.0 CPU-s before it. On smaller rounds the search usually
    proves its plan and the peers add nothing: on the Philly 600-job replay (112 rounds, 71
    searched) no peer ever beat greedy's candidate, and trying them first cost 37 % of
    gangopt's replay CPU against 39 % for the whole search."""
    return peers_affordable(rnd) and estimated_variables(pre) > build_budget(SEARCH_SHARE * rnd.policy.time_limit)


def _at_proven_bounds(rnd: Round, result: Result) -> bool:
    """Whether ``result``'s plan is within ``policy.gap_limit`` of the bounds its search proved,
    on every tier and on the total: then no plan of the round, a peer's included, is better by
    more than the gap the caller accepts (0 by default: better at all). Replays run with a 1 %
    limit; on the Philly 600-job replay this skips the peers in ... of 71 searched rounds."""
    proven, unbounded = result.proven, result.score
    if proven is None or unbounded is None or proven.secondary is None:
        return False
    # A tier the stages did not bound has no term in the model (say, only running gangs no
    # one may evict): every plan has the same value there, its own value bounds it.
    s = with_bounds(unbounded, proven.tiers, proven.secondary)
    limit = rnd.policy.gap_limit + 1e-9
    gap = plan_gap(s)
    return gap is not None and gap <= limit and all(tier_gap(t) <= limit for t in s.tiers)


def _honest(result: Result) -> Result:
    """``result`` without its stages' bounds when its own plan beats one of them: a bound the
    plan exceeds is no bound. A safety net: the one case found (tier 0: plan 5.2, "proven"
    5.0, tests/test_regressions.py) was rule 5 encoded per node class, now flagged at encoding
    (``Encoding.stricter``) so that such bounds are never claimed. The finisher's cheap bounds
    still hold."""
    proven, s = result.proven, result.score
    if proven is None or s is None:
        return result
    if all(t.value <= proven.tiers.get(t.priority, t.value) + 1e-9 for t in s.tiers):
        return result
    return replace(result, proven=None)


def portfolio_floor(rnd: Round, result: Result, deadline: float | None = None, estimate: float = 0.0) -> Result:
    """Step 8: the best of ``result`` and every peer emulation's plan, by the objective.

    With a ``deadline`` (the time kept for explaining and validating begins there) a peer
    starts only if it would end before it, each peer assumed to take as long as the longest
    run so far (at first ``estimate``: step 2's candidates' time). Under reclaim-any queue
    policies on the M round the five peers cost 4.7 CPU-s, 10-18 s of wall time at load 5,
    and the solve ended at 16.8-25.6 s of its 10 s limit before they were governed
    (``python -m bench.queue_policies M``)."""
    assert result.score is not None
    best, best_score = result.plan, result.score
    skipped: list[str] = []
    longest = estimate
    for make in _candidates()[2:]:
        now = time.perf_counter()
        if deadline is not None and now + longest > deadline:
            skipped.append(make.__name__)
            continue
        plan = make(rnd)
        longest = max(longest, time.perf_counter() - now)
        plan_score = score(rnd, plan)
        if lexicographic_key(plan_score) > lexicographic_key(best_score):
            best, best_score = plan, plan_score
    if skipped:
        why = SAFETY_NET if rnd.policy.deterministic else "time limit"
        note = f"peer emulations not tried after the search ({why}): {', '.join(skipped)}"
        noted = result.plan.model_copy(update={"message": f"{result.plan.message}; {note}".lstrip("; ")})
        best = noted if best is result.plan else best
        result = replace(result, plan=noted)
    if best is result.plan:
        return result
    chosen = best.model_copy(
        update={
            "status": Status.FEASIBLE if result.plan.status != Status.FALLBACK else Status.FALLBACK,
            "message": f"the {best.solver} plan scores better than CP-SAT's own in time. {result.plan.message}".strip(),
        }
    )
    # A peer beat a plan the stages called proven: their bounds did not cover the whole round
    # (a hypothesis round found a peer 0.2 above a "proven" tier bound), so none are kept;
    # the finisher's cheap bounds still hold.
    return replace(result, plan=chosen, score=best_score, proven=None)


def _candidates(
    engines: list[GreedyEngine] | None = None, stop: Callable[[], bool] | None = None
) -> list[Callable[[Round], Plan]]:
    """Plan makers in the order :func:`_best_greedy` tries them; the first (greedy, eager
    growth) appends its engine to ``engines``: the slot placer's engines share its setup (gang
    views, running-pod index, victim order: a placer pass 0.50 -> 0.36 CPU-s at L 0.75,
    docs/benchmarks.md, "h29-L"), and stops when ``stop`` says so (:func:`_cut_short`)."""
    from gangopt.solvers.fifo import fifo_first_fit
    from gangopt.solvers.peers import koordinator_like, kueue_like, slurm_backfill_like, volcano_like

    # The greedy candidates leave their waiting gangs unexplained: the finisher explains the
    # plan CP-SAT returns (:attr:`~gangopt.solvers.greedy.engine.GreedyEngine.explain`).
    def greedy_plan(rnd: Round) -> Plan:
        return greedy(rnd, explain=False, engines=engines, stop=stop, keep_top=True)

    def deferred(rnd: Round) -> Plan:
        return greedy(rnd, growth="deferred", explain=False)

    return [greedy_plan, deferred, koordinator_like, volcano_like, kueue_like, slurm_backfill_like, fifo_first_fit]


def _cut_short(pre: Prefiltered | None, plan: Plan, unbounded: Score, stats: Stats, slow: float) -> Result:
    """The answer when the first greedy pass stopped at its deadline (:func:`solve_cpsat`):
    its partial plan, status ``fallback``, with no other step and no LP bound (the finisher's
    cheap bounds without them: :func:`_best_greedy` left them out), since only the time to
    score, explain and validate it is left. Issue 13's fragmented XL round at a 3 s limit,
    whose whole pass is 4 CPU-s: `gangopt solve` took 39.3 s on stop 29's code at load 8-10,
    7.3 s now (3.65 CPU-s; docs/benchmarks.md, "h30-clock"). With no ``pre``, the pass would
    have stopped at its first ask before the prefilter too: neither ran, and the finisher
    bounds the plan by what its clock still allows (:func:`gangopt.annotate.annotate`: at XL
    at 3 s, the tier ceilings alone)."""
    message = f"{plan.message}; no time left for anything else; the partial greedy plan returned"
    cut = plan.model_copy(update={"status": Status.FALLBACK, "message": message})
    return Result(plan=cut, stats=stats, pre=pre, score=unbounded, slowdown=slow)


def _not_built(rnd: Round, pre: Prefiltered | None, stats: Stats, slow: float) -> Result:
    """:func:`_cut_short` for a first greedy pass not built (it would stop at its first ask):
    the plan that starts nothing (:func:`~gangopt.solvers.greedy.engine.unstarted`), every LP
    left out of ``pre``'s bounds."""
    unbuilt = unstarted(rnd)
    if pre is not None:
        leave_out(pre, "lp", "bounds without their LPs (time limit; the gap is against looser bounds)")
    return _cut_short(pre, unbuilt, score(rnd, unbuilt), stats, slow)


def _tiers_at_cheap_bounds(pre: Prefiltered, unbounded: Score) -> bool:
    """Whether every tier of a plan scoring ``unbounded`` is at its cheap bound. The bounds are
    those :func:`_proven_by_cheap_bounds` asked for (below a tier outside the gap limit, which
    is not at its bound either, none are computed)."""
    bounds = cheap_bounds_for(pre, unbounded, enough=pre.rnd.policy.gap_limit).tiers_in_units()
    return all(t.value >= bounds.get(t.priority, math.inf) - 1e-9 for t in unbounded.tiers)


def _open_tiers(pre: Prefiltered, unbounded: Score) -> frozenset[int]:
    """The priorities whose tier a plan scoring ``unbounded`` leaves below its cheap bound (those
    :func:`_tiers_at_cheap_bounds` reads)."""
    bounds = cheap_bounds_for(pre, unbounded, enough=pre.rnd.policy.gap_limit).tiers_in_units()
    return frozenset(t.priority for t in unbounded.tiers if t.value < bounds.get(t.priority, math.inf) - 1e-9)


def _proven_by_cheap_bounds(rnd: Round, pre: Prefiltered, plan: Plan, unbounded: Score) -> Plan | None:
    """``plan`` (a candidate, scored ``unbounded``) marked as the answer when the cheap
    bounds prove it within ``policy.gap_limit``: every tier's own relative gap and the
    total-value gap within the limit. No model is built then. None otherwise.

    Checking every tier, not just the total, keeps the limit from hiding a high-priority gang
    that could have started: at 16,384 nodes one 1,024-GPU gang is under 1 % of the total but
    several percent of its tier. So no slot LP is solved below the first tier outside the limit
    (``enough``): no bound there could prove the plan."""
    limit = rnd.policy.gap_limit
    bounds = cheap_bounds_for(pre, unbounded, enough=limit)
    s = with_bounds(unbounded, bounds.tiers_in_units(), bounds.secondary / SCALE)
    gap = plan_gap(s)
    if gap is None or gap > limit or any(tier_gap(t) > limit for t in s.tiers):
        return None
    return plan.model_copy(
        update={
            "status": Status.OPTIMAL if gap <= 0 else Status.FEASIBLE,
            "message": f"{plan.solver} plan proven within {gap:.3%} of the round's cheap bounds, every tier "
            f"within {max((tier_gap(t) for t in s.tiers), default=0.0):.3%} (gap limit {limit:.2%}); "
            "no model needed",
        }
    )


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
        waiting=_short_reasons(rnd, pre, decision.admitted),
    )


def _short_reasons(rnd: Round, pre: Prefiltered, admitted: set[str]) -> list[Waiting]:
    """Each gang the plan leaves waiting, with the prefilter's reason when it pruned the gang and
    otherwise a plain "not started" (code ``policy``). The finisher replaces them with explained
    reasons (:mod:`gangopt.reasons`); a caller that skips it (a replay) reads only decisions, and
    explaining every round cost a fifth of CP-SAT's replay time."""
    out = []
    for gang in rnd.pending:
        if gang.name in admitted:
            continue
        pruned = pre.pruned.get(gang.name)
        if pruned is not None:
            out.append(Waiting(gang=gang.name, code=pruned.code, reasons=[pruned.reason]))
        else:
            text = "not started by the CP-SAT plan (unexplained: the plan was not annotated)"
            out.append(Waiting(gang=gang.name, code="policy", reasons=[text]))
    return out


__all__ = ["SEARCH_SHARE", "peers_first", "portfolio_floor", "solve_cpsat"]
