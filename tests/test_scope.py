"""Queue preemption policies (rule 5, issue 15): the validator's reading and the optimizer's
(:mod:`gangopt.scope`, used by greedy and the peers) agree, and every plan obeys them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gangopt
from gangopt.arrays import IndexArray
from gangopt.objective import ObjectiveTerms, score
from gangopt.reasons import NEVER_THIS_ROUND
from gangopt.schema import Plan, Queue, QueuePreemption, Round, Weights
from gangopt.scope import Scope, licences_after
from gangopt.solvers.greedy import greedy
from gangopt.solvers.greedy.engine import GangView, GreedyEngine, decided
from gangopt.solvers.peers import koordinator_like, kueue_like, volcano_like
from gangopt.validation import validate
from tests.builders import cluster, make_plan, make_round, pending, running
from tests.strategies import POLICIES, examples, rounds

KUEUE_RECLAIM = QueuePreemption(reclaim_within_cohort="any", other_queues="never")


def _refusals(rnd: Round, plan: Plan) -> list[str]:
    """The validator's rule-5 verdicts on who may preempt whom (not its reprieve checks)."""
    return [
        v.message
        for v in validate(rnd, plan)
        if v.rule == "preemption" and ("preempted for" in v.message or "receives new pods" in v.message)
    ]


# ----------------------------------------------------------------------------- the rule, case by case

# (policy of the preemptor's queue a, victim's queue, a's nominal, b's nominal, b's cohort,
#  preemptor priority, victim priority, allowed)
CASES: list[tuple[dict[str, Any], str, int, int, str | None, int, int, bool]] = [
    ({}, "a", 8, 8, "c", 5, 0, True),  # default: strictly lower priority, own queue
    ({}, "a", 8, 8, "c", 0, 0, False),  # same-priority churn within a queue stays forbidden
    ({"reclaim_within_cohort": "any"}, "a", 8, 8, "c", 0, 0, False),  # reclaim is across queues only
    ({"within_queue": "never"}, "a", 8, 8, "c", 5, 0, False),
    ({}, "b", 8, 8, "c", 5, 0, True),  # default: global priorities
    ({"other_queues": "never"}, "b", 8, 8, "c", 5, 0, False),  # b within its nominal
    ({"other_queues": "never"}, "b", 8, 0, "c", 5, 0, True),  # b borrows: reclaim lower_priority
    ({"other_queues": "never", "reclaim_within_cohort": "any"}, "b", 8, 0, "c", 0, 0, True),  # lender reclaims
    ({"other_queues": "never", "reclaim_within_cohort": "any"}, "b", 8, 0, "c", 0, 7, True),  # at any priority
    ({"reclaim_within_cohort": "lower_priority"}, "b", 8, 0, "c", 0, 0, False),
    ({"other_queues": "never", "reclaim_within_cohort": "never"}, "b", 8, 0, "c", 5, 0, False),
    ({"reclaim_within_cohort": "never"}, "b", 8, 0, "c", 5, 0, True),  # other_queues still allows it
    ({"other_queues": "never", "reclaim_within_cohort": "any"}, "b", 8, 0, None, 0, 0, False),  # no cohort
    # a borrows (nominal 0): borrow_within_cohort decides
    ({"other_queues": "never", "reclaim_within_cohort": "any"}, "b", 0, 0, "c", 5, 0, True),
    ({"other_queues": "never", "reclaim_within_cohort": "any"}, "b", 0, 0, "c", 0, 0, False),
    (
        {"other_queues": "never", "reclaim_within_cohort": "any", "borrow_within_cohort": {"policy": "never"}},
        "b", 0, 0, "c", 5, 0, False,
    ),
    (
        {
            "other_queues": "never",
            "reclaim_within_cohort": "lower_priority",
            "borrow_within_cohort": {"max_priority_threshold": 2},
        },
        "b", 0, 0, "c", 5, 3, False,
    ),
    (
        {
            "other_queues": "never",
            "reclaim_within_cohort": "lower_priority",
            "borrow_within_cohort": {"max_priority_threshold": 3},
        },
        "b", 0, 0, "c", 5, 3, True,
    ),
]  # fmt: skip


