"""The one finisher: every solver's plan leaves with reasons, a bounded score and a gap.

The door (:mod:`gangopt.solve`) hands each solver's :class:`~gangopt.result.Result`
here, whatever the solver: CP-SAT, greedy, or a peer emulation. The finisher adds

1. a reason for every waiting gang (:mod:`gangopt.reasons`), unless the solver's own reasons
   are the point (the peer emulations speak as their schedulers would);
2. the plan's score per priority tier and on the secondary terms (:mod:`gangopt.objective`),
   each with the tighter of the bound the solver proved and the round's cheap bounds
   (:mod:`gangopt.bounds`);
3. ``gap``: how much value any plan could still add, relative to this plan's.

It judges; it decides nothing and validates nothing (the door does, after it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal, cast

from gangopt import slot_classes, slots
from gangopt.arrays import running_pod_count
from gangopt.beside import Beside, beside
from gangopt.bounds import (
    CheapBounds,
    ceilings_of,
    cheap_bounds,
    cheap_bounds_kept,
    lexicographic_floors,
    packed_tier_bounds,
    reaches_ceilings,
    tier_ceilings,
)
from gangopt.objective import SCALE, score, with_bounds
from gangopt.prefilter import Prefiltered, prefilter
from gangopt.reasons import UNCHECKED, Check, waiting_checks, waiting_reasons
from gangopt.result import ProvenBounds, Result
from gangopt.schema import SAFETY_NET, Plan, Round, Score, Status, TierScore, Waiting
from gangopt.scope import Scope
from gangopt.slot_classes import class_secondary_bound
from gangopt.slots import allow_large, secondary_bound_at, slot_tier_bounds
from gangopt.validation import same_decisions


def annotate(
    rnd: Round,
    result: Result,
    *,
    explain_waiting: bool = True,
    deadline: float | None = None,
    slowdown: float = 1.0,
    lp_bounds: bool = True,
    validator_end: float | None = None,
) -> Plan:
    """``result.plan`` with waiting reasons, bounded score, gap and the solver's stats.

    ``explain_waiting=False`` keeps the solver's own waiting reasons. The prefiltered round
    and the plan's score are taken from ``result`` when the solver computed them, so a round
    is prefiltered and a plan scored once per solve. ``lp_bounds=False``: the cheap bounds
    without their LPs (:func:`cheap_bounds_for`).

    ``deadline`` (a :func:`time.perf_counter` instant: the end of the time limit) bounds the
    waiting reasons, the one step here whose cost grows with the round (2.3 CPU-s for 207
    waiting gangs at 16,384 nodes): they stop :func:`validator_seconds` (times ``slowdown``, see
    :func:`slowdown`) before it, their plan's view is not built unless it ends by then
    (:data:`REASONS_VIEW_SECONDS_PER_POD`), the gangs not reached keep the solver's own reason
    (:data:`gangopt.reasons.UNCHECKED`), and the message says how many. ``validator_end``: the
    instant the validator's checks of the decisions, run beside in a child, are expected to end
    (:func:`reasons_deadline`). When the clock already knows that the cheap bounds (and the
    prefilter, when the solver handed over none) cannot end in time, they do not start: the
    tier ceilings alone bound the plan (:func:`_bounds_too_late`, :func:`_ceilings_only`).

    The reasons a child checked beside the solve (:func:`reasons_beside`), started by the solver
    on its first candidate, are taken when the plan decides as that candidate did; the child is
    reaped here whatever happens."""
    early = _taken_beside(result.pre)
    try:
        taken = early if explain_waiting else None
        return _annotate(rnd, result, explain_waiting, deadline, slowdown, lp_bounds, validator_end, taken)
    finally:
        if early is not None:
            early.child.close()


def _annotate(
    rnd: Round,
    result: Result,
    explain_waiting: bool,
    deadline: float | None,
    slowdown: float,
    lp_bounds: bool,
    validator_end: float | None,
    early: ReasonsBeside | None,
) -> Plan:
    """:func:`annotate` once the child of :func:`reasons_beside` (``early``) is taken."""
    plan = result.plan
    late = _bounds_too_late(rnd, result, deadline, slowdown)
    if late is not None:
        return _ceilings_only(rnd, result, late, explain_waiting, deadline, slowdown, validator_end, early)
    pre = result.pre
    if pre is None:
        pre = prefilter(rnd)
        # A solver that hands over no prefiltered round (greedy, the peers) and asks for the LP
        # bounds gets the slot bounds of a large round too (``gangopt.slots.allow_large``): what
        # CP-SAT's plans are judged by when its clock allows them (4,096 nodes: 1.6-2.4 CPU-s).
        clocked = lp_bounds and deadline is not None and not rnd.policy.deterministic
        allow_large(pre, lp_bounds, deadline if clocked else None)
        if clocked:
            assert deadline is not None
            _lps_in_time(pre, plan, deadline - rnd.policy.time_limit, slowdown)
    unbounded = result.score if result.score is not None else score(rnd, plan)
    tiers, secondary = combined_bounds(result.proven or ProvenBounds(), _finisher_bounds(pre, unbounded, lp_bounds))
    bounded = with_bounds(unbounded, tiers, secondary)
    left_out = bounds_left_out(pre)
    if left_out is not None and lp_bounds:
        plan = plan.model_copy(update={"message": f"{plan.message}; {left_out[1]}".lstrip("; ")})
    if explain_waiting:
        plan = _explained(rnd, plan, deadline, slowdown, validator_end, early)
    gap = plan_gap(bounded)
    closed = gap == 0 and all(tier_gap(t) == 0 for t in bounded.tiers)
    if result.bounds_decide and plan.status == Status.FEASIBLE and closed:
        note = f"{plan.message}; optimal by the finisher's bounds"
        plan = plan.model_copy(update={"status": Status.OPTIMAL, "message": note})
    return plan.model_copy(update={"score": bounded, "gap": gap, "stats": result.stats})


def _explained(
    rnd: Round,
    plan: Plan,
    deadline: float | None,
    slow: float,
    validator_end: float | None = None,
    early: ReasonsBeside | None = None,
) -> Plan:
    """``plan`` with its waiting gangs' reasons, cut by ``deadline`` (:func:`annotate`;
    :func:`reasons_deadline` with ``validator_end``): those a child checked beside the solve
    (``early``, :func:`reasons_beside`) when it checked a plan that decides the same and answers
    in time (:func:`_checked_beside`), else this process's own."""
    by = None if deadline is None else reasons_deadline(rnd, plan, deadline, slow, validator_end)
    setup = REASONS_VIEW_SECONDS_PER_POD * plan_pods(rnd, plan) * slow
    checked = None if early is None else _checked_beside(early, rnd, plan, by, slow)
    waiting = waiting_reasons(rnd, plan, deadline=by, setup=setup, checked=checked)
    note = unchecked_note(plan.message, waiting, rnd.policy.deterministic)
    return plan.model_copy(update={"waiting": waiting, "message": note})


@dataclass
class ReasonsBeside:
    """The waiting checks of ``plan`` (:func:`~gangopt.reasons.waiting_checks`), cut by
    ``deadline``, computed in a forked child (:func:`reasons_beside`)."""

    rnd: Round
    plan: Plan
    deadline: float
    expected: float
    """CPU seconds the child's checks are expected to take (:data:`REASONS_BESIDE_SECONDS_PER_POD`)."""
    child: Beside[dict[str, list[Check]]]


