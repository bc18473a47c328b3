"""Waiting reasons (issue 17): every failing check, the code by a fixed order, numbers that hold,
and a fix that works.

The counterfactual property test re-solves a random small round with the change a waiting
gang's reasons name (``bench/reasons_truth.py``: remove the named gangs, raise the named quota
by the missing amount, add usable nodes, drop the selector or the required level, ungroup) and
asserts the gang is then admitted. The numbers the texts quote are recomputed here from the
round and the plan, with the validator's own reading of eligibility.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import gangopt
from bench.reasons_truth import apply_fix, combined, current_fixes, measure, solve_exact
from bench.rounds import fragmented_spec
from gangopt import reasons, validation
from gangopt.explain import summary
from gangopt.objective import ObjectiveTerms
from gangopt.quantities import human
from gangopt.reasons import CHECK_ORDER, Check, waiting_checks, waiting_reasons
from gangopt.replay.generate import generate
from gangopt.schema import PendingGang, Plan, Round, Status
from gangopt.solvers import SOLVERS
from tests.builders import cluster, make_round, pending, queue, running
from tests.strategies import examples, rounds

PROPERTY = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _gang(rnd: Round, name: str) -> PendingGang:
    return next(g for g in rnd.pending if g.name == name)


# ----------------------------------------------------------------------------- properties


def test_the_fix_a_reason_names_admits_the_gang() -> None:
    """On random small rounds proven optimal (a fixed, derandomized sample of the strategy), each
    waiting gang's fixes (all of its failing checks at once) admit it in the re-solved round.

    Counted over the sample rather than asserted per gang: a fix is judged against this plan's
    placements, and a re-solve may place the admitted gangs otherwise (a partner of an
    ungrouped gang that now fits where the plan had put someone else); issue 17 asks for 98 %.
    ``python -m bench.reasons_truth`` runs the same measure on 600 rounds."""
    tally = measure(examples(40), current_fixes)
    assert tally.judged >= examples(40) // 2
    assert tally.share >= 0.98, (tally.true, tally.judged, tally.examples)


@PROPERTY
@given(rounds(max_nodes=10, max_pending=6, max_running=5))
def test_reasons_quote_numbers_that_hold_and_outrankers_that_outrank(rnd: Round) -> None:
    """Every quoted need and free amount matches an independent count; every gang named as an
    outranker has strictly higher priority; the code is the first failing check's."""
    plan = solve_exact(rnd)
    waits = {w.gang: w for w in plan.waiting}
    for name, checks in waiting_checks(rnd, plan).items():
        gang = _gang(rnd, name)
        assert [c.rank for c in checks] == sorted(c.rank for c in checks)
        assert waits[name].code == checks[0].code
        assert waits[name].reasons == [c.text for c in checks]
        for check in checks:
            prio = {g.name: g.priority for g in [*rnd.pending, *rnd.running]}
            assert all(prio[r] > gang.priority for r in check.rivals), check.text
            if check.code == "outranked":
                assert check.rivals, check.text
            _assert_numbers(rnd, plan, gang, check, {r for c in checks for r in c.fix.free_roles})


def _assert_numbers(rnd: Round, plan: Plan, gang: PendingGang, check: Check, freed: set[str]) -> None:
    """``freed``: roles an eligibility check frees (the other checks count as if it were done)."""
    if check.resource is None:
        return
    res = check.resource
    assert check.need is not None and check.free is not None
    assert check.need == _need(rnd, gang, res), check.text
    if check.code == "quota":
        assert check.limit is not None
        expected = _quota_bound(rnd, check.limit, res) if check.never else _quota_headroom(rnd, plan, gang, check)
        assert check.free == expected, check.text
    elif check.text.startswith(reasons.NEVER_THIS_ROUND):
        assert check.free == _room(rnd, plan, gang, res, None, freed, empty=True, before=True), check.text
    elif check.never and check.code == "capacity":
        assert check.free == _room(rnd, plan, gang, res, None, freed, empty=True), check.text
    elif not check.never:
        assert check.free == _room(rnd, plan, gang, res, check.limit, freed, empty=False), check.text
    assert human(check.need, res) in check.text and human(check.free, res) in check.text


def _need(rnd: Round, gang: PendingGang, res: str) -> int:
    counts = ObjectiveTerms.of(rnd).min_pods(gang)
    return sum(r.requests.get(res, 0) * counts[r.name] for r in gang.roles)


def _victims(rnd: Round, gang: PendingGang) -> set[str]:
    """Running gangs ``gang`` may preempt: rule 5, read from the docs."""
    if not rnd.policy.preemption:
        return set()
    return {r.name for r in rnd.running if r.preemptible and r.priority < gang.priority}


def _usage_after(rnd: Round, plan: Plan) -> list[tuple[str, str, str, dict[str, int]]]:
    """(gang, queue, node, requests) of every pod after the plan."""
    removed = {p for pre in plan.preemptions for p in pre.pods}
    roles = {(g.name, r.name): r.requests for g in [*rnd.pending, *rnd.running] for r in g.roles}
    queues = {g.name: g.queue for g in [*rnd.pending, *rnd.running]}
    out = [
        (g.name, g.queue, p.node, roles[(g.name, p.role)]) for g in rnd.running for p in g.pods if p.name not in removed
    ]
    out += [(p.gang, queues[p.gang], p.node, roles[(p.gang, p.role)]) for p in plan.placements]
    return out


