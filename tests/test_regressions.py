"""Bugs found in issue 18 while widening ``tests/strategies.py``, pinned as rounds under
``tests/fixtures/regressions/`` (see docs/property-tests.md). A bug not fixed yet is a strict
xfail test: it passes (and the strict xfail then fails, so the marker must go) once fixed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import gangopt
from gangopt.bounds import tier_ceilings
from gangopt.objective import SCALE
from gangopt.prefilter import prefilter
from gangopt.schema import Status
from gangopt.solvers.cpsat.encoding import encode
from gangopt.solvers.cpsat.hints import complete, plan_values
from tests.builders import cluster, make_round, pending, running

REGRESSIONS = Path(__file__).resolve().parent / "fixtures" / "regressions"


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
def test_running_gang_with_a_required_level_spanning_two_domains(solver: str) -> None:
    # Fixed in the prefilter (it called names.index('') and every solver crashed).
    # r: 2 of 4 pods (min 2), required rack, one pod in r0 (n0) and one in r1 (n2). The round
    # loads (checks.py does not forbid it; rules.md checks the required level only for gangs
    # that get new pods), so the only right answers are plans in which r does not grow.
    rnd = gangopt.load_round(REGRESSIONS / "prefilter-running-required-spans-domains.json")
    plan = gangopt.solve(rnd, solver=solver)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status != Status.FALLBACK
    assert not any(p.gang == "r" for p in plan.placements)
    assert plan.admitted == ["p"]


def test_tolerations_without_a_key_match_every_key() -> None:
    # Fixed by the one reading of eligibility (issue 11): the prefilter had its own toleration
    # check that tolerated nothing for an empty key. A key-less Equal toleration is now
    # rejected at load (tests/test_eligibility.py), so the fixture's second gang uses Exists.
    # n0 (8 GPUs) has taint dedicated=infra:NoSchedule; two 4-GPU gangs tolerate it through a
    # key-less toleration each. Both fit on n0: the optimum runs both (2 · 40 = 80 tenths,
    # T_gpu = 8: a 4-GPU pod is 4/8 · 8 = 4 GPU-eq) and opens one node (-2).
    rnd = gangopt.load_round(REGRESSIONS / "prefilter-keyless-toleration.json")
    pre = prefilter(rnd)
    assert pre.pruned == {}
    assert tier_ceilings(pre) == {0: 80}
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert sorted(plan.admitted) == ["empty-key", "no-key-equal"]
    assert plan.status == Status.OPTIMAL and plan.gap == 0.0
    assert plan.score.secondary == -2 / SCALE


def test_the_keyless_toleration_round_is_solvable_by_greedy() -> None:
    """The validator's reading (the documented one) admits both gangs."""
    rnd = gangopt.load_round(REGRESSIONS / "prefilter-keyless-toleration.json")
    plan = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, plan) == []
    assert sorted(plan.admitted) == ["empty-key", "no-key-equal"]


@pytest.mark.parametrize(
    ("fixture", "solver"),
    [
        ("greedy-reprieve-victim-for-no-gang", "cpsat"),
        ("greedy-reprieve-victim-for-no-gang", "greedy"),
        ("greedy-reprieve-victim-for-no-gang", "koordinator_like"),
        ("cpsat-fallback-invalid-plan", "cpsat"),
    ],
)
def test_a_victim_loses_pods_only_for_a_gang_that_uses_its_room(fixture: str, solver: str) -> None:
    # Found by tests/test_bounds.py's hypothesis run during issue 15 (widened strategies).
    # greedy-reprieve-victim-for-no-gang: team-a runs 26 GPUs over its quota (tolerated, not
    # raised). job2 (priority 3) shrinks run1 (priority 2) for 4 GPUs of quota; then job5
    # (priority 2) evicts run2 (8 GPUs, priority 0) and uses 5: the 3 GPUs left over make
    # run1's shrink unneeded for job2, so run1's quota went to its own priority. Greedy and the
    # Koordinator emulation now refuse such a transaction (GreedyEngine._steals) and settle the
    # cluster after every preemption. cpsat-fallback-invalid-plan: the model's answer hands
    # run1's quota to job5; the repair took job5 out but left run2 evicted for no gang, and the
    # greedy plan was returned (status fallback). The repair's cut (job5 only if run1 keeps
    # its pods) and a second search now find job2 on n3 in run2's place.
    rnd = gangopt.load_round(REGRESSIONS / f"{fixture}.json")
    plan = gangopt.solve(rnd, solver=solver)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status != Status.FALLBACK
    assert "job2" in plan.admitted  # the one priority-3 gang