REASONS_BESIDE = "reasons-beside"
"""Key in ``pre.derived`` of the :class:`ReasonsBeside` a solver started (:func:`reasons_beside`)
for the finisher to collect (:func:`annotate`), or the door to close (:func:`close_reasons_beside`)."""

REASONS_BESIDE_LEAST_SECONDS = 0.4
"""Expected CPU seconds of a plan's view and first gang (:data:`REASONS_VIEW_SECONDS_PER_POD`
per pod of :func:`plan_pods`) below which :func:`reasons_beside` forks no child: the reasons of
smaller rounds end well before their deadline in-process (greedy's plan of the fragmented L
round: 0.36 CPU-s for 52 waiting gangs, none unchecked on a quiet host), and the fork costs the
parent the pages it writes afterwards (0.07 CPU-s at L, :data:`gangopt.solve.BESIDE_LEAST_SECONDS`).
XL (77,300 pods) expects 0.85 s, L (19,400) 0.21 s."""

REASONS_BESIDE_NICENESS = 19
"""The niceness of the child of :func:`reasons_beside` (:func:`gangopt.beside.beside`): started
on an idle second core, it keeps to CPU time no other process wants should the machine get
busy, so it takes next to nothing from the solve it runs beside (the candidates and bounds that
decide the plan), and it gets the finisher's core while the finisher waits for it
(:func:`_checked_beside`)."""

REASONS_BESIDE_SECONDS_PER_POD = 3.5e-5
"""CPU seconds per pod (:func:`plan_pods`) the child of :func:`reasons_beside` is expected to
take for the whole of its checks, from which the finisher judges whether waiting for it beats
checking the plan itself (:func:`_checked_beside`): greedy's plan of the fragmented XL round,
77,300 pods and 205 waiting gangs, 2.2-2.5 CPU-s uncut (3.2e-5 at most)."""

REASONS_BESIDE_PATIENCE_SECONDS = 0.05
"""Seconds past the later of its own deadline and the finisher's (:func:`reasons_deadline`)
the finisher waits for the child of :func:`reasons_beside`: the child stops by its deadline but
between gangs (one gang's checks at XL: 5-70 ms)."""


def reasons_beside(pre: Prefiltered, plan: Plan, deadline: float, slow: float) -> None:
    """Start the waiting checks of ``plan`` (a solver's first candidate: CP-SAT's first greedy
    plan) in a child forked beside the solve (:func:`gangopt.beside.beside`), which the finisher
    uses when the plan it explains decides the same (:func:`_checked_beside`). ``deadline``: the
    end of the solve's time limit (a :func:`time.perf_counter` instant); the child's checks stop
    where the finisher's own would stop with the whole validator after them
    (:func:`reasons_deadline` without a validator beside). ``slow``: :func:`slowdown` so far.

    On the fragmented XL round CP-SAT's first greedy plan is ready about 5 s into the 10 s
    command, then the solver spends about 2.8 s on bounds and candidates before the finisher,
    which had about 1 s left for reasons costing 2.2-2.5 CPU-s (view 0.6, own checks 1.3,
    comparisons 0.3): 0-156 of 205 waiting gangs went unchecked on a quiet host, by its pace,
    and every one under load. The plan the finisher explains there is that greedy plan (no model
    fits the limit). With the child (quiet host, 4 pairs): 0 unchecked, and the command ends
    1.0-1.2 s sooner (8.34 s median against 9.43), the finisher taking the child's 205 gangs'
    checks in 21 ms (h38-xlreasons in docs/benchmarks.md). Only where the reasons are large enough to pay
    (:data:`REASONS_BESIDE_LEAST_SECONDS`) and where a child can run beside on a core no other
    process runs on now (:func:`gangopt.beside.second_core`), at
    :data:`REASONS_BESIDE_NICENESS`. On a busy machine it would gain nothing: started at nice
    19 whatever the load (XL, load 2.4-3.4 on the 2-core host) it had 0.01-0.03 CPU-s by the
    finisher, which ended it, and the fork's pages cost the solve beside it. The reasons do not
    depend on which process made them: the same function of the same round and decisions, cut
    by the same kind of deadline (under ``policy.deterministic`` the safety net, as in-process)."""
    rnd = pre.rnd
    pods = plan_pods(rnd, plan)
    view = REASONS_VIEW_SECONDS_PER_POD * pods
    if view < REASONS_BESIDE_LEAST_SECONDS or REASONS_BESIDE in pre.derived:
        return
    if len(plan.admitted) >= len(rnd.pending):
        return
    by = reasons_deadline(rnd, plan, deadline, slow, None)
    expected = REASONS_BESIDE_SECONDS_PER_POD * pods
    work = partial(waiting_checks, rnd, plan, deadline=by, setup=view * slow)
    child = beside(work, niceness=REASONS_BESIDE_NICENESS)
    if child is not None:
        pre.derived[REASONS_BESIDE] = _UNCOLLECTED[child.pid] = ReasonsBeside(rnd, plan, by, expected, child)


_UNCOLLECTED: dict[int, ReasonsBeside] = {}
"""The children of :func:`reasons_beside` neither collected by a finisher nor closed, by pid:
what :func:`close_reasons_beside_of` ends when the solver that started one raises before its
result (and the prefiltered round that holds the child) reaches the door. A child forks only
in a process with one thread (:func:`gangopt.beside.second_core`), so the door that reads this
is the one that started the children in it."""


def close_reasons_beside(pre: Prefiltered | None) -> None:
    """End and reap the child of :func:`reasons_beside` the finisher did not collect (a solve
    with ``annotate=False``, or one on its way out with an exception); none: nothing."""
    early = _taken_beside(pre)
    if early is not None:
        early.child.close()


def close_reasons_beside_of(rnd: Round) -> None:
    """End and reap every child of :func:`reasons_beside` started on ``rnd`` and not collected:
    for a solver that raised after starting one, whose prefiltered round never reached the
    door. Without it the child ran on to its deadline and then stayed a zombie for the life of
    the process (a scheduler calling the library, the service)."""
    for pid, early in list(_UNCOLLECTED.items()):
        if early.rnd is rnd:
            del _UNCOLLECTED[pid]
            early.child.close()


def _taken_beside(pre: Prefiltered | None) -> ReasonsBeside | None:
    """The child of :func:`reasons_beside` started on ``pre``, taken out of it (collected once)."""
    early = None if pre is None else pre.derived.pop(REASONS_BESIDE, None)
    if not isinstance(early, ReasonsBeside):
        return None
    _UNCOLLECTED.pop(early.child.pid, None)
    return early


def _checked_beside(
    early: ReasonsBeside, rnd: Round, plan: Plan, by: float | None, slow: float
) -> dict[str, list[Check]] | None:
    """The child's checks (:func:`reasons_beside`) when they are of ``rnd`` and of a plan that
    decides as ``plan`` does and it answers by the later of its deadline and ``by``
    (:data:`REASONS_BESIDE_PATIENCE_SECONDS` past it); else None (the child ended), and the
    finisher checks ``plan`` itself. A child still at work is waited for only when what it is
    expected to have left (its expected CPU seconds less those it used, times ``slow``: while
    the finisher waits, the child has its core) ends by then: on a busy machine the child, at
    low priority, may have had almost no CPU, and the finisher's own checks, cut by ``by``, then
    check more. With no ``by`` (a finisher called without a clock) the child is not waited for:
    the finisher's own checks are then uncut."""
    if by is None or early.rnd is not rnd or not same_decisions(early.plan, plan):
        early.child.close()
        return None
    end = max(by, early.deadline)
    if not early.child.ready():
        used = early.child.cpu_seconds()
        left = early.expected - (used if used is not None else 0.0)
        if time.perf_counter() + left * slow > end:
            early.child.close()  # starved on a busy machine: this process checks what it can
            return None
    return early.child.result(timeout=max(0.0, end - time.perf_counter() + REASONS_BESIDE_PATIENCE_SECONDS))


