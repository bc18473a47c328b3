"""Cheap bounds are tight where they should be: on small rounds whose optimum is stated in
words (and checked against CP-SAT), each bound equals the optimum, not just exceeds it.

Values are in objective units (tenths of a GPU-equivalent). The growth LP is solved in floating
point and its answer gets a documented safety margin (``ceil(lp · (1 + 1e-6)) + 1``): for an
LP optimum that is a whole number L of tenths (1 <= L < 10**6) the growth bound is L + 2, for
L = 0 it is 1; where no row binds (every member may be added) it is L exactly.
"""

from __future__ import annotations

import pytest

import gangopt
from gangopt.bounds import (
    CheapBounds,
    _fractional_knapsack,
    _opened_nodes_bound,
    cheap_bounds,
    packed_tier_bounds,
    reaches_ceilings,
    tier_ceilings,
)
from gangopt.objective import SCALE, score
from gangopt.prefilter import prefilter
from gangopt.schema import Cluster, Plan, Round, Status, Weights
from tests.builders import cluster, make_round, node, pending, role, running

NO_FRAGMENTATION = Weights(fragmentation=0)
OPEN = 2  # tenths per opened node at the default fragmentation weight: round(10 · 0.25) = 2

FLAT = Weights(aging_cap=0.0, short_first=0.0, deadline_boost=0.0)
"""Weights under which waiting and running work both count at urgency 1, so that the hand
values below are plain GPU counts (by default running work kept counts at the highest urgency,
docs/objective.md; the bounds must hold for any weights)."""


def solved(rnd: Round) -> Plan:
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status == Status.OPTIMAL
    return plan


def tier_units(plan: Plan) -> dict[int, int]:
    return {t.priority: round(t.value * SCALE) for t in plan.score.tiers}


def assert_growth_bound(bound: int, lp: int, exact: bool = False) -> None:
    """The LP optimum ``lp`` (computed by hand, a whole number of tenths) plus the float safety
    margin: ceil(lp · (1 + 1e-6)) = lp + 1 for 1 <= lp < 10**6, then + 1. With ``exact`` no
    row of the LP binds (``lp`` is every member that may be added): the bound is ``lp`` itself,
    with no margin."""
    assert bound == (lp if exact else lp + 2 if lp else 1), (bound, lp)


# ----------------------------------------------------------------------------- tier ceilings


def test_tier_ceilings_equal_the_optimum_when_everything_fits() -> None:
    # 4 nodes of 8 GPUs (T_gpu = 32, so a 4-GPU pod is 4/32 · 32 = 4 GPU-eq = 40 tenths).
    # Everything fits: the optimum runs every gang, and the ceilings say exactly that.
    rnd = make_round(
        cluster(4),
        running=[running("r", ["n0"], gpu=2, priority=3)],  # 20
        pending=[
            pending("a", 2, gpu=4, priority=5),  # 2 · 40 = 80
            pending("b", 1, gpu=8, priority=0),  # 80
            pending("c", 3, gpu=1, priority=0),  # 3 · 10 = 30
        ],
        weights=FLAT,
    )
    ceilings = tier_ceilings(prefilter(rnd))
    assert ceilings == {5: 80, 3: 20, 0: 80 + 30}
    plan = solved(rnd)
    assert tier_units(plan) == ceilings
    assert all(t.bound == t.value for t in plan.score.tiers)


def test_tier_ceilings_leave_out_gangs_that_can_never_run() -> None:
    # 'huge' asks for a 16-GPU pod on 8-GPU nodes: the prefilter drops it, the ceiling does
    # not count it, and the ceiling is again the optimum (only 'fits' runs).
    rnd = make_round(cluster(2), pending=[pending("fits", 1, gpu=8), pending("huge", 1, gpu=16)])
    ceilings = tier_ceilings(prefilter(rnd))
    assert ceilings == {0: 80}  # T_gpu = 16: an 8-GPU pod is 8 GPU-eq
    assert tier_units(solved(rnd)) == ceilings


# ----------------------------------------------------------------------------- packed tiers


def _contended() -> Round:
    # Two 8-GPU nodes (T_gpu = 16; a 4-GPU pod is 40). 'top' takes a whole node in every
    # optimal plan. Three 4-GPU gangs at priority 0 want the other node, which holds two:
    # the optimum runs 'urgent' (deadline passed: urgency 2, value 80) and one of the others
    # (40): 120, while the ceiling counts all three (160).
    return make_round(
        cluster(2),
        now=0.0,
        pending=[
            pending("top", 1, gpu=8, priority=5),
            pending("b", 1, gpu=4),
            pending("c", 1, gpu=4),
            pending("urgent", 1, gpu=4, deadline=-1.0),  # last: the knapsack must sort by density
        ],
    )


def test_packed_tier_bound_equals_the_optimum_when_whole_gangs_fill_the_room() -> None:
    rnd = _contended()
    pre = prefilter(rnd)
    assert tier_ceilings(pre) == {5: 80, 0: 80 + 40 + 40}
    packed = packed_tier_bounds(pre, {5: True, 0: False})
    # knapsack by value per GPU: urgent (80/4), then b (40/4) fill the 8 GPUs exactly
    assert packed == {5: 80, 0: 80 + 40}
    plan = solved(rnd)
    assert tier_units(plan) == packed
    assert [t.bound * SCALE for t in plan.score.tiers] == [80, 120]
    assert plan.gap == 0.0