def _room(
    rnd: Round,
    plan: Plan,
    gang: PendingGang,
    res: str,
    where: str | None,
    freed: set[str],
    *,
    empty: bool,
    before: bool = False,
) -> int:
    """Free ``res`` after the plan (or on the empty cluster, or with ``before`` before the round:
    every running pod in place but those of gangs it may preempt, none new) on the nodes some
    role of the gang's minimum may use (the validator's eligibility), within the named domain,
    counting the pods of gangs it may preempt."""
    counts = ObjectiveTerms.of(rnd).min_pods(gang)
    level, domain = where.split(" ", 1) if where else (None, None)
    free: dict[str, int] = {}
    # Rule 5: a node where a gang of its priority or higher lost pods takes only higher priorities.
    prio = {g.name: g.priority for g in rnd.running}
    pod_node = {p.name: p.node for g in rnd.running for p in g.pods}
    kept = (
        set()
        if empty
        else {pod_node[p] for pre in plan.preemptions if prio[pre.gang] >= gang.priority for p in pre.pods}
    )
    for node in rnd.cluster.nodes:
        if node.name in kept:
            continue
        if not any(
            counts[r.name] and (node.schedulable if r.name in freed else not validation.ineligibility(node, r))
            for r in gang.roles
        ):
            continue
        if level is not None and (node.name if level == "node" else node.topology.get(level)) != domain:
            continue
        free[node.name] = node.capacity.get(res, 0)
    if before:  # every running pod in place, but those of gangs it may preempt
        victims = _victims(rnd, gang)
        for g in rnd.running:
            if g.name in victims:
                continue
            requests = {r.name: r.requests for r in g.roles}
            for p in g.pods:
                if p.node in free:
                    free[p.node] -= requests[p.role].get(res, 0)
    if not empty:
        victims = _victims(rnd, gang)
        for owner, _, node_name, requests in _usage_after(rnd, plan):
            if node_name in free and owner not in victims:
                free[node_name] -= requests.get(res, 0)
    return sum(max(0, v) for v in free.values())


def _scope(rnd: Round, limit: str, res: str) -> tuple[set[str], int]:
    """The queues a limit named in a text sums over, and its amount."""
    name = re.search(r"'([^']+)'", limit)
    assert name is not None
    if limit.startswith("cohort"):
        members = [q for q in rnd.queues if q.cohort == name.group(1) and res in q.nominal]
        return {q.name for q in members}, sum(q.nominal[res] for q in members)
    q = next(q for q in rnd.queues if q.name == name.group(1))
    if "borrowing" in limit:
        return {q.name}, q.nominal[res] + q.borrowing_limit[res]
    return {q.name}, q.nominal[res]


def _quota_bound(rnd: Round, limit: str, res: str) -> int:
    queues, amount = _scope(rnd, limit, res)
    before = 0
    for g in rnd.running:
        if g.queue in queues:
            roles = {r.name: r.requests for r in g.roles}
            before += sum(roles[p.role].get(res, 0) for p in g.pods)
    return max(amount, before)


def _quota_headroom(rnd: Round, plan: Plan, gang: PendingGang, check: Check) -> int:
    assert check.limit is not None and check.resource is not None
    queues, _ = _scope(rnd, check.limit, check.resource)
    victims = _victims(rnd, gang)
    used = sum(
        requests.get(check.resource, 0)
        for owner, q, _, requests in _usage_after(rnd, plan)
        if q in queues and owner not in victims
    )
    return _quota_bound(rnd, check.limit, check.resource) - used


# ----------------------------------------------------------------------------- scenarios


def test_quota_is_not_blamed_when_the_queue_has_room() -> None:
    """Issue 17: 'has no quota left' with 100 GPUs of the queue free. The queue has quota; the
    room went to a higher-priority gang, which is named."""
    rnd = make_round(
        cluster(2, gpus=8),
        queues=[queue("team", nominal={"gpu": 100})],
        pending=[
            pending("high", replicas=2, gpu=8, priority=5, queue="team"),
            pending("low", replicas=2, gpu=8, priority=1, queue="team"),
        ],
    )
    plan = gangopt.solve(rnd)
    (wait,) = plan.waiting
    assert (wait.gang, wait.code) == ("low", "outranked")
    assert wait.reasons == [
        "no room for its minimum of 2 pods: needs 16 gpu, the nodes it may use have 0 gpu free after this plan; "
        "room taken by higher-priority high (priority 5)"
    ]


def test_quota_text_names_the_limit_the_resource_and_the_shortfall() -> None:
    rnd = make_round(
        cluster(4, gpus=8),
        queues=[
            queue("a", nominal={"gpu": 8}, cohort="c", borrowing_limit={"gpu": 4}),
            queue("b", nominal={"gpu": 24}, cohort="c"),
        ],
        pending=[pending("big", replicas=2, gpu=8, queue="a")],
    )
    plan = gangopt.solve(rnd)
    (wait,) = plan.waiting
    assert wait.code == "quota"
    assert wait.reasons == [
        "can never run under queue 'a' nominal + borrowing limit (12 gpu): its minimum needs 16 gpu, "
        "the limit allows 12 gpu"
    ]