FINISHER_BOUNDS_SECONDS_PER_POD = 4e-6
"""CPU seconds per pod (:func:`pass_pods`) of the finisher's cheap bounds without their LPs for
a plan below the tier ceilings (the growth bound's items and the room they read, the packed
tier bound's items): measured on a plan that starts nothing of issue 13's fragmented rounds,
quiet host: L (19,476 pods) 0.07-0.09 CPU-s, XL (78,415) 0.27-0.33 (3.4-4.6e-6)."""


def _bounds_too_late(rnd: Round, result: Result, deadline: float | None, slow: float) -> str | None:
    """Why the finisher bounds ``result``'s plan by the tier ceilings alone, or None: on a
    clocked solve (a ``deadline``, not ``policy.deterministic``) whose cheap bounds are not
    already kept on its prefiltered round, when they (:data:`FINISHER_BOUNDS_SECONDS_PER_POD`;
    with no prefiltered round handed over, the prefilter too: :data:`REPREFILTER_SECONDS_PER_POD`)
    and the validator, times ``slow``, would end past the limit and :data:`LIMIT_TOLERANCE`.
    What the clock already knows cannot fit is not started: at XL with a 3 s limit the solve
    began past its limit (the import and the parse take it), no pass was built, and the
    prefilter (0.44 CPU-s) and these bounds (0.27-0.33) were a third of what followed."""
    if deadline is None or rnd.policy.deterministic:
        return None
    pre = result.pre
    if pre is not None and cheap_bounds_kept(pre):
        return None  # computed already: they cost nothing more
    per_pod = FINISHER_BOUNDS_SECONDS_PER_POD + (REPREFILTER_SECONDS_PER_POD if pre is None else 0.0)
    bounds = per_pod * pass_pods(rnd) * slow
    validator = validator_seconds(rnd, result.plan) * slow
    now, limit = time.perf_counter(), rnd.policy.time_limit
    if now + bounds + validator <= deadline + LIMIT_TOLERANCE * limit:
        return None
    which = "every pending gang's (no prefilter)" if pre is None else "the kept gangs'"
    return (
        f"time limit: bounds are the tier ceilings alone, {which}, no secondary bound and no gap (about "
        f"{bounds:.1f} s of cheap bounds and {validator:.1f} s of validation after {now - deadline + limit:.1f} s "
        f"of the {limit:g} s limit)"
    )


def _ceilings_only(
    rnd: Round,
    result: Result,
    note: str,
    explain_waiting: bool,
    deadline: float | None,
    slow: float,
    validator_end: float | None = None,
    early: ReasonsBeside | None = None,
) -> Plan:
    """:func:`annotate` with the tier ceilings alone for bounds (:func:`_bounds_too_late` says
    ``note``, which the message gets): every pending gang the prefilter kept started (every
    pending gang, with no prefiltered round) and every running gang kept, the tighter of that
    and what the solver proved per tier; the secondary terms bounded only by a proof of the
    solver's (else no bound: the gap is unknown)."""
    plan = result.plan
    unbounded = result.score if result.score is not None else score(rnd, plan)
    pre = result.pre
    ceilings = tier_ceilings(pre) if pre is not None else ceilings_of(rnd, range(len(rnd.pending)))
    proven = result.proven or ProvenBounds()
    tiers = {p: min(v / SCALE, proven.tiers.get(p, math.inf)) for p, v in ceilings.items()}
    bounded = with_bounds(unbounded, tiers, proven.secondary)
    plan = plan.model_copy(update={"message": f"{plan.message}; {note}".lstrip("; ")})
    if explain_waiting:
        plan = _explained(rnd, plan, deadline, slow, validator_end, early)
    return plan.model_copy(update={"score": bounded, "gap": plan_gap(bounded), "stats": result.stats})


FINISHER_LP_SECONDS_PER_POD = 2.8e-5
"""CPU seconds per pod (:func:`plan_pods`) of the LP bounds the finisher computes for greedy's
and the peers' plans (``--lp-bounds``), the node-class bounds aside (their own estimate,
:func:`bounds_in_time`): measured on greedy's plans of issue 13's fragmented rounds, OR-Tools
imported (load 4-5): 1,024 nodes 0.09 CPU-s for 5,043 pods (1.8e-5), 4,096 nodes 0.54 for
19,218 (2.8e-5), 16,384 nodes 0.56 for 77,355 with the node-class bounds left out (0.7e-5;
with them 3.4 CPU-s)."""


def _lps_in_time(pre: Prefiltered, plan: Plan, start: float, slow: float) -> None:
    """For a solver that hands the finisher no prefiltered round (greedy, the peers) and asks for
    the LP bounds, on a clocked solve that began at ``start``: leave out what the time limit
    cannot cover (:func:`bounds_in_time`), then every LP when their estimate
    (:data:`FINISHER_LP_SECONDS_PER_POD`) and the validator's, times ``slow``, would end past the
    limit and :data:`LIMIT_TOLERANCE`; the plan's message says so. Before stop 31 these LPs were
    not clocked: greedy's ``--lp-bounds`` at 16,384 nodes spent 3.7 CPU-s on them whatever the
    limit (0.6 at 4,096 nodes)."""
    rnd, limit = pre.rnd, pre.rnd.policy.time_limit
    validator = validator_seconds(rnd, plan) * slow
    bounds_in_time(pre, start, slow, validator, f"{plan.solver} pass")
    left_out = bounds_left_out(pre)
    if left_out is not None and left_out[0] == "lp":
        return
    now, lps = time.perf_counter(), FINISHER_LP_SECONDS_PER_POD * plan_pods(rnd, plan) * slow
    if now + lps + validator > start + (1 + LIMIT_TOLERANCE) * limit:
        note = (
            f"time limit: bounds without their LPs (about {lps:.1f} s of them and {validator:.1f} s of validation "
            f"after {now - start:.1f} s of the {limit:g} s limit; the gap is against looser bounds)"
        )
        leave_out(pre, "lp", note)


LARGE_SECONDARY_GANGS = 1500
"""Pending and candidate gangs above which the finisher does not tighten the secondary bound of
a plan the cheap bounds already prove within ``policy.gap_limit`` (:func:`_finisher_bounds`).
On the fragmented M round (busy 0.75, 1,024 nodes, about 3,000 pending and candidate gangs)
the slot model's second stage (:func:`~gangopt.slots.secondary_bound_at`, an LP there) took
0.15-0.16 CPU-s of a 0.6 CPU-s solve to turn "proven within 0.014 %" (gap limit 0.5 %) into
"optimal"; up to this size it is solved whole in 10-25 ms (the S round stays ``optimal``)."""


