"""The node-class LP's choice (gangopt.class_choice), placed by the slot placer.

Its plans must pass the independent validator and repeat exactly (random fragmented rounds);
through the door CP-SAT's plan stays at least greedy's when only the class bounds run; the
chosen gangs the seed plan left out go first from the first pass; the choice is placed only
when its first pass (clocked) or its passes (a rule on the round) end in time.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, given, settings

import gangopt
from bench.fragmented_table import round_text
from gangopt import class_choice as class_choice_module
from gangopt import slots
from gangopt.annotate import cheap_bounds_for
from gangopt.bounds import tier_ceilings
from gangopt.class_choice import class_choice
from gangopt.objective import SCALE, lexicographic_key, score
from gangopt.parsing import parse_json
from gangopt.prefilter import Prefiltered, prefilter
from gangopt.schema import Plan, Round
from gangopt.slot_classes import class_tier_bounds
from gangopt.solvers.cpsat import placer as placer_module
from gangopt.solvers.cpsat.placer import _left_out, _resume, _tier_value, place_choices, placed
from gangopt.solvers.greedy import greedy
from gangopt.solvers.greedy.engine import GreedyEngine
from tests.builders import fragmented_round
from tests.solvers.cpsat.test_placer import _signature  # the same plan, pod by pod
from tests.strategies import examples, fragmented_rounds

FAR = 1e9
"""A deadline no test reaches (seconds of :func:`time.perf_counter`)."""


def _bounded(rnd: Round) -> tuple[Prefiltered, dict[int, int]]:
    """The round prefiltered, with the class bounds of greedy's plan computed (as the door
    asks for them), and that plan's tier values."""
    pre = prefilter(rnd)
    values = {t.priority: round(t.value * SCALE) for t in score(rnd, greedy(rnd)).tiers}
    class_tier_bounds(pre, values, tier_ceilings(pre))
    return pre, values


@settings(max_examples=examples(15), deadline=None, suppress_health_check=list(HealthCheck))
@given(rnd=fragmented_rounds(nodes=(16, 48), gangs=(6, 20)))
def test_placed_class_choices_validate_and_repeat_on_random_fragmented_rounds(rnd: Round) -> None:
    pre, values = _bounded(rnd)
    choice = class_choice(pre, values, FAR)
    assume(choice is not None)
    assert choice is not None
    # It starts pending gangs of the open tier and above only, and names no victims.
    assert all(rnd.pending[gi].priority >= choice.priority for gi in choice.started)
    assert not choice.evicted and not choice.shed and not choice.levels
    plan, plan_score = placed(rnd, choice)
    assert gangopt.validate(rnd, plan) == []
    assert plan_score == score(rnd, plan)
    assert "node-class LP" in plan.message
    again, _ = placed(rnd, choice)
    assert _signature(again) == _signature(plan)  # same input, same plan
    # With the gangs greedy's plan left out ahead (as the door places the class choice).
    ahead = _left_out(rnd, choice, greedy(rnd))
    plan, plan_score = placed(rnd, choice, ahead=ahead)
    assert gangopt.validate(rnd, plan) == []
    assert plan_score == score(rnd, plan)
    again, _ = placed(rnd, choice, ahead=ahead)
    assert _signature(again) == _signature(plan)
    # Started from greedy's state after its highest priority (as the door does when it may).
    engines: list[GreedyEngine] = []
    seed = greedy(rnd, explain=False, engines=engines, keep_top=True)
    state = _resume(rnd, choice, seed, engines[0], ahead)
    if state is not None:
        plan, plan_score = placed(rnd, choice, None, engines[0], ahead, state)
        assert gangopt.validate(rnd, plan) == []
        assert plan_score == score(rnd, plan)
        again, _ = placed(rnd, choice, None, engines[0], ahead, state)
        assert _signature(again) == _signature(plan)  # the state is copied, not used up