def test_packed_tier_bounds_stop_below_the_first_tier_not_at_its_ceiling() -> None:
    pre = prefilter(_contended())
    # nothing says 'top' runs: only its own tier is bounded (by its 8 GPUs in 16: all of it)
    assert packed_tier_bounds(pre, {5: False, 0: False}) == {5: 80}


def test_packed_tier_bound_takes_the_tightest_resource() -> None:
    # Two nodes of 8 GPUs and 32 CPUs (T_gpu = 16, T_cpu = 64). 'top' asks 1 GPU and 32 CPUs
    # (value max(1/16, 32/64) · 16 = 8: 80). Three gangs of 1 GPU and 16 CPUs (max(1/16,
    # 16/64) · 16 = 4: 40) are left 15 GPUs (all three fit) but 32 CPUs (two fit): 80.
    rnd = make_round(
        cluster(2, gpus=8, cpu=32),
        pending=[pending("top", 1, gpu=1, cpu=32, priority=5)] + [pending(f"p{i}", 1, gpu=1, cpu=16) for i in range(3)],
    )
    pre = prefilter(rnd)
    packed = packed_tier_bounds(pre, {5: True, 0: False})
    assert packed == {5: 80, 0: 2 * 40}
    assert tier_units(solved(rnd)) == packed


def test_packed_tier_bounds_cascade_down_reached_tiers() -> None:
    # Three 8-GPU nodes (T_gpu = 24: an 8-GPU pod is 80). Priorities 9 and 5 each take one
    # node in every optimal plan; the two whole-node gangs at priority 0 share the last one.
    rnd = make_round(
        cluster(3),
        pending=[
            pending("p9", 1, gpu=8, priority=9),
            pending("p5", 1, gpu=8, priority=5),
            pending("a", 1, gpu=8),
            pending("b", 1, gpu=8),
        ],
    )
    pre = prefilter(rnd)
    assert packed_tier_bounds(pre, {9: True, 5: True, 0: False}) == {9: 80, 5: 80, 0: 80}
    # without the knowledge that priority 5 reaches its ceiling, tier 0 is bounded by 2 nodes
    assert packed_tier_bounds(pre, {9: True, 5: False, 0: False}) == {9: 80, 5: 80}
    assert packed_tier_bounds(pre, {9: True}) == {9: 80, 5: 80}  # a tier not listed is not reached
    assert tier_units(solved(rnd)) == {9: 80, 5: 80, 0: 80}


def test_packed_tier_bound_counts_a_running_candidate_as_movable() -> None:
    # A preemptible priority-0 gang holds half of n0 (4 GPUs); a priority-5 gang needs a
    # whole node and n1 is busy with an unpreemptible 8-GPU gang: the optimum evicts the
    # candidate. With tier 5 at its ceiling, tier 0 keeps only the fixed gang (80) and what
    # fits in the 0 GPUs left: the bound is exact.
    rnd = make_round(
        cluster(2),
        running=[
            running("fixed", ["n1"], gpu=8, preemptible=False),
            running("victim", ["n0"], gpu=4),
        ],
        pending=[pending("top", 1, gpu=8, priority=5)],
        weights=FLAT,
    )
    pre = prefilter(rnd)
    assert tier_ceilings(pre) == {5: 80, 0: 80 + 40}
    assert packed_tier_bounds(pre, {5: True, 0: False}) == {5: 80, 0: 80}
    plan = solved(rnd)
    assert tier_units(plan) == {5: 80, 0: 80}
    assert [p.gang for p in plan.preemptions] == ["victim"]


# ----------------------------------------------------------------------------- growth LP


def test_growth_bound_is_the_room_left_by_the_minimum() -> None:
    # Two idle 8-GPU nodes (T_gpu = 16); one gang of 1 to 8 pods of 3 GPUs (value 30 each).
    # A node holds two such pods (6 of 8 GPUs): four pods at most, three above the minimum:
    # growth 3 · 30 = 90. The LP: total room (16 - 3) / 3 = 4.33 members, but slots for a
    # 3-GPU pod 2 + 2 less the minimum's 1 = 3: 90 exactly.
    rnd = make_round(cluster(2), pending=[pending("e", 8, gpu=3, min_replicas=1)], weights=NO_FRAGMENTATION)
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 90)
    assert round(solved(rnd).score.secondary * SCALE) == 90


def test_growth_bound_sees_that_a_whole_node_pod_needs_a_whole_free_node() -> None:
    # n0 and n1 each keep 4 GPUs of an unpreemptible gang; n2 is idle. A gang of 1 to 3 pods
    # of 8 GPUs runs one pod (on n2) and can never grow: 12 GPUs are free in all, but there
    # is one slot for an 8-GPU pod. The LP sees that: growth 0 (not 80).
    rnd = make_round(
        cluster(3),
        running=[running("fixed", ["n0", "n1"], gpu=4, preemptible=False)],
        pending=[pending("e", 3, gpu=8, min_replicas=1)],
        weights=NO_FRAGMENTATION,
    )
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 0)
    assert solved(rnd).score.secondary == 0.0