def _finisher_bounds(pre: Prefiltered, unbounded: Score, lp: bool) -> CheapBounds:
    """The cheap bounds the finisher reports for a plan scoring ``unbounded``: the tightest
    (:func:`cheap_bounds_for`), except on a round of more than :data:`LARGE_SECONDARY_GANGS`
    pending and candidate gangs whose plan the bounds asked only for ``policy.gap_limit``
    already prove within it (every tier and the total): those, with no second-stage LP."""
    limit = pre.rnd.policy.gap_limit
    if lp and limit > 0 and len(pre.pending) + len(pre.candidates) > LARGE_SECONDARY_GANGS:
        enough = cheap_bounds_for(pre, unbounded, lp, enough=limit)
        bounded = with_bounds(unbounded, enough.tiers_in_units(), enough.secondary / SCALE)
        gap = plan_gap(bounded)
        if gap is not None and gap <= limit and all(tier_gap(t) <= limit for t in bounded.tiers):
            return enough
    return cheap_bounds_for(pre, unbounded, lp)


VALIDATION_SECONDS_PER_POD = 6e-5
"""Seconds the validator takes per pod (running pods plus the plan's new ones), with room for
a loaded machine: measured 26-27 µs on the fragmented L and XL rounds (0.24 s for 8,989 pods,
0.84 s for 31,262), 71 µs on the L round's CP-SAT plan on a machine with a load of 2."""


def validation_reserve(rnd: Round, plan: Plan) -> float:
    """Seconds to keep before the end of the time limit for validating ``plan``: what a
    searching solver's clock counts (:func:`finish_reserve`)."""
    return VALIDATION_SECONDS_PER_POD * plan_pods(rnd, plan)


def plan_pods(rnd: Round, plan: Plan) -> int:
    """Pods the validator walks for ``plan``: the running ones and the plan's new ones."""
    return running_pod_count(rnd) + len(plan.placements)


VALIDATOR_SECONDS_PER_POD = 1e-5
"""CPU seconds per pod (:func:`plan_pods`) the waiting reasons leave the validator, which runs
after them: measured 7.6 µs on the fragmented XL round (0.58-0.59 s for 77,300 pods, greedy's
and CP-SAT's plans) and 6.2 µs at L (0.12 s for 19,400), quiet machine; ``slowdown`` scales it
for a loaded one. The reasons were cut at :data:`VALIDATION_SECONDS_PER_POD` (6e-5, kept for
CP-SAT's search clock): at XL with a 10 s limit that kept 4.64 s for a 0.59 s validation, the
reasons' deadline fell 5.3 s into the process, before greedy's reasons began (6.3 s) and
CP-SAT's (8.9 s), and all 207 waiting gangs went unchecked (docs/benchmarks.md, "h30-XLreasons").
CP-SAT's clock counts the same cost when it leaves bounds out (:func:`bounds_in_time`'s
``validator``); it had its own 1.2e-5, measured under load 2-4 (0.80-0.89 CPU-s at XL), which
its slowdown already scales: one constant now."""

REASONS_VIEW_SECONDS_PER_POD = 1.1e-5
"""CPU seconds per pod (:func:`plan_pods`) of the plan's view the waiting reasons build before
their first gang (:class:`gangopt.reasons._PlanView`) and of that first gang's own checks,
which build the view's lazy parts (the victims per priority and queue, the running gangs'
kinds): at XL (77,300 pods) the view 0.52 CPU-s and the first gang 0.34 on merged stop 36
(1.1e-5 together; the other gangs 5-70 ms each). Not built unless they end before the
reasons' deadline: built for no gang it only delays the end. At 6e-6 (the view alone, 0.37-0.41
s when it was set) the view was built where no gang's checks could end in time: 0 of 205
checked and the reasons 0.1-0.35 s past their deadline (h37-xlfinish in docs/benchmarks.md)."""


def validator_seconds(rnd: Round, plan: Plan) -> float:
    """CPU seconds the validator is expected to take on ``plan`` (:data:`VALIDATOR_SECONDS_PER_POD`)."""
    return VALIDATOR_SECONDS_PER_POD * plan_pods(rnd, plan)


BESIDE_SLOWDOWN = 1.3
"""Slowdown (:func:`slowdown`) above which the door runs the validator's checks of the
decisions in-process, not in a child beside the finisher (:mod:`gangopt.beside`), and the
waiting reasons keep the validator's whole reserve (:func:`reasons_deadline`): a process
running that much slower than its CPU time shares its cores, and a child beside it would get
no core of its own."""


def reasons_deadline(rnd: Round, plan: Plan, deadline: float, slow: float, validator_end: float | None) -> float:
    """When the waiting reasons of ``plan`` stop (a :func:`time.perf_counter` instant), for a
    solve whose time limit ends at ``deadline``: the validator's expected seconds
    (:func:`validator_seconds`, times ``slow``) before it, the validator running after them.
    When its checks of the decisions run beside them in a child expected to end at
    ``validator_end`` (:func:`gangopt.solve.run`), only its check of the waiting list is left
    after them (the plan's pending gangs, :func:`waiting_check_seconds`): they stop that much
    before the deadline, or when the child is expected to end if that is later (the solve waits
    for it either way); not on a machine so loaded that the child gets no core of its own
    (:data:`BESIDE_SLOWDOWN`). At 16,384 nodes the reserve is 0.77 s (10 s limit, idle
    machine), before the reasons of the 207 waiting gangs (14 ms each)."""
    if validator_end is None or slow > BESIDE_SLOWDOWN:
        return deadline - validator_seconds(rnd, plan) * slow
    return max(deadline - waiting_check_seconds(rnd) * slow, validator_end)


WAITING_CHECK_SECONDS_PER_ENTRY = 5e-7
"""CPU seconds of the validator's check of a plan's waiting list
(:func:`gangopt.validation.validate_waiting`) per node, running gang and pending gang of the
round (its index of the round): measured 0.031-0.034 s on the fragmented XL round (16,384
nodes, 68,536 running gangs, 2,000 pending: 0.37 µs each), quiet machine. Since the validator
builds its node and running-gang indexes on first need, the check reads neither: 0.0013 CPU-s
there (0.027 before, same host), so this reserve is now a wide margin, kept as it was."""


def waiting_check_seconds(rnd: Round) -> float:
    """CPU seconds the validator's check of a plan's waiting list is expected to take
    (:data:`WAITING_CHECK_SECONDS_PER_ENTRY`)."""
    return WAITING_CHECK_SECONDS_PER_ENTRY * (len(rnd.cluster.nodes) + len(rnd.running) + len(rnd.pending))


REASONS_SECONDS_PER_GANG_ROOT_NODE = 1.5e-4
"""Seconds the waiting reasons take per waiting gang and square root of the node count. Since
the blockers are searched in runs and every domain of a level is fitted at once (stop 27), a
gang's reasons grow with about the root of the cluster: measured 4.3, 8.3 and 14 ms per gang
on the fragmented M, L and XL rounds (0.06 s for 14 gangs at 1,024 nodes, 0.43 s for 52 at
4,096, 2.9 s for 207 at 16,384: 0.13, 0.13 and 0.11 ms per gang and root node). The reserve
per gang and node it replaces (5 µs, fitted when they were 3-9x slower) kept 17 s at XL."""


