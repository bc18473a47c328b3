"""Cheap bounds (gangopt.bounds) bound every valid plan, and let good greedy plans skip the model."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, assume, example, given, settings

import gangopt
from gangopt.bounds import cheap_bounds, lexicographic_floors, packed_tier_bounds, reaches_ceilings, tier_ceilings
from gangopt.io import load_round
from gangopt.objective import SCALE, ObjectiveTerms, score
from gangopt.prefilter import prefilter
from gangopt.schema import Plan, Round, Status
from gangopt.solvers.greedy.engine import greedy
from tests.builders import cluster, make_round, pending
from tests.strategies import examples, rounds

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "tests" / "fixtures" / "regressions"
# Issue 18, bug 1: an elastic candidate kept on a cordoned node was charged against the
# schedulable room, so the opened-nodes term claimed two idle nodes where one suffices.
CORDONED_CANDIDATE = load_round(REGRESSIONS / "bounds-cordoned-elastic-candidate.json")
# Issue 18: the packed tier bound charged each gang one minimum configuration's request; job4
# (min_members 1) may start on its CPU-only role, so the bound left it out (17.8 < 19.0).
LEAST_DEMAND = load_round(REGRESSIONS / "bounds-packed-least-demand.json")


def assert_bounded(rnd: Round, plan: Plan) -> None:
    """The plan's tiers stay under the ceilings and its secondary under the cheap bound
    (the tight one whenever the plan itself reaches every ceiling)."""
    assert gangopt.validate(rnd, plan) == []
    pre = prefilter(rnd)
    ceilings = tier_ceilings(pre)
    s = score(rnd, plan)
    for tier in s.tiers:
        assert tier.value <= ceilings.get(tier.priority, 0) / SCALE + 1e-9, tier
    loose = cheap_bounds(pre, tiers_at_ceiling=False)
    assert s.secondary <= loose.secondary / SCALE + 1e-9
    if reaches_ceilings({t.priority: t.value for t in s.tiers}, ceilings):
        tight = cheap_bounds(pre, tiers_at_ceiling=True)
        assert tight.secondary <= loose.secondary
        assert s.secondary <= tight.secondary / SCALE + 1e-9


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_cheap_bounds_bound_every_solvers_plan(rnd: Round) -> None:
    for solver in ("cpsat", "greedy", "koordinator_like", "kueue_like", "fifo_first_fit"):
        plan = gangopt.solve(rnd, solver=solver)  # type: ignore[arg-type]
        assert solver != "cpsat" or plan.status != Status.FALLBACK
        assert_bounded(rnd, plan)
    assert_bounded(rnd, greedy(rnd, growth="deferred"))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
@example(CORDONED_CANDIDATE)
def test_plan_gap_never_claims_more_than_cpsat_proves(rnd: Round) -> None:
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status != Status.FALLBACK
    if plan.status == Status.OPTIMAL:
        assert plan.gap == 0.0
    assert plan.gap is not None and plan.gap >= 0.0
    for tier in plan.score.tiers:
        assert tier.value <= tier.bound + 1e-9
    assert plan.score.secondary_bound is not None
    assert plan.score.secondary <= plan.score.secondary_bound + 1e-9


def test_packed_tier_bound_charges_the_least_each_gang_may_start_with() -> None:
    rnd = LEAST_DEMAND
    optimum = gangopt.solve(rnd)
    assert optimum.status == Status.OPTIMAL and "job4" in optimum.admitted
    plan = gangopt.solve(rnd, solver="greedy")
    assert "job4" not in plan.admitted
    [tier] = plan.score.tiers
    assert tier.bound >= optimum.score.tiers[0].value  # was 17.8 < 19.0: a false proof
    assert plan.gap is not None and plan.gap > 0


def test_opened_nodes_bound_does_not_charge_a_candidate_kept_on_a_cordoned_node() -> None:
    # n0 (cordoned) holds one 8-GPU pod of an elastic priority-0 gang; n1 (4 GPUs) is idle.
    # A CPU-only pod must open n1: exactly one idle node, never two.
    rnd = CORDONED_CANDIDATE
    pre = prefilter(rnd)
    tight = cheap_bounds(pre, tiers_at_ceiling=True)
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.admitted == ["job0"]
    open_cost = ObjectiveTerms.of(rnd).open_node_cost
    assert tight.secondary == -open_cost  # one node opened, nothing to grow into
    assert plan.score.secondary == plan.score.secondary_bound == -open_cost / SCALE
    assert plan.status == Status.OPTIMAL and plan.gap == 0.0


def test_elastic_growth_is_bounded_by_the_room_in_its_required_domain() -> None:
    # Two racks of one 8-GPU node; rack r0 half busy. A gang of 8-GPU pods that must stay in
    # one rack can run 1 pod, never 2: the bound must see that, not the 12 free GPUs.
    rnd = Round.model_validate(
        {
            "cluster": {
                "topology_levels": ["rack"],
                "nodes": [
                    {"name": "a", "capacity": {"gpu": 8}, "topology": {"rack": "r0"}},
                    {"name": "b", "capacity": {"gpu": 8}, "topology": {"rack": "r1"}},
                ],
            },
            "running": [
                {
                    "name": "busy",
                    "priority": 5,
                    "preemptible": False,
                    "roles": [{"replicas": 1, "requests": {"gpu": 4}}],
                    "pods": [{"name": "busy-0", "node": "a"}],
                }
            ],
            "pending": [
                {
                    "name": "elastic",
                    "roles": [{"replicas": 2, "min_replicas": 1, "requests": {"gpu": 8}}],
                    "topology": {"required": "rack"},
                }
            ],
        }
    )
    pre = prefilter(rnd)
    bounds = cheap_bounds(pre, tiers_at_ceiling=True)
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.admitted == ["elastic"]
    # Growth is impossible, so the bound is the plan's own value: one node opened.
    assert bounds.secondary / SCALE == plan.score.secondary
    assert plan.gap == 0.0


def test_greedy_plan_within_the_gap_limit_needs_no_model() -> None:
    rnd = load_round(ROOT / "instances" / "scale-M.json")
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert "no model needed" in plan.message
    assert plan.stats.variables == 0
    assert plan.gap is not None and 0 < plan.gap <= rnd.policy.gap_limit


def test_bounds_add_up_memory_across_many_nodes_without_overflow() -> None:
    # 12 nodes of 1 TiB: in milli-bytes their sum exceeds int64; the bound must still hold.
    nodes = [{"name": f"n{i}", "capacity": {"gpu": 8, "memory": "1Ti"}} for i in range(12)]
    rnd = Round.model_validate(
        {
            "cluster": {"nodes": nodes},
            "pending": [
                {
                    "name": "elastic",
                    "roles": [{"replicas": 12, "min_replicas": 1, "requests": {"gpu": 8, "memory": "512Gi"}}],
                }
            ],
        }
    )
    plan = gangopt.solve(rnd)
    assert len(plan.placements) == 12
    assert_bounded(rnd, plan)
    assert plan.gap == 0.0


@settings(max_examples=examples(80), deadline=None, suppress_health_check=list(HealthCheck))
@given(rounds())
@example(LEAST_DEMAND)
def test_packed_tier_bounds_hold_for_the_optimum(rnd: Round) -> None:
    """Whatever valid plan says which top tiers reach their ceilings, the capacity bounds it
    implies for the tiers below stay above the proven optimum's tier values."""
    best = gangopt.solve(rnd)
    assert best.status != Status.FALLBACK
    assume(best.status == Status.OPTIMAL)
    pre = prefilter(rnd)
    ceilings = tier_ceilings(pre)
    for solver in ("greedy", "koordinator_like", "kueue_like", "fifo_first_fit", "cpsat"):
        plan = gangopt.solve(rnd, solver=solver)  # type: ignore[arg-type]
        values = {t.priority: t.value for t in score(rnd, plan).tiers}
        reached = {p: values.get(p, 0.0) >= c / SCALE - 1e-9 for p, c in ceilings.items()}
        packed = packed_tier_bounds(pre, reached)
        for tier in best.score.tiers:
            if tier.priority in packed:  # the tiers it bounds: down to the first one below its ceiling
                assert tier.value <= packed[tier.priority] / SCALE + 1e-9, (solver, tier)