def test_waiting_for_quota_names_the_higher_priority_users() -> None:
    rnd = make_round(
        cluster(4, gpus=8),
        queues=[queue("a", nominal={"gpu": 16})],
        running=[running("busy", ["n0"], gpu=8, priority=5, queue="a")],
        pending=[pending("job", replicas=2, gpu=8, priority=1, queue="a")],
    )
    plan = gangopt.solve(rnd)
    (wait,) = plan.waiting
    assert wait.code == "quota"
    assert wait.reasons == [
        "waits for quota: queue 'a' nominal quota (16 gpu) has 8 gpu free after this plan; its minimum needs "
        "16 gpu, 8 gpu more; used by higher-priority busy (priority 5)"
    ]


def test_same_priority_competition_is_not_called_outranked() -> None:
    """Two gangs of one priority, room for one: the other lost on value/age, it was not outranked."""
    rnd = make_round(
        cluster(1, gpus=8),
        pending=[
            pending("old", replicas=1, gpu=8, priority=2, submit_time=0.0),
            pending("new", replicas=1, gpu=8, priority=2, submit_time=3600.0),
        ],
    )
    plan = gangopt.solve(rnd)
    (wait,) = plan.waiting
    assert (wait.gang, wait.code) == ("new", "capacity")
    assert "lost on value/age to old (same priority 2)" in wait.reasons[0]
    assert "higher-priority" not in wait.reasons[0]


def test_only_pods_this_gang_may_preempt_count_as_room() -> None:
    """A running gang of priority 3 is preemptible by the priority-5 gang, not by the priority-3
    one: its room counts for the first only, and the second is told who holds it."""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("mid", ["n0", "n1"], gpu=8, priority=3)],
        pending=[pending("peer", replicas=1, gpu=8, priority=3)],
        preemption=True,
    )
    plan = gangopt.solve(rnd)
    (wait,) = plan.waiting
    assert wait.code == "capacity"
    # It may preempt no one and no node has room: it can never start this round (said first).
    assert wait.reasons[0].startswith(reasons.NEVER_THIS_ROUND)
    assert wait.reasons[1:] == [
        "no room for its minimum of 1 pod: needs 8 gpu, the nodes it may use have 0 gpu free after this plan; "
        "held by running mid (priority 3, not lower)"
    ]


def test_every_failing_check_is_listed_in_the_fixed_order() -> None:
    """A gang that cannot fit its taint-free nodes, is over its quota and is grouped: all three."""
    rnd = make_round(
        cluster(2, gpus=8, taints={"n1": [("dedicated", "infra", "NoSchedule")]}),
        queues=[queue("a", nominal={"gpu": 8}), queue("b")],
        running=[running("other", ["n0"], gpu=8, priority=9, preemptible=False, queue="b")],
        pending=[
            pending("job", replicas=2, gpu=8, queue="a", group="g"),
            pending("mate", replicas=1, gpu=1, queue="b", group="g"),
        ],
    )
    checks = waiting_checks(rnd, gangopt.solve(rnd))["job"]
    # The group check is "never": mate (1 gpu) may preempt no one and n0, the node it may use,
    # is full, so it can never start this round (reasons.NEVER_THIS_ROUND).
    assert [(c.code, c.never) for c in checks] == [("capacity", True), ("quota", True), ("group", True)]
    assert waiting_checks(rnd, gangopt.solve(rnd))["mate"][0].text.startswith(reasons.NEVER_THIS_ROUND)
    assert [c.rank for c in checks] == sorted(c.rank for c in checks)
    assert checks[0].text.startswith("can never run on this cluster: needs 16 gpu for its minimum of 2 pods")


@pytest.mark.parametrize("solver", sorted(SOLVERS))
@pytest.mark.parametrize("requests", [{}, {"gpu": 1}], ids=["no-requests", "gpu"])
def test_a_round_without_nodes_gets_a_valid_plan_and_says_so(solver: str, requests: dict[str, int]) -> None:
    """A round whose cluster has no nodes (the service's fuzzing found it: the waiting reasons
    raised IndexError with empty requests, ValueError otherwise) gets a valid plan from every
    solver, and the gang's reasons say the cluster is empty rather than that it is cordoned."""
    rnd = Round.model_validate(
        {
            "cluster": {"nodes": []},
            "pending": [{"name": "g", "roles": [{"name": "w", "replicas": 2, "requests": requests}]}],
        }
    )
    plan = gangopt.solve(rnd, solver=solver)
    assert validation.validate(rnd, plan) == []
    assert [w.gang for w in plan.waiting] == ["g"]
    checks = waiting_checks(rnd, plan)["g"]
    assert ("capacity", True) in [(c.code, c.never) for c in checks]
    assert all("cordoned" not in c.text for c in checks)
    assert any("no nodes" in c.text for c in checks)