def slowdown(wall_start: float, cpu_start: float, least: float = 0.05) -> float:
    """How many times more wall time than the reserves' constants this process's work takes
    now: the host's :func:`pace` (CPU time per unit of work, against the speed the constants
    were measured at) times how many times slower than its own CPU time the process ran since
    ``wall_start`` (:func:`time.perf_counter`) and ``cpu_start`` (:func:`time.process_time`),
    each at least 1 (the second 1 until ``least`` CPU seconds have passed: too short a sample
    to tell).

    The reserves here are CPU costs measured on an idle machine; on a shared 2-core machine
    running three other jobs the same steps took 2-3 times as long in wall time (waiting for a
    core: wall/CPU), and when the host's CPU itself ran 1.5 times slower for minutes (session
    32: the :func:`pace` loop 1.23 CPU-s against 0.81) wall/CPU stayed 1 and the fragmented XL
    round at a 10 s limit ended at 11.9-12.6 s (3 s: 4.1-4.5 s). Every reserve scaled by the
    load is scaled here, so both count in one place. Never called under
    ``policy.deterministic`` (no reserve may read the clock there)."""
    wall = time.perf_counter() - wall_start
    cpu = time.process_time() - cpu_start
    return pace() * (max(1.0, wall / cpu) if cpu > least else 1.0)


PACE_LOOP = compile("s = 0\nfor i in range(n):\n    s += i\n", "<pace>", "exec")
"""The calibration loop of :func:`pace`: session 32's fixed loop (``s=0; for i in
range(10**7): s+=i`` at module level, a global's loads and stores per turn), short."""

PACE_TURNS = 10_000
"""Turns of :data:`PACE_LOOP` per sample: 0.6-0.7 ms on the bench host, whose 10**7 turns take
0.61-0.67 CPU-s; the least of 3 samples this short read 59.7-64.6 ns per turn in 12 fresh
processes (load 2-3), 56-72 ns in 8 more at load 5."""

PACE_SAMPLES = 3
"""Samples of :func:`pace`, the least kept: an interrupt or a cold first turn stretches one
(the first of 5 samples of 5,000 turns read 99-109 ns twice, the others 59-72)."""

PACE_REFERENCE_SECONDS_PER_TURN = 81e-9
"""CPU seconds per turn of :data:`PACE_LOOP` at the speed the reserves' constants were
measured at: session 32's quiet host (10**7 turns in 0.81 CPU-s; 1.23 when it ran slow). The
bench host of session 33 reads 58-70 ns: pace 1, the constants keep their margin there."""

PACE_SECONDS = 10.0
"""Seconds a :func:`pace` is kept before it is measured again: the host's speed moved within
minutes in session 32, and a long-lived process (the service) pays the 2 ms calibration at
most this often."""

_pace: tuple[float, float] | None = None
"""The last :func:`pace` and when it was measured (:func:`time.monotonic`)."""


def pace() -> float:
    """How many times more CPU time than at the reserves' constants (:data:`PACE_REFERENCE_SECONDS_PER_TURN`)
    the host takes per unit of work now, at least 1: the least of :data:`PACE_SAMPLES` runs of
    :data:`PACE_LOOP` (:data:`PACE_TURNS` turns each, about 2 ms in all), kept
    :data:`PACE_SECONDS`. CPU time (:func:`time.process_time`), so a process waiting for a core
    does not read slower here (:func:`slowdown` counts that). Never below 1: the constants'
    margins were measured at 1, and a faster host keeps them. A memory-bandwidth hog on the
    other core (numpy copying 200 MB in a loop, or gathering over 1 GB) slowed neither this
    loop (58.8-67.0 ns per turn with it, 59.7-70.6 without) nor the XL round's prefilter and
    validator by more than about 7 % of CPU time (0.41-0.46 and 0.39-0.52 CPU-s against
    0.37-0.43 and 0.36-0.49): on this host (KVM, 480 MB of L3) the hog takes a core, which
    wall/CPU counts, not CPU time per unit of work (docs/benchmarks.md, "h33-pace")."""
    global _pace
    now = time.monotonic()
    if _pace is not None and now - _pace[1] < PACE_SECONDS:
        return _pace[0]
    best = math.inf
    for _ in range(PACE_SAMPLES):
        began = time.process_time()
        exec(PACE_LOOP, {"n": PACE_TURNS})  # a fixed loop, compiled once
        best = min(best, time.process_time() - began)
    value = max(1.0, best / PACE_TURNS / PACE_REFERENCE_SECONDS_PER_TURN)
    _pace = (value, now)
    return value


AFTER_PASS_SECONDS_PER_POD = 1.6e-5
"""CPU seconds per pod (running, and the pending gangs' minimums) of what follows CP-SAT's
greedy pass stopped at its deadline: building its plan, scoring it, the cheap bounds without
their LPs, the waiting gangs' reasons (cut by their own deadline) and the validator. Measured
from the pass's stop to the solve's end on issue 13's fragmented rounds (load 4-5): XL (73,956
running pods and 2,000 pending gangs' minimums: 78,400 pods) 1.08 CPU-s, 1.4e-5 per pod; 1,024
nodes (4,632 pods) 0.04, 0.9e-5. At 2.5e-5 a 10 s limit at XL on a machine at load 5 stopped
the pass after 3 gangs, and the solve ended 2.2 s before the limit."""

REPREFILTER_SECONDS_PER_POD = 0.5e-5
"""What the finisher adds per pod when the solver handed it no prefiltered round (greedy, the
peers): it prefilters again (0.37 CPU-s at XL). Greedy's post-stop work measured 1.5-1.7 CPU-s
at XL (1.9-2.1e-5 per pod), 0.07 at 1,024 nodes (1.5e-5)."""


def pass_pods(rnd: Round) -> int:
    """The pods a greedy pass's costs are counted in: the running ones and the pending gangs'
    minimums (:func:`pass_reserve`, :func:`pass_hopeless`)."""
    return running_pod_count(rnd) + sum(g.minimum for g in rnd.pending)


def pass_reserve(rnd: Round, prefiltered: bool = True) -> float:
    """CPU seconds to keep after a greedy pass for what follows it (:data:`AFTER_PASS_SECONDS_PER_POD`,
    and :data:`REPREFILTER_SECONDS_PER_POD` unless the solver hands the finisher its ``prefiltered``
    round)."""
    return (AFTER_PASS_SECONDS_PER_POD + (0.0 if prefiltered else REPREFILTER_SECONDS_PER_POD)) * pass_pods(rnd)


LIMIT_TOLERANCE = 0.1
"""Share of the time limit a solve may overrun (issue 13: the limit held within +10 %), which
the clock counts on where a step's cut costs the plan: the node-class bounds run when they and
the validator should end by the limit plus this share
(:func:`gangopt.solvers.cpsat._bounds_in_time`), and a greedy pass stops where the work after
it would end past it (:func:`stop_by`'s ``end``). On issue 13's XL round at a 10 s limit on a
machine at load 6 the pass aimed at the limit itself was cut after 719 of 2,000 gangs while the
command ended before its limit (9.8 s), and in one process CP-SAT's plan came 568.7 GPU-eq of
priority 5 below greedy's (docs/benchmarks.md, "h30-clock")."""

PASS_FLOOR_SECONDS = 0.03
"""CPU seconds a greedy pass runs before :func:`stop_by` may stop it, counted from the stop's
making: a pass this cheap costs less than what stopping it saves. The whole pass at 128 nodes
is about 0.02 CPU-s; on a machine at load 6 a 1 s limit's solve began past its deadline
there (the import and parse had taken it) and returned no gang started where stop 29 returned
the optimal plan in the same 1.1 s."""