def test_growth_bound_of_a_running_gang_with_a_required_rack() -> None:
    # Racks r0 = {n0, n1}, r1 = {n2, n3} of 8-GPU nodes (T_gpu = 32: a 4-GPU pod is 40).
    # The elastic gang 'r' (2 to 6 pods of 4 GPUs, all in one rack) fills n0; an
    # unpreemptible gang holds half of n1. 'r' can add one pod (n1), not the four r1 could
    # hold: growth 1 · 40 above its current 2 (its minimum). n1 was busy: nothing opened.
    rnd = make_round(
        cluster(4, racks=2),
        running=[
            running("r", ["n0", "n0"], gpu=4, replicas=6, min_replicas=2, required="rack"),
            running("blocker", ["n1"], gpu=4, preemptible=False),
        ],
    )
    pre = prefilter(rnd)
    for at_ceiling in (True, False):
        assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=at_ceiling).secondary, 40, exact=True)
    plan = solved(rnd)
    assert [p.node for p in plan.placements] == ["n1"]
    assert round(plan.score.secondary * SCALE) == 40


def test_growth_bound_of_a_pending_gang_with_a_required_rack() -> None:
    # Same racks; r0 is full (unpreemptible), r1 idle. A pending gang of 1 to 6 pods of 4
    # GPUs that must stay in one rack runs 4 pods in r1: 3 above its minimum, 120.
    rnd = make_round(
        cluster(4, racks=2),
        running=[running("fixed", ["n0", "n1"], gpu=8, preemptible=False)],
        pending=[pending("e", 6, gpu=4, min_replicas=1, required="rack")],
        weights=NO_FRAGMENTATION,
    )
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 120, exact=True)
    assert round(solved(rnd).score.secondary * SCALE) == 120


def test_growth_bound_is_exact_without_anything_to_grow() -> None:
    # No elastic gang: no LP, no margin; every plan's secondary is 0 without fragmentation.
    rnd = make_round(cluster(2), pending=[pending("p", 2, gpu=4)], weights=NO_FRAGMENTATION)
    pre = prefilter(rnd)
    assert cheap_bounds(pre, tiers_at_ceiling=True).secondary == 0
    assert cheap_bounds(pre, tiers_at_ceiling=False).secondary == 0


# ----------------------------------------------------------------------------- opened nodes


def test_opened_nodes_bound_one_node_per_whole_node_gang() -> None:
    # Four idle 8-GPU nodes, three gangs of one 8-GPU pod: any plan that starts all three
    # opens three nodes (-3 · 2). No growth: the bound is exact.
    rnd = make_round(cluster(4), pending=[pending(f"p{i}", 1, gpu=8) for i in range(3)])
    pre = prefilter(rnd)
    assert cheap_bounds(pre, tiers_at_ceiling=True).secondary == -3 * OPEN
    plan = solved(rnd)
    assert round(plan.score.secondary * SCALE) == -3 * OPEN
    assert plan.score.secondary_bound == plan.score.secondary and plan.gap == 0.0
    # without the tiers at their ceilings, some plan might start nothing: no opened nodes
    assert cheap_bounds(pre, tiers_at_ceiling=False).secondary == 0


def test_opened_nodes_bound_by_amount() -> None:
    # n0 keeps 4 GPUs of an unpreemptible gang; n1, n2 idle. Twelve 1-GPU pods (one gang):
    # four fit beside 'fixed', eight need room elsewhere: one idle 8-GPU node.
    rnd = make_round(
        cluster(3),
        running=[running("fixed", ["n0"], gpu=4, preemptible=False)],
        pending=[pending("p", 12, gpu=1)],
    )
    pre = prefilter(rnd)
    assert cheap_bounds(pre, tiers_at_ceiling=True).secondary == -1 * OPEN
    assert round(solved(rnd).score.secondary * SCALE) == -1 * OPEN


def test_opened_nodes_bound_by_shape() -> None:
    # n0 and n1 each have 4 free GPUs (8 in all, enough by amount), n2 is idle: one 8-GPU
    # pod fits on no busy node, so n2 must open.
    rnd = make_round(
        cluster(3),
        running=[running("fixed", ["n0", "n1"], gpu=4, preemptible=False)],
        pending=[pending("p", 1, gpu=8)],
    )
    pre = prefilter(rnd)
    assert cheap_bounds(pre, tiers_at_ceiling=True).secondary == -1 * OPEN
    plan = solved(rnd)
    assert [p.node for p in plan.placements] == ["n2"]
    assert plan.score.secondary == plan.score.secondary_bound == -OPEN / SCALE


def test_opened_nodes_bound_is_zero_when_busy_nodes_have_room() -> None:
    rnd = make_round(
        cluster(2),
        running=[running("fixed", ["n0"], gpu=4, preemptible=False)],
        pending=[pending("p", 2, gpu=2)],
    )
    pre = prefilter(rnd)
    assert cheap_bounds(pre, tiers_at_ceiling=True).secondary == 0
    assert solved(rnd).score.secondary == 0.0


