"""The finisher's clock for the waiting reasons (gangopt/annotate.py)."""

from __future__ import annotations

import os
import threading
import time

import pytest

import gangopt
import gangopt.beside
from gangopt import annotate as finisher
from gangopt import reasons as reasons_module
from gangopt.prefilter import prefilter
from gangopt.reasons import UNCHECKED, Check, waiting_reasons
from gangopt.result import Result
from gangopt.schema import Status
from gangopt.validation import validate
from tests.test_reasons import _three_waiting


def _unchecked(deadline: float) -> int:
    rnd, plan = _three_waiting()
    done = finisher.annotate(rnd, Result(plan=plan, stats=plan.stats), deadline=deadline, lp_bounds=False)
    return sum(1 for w in done.waiting if w.reasons[-1] == UNCHECKED)


def test_the_reasons_leave_the_validator_its_own_cost_not_the_search_clocks_reserve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The reasons stop :func:`~gangopt.annotate.validator_seconds` before the deadline. At XL
    they stopped the search clock's validation reserve before it (4.64 s for a 0.59 s
    validation) and no waiting gang was ever checked: a reserve of an hour here must not cut
    them, a validator of an hour must."""
    monkeypatch.setattr(finisher, "VALIDATION_SECONDS_PER_POD", 3600.0)
    assert _unchecked(time.perf_counter() + 60.0) == 0
    monkeypatch.setattr(finisher, "VALIDATOR_SECONDS_PER_POD", 3600.0)
    assert _unchecked(time.perf_counter() + 60.0) == 3


def test_the_plans_view_is_not_built_when_it_would_end_past_the_reasons_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The view (:data:`~gangopt.annotate.REASONS_VIEW_SECONDS_PER_POD`) ending past the reasons'
    deadline: every waiting gang unchecked, none half done."""
    monkeypatch.setattr(finisher, "REASONS_VIEW_SECONDS_PER_POD", 3600.0)
    assert _unchecked(time.perf_counter() + 60.0) == 3


def _loop_seconds_per_turn() -> float:
    """The least of :data:`~gangopt.annotate.PACE_SAMPLES` runs of the pace loop, per turn, by the
    real CPU clock."""
    best = float("inf")
    for _ in range(finisher.PACE_SAMPLES):
        began = time.process_time()
        exec(finisher.PACE_LOOP, {"n": finisher.PACE_TURNS})
        best = min(best, time.process_time() - began)
    return best / finisher.PACE_TURNS


def test_the_pace_reads_a_slower_cpu_and_is_kept_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    """With :func:`time.process_time` running 10 times faster (a host whose CPU takes 10 times
    the CPU time per unit of work) :func:`~gangopt.annotate.pace` reads about 10 times the
    loop's real pace against the reference (half of it at least, for noise), never below 1;
    the value is kept :data:`~gangopt.annotate.PACE_SECONDS` (the clock back to normal reads
    the kept value) and measured anew after."""
    real = time.process_time
    monkeypatch.setattr(finisher, "_pace", None)
    at_rest = finisher.pace()
    assert at_rest >= 1.0
    per_turn = _loop_seconds_per_turn()
    cpu = real()
    monkeypatch.setattr(time, "process_time", lambda: cpu + 10 * (real() - cpu))
    monkeypatch.setattr(finisher, "_pace", None)
    slowed = finisher.pace()
    assert slowed >= max(1.0, 0.5 * 10 * per_turn / finisher.PACE_REFERENCE_SECONDS_PER_TURN)
    assert slowed > at_rest
    monkeypatch.setattr(time, "process_time", real)
    assert finisher.pace() == slowed  # kept
    later = time.monotonic() + finisher.PACE_SECONDS + 1
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert finisher.pace() < slowed  # measured again at the real pace