def _case(policy: dict[str, Any], victim_queue: str, nom_a: int, nom_b: int, cohort_b: str | None,
          p_prio: int, v_prio: int) -> Round:  # fmt: skip
    """One full node: the victim (8 GPUs) runs on it, the preemptor (8 GPUs) waits."""
    return make_round(
        cluster(1),
        queues=[
            Queue(name="a", cohort="c", nominal={"gpu": nom_a}, preemption=QueuePreemption.model_validate(policy)),
            Queue(name="b", cohort=cohort_b, nominal={"gpu": nom_b}),
        ],
        running=[running("v", ["n0"], gpu=8, queue=victim_queue, priority=v_prio)],
        pending=[pending("p", gpu=8, queue="a", priority=p_prio)],
    )


@pytest.mark.parametrize(("policy", "victim_queue", "nom_a", "nom_b", "cohort_b", "p_prio", "v_prio", "allowed"), CASES)
def test_validator_and_optimizer_read_the_rule_alike(
    policy: dict[str, Any],
    victim_queue: str,
    nom_a: int,
    nom_b: int,
    cohort_b: str | None,
    p_prio: int,
    v_prio: int,
    allowed: bool,
) -> None:
    rnd = _case(policy, victim_queue, nom_a, nom_b, cohort_b, p_prio, v_prio)
    plan = make_plan(rnd, place={"p": ["n0"]}, evict={"v": ["p"]})
    assert (_refusals(rnd, plan) == []) is allowed
    assert licences_after(rnd, plan) == {("p", "v"): allowed}
    for solver in (greedy, kueue_like, koordinator_like, volcano_like):
        decided = solver(rnd)
        assert validate(rnd, decided) == []
    # greedy takes the preemption exactly when it is allowed (it is the only way p starts)
    assert greedy(rnd).admitted == (["p"] if allowed else [])


# within_queue lower_or_newer_equal_priority (Kueue LowerOrNewerEqualPriority): (within_queue,
#  preemptor priority, victim priority, preemptor submit_time, victim submit_time, a's nominal,
#  allowed). The victim runs in the preemptor's own queue a.
NEWER_CASES: list[tuple[str, int, int, float, float | None, int, bool]] = [
    ("lower_or_newer_equal_priority", 0, 0, 100.0, 200.0, 8, True),  # equal and newer: yes
    ("lower_or_newer_equal_priority", 0, 0, 200.0, 100.0, 8, False),  # equal and older: no
    ("lower_or_newer_equal_priority", 0, 0, 100.0, 100.0, 8, False),  # submitted together: no
    ("lower_or_newer_equal_priority", 0, 0, 100.0, None, 8, False),  # the victim's time unknown
    ("lower_or_newer_equal_priority", 0, 0, 100.0, 200.0, 6, False),  # a ends above its nominal
    ("lower_or_newer_equal_priority", 5, 0, 200.0, 100.0, 8, True),  # lower priority: as before
    ("lower_or_newer_equal_priority", 0, 5, 100.0, 200.0, 8, False),  # higher priority: never
    ("lower_priority", 0, 0, 100.0, 200.0, 8, False),  # the default keeps equal priorities apart
    ("never", 5, 0, 100.0, 200.0, 8, False),
]


def _newer_case(within: str, p_prio: int, v_prio: int, p_time: float, v_time: float | None, nominal: int) -> Round:
    """One 8-GPU node: the victim (4 GPUs) runs on it, the preemptor (8 GPUs) of the same queue
    a has waited 30 hours (so starting it is worth more than keeping the victim)."""
    policy = QueuePreemption.model_validate({"within_queue": within})
    victim = running("v", ["n0"], gpu=4, queue="a", priority=v_prio).model_copy(update={"submit_time": v_time})
    rnd = make_round(
        cluster(1),
        queues=[Queue(name="a", nominal={"gpu": nominal}, preemption=policy)],
        running=[victim],
        pending=[pending("p", gpu=8, queue="a", priority=p_prio, submit_time=p_time)],
    )
    return rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"now": 30 * 3600.0})})


@pytest.mark.parametrize(("within", "p_prio", "v_prio", "p_time", "v_time", "nominal", "allowed"), NEWER_CASES)
def test_a_newer_gang_of_equal_priority_is_a_victim_only_under_lower_or_newer(
    within: str, p_prio: int, v_prio: int, p_time: float, v_time: float | None, nominal: int, allowed: bool
) -> None:
    rnd = _newer_case(within, p_prio, v_prio, p_time, v_time, nominal)
    plan = make_plan(rnd, place={"p": ["n0"]}, evict={"v": ["p"]})
    assert (_refusals(rnd, plan) == []) is allowed
    assert licences_after(rnd, plan) == {("p", "v"): allowed}
    for solver in (greedy, kueue_like, gangopt.solve):
        decided = solver(rnd)
        assert validate(rnd, decided) == [], solver
        assert decided.admitted == (["p"] if allowed else []), solver