def test_every_bound_of_a_plan_matches_its_score() -> None:
    """The plan's reported bounds are those above whenever CP-SAT proves nothing tighter."""
    rnd = _contended()
    plan = solved(rnd)
    rescored = score(rnd, plan, {t.priority: t.bound for t in plan.score.tiers}, plan.score.secondary_bound)
    assert rescored == plan.score


# ----------------------------------------------------------------------------- more exact cases


def test_packed_tier_bound_counts_gangs_that_ask_nothing_of_a_resource() -> None:
    # Two nodes of 8 GPUs and 32 CPUs (T_gpu = 16, T_cpu = 64). 'top' takes 8 GPUs of one node
    # (max(8/16, 1/64) · 16 = 8: 80). At priority 0 a CPU-only gang (16 CPUs: 16/64 · 16 = 4:
    # 40) and two 4-GPU gangs (40 each) all fit on the other node: 120. In the GPU knapsack the
    # CPU-only gang weighs nothing and always counts.
    rnd = make_round(
        cluster(2, gpus=8, cpu=32),
        pending=[
            pending("top", 1, gpu=8, cpu=1, priority=5),
            pending("cpu-only", 1, gpu=0, cpu=16),
            pending("g1", 1, gpu=4, cpu=1),
            pending("g2", 1, gpu=4, cpu=1),
        ],
    )
    pre = prefilter(rnd)
    assert packed_tier_bounds(pre, {5: True, 0: False}) == {5: 80, 0: 40 + 40 + 40}
    assert tier_units(solved(rnd)) == {5: 80, 0: 120}


def test_packed_tier_bound_leaves_an_unshrinkable_candidate_movable() -> None:
    # Three 8-GPU nodes (T_gpu = 24: a 4-GPU pod is 40); n2 holds an unpreemptible 8-GPU gang
    # (80). 'victim' (4 GPUs on n0, priority 0) could be evicted for 'top' but need not be:
    # top on n1, 'b' beside the victim on n0. Tier 0 = 80 + 40 + 40 = 160, and the packed
    # bound finds the 8 GPUs left after 'top' for the victim and 'b': exact.
    rnd = make_round(
        cluster(3),
        running=[running("fixed", ["n2"], gpu=8, preemptible=False), running("victim", ["n0"], gpu=4)],
        pending=[pending("top", 1, gpu=8, priority=5), pending("b", 1, gpu=4)],
        weights=FLAT,
    )
    pre = prefilter(rnd)
    assert packed_tier_bounds(pre, {5: True, 0: False}) == {5: 80, 0: 160}
    plan = solved(rnd)
    assert tier_units(plan) == {5: 80, 0: 160} and plan.preemptions == []


def test_growth_bound_where_the_total_room_binds() -> None:
    # Two idle 8-GPU nodes. 'a': 1 to 5 pods of 4 GPUs (40 each), 'b': 1 to 9 pods of 2 GPUs
    # (20 each): 10 tenths per GPU either way. Their minimums take 6 GPUs; the other 10 GPUs
    # hold growth worth 10 · 10 = 100 whatever the mix, and some plan fills them (a: 3 pods,
    # b: 5 pods). The per-shape slot rows alone would allow a: 3 and b: 3 (180).
    rnd = make_round(
        cluster(2),
        pending=[pending("a", 5, gpu=4, min_replicas=1), pending("b", 9, gpu=2, min_replicas=1)],
        weights=NO_FRAGMENTATION,
    )
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 100)
    assert round(solved(rnd).score.secondary * SCALE) == 100


def test_growth_bound_per_resource_leaves_out_pods_that_ask_none_of_it() -> None:
    # Two nodes of 8 GPUs, 32 CPUs and 64Gi (nobody asks for memory): T_gpu = 16, T_cpu = 64.
    # 'e': 1 to 2 whole-GPU-node pods (no CPU; 8/16 · 16 = 8: 80 each); 'c': 1 to 4 CPU-only
    # pods of 4 CPUs (4/64 · 16 = 1: 10 each). Both grow to their maximum: 80 + 3 · 10 = 110.
    rnd = make_round(
        cluster(2, gpus=8, cpu=32, memory="64Gi"),
        pending=[pending("e", 2, gpu=8, min_replicas=1), pending("c", 4, gpu=0, cpu=4, min_replicas=1)],
        weights=NO_FRAGMENTATION,
    )
    assert_growth_bound(cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary, 110, exact=True)
    assert round(solved(rnd).score.secondary * SCALE) == 110


def test_growth_bound_when_one_resource_has_no_room_left() -> None:
    # One node of 8 GPUs and 32 CPUs (T_gpu = 8: an 8-GPU pod is 80, a 4-CPU pod 4/32 · 8 = 1:
    # 10). e's minimum takes every GPU, so e cannot grow; c's CPU-only pods still can: 3 · 10.
    rnd = make_round(
        cluster(1, gpus=8, cpu=32),
        pending=[pending("e", 2, gpu=8, min_replicas=1), pending("c", 4, gpu=0, cpu=4, min_replicas=1)],
        weights=NO_FRAGMENTATION,
    )
    assert_growth_bound(cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary, 30)
    assert round(solved(rnd).score.secondary * SCALE) == 30