def stop_by(end: float, reserve: float, wall: float, cpu: float) -> Callable[[], bool]:
    """A stop for a greedy pass (:attr:`gangopt.solvers.greedy.engine.GreedyEngine.stop`): True
    once ``reserve`` CPU seconds, scaled by how much slower than CPU time the process ran since
    ``wall`` and ``cpu`` (:func:`slowdown`, read anew at each ask), no longer end before ``end``
    (a :func:`time.perf_counter` instant: the end of the time limit and its
    :data:`LIMIT_TOLERANCE`). The time limit is wall
    time, what a caller waits: on a loaded machine the pass stops sooner, leaving the work after
    it the wall time it will take there. The slowdown is read after 0.01 CPU-s already (not
    :func:`slowdown`'s 0.05): a whole pass at 1,024 nodes is 0.1 CPU-s, and read from 0.05 on
    the pass ran at the quiet machine's pace for half of it (a solve of 0.73 s for a 0.5 s
    limit with the clock running 4 times faster, tests/test_solve.py; 0.35-0.45 s now). It
    never stops the pass's first :data:`PASS_FLOOR_SECONDS`."""

    floor = time.process_time() + PASS_FLOOR_SECONDS

    def stop() -> bool:
        if time.process_time() < floor:
            return False
        return time.perf_counter() + reserve * slowdown(wall, cpu, least=0.01) > end

    return stop


SETUP_SECONDS_PER_POD = 3.5e-6
"""The least CPU seconds per pod (running, and the pending gangs' minimums) a pass's setup takes
before its stop's first ask (the engine's arrays, indexes and order): measured 3.6-8.8 µs on
issue 13's fragmented rounds at 1,024, 4,096 and 16,384 nodes for greedy, CP-SAT's first pass
and the peers (koordinator_like's the least; load 4-5)."""


def pass_hopeless(rnd: Round, end: float, reserve: float, wall: float, cpu: float) -> bool:
    """Whether a pass with the stop :func:`stop_by` makes from ``end``, ``reserve``, ``wall`` and
    ``cpu`` would stop at its first ask whatever it did before it: the least its setup takes
    (:data:`SETUP_SECONDS_PER_POD`), and ``reserve``, scaled (:func:`slowdown` since ``wall``
    and ``cpu``), end past ``end`` now. Never for a setup within :data:`PASS_FLOOR_SECONDS` (no
    pass that cheap is stopped) nor a round with no pending gang. Then the pass is not built
    (:func:`gangopt.solvers.greedy.engine.unstarted`): issue 13's XL round at a 3 s limit."""
    setup = SETUP_SECONDS_PER_POD * pass_pods(rnd)
    if not rnd.pending or setup < PASS_FLOOR_SECONDS:
        return False
    return time.perf_counter() + (setup + reserve) * slowdown(wall, cpu, least=0.01) > end


def finish_reserve(rnd: Round, plan: Plan) -> float:
    """Seconds to keep at the end of the time limit for explaining and validating a plan like
    ``plan`` (its waiting gangs and pods): what a solver that searches leaves for the finisher
    and the validator."""
    waiting = len(rnd.pending) - len(plan.admitted)
    return validation_reserve(rnd, plan) + REASONS_SECONDS_PER_GANG_ROOT_NODE * waiting * math.sqrt(
        len(rnd.cluster.nodes)
    )


def unchecked_note(message: str, waiting: list[Waiting], deterministic: bool = False) -> str:
    """``message`` with a note of how many of ``waiting`` the time limit left unchecked (under
    ``policy.deterministic`` the limit is the :data:`~gangopt.schema.SAFETY_NET`)."""
    unchecked = sum(1 for w in waiting if w.reasons and w.reasons[-1] == UNCHECKED)
    if not unchecked:
        return message
    why = SAFETY_NET if deterministic else "time limit"
    note = f"reasons of {unchecked} of {len(waiting)} waiting gangs not checked against the plan ({why})"
    return f"{message}; {note}" if message else note


BOUNDS_LEFT_OUT = "bounds-left-out"
"""Key in ``pre.derived`` of what a solver's clock left out of the cheap bounds
(:func:`leave_out`)."""

LeftOut = Literal["classes", "lp"]


def leave_out(pre: Prefiltered, what: LeftOut, note: str) -> None:
    """Leave ``what`` out of every cheap bound asked of ``pre`` from now on, and have the
    finisher add ``note`` (why) to the plan's message: ``"classes"``, the slot LPs of a round
    too large for the per-node ones (the node-class bounds, :mod:`gangopt.slot_classes`: 1.3-2.0
    CPU-s at XL); ``"lp"``, every LP (:func:`cheap_bounds_for` with ``lp=False``). CP-SAT's
    clock decides (:func:`gangopt.solvers.cpsat.solve_cpsat`) before the first bound is asked
    for, so that every bound of the solve, the finisher's included, is the same."""
    pre.derived[BOUNDS_LEFT_OUT] = (what, note)


def bounds_in_time(
    pre: Prefiltered, start: float, slow: float, validator: float, first: str = "first greedy pass"
) -> None:
    """Leave out the bounds the time limit counted from ``start`` (a :func:`time.perf_counter`
    instant) cannot cover after the ``first`` pass (clocked solves; :func:`leave_out`, the
    finisher says so in the plan's message): every LP when that pass already ended past the
    limit (a 3 s limit at XL: the parse, one greedy pass and the validator are about 7 s there,
    and the growth LP, the node-class bounds and OR-Tools' import would add 1-2.5 s), else the
    node-class bounds of a round too large for the per-node ones when their estimate
    (:data:`gangopt.slot_classes.SECONDS_PER_CANDIDATE_POD`, times ``slow``: :func:`slowdown`)
    and ``validator`` (the validator's seconds, scaled) would end past the limit and
    :data:`LIMIT_TOLERANCE`. CP-SAT's clock asks after its first candidate
    (:func:`gangopt.solvers.cpsat.solve_cpsat`), the finisher for greedy and the peers when
    they ask for the LP bounds (``--lp-bounds``)."""
    rnd, limit = pre.rnd, pre.rnd.policy.time_limit
    now = time.perf_counter()
    if now > start + limit:
        note = (
            f"time limit: the {first} ended {now - start:.1f} s into the {limit:g} s limit (with the "
            f"validator, about {now - start + validator:.1f} s is the least this solve can take here); bounds "
            "without their LPs (the gap is against looser bounds)"
        )
        leave_out(pre, "lp", note)
        return
    if not _on_class_bounds(pre) or not slot_classes.affordable(pre):
        return
    pods = pre.kept("slot-classes-pods", lambda: sum(len(rnd.running[gi].pods) for gi in pre.candidates))
    classes = slot_classes.SECONDS_PER_CANDIDATE_POD * pods * slow
    if now + classes + validator > start + (1 + LIMIT_TOLERANCE) * limit:
        note = (
            f"time limit: node-class bounds left out (about {classes:.1f} s of them and {validator:.1f} s of "
            f"validation after {now - start:.1f} s of the {limit:g} s limit); the gap is against looser bounds"
        )
        leave_out(pre, "classes", note)


def _on_class_bounds(pre: Prefiltered) -> bool:
    """Whether the round's slot bounds are the node-class ones: too many pending and candidate
    gangs for the per-node models (:data:`gangopt.slots.MAX_COLUMNS`), and no leave for the
    large per-node ones (:func:`gangopt.slots.allow_large`)."""
    if len(pre.pending) + len(pre.candidates) <= slots.MAX_COLUMNS:
        return False
    return not pre.derived.get(slots.LARGE_KEY, False) or not slots.large_affordable(pre)