def _free_room_round(case: str) -> Round:
    """Two 8-GPU nodes, each running a 1-GPU priority-0 job (7 GPUs free on each)."""
    runs = [running("run0", ["n0"], priority=0), running("run1", ["n1"], priority=0)]
    if case == "priority 0":  # a priority-5 gang takes a node; the priority-0 one may preempt no one
        return make_round(
            cluster(2), running=runs, pending=[pending("high", 1, 8, priority=5), pending("low", 1, 8)], preemption=True
        )
    if case == "preemption off":
        return make_round(cluster(2), running=runs, pending=[pending("low", 1, 8, priority=5)], preemption=False)
    # one node: the first priority-5 gang evicts the job, the second lost on value/age
    return make_round(
        cluster(1),
        running=runs[:1],
        pending=[pending("high", 1, 8, priority=5), pending("low", 1, 8, priority=5, submit_time=3600.0)],
        preemption=True,
    )


@pytest.mark.parametrize(
    ("case", "never", "why"),
    [
        ("priority 0", True, "no running gang it may preempt"),
        ("preemption off", True, "preemption is off"),
        ("may preempt", False, None),
    ],
)
def test_a_gang_that_can_never_start_this_round_is_told_so_and_the_fix_starts_it(
    case: str, never: bool, why: str | None
) -> None:
    """A gang that may preempt no running pod, whose minimum does not fit in the free room of
    the nodes it may use, can never start this round (rule 5 keeps it off every node a
    preemption frees): the code says so before any "waits" check, the text names the free
    room and that it may preempt no one, no gang is named as ahead of it, and the check's fix
    (empty nodes added) starts it when the round is solved again. The same gang that may
    preempt the job is told something else. On the fragmented 4,096-node round 49 such
    gangs read "behind waiting higher-priority …", which removing those gangs did not change."""
    rnd = _free_room_round(case)
    plan = solve_exact(rnd)
    assert gangopt.validate(rnd, plan) == []
    checks = waiting_checks(rnd, plan)["low"]
    first = checks[0]
    assert first.text.startswith(reasons.NEVER_THIS_ROUND) is never, first.text
    if not never:
        assert not any(c.never for c in checks)
        return
    assert (first.code, first.never) == ("capacity", True)
    assert [w.code for w in plan.waiting if w.gang == "low"] == ["capacity"]
    assert "no node it may use has room for one pod of role 'worker' (8 gpu) before this round" in first.text
    assert "(at most 7 gpu free on one)" in first.text and why is not None and why in first.text
    assert not any("behind waiting" in c.text for c in checks)
    assert "low" in solve_exact(apply_fix(rnd, "low", current_fixes(rnd, plan)[0][1])).admitted
    if case == "priority 0":  # the cause is not the higher-priority gang: without it, still waiting
        assert "low" not in solve_exact(apply_fix(rnd, "low", reasons.Fix(remove=("high",)))).admitted


def test_check_order_is_documented() -> None:
    """docs/plan-semantics.md lists the codes in CHECK_ORDER's order."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "plan-semantics.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Waiting reasons") :]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \| (never|waits|-) \|", section, flags=re.M)
    assert [(code, kind == "never") for _, code, kind in rows] == list(CHECK_ORDER)


# ----------------------------------------------------------------------------- one source


def test_explain_and_k8s_and_the_plan_show_the_same_reasons() -> None:
    """The finisher's reasons are what explain prints and what a status patch carries."""
    from gangopt.k8s.export import _condition  # the status patch's condition builder

    rnd = make_round(
        cluster(1, gpus=8),
        pending=[pending("a", gpu=8, priority=2), pending("b", gpu=8, priority=1)],
    )
    plan = gangopt.solve(rnd)
    assert plan.waiting == waiting_reasons(rnd, plan)
    (wait,) = plan.waiting
    text = summary(rnd, plan)
    assert wait.reasons[0][:60] in text
    assert _condition("GangoptScheduled", wait.code, wait, "now")["message"] == "; ".join(wait.reasons)


def test_reasons_count_waiting_gangs_per_code_on_a_contended_round() -> None:
    """Every waiting gang gets a reason; on a contended generated round no reason is 'policy'
    for a plan proven optimal."""
    from gangopt.replay.generate import generate, size_spec

    rnd, _ = generate(size_spec("S", seed=1, contention=True))
    plan = gangopt.solve(rnd)
    codes: Counter[str] = Counter(w.code for w in plan.waiting)
    assert sum(codes.values()) == len(rnd.pending) - len(plan.admitted)
    if plan.status == Status.OPTIMAL:
        assert codes["policy"] == 0


def test_reasons_need_no_prefilter() -> None:
    """The finisher passes its prefiltered round; the reasons read the plan alone."""
    rnd = make_round(cluster(1, gpus=8), pending=[pending("a", gpu=8), pending("b", gpu=8)])
    plan = gangopt.solve(rnd)
    assert reasons.waiting_reasons(rnd, plan) == reasons.waiting_reasons(rnd, plan, None)


# ----------------------------------------------------------------------------- the time limit


def _validated_greedy(rnd: Round) -> Plan:
    """Greedy's plan of ``rnd`` (not annotated), checked by the validator."""
    plan = gangopt.solve(rnd, solver="greedy", annotate=False)
    assert gangopt.validate(rnd, plan) == []
    return plan


def _three_waiting() -> tuple[Round, Plan]:
    """One 8-GPU node, four gangs of 8 GPUs at three priorities: three wait (greedy's plan)."""
    rnd = make_round(
        cluster(1, gpus=8),
        pending=[
            pending("low", gpu=8, priority=0),
            pending("mid", gpu=8, priority=5),
            pending("top", gpu=8, priority=9),
            pending("mid2", gpu=8, priority=5),
        ],
    )
    return rnd, _validated_greedy(rnd)