def test_the_priority_3_gang_starts_in_its_victims_place() -> None:
    # Koordinator, Volcano, Slurm and FIFO emulations place job2 on n0, where evicting run2 (on
    # n3) frees only quota, or do not preempt, and give up; greedy (and the Kueue emulation,
    # which preempts through greedy's engine) now tries again on the victims' nodes
    # (GreedyEngine._on_victims_nodes),
    # and CP-SAT's second search (after the repair's cut) finds the same, keeping the CPU-only
    # priority-0 gangs the first repair took out with job5.
    rnd = gangopt.load_round(REGRESSIONS / "cpsat-fallback-invalid-plan.json")
    for solver in ["cpsat", "greedy", "kueue_like"]:
        plan = gangopt.solve(rnd, solver=solver)
        assert gangopt.validate(rnd, plan) == []
        assert sorted(plan.admitted) == ["job0", "job1", "job2", "job3", "job4"], solver
        assert [(p.gang, p.nodes, p.for_gangs) for p in plan.preemptions] == [("run2", ["n3"], ["job2"])]
    assert "searched again" in gangopt.solve(rnd).message
    for peer in ["koordinator_like", "volcano_like", "slurm_backfill_like", "fifo_first_fit"]:
        assert "job2" not in gangopt.solve(rnd, solver=peer).admitted


def test_rule_5_is_encoded_node_by_node_on_a_class_of_several_nodes() -> None:
    # Found by tests/test_bounds.py's hypothesis run (the round _honest caught: tier 0 at 5.2
    # against a "proven" 5.0). n0 and n1 form one node class, each with one pod of run0
    # (priority 0, elastic). Greedy shrinks run0 on n1 for job0 (priority 1) and puts job1
    # (priority 0) on n0, which rule 5 allows; the model kept lower gangs off the whole class
    # where a gang shrinks, so greedy's plan was no model solution and the model's optimum
    # bounded only its own plans. Now lower pods only need the slots of the nodes that keep
    # all of run0's pods (encoding._lower_off_losing_nodes).
    rnd = gangopt.load_round(REGRESSIONS / "bounds-class-shrink-lower-gang.json")
    enc = encode(prefilter(rnd))
    assert any(cm.cls.size > 1 and cm.entries for cm in enc.classes)
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    assert sorted(greedy_plan.admitted) == ["job0", "job1"]
    assert complete(enc, plan_values(enc, greedy_plan), 5.0, 0) is not None
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    best = {t.priority: t.value for t in greedy_plan.score.tiers}
    for tier in plan.score.tiers:
        assert tier.value <= tier.bound + 1e-9
        assert best[tier.priority] <= tier.bound + 1e-9


def test_one_node_classes_are_encoded_exactly() -> None:
    # The same kind of round with every node its own class and no pod outside the model: a
    # shrink keeps lower gangs off exactly the node that lost the pod, so no flag.
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("v", ["n0", "n0"], gpu=4, replicas=2, min_replicas=1)],
        pending=[pending("h", gpu=8, priority=2), pending("low", gpu=4, priority=0)],
    )
    enc = encode(prefilter(rnd))
    assert enc.victim and all(cm.cls.size == 1 for cm in enc.classes)
    assert not enc.stricter


def test_an_elastic_gang_with_pods_on_nodes_nobody_can_use_may_shrink_there_for_quota() -> None:
    # Found like the one above (tier 0: plan 20.0 against a "proven" 0.0). run0 (priority 0,
    # elastic, 3 pods of 4 GPUs, minimum 1) has pods on cordoned n2 and n3 and on n0; job0
    # (priority 1, 2 x 4 GPUs) needs 8 GPUs of a quota run0 fills. Greedy shrinks run0 on n0
    # (where job0 lands) and on n3: valid, and run0 keeps a pod. The prefilter dropped n2 and
    # n3 (no new pod fits there) and the model could only evict run0; now it keeps the classes
    # where such a gang runs, so the model is exact and its optimum proven.
    rnd = gangopt.load_round(REGRESSIONS / "bounds-stranded-elastic-shrink.json")
    pre = prefilter(rnd)
    assert not pre.stranded
    assert not encode(pre).stricter
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    assert [p.kind for p in greedy_plan.preemptions] == ["shrink"]
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status == Status.OPTIMAL
    assert plan.admitted == ["job0"]
    assert [p.kind for p in plan.preemptions] == ["shrink"]
    best = {t.priority: t.value for t in greedy_plan.score.tiers}
    for tier in plan.score.tiers:
        assert best[tier.priority] <= tier.value + 1e-9
        assert tier.value <= tier.bound + 1e-9