def test_growth_slots_are_reduced_only_by_minimum_pods_as_large() -> None:
    # n0 has 8 GPUs, n1 10 (T_gpu = 18: an 8-GPU pod is 80). 'a' runs 1 to 2 pods of 8 GPUs,
    # 'b' one pod of 2 GPUs. b fits beside a's second pod on n1: a grows by one, 80. b's small
    # pod takes no slot for an 8-GPU pod: slots 1 + 1 less a's minimum = 1.
    rnd = make_round(
        Cluster(nodes=[node("n0", 8), node("n1", 10)]),
        pending=[pending("a", 2, gpu=8, min_replicas=1), pending("b", 1, gpu=2)],
        weights=NO_FRAGMENTATION,
    )
    assert_growth_bound(cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary, 80, exact=True)
    assert round(solved(rnd).score.secondary * SCALE) == 80


def test_growth_bound_of_a_full_cluster() -> None:
    # One 8-GPU node; a gang of 1 to 2 whole-node pods runs one and has no room left: LP 0.
    rnd = make_round(cluster(1), pending=[pending("e", 2, gpu=8, min_replicas=1)], weights=NO_FRAGMENTATION)
    assert_growth_bound(cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary, 0)
    assert solved(rnd).score.secondary == 0.0


def test_growth_bound_of_an_elastic_candidate_that_must_keep_running() -> None:
    # Two 8-GPU nodes (T_gpu = 16: a 4-GPU pod is 40). 'low' (priority 0, 2 of 1..4 pods of 4
    # GPUs) fills n0 and could be shrunk for 'top' (priority 5, one 8-GPU pod), which takes the
    # idle n1 instead. Every optimal plan keeps low at 2 pods: 1 above its minimum, 40; there is
    # no room to grow. The bound: low's minimum (4 GPUs) and top's (8 GPUs) leave 4 GPUs: one
    # more member, 40, counted from low's minimum: 40.
    rnd = make_round(
        cluster(2),
        running=[running("low", ["n0", "n0"], gpu=4, replicas=4, min_replicas=1)],
        pending=[pending("top", 1, gpu=8, priority=5)],
        weights=NO_FRAGMENTATION,
    )
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 40)
    plan = solved(rnd)
    assert round(plan.score.secondary * SCALE) == 40 and plan.preemptions == []


def test_growth_bound_counts_only_the_required_domains_the_prefilter_left() -> None:
    # Racks r0 = {n0, n1} (label pool=a), r1 = {n2, n3} (no label), 8 GPUs each (T_gpu = 32: a
    # 4-GPU pod is 40). n0 keeps 4 GPUs of an unpreemptible gang. A gang of 1 to 6 pods of 4
    # GPUs, pool=a only, all in one rack: r0 holds 3 of them (1 + 2), r1 would hold 4 but is
    # not eligible. Growth: 2 · 40 = 80.
    rnd = make_round(
        cluster(4, racks=2, labels={"n0": {"pool": "a"}, "n1": {"pool": "a"}}),
        running=[running("fixed", ["n0"], gpu=4, preemptible=False)],
        pending=[pending("e", 6, gpu=4, min_replicas=1, required="rack", selector={"pool": "a"})],
        weights=NO_FRAGMENTATION,
    )
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 80, exact=True)
    assert round(solved(rnd).score.secondary * SCALE) == 80