def test_the_slowdown_is_the_pace_times_wall_over_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reserve scaled by the load is scaled by the host's pace too, in one place: a kept
    pace of 3 makes :func:`~gangopt.annotate.slowdown` 3 before any CPU time has passed, and 3
    times wall/CPU after (the wall clock running twice as fast as the CPU one: 6)."""
    monkeypatch.setattr(finisher, "_pace", (3.0, time.monotonic()))
    assert finisher.slowdown(time.perf_counter(), time.process_time()) == 3.0
    origin, cpu, real = time.perf_counter(), time.process_time(), time.process_time
    monkeypatch.setattr(time, "perf_counter", lambda: origin + 2 * (real() - cpu))
    exec(finisher.PACE_LOOP, {"n": 2_000_000})  # some CPU time past ``least``
    assert finisher.slowdown(origin, cpu, least=0.01) == pytest.approx(6.0, rel=0.05)


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "koordinator_like"])
def test_a_deterministic_solve_never_measures_the_pace(solver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``policy.deterministic`` no reserve reads the clock: the pace is never measured (a
    pace that raises is never called) by CP-SAT, greedy or a peer; clocked, it is (the same
    solve raises)."""
    import gangopt
    from tests.builders import fragmented_round

    rnd = fragmented_round(64, 20, running_mix="jobs")
    policy = rnd.policy.model_copy(update={"deterministic": True})

    def measured() -> float:
        raise AssertionError("pace measured under policy.deterministic")

    monkeypatch.setattr(finisher, "pace", measured)
    plan = gangopt.solve(rnd, policy, solver=solver)
    assert plan.admitted
    assert gangopt.validate(rnd, plan) == []
    monkeypatch.undo()
    with pytest.raises(AssertionError, match="pace measured"):
        monkeypatch.setattr(finisher, "pace", measured)
        gangopt.solve(rnd, solver=solver)  # clocked: the pace is read


def _late_finish(monkeypatch: pytest.MonkeyPatch, deterministic: bool = False) -> tuple[object, object]:
    """A plan that starts nothing, annotated with no prefiltered round 100 s past its deadline
    (the prefilter raising if called), and the round."""
    from gangopt.solvers.greedy.engine import unstarted
    from tests.builders import fragmented_round

    rnd = fragmented_round(64, 20, running_mix="jobs")
    rnd = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"deterministic": deterministic})})
    plan = unstarted(rnd)

    def refused(*_: object) -> None:
        raise AssertionError("prefiltered past the limit")

    if not deterministic:
        monkeypatch.setattr(finisher, "prefilter", refused)
    done = finisher.annotate(rnd, Result(plan=plan), deadline=time.perf_counter() - 100.0)
    return rnd, done


def test_bounds_the_clock_cannot_fit_are_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """A finisher past its limit (and the 10 %) with no prefiltered round and no bounds kept does
    not prefilter nor compute the cheap bounds (the prefilter raising here is never called):
    the tier ceilings of every pending gang bound the plan (each at least its value), no
    secondary bound, no gap, and the message says so; the plan stays valid. At XL with a 3 s
    limit this is 0.44 CPU-s of prefilter and 0.27-0.33 of bounds not spent."""
    import gangopt
    from gangopt.bounds import ceilings_of
    from gangopt.objective import SCALE

    rnd, done = _late_finish(monkeypatch)
    assert "bounds are the tier ceilings alone, every pending gang's (no prefilter)" in done.message
    ceilings = ceilings_of(rnd, range(len(rnd.pending)))
    assert {t.priority: t.bound for t in done.score.tiers} == {p: v / SCALE for p, v in ceilings.items()}
    assert all(t.bound >= t.value for t in done.score.tiers)
    assert any(t.bound > t.value for t in done.score.tiers)  # the gangs it did not start
    assert done.score.secondary_bound is None and done.gap is None
    assert all(w.reasons[-1] == UNCHECKED for w in done.waiting)
    assert gangopt.validate(rnd, done) == []