def test_the_validator_names_why_an_equal_priority_victim_is_refused() -> None:
    older = make_plan(r := _newer_case("lower_or_newer_equal_priority", 0, 0, 200.0, 100.0, 8), place={"p": ["n0"]},
                      evict={"v": ["p"]})  # fmt: skip
    assert any("not submitted before the victim" in m for m in _refusals(r, older))
    over = _newer_case("lower_or_newer_equal_priority", 0, 0, 100.0, 200.0, 6)
    plan = make_plan(over, place={"p": ["n0"]}, evict={"v": ["p"]})
    assert any("ends above its nominal on gpu" in m for m in _refusals(over, plan))


def test_default_policies_are_priorities_everywhere() -> None:
    rnd = _case({}, "b", 8, 0, "c", 0, 0)
    scope = Scope(rnd)
    assert scope.plain and not scope.beyond_priority
    assert Queue(name="x").preemption == QueuePreemption()


# ----------------------------------------------------------------------------- scenario


def _lender_round(policy: QueuePreemption) -> Round:
    """a and b share a cohort with 8 GPUs of nominal each; b runs two 8-GPU gangs (it borrows a's
    8); a's 8-GPU gang of the same priority waits."""
    return make_round(
        cluster(2),
        queues=[
            Queue(name="a", cohort="c", nominal={"gpu": 8}, preemption=policy),
            Queue(name="b", cohort="c", nominal={"gpu": 8}, preemption=policy),
        ],
        running=[running("b1", ["n0"], gpu=8, queue="b"), running("b2", ["n1"], gpu=8, queue="b")],
        pending=[pending("a1", gpu=8, queue="a")],
    )


def test_a_lender_reclaims_its_nominal_from_a_same_priority_borrower() -> None:
    rnd = _lender_round(KUEUE_RECLAIM)
    for solver in (greedy, kueue_like, koordinator_like):
        plan = solver(rnd)
        assert validate(rnd, plan) == []
    for solver in (greedy, kueue_like):
        plan = solver(rnd)
        assert plan.admitted == ["a1"]
        assert [(p.gang, p.kind, p.for_gangs) for p in plan.preemptions] in (
            [("b1", "evict", ["a1"])],
            [("b2", "evict", ["a1"])],
        )
    # with no cohort licence (other_queues and reclaim_within_cohort never) the Koordinator-like
    # emulation does not reclaim either (its import maps the revoke to reclaim_within_cohort any)
    assert (
        koordinator_like(_lender_round(QueuePreemption(other_queues="never", reclaim_within_cohort="never"))).admitted
        == []
    )
    # the cpsat door reclaims too (Weights.guarantee values the lender's nominal): its model
    # licenses the reclaim itself, so it proves the plan optimal
    solved = gangopt.solve(rnd)
    assert validate(rnd, solved) == []
    assert solved.admitted == ["a1"] and len(solved.preemptions) == 1
    assert solved.status == "optimal" and solved.gap == 0.0
    assert solved.score.secondary_bound == solved.score.secondary


def test_a_queue_that_is_not_reclaimable_keeps_what_it_borrows() -> None:
    """Volcano's ``reclaimable: false`` on the borrower b: the same lender's gang waits under
    every solver, and the validator refuses a plan that reclaims from b anyway (naming why);
    b reclaimable (the default), the lender's gang starts."""
    rnd = _lender_round(KUEUE_RECLAIM)
    kept = rnd.model_copy(
        update={"queues": [rnd.queues[0], rnd.queues[1].model_copy(update={"reclaimable": False})]}
    )
    for name in ("cpsat", "greedy", "kueue_like", "koordinator_like", "volcano_like"):
        plan = gangopt.solve(kept, solver=name)
        assert validate(kept, plan) == [] and plan.admitted == [] and plan.preemptions == [], name
    assert gangopt.solve(kept).status == "optimal"
    reclaimed = gangopt.solve(rnd, solver="greedy")
    assert reclaimed.admitted == ["a1"] and validate(rnd, reclaimed) == []
    refusals = _refusals(kept, reclaimed)
    assert refusals and all("queue b is not reclaimable" in m for m in refusals)
    assert Scope(kept).reclaim_needs(kept.pending[0], kept.running[0]) == "never"
    assert Scope(rnd).reclaim_needs(rnd.pending[0], rnd.running[0]) == "within_nominal"


