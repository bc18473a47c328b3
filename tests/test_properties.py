"""Property tests: random rounds through the whole pipeline, every plan through the validator."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import gangopt
from gangopt.objective import lexicographic_key, score
from gangopt.schema import Round, Status
from gangopt.solvers.greedy.engine import greedy
from tests.strategies import examples, rounds

PROFILE = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROFILE
@given(rounds())
def test_cpsat_plan_is_valid(rnd: Round) -> None:
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status in (Status.OPTIMAL, Status.FEASIBLE)  # in particular, not FALLBACK


@PROFILE
@given(rounds())
def test_greedy_plan_is_valid(rnd: Round) -> None:
    plan = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, plan) == []


@PROFILE
@given(rounds())
def test_cpsat_never_worse_than_greedy(rnd: Round) -> None:
    optimal = gangopt.solve(rnd)
    assert optimal.status != Status.FALLBACK
    baseline = greedy(rnd)
    assert lexicographic_key(optimal.score) >= lexicographic_key(score(rnd, baseline))


@settings(max_examples=examples(25), deadline=None)
@given(rounds())
def test_same_input_and_seed_give_the_same_plan(rnd: Round) -> None:
    first = gangopt.solve(rnd)
    second = gangopt.solve(rnd)
    assert first.status != Status.FALLBACK
    assert first.model_dump(exclude={"stats"}) == second.model_dump(exclude={"stats"})


@settings(max_examples=examples(40), deadline=None)
@given(rounds())
def test_every_pending_gang_is_admitted_or_explained(rnd: Round) -> None:
    plan = gangopt.solve(rnd)
    assert plan.status != Status.FALLBACK
    waiting = {w.gang for w in plan.waiting}
    assert waiting.isdisjoint(plan.admitted)
    assert waiting | set(plan.admitted) == {g.name for g in rnd.pending}
    assert all(w.reasons and all(w.reasons) for w in plan.waiting)