def test_the_class_choice_improves_greedy_when_the_per_node_models_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """128 nodes / 50 gangs, seed 1, busy 0.75 with the per-node slot models refused (as at
    XL): greedy's priority 0 2,063.3 GPU-eq, the placed class choice 2,108.3 (tiers above the
    same); the door's step keeps it (validated, lexicographically better)."""
    monkeypatch.setattr(slots, "_scip_settings", lambda pre: None)
    rnd = parse_json(Round, round_text("128/50/1", 0.75), "round")
    pre = prefilter(rnd)
    seed = greedy(rnd)
    seed_score = score(rnd, seed)
    cheap_bounds_for(pre, seed_score)
    out, _ = place_choices(rnd, pre, seed, seed_score, lambda plan, s: None)
    assert out.improved >= 1
    assert lexicographic_key(out.score) > lexicographic_key(seed_score)
    assert gangopt.validate(rnd, out.plan) == []
    assert "node-class LP" in out.plan.message


@pytest.mark.parametrize(("nodes", "gangs", "seed"), [(48, 16, 0), (64, 24, 2)])
def test_cpsat_is_never_worse_than_greedy_with_only_the_class_bounds(
    nodes: int, gangs: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slots, "_scip_settings", lambda pre: None)
    rnd = fragmented_round(nodes, gangs, 0.75, seed, running_mix="jobs")
    # The work decides (deterministic); the limit is only the wall-clock safety net, far from the
    # 1.3-1.9 s these solves take, so a loaded machine (load 5-10: one solve hit 5 s) cannot end one early.
    policy = rnd.policy.model_copy(update={"deterministic": True, "time_limit": 60.0})
    rnd = rnd.model_copy(update={"policy": policy})
    plan = gangopt.solve(rnd)
    baseline = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, plan) == []
    assert lexicographic_key(score(rnd, plan)) >= lexicographic_key(score(rnd, baseline))
    assert gangopt.solve(rnd).model_dump(exclude={"stats"}) == plan.model_dump(exclude={"stats"})