def test_opened_nodes_bound_without_idle_nodes() -> None:
    rnd = make_round(
        cluster(1), running=[running("fixed", ["n0"], gpu=4, preemptible=False)], pending=[pending("p", 1, gpu=4)]
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 0
    assert cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary == 0


def test_opened_nodes_bound_counts_a_gang_wide_minimum() -> None:
    # As in the by-amount case, but the gang has 16 replicas and min_members 12 (no role
    # minimum): its 12 mandatory 1-GPU pods exceed the 4 GPUs beside 'fixed' by 8: one node.
    rnd = make_round(
        cluster(3),
        running=[running("fixed", ["n0"], gpu=4, preemptible=False)],
        pending=[pending("p", roles=[role("w", 16, gpu=1)], min_members=12)],
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 1


def test_bounds_are_computed_once_per_prefiltered_round() -> None:
    pre = prefilter(_contended())
    assert cheap_bounds(pre, tiers_at_ceiling=True) is cheap_bounds(pre, tiers_at_ceiling=True)
    assert cheap_bounds(pre, tiers_at_ceiling=False) is cheap_bounds(pre, tiers_at_ceiling=False)


KNAPSACK: list[tuple[list[tuple[int, int]], int, int]] = [
    # (items (value, weight), capacity, hand bound)
    ([(40, 4), (40, 4), (40, 4)], 8, 80),  # two whole items fill it exactly
    ([(30, 3), (40, 8)], 4, 30 + 5 + 1),  # 30 (density 10), then 1/8 of 40 = 5, rounded up, + 1
    ([(40, 8), (30, 3)], 4, 30 + 5 + 1),  # the same, whatever the order
    ([(60, 6), (60, 6)], 8, 60 + 20 + 1),  # 2/6 of 60 = 20
    ([(10, 3)], 1, 4 + 1),  # 1/3 of 10 = 3.33, rounded up: 4
    ([(7, 0), (40, 4)], 0, 7),  # weightless items always count; nothing else fits
    ([(7, 1)], 0, 0),  # a weight of one milli-unit is a weight...
    ([(7, 1)], 1, 7),  # ...that fits in one milli-unit
    ([(60, 6), (50, 5), (1, 1)], 8, 60 + 20 + 1),  # stops at the first item cut: (1, 1) is not added
    ([(40, 4)], -5, 0),  # no room at all
    ([], 10, 0),
]


def test_fractional_knapsack() -> None:
    for items, capacity, expected in KNAPSACK:
        assert _fractional_knapsack(items, capacity) == expected, (items, capacity)


def test_reaches_ceilings() -> None:
    ceilings = {5: 80, 0: 40}
    assert reaches_ceilings({5: 8.0, 0: 4.0}, ceilings)
    assert reaches_ceilings({5: 8.0, 0: 0.7 + 0.1 + 3.2}, ceilings)  # 3.9999999999999996: float noise
    assert not reaches_ceilings({5: 8.0, 0: 3.9}, ceilings)
    assert not reaches_ceilings({5: 7.5, 0: 4.0}, ceilings)
    assert not reaches_ceilings({5: 8.0}, ceilings)  # a missing tier is worth 0
    assert reaches_ceilings({}, {3: 0})
    assert not reaches_ceilings({}, {0: 5})  # a missing tier is worth 0, not 1
    assert reaches_ceilings({5: 0.7 + 0.1}, {5: 8})  # 0.7999999999999999 counts as 0.8
    assert CheapBounds(tiers={5: 85, 0: 0}, secondary=0).tiers_in_units() == {5: 8.5, 0: 0.0}


def test_packed_tier_bound_adds_up_the_roles_of_a_gang() -> None:
    # Two 8-GPU nodes (T_gpu = 16). 'top' takes a node. At priority 0, 'mr' has two roles of
    # one 4-GPU pod each (80 for 8 GPUs) and 'x' one 4-GPU pod (40): the other node holds mr or
    # x, so tier 0 is at most 80, and the knapsack (mr first at equal density) says so.
    rnd = make_round(
        cluster(2),
        pending=[
            pending("top", 1, gpu=8, priority=5),
            pending("mr", roles=[role("a", 1, gpu=4), role("b", 1, gpu=4)]),
            pending("x", 1, gpu=4),
        ],
    )
    pre = prefilter(rnd)
    assert packed_tier_bounds(pre, {5: True, 0: False}) == {5: 80, 0: 80}
    assert tier_units(solved(rnd)) == {5: 80, 0: 80}


def test_growth_bound_counts_the_surplus_a_fixed_gang_already_has() -> None:
    # Two 8-GPU nodes (T_gpu = 16: a 4-GPU pod is 40). n0 is full with 'r': 2 of 1..3 pods,
    # not preemptible, so 1 pod above its minimum stays (+40) and there is no room to add
    # one. n1 is full with 's' (one fixed pod, no surplus), listed after r: it must not reset
    # r's surplus. Nothing can be added anywhere, so there is no LP: the bound is exactly 40.
    rnd = make_round(
        cluster(2),
        running=[
            running("r", ["n0", "n0"], gpu=4, replicas=3, min_replicas=1, preemptible=False),
            running("s", ["n1"], gpu=8, preemptible=False),
        ],
        weights=NO_FRAGMENTATION,
    )
    for at_ceiling in (True, False):
        assert cheap_bounds(prefilter(rnd), tiers_at_ceiling=at_ceiling).secondary == 40
    assert solved(rnd).score.secondary == 40 / SCALE


def test_growth_bound_counts_a_gang_wide_minimum_topped_up() -> None:
    # One 8-GPU node (a 1-GPU pod is 10). 'p1': 4 replicas, min_members 2 and no role minimum,
    # so its role minimums are 0 while its minimum configuration is 2 pods: counted from 0 the
    # 4 pods are worth 40, less the 20 of its minimum. 'p2' (one pod, no growth) comes after.
    # Optimum: p1 runs 4 pods, 2 above its minimum: 20. Bound: -20 + LP 40 = 20, exact (no
    # row binds: every member is added, so no float margin).
    rnd = make_round(
        cluster(1),
        pending=[pending("p1", roles=[role("w", 4, gpu=1)], min_members=2), pending("p2", 1, gpu=1)],
        weights=NO_FRAGMENTATION,
    )
    assert cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary == -20 + 40
    assert solved(rnd).score.secondary == 20 / SCALE


def test_opened_nodes_bound_keeps_a_candidate_that_cannot_shrink_in_place() -> None:
    # 'victim' (4 GPUs, priority 0, not elastic) could be evicted for 'top' (8 GPUs, priority
    # 5), but every plan at the tier ceilings keeps it whole where it is: top must open n1.
    rnd = make_round(
        cluster(2),
        running=[running("victim", ["n0"], gpu=4)],
        pending=[pending("top", 1, gpu=8, priority=5)],
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 1
    plan = solved(rnd)
    assert plan.preemptions == [] and [p.node for p in plan.placements] == ["n1"]
    assert plan.score.secondary == plan.score.secondary_bound == -OPEN / SCALE


def test_opened_nodes_bound_skips_shapes_no_idle_node_can_hold() -> None:
    # n0 (16 GPUs) keeps 8 for an unpreemptible gang; n1 (4 GPUs) is idle. Two 8-GPU pods
    # each fit beside 'fixed', not both. By amount: 16 GPUs asked, 8 free on busy nodes, 4
    # per idle node: 2. By shape: no idle node holds an 8-GPU pod, so the shape count says
    # nothing (and must not divide by zero): the bound is 2.
    rnd = make_round(
        Cluster(nodes=[node("n0", 16), node("n1", 4)]),
        running=[running("fixed", ["n0"], gpu=8, preemptible=False)],
        pending=[pending("a", 1, gpu=8), pending("b", 1, gpu=8)],
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 2


def test_opened_nodes_bound_by_amount_when_shapes_say_nothing() -> None:
    # n0 keeps 2 of 8 GPUs for an unpreemptible gang: 6 free. One gang of a 4-GPU and a 3-GPU
    # pod: each shape alone fits beside 'fixed' (1 slot for >= 4, 2 for >= 3), but 7 GPUs do
    # not fit in 6: one idle node opens, by amount. The optimum opens exactly one.
    rnd = make_round(
        cluster(2),
        running=[running("fixed", ["n0"], gpu=2, preemptible=False)],
        pending=[pending("g", roles=[role("a", 1, gpu=4), role("b", 1, gpu=3)])],
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 1
    assert round(solved(rnd).score.secondary * SCALE) == -OPEN


def test_loose_growth_bound_leaves_room_for_a_minimum_that_may_not_run() -> None:
    # One 8-GPU node; one gang of 1 to 4 pods of 4 GPUs (40 each). With the tiers at their
    # ceilings the gang's minimum pod takes 4 GPUs and 1 member fits beside it: 40, the
    # optimum. Without, the gang may not run, its minimum takes no room, and the loose bound
    # lets 2 members into the 8 GPUs: 80 (still counted above the minimum, as the objective).
    rnd = make_round(cluster(1), pending=[pending("e", 4, gpu=4, min_replicas=1)], weights=NO_FRAGMENTATION)
    pre = prefilter(rnd)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 40)
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=False).secondary, 80)
    assert round(solved(rnd).score.secondary * SCALE) == 40


@pytest.mark.parametrize(
    ("growth", "bound"),
    [
        (0.0, 0),  # nothing is worth growing: no LP at all, the bound is exactly 0
        (0.1, 2 * 1),  # round(0.1 · 10) = 1 per member, 2 members: no row binds, exactly 2
    ],
)
def test_growth_bound_follows_the_growth_weight(growth: float, bound: int) -> None:
    # One 8-GPU node (T_gpu = 8: a 1-GPU pod is 10); a gang of 1 to 3 one-GPU pods.
    rnd = make_round(
        cluster(1), pending=[pending("e", 3, gpu=1, min_replicas=1)], weights=Weights(fragmentation=0, growth=growth)
    )
    assert cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary == bound


def test_opened_nodes_bound_charges_an_elastic_candidates_minimum_to_busy_room() -> None:
    # n0 and n2 have 8 GPUs, n1, n3, n4, n5 are idle with 4. 'low' (elastic, 2 of 1..2 pods of
    # 4 GPUs on n0) and 'mid' (1 GPU on n2, not elastic) could both lose pods for 'top'
    # (priority 5, 19 one-GPU pods), but at the tier ceilings both keep their minimum: mid
    # stays whole where it is (n2: 7 free), low keeps one pod, on n0 or elsewhere.
    # By amount: busy room 8 + 7 = 15, less low's minimum 4 = 11; 19 - 11 = 8 GPUs short,
    # 4 per idle node: 2. By shape: 8 + 7 = 15 one-GPU slots, 4 short: 1. The bound is 2.
    rnd = make_round(
        Cluster(nodes=[node("n0", 8), node("n1", 4), node("n2", 8), *(node(f"n{i}", 4) for i in (3, 4, 5))]),
        running=[
            running("low", ["n0", "n0"], gpu=4, replicas=2, min_replicas=1),
            running("mid", ["n2"], gpu=1),
        ],
        pending=[pending("top", 19, gpu=1, priority=5)],
    )
    pre = prefilter(rnd)
    assert sorted(rnd.running[i].name for i in pre.candidates) == ["low", "mid"]
    assert _opened_nodes_bound(pre) == 2


@pytest.mark.parametrize("rdma", [4, 8])
def test_opened_nodes_bound_ignores_resources_idle_nodes_lack(rdma: int) -> None:
    # n0 (8 GPUs, 4 or 8 rdma) is busy with a 1-GPU pod; n1 (8 GPUs, no rdma) is idle. Two
    # gangs of one pod asking 1 GPU and 3 rdma each fit on n0 (with 4 rdma one at a time, with
    # 8 both), never on n1. An idle node cannot relieve rdma, short or not, so neither count
    # uses rdma (nor divides by the 0 rdma of idle nodes): GPUs are not short, the bound is 0.
    rnd = make_round(
        Cluster(nodes=[node("n0", 8, rdma=rdma), node("n1", 8)]),
        running=[running("fixed", ["n0"], gpu=1, preemptible=False)],
        pending=[pending("a", 1, gpu=1, rdma=3), pending("b", 1, gpu=1, rdma=3)],
    )
    pre = prefilter(rnd)
    assert sorted(rnd.pending[i].name for i in pre.pending) == ["a", "b"]
    assert _opened_nodes_bound(pre) == 0


def test_opened_nodes_bound_by_shape_counts_only_pods_at_least_as_large() -> None:
    # n0 (2 GPUs, 2 CPUs) keeps 1 GPU and 1 CPU for an unpreemptible pod; n1 is idle. A
    # GPU-only pod and a CPU-only pod both fit beside it: nothing opens. For the GPU-only
    # shape only the GPU-only pod counts (the CPU-only one asks no GPU), 1 pod for 1 slot.
    rnd = make_round(
        Cluster(nodes=[node("n0", 2, cpu=2), node("n1", 8, cpu=8)]),
        running=[running("fixed", ["n0"], gpu=1, cpu=1, preemptible=False)],
        pending=[pending("g", 1, gpu=1), pending("c", 1, gpu=0, cpu=1)],
    )
    pre = prefilter(rnd)
    assert _opened_nodes_bound(pre) == 0
    assert solved(rnd).score.secondary == 0.0


def test_opened_nodes_bound_by_amount_tops_up_per_resource_from_the_cheapest_role() -> None:
    # n0 (8 GPUs, 8 CPUs) keeps 2 and 2 for an unpreemptible pod: 6 and 6 free; n1 is idle.
    # One gang, min_members 3: role 'a' (min 1 of 2; 2 GPUs, 3 CPUs), role 'b' (no minimum;
    # 1 GPU, 4 CPUs). Its least demand: a's pod (2, 3) plus 2 more members at the cheapest
    # per resource (1 GPU, 3 CPUs): 4 GPUs, 9 CPUs. 3 CPUs short, 8 per idle node: 1. Any
    # 3 members ask at least 10 CPUs, so the optimum opens n1 too.
    rnd = make_round(
        Cluster(nodes=[node("n0", 8, cpu=8), node("n1", 8, cpu=8)]),
        running=[running("fixed", ["n0"], gpu=2, cpu=2, preemptible=False)],
        pending=[
            pending("g", roles=[role("a", 2, gpu=2, cpu=3, min_replicas=1), role("b", 4, gpu=1, cpu=4)], min_members=3)
        ],
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 1
    assert any(p.node == "n1" for p in solved(rnd).placements)


@pytest.mark.parametrize(
    ("cpu", "lp", "optimum"),
    [
        # 2 milli-CPUs: the minimum pod takes 1, one member fits in the other (a pod is
        # max(0, 1/2) · 8 = 4 GPU-eq: 40)
        ("2m", 40, 40),
        # 1 milli-CPU: the minimum pod takes it all, nothing can grow (a pod is 8 GPU-eq)
        ("1m", 0, 0),
    ],
)
def test_growth_bound_with_requests_of_one_milli_unit(cpu: str, lp: int, optimum: int) -> None:
    rnd = make_round(
        Cluster(nodes=[node("n0", 8, cpu=cpu)]),
        pending=[pending("e", 4, gpu=0, cpu="1m", min_replicas=1)],
        weights=NO_FRAGMENTATION,
    )
    assert_growth_bound(cheap_bounds(prefilter(rnd), tiers_at_ceiling=True).secondary, lp)
    assert round(solved(rnd).score.secondary * SCALE) == optimum


def test_growth_bound_counts_an_unshrinkable_candidate_once() -> None:
    # Two 8-GPU nodes (T_gpu = 16: a 4-GPU pod is 40). 'victim' (4 GPUs on n0, priority 0, not
    # elastic) stays whole in every plan at the tier ceilings; 'top' (priority 5, 1 to 3 pods
    # of 4 GPUs) takes the other 12 GPUs: 2 members above its minimum, 80. The victim's pod is
    # taken out of the room once (as a fixed pod), not again as a minimum to place.
    rnd = make_round(
        cluster(2),
        running=[running("victim", ["n0"], gpu=4)],
        pending=[pending("top", 3, gpu=4, min_replicas=1, priority=5)],
        weights=NO_FRAGMENTATION,
    )
    pre = prefilter(rnd)
    assert [rnd.running[i].name for i in pre.candidates] == ["victim"]
    assert_growth_bound(cheap_bounds(pre, tiers_at_ceiling=True).secondary, 80, exact=True)
    plan = solved(rnd)
    assert round(plan.score.secondary * SCALE) == 80 and plan.preemptions == []


def test_opened_nodes_bound_tops_up_a_single_member() -> None:
    # n0 keeps 2 of 8 GPUs: 6 free; n1 is idle. Gang: role 'a' (1 pod of 4 GPUs, required),
    # role 'b' (2 pods of 3 GPUs, none required), min_members 2: one b pod on top of a, 7 GPUs
    # at least, more than the 6 free: one idle node opens, in the optimum too.
    rnd = make_round(
        cluster(2),
        running=[running("fixed", ["n0"], gpu=2, preemptible=False)],
        pending=[pending("g", roles=[role("a", 1, gpu=4, min_replicas=1), role("b", 2, gpu=3)], min_members=2)],
    )
    assert _opened_nodes_bound(prefilter(rnd)) == 1
    assert any(p.node == "n1" for p in solved(rnd).placements)
