"""Class slot bounds (gangopt.slot_classes): never below the lexicographic optimum.

The same two references as tests/test_slots.py: CP-SAT's proven optimum on the random rounds of
tests/strategies.py (quotas, groups, taints, elastic victims), and the independent per-node
model of tests/reference.py on small rounds of issue 13's fragmented family.
"""

from __future__ import annotations

from typing import Literal
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, assume, given, settings

import gangopt
from gangopt import slot_classes
from gangopt.bounds import cheap_bounds, tier_ceilings
from gangopt.objective import SCALE, ObjectiveTerms, score
from gangopt.prefilter import prefilter
from gangopt.schema import Round, Status, Weights
from gangopt.slot_classes import class_secondary_bound, class_tier_bounds, eviction_floor
from tests.builders import cluster, fragmented_round, make_round, pending, running
from tests.reference import reference_optimum
from tests.strategies import examples, fragmented_rounds, rounds

FLAT = Weights(aging_cap=0.0, short_first=0.0, deadline_boost=0.0)
"""Waiting and running work both at urgency 1: the hand values below are GPU counts."""


def units(plan_tiers: dict[int, float]) -> dict[int, int]:
    return {p: round(v * SCALE) for p, v in plan_tiers.items()}


def tiers_of(rnd: Round, plan: gangopt.Plan) -> dict[int, int]:
    return units({t.priority: t.value for t in score(rnd, plan).tiers})


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(rounds())
def test_class_bounds_hold_for_the_optimum(rnd: Round) -> None:
    """Whichever valid plan supplies the floors, no tier bound falls below the proven optimum."""
    best = gangopt.solve(rnd)
    assert gangopt.validate(rnd, best) == []
    assert best.status != Status.FALLBACK
    assume(best.status == Status.OPTIMAL)
    optimum = tiers_of(rnd, best)
    pre = prefilter(rnd)
    for solver in ("greedy", "koordinator_like", "volcano_like", "fifo_first_fit", "cpsat"):
        plan = gangopt.solve(rnd, solver=solver)  # type: ignore[arg-type]
        assert gangopt.validate(rnd, plan) == [], solver
        for prio, bound in class_tier_bounds(pre, tiers_of(rnd, plan), tier_ceilings(pre)).items():
            assert optimum.get(prio, 0) <= bound, (solver, prio, bound, optimum)


@pytest.mark.parametrize("running_mix", ["tilted", "jobs"])
@pytest.mark.parametrize(("nodes", "gangs", "seed"), [(32, 12, 0), (32, 12, 1), (24, 10, 3), (48, 14, 4)])
def test_class_bounds_against_the_reference_on_fragmented_rounds(
    nodes: int, gangs: int, seed: int, running_mix: Literal["jobs", "tilted"]
) -> None:
    """Every tier bound is at least the reference optimum, with greedy's floors and with the
    optimum's own, and never above the ceiling."""
    rnd = fragmented_round(nodes, gangs, 0.75, seed, running_mix=running_mix)
    ref = reference_optimum(rnd, seconds_per_tier=20.0)
    assert ref.proven
    pre = prefilter(rnd)
    ceilings = tier_ceilings(pre)
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, greedy_plan) == []
    for values in (tiers_of(rnd, greedy_plan), ref.tiers):
        bounds = class_tier_bounds(pre, values, ceilings)
        for prio, bound in bounds.items():
            assert ref.tiers.get(prio, 0) <= bound <= ceilings[prio], (prio, bound, ref.tiers, values)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(rnd=fragmented_rounds(nodes=(16, 40), gangs=(6, 16)))
def test_class_bounds_hold_for_the_reference_on_random_fragmented_rounds(rnd: Round) -> None:
    """The property test the aggregation needs: on random fragmented rounds (both running
    mixes, busy 0.6 to 0.9), whichever plan supplies the floors, no bound falls below the
    independent reference's proven optimum."""
    ref = reference_optimum(rnd, seconds_per_tier=10.0)
    assume(ref.proven)
    pre = prefilter(rnd)
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, greedy_plan) == []
    for values in (tiers_of(rnd, greedy_plan), ref.tiers):
        for prio, bound in class_tier_bounds(pre, values, tier_ceilings(pre)).items():
            assert ref.tiers.get(prio, 0) <= bound, (prio, bound, ref.tiers, values)


