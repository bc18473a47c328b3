"""The validator's checks of the decisions in a child beside the finisher (gangopt/beside.py,
the door's step 5): the whole validator still runs on the plan returned, the plan is the same
with the child or without, and a child that fails or dies costs no check."""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Iterator

import pytest

import gangopt
import gangopt.beside
from gangopt.annotate import BESIDE_SLOWDOWN, reasons_deadline, validator_seconds, waiting_check_seconds
from gangopt.beside import beside, second_core
from gangopt.schema import Plan, Round, Status, Waiting
from gangopt.solve import run
from gangopt.solvers import SOLVERS
from gangopt.validation import validate, validate_decisions, validate_waiting
from tests.builders import cluster, make_round, pending, running
from tests.test_solve import breaking, contended

needs_second_core = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or not hasattr(os, "fork"), reason="no second CPU or no fork here"
)

door = __import__("sys").modules["gangopt.solve"]  # the module (gangopt.solve is also the function)


@pytest.fixture
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test process counted as single-threaded, on a machine running nothing else: earlier
    tests (the service's test client) may leave an idle thread behind, and other jobs may run,
    which would keep every child from forking here."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(gangopt.beside, "others_running", lambda: 0)


@pytest.fixture
def children(one_thread: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Every validation beside the door forks for any round (no least size) and on a loaded
    machine too, recorded: the answers the door collected from its children."""
    answers: list[object] = []
    monkeypatch.setattr(door, "BESIDE_LEAST_SECONDS", 0.0)
    monkeypatch.setattr(door, "BESIDE_SLOWDOWN", float("inf"))
    fork = door.beside

    def recorded(work):  # type: ignore[no-untyped-def]
        child = fork(work)
        if child is not None:
            result = child.result

            def answer(timeout=None):  # type: ignore[no-untyped-def]
                got = result(timeout)
                answers.append(got)
                return got

            child.result = answer  # type: ignore[method-assign]
        return child

    monkeypatch.setattr(door, "beside", recorded)
    yield answers


def _broken_waiting(rnd: Round, plan: Plan) -> list[Plan]:
    """``plan`` with its waiting list broken four ways: a gang dropped, one listed twice, a
    running gang listed, a reason left empty."""
    w = plan.waiting
    return [
        plan.model_copy(update={"waiting": w[1:]}),
        plan.model_copy(update={"waiting": [*w, w[0]]}),
        plan.model_copy(update={"waiting": [*w, Waiting(gang=rnd.running[0].name, code=w[0].code, reasons=["r"])]}),
        plan.model_copy(update={"waiting": [Waiting(gang=w[0].gang, code=w[0].code, reasons=[" "]), *w[1:]]}),
    ]


def test_the_validator_is_its_checks_of_the_decisions_then_of_the_waiting_list() -> None:
    """What the waiting list breaks only the second part finds; what the decisions break the
    first; and the validator is both, in that order."""
    rnd = contended()
    plan = gangopt.solve(rnd, solver="greedy")
    assert plan.waiting and validate(rnd, plan) == []
    for broken in _broken_waiting(rnd, plan):
        assert validate_decisions(rnd, broken) == []
        found = validate_waiting(rnd, broken)
        assert found and {v.rule for v in found} == {"consistency"}
        assert validate(rnd, broken) == found
    _, decide = breaking(SOLVERS["greedy"])
    overfull = decide(rnd).plan.model_copy(update={"waiting": plan.waiting[1:]})
    first, second = validate_decisions(rnd, overfull), validate_waiting(rnd, overfull)
    assert first and second and validate(rnd, overfull) == first + second
    twice = plan.model_copy(update={"admitted": [*plan.admitted, plan.admitted[0]]})
    assert [v.message for v in validate_decisions(rnd, twice)] == [f"admitted lists gang {plan.admitted[0]} 2 times"]


@needs_second_core
@pytest.mark.usefixtures("one_thread")
def test_a_child_beside_answers_and_its_cpu_time_is_counted() -> None:
    before = _children_cpu()

    def burn() -> int:
        end = time.process_time() + 0.2
        n = 0
        while time.process_time() < end:
            n += 1
        return 42

    child = beside(burn)
    assert child is not None
    assert child.result() == 42
    assert _children_cpu() - before >= 0.15  # reaped: counted


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@needs_second_core
@pytest.mark.usefixtures("one_thread")
def test_a_child_that_fails_or_dies_answers_none() -> None:
    def fail() -> int:
        raise ValueError("no")

    def die() -> int:
        os._exit(3)

    for work in (fail, die):
        child = beside(work)
        assert child is not None
        assert child.result() is None


@needs_second_core
@pytest.mark.usefixtures("one_thread")
def test_a_child_that_does_not_answer_in_time_is_killed() -> None:
    child = beside(lambda: time.sleep(60))
    assert child is not None
    began = time.perf_counter()
    assert child.result(timeout=0.2) is None
    assert time.perf_counter() - began < 30  # not the child's 60 s
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # killed and reaped


@needs_second_core
@pytest.mark.usefixtures("one_thread")
def test_a_child_not_asked_is_ended_and_reaped() -> None:
    child = beside(lambda: time.sleep(60))
    assert child is not None
    child.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped already


def test_no_child_beside_other_running_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second CPU in the affinity that another process runs on is no free core."""
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    monkeypatch.setattr(gangopt.beside, "others_running", lambda: len(os.sched_getaffinity(0)) - 1)
    assert beside(lambda: 1) is None


def test_no_child_beside_a_second_thread() -> None:
    """The service solves in threads: a fork would copy only the calling one."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not second_core()
        assert beside(lambda: 1) is None
    finally:
        stop.set()
        other.join()


def _decisions(plan: Plan) -> tuple[object, ...]:
    return (plan.admitted, plan.placements, plan.preemptions, plan.resizes, plan.waiting, plan.status, plan.message)


@needs_second_core
@pytest.mark.parametrize("name", ["cpsat", "greedy"])
def test_the_same_plan_with_the_child_and_without(
    monkeypatch: pytest.MonkeyPatch, children: list[object], name: str
) -> None:
    rnd = contended()
    with_child = gangopt.solve(rnd, solver=name)
    assert children == [[]]  # the child checked the decisions and found nothing
    monkeypatch.setattr(door, "beside", lambda work: None)
    assert _decisions(gangopt.solve(rnd, solver=name)) == _decisions(with_child)
    assert validate(rnd, with_child) == []


@needs_second_core
def test_a_broken_plan_found_by_the_child_falls_back(children: list[object]) -> None:
    rnd = contended()
    spec, decide = breaking(SOLVERS["cpsat"])
    plan = run(rnd, spec, decide)
    assert children and children[0]  # the child's violations reached the door
    assert plan.status == Status.FALLBACK
    assert "capacity" in plan.message or "all_or_nothing" in plan.message
    assert validate(rnd, plan) == []


@needs_second_core
def test_a_child_that_dies_costs_no_check(monkeypatch: pytest.MonkeyPatch, children: list[object]) -> None:
    """The child dies before its answer: the door validates in-process and still finds the break."""

    def die(*args: object) -> None:
        os._exit(1)

    monkeypatch.setattr(door, "validate_decisions", die)
    rnd = contended()
    spec, decide = breaking(SOLVERS["cpsat"])
    plan = run(rnd, spec, decide)
    assert children == [None]
    assert plan.status == Status.FALLBACK
    assert "capacity" in plan.message or "all_or_nothing" in plan.message
    assert validate(rnd, plan) == []


def test_the_reasons_stop_by_the_childs_end_unless_the_machine_is_loaded() -> None:
    rnd = make_round(cluster(2), running=[running("low", ["n0"], gpu=4)], pending=[pending("a", gpu=8, priority=5)])
    plan = gangopt.solve(rnd, solver="greedy")
    assert validate(rnd, plan) == []
    deadline, reserve, tail = 100.0, validator_seconds(rnd, plan), waiting_check_seconds(rnd)
    assert reasons_deadline(rnd, plan, deadline, 1.0, None) == deadline - reserve  # no child: the old cut
    assert reasons_deadline(rnd, plan, deadline, 1.0, 50.0) == deadline - tail  # the child ends first
    assert reasons_deadline(rnd, plan, deadline, 1.0, 120.0) == 120.0  # the solve waits for it anyway
    loaded = BESIDE_SLOWDOWN + 0.1
    assert reasons_deadline(rnd, plan, deadline, loaded, 50.0) == deadline - reserve * loaded


@needs_second_core
def test_a_child_that_hangs_costs_no_check(monkeypatch: pytest.MonkeyPatch, children: list[object]) -> None:
    """The child never answers: past its patience the door kills it and validates in-process."""

    def hang(*args: object) -> None:
        time.sleep(60)

    monkeypatch.setattr(door, "validate_decisions", hang)
    monkeypatch.setattr(door, "BESIDE_PATIENCE_SECONDS", 0.2)
    rnd = contended()
    spec, decide = breaking(SOLVERS["cpsat"])
    began = time.perf_counter()
    plan = run(rnd, spec, decide)
    assert time.perf_counter() - began < 30  # not the child's 60 s
    assert children == [None]
    assert plan.status == Status.FALLBACK
    assert "capacity" in plan.message or "all_or_nothing" in plan.message


@needs_second_core
def test_no_child_without_the_finisher_and_the_break_still_found(children: list[object]) -> None:
    """With ``annotate=False`` (a replay's rounds) nothing would run beside the child: the door
    validates in-process, and a broken plan still falls back naming the rule."""
    rnd = contended()
    spec, decide = breaking(SOLVERS["cpsat"])
    plan = run(rnd, spec, decide, annotate=False)
    assert children == []  # no child was asked for its answer
    assert plan.status == Status.FALLBACK
    assert "capacity" in plan.message or "all_or_nothing" in plan.message
    assert validate(rnd, plan) == []
    # and with the finisher, the same door forks
    run(rnd, spec, decide)
    assert children and children[0]


@needs_second_core
def test_a_child_of_low_priority_runs_at_that_priority(one_thread: None) -> None:
    """``niceness``: the child runs at this process's niceness plus it (at most 19); its CPU time
    is readable while it runs, not once it is reaped."""
    child = beside(lambda: (time.sleep(0.3), os.nice(0))[1], niceness=19)
    assert child is not None
    used = child.cpu_seconds()
    assert used is not None and used >= 0.0
    assert child.result(timeout=30.0) == min(19, os.nice(0) + 19)
    assert child.cpu_seconds() is None