def test_the_guarantee_is_weighed_against_lost_work() -> None:
    rnd = _lender_round(KUEUE_RECLAIM)
    # b's gangs are borrowed work: kept at urgency 1, so taking them back loses no tier value
    assert ObjectiveTerms.of(rnd).reclaimable == {"b1", "b2"}
    assert ObjectiveTerms.of(_lender_round(QueuePreemption())).reclaimable == frozenset()
    reclaim = make_plan(rnd, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
    assert score(rnd, reclaim).tiers == score(rnd, make_plan(rnd)).tiers
    idle = make_plan(rnd)
    gain = score(rnd, reclaim).secondary - score(rnd, idle).secondary
    # a's 8 GPUs within its nominal at guarantee 2.0, less b1's restart (8 GPUs x 300 s)
    assert gain == pytest.approx(8 * 2.0 - 8 * 300 / 3600, abs=0.1)
    # the break-even: 16 GPU-equivalents against 8 x (t + 300 s) / 3600 GPU-hours, t = 6,900 s
    for since, worth in ((6800.0, True), (7000.0, False)):
        late = rnd.model_copy(
            update={"running": [g.model_copy(update={"seconds_since_checkpoint": since}) for g in rnd.running]}
        )
        swap = make_plan(late, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
        assert (score(late, swap).secondary > score(late, make_plan(late)).secondary) is worth
    off = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"weights": Weights(guarantee=0.0)})})
    assert score(off, reclaim).secondary < score(off, idle).secondary
    plain = _lender_round(QueuePreemption())  # no queue reclaims at any priority: no guarantee term
    swap = make_plan(plain, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
    loss = score(plain, swap).secondary - score(plain, make_plan(plain)).secondary
    assert loss == pytest.approx(-8 * 300 / 3600, abs=0.1)


def test_without_the_policy_equal_priorities_never_preempt_each_other() -> None:
    rnd = _lender_round(QueuePreemption())
    for solver in (greedy, kueue_like, koordinator_like, volcano_like, gangopt.solve):
        plan = solver(rnd)
        assert validate(rnd, plan) == [] and plan.preemptions == [] and plan.admitted == []
    # and a hand-made reclaim is rejected
    forced = make_plan(rnd, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
    assert _refusals(rnd, forced)


def test_reclaim_takes_back_only_what_the_victims_queue_borrows() -> None:
    # b borrows 8 (16 of nominal 8): evicting both b gangs would take it below its nominal
    rnd = make_round(
        cluster(2),
        queues=[
            Queue(name="a", cohort="c", nominal={"gpu": 8}, preemption=KUEUE_RECLAIM),
            Queue(name="b", cohort="c", nominal={"gpu": 8}),
        ],
        running=[running("b1", ["n0"], gpu=8, queue="b"), running("b2", ["n1"], gpu=8, queue="b")],
        pending=[pending("a1", gpu=8, queue="a"), pending("a2", gpu=8, queue="a")],
    )
    plan = greedy(rnd)
    assert validate(rnd, plan) == []
    assert plan.admitted == ["a1"] and len(plan.preemptions) == 1
    both = make_plan(rnd, place={"a1": ["n0"], "a2": ["n1"]}, evict={"b1": ["a1"], "b2": ["a2"]})
    assert _refusals(rnd, both)


# ----------------------------------------------------------------------------- property


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds(), policies=st.lists(POLICIES, min_size=2, max_size=2))
def test_random_rounds_with_random_queue_policies_give_valid_plans(rnd: Round, policies: list[QueuePreemption]) -> None:
    queues = [q.model_copy(update={"preemption": p}) for q, p in zip(rnd.queues, policies, strict=False)]
    rnd = Round.model_validate({**rnd.model_dump(), "queues": [q.model_dump() for q in queues]})
    for solver in (greedy, kueue_like, koordinator_like, volcano_like):
        plan = solver(rnd)
        assert validate(rnd, plan) == [], solver.__name__
        assert all(licences_after(rnd, plan).values())


def _with_policies(rnd: Round, policies: list[QueuePreemption]) -> Round:
    queues = [q.model_copy(update={"preemption": p}) for q, p in zip(rnd.queues, policies, strict=False)]
    return Round.model_validate({**rnd.model_dump(), "queues": [q.model_dump() for q in queues]})


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds(max_nodes=6, max_pending=4), policies=st.lists(POLICIES, min_size=2, max_size=2))
def test_cpsat_plans_keep_random_queue_policies(rnd: Round, policies: list[QueuePreemption]) -> None:
    rnd = _with_policies(rnd, policies)
    rnd = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"time_limit": 2.0, "hard_limit": False})})
    plan = gangopt.solve(rnd)
    assert validate(rnd, plan) == []


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds(), policies=st.lists(POLICIES, min_size=2, max_size=2))
def test_a_queue_within_its_nominal_loses_work_only_to_priorities_it_yields_to(
    rnd: Round, policies: list[QueuePreemption]
) -> None:
    """Plain arithmetic on the plan, neither reading: a victim whose queue is not above its
    nominal even with the victim's pods back lost them only to a strictly higher priority whose
    queue's policy reaches it (``within_queue`` / ``other_queues``)."""
    rnd = _with_policies(rnd, policies)
    queues = {q.name: q for q in rnd.queues}
    for solver in (greedy, kueue_like, koordinator_like, volcano_like):
        plan = solver(rnd)
        gone = {pod for p in plan.preemptions for pod in p.pods}
        after: dict[str, int] = {}
        for g in rnd.running:
            gpus = {r.name: r.requests.get("gpu", 0) for r in g.roles}
            after[g.queue] = after.get(g.queue, 0) + sum(gpus[p.role] for p in g.pods if p.name not in gone)
        specs = {g.name: g for g in [*rnd.pending, *rnd.running]}
        for p in plan.placements:
            spec = specs[p.gang]
            role = next(r for r in spec.roles if r.name == p.role)
            after[spec.queue] = after.get(spec.queue, 0) + role.requests.get("gpu", 0)
        for pre in plan.preemptions:
            victim = specs[pre.gang]
            queue = queues.get(victim.queue)
            lost = sum(next(r for r in victim.roles if r.name == pod.role).requests.get("gpu", 0)
                       for pod in getattr(victim, "pods", []) if pod.name in pre.pods)  # fmt: skip
            if queue is None or "gpu" not in queue.nominal or after.get(victim.queue, 0) + lost > queue.nominal["gpu"]:
                continue  # the victim's queue borrows (or has no nominal): reclaim may apply
            for name in pre.for_gangs:
                gang = specs[name]
                policy = queues[gang.queue].preemption if gang.queue in queues else QueuePreemption()
                reach = policy.within_queue if gang.queue == victim.queue else policy.other_queues
                if reach == "lower_or_newer_equal_priority" and gang.priority == victim.priority:
                    # the newer-equal licence (rule 5, clause 1): the victim was submitted later
                    assert getattr(victim, "submit_time", None) is not None, (solver.__name__, pre)
                    assert victim.submit_time > gang.submit_time, (solver.__name__, pre)  # type: ignore[union-attr]
                    continue
                assert gang.priority > victim.priority and reach != "never", (solver.__name__, pre)