@pytest.mark.usefixtures("candidates_room_for_all")
def test_an_eight_gpu_pod_needs_eight_free_gpus_on_one_node() -> None:
    # Four nodes, each with 4 of 8 GPUs held by a preemptible priority-0 gang: 16 GPUs free,
    # but a new priority-0 pod may not evict priority-0 work (rule 5): no 8-GPU pod of tier 0
    # fits anywhere, whatever the total room says.
    rnd = make_round(
        cluster(4),
        running=[running(f"r{i}", [f"n{i}"], gpu=4) for i in range(4)],
        pending=[
            pending("top", 1, gpu=4, priority=5),
            pending("big", 1, gpu=8),
            pending("big2", 1, gpu=8),
            pending("small", 1, gpu=4),
        ],
        weights=FLAT,
    )
    pre = prefilter(rnd)
    values = {5: 40, 0: 4 * 40 + 40}
    assert tier_ceilings(pre)[0] == 4 * 40 + 2 * 80 + 40
    assert class_tier_bounds(pre, values, tier_ceilings(pre)) == {0: 4 * 40 + 40}


@pytest.mark.usefixtures("candidates_room_for_all")
def test_room_taken_by_a_higher_tier_costs_the_tier_it_evicts() -> None:
    # n0 and n1 each run one preemptible 8-GPU priority-5 gang; a priority-10 whole-node gang
    # must evict one of them: tier 5 keeps at most one (80 of 160) once tier 10's floor is in.
    rnd = make_round(
        cluster(2),
        running=[running("a", ["n0"], gpu=8, priority=5), running("b", ["n1"], gpu=8, priority=5)],
        pending=[pending("top", 1, gpu=8, priority=10), pending("low", 1, gpu=8, priority=5)],
        weights=FLAT,
    )
    pre = prefilter(rnd)
    assert class_tier_bounds(pre, {10: 80, 5: 80}, tier_ceilings(pre)) == {5: 80}
    assert class_tier_bounds(pre, {10: 0, 5: 80}, tier_ceilings(pre))[5] == 160
    # A proof within 1 % stops at tier 10 (bound 80 against 0): no LP for tier 5.
    assert class_tier_bounds(pre, {10: 0, 5: 80}, tier_ceilings(pre), enough=0.01) == {10: 80}


def test_a_node_a_victim_left_serves_only_higher_priorities() -> None:
    # The priority-5 6-GPU gang must evict the victim on n0; the 2 GPUs left there may then
    # take no priority-0 pod (rule 5's node form): tier 0 is the fixed gang alone.
    rnd = make_round(
        cluster(2),
        running=[running("victim", ["n0"], gpu=4), running("fixed", ["n1"], gpu=8, preemptible=False)],
        pending=[pending("top", 1, gpu=6, priority=5), pending("small", 1, gpu=2)],
        weights=FLAT,
    )
    pre = prefilter(rnd)
    assert class_tier_bounds(pre, {5: 60, 0: 80}, tier_ceilings(pre)) == {0: 80}


@pytest.mark.usefixtures("candidates_room_for_all")
def test_an_elastic_victim_sheds_its_spare_pods_for_free_and_not_its_minimum() -> None:
    # n0 and n1 each hold one 4-GPU pod of an elastic priority-0 gang (at least one pod), 4
    # GPUs free on each. A priority-5 whole-node gang takes one node: the elastic gang sheds
    # the pod there and stays (tier 0 keeps its value); a second whole-node gang would cost
    # the gang itself. (A waiting priority-0 whole-node gang gives tier 0 a bound to ask for.)
    one = make_round(
        cluster(2),
        running=[running("el", ["n0", "n1"], gpu=4, replicas=2, min_replicas=1)],
        pending=[pending("top", 1, gpu=8, priority=5), pending("low", 1, gpu=8)],
        weights=FLAT,
    )
    pre = prefilter(one)
    kept = 40  # its minimum: one 4-GPU pod (T_gpu = 16: a 4-GPU pod is 4 GPU-eq)
    assert tier_ceilings(pre)[0] == kept + 80
    assert class_tier_bounds(pre, {5: 80, 0: kept}, tier_ceilings(pre)) == {0: kept}
    two = make_round(
        cluster(2),
        running=[running("el", ["n0", "n1"], gpu=4, replicas=2, min_replicas=1)],
        pending=[pending("top", 1, gpu=8, priority=5), pending("top2", 1, gpu=8, priority=5), pending("low", 1, gpu=8)],
        weights=FLAT,
    )
    pre = prefilter(two)
    assert class_tier_bounds(pre, {5: 160, 0: 0}, tier_ceilings(pre)) == {0: 0}