def bounds_left_out(pre: Prefiltered) -> tuple[LeftOut, str] | None:
    """What :func:`leave_out` left out of ``pre``'s cheap bounds, and why; None: nothing."""
    return cast("tuple[LeftOut, str] | None", pre.derived.get(BOUNDS_LEFT_OUT))


def cheap_bounds_for(pre: Prefiltered, unbounded: Score, lp: bool = True, enough: float | None = None) -> CheapBounds:
    """The cheap bounds, tight on the secondary terms when a plan scoring ``unbounded``
    shows that every tier's ceiling can be reached (every optimal plan then runs every kept
    gang); when it shows that only the top tiers can, the first tier below them is bounded by
    what fits beside them (:func:`~gangopt.bounds.packed_tier_bounds`), and with ``lp`` every
    tier by the slot LPs (:mod:`gangopt.slots`).

    ``lp=False`` leaves out both LPs (slots and growth): they need OR-Tools' linear solver,
    which greedy and the peer emulations otherwise never import. The bounds stay valid, only
    looser: greedy's gap on the fragmented S round at busy 0.75 is 0.3 % with them, 11.3 %
    without (M: 9.8 % and 16.4 %), for 0.05 CPU-s more (plus the import).

    ``enough`` (a relative gap) is for a caller asking only whether every tier is within it
    (:func:`~gangopt.slots.slot_tier_bounds`): the tiers below the first one that is not keep
    their looser bounds.

    Where the node-class LP bounded the lowest tier, the secondary bound is that LP's growth of
    the gangs it starts less the preemptions' cost every plan at least as good must pay
    (:func:`~gangopt.slot_classes.class_secondary_bound`: fragmented XL, 3,960.2 -> 296.5 GPU-eq,
    the gap 4.78 % -> 3.96 %, 0.8-1.1 CPU-s; the preemptions alone gave 1,460.4 and 4.22 %).

    What a solver's clock left out (:func:`leave_out`) stays out, whatever ``lp`` says."""
    left_out = bounds_left_out(pre)
    lp = lp and (left_out is None or left_out[0] != "lp")
    values, ceilings = tier_values(unbounded), tier_ceilings(pre)
    bounds = cheap_bounds(pre, reaches_ceilings(values, ceilings), lp)
    reached = {p: values.get(p, 0.0) >= v / SCALE - 1e-9 for p, v in ceilings.items()}
    if all(reached.values()) or Scope(pre.rnd).beyond_priority:
        # every tier at its ceiling: nothing to tighten; or queues may reclaim at equal or
        # higher priority, which the tighter bounds (room per priority) do not allow for
        return bounds
    packed = packed_tier_bounds(pre, reached)
    tiers = {p: min(v, packed.get(p, v)) for p, v in bounds.tiers.items()}
    if not lp:
        return CheapBounds(tiers=tiers, secondary=bounds.secondary)
    units = {p: round(v * SCALE) for p, v in values.items()}
    slots = slot_tier_bounds(pre, units, tiers, enough=enough) if left_out is None else {}
    tiers = {p: min(v, slots.get(p, v)) for p, v in tiers.items()}
    # The preemptions every plan at least as good must pay, by the node-class LP (only when
    # it bounded the lowest tier: 0 otherwise).
    secondary = class_secondary_bound(pre, units, bounds.secondary) if left_out is None else bounds.secondary
    if _within(unbounded, tiers, secondary, enough):
        return CheapBounds(tiers=tiers, secondary=secondary)  # the looser bound proves it already
    at_bounds = all(units.get(p, 0) >= v for p, v in tiers.items())
    lowest_open = _only_lowest_open(units, tiers)
    near = lowest_open and all(
        v - units.get(p, 0) <= (AT_PLAN_GAP if enough is None else enough) * max(1, abs(units.get(p, 0)))
        for p, v in tiers.items()
    )
    # past AT_PLAN_GAP but within AT_PLAN_TOTAL_GAP in total: the finisher alone, by the clock
    past = (
        enough is None
        and lowest_open
        and not near
        and _tiers_within(units, tiers, AT_PLAN_TOTAL_GAP)
        and _at_plan_in_time(pre)
    )
    if at_bounds or near or past:
        # Every tier at its bound: these are the optimum's tiers, and the slot model's second
        # stage bounds the secondary terms of every plan that reaches them (M 0.75: 62.1
        # GPU-eq instead of 512.2, gap 1.8 % to 0.3 %). Every tier but the lowest at its bound:
        # every plan at least as good lexicographically has each tier at least this plan's, and
        # the same second stage with the tiers held at the plan's values bounds its secondary
        # terms (L 0.75, priority 0 0.18 % short: 165.2 GPU-eq instead of 2,172.2, gap 2.2 % to
        # 0.5 %; one LP, 0.7-1.0 CPU-s there), asked with ``enough`` only when every tier is
        # within it (no other plan could be proven), without it within :data:`AT_PLAN_GAP`, or
        # past it within :data:`AT_PLAN_TOTAL_GAP` of the total when the clock leaves the LP its
        # time (L busy 0.6, priority 0 2.3 % short: 796.0 -> -155.1 GPU-eq, gap 2.20 % -> 1.2 %).
        # Neither is asked for when the looser bound already proves the plan within ``enough``.
        floors = units
    elif not lowest_open and _tiers_within(units, tiers, CHAINED_GAP if enough is None else enough):
        # A tier above the lowest open: every plan at least as good lexicographically keeps
        # the tiers above it and that tier at least at the plan's values (the tier bounds'
        # floors), whatever it does below; the same second stage under those floors bounds the
        # secondary terms (fragmented M busy 0.6 seed 0: 320.2 -> -260.0 GPU-eq, gap 6.1 % ->
        # 3.5 %, 0.07 CPU-s; h31-bound in docs/benchmarks.md).
        floors = lexicographic_floors(units, tiers)
    else:
        return CheapBounds(tiers=tiers, secondary=secondary)
    at_plan = secondary_bound_at(pre, floors)
    secondary = secondary if at_plan is None else min(secondary, at_plan)
    if at_bounds and enough is None and not _within(unbounded, tiers, secondary, WHOLE_SECONDARY_GAP):
        # The finisher, every tier at its bound and the LP leaving the plan short: the second
        # stage with whole variables where the round is small enough (M busy 0.6 seed 2: 198.7
        # -> -58.6 GPU-eq for a plan at -66.7, gap 1.15 % -> 0.04 %, 0.87 CPU-s;
        # :func:`~gangopt.slots.secondary_bound_at`). Under the floors of an open tier it cost
        # greedy's plan there 3.2 CPU-s for 2.6 points, cpsat's at seed 0 0.6 for 12.5 GPU-eq.
        whole = secondary_bound_at(pre, floors, whole=True)
        secondary = secondary if whole is None else min(secondary, whole)
    return CheapBounds(tiers=tiers, secondary=secondary)


WHOLE_SECONDARY_GAP = 0.005
"""Gap (tiers and the secondary LP's bound) above which the finisher asks the secondary
terms' whole-variable model for a plan at every tier bound on a round whose LP it solved
(:func:`cheap_bounds_for`). At busy 0.75 the 1,024- and 4,096-node plans are proven within
0.1 % by the LP and never ask it."""