def test_a_deterministic_finisher_always_computes_its_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``policy.deterministic`` the clock cuts no bound: the same late finish prefilters
    and reports the cheap bounds with a secondary bound and a gap."""
    import gangopt

    rnd, done = _late_finish(monkeypatch, deterministic=True)
    assert "tier ceilings alone" not in done.message
    assert done.score.secondary_bound is not None and done.gap is not None
    assert gangopt.validate(rnd, done) == []


def test_a_solve_whose_pass_is_hopeless_prefilters_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """CP-SAT with a 10 ms limit: its first pass would stop at its first ask whatever the
    prefilter did, so neither runs (``prefilter_seconds`` 0); the plan starts nothing, is
    bounded by the tier ceilings alone, says so, and is valid. On time, the same round is
    prefiltered and bounded whole. The pass's setup is priced as a large round's (no pass
    under :data:`~gangopt.annotate.PASS_FLOOR_SECONDS` is ever stopped)."""
    import gangopt
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    monkeypatch.setattr(finisher, "SETUP_SECONDS_PER_POD", 1e-3)
    late = gangopt.solve(rnd, rnd.policy.model_copy(update={"time_limit": 0.01}))
    assert late.stats.prefilter_seconds == 0.0 and not late.admitted
    assert "no time left for anything else" in late.message
    assert "tier ceilings alone, every pending gang's (no prefilter)" in late.message
    assert late.gap is None
    assert gangopt.validate(rnd, late) == []
    on_time = gangopt.solve(rnd)
    assert on_time.stats.prefilter_seconds > 0 and on_time.gap is not None and on_time.admitted
    assert gangopt.validate(rnd, on_time) == []


def test_a_late_finisher_keeps_the_bounds_it_already_has() -> None:
    """Past the limit with a prefiltered round: bounds already kept on it (a candidate asked for
    them) cost nothing more and are reported (a gap); not kept, the tier ceilings of the gangs
    the prefilter kept bound the plan alone."""
    from gangopt.bounds import tier_ceilings
    from gangopt.objective import SCALE, score
    from gangopt.prefilter import prefilter
    from gangopt.solvers.greedy.engine import unstarted
    from gangopt.validation import validate
    from tests.builders import fragmented_round

    rnd = fragmented_round(64, 20, running_mix="jobs")
    plan = unstarted(rnd)
    late = time.perf_counter() - 100.0
    pre = prefilter(rnd)
    bare = finisher.annotate(rnd, Result(plan=plan, pre=pre), deadline=late)
    assert "tier ceilings alone, the kept gangs'" in bare.message and bare.gap is None
    assert {t.priority: t.bound for t in bare.score.tiers} == {p: v / SCALE for p, v in tier_ceilings(pre).items()}
    kept = prefilter(rnd)
    finisher.cheap_bounds_for(kept, score(rnd, plan), lp=False)
    done = finisher.annotate(rnd, Result(plan=plan, pre=kept), deadline=late)
    assert "tier ceilings alone" not in done.message
    assert done.gap is not None and done.score.secondary_bound is not None
    assert validate(rnd, bare) == [] and validate(rnd, done) == []


def test_a_short_clock_goes_to_the_bounds_before_the_waiting_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13 under load: what makes the reported gap true comes first. The finisher computes
    the cheap bounds, then the waiting reasons with what is left: with time for the bounds and
    none for the reasons (their view would end past the deadline), the plan keeps a secondary
    bound and a gap, and every waiting gang says it was not checked, which the message counts."""
    import gangopt
    from gangopt.solvers.greedy import greedy
    from tests.builders import fragmented_round

    rnd = fragmented_round(64, 20, running_mix="jobs")
    plan = greedy(rnd)
    calls: list[str] = []
    bounds, reasons_of = finisher.cheap_bounds_for, finisher.waiting_reasons

    def bounds_logged(*args: object, **kwargs: object) -> object:
        calls.append("bounds")
        return bounds(*args, **kwargs)  # type: ignore[arg-type]

    def reasons_logged(*args: object, **kwargs: object) -> object:
        calls.append("reasons")
        return reasons_of(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(finisher, "cheap_bounds_for", bounds_logged)
    monkeypatch.setattr(finisher, "waiting_reasons", reasons_logged)
    monkeypatch.setattr(finisher, "REASONS_VIEW_SECONDS_PER_POD", 3600.0)
    done = finisher.annotate(rnd, Result(plan=plan), deadline=time.perf_counter() + 30.0, lp_bounds=False)
    assert calls and calls[-1] == "reasons" and "reasons" not in calls[:-1]
    assert done.gap is not None and done.score.secondary_bound is not None
    assert done.waiting and all(w.reasons[-1] == UNCHECKED for w in done.waiting)
    assert f"reasons of {len(done.waiting)} of {len(done.waiting)} waiting gangs not checked" in done.message
    assert gangopt.validate(rnd, done) == []


# ----------------------------------------------------------------------------- reasons beside


needs_second_core = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or not hasattr(os, "fork"), reason="no second CPU or no fork here"
)