def test_bounds_are_computed_once_per_plan_values() -> None:
    rnd = fragmented_round(32, 12, 0.75, 0, running_mix="jobs")
    pre = prefilter(rnd)
    floors = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, floors) == []
    values = tiers_of(rnd, floors)
    first = class_tier_bounds(pre, values, tier_ceilings(pre))
    assert class_tier_bounds(pre, values, tier_ceilings(pre)) == first
    assert sum(1 for key in pre.derived if isinstance(key, tuple) and key[0] == "slot-classes") == 1


@pytest.mark.usefixtures("candidates_room_for_all")
def test_a_rigid_victim_on_two_nodes_is_lost_whole_for_one_of_them() -> None:
    # A rigid priority-0 gang holds 4 GPUs on each of n0 and n1; n1 also runs a 2-GPU gang
    # nobody may preempt. The priority-5 whole-node gang fits only on n0, so the whole victim
    # goes: tier 0 keeps the fixed gang alone (the waiting whole-node gang of tier 0 fits
    # nowhere). Its value shared per unit would have cost only the pod on n0 (40 of 80).
    rnd = make_round(
        cluster(2),
        running=[running("rig", ["n0", "n1"], gpu=4), running("fixed", ["n1"], gpu=2, preemptible=False)],
        pending=[pending("top", 1, gpu=8, priority=5), pending("low", 1, gpu=8)],
        weights=FLAT,
    )
    pre = prefilter(rnd)
    best = gangopt.solve(rnd)
    assert gangopt.validate(rnd, best) == []
    assert best.status == Status.OPTIMAL and tiers_of(rnd, best) == {5: 80, 0: 20}
    assert tier_ceilings(pre)[0] == 80 + 20 + 80
    assert class_tier_bounds(pre, {5: 80, 0: 20}, tier_ceilings(pre)) == {0: 20}


@pytest.mark.parametrize(("seed", "running_mix"), [(0, "tilted"), (4, "tilted"), (0, "jobs")])
def test_the_per_node_loss_tightens_the_bound_and_keeps_it_valid(
    seed: int, running_mix: Literal["jobs", "tilted"], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node in a state loses at least its own cheapest pods summing to the state's units
    (slot_classes._node_losses), not the class's cheapest units wherever they sit: on these
    rounds a tier's bound falls (tilted seed 0: priority 0 from 134.4 to 111.1 GPU-eq on
    greedy's floors) and stays at or above the reference optimum."""
    rnd = fragmented_round(32, 12, 0.75, seed, running_mix=running_mix)
    ref = reference_optimum(rnd, seconds_per_tier=20.0)
    assert ref.proven
    floors = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, floors) == []
    values = tiers_of(rnd, floors)
    pre = prefilter(rnd)
    cut = class_tier_bounds(pre, values, tier_ceilings(pre))
    monkeypatch.setattr(slot_classes, "NODE_LOSS_WIDTH", 0)  # the loss per class's pool alone
    pooled = class_tier_bounds(prefilter(rnd), values, tier_ceilings(pre))
    assert any(cut[p] < pooled[p] for p in cut), (cut, pooled)
    for prio, bound in cut.items():
        assert ref.tiers.get(prio, 0) <= bound <= pooled[prio], (prio, bound, pooled, ref.tiers)


def preemption_cost(rnd: Round, plan: gangopt.Plan) -> int:
    """The secondary cost of a plan's preemptions (objective units), as gangopt.objective
    charges it: a whole gang's eviction cost, or each shed pod's removal cost."""
    terms = ObjectiveTerms.of(rnd)
    by_name = {g.name: g for g in rnd.running}
    out = 0
    for p in plan.preemptions:
        run = by_name[p.gang]
        out += terms.eviction_cost(run) if p.kind == "evict" else terms.pod_removal_cost(run) * len(p.pods)
    return out


