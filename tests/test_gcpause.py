"""The collector's thresholds inside and after :func:`gangopt.gcpause.fewer_collections`."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from gangopt.gcpause import THRESHOLD, fewer_collections
from gangopt.result import Result
from gangopt.schema import Round
from gangopt.solve import run
from gangopt.solvers import get_solver
from tests.builders import cluster, make_round, pending


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_raised_inside_and_restored_after_even_on_error() -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), fewer_collections():
        assert gc.get_threshold() == (THRESHOLD, 10, 10)
        raise RuntimeError
    assert gc.get_threshold() == (700, 10, 10)


def test_a_callers_higher_threshold_and_a_disabled_one_are_kept() -> None:
    gc.set_threshold(THRESHOLD * 2, 5, 5)
    with fewer_collections():
        assert gc.get_threshold() == (THRESHOLD * 2, 5, 5)
    gc.set_threshold(0, 10, 10)  # automatic collection off: not switched back on
    with fewer_collections():
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


@pytest.mark.parametrize("first_out", ["a", "b"])
def test_overlapping_threads_restore_the_callers_thresholds_when_the_last_leaves(first_out: str) -> None:
    """Thread A enters, B enters, one leaves (the other still inside: still raised), the other
    leaves (restored), in both orders. With a plain save-and-restore per block, A leaving
    first restored 700 under B, and B then left the raised threshold in force for good."""
    gc.set_threshold(700, 10, 10)
    entered = {name: threading.Event() for name in "ab"}
    leave = {name: threading.Event() for name in "ab"}
    left = {name: threading.Event() for name in "ab"}

    def block(name: str) -> None:
        with fewer_collections():
            entered[name].set()
            leave[name].wait(5)
        left[name].set()

    threads = {name: threading.Thread(target=block, args=(name,)) for name in "ab"}
    threads["a"].start()
    entered["a"].wait(5)
    threads["b"].start()
    entered["b"].wait(5)
    leave[first_out].set()
    left[first_out].wait(5)
    one_inside = gc.get_threshold()
    leave["b" if first_out == "a" else "a"].set()
    for t in threads.values():
        t.join(5)
    assert (one_inside, gc.get_threshold()) == ((THRESHOLD, 10, 10), (700, 10, 10))


def test_a_library_solve_eases_the_collector_and_restores_it() -> None:
    """``gangopt.solve`` (not only the CLI) decides with the raised threshold and gives the
    caller's back."""
    gc.set_threshold(700, 10, 10)
    spec = get_solver("greedy")
    seen: list[tuple[int, int, int]] = []

    def decide(rnd: Round) -> Result:
        seen.append(gc.get_threshold())
        return spec.make(None)(rnd)

    rnd = make_round(cluster(4), pending=[pending("a")])
    plan = run(rnd, spec, decide)
    assert seen == [(THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    assert plan.admitted == ["a"]
