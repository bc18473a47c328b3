"""The look-ahead view (gangopt/lookahead.py): protection, reservations, backfill; and that a
plan decided on the view is a plan for the round."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gangopt
from gangopt.errors import InputError
from gangopt.lookahead import IDLE_HEADROOM, OVER_BUDGET_LABEL, RESERVED_LABEL, look_ahead
from gangopt.parsing import parse_model
from gangopt.schema import LookAhead, PendingGang, Round, RunningGang
from gangopt.solvers.greedy import greedy
from tests.builders import cluster, make_round, pending, running
from tests.strategies import examples, rounds

NOW = 10_000.0


def timed(gang: RunningGang, **times: Any) -> RunningGang:
    return gang.model_copy(update=times)


def lasting(gang: PendingGang, seconds: float | None) -> PendingGang:
    return gang.model_copy(update={"expected_duration": seconds})


def backfill_round(**lookahead: Any) -> Round:
    """Two 8-GPU nodes. n0: 7 GPUs busy until now+100; n1: 4 GPUs busy until now+5000. The
    oldest gang needs a whole node (blocked now, fits on n0 at now+100); a long 1-GPU gang and
    a short one (50 s) wait too."""
    return make_round(
        cluster(2),
        running=[
            timed(running("r0", ["n0"], gpu=7), expected_end=NOW + 100, started_at=0.0),
            timed(running("r1", ["n1"], gpu=4), expected_end=NOW + 5000, started_at=0.0),
        ],
        pending=[
            lasting(pending("big", gpu=8, submit_time=1.0), 3600),
            lasting(pending("long", gpu=1, submit_time=2.0), 7200),
            lasting(pending("short", gpu=1, submit_time=3.0), 50),
        ],
        now=NOW,
        lookahead=LookAhead(**{"reserve_after": 0.0, **lookahead}),
    )


def nodes_of(plan: gangopt.Plan, gang: str) -> set[str]:
    return {p.node for p in plan.placements if p.gang == gang}


# ----------------------------------------------------------------------------- reservations


def test_blocked_gang_gets_the_nodes_that_free_up_first() -> None:
    view = look_ahead(backfill_round())
    [r] = view.reservations
    assert (r.gang, r.nodes, r.start) == ("big", ("n0",), NOW + 100)
    labels = {n.name: n.labels.get(RESERVED_LABEL) for n in view.round.cluster.nodes}
    assert labels == {"n0": "big", "n1": None}
    # the long gang would still run at now+100: kept off n0; the short one ends before it
    assert view.held_off == {"long": ["big"]}


def test_backfill_in_the_plan() -> None:
    rnd = backfill_round()
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert nodes_of(plan, "long") == {"n1"}
    assert "big" not in plan.admitted
    assert "reserved for big" in plan.message
    reasons = {w.gang: w.reasons for w in plan.waiting}
    assert reasons["big"][0].startswith("n0 reserved for it from t+100s")
    # without the look-ahead nothing keeps the long gang off n0's one free GPU
    first_fit = greedy(rnd)
    assert gangopt.validate(rnd, first_fit) == []
    assert nodes_of(first_fit, "long") == {"n0"}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("off", []),
        ("no expected ends", []),
        ("too young to reserve", []),
        ("higher priority passes", ["big"]),
    ],
)
def test_when_no_reservation_is_made_or_kept(case: str, expected: list[str]) -> None:
    settings_: dict[str, Any] = {"reservations": 0} if case == "off" else {}
    if case == "too young to reserve":
        settings_["reserve_after"] = NOW  # big waited NOW - 1 s
    rnd = backfill_round(**settings_)
    if case == "no expected ends":
        rnd = rnd.model_copy(update={"running": [timed(g, expected_end=None) for g in rnd.running]})
    if case == "higher priority passes":
        rnd = rnd.model_copy(
            update={"pending": [g.model_copy(update={"priority": 5}) if g.name == "long" else g for g in rnd.pending]}
        )
    view = look_ahead(rnd)
    assert [r.gang for r in view.reservations] == expected
    assert "long" not in view.held_off


def test_a_gang_that_fits_now_gets_no_reservation() -> None:
    rnd = make_round(
        cluster(2),
        running=[timed(running("r0", ["n0"], gpu=7), expected_end=NOW + 100)],
        pending=[lasting(pending("big", gpu=8), 10.0)],
        now=NOW,
    )
    assert look_ahead(rnd).reservations == []


def test_required_domain_reservation_stays_in_one_domain() -> None:
    """A 2-pod gang that must stay in one rack: n0 (rack r0) frees first, but its rack mate n1
    only at +9000, while rack r1 (n2, n3) is whole at +500."""
    rnd = make_round(
        cluster(4, racks=2),
        running=[
            timed(running("a", ["n0"], gpu=8), expected_end=NOW + 100),
            timed(running("b", ["n1"], gpu=8), expected_end=NOW + 9000),
            timed(running("c", ["n2"], gpu=8), expected_end=NOW + 300),
            timed(running("d", ["n3"], gpu=8), expected_end=NOW + 500),
        ],
        pending=[pending("pair", replicas=2, gpu=8, required="rack")],
        now=NOW,
    )
    [r] = look_ahead(rnd).reservations
    assert (r.nodes, r.start) == (("n2", "n3"), NOW + 500)


# ----------------------------------------------------------------------------- aging


def aging_round(**lookahead: Any) -> Round:
    """Two 8-GPU nodes. n0 runs a 1-GPU priority-0 gang until now+3600; n1 is idle. Waiting,
    all priority 0: two whole-node gangs that arrived long ago (``old-long``: 10 h,
    ``old-short``: 1 h), a 2-GPU gang of 2 h that arrived at the same time and a 2-GPU gang
    of 2 h that arrived just now."""
    return make_round(
        cluster(2),
        running=[timed(running("r0", ["n0"], gpu=1, priority=0), expected_end=NOW + 3600, started_at=0.0)],
        pending=[
            lasting(pending("old-long", gpu=8, submit_time=1.0), 36_000),
            lasting(pending("old-short", gpu=8, submit_time=2.0), 3600),
            lasting(pending("old-small", gpu=2, submit_time=1.0), 7200),
            lasting(pending("new-small", gpu=2, submit_time=NOW - 10), 7200),
        ],
        now=NOW,
        lookahead=LookAhead(**lookahead),
    )


@pytest.mark.parametrize(
    ("after", "escalated"),
    [
        (None, []),  # no aging (the default)
        (5000.0, ["old-short", "old-long"]),  # waited 9,998 s: whole-node gangs only, shortest first
        (20_000.0, []),  # not waited long enough
    ],
)
def test_aging_escalates_starving_whole_node_gangs(after: float | None, escalated: list[str]) -> None:
    view = look_ahead(aging_round(escalate_after=after, reserve_after=0.0))
    assert [r.gang for r in view.reservations if r.escalated] == escalated
    if escalated:
        first, second = view.reservations
        # the shortest escalated gang keeps the idle n1 now (it fits now); the other waits for n0
        assert (first.nodes, first.start) == (("n1",), NOW)
        assert (second.nodes, second.start) == (("n0",), NOW + 3600)
        # every priority-0 gang that would still run then keeps off both nodes
        assert sorted(view.held_off) == ["new-small", "old-long", "old-small"]


def test_without_aging_a_gang_that_fits_now_gets_no_reservation() -> None:
    # the round decides it: the small gangs of equal value may take the idle node first
    assert look_ahead(aging_round(reserve_after=0.0)).reservations == []


def test_an_escalated_gang_is_no_longer_held_by_the_budget() -> None:
    rnd = aging_round(commit_hours=0.5, reserve_after=0.0, escalate_after=None)
    assert sorted(look_ahead(rnd).over_budget) == ["old-long", "old-short"]
    rnd = aging_round(commit_hours=0.5, reserve_after=0.0, escalate_after=5000.0)
    view = look_ahead(rnd)
    assert view.over_budget == {}
    assert [r.gang for r in view.reservations] == ["old-short", "old-long"]
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert nodes_of(plan, "old-short") == {"n1"}
    # n0 is reserved for old-long from now+3600: the small gangs would still run then
    assert "old-small" not in plan.admitted and "new-small" not in plan.admitted


def order_round(old_duration: float, order: str, cap: float | None = None) -> Round:
    """Two 8-GPU nodes, each running a 1-GPU gang (n0 until now+3600, n1 until now+7200). Two
    escalated whole-node gangs wait: ``old`` (waited 9,999 s, ``old_duration``) and ``young``
    (waited 6,000 s, 1,800 s: response ratio 4.33)."""
    return make_round(
        cluster(2),
        running=[
            timed(running("r0", ["n0"], gpu=1, priority=0), expected_end=NOW + 3600, started_at=0.0),
            timed(running("r1", ["n1"], gpu=1, priority=0), expected_end=NOW + 7200, started_at=0.0),
        ],
        pending=[
            lasting(pending("old", gpu=8, submit_time=1.0), old_duration),
            lasting(pending("young", gpu=8, submit_time=NOW - 6000), 1800),
        ],
        now=NOW,
        lookahead=LookAhead(escalate_after=5000.0, escalated_order=order, escalated_ratio_cap=cap),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("old_duration", "order", "cap", "first"),
    [
        (2400, "shortest", None, "young"),
        (2400, "oldest", None, "old"),
        (2400, "response_ratio", None, "old"),  # (9,999 + 2,400) / 2,400 = 5.17 > 4.33: its wait outweighs
        (36_000, "response_ratio", None, "young"),  # (9,999 + 36,000) / 36,000 = 1.28: still too long
        (36_000, "response_ratio", 432_000.0, "young"),  # the default cap is far above both
        (36_000, "response_ratio", 2400.0, "old"),  # counted as 2,400 s long: 5.17 again
        (36_000, "response_ratio", 1200.0, "old"),  # both capped: (9,999 + 1,200) / 1,200 > (6,000 + 1,200) / 1,200
        (36_000, "oldest", None, "old"),
    ],
)
def test_escalated_order(old_duration: float, order: str, cap: float | None, first: str) -> None:
    ahead, behind = look_ahead(order_round(old_duration, order, cap)).reservations
    # the first in order gets the node that frees up first, the other the next one
    assert (ahead.gang, ahead.nodes, ahead.start) == (first, ("n0",), NOW + 3600)
    assert (behind.gang, behind.nodes, behind.start) == (({"old", "young"} - {first}).pop(), ("n1",), NOW + 7200)


def outrank_round(**lookahead: Any) -> Round:
    """Two 8-GPU nodes: n0 has 7 GPUs busy until now+3600 (not preemptible), n1 is idle. ``old`` (priority 0,
    8 GPUs) has waited 9,999 s and fits only n1; ``hi`` (priority 1) and ``urgent`` (priority
    2), 2 GPUs for 2 h each, arrived just now and fit only n1 too."""
    return make_round(
        cluster(2),
        running=[timed(running("r0", ["n0"], gpu=7, preemptible=False), expected_end=NOW + 3600, started_at=0.0)],
        pending=[
            lasting(pending("old", gpu=8, submit_time=1.0, priority=0), 3600),
            lasting(pending("hi", gpu=2, submit_time=NOW - 10, priority=1), 7200),
            lasting(pending("urgent", gpu=2, submit_time=NOW - 10, priority=2), 7200),
        ],
        now=NOW,
        lookahead=LookAhead(**{"escalate_after": 5000.0, **lookahead}),
    )


@pytest.mark.parametrize(
    ("lookahead", "held"),
    [
        ({}, ["hi"]),  # the default: aging outranks priority 1, not the urgent tier
        ({"urgent_priority": None}, ["hi", "urgent"]),  # no urgent tier: every priority
        ({"escalated_holds_higher": False}, []),  # only its own and lower priorities
        ({"escalate_after": None}, []),  # not escalated: no reservation (it fits now)
    ],
)
def test_an_escalated_reservation_keeps_higher_priorities_off(lookahead: dict[str, Any], held: list[str]) -> None:
    view = look_ahead(outrank_round(**lookahead))
    assert sorted(view.held_off) == held
    for gang in held:
        assert view.held_off[gang] == ["old"]


@pytest.mark.parametrize(("holds_higher", "started"), [(True, "old"), (False, "hi")])
def test_an_escalated_gang_is_not_passed_by_higher_priorities_in_the_plan(holds_higher: bool, started: str) -> None:
    rnd = outrank_round(escalated_holds_higher=holds_higher, urgent_priority=None)
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert nodes_of(plan, started) == {"n1"}
    assert {"old", "hi"} - set(plan.admitted) == {"old", "hi"} - {started}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("escalated_order", "fifo"),
        ("escalated_holds_higher", "yes"),
        ("escalated_holds_higher", 1),
        ("escalated_ratio_cap", 0),
        ("escalated_ratio_cap", "120h"),
    ],
)
def test_a_bad_escalation_setting_is_refused_at_its_path(field: str, value: Any) -> None:
    data = outrank_round().model_dump(mode="json")
    data["policy"]["lookahead"][field] = value
    with pytest.raises(InputError) as caught:
        parse_model(Round, data)
    assert [p.path for p in caught.value.problems] == [f"$.policy.lookahead.{field}"]


# ----------------------------------------------------------------------------- protection


@pytest.mark.parametrize(
    ("started_at", "evictions", "lookahead", "protected"),
    [
        (NOW - 600, 1, {}, True),  # restarted less than the default 900 s ago
        (NOW - 600, 0, {}, False),  # a first run: its floor is 300 s
        (NOW - 100, 0, {"urgent_priority": None}, True),
        (NOW - 100, 0, {}, False),  # default urgent tier 2: only young work can make room, the floor yields
        (NOW - 100, 0, {"urgent_priority": 6}, True),
        (NOW - 100, 0, {"first_run_seconds": 0}, False),
        (NOW - 1000, 1, {}, False),
        (NOW - 100, 1, {"min_run_seconds": 0}, False),
        (None, 1, {}, False),  # start unknown
        (NOW - 1000, 3, {"max_evictions": 3}, True),
        (NOW - 1000, 2, {"max_evictions": 3}, False),
    ],
)
def test_protection(started_at: float | None, evictions: int, lookahead: dict[str, Any], protected: bool) -> None:
    rnd = make_round(
        cluster(1),
        running=[timed(running("low", ["n0"], gpu=8, priority=0), started_at=started_at, evictions=evictions)],
        pending=[pending("high", gpu=8, priority=5)],
        now=NOW,
        lookahead=LookAhead(**lookahead),
    )
    view = look_ahead(rnd)
    assert view.protected == (["low"] if protected else [])
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert ("high" in plan.admitted) is not protected
    # the look-ahead is the optimizer's: greedy still preempts
    greedy_plan = greedy(rnd)
    assert gangopt.validate(rnd, greedy_plan) == []
    assert "high" in greedy_plan.admitted


def urgent_round(old_elsewhere: bool, **lookahead: Any) -> Round:
    """n0 runs a young (100 s) first-run priority-0 gang on all 8 GPUs; a priority-5 gang of 8
    GPUs waits. With ``old_elsewhere`` n1 runs an hour-old priority-0 gang of 8 GPUs (already
    evictable), else n1 is cordoned off by a priority-9 gang no one may evict."""
    other = running("old", ["n1"], gpu=8, priority=0) if old_elsewhere else running("top", ["n1"], gpu=8, priority=9)
    return make_round(
        cluster(2),
        running=[
            timed(running("young", ["n0"], gpu=8, priority=0), started_at=NOW - 100, evictions=0),
            timed(other, started_at=NOW - 3600, evictions=0),
        ],
        pending=[pending("urgent", gpu=8, priority=5)],
        now=NOW,
        lookahead=LookAhead(**lookahead),
    )


@pytest.mark.parametrize(
    ("old_elsewhere", "urgent_priority", "protected"),
    [
        (False, None, ["young"]),  # no urgent tier: the floor holds
        (False, 5, []),  # only young work can make room for the urgent gang: the floor yields
        (False, 6, ["young"]),  # the waiting gang is below the urgent tier
        (True, 5, ["young"]),  # an evictable old gang can make room: the floor stands
    ],
)
def test_first_run_floor_yields_to_urgent_work_only_when_nothing_else_makes_room(
    old_elsewhere: bool, urgent_priority: int | None, protected: list[str]
) -> None:
    rnd = urgent_round(old_elsewhere, urgent_priority=urgent_priority)
    assert look_ahead(rnd).protected == protected
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    started = "urgent" in plan.admitted
    # the urgent gang starts unless the floor protects the only gang it could evict
    assert started is (old_elsewhere or not protected)
    if started and old_elsewhere:
        assert {p.gang for p in plan.preemptions} == {"old"}


def test_the_floor_after_an_eviction_never_yields() -> None:
    rnd = urgent_round(False, urgent_priority=5)
    young = timed(rnd.running[0], evictions=1)
    rnd = rnd.model_copy(update={"running": [young, rnd.running[1]]})
    assert look_ahead(rnd).protected == ["young"]


# ----------------------------------------------------------------------------- the view is a restriction


@st.composite
def timed_rounds(draw: st.DrawFn) -> Round:
    rnd = draw(rounds())
    now = rnd.now
    times = st.one_of(st.none(), st.floats(min_value=now - 3000, max_value=now + 3000, allow_nan=False))
    run = [
        g.model_copy(
            update={
                "started_at": draw(times),
                "expected_end": draw(times),
                "evictions": draw(st.integers(0, 3)),
            }
        )
        for g in rnd.running
    ]
    durations = st.one_of(st.none(), st.floats(min_value=0, max_value=6000, allow_nan=False))
    pend = [g.model_copy(update={"expected_duration": draw(durations)}) for g in rnd.pending]
    lookahead = LookAhead(
        reservations=draw(st.integers(0, 3)),
        min_run_seconds=draw(st.sampled_from([0.0, 900.0])),
        first_run_seconds=draw(st.sampled_from([0.0, 300.0])),
        max_evictions=draw(st.sampled_from([None, 1, 2])),
        commit_hours=draw(st.sampled_from([None, None, 0.01, 0.5])),
    )
    policy = rnd.policy.model_copy(update={"lookahead": lookahead, "time_limit": 2.0})
    return rnd.model_copy(update={"running": run, "pending": pend, "policy": policy})


@settings(max_examples=examples(60), deadline=None)
@given(timed_rounds())
def test_a_plan_for_the_view_is_a_plan_for_the_round(rnd: Round) -> None:
    view = look_ahead(rnd)
    plan = greedy(view.round)
    assert gangopt.validate(view.round, plan) == []
    assert gangopt.validate(rnd, plan) == []
    nodes_of = {r.gang: set(r.nodes) for r in view.reservations}
    for p in plan.placements:
        for holder in view.held_off.get(p.gang, []):
            if p.node in nodes_of[holder]:
                pytest.fail(f"{p.gang} placed on {p.node}, reserved for {holder}")
    for pre in plan.preemptions:
        assert pre.gang not in view.protected
    assert not set(plan.admitted) & set(view.over_budget)  # held back: fits nowhere in the view


@settings(max_examples=examples(25), deadline=None)
@given(timed_rounds())
def test_cpsat_under_look_ahead_is_valid_and_never_falls_back(rnd: Round) -> None:
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert "failed validation" not in plan.message


# ----------------------------------------------------------------------------- committed GPU-time budget


def budget_round(tier_running: bool = True, **lookahead: Any) -> Round:
    """Two 8-GPU nodes (16 GPUs). Priority 0 runs 1 GPU until now+3600 (1 GPU-hour committed,
    or nothing with ``tier_running=False``); waiting: an 8-GPU, 2-hour priority-0 gang (16
    GPU-hours), a short 1-GPU priority-0 gang and an 8-GPU, 2-hour priority-1 gang (its tier
    runs nothing)."""
    owner = running("r0", ["n0"], gpu=1, priority=0 if tier_running else 5)
    return make_round(
        cluster(2),
        running=[timed(owner, expected_end=NOW + 3600, started_at=0.0)],
        pending=[
            lasting(pending("long", gpu=8, submit_time=1.0), 7200),
            lasting(pending("short", gpu=1, submit_time=2.0), 60),
            lasting(pending("lone", gpu=8, submit_time=3.0, priority=1), 7200),
        ],
        now=NOW,
        lookahead=LookAhead(**lookahead),
    )


@pytest.mark.parametrize(
    ("hours", "tier_running", "held"),
    [
        (1.0, True, ["long"]),  # 1 + 16 GPU-hours > 1 h x 16 GPUs; priority 1 runs nothing: "lone" may start
        (1.07, True, []),  # 17 <= 17.1
        (1.0, False, []),  # its tier runs nothing: may start
        (0.05, True, ["long"]),  # 1 + 1/60 GPU-hours > 0.8, but the short gang commits under half of it
        (None, True, []),  # no budget (null; the default is 36 h)
    ],
)
def test_commit_budget_holds_back_big_commitments_of_a_busy_tier(
    hours: float | None, tier_running: bool, held: list[str]
) -> None:
    view = look_ahead(budget_round(tier_running, commit_hours=hours, reservations=0))
    assert sorted(view.over_budget) == held
    for g in view.round.pending:
        terms = [t.key for r in g.roles for t in r.node_affinity]
        assert (OVER_BUDGET_LABEL in terms) == (g.name in held)
    if held:
        assert view.over_budget["long"] == pytest.approx(17.0)


def idle_round(**lookahead: Any) -> Round:
    """``budget_round`` with the long gang the only one waiting: n1 stands idle."""
    rnd = budget_round(**lookahead)
    return rnd.model_copy(update={"pending": [g for g in rnd.pending if g.name == "long"]})


def test_commit_budget_lets_a_gang_take_idle_gpus_no_one_waits_for() -> None:
    # over the budget (17 GPU-hours > 16), but it fits the idle n1 and nothing else waits
    assert look_ahead(idle_round(commit_hours=1.0, reservations=0)).over_budget == {}


def test_commit_budget_binds_when_others_wait_for_the_idle_gpus() -> None:
    # the same gang while 9 GPUs of other gangs wait: 15 idle - 8 < 9 + a quarter of 16
    assert sorted(look_ahead(budget_round(commit_hours=1.0, reservations=0)).over_budget) == ["long"]


@pytest.mark.parametrize(("other_gpus", "held"), [(3, []), (4, ["long"])])
def test_commit_budget_keeps_a_quarter_of_the_cluster_idle(other_gpus: int, held: list[str]) -> None:
    # 15 idle GPUs - the long gang's 8 - the other waiting gang's must leave IDLE_HEADROOM x 16 = 4
    assert IDLE_HEADROOM == 0.25
    rnd = idle_round(commit_hours=1.0, reservations=0)
    other = lasting(pending("other", gpu=other_gpus, submit_time=5.0), 60)
    rnd = rnd.model_copy(update={"pending": [*rnd.pending, other]})
    assert sorted(look_ahead(rnd).over_budget) == held


def test_commit_budget_binds_when_the_idle_gpus_are_split() -> None:
    # 14 idle GPUs by count, but no whole node: starting the 8-GPU pod would need an eviction
    rnd = idle_round(commit_hours=1.0, reservations=0)
    other = timed(running("r1", ["n1"], gpu=1, priority=0), expected_end=NOW + 60, started_at=0.0)
    rnd = rnd.model_copy(update={"running": [*rnd.running, other]})
    assert sorted(look_ahead(rnd).over_budget) == ["long"]


def test_commit_budget_in_the_plan() -> None:
    rnd = budget_round(commit_hours=1.0)
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert "long" not in plan.admitted and {"short", "lone"} <= set(plan.admitted)
    reasons = {w.gang: w.reasons for w in plan.waiting}
    assert reasons["long"][0].startswith("held back by the committed GPU-time budget")
    assert "held back by the committed GPU-time budget" in plan.message
    # the view only removes options: without the budget the long gang starts too
    assert "long" in gangopt.solve(budget_round()).admitted