def test_a_waiting_reason_names_the_policy_that_keeps_a_lower_priority_gang() -> None:
    rnd = make_round(
        cluster(1),
        queues=[Queue(name="a", preemption=QueuePreemption(other_queues="never")), Queue(name="b")],
        running=[running("b1", ["n0"], gpu=8, queue="b", priority=0)],
        pending=[pending("a1", gpu=8, queue="a", priority=5)],
    )
    for solver in ("greedy", "cpsat"):
        plan = gangopt.solve(rnd, solver=solver)
        assert plan.admitted == [] and plan.preemptions == []
        (waiting,) = plan.waiting
        # It may preempt no one (its queue's policy) and n0 is full: it can never start this
        # round, said first (gangopt.reasons.NEVER_THIS_ROUND); the holder is named after.
        assert waiting.reasons[0].startswith(NEVER_THIS_ROUND)
        assert "held by running b1 (queue b; queue a's policy other_queues is never)" in waiting.reasons[1]


def _locked_reclaim_round() -> Round:
    """a (reclaim any, never borrow to preempt) waits with a1 (8 GPUs) and a2 (4 GPUs); b runs
    b1 (8 GPUs, preemptible) and b2 (2 GPUs, not preemptible) on two 8-GPU nodes, borrowing 2 of
    a's 8: a1 may take b1 back, but a2 beside it would push a above its nominal."""
    policy = QueuePreemption(
        reclaim_within_cohort="any", other_queues="never", borrow_within_cohort={"policy": "never"}
    )
    return make_round(
        cluster(2),
        queues=[
            Queue(name="a", cohort="c", nominal={"gpu": 8}, preemption=policy),
            Queue(name="b", cohort="c", nominal={"gpu": 8}),
        ],
        running=[
            running("b1", ["n0"], gpu=8, queue="b"),
            running("b2", ["n1"], gpu=2, queue="b", preemptible=False),
        ],
        pending=[pending("a1", gpu=8, queue="a"), pending("a2", gpu=4, queue="a")],
    )