@pytest.fixture
def reasons_forked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """:func:`~gangopt.annotate.reasons_beside` forks for any round (no least size), the test
    process counted as single-threaded on an idle machine (earlier tests may leave a thread, and
    other jobs may run); the children it forked, recorded."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(gangopt.beside, "others_running", lambda: 0)
    monkeypatch.setattr(finisher, "REASONS_BESIDE_LEAST_SECONDS", 0.0)
    forked: list[int] = []
    fork = finisher.beside

    def recorded(work, niceness=0):  # type: ignore[no-untyped-def]
        child = fork(work, niceness)
        if child is not None:
            forked.append(child.pid)
        return child

    monkeypatch.setattr(finisher, "beside", recorded)
    return forked


def _no_checks_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process can no longer check a waiting gang (a child forked before keeps its own copy)."""

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("the finisher checked the waiting gangs itself")

    monkeypatch.setattr(reasons_module, "waiting_checks", refused)


@needs_second_core
def test_the_finisher_takes_the_reasons_a_child_checked_beside_the_solve(
    reasons_forked: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan that decides as the one the child checked (another solver, status and message:
    CP-SAT returning its first greedy plan) gets the child's reasons, the same as this process's
    own, and this process checks no gang (it cannot, here); the child is reaped."""
    rnd, plan = _three_waiting()
    final = plan.model_copy(update={"solver": "cpsat", "status": Status.FEASIBLE, "message": "greedy plan returned"})
    far = time.perf_counter() + 60.0
    own = finisher.annotate(rnd, Result(plan=final, stats=plan.stats), deadline=far, lp_bounds=False).waiting
    pre = prefilter(rnd)
    finisher.reasons_beside(pre, plan, far, 1.0)
    assert len(reasons_forked) == 1
    _no_checks_here(monkeypatch)
    done = finisher.annotate(rnd, Result(plan=final, stats=plan.stats, pre=pre), deadline=far, lp_bounds=False)
    assert done.waiting == own
    assert all(w.reasons[-1] != UNCHECKED for w in done.waiting)
    assert validate(rnd, done) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(reasons_forked[0], os.WNOHANG)


@needs_second_core
def test_a_plan_that_decides_otherwise_is_checked_here_and_the_child_ended(reasons_forked: list[int]) -> None:
    """The child checked greedy's plan; the plan returned starts nothing (another candidate won):
    its reasons are this process's own of that plan (every gang waits, none behind a started
    one), not the child's, and the child is ended and reaped."""
    rnd, plan = _three_waiting()
    other = plan.model_copy(update={"admitted": [], "placements": [], "preemptions": []})
    far = time.perf_counter() + 60.0
    pre = prefilter(rnd)
    finisher.reasons_beside(pre, plan, far, 1.0)
    assert len(reasons_forked) == 1
    done = finisher.annotate(rnd, Result(plan=other, stats=plan.stats, pre=pre), deadline=far, lp_bounds=False)
    assert done.waiting == waiting_reasons(rnd, other, deadline=far)
    assert len(done.waiting) == len(rnd.pending) > len(plan.waiting)
    assert validate(rnd, done) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(reasons_forked[0], os.WNOHANG)


def test_checks_made_for_another_plan_name_this_plans_solver_in_the_policy_reason() -> None:
    """The policy check's text names the plan's solver and status: checks made on greedy's plan
    (the child's) say what CP-SAT's plan, deciding the same, did when CP-SAT's plan is explained."""
    rnd, plan = _three_waiting()
    gang = plan.waiting[0].gang
    checked = {gang: [Check("policy", False, "the greedy plan (feasible) did not start it")]}
    final = plan.model_copy(update={"solver": "cpsat", "status": Status.FEASIBLE})
    (mine,) = [w for w in waiting_reasons(rnd, final, checked=checked) if w.gang == gang]
    assert mine.code == "policy"
    assert mine.reasons == ["fits beside this plan (room, quota, group); the cpsat plan (feasible) did not start it"]