def eviction_floor_of(rnd: Round, values: dict[int, int]) -> int:
    """The class LP's floor on the preemptions' cost under the floors of a plan of tier
    ``values`` (the tier bounds first: the floor reads their lowest tier's LP)."""
    pre = prefilter(rnd)
    class_tier_bounds(pre, values, tier_ceilings(pre))
    return eviction_floor(pre, values)


def secondary_bounds_of(rnd: Round, values: dict[int, int]) -> tuple[int, int]:
    """(the class LP's secondary bound, growth and evictions in one LP; the cheap bound less
    the eviction floor, the bound before it) under the floors of a plan of tier ``values``."""
    pre = prefilter(rnd)
    class_tier_bounds(pre, values, tier_ceilings(pre))
    cheap = cheap_bounds(pre, False).secondary
    return class_secondary_bound(pre, values, cheap), cheap - eviction_floor(pre, values)


def secondary_of(rnd: Round, plan: gangopt.Plan) -> int:
    return round(score(rnd, plan).secondary * SCALE)


SOLVERS = ("greedy", "koordinator_like", "volcano_like", "kueue_like", "slurm_backfill_like", "fifo_first_fit", "cpsat")


@pytest.mark.parametrize("running_mix", ["tilted", "jobs"])
@pytest.mark.parametrize(("nodes", "gangs", "seed"), [(32, 12, 0), (32, 12, 1), (24, 10, 3), (48, 14, 4)])
def test_every_plan_pays_the_eviction_floor_and_keeps_the_secondary_bound_of_its_tiers(
    nodes: int, gangs: int, seed: int, running_mix: Literal["jobs", "tilted"]
) -> None:
    """Every valid plan keeps its own tiers' floors, so its preemptions cost at least the floor
    the class LP computes from them (slot_classes.eviction_floor), and its secondary terms are
    at most the growth-less-evictions bound of them (slot_classes.class_secondary_bound), never
    above the cheap bound less the floor; CP-SAT's (never worse lexicographically) at most that
    of greedy's tiers. Neither is idle: on some of these rounds the floor is above 0 and the
    bound below the one before it (pending gangs the LP cannot start do not grow)."""
    rnd = fragmented_round(nodes, gangs, 0.75, seed, running_mix=running_mix)
    floors = []
    tighter = []
    plans = {}
    for solver in SOLVERS:
        plan = plans[solver] = gangopt.solve(rnd, solver=solver)  # type: ignore[arg-type]
        assert gangopt.validate(rnd, plan) == [], solver
        floor = eviction_floor_of(rnd, tiers_of(rnd, plan))
        assert 0 <= floor <= preemption_cost(rnd, plan), (solver, floor, preemption_cost(rnd, plan))
        floors.append(floor)
        bound, before = secondary_bounds_of(rnd, tiers_of(rnd, plan))
        assert secondary_of(rnd, plan) <= bound <= before, (solver, bound, before, secondary_of(rnd, plan))
        tighter.append(bound < before)
    assert secondary_of(rnd, plans["cpsat"]) <= secondary_bounds_of(rnd, tiers_of(rnd, plans["greedy"]))[0]
    if (nodes, seed, running_mix) in {(32, 0, "tilted"), (48, 4, "jobs")}:
        assert max(floors) > 0, floors
    if (nodes, seed, running_mix) == (32, 1, "tilted"):
        # 106 against 112 on greedy's tiers. On the two rounds above the bound was 2 below the
        # one before only by the growth LP's float margin, dropped where no LP row binds.
        assert any(tighter), tighter