def test_a_passed_deadline_leaves_every_gang_with_the_solvers_own_reason_marked_unchecked() -> None:
    rnd, plan = _three_waiting()
    assert waiting_checks(rnd, plan, deadline=0.0) == {}
    cut = waiting_reasons(rnd, plan, deadline=0.0)
    own = {w.gang: w for w in plan.waiting}
    assert [w.gang for w in cut] == [g.name for g in rnd.pending if g.name not in plan.admitted]
    for w in cut:
        assert w.code == own[w.gang].code
        assert w.reasons == [*own[w.gang].reasons, reasons.UNCHECKED]


def test_a_passed_deadline_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the deadline before the first gang, the plan's view (0.6 CPU-s on the fragmented XL
    round, for no check) is not built."""
    rnd, plan = _three_waiting()

    def view(*_: object) -> None:
        raise AssertionError("the plan's view was built past the deadline")

    monkeypatch.setattr(reasons, "_PlanView", view)
    assert waiting_checks(rnd, plan, deadline=0.0) == {}
    with pytest.raises(AssertionError, match="past the deadline"):
        waiting_checks(rnd, plan, deadline=float("inf"))


def test_a_view_that_would_end_past_the_deadline_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """``setup`` (the view's expected seconds) ending past the deadline: nothing is built (at XL
    the view is 0.37-0.41 CPU-s, which built for no gang only delays the end); ending before it,
    the gangs are checked."""
    rnd, plan = _three_waiting()
    soon = time.perf_counter() + 60.0
    assert waiting_checks(rnd, plan, deadline=soon, setup=0.0) == waiting_checks(rnd, plan)

    def view(*_: object) -> None:
        raise AssertionError("the plan's view was built past the deadline")

    monkeypatch.setattr(reasons, "_PlanView", view)
    assert waiting_checks(rnd, plan, deadline=soon, setup=120.0) == {}
    cut = waiting_reasons(rnd, plan, deadline=soon, setup=120.0)
    assert cut and all(w.reasons[-1] == reasons.UNCHECKED for w in cut)


def test_a_cpsat_plan_cut_short_says_policy_and_unchecked() -> None:
    """A plan with no reasons of its own (CP-SAT's before the finisher) gets code ``policy``."""
    rnd, plan = _three_waiting()
    bare = plan.model_copy(update={"waiting": []})
    cut = waiting_reasons(rnd, bare, deadline=0.0)
    assert {w.code for w in cut} == {"policy"}
    assert all(w.reasons == [reasons.UNCHECKED] for w in cut)


def test_a_deadline_not_reached_changes_nothing() -> None:
    rnd, plan = _three_waiting()
    assert waiting_reasons(rnd, plan, deadline=float("inf")) == waiting_reasons(rnd, plan)


class _FakeClock:
    """``time.perf_counter`` for :func:`waiting_checks`: still, except where a check moves it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _clocked_checks(
    monkeypatch: pytest.MonkeyPatch,
    own_seconds: float,
    ahead_seconds: float = 0.0,
    round_: tuple[Round, Plan] | None = None,
) -> tuple[Round, Plan, _FakeClock]:
    """``round_`` (:func:`_three_waiting` by default) under a fake clock that each gang's own
    checks move by ``own_seconds`` and each gang's comparisons (its ahead check) by
    ``ahead_seconds``."""
    rnd, plan = _three_waiting() if round_ is None else round_
    clock = _FakeClock()
    monkeypatch.setattr(reasons.time, "perf_counter", clock)
    own_checks, ahead_check = reasons._own_checks, reasons._ahead_check

    def own(*args: Any, **kwargs: Any) -> Any:
        clock.now += own_seconds
        return own_checks(*args, **kwargs)

    def ahead(*args: Any, **kwargs: Any) -> Any:
        clock.now += ahead_seconds
        return ahead_check(*args, **kwargs)

    monkeypatch.setattr(reasons, "_own_checks", own)
    monkeypatch.setattr(reasons, "_ahead_check", ahead)
    return rnd, plan, clock


def _four_shapes() -> tuple[Round, Plan]:
    """One 8-GPU node, five gangs of 8 GPUs at five priorities: four wait, no two alike."""
    rnd = make_round(
        cluster(1, gpus=8),
        pending=[pending(f"p{p}", gpu=8, priority=p) for p in (1, 3, 5, 7, 9)],
    )
    return rnd, _validated_greedy(rnd)


def test_the_highest_priority_waiting_gangs_are_checked_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each gang's own checks take 0.3 s (the comparisons none): by a deadline of 1.0 three
    gangs are checked, highest priority first; the fourth's, expected to take as long as the
    second's and third's (the first's build the view's lazy parts and count in ``setup``),
    would end past it (0.9 + 0.3), so they do not start, though the clock is still before it."""
    rnd, plan, _ = _clocked_checks(monkeypatch, own_seconds=0.3, round_=_four_shapes())
    monkeypatch.setattr(reasons, "COMPARISONS_SHARE", 0.0)
    assert list(waiting_checks(rnd, plan, deadline=1.0)) == ["p3", "p5", "p7"]  # input order; p1 left out


def test_the_checks_clock_expects_the_comparisons_as_a_share_until_it_has_timed_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """:class:`reasons._ChecksClock`: the next gang's own checks are expected to take their mean
    so far, the first aside (it builds the view's lazy parts), and each comparison
    :data:`reasons.COMPARISONS_SHARE` of that until one is timed, then the comparisons' mean."""
    clock = _FakeClock()
    monkeypatch.setattr(reasons.time, "perf_counter", clock)
    monkeypatch.setattr(reasons, "COMPARISONS_SHARE", 0.5)
    checks = reasons._ChecksClock(1.0)
    checks.own(0.9)  # the first
    assert not checks.late(10)  # nothing timed after it: no estimate yet
    checks.own(0.2)
    assert not checks.late(6)  # 0.2 + 6 * 0.5 * 0.2 = 0.8
    assert checks.late(9)  # 0.2 + 9 * 0.1 = 1.1
    checks.compared(0.01)
    assert not checks.late(50)  # 0.2 + 50 * 0.01 = 0.7
    clock.now = 0.85
    assert checks.late(0) and not checks.passed()  # 0.85 + 0.2
    clock.now = 1.01
    assert checks.passed()
    assert not reasons._ChecksClock(None).late(10**6) and not reasons._ChecksClock(None).passed()


def test_a_runs_comparisons_come_before_the_next_runs_own_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gangs are taken in runs of one priority, each run's comparisons right after its own
    checks: with no share kept and 0.6 s of own checks a gang, mid and its twin mid2
    (priority 5) are compared at 0.6; low's own checks then run to 1.2, past the deadline, and
    only low is left out (all three were, when every own check came first)."""
    rnd, plan, _ = _clocked_checks(monkeypatch, own_seconds=0.6)
    monkeypatch.setattr(reasons, "COMPARISONS_SHARE", 0.0)
    assert list(waiting_checks(rnd, plan, deadline=1.0)) == ["mid", "mid2"]


def test_a_gang_whose_comparisons_the_deadline_cuts_is_left_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons (ahead checks) stop at the deadline: a gang whose own checks ran but whose
    comparisons did not (mid2, after mid's took 2 s) is left out whole (its reasons would miss
    the gangs ahead of it) and keeps the solver's reason, marked unchecked."""
    rnd, plan, clock = _clocked_checks(monkeypatch, own_seconds=0.0, ahead_seconds=2.0)
    checked = waiting_checks(rnd, plan, deadline=1.0)
    assert list(checked) == ["mid"]  # priority 5, first in input order; its comparisons moved the clock on
    clock.now = 0.0
    cut = {w.gang: w for w in waiting_reasons(rnd, plan, deadline=1.0)}
    assert cut["mid"].reasons[-1] != reasons.UNCHECKED
    assert all(cut[n].reasons[-1] == reasons.UNCHECKED for n in ("low", "mid2"))


# ----------------------------------------------------------------------------- fair share


def test_a_gang_that_loses_a_fair_share_tie_hears_so_and_starts_without_the_weights() -> None:
    """Issue 15: qa is at its whole deserved share (1.00), qb at none; a (older) and b tie, the
    weights start b. a's reasons say fair share, naming both shares and b; its fix (drop the
    weights) re-solved admits a. Without weights (FIFO starts a) b hears no fair-share reason,
    nor does a when b outvalues it (then the weights did not decide)."""
    from tests.solvers.test_cpsat import fair_share_round

    rnd = fair_share_round(1.0)
    plan = solve_exact(rnd)
    assert plan.admitted == ["b"]
    checks = waiting_checks(rnd, plan)["a"]
    (fair,) = [c for c in checks if c.fix.no_fair_share]
    assert fair.text.startswith("fair share: queue qa is at 1.00 of its deserved share, queue qb at 0.00; b ")
    assert solve_exact(apply_fix(rnd, "a", fair.fix)).admitted == ["a"]
    plain = fair_share_round(None)
    assert not any(c.fix.no_fair_share for cs in waiting_checks(plain, solve_exact(plain)).values() for c in cs)
    urgent = rnd.model_copy(
        update={"pending": [g.model_copy(update={"deadline": 50.0}) if g.name == "b" else g for g in rnd.pending]}
    )
    plan = solve_exact(urgent)
    assert plan.admitted == ["b"]
    assert not any(c.fix.no_fair_share for c in waiting_checks(urgent, plan)["a"])


# ----------------------------------------------------------------------------- the blockers' search


def _blockers_one_at_a_time(view: reasons._PlanView, g: reasons._Gang, free: np.ndarray, rows: np.ndarray) -> list[str]:
    """The blockers as the search found them before it took runs of holders: each holder
    added back in turn until the gang fits, then each taken away again, last first, when the
    rest still lets it fit."""
    within = np.zeros(len(g.usable), dtype=bool)
    within[rows] = True
    owners = view.holders(g.usable & within)
    held = [view.owners[k] for k in owners[~view.victim_mask(g.spec)[owners]].tolist()]
    room = reasons._Room(view, g, free, rows, within)
    chosen: list[str] = []
    for b in held:
        if room.fits():
            break
        room.add(view.use[b].rows, view.use[b].amounts)
        chosen.append(b)
    for b in list(reversed(chosen)):
        room.add(view.use[b].rows, view.use[b].amounts, -1)
        if room.fits():
            chosen.remove(b)
        else:
            room.add(view.use[b].rows, view.use[b].amounts)
    attached = [v for b in chosen for v in view.preempted_for.get(b, []) if not view.may_preempt(g.spec, v)]
    return list(dict.fromkeys([*chosen, *attached]))


def test_the_blockers_taken_in_runs_are_those_taken_one_at_a_time() -> None:
    """On small fragmented rounds (many small running gangs: dozens of holders per waiting
    gang), the search that adds and takes away runs of holders finds the same irreducible set
    as one holder at a time, wherever the gang does not fit: on the whole cluster and in each
    rack, with and without the room its victims free."""
    searched, largest, kept = 0, 0, 0
    for seed in range(3):
        rnd = generate(fragmented_spec(128, 50, 0.75, seed))[0]
        plan = gangopt.solve(rnd, solver="greedy", annotate=False)
        assert gangopt.validate(rnd, plan) == []
        view = reasons._PlanView(rnd, plan)
        everything = np.arange(len(rnd.cluster.nodes), dtype=np.intp)
        for spec in rnd.pending:
            if spec.name in view.admitted:
                continue
            g = reasons._gang(view, spec)
            room, _ = view.freeable(spec)
            for free in (view.free, view.free + room):
                for rows in [everything, *(r for _, r in reasons._domains(view, "rack"))]:
                    if reasons._fits(view, g, free, rows):
                        continue
                    fast = reasons._blockers(view, g, free, rows)
                    assert fast == _blockers_one_at_a_time(view, g, free, rows), (seed, spec.name, rows)
                    searched, largest, kept = searched + 1, max(largest, len(fast)), kept + len(fast)
    assert searched >= 100 and largest >= 10 and kept >= searched, (searched, largest, kept)  # runs exercised


def test_twins_get_the_checks_each_would_get_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiting gangs of one shape (:func:`gangopt.reasons._shape`) share their own checks, and
    the masks those checks set (a role no node admits: every schedulable node after its fix):
    the reasons are those of checking every gang alone, whose own texts differ by nothing but
    what the shape leaves out (name, submit time, group)."""
    rnd = make_round(
        cluster(3, gpus=8, taints={"n2": [("dedicated", "infra", "NoSchedule")]}),
        running=[running("old", ["n0", "n1"], gpu=6, priority=9, preemptible=False)],
        pending=[
            pending("big", replicas=2, gpu=8, priority=2),
            pending("a", replicas=2, gpu=4, selector={"zone": "nowhere"}),
            pending("b", replicas=2, gpu=4, selector={"zone": "nowhere"}),
            pending("c", replicas=2, gpu=4, selector={"zone": "nowhere"}, group="g"),
            pending("d", replicas=1, gpu=8),
            pending("e", replicas=1, gpu=8),
        ],
    )
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    waiting = {w.gang for w in plan.waiting}
    shapes = Counter(reasons._shape(g) for g in rnd.pending if g.name in waiting)
    assert max(shapes.values()) >= 2  # twins wait, so the shared checks are exercised
    shared = waiting_checks(rnd, plan)
    monkeypatch.setattr(reasons, "_shape", lambda gang: gang.name)  # every gang alone
    alone = waiting_checks(rnd, plan)
    assert {g: [c.text for c in cs] for g, cs in shared.items()} == {g: [c.text for c in cs] for g, cs in alone.items()}
    assert shared == alone


# ----------------------------------------------------------------------------- issue 13, session 36

REGRESSIONS = Path(__file__).resolve().parent / "fixtures" / "regressions"


@pytest.mark.parametrize(
    ("fixture", "gang", "says"),
    [
        # The empty node its fix adds went to waiting gangs of higher priority in the re-solve.
        (
            "reasons-never-round-copy-to-higher",
            "job3",
            "behind waiting higher-priority job1 (priority 2), job0 (priority 1), which would start first in the "
            "room its fixes add",
        ),
        # job0 (priority 3, 8 pods) took the copy and the node of job2, of its priority and less value.
        ("reasons-never-round-lower-value-gives-way", "job1", "behind waiting higher-priority job0 (priority 3)"),
        # job4, of its priority and more value, took the copy.
        ("reasons-never-round-more-value", "job0", "behind waiting job4 (same priority, at least its value)"),
        # The raised cohort limit brought run0 back to n1, which pushed job2 onto the node job1 counted.
        (
            "reasons-comeback-room",
            "job1",
            "run0 (priority 3), preempted by this plan, could come back with a raised limit, taking 2 gpu of it "
            "and its room",
        ),
        # The raised queue limit brought run0 back, and the cohort's limit was then 8 GPUs short.
        (
            "reasons-comeback-other-limit",
            "job2",
            "run0 (priority 2), preempted by this plan, could come back with a raised limit, taking 8 gpu of it "
            "and its room",
        ),
        # job1 waits only for its group; job0, its partner, could start in the room the fix frees.
        ("reasons-group-partner-starts", "job4", "behind waiting higher-priority job1 (priority 3)"),
        # Its roles may use A100 and H100 nodes apart, and the plan holds the A100 room: copies of
        # one node (Fix.more_nodes: of one per role) could not hold it.
        ("reasons-copies-per-role", "job0", "can never run on this cluster: needs 30 gpu for its minimum of 6 pods"),
    ],
)
def test_the_fix_of_a_reason_the_nightly_sample_found_false_admits_the_gang(fixture: str, gang: str, says: str) -> None:
    """Rounds of the nightly sample of :func:`test_the_fix_a_reason_names_admits_the_gang`
    (``HYPOTHESIS_PROFILE=nightly``: 800 rounds, 1,100 reasons, 96.82 % true on 88b8926), one
    per cause of a false reason: each gang's reasons now name that cause (``says``), and their
    fixes, all at once, admit it when the round is solved again. On 88b8926 none of these seven
    fixes admitted its gang."""
    rnd = gangopt.load_round(REGRESSIONS / f"{fixture}.json")
    plan = solve_exact(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert gang not in plan.admitted
    checks = waiting_checks(rnd, plan)[gang]
    assert any(says in c.text for c in checks), [c.text for c in checks]
    again = solve_exact(apply_fix(rnd, gang, combined(c.fix for c in checks)))
    assert gangopt.validate(apply_fix(rnd, gang, combined(c.fix for c in checks)), again) == []
    assert gang in again.admitted


def _rack_round() -> Round:
    """Two racks of two 8-GPU nodes. n0 and n2 run non-preemptible priority-10 jobs, n1 a
    preemptible priority-0 one; a priority-10 gang of one pod waits (it takes n3), and a
    priority-5 gang needs two whole nodes in one rack."""
    return make_round(
        cluster(4, gpus=8, racks=2),
        running=[
            running("hold0", ["n0"], gpu=8, priority=10, preemptible=False),
            running("hold2", ["n2"], gpu=8, priority=10, preemptible=False),
            running("low", ["n1"], gpu=8, priority=0),
        ],
        pending=[pending("top", 1, 8, priority=10), pending("rackjob", 2, 8, priority=5, required="rack")],
        preemption=True,
    )


def test_a_gang_no_domain_can_ever_hold_reads_never_this_round_though_it_may_preempt() -> None:
    """The prefilter prunes ``rackjob`` for topology: no rack holds two of its pods even after
    every allowed preemption (r0: n1, whose job it may preempt; r1: n3). Its reason says so
    (code ``capacity``, "can never start this round", counting the pods it may preempt), not
    "room taken by higher-priority top" (``outranked``: removing ``top`` does not start it,
    as on L, where job-0184 and job-0383 read so); its fix (empty nodes) does."""
    from gangopt.prefilter import prefilter

    rnd = _rack_round()
    assert prefilter(rnd).pruned["rackjob"].code == "topology"
    plan = solve_exact(rnd)
    assert gangopt.validate(rnd, plan) == [] and plan.admitted == ["top"]
    checks = waiting_checks(rnd, plan)["rackjob"]
    first = checks[0]
    assert (first.code, first.never) == ("capacity", True)
    assert first.text.startswith(
        "can never start this round: its minimum of 2 pods does not fit within one rack in the free room of the "
        "nodes it may use before this round, counting the pods of running gangs it may preempt"
    ), first.text
    assert [w.code for w in plan.waiting if w.gang == "rackjob"] == ["capacity"]
    assert "rackjob" not in solve_exact(apply_fix(rnd, "rackjob", reasons.Fix(remove=("top",)))).admitted
    assert "rackjob" in solve_exact(apply_fix(rnd, "rackjob", combined(c.fix for c in checks))).admitted


def test_a_gang_that_can_never_start_this_round_is_behind_only_the_gangs_that_fit_in_its_fixes_room() -> None:
    """Four 8-GPU nodes in two racks, each running a non-preemptible 1-GPU job of priority 9:
    three gangs of whole-node pods can never start this round. ``small``'s fixes free n0 (its
    job removed) and add an empty copy of it, in r0: ``mid`` (one pod, priority 5) would start
    there first, so it is named and removed by the fix; ``rack`` (three pods in one rack,
    priority 5) cannot (r0 then holds two such pods), so it is not, where the check by nodes
    alone named L's 32-pod rack gang job-0184 ahead of one-node gangs. On 88b8926 no gang was
    named ahead of a gang that can never start this round."""
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        running=[running(f"run{i}", [f"n{i}"], gpu=1, priority=9, preemptible=False) for i in range(4)],
        pending=[
            pending("small", 1, 8, priority=0),
            pending("mid", 1, 8, priority=5),
            pending("rack", 3, 8, priority=5, required="rack"),
        ],
        preemption=True,
    )
    plan = solve_exact(rnd)
    assert gangopt.validate(rnd, plan) == [] and plan.admitted == []
    checks = waiting_checks(rnd, plan)["small"]
    assert checks[0].text.startswith(reasons.NEVER_THIS_ROUND)
    (ahead,) = [c for c in checks if c.text.startswith("behind waiting")]
    assert ahead.fix.remove == ("mid",) and ahead.rivals == ("mid",), ahead.text
    fix = combined(c.fix for c in checks)
    assert "small" in solve_exact(apply_fix(rnd, "small", fix)).admitted