def test_no_choice_when_its_placement_would_end_too_late(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = fragmented_round(32, 12, 0.75, 0, running_mix="tilted")
    pre, values = _bounded(rnd)
    assert class_choice(pre, values, FAR) is not None
    assert class_choice(pre, values, time.perf_counter()) is None  # the clock: no time left
    assert class_choice(pre, values) is not None  # without a clock: the rule on the round
    monkeypatch.setattr(class_choice_module, "SECONDS_PER_POD", rnd.policy.time_limit)
    assert class_choice(pre, values) is None


def test_the_gangs_the_seed_left_out_go_first_from_the_first_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """256 nodes / 100 gangs, seed 3, busy 0.6, the per-node slot models refused: the class
    choice for priority 5 starts one gang greedy's plan leaves out. The door hands it to the
    placer ahead (:func:`placed`'s ``ahead``), so the first pass already places it first: one
    pass (the clock allowing no second) gives priority 5 2,589.3 GPU-eq against greedy's
    2,553.2, where the default order's first pass leaves it out and stays at 2,553.2. Greedy
    with its cheapest room (``GreedyEngine.prices_domains``) starts that gang itself (2,589.3):
    the seed here is greedy's without it."""
    monkeypatch.setattr(slots, "_scip_settings", lambda pre: None)
    rnd = fragmented_round(256, 100, 0.6, 3, running_mix="jobs")
    assert [t.value for t in score(rnd, greedy(rnd)).tiers if t.priority == 5] == [2589.3]
    monkeypatch.setattr(GreedyEngine, "prices_domains", False)
    pre, values = _bounded(rnd)
    seed = greedy(rnd)
    seed_score = score(rnd, seed)
    choice = class_choice(pre, values, FAR)
    assert choice is not None and not choice.levels
    left = _left_out(rnd, choice, seed)
    assert left and not left & set(seed.admitted)
    handed: list[frozenset[str]] = []
    real = placer_module.placed

    def spy(*args: object, **kwargs: object) -> tuple[object, ...]:
        handed.append(args[4])  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(placer_module, "placed", spy)
    place_choices(rnd, pre, seed, seed_score, lambda plan, s: None, until=FAR)
    assert handed[0] == left
    # One pass each (a deadline already past: no second pass starts).
    without, without_score = real(rnd, choice, time.perf_counter())
    ahead, ahead_score = real(rnd, choice, time.perf_counter(), None, left)
    assert "(1 pass(es))" in without.message and "(1 pass(es))" in ahead.message
    assert gangopt.validate(rnd, ahead) == [] and gangopt.validate(rnd, without) == []
    assert left <= set(ahead.admitted)
    assert not left <= set(without.admitted)
    tier = choice.priority
    assert _tier_value(ahead_score, tier) > _tier_value(seed_score, tier) >= _tier_value(without_score, tier)
    assert lexicographic_key(ahead_score) > lexicographic_key(seed_score)


def test_a_clocked_choice_needs_time_for_its_first_pass_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clocked solve the choice is placed when one pass ends before the deadline (the
    placer gates its further passes itself); two passes counted refused XL's choice at 30 s."""
    rnd = fragmented_round(32, 12, 0.75, 0, running_mix="tilted")
    pre, values = _bounded(rnd)
    pods = class_choice_module.estimate(pre, 1) / class_choice_module.SECONDS_PER_POD
    monkeypatch.setattr(class_choice_module, "SECONDS_PER_POD", 100.0 / pods)  # one pass: 100 s
    assert class_choice(pre, values, time.perf_counter() + 150.0) is not None  # two: 200 s
    assert class_choice(pre, values, time.perf_counter() + 50.0) is None


def test_the_placer_resumes_from_greedys_state_after_its_highest_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same 256-node round: greedy's engine keeps its state after priority 10 (its first
    64 transactions); the placer's passes for priority 5's class choice start there, so
    priority 10's gangs keep greedy's pods exactly (none is grown twice: the validator), and
    the pass is still better than greedy's plan (greedy's without its cheapest room, as above)."""
    monkeypatch.setattr(slots, "_scip_settings", lambda pre: None)
    monkeypatch.setattr(GreedyEngine, "prices_domains", False)
    rnd = fragmented_round(256, 100, 0.6, 3, running_mix="jobs")
    pre = prefilter(rnd)
    engines: list[GreedyEngine] = []
    seed = greedy(rnd, explain=False, engines=engines, keep_top=True)
    seed_score = score(rnd, seed)
    assert _signature(seed) == _signature(greedy(rnd, explain=False))  # keeping it changes nothing
    values = {t.priority: round(t.value * SCALE) for t in seed_score.tiers}
    class_tier_bounds(pre, values, tier_ceilings(pre))
    choice = class_choice(pre, values, FAR)
    assert choice is not None
    state = _resume(rnd, choice, seed, engines[0], _left_out(rnd, choice, seed))
    assert state is not None
    top = max(g.priority for g in rnd.pending)
    decided = {rnd.pending[i].name for t in state.decided for i in t}
    assert decided == {g.name for g in rnd.pending if g.priority == top}
    plan, plan_score = placed(rnd, choice, time.perf_counter(), engines[0], _left_out(rnd, choice, seed), state)
    assert gangopt.validate(rnd, plan) == []

    def pods(p: Plan, names: set[str]) -> list[tuple[str, str]]:
        return sorted((x.pod, x.node) for x in p.placements if x.gang in names)

    assert pods(plan, decided) == pods(seed, decided)
    assert lexicographic_key(plan_score) > lexicographic_key(seed_score)
    # Not for a choice of the highest tier, nor from a plan whose highest tier is not greedy's.
    assert _resume(rnd, replace(choice, priority=top), seed, engines[0], frozenset()) is None
    other = seed.model_copy(update={"admitted": [n for n in seed.admitted if n not in decided]})
    assert _resume(rnd, choice, other, engines[0], frozenset()) is None