def test_a_shrink_may_free_quota_on_a_node_where_no_beneficiary_lands() -> None:
    # Found by tests/solvers/test_cpsat.py's cohort-round property on a fresh CI machine: queue
    # q0 runs 14 GPUs over a zero quota (tolerated, not raised); job0 (8 GPUs) needs n1 freed
    # and 8 GPUs of quota, so greedy evicts run3 and shrinks run1 on n1 (where job0 lands) and
    # on n0 (quota only), which rule 5 allows. The model wanted a beneficiary on every class
    # where a shrink removes pods, so its "proven" secondary bound (-1.4) was below greedy's
    # plan (-0.7). Under a quota one witness class now suffices: the model is exact.
    rnd = gangopt.load_round(REGRESSIONS / "bounds-shrink-for-quota-on-a-second-node.json")
    assert not encode(prefilter(rnd)).stricter
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    assert [p.kind for p in greedy_plan.preemptions] == ["shrink", "evict"]
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status == Status.OPTIMAL
    assert plan.admitted == ["job0"]
    assert plan.score.secondary_bound is not None
    assert greedy_plan.score.secondary <= plan.score.secondary + 1e-9
    assert plan.score.secondary <= plan.score.secondary_bound + 1e-9
    for tier in plan.score.tiers:
        assert tier.value <= tier.bound + 1e-9


def test_the_placers_pass_without_preferred_levels_keeps_a_gangs_slices() -> None:
    # Fixed in the slot placer (h28-L, found by test_slots' property test): its last pass sets
    # a chosen gang's topology aside for best fit (meant for preferred levels), which dropped
    # the slices of a gang with a slice level too: job0 (two 8-GPU pods, slices of 2 per rack)
    # went one pod per rack, the door's validator rejected the plan and returned greedy's as a
    # fallback. The slot model leaves slices out, so it chose job0; no rack holds both pods.
    rnd = gangopt.load_round(REGRESSIONS / "placer-slices-set-aside.json")
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.status != Status.FALLBACK
    assert "job0" not in plan.admitted


# Found by tests/solvers/test_cpsat.py::test_cpsat_plans_reclaims_itself_and_its_bounds_hold_under_queue_policies
# at random (stop 34; also on the code before it). n0 and n2 form one node class: each runs one
# 4-GPU pod of run0 and one of run1 (priority 0, queue q0, elastic). The model shrinks run0 on
# n0 and run1 on n2 and starts job0 (priority 1) and job1 (priority 0) in that class; rule 5's
# node form is read per victim through the class's patterns (encoding._lower_off_losing_nodes),
# so job1 "fits where run0 kept its pod" (n2) and "where run1 kept its pod" (n0) while no node
# of the class lost neither. Expanded to nodes, job1 lands on n0, where run0 lost a pod: the
# door's re-reading of the licences (scope.reclaims_hold) refuses the plan and returns
# greedy's, valid and at every tier bound, but the message blamed a cohort reclaim (until
# h34-rule5: encoding._lower_off_every_losing_node reads the victims jointly per node).
RULE5_TWO_VICTIMS = "cpsat-rule5-two-victims-one-class.json"


def test_two_victims_in_one_class_a_plan_that_breaks_rule_5_is_not_returned() -> None:
    rnd = gangopt.load_round(REGRESSIONS / RULE5_TWO_VICTIMS)
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert "job1" not in plan.admitted  # priority 0 may preempt no one here: it can never start


def test_two_victims_in_one_class_the_model_keeps_rule_5_node_by_node() -> None:
    # Per victim, job1 fitted "where run0 kept its pod" (n2) and "where run1 kept its pod"
    # (n0); jointly per node no node of the class keeps both, so the model leaves job1 waiting
    # and its own plan is returned, proven (fails on 6aa335a and fa1f3b4: greedy's, feasible).
    rnd = gangopt.load_round(REGRESSIONS / RULE5_TWO_VICTIMS)
    plan = gangopt.solve(rnd)
    assert plan.solver == "cpsat" and plan.status == Status.OPTIMAL, plan.message
    assert gangopt.validate(rnd, plan) == []
    assert "cohort reclaim" not in plan.message