@needs_second_core
@pytest.mark.parametrize("annotate", [True, False])
def test_cpsat_checks_its_first_plan_beside_and_the_plan_is_the_same_without(
    reasons_forked: list[int], monkeypatch: pytest.MonkeyPatch, annotate: bool
) -> None:
    """CP-SAT forks the reasons of its first greedy plan and the finisher takes the child's checks;
    the plan returned (reasons included, under ``policy.deterministic`` so that nothing else may
    differ) is the one a solve with no child returns, it passes the validator, and no child is
    left behind, collected or not (``annotate=False``: the door ends it)."""
    rnd = _three_waiting()[0]
    rnd = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"deterministic": True})})
    taken: list[object] = []
    checked_beside = finisher._checked_beside

    def recorded(*args: object) -> object:
        got = checked_beside(*args)  # type: ignore[arg-type]
        taken.append(got)
        return got

    monkeypatch.setattr(finisher, "_checked_beside", recorded)
    with_child = gangopt.solve(rnd, annotate=annotate)
    assert len(reasons_forked) == 1
    assert [got is not None for got in taken] == ([True] if annotate else [])  # the child's checks taken
    with pytest.raises(ChildProcessError):
        os.waitpid(reasons_forked[0], os.WNOHANG)
    monkeypatch.setattr(gangopt.beside, "others_running", lambda: 64)  # no idle second core: no child
    alone = gangopt.solve(rnd, annotate=annotate)
    assert len(reasons_forked) == 1
    assert with_child.model_dump(exclude={"stats"}) == alone.model_dump(exclude={"stats"})
    assert validate(rnd, with_child) == []


@needs_second_core
def test_a_solver_that_raises_after_forking_the_reasons_leaves_no_child(
    reasons_forked: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CP-SAT starts the reasons' child on its first plan, then fails: the door passes the error
    on and ends and reaps the child (its result, which holds the child, never came back), so a
    long-lived caller keeps no process running to its deadline nor a zombie after it."""
    import gangopt.solvers.cpsat as cpsat

    rnd = _three_waiting()[0]
    started = cpsat.reasons_beside

    def then_fails(*args: object) -> None:
        started(*args)  # type: ignore[arg-type]
        raise RuntimeError("a solver bug after the fork")

    monkeypatch.setattr(cpsat, "reasons_beside", then_fails)
    with pytest.raises(RuntimeError, match="a solver bug after the fork"):
        gangopt.solve(rnd)
    assert len(reasons_forked) == 1
    with pytest.raises(ChildProcessError):
        os.waitpid(reasons_forked[0], os.WNOHANG)
    assert finisher._UNCOLLECTED == {}


def _slow_child(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The child of :func:`~gangopt.annotate.reasons_beside` sleeps ``seconds`` before its checks."""
    checks = finisher.waiting_checks

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(seconds)
        return checks(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(finisher, "waiting_checks", slow)


@needs_second_core
@pytest.mark.parametrize("starved", [False, True])
def test_the_finisher_waits_for_a_child_only_when_its_work_left_ends_in_time(
    reasons_forked: list[int], monkeypatch: pytest.MonkeyPatch, starved: bool
) -> None:
    """A child still at work when the finisher needs its reasons: expected to end by the reasons'
    deadline (the CPU it has left), the finisher waits and takes them (it can check nothing
    itself here); expected to need an hour more (a child at low priority on a busy machine has
    had next to no CPU), the finisher ends it at once and checks the plan itself (the child
    sleeps a minute: the test would take that long if it waited)."""
    rnd, plan = _three_waiting()
    far = time.perf_counter() + 60.0
    own = finisher.annotate(rnd, Result(plan=plan, stats=plan.stats), deadline=far, lp_bounds=False).waiting
    _slow_child(monkeypatch, 60.0 if starved else 0.5)
    if starved:
        monkeypatch.setattr(finisher, "REASONS_BESIDE_SECONDS_PER_POD", 3600.0)
    pre = prefilter(rnd)
    finisher.reasons_beside(pre, plan, far, 1.0)
    assert len(reasons_forked) == 1
    if not starved:
        _no_checks_here(monkeypatch)
    began = time.perf_counter()
    done = finisher.annotate(rnd, Result(plan=plan, stats=plan.stats, pre=pre), deadline=far, lp_bounds=False)
    assert done.waiting == own
    assert validate(rnd, done) == []
    assert time.perf_counter() - began < 30.0
    with pytest.raises(ChildProcessError):
        os.waitpid(reasons_forked[0], os.WNOHANG)