CHAINED_GAP = 0.05
"""Largest gap of the tiers alone (their bounds over the plan's value, relative to its total)
at which the finisher bounds the secondary terms under the tier bounds' floors when a tier
above the lowest is open (:func:`cheap_bounds_for`): one LP (0.07-0.09 CPU-s on the fragmented
1,024-node rounds at busy 0.6); a plan further from its tier bounds has a gap the secondary
terms do not decide. With ``enough``, the tiers must be within it instead."""


def _tiers_within(units: dict[int, int], tiers: dict[int, int], gap: float) -> bool:
    """Whether the plan's tiers (``units``) are within ``gap`` of their bounds (``tiers``),
    summed, relative to the plan's total tier value (objective units)."""
    short = sum(max(0, v - units.get(p, 0)) for p, v in tiers.items())
    return short <= gap * max(1, abs(sum(units.values())))


AT_PLAN_GAP = 0.01
"""Largest tier gap at which the finisher bounds the secondary terms at the plan's own tiers
(:func:`cheap_bounds_for` without ``enough``): one more LP, 0.7-1.0 CPU-s on the fragmented L
round, which the finisher's reserve does not count; a plan further from its tier bounds has a
gap the secondary terms do not decide (greedy at L, priority 0 8.3 % short: 5.6 % reported
with the growth bound, 4.6 % with this one, for 1.7 s of a loaded machine's 10 s limit)."""


AT_PLAN_TOTAL_GAP = 0.02
"""Largest gap of the tiers alone (their bounds over the plan's value, relative to its total
tier value) at which the finisher bounds the secondary terms at the plan's own tiers when only
the lowest tier is open but more than :data:`AT_PLAN_GAP` short of its bound, if the clock
leaves the LP its time (:func:`_at_plan_in_time`). On the fragmented 4,096-node round at busy
0.6 CP-SAT's plan has priority 0 at 38,057.7 of 38,938.3 (2.3 % short, 0.9 % of the total):
the growth bound's 796.0 GPU-eq became -155.1 for a plan at -446.1 (1.0 CPU-s), the
reported gap 2.20 % -> 1.2 % (docs/benchmarks.md, "h36-secondary"). Greedy's plan at L busy
0.75 (priority 0 8.3 % short) stays out: its gap is the tiers'."""

AT_PLAN_SECONDS_PER_GANG = 9e-5
"""CPU seconds per pending and candidate gang of :func:`~gangopt.slots.secondary_bound_at`
at a plan's tiers on a large round (LP without preferred columns): 1.0 CPU-s for 11,350 on
the fragmented 4,096-node busy-0.6 round (8.8e-5). No wider margin: the LP itself stops at the
slot models' deadline (:func:`gangopt.slots.allow_large`; a stopped LP gives no bound and the
growth bound stands), so an estimate that falls short costs time up to that deadline, not past
it. With 1.2e-4 the LP needed 1.50 s where the CLI found 1.36-1.46 s after the placer on that
round at load 1 (merged stop 36): refused in 6 of 6 runs, the gap reported 2.197 % for a plan
it proves within 1.212 % (docs/benchmarks.md, "Merged main after stop 36")."""


def _at_plan_in_time(pre: Prefiltered) -> bool:
    """Whether the secondary LP at the plan's tiers (:data:`AT_PLAN_SECONDS_PER_GANG`, times
    :func:`pace`) and the validator after it (:data:`VALIDATOR_SECONDS_PER_POD` per running pod)
    end before the deadline the slot models were given (:func:`gangopt.slots.allow_large`);
    always on a solve without one (``policy.deterministic``, a caller without a clock)."""
    deadline = pre.derived.get(slots.DEADLINE_KEY)
    if not isinstance(deadline, float):
        return True
    return time.perf_counter() + at_plan_seconds(pre) <= deadline


def at_plan_seconds(pre: Prefiltered) -> float:
    """Seconds :func:`_at_plan_in_time` asks before the slot models' deadline: the secondary LP
    at the plan's tiers (:data:`AT_PLAN_SECONDS_PER_GANG` per pending and candidate gang) and
    the validator after it (:data:`VALIDATOR_SECONDS_PER_POD` per running pod), times
    :func:`pace`. The slot placer keeps them when its plan may ask for that LP
    (:func:`gangopt.solvers.cpsat.placer.place_choices`): about 1.5 s on the fragmented
    4,096-node busy-0.6 round at pace 1."""
    gangs = len(pre.pending) + len(pre.candidates)
    return (AT_PLAN_SECONDS_PER_GANG * gangs + VALIDATOR_SECONDS_PER_POD * running_pod_count(pre.rnd)) * pace()


def _only_lowest_open(units: dict[int, int], tiers: dict[int, int]) -> bool:
    """Whether every tier but the lowest is at its bound (``units``: the plan's tier values,
    ``tiers``: the bounds, objective units): then the tiers of every plan at least as good
    lexicographically are at least ``units``, the premise of
    :func:`~gangopt.slots.secondary_bound_at`."""
    prios = set(units) | set(tiers)
    if not prios:
        return False
    lowest = min(prios)
    return all(p in tiers and units.get(p, 0) >= tiers[p] for p in prios if p != lowest)


def _within(unbounded: Score, tiers: dict[int, int], secondary: int, enough: float | None) -> bool:
    """Whether a plan scoring ``unbounded`` is within ``enough`` (a relative gap; None: never)
    of the bounds ``tiers`` and ``secondary`` (objective units) on its total value: then a
    caller asking only that (:func:`cheap_bounds_for`'s ``enough``) needs no tighter bound.
    On the Philly 6-node slice the secondary LP ran in 59 of 113 rounds, 8 % of gangopt's
    replay CPU, and the looser bound had proven the plan within the 1 % limit in all 59."""
    if enough is None:
        return False
    gap = plan_gap(with_bounds(unbounded, {p: v / SCALE for p, v in tiers.items()}, secondary / SCALE))
    return gap is not None and gap <= enough


def combined_bounds(proven: ProvenBounds, cheap: CheapBounds) -> tuple[dict[int, float], float]:
    """The tighter of the solver's proven bounds and the cheap ones, part by part (both hold)."""
    combined = {p: min(v, proven.tiers.get(p, v)) for p, v in cheap.tiers_in_units().items()}
    cheap_secondary = cheap.secondary / SCALE
    secondary = cheap_secondary if proven.secondary is None else min(proven.secondary, cheap_secondary)
    return combined, secondary


def plan_gap(s: Score) -> float | None:
    """Relative gap of the total value (tiers plus secondary, all in GPU-equivalents) to the
    sum of the bounds, over the total value. The order stays lexicographic; this is the one
    number that says how much value any plan could add. None when the secondary is unbounded."""
    if s.secondary_bound is None:
        return None
    value = sum(t.value for t in s.tiers) + s.secondary
    bound = sum(t.bound for t in s.tiers) + s.secondary_bound
    return max(0.0, bound - value) / max(1.0 / SCALE, abs(value))


def tier_gap(tier: TierScore) -> float:
    """One tier's relative gap to its bound."""
    return max(0.0, tier.bound - tier.value) / max(1.0 / SCALE, abs(tier.value))


def tier_values(s: Score) -> dict[int, float]:
    """Each tier's value by priority."""
    return {t.priority: t.value for t in s.tiers}