class Unlocked(GreedyEngine):
    """Greedy without the lock that keeps a reclaiming queue within its nominal for the round."""

    def _lock_reclaimers(self, gangs: list[GangView], removed: list[IndexArray]) -> None:
        pass


def test_a_queue_that_reclaimed_stays_within_its_nominal_for_the_round() -> None:
    """a1 takes b1 back (b borrows 2 of a's 8); a2 would then push a above its nominal, which
    with borrow_within_cohort never would void a1's reclaim: greedy keeps a within it."""
    rnd = _locked_reclaim_round()
    unlocked = Unlocked(rnd, "eager").run()
    assert unlocked.admitted == ["a1", "a2"] and not all(licences_after(rnd, unlocked).values())
    plan = greedy(rnd)
    assert validate(rnd, plan) == [] and plan.admitted == ["a1"]
    assert [(p.gang, p.for_gangs) for p in plan.preemptions] == [("b1", ["a1"])]
    (waiting,) = plan.waiting
    assert waiting.code == "quota" and "stays within its nominal 8 gpu" in waiting.reasons[0]


def test_a_plan_whose_reclaims_broke_is_decided_again_without_them() -> None:
    """:func:`~gangopt.solvers.greedy.engine.decided`: an engine whose reclaim no longer holds
    on its finished plan (here: the queue lock switched off) is run again with the static
    licences only, and the plan it returns is valid."""
    rnd = _locked_reclaim_round()
    plan = decided(lambda: Unlocked(rnd, "eager"), Unlocked.run)
    assert validate(rnd, plan) == []
    assert plan.preemptions == [] and plan.admitted == ["a2"]


def test_a_waiting_lender_hears_which_reclaim_policy_keeps_the_borrower() -> None:
    rnd = _lender_round(QueuePreemption(other_queues="never", reclaim_within_cohort="never"))
    rnd = rnd.model_copy(update={"pending": [g.model_copy(update={"priority": 5}) for g in rnd.pending]})
    plan = gangopt.solve(rnd, solver="greedy")
    assert validate(rnd, plan) == [] and plan.admitted == [] and plan.preemptions == []
    (waiting,) = plan.waiting
    assert any(
        "held by running b1 (queue b; queue a's policy other_queues is never, reclaim_within_cohort never)" in r
        for r in waiting.reasons
    ), waiting.reasons


def test_a_cohort_tree_lends_and_reclaims_across_its_branches() -> None:
    """Round.cohorts (hierarchical cohorts, Kueue parentName): a and b sit in sibling cohorts
    under one root, so b borrows a's nominal through the tree and a takes it back; without the
    tree the two cohorts stand alone and no queue's gang is another's victim."""
    flat = _lender_round(KUEUE_RECLAIM)
    queues = [
        flat.queues[0].model_copy(update={"cohort": "vision"}),
        flat.queues[1].model_copy(update={"cohort": "research"}),
    ]
    tree = Round.model_validate(
        {
            **flat.model_dump(),
            "queues": [q.model_dump() for q in queues],
            "cohorts": [{"name": "org"}, {"name": "vision", "parent": "org"}, {"name": "research", "parent": "org"}],
        }
    )
    alone = Round.model_validate({**flat.model_dump(), "queues": [q.model_dump() for q in queues]})
    assert list(tree.cohort_roots.values()) == ["org", "org"]
    for solver in (greedy, kueue_like, gangopt.solve):
        plan = solver(tree)
        assert validate(tree, plan) == [] and plan.admitted == ["a1"] and len(plan.preemptions) == 1, solver
        apart = solver(alone)
        assert validate(alone, apart) == [] and apart.admitted == [] and apart.preemptions == [], solver
    reclaim = make_plan(tree, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
    assert _refusals(tree, reclaim) == []
    assert _refusals(alone, make_plan(alone, place={"a1": ["n0"]}, evict={"b1": ["a1"]}))