def test_two_victims_in_one_class_a_refused_plan_names_the_pod_not_a_reclaim() -> None:
    # The door's note for a plan rule 5's re-reading refuses: job1 (priority 0, same queue)
    # put on n0 where run1 lost a pod is no cohort reclaim; the note said "licence" for both.
    from gangopt.schema import Placement
    from gangopt.solvers.cpsat import _broken_rule_5

    rnd = gangopt.load_round(REGRESSIONS / RULE5_TWO_VICTIMS)
    plan = gangopt.solve(rnd)
    assert _broken_rule_5(rnd, plan) == ""
    job1 = Placement(gang="job1", role="worker", pod="job1-worker-0", node=plan.preemptions[0].nodes[0])
    bad = plan.model_copy(update={"placements": [*plan.placements, job1], "admitted": [*plan.admitted, "job1"]})
    assert gangopt.validate(rnd, bad) != []
    note = _broken_rule_5(rnd, bad)
    assert "job1" in note and "reclaim" not in note, note


# Found by the nightly profile of the same property test (also on 6aa335a and fa1f3b4): nodes
# n0 and n1 form one class, each full with a pod of run0 (4 GPUs), run2 and run6 (2 each); q0
# lists a nominal, so the model asks a victim for one witness class where it loses a pod and
# a gang that may preempt it lands (encoding._victim_needs_beneficiary). It shrinks run0 on n0,
# where job0 lands, and run6 on n1, where no new pod fits: rule 5's beneficiary is read per
# class, not per node. The validator refused CP-SAT's plan and greedy's was returned
# (fallback; greedy shrinks run0 and run6 both on n1, where job0 lands), until h35-rule5b:
# the witness literal now needs a beneficiary's pod routed to a pattern where the victim
# itself loses pods (encoding._lower_off_every_losing_node).
RULE5_BENEFICIARY = "cpsat-rule5-beneficiary-on-another-node.json"


@pytest.mark.parametrize("fixture", [RULE5_TWO_VICTIMS, RULE5_BENEFICIARY])
def test_a_rule_5_round_gets_a_valid_plan_at_greedys_tiers(fixture: str) -> None:
    # Both rounds' optimum is greedy's tiers: the model's plan (once the door's fallback) is
    # valid and equals them.
    rnd = gangopt.load_round(REGRESSIONS / fixture)
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    greedy = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, greedy) == []
    assert [t.value for t in plan.score.tiers] == [t.value for t in greedy.score.tiers]


def test_a_victim_whose_beneficiary_lands_on_another_node_of_its_class_the_model_keeps_rule_5() -> None:
    # The model's own plan, proven (fails on 3f6be61: greedy's, status fallback): run6 now
    # shrinks on the node where job0 lands, beside run0, and every bound holds.
    rnd = gangopt.load_round(REGRESSIONS / RULE5_BENEFICIARY)
    plan = gangopt.solve(rnd)
    assert plan.solver == "cpsat" and plan.status == Status.OPTIMAL, plan.message
    assert gangopt.validate(rnd, plan) == []
    landed = {p.node for p in plan.placements if p.gang == "job0"}
    for pre in plan.preemptions:
        assert set(pre.nodes) & landed, pre
    for tier in plan.score.tiers:
        assert tier.value <= tier.bound + 1e-9
    assert plan.score.secondary_bound is not None
    assert plan.score.secondary <= plan.score.secondary_bound + 1e-9


def test_a_witness_class_of_several_nodes_needs_the_beneficiary_on_a_losing_node() -> None:
    # The encoding itself. CP-SAT's refused plan and the valid one agree at class level (run0
    # and run6 each lose one pod on {n0, n1}, one pod of job0 lands there); they differ in the
    # patterns only: n0 keeps run6 and n1 loses it (no 4-GPU slot left there for job0) against
    # n0 losing both. The model now refuses the first layout (fails on 3f6be61: feasible) and
    # keeps the second; greedy's plan (both shrinks on n1, with job0) stays a model solution.
    rnd = gangopt.load_round(REGRESSIONS / RULE5_BENEFICIARY)
    enc = encode(prefilter(rnd))
    assert not enc.stricter
    cm = next(cm for cm in enc.classes if cm.cls.size == 2)
    names = [rnd.running[gi].name for gi, _ in cm.entries]
    assert names == ["run0", "run2", "run6"]
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    values = plan_values(enc, plan)

    def layout(*kept: tuple[int, ...]) -> dict[int, int]:
        z = {var.index: sum(p.kept == want for want in kept) for p, var in zip(cm.patterns, cm.z, strict=True)}
        return {**values, **z}

    assert complete(enc, layout((0, 1, 1), (1, 1, 0)), 5.0, 0) is None  # run6 loses on n1, job0 on n0
    assert complete(enc, layout((0, 1, 0), (1, 1, 1)), 5.0, 0) is not None
    greedy_plan = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, greedy_plan) == []
    assert complete(enc, plan_values(enc, greedy_plan), 5.0, 0) is not None