@settings(max_examples=examples(30), deadline=None, suppress_health_check=list(HealthCheck))
@given(rnd=fragmented_rounds(nodes=(16, 40), gangs=(6, 16)))
def test_the_eviction_floor_holds_on_random_fragmented_rounds(rnd: Round) -> None:
    """The property the secondary bound needs (gangopt.annotate.cheap_bounds_for subtracts the
    floor from the growth bound): on random fragmented rounds, greedy's plan and CP-SAT's each
    pay at least the floor of their own tiers, and CP-SAT's (never worse lexicographically)
    at least the floor of greedy's; likewise each stays within the secondary bound
    (slot_classes.class_secondary_bound) of its own tiers, CP-SAT's within greedy's."""
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    best = gangopt.solve(rnd)
    for plan in (greedy_plan, best):
        assert gangopt.validate(rnd, plan) == []
        assert eviction_floor_of(rnd, tiers_of(rnd, plan)) <= preemption_cost(rnd, plan)
        assert secondary_of(rnd, plan) <= secondary_bounds_of(rnd, tiers_of(rnd, plan))[0]
    assert eviction_floor_of(rnd, tiers_of(rnd, greedy_plan)) <= preemption_cost(rnd, best)
    assert secondary_of(rnd, best) <= secondary_bounds_of(rnd, tiers_of(rnd, greedy_plan))[0]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(rounds())
def test_the_eviction_floor_holds_for_the_optimum(rnd: Round) -> None:
    """On tests/strategies.py's rounds (quotas, groups, taints, elastic victims, multi-role
    gangs): the proven optimum pays at least the floor of any plan's tiers, and each plan at
    least its own; the optimum's secondary terms and each plan's are at most the secondary
    bound (slot_classes.class_secondary_bound) of that plan's tiers."""
    best = gangopt.solve(rnd)
    assert gangopt.validate(rnd, best) == []
    assume(best.status == Status.OPTIMAL)
    for solver in ("greedy", "koordinator_like", "fifo_first_fit"):
        plan = gangopt.solve(rnd, solver=solver)  # type: ignore[arg-type]
        assert gangopt.validate(rnd, plan) == [], solver
        assert eviction_floor_of(rnd, tiers_of(rnd, plan)) <= preemption_cost(rnd, best), solver
        assert eviction_floor_of(rnd, tiers_of(rnd, plan)) <= preemption_cost(rnd, plan), solver
        bound = secondary_bounds_of(rnd, tiers_of(rnd, plan))[0]
        assert secondary_of(rnd, best) <= bound, (solver, bound, secondary_of(rnd, best))
        assert secondary_of(rnd, plan) <= bound, (solver, bound, secondary_of(rnd, plan))


@pytest.mark.parametrize("running_mix", ["tilted", "jobs"])
def test_the_pool_values_every_candidate_as_the_scores_do(running_mix: Literal["jobs", "tilted"]) -> None:
    """The pool reads the running gangs' tier values from ``running_base`` (h32-XLbound: 0.8
    CPU-s less at fragmented XL): the same values, tier sums, eviction costs and pod groups per
    gang as asking each gang, so the bounds are those computed gang by gang; and each
    candidate pod's share of its gang's members above its role minimum at their growth value
    (what the secondary bound charges a pod that leaves), some of them above 0."""
    rnd = fragmented_round(48, 14, seed=4, running_mix=running_mix)
    pre = prefilter(rnd)
    pool = slot_classes._pool(pre)
    assert pool is not None and len(pool.pod_gang_index)
    terms = ObjectiveTerms.of(rnd)
    sums: dict[int, int] = {}
    for run in rnd.running:
        sums[run.priority] = sums.get(run.priority, 0) + terms.tier_value(run)
    assert pool.fixed_value == sums
    for row, gi in enumerate(pool.pod_gang_index.tolist()):
        run = rnd.running[gi]
        per = terms.eviction_cost(run) / len(run.pods)
        assert pool.pod_evict[row] == (min(per, terms.pod_removal_cost(run)) if run.elastic else per)
        assert pool.pod_elastic[row] == run.elastic and pool.pod_prio[row] == run.priority
        above = len(run.pods) - run.role_minimum(run.roles[0])
        grows = gi in pre.growers or len(run.roles) > 1 or above <= 0
        surplus = 0.0 if grows else terms.growth_value(run.roles[0]) * above / len(run.pods)
        assert pool.pod_surplus[row] == pytest.approx(surplus)
    assert (pool.pod_surplus > 0).any()
    for g in range(len(pool.prio)):
        assert pool.pods_of(g).tolist() == [p for p, owner in enumerate(pool.pod_gang.tolist()) if owner == g]


