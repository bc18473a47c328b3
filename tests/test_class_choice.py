"""The node-class LP's choice (gangopt.class_choice), placed by the slot placer.

Its plans must pass the independent validator and repeat exactly (random fragmented rounds);
through the door CP-SAT's plan stays at least greedy's when only the class bounds run; the
choice is placed only when its passes end in time.
"""

from __future__ import annotations

import time

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
from gangopt.schema import Round
from gangopt.slot_classes import class_tier_bounds
from gangopt.solvers.cpsat.placer import place_choices, placed
from gangopt.solvers.greedy import greedy
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