def test_packed_tier_bound_tightens_the_first_tier_below_the_ceiling() -> None:
    """Two nodes; the priority-5 gang takes one whole node in every optimal plan, so at most
    one of the two priority-0 whole-node gangs can run: the bound says so, the ceiling does not."""
    rnd = make_round(
        cluster(2),
        pending=[pending("top", 1, gpu=8, priority=5), pending("a", 1, gpu=8), pending("b", 1, gpu=8)],
    )
    pre = prefilter(rnd)
    packed = packed_tier_bounds(pre, {5: True, 0: False})
    assert tier_ceilings(pre)[0] == 160 and packed[0] == 80
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status == Status.OPTIMAL and plan.gap == 0.0
    assert [t.bound for t in plan.score.tiers if t.priority == 0] == [8.0]


def test_the_pods_that_stay_are_subtracted_as_pod_by_pod() -> None:
    """``_fixed_free`` subtracts the staying pods per resource in one step: the same free
    capacity as a subtraction per pod, with and without ``must_run``."""
    import numpy as np

    from gangopt.arrays import cluster_capacity
    from gangopt.bounds import _free_after_fixed
    from gangopt.prefilter import request_vector
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 100, running_mix="jobs")
    pre = prefilter(rnd)
    movable = set(pre.candidates)
    for must_run in (False, True):
        free = cluster_capacity(rnd, pre.resources).copy()
        for gi, run in enumerate(rnd.running):
            if gi in movable and (run.elastic or not must_run):
                continue
            reqs = {r.name: request_vector(r, pre.resources) for r in run.roles}
            for pod in run.pods:
                free[pre.topo.node_index[pod.node]] -= reqs[pod.role]
        expected = np.maximum(free, 0)
        assert (expected < cluster_capacity(rnd, pre.resources)).any()
        assert np.array_equal(_free_after_fixed(pre, must_run), expected)


def test_lexicographic_floors_hold_the_proven_tiers_and_the_first_open_one() -> None:
    """Going down, the tiers a plan proves are held at its values, the first one it leaves
    open at least at its value, and every tier below at 0; a tier with no bound counts as
    open."""
    assert lexicographic_floors({10: 5, 5: 7, 0: 3}, {10: 5, 5: 9, 0: 4}) == {10: 5, 5: 7, 0: 0}
    assert lexicographic_floors({10: 5, 5: 9, 0: 3}, {10: 5, 5: 9, 0: 4}) == {10: 5, 5: 9, 0: 3}
    assert lexicographic_floors({10: 4, 5: 9, 0: 3}, {10: 5, 5: 9, 0: 3}) == {10: 4, 5: 0, 0: 0}
    assert lexicographic_floors({10: 5, 0: 3}, {10: 5}) == {10: 5, 0: 3}
    assert lexicographic_floors({3: 0, 2: 44, 0: 510}, {2: 44, 0: 510}) == {3: 0, 2: 0, 0: 0}
    assert lexicographic_floors({5: 2}, {10: 0, 5: 2, 0: 1}) == {10: 0, 5: 2, 0: 0}