def test_more_segments_tighten_the_class_bounds_and_keep_them_valid() -> None:
    """A class's nodes in one state pay at least the cheapest of their class's own costs for
    it, sorted, in up to slot_classes.EVICTION_SEGMENTS steps. On a 96-node fragmented round,
    whose classes have more nodes than the 8 steps before, greedy's floors give a lower
    secondary bound (1,055 -> 1,053 units) and a higher eviction floor (67 -> 69) than those,
    the tier bounds no higher; the bounds stay at least the reference's proven optimum, the
    secondary terms of greedy's plan and of CP-SAT's (never worse lexicographically), and the
    floor at most what either plan's preemptions cost. Fails if the steps are not used or if
    they cut a plan or the optimum."""
    rnd = fragmented_round(96, 32, 0.75, 0, running_mix="tilted")
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    best = gangopt.solve(rnd)
    for plan in (greedy_plan, best):
        assert gangopt.validate(rnd, plan) == []
    values = tiers_of(rnd, greedy_plan)

    def bounds() -> tuple[dict[int, int], int, int]:
        pre = prefilter(rnd)
        tiers = class_tier_bounds(pre, values, tier_ceilings(pre))
        cheap = cheap_bounds(pre, False).secondary
        return tiers, class_secondary_bound(pre, values, cheap), eviction_floor(pre, values)

    with patch.object(slot_classes, "EVICTION_SEGMENTS", 8):
        old_tiers, old_secondary, old_floor = bounds()
    tiers, secondary, floor = bounds()
    assert all(tiers[p] <= old_tiers[p] for p in tiers), (tiers, old_tiers)
    assert secondary < old_secondary and floor > old_floor, (secondary, old_secondary, floor, old_floor)
    ref = reference_optimum(rnd, seconds_per_tier=30.0)
    assert ref.proven
    for prio, bound in tiers.items():
        assert ref.tiers.get(prio, 0) <= bound, (prio, bound, ref.tiers)
    for plan in (greedy_plan, best):
        assert secondary_of(rnd, plan) <= secondary, (secondary_of(rnd, plan), secondary)
        assert floor <= preemption_cost(rnd, plan), (floor, preemption_cost(rnd, plan))


def test_fine_loss_steps_on_large_rounds_tighten_the_tier_bound_and_keep_it_valid() -> None:
    """Above slot_classes.FINE_LOSS_NODES nodes a state's nodes lose at least the cheapest of
    their class's own tier losses in FINE_LOSS_SEGMENTS steps, not the class's least loss alone.
    With the threshold lowered to 0 on a 96-node fragmented round (classes of more than one
    node), priority 0's bound on greedy's floors falls (18,022 -> 17,872 units) and stays at or
    above the reference's proven optimum, on greedy's floors and CP-SAT's. Fails if the fine
    steps are not used, if they cut the optimum, or if the threshold leaves this round's
    96 nodes on the fine steps (the L rounds' at-plan LP keeps its time)."""
    rnd = fragmented_round(96, 32, 0.75, 0, running_mix="tilted")
    assert slot_classes.loss_segments(len(rnd.cluster.nodes)) == slot_classes.LOSS_SEGMENTS
    ref = reference_optimum(rnd, seconds_per_tier=30.0)
    assert ref.proven
    for solver in ("greedy", "cpsat"):
        plan = gangopt.solve(rnd, solver=solver)  # type: ignore[arg-type]
        assert gangopt.validate(rnd, plan) == []
        values = tiers_of(rnd, plan)
        pre = prefilter(rnd)
        coarse = class_tier_bounds(pre, values, tier_ceilings(pre))
        with patch.object(slot_classes, "FINE_LOSS_NODES", 0):
            pre = prefilter(rnd)
            fine = class_tier_bounds(pre, values, tier_ceilings(pre))
        assert fine.keys() == coarse.keys()
        for prio, bound in fine.items():
            assert ref.tiers.get(prio, 0) <= bound <= coarse[prio], (solver, prio, bound, coarse, ref.tiers)
        if solver == "greedy":
            assert fine[0] < coarse[0], (fine, coarse)
