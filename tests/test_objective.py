"""The objective, by hand: every term of docs/objective.md computed in the test on a tiny
round and compared with ``gangopt.objective.score``.

Units: the score reports GPU-equivalents, the model counts tenths (``SCALE = 10``). Unless a
test says otherwise the cluster is two 8-GPU, 32-CPU nodes ``n0`` (rack r0) and ``n1``
(rack r1): totals T_gpu = 16, T_cpu = 64, so a pod's value is
``max(1, round(10 · max(gpu/16, cpu/64) · 16))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gangopt
from gangopt.objective import SCALE, ObjectiveTerms, lexicographic_key, score
from gangopt.schema import Cluster, Cohort, Node, PendingGang, Plan, Queue, QueuePreemption, Role, Round, Score, Weights
from tests.builders import cluster, make_plan, make_round, pending, queue, role, running
from tests.strategies import examples

NOW = 7200.0
KEPT = 5
"""A running gang kept counts at the highest urgency a pending gang can reach, by hand with the
default weights: 1 + aging_cap 1 + short_first 2 + deadline_boost 1 = 5."""


def two_nodes(**policy: Any) -> dict[str, Any]:
    return {"cluster": cluster(2, gpus=8, cpu=32, racks=2), "now": NOW, **policy}


def tiers(s: Score) -> dict[int, float]:
    return {t.priority: t.value for t in s.tiers}


def weights(**w: float) -> Weights:
    return Weights(**w)


# ----------------------------------------------------------------------------- pod value


POD_VALUES: list[tuple[str, dict[str, Any], int]] = [
    # (id, role requests, hand value in tenths)
    ("4 gpu", {"gpu": 4}, 40),  # 4/16 · 16 = 4 GPU-eq -> 40
    ("1 gpu", {"gpu": 1}, 10),  # 1/16 · 16 = 1 -> 10
    ("3 gpu", {"gpu": 3}, 30),
    ("whole node", {"gpu": 8, "cpu": 32}, 80),  # max(8/16, 32/64) · 16 = 8 -> 80
    ("cpu dominant", {"gpu": 1, "cpu": 16}, 40),  # max(1/16, 16/64 = 1/4) · 16 = 4 -> 40
    ("cpu only", {"gpu": 0, "cpu": 2}, 5),  # 2/64 · 16 = 0.5 -> 5
    ("tiny pod is worth 1", {"gpu": 0, "cpu": "100m"}, 1),  # 0.1/64 · 16 = 0.025 -> round(0.25) = 0 -> max(1, 0)
    ("unknown resource ignored", {"gpu": 2, "rdma": 1}, 20),  # no node has rdma: T_rdma = 0 is left out
]


@pytest.mark.parametrize(("requests", "value"), [pytest.param(r, v, id=i) for i, r, v in POD_VALUES])
def test_pod_value_is_the_dominant_share_in_gpus(requests: dict[str, Any], value: int) -> None:
    rnd = make_round(**two_nodes(), pending=[pending("p", roles=[role("w", 1, **requests)])])
    assert ObjectiveTerms.of(rnd).pod_value(rnd.pending[0].roles[0]) == value
    plan = make_plan(rnd, place={"p": ["n0"]})
    # one pod, submitted at 0 but 'now' is 7200: urgency 1 + 0.1 · 2 h = 1.2
    assert tiers(score(rnd, plan)) == {0: max(1, round(value * 1.2)) / SCALE}


def test_memory_can_be_the_dominant_share() -> None:
    rnd = make_round(
        cluster(2, gpus=8, memory="256Gi"),  # T_memory = 512Gi
        pending=[pending("p", gpu=1, memory="128Gi", submit_time=NOW)],
        now=NOW,
    )
    # max(1/16, 128/512 = 1/4) · 16 = 4 GPU-eq -> 40
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: 4.0}


def test_without_gpus_the_unit_is_one_cpu() -> None:
    rnd = make_round(
        cluster(2, gpus=0, cpu=32),
        pending=[pending("p", gpu=0, cpu=16, submit_time=NOW)],
        now=NOW,
    )
    # base resource cpu: T_cpu = 64 "units"; 16/64 · 64 = 16 CPU-eq -> 160
    assert ObjectiveTerms.of(rnd).base_resource == "cpu"
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: 16.0}


def test_without_gpus_or_cpus_the_unit_is_the_largest_resource() -> None:
    nodes = [Node(name=f"n{i}", capacity={"tpu": 4}) for i in range(2)]
    rnd = make_round(
        Cluster(nodes=nodes),
        pending=[pending("p", roles=[role("w", 1, gpu=0, tpu=2)], submit_time=NOW)],
        now=NOW,
    )
    # base resource tpu: T_tpu = 8 units; 2/8 · 8 = 2 TPU-eq -> 20
    assert ObjectiveTerms.of(rnd).base_resource == "tpu"
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: 2.0}


def test_a_thousandth_of_a_gpu_still_makes_gpu_the_unit() -> None:
    rnd = make_round(
        Cluster(nodes=[Node(name="n0", capacity={"gpu": "1m", "cpu": 8})]),
        pending=[pending("p", roles=[role("w", 1, gpu=0, cpu=4)], submit_time=NOW)],
        now=NOW,
    )
    # T_gpu = 0.001 GPU: a pod with half the CPUs is 0.5 · 0.001 GPU-eq -> round(0.005) = 0 -> 1
    assert ObjectiveTerms.of(rnd).base_resource == "gpu"
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: 0.1}


def test_a_resource_of_one_milli_unit_in_all_still_counts() -> None:
    rnd = make_round(
        Cluster(nodes=[Node(name="n0", capacity={"gpu": 8, "rdma": "1m"})]),
        pending=[pending("p", roles=[role("w", 1, gpu=1, rdma="1m")], submit_time=NOW)],
        now=NOW,
    )
    # the pod takes all of the cluster's rdma: max(1/8, 1/1) · 8 = 8 GPU-eq -> 80
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: 8.0}


def test_without_any_resource_every_pod_counts_as_one_unit() -> None:
    rnd = make_round(
        Cluster(nodes=[Node(name="n0", capacity={})]),
        pending=[PendingGang(name="p", roles=[Role(replicas=1, requests={})], submit_time=NOW)],
        now=NOW,
    )
    # no totals at all: base 'gpu' with T = 0, a pod is 1 unit -> 10
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: 1.0}


# ----------------------------------------------------------------------------- tiers


def test_tier_value_per_priority() -> None:
    rnd = make_round(
        **two_nodes(),
        running=[
            running("kept", ["n0"], gpu=2, priority=3),  # 20 · KEPT, stays
            running("evicted", ["n1"], gpu=4, priority=3, preemption_cost=0.0),  # 40 · KEPT, goes
            running("other", ["n0"], gpu=1, priority=1),  # 10 · KEPT, stays
        ],
        pending=[
            pending("hi", 2, gpu=4, priority=5, submit_time=NOW),  # 2 · 40 = 80
            pending("hi2", 1, gpu=1, priority=5, submit_time=NOW),  # 10
            pending("lo", 1, gpu=1, priority=0, submit_time=NOW),  # waits: tier 0 is present with 0
        ],
    )
    plan = make_plan(rnd, place={"hi": ["n1", "n1"], "hi2": ["n0"]}, evict={"evicted": ["hi"]})
    s = score(rnd, plan)
    assert [t.priority for t in s.tiers] == [5, 3, 1, 0]  # highest first, every priority present
    assert tiers(s) == {5: (80 + 10) / SCALE, 3: 20 * KEPT / SCALE, 1: 10 * KEPT / SCALE, 0: 0.0}
    # the eviction costs max(1, round(10 · 1 · 0 GPU-hours)) = 1 tenth; nodes n0, n1 were busy
    assert s.secondary == -1 / SCALE


def test_minimum_configuration_tops_up_from_the_cheapest_role() -> None:
    # min_members 3 over a 1-pod launcher (2 cpu: 2/64 · 16 = 0.5 -> 5) and 4 workers of 4 GPUs
    # (40): no role minimum (min_members set, no min_replicas), so the top-up takes the
    # launcher first (5), then two workers (2 · 40): 85 tenths.
    gang = pending(
        "g",
        roles=[role("launcher", 1, gpu=0, cpu=2), role("worker", 4, gpu=4)],
        min_members=3,
        submit_time=NOW,
    )
    rnd = make_round(**two_nodes(), pending=[gang])
    terms = ObjectiveTerms.of(rnd)
    assert terms.min_pods(rnd.pending[0]) == {"launcher": 1, "worker": 2}
    plan = make_plan(rnd, place={"g": {"launcher": ["n0"], "worker": ["n0", "n1"]}})
    s = score(rnd, plan)
    assert tiers(s) == {0: 8.5}
    # exactly the minimum configuration: no growth; n0 and n1 were idle, each opened costs
    # round(10 · 0.25) = 2 (the default fragmentation weight)
    assert s.secondary == -2 * 2 / SCALE


def test_top_up_counts_what_a_role_minimum_already_holds() -> None:
    # min_members 4; 'cheap' (2 cpu: 5 each) has 2 replicas with min_replicas 1, 'dear' (4 GPUs:
    # 40 each) 4 replicas and no minimum. The top-up adds the one cheap pod left (1 + 1 = 2),
    # then two dear ones: 2 · 5 + 2 · 40 = 90.
    gang = pending(
        "g",
        roles=[role("cheap", 2, gpu=0, cpu=2, min_replicas=1), role("dear", 4, gpu=4)],
        min_members=4,
        submit_time=NOW,
    )
    rnd = make_round(**two_nodes(), pending=[gang])
    assert ObjectiveTerms.of(rnd).min_pods(rnd.pending[0]) == {"cheap": 2, "dear": 2}
    plan = make_plan(rnd, place={"g": {"cheap": ["n0", "n0"], "dear": ["n0", "n1"]}})
    assert tiers(score(rnd, plan)) == {0: 9.0}


def test_role_minimum_beats_the_cheapest_top_up() -> None:
    # the launcher is required (min_replicas 1 is implied: no min_members); workers min 2 of 4
    gang = pending(
        "g",
        roles=[role("launcher", 1, gpu=0, cpu=2), role("worker", 4, gpu=4, min_replicas=2)],
        submit_time=NOW,
    )
    rnd = make_round(**two_nodes(weights=weights(fragmentation=0)), pending=[gang])
    plan = make_plan(rnd, place={"g": {"launcher": ["n0"], "worker": ["n0", "n1", "n1"]}})
    s = score(rnd, plan)
    assert tiers(s) == {0: (5 + 2 * 40) / SCALE}
    assert s.secondary == 40 / SCALE  # one worker above the minimum: growth 1 · 40


# ----------------------------------------------------------------------------- urgency


def _urgency_round(submit: float, deadline: float | None, **w: float) -> Round:
    return make_round(
        **two_nodes(weights=weights(**w)),
        pending=[pending("p", gpu=4, submit_time=submit, deadline=deadline)],
    )


URGENCY: list[tuple[str, float, float | None, dict[str, float], int]] = [
    # (id, submit, deadline, weights, hand tier value in tenths of a 4-GPU pod = 40)
    ("fresh", NOW, None, {}, 40),
    ("submitted in the future", NOW + 600, None, {}, 40),  # waited max(0, -600) = 0
    ("2 h waited", NOW - 7200, None, {}, 48),  # 40 · (1 + 0.1 · 2) = 48
    ("aging capped", NOW - 20 * 3600, None, {}, 80),  # 1 + min(1.0, 0.1 · 20) = 2 -> 80
    ("custom cap", NOW - 20 * 3600, None, {"aging_cap": 0.5}, 60),  # 1 + min(0.5, 2.0) -> 60
    ("custom rate", NOW - 3600, None, {"aging_per_hour": 0.25}, 50),  # 1 + 0.25 · 1 -> 50
    ("no aging", NOW - 7200, None, {"aging_per_hour": 0}, 40),
    ("deadline passed", NOW, NOW - 1, {}, 80),  # ramp 1: 1 + 1.0 -> 80
    ("deadline now", NOW, NOW, {}, 80),  # slack 0 counts as reached
    ("deadline in 15 min", NOW, NOW + 900, {}, 70),  # ramp 1 - 900/3600 = 0.75 -> 40 · 1.75
    ("deadline in 45 min", NOW, NOW + 2700, {}, 50),  # ramp 0.25 -> 40 · 1.25
    ("deadline at the horizon", NOW, NOW + 3600, {}, 40),  # ramp starts strictly inside the horizon
    ("deadline beyond the horizon", NOW, NOW + 7200, {}, 40),
    ("boost 3", NOW, NOW - 1, {"deadline_boost": 3}, 160),  # 1 + 3 -> 160
    ("boost 0", NOW, NOW - 1, {"deadline_boost": 0}, 40),
    ("short horizon", NOW, NOW + 300, {"deadline_horizon": 600}, 60),  # ramp 1 - 300/600 = 0.5 -> 1.5
    ("no horizon", NOW, NOW + 1, {"deadline_horizon": 0}, 40),  # no ramp before the deadline
    ("no horizon, passed", NOW, NOW - 1, {"deadline_horizon": 0}, 80),
    ("aging and deadline add", NOW - 7200, NOW + 1800, {}, 68),  # 1 + 0.2 + 0.5 = 1.7 -> 68
    # steep aging makes every second count: 10 h · 100 = 1000 -> 40 · 1001
    ("steep aging", NOW - 36000, None, {"aging_per_hour": 100, "aging_cap": 1000}, 40 * 1001),
    # a gang submitted after 'now' has waited 0 s, not a negative time nor one second
    ("future submit, steep aging", NOW + 600, None, {"aging_per_hour": 1000, "aging_cap": 100}, 40),
    ("deadline now, no horizon", NOW, NOW, {"deadline_horizon": 0}, 80),  # reached: full boost
    ("one-second horizon", NOW, NOW + 0.5, {"deadline_horizon": 1}, 60),  # ramp 1 - 0.5/1 = 0.5
]


@pytest.mark.parametrize(
    ("submit", "deadline", "w", "value"), [pytest.param(s, d, w, v, id=i) for i, s, d, w, v in URGENCY]
)
def test_urgency(submit: float, deadline: float | None, w: dict[str, float], value: int) -> None:
    rnd = _urgency_round(submit, deadline, **w)
    assert tiers(score(rnd, make_plan(rnd, place={"p": ["n0"]}))) == {0: value / SCALE}


def test_now_defaults_to_the_latest_submit_time() -> None:
    rnd = make_round(
        **{**two_nodes(), "now": None},
        pending=[pending("old", gpu=4, submit_time=0), pending("new", gpu=4, submit_time=3600)],
    )
    # now = 3600: 'old' waited 1 h -> 40 · 1.1 = 44; 'new' waited 0 -> 40
    assert tiers(score(rnd, make_plan(rnd, place={"old": ["n0"], "new": ["n1"]}))) == {0: (44 + 40) / SCALE}


def test_running_gangs_count_at_the_highest_urgency() -> None:
    rnd = make_round(**two_nodes(), running=[running("r", ["n0"], gpu=4)], pending=[pending("p", submit_time=0)])
    assert tiers(score(rnd, make_plan(rnd))) == {0: 40 * KEPT / SCALE}  # whatever time has passed
    w = weights(aging_cap=0.5, short_first=0.0, deadline_boost=0.25)
    rnd = make_round(**two_nodes(weights=w), running=[running("r", ["n0"], gpu=4)])
    assert tiers(score(rnd, make_plan(rnd))) == {0: round(40 * 1.75) / SCALE}


def test_a_tier_never_swaps_running_work_for_waiting_work_of_its_priority() -> None:
    """Same-priority preemption by proxy: x (priority 2) fits on the free n1, or on n0 by
    evicting r (priority 1), which rule 5 allows; y (priority 1, waited two hours, short) could
    then take n1. At urgency 1 for running work the priority-1 tier gained by that swap and
    CP-SAT took it; greedy and every peer leave r running. Now the optimum keeps r."""
    rnd = make_round(
        **two_nodes(),
        running=[running("r", ["n0"], gpu=8, priority=1)],
        pending=[
            pending("x", gpu=8, priority=2, submit_time=NOW),
            pending("y", gpu=8, priority=1, submit_time=0).model_copy(update={"expected_duration": 60.0}),
        ],
    )
    swap = make_plan(rnd, place={"x": ["n0"], "y": ["n1"]}, evict={"r": ["x"]})
    keep = make_plan(rnd, place={"x": ["n1"]})
    assert gangopt.validate(rnd, swap) == [] and gangopt.validate(rnd, keep) == []
    assert lexicographic_key(score(rnd, keep)) > lexicographic_key(score(rnd, swap))
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.admitted == ["x"] and plan.preemptions == []


# ----------------------------------------------------------------------------- preemption


def _victim_round(**kw: Any) -> Round:
    """A 4-pod, 2-GPU-per-pod gang v on n0, n0, n1, n1 and a 4-GPU priority-9 pod to make room for."""
    w = weights(fragmentation=0, growth=kw.pop("growth", 1.0), preemption=kw.pop("w", 1.0))
    return make_round(
        **two_nodes(weights=w),
        running=[running("v", ["n0", "n0", "n1", "n1"], gpu=2, replicas=4, **kw)],
        pending=[pending("hi", 1, gpu=4, priority=9, submit_time=NOW)],
    )


def test_eviction_with_an_explicit_cost() -> None:
    rnd = _victim_round(preemption_cost=2.0)
    plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"v": ["hi"]})
    # 10 · 1 · 2.0 GPU-hours = 20 tenths
    assert score(rnd, plan).secondary == -20 / SCALE


def test_eviction_with_the_default_cost() -> None:
    rnd = _victim_round()
    plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"v": ["hi"]})
    # 4 pods of 2 GPUs = 8 GPU-eq; (0 s since checkpoint + 300 s restart) / 3600 h
    # = 8 · 300 / 3600 = 0.6667 GPU-hours -> round(6.667) = 7 tenths
    assert score(rnd, plan).secondary == -7 / SCALE
    assert tiers(score(rnd, plan)) == {9: 4.0, 0: 0.0}


@pytest.mark.parametrize(
    ("w", "cost"),
    [
        # 8 GPU-eq · 3900 s / 3600 = 8.6667 GPU-hours; · 10 · 2 = 173.33 -> 173 tenths
        (2.0, 173),
        # · 10 · 100 = 8666.67 -> 8667 (a large weight shows every second of the formula)
        (100.0, 8667),
    ],
)
def test_eviction_cost_counts_time_since_checkpoint_and_its_weight(w: float, cost: int) -> None:
    rnd = make_round(
        **two_nodes(weights=weights(fragmentation=0, preemption=w)),
        running=[
            running("v", ["n0", "n0", "n1", "n1"], gpu=2).model_copy(
                update={"seconds_since_checkpoint": 3600.0, "restart_seconds": 300.0}
            )
        ],
        pending=[pending("hi", 1, gpu=4, priority=9, submit_time=NOW)],
    )
    plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"v": ["hi"]})
    assert score(rnd, plan).secondary == -cost / SCALE


def test_a_free_eviction_still_costs_one() -> None:
    rnd = _victim_round(preemption_cost=0.0)
    plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"v": ["hi"]})
    assert score(rnd, plan).secondary == -1 / SCALE  # max(1, round(0))


SHRINKS: list[tuple[str, dict[str, Any], int, int]] = [
    # (id, victim settings, pods removed, hand secondary in tenths)
    # eviction 10 · 2.0 = 20, per pod round(20 / 4) = 5; 2 removed -> -10. Kept 2 of min 1:
    # growth 1 member · 20 (a 2-GPU pod) = +20. Total +10.
    ("explicit cost", {"preemption_cost": 2.0, "min_replicas": 1}, 2, 20 - 2 * 5),
    # default: 8 GPU-eq · 300/3600 = 0.667 -> eviction round(6.67) = 7, per pod round(7/4 = 1.75) = 2
    ("default cost", {"min_replicas": 1}, 2, 20 - 2 * 2),
    # eviction 10 · 0.1 = 1, per pod max(1, round(1/4)) = 1; 3 removed, kept 1 = min: no growth
    ("at least one per pod", {"preemption_cost": 0.1, "min_replicas": 1}, 3, -3 * 1),
    # growth weight 0: members above the minimum are worth round(0 · 20) = 0
    ("no growth value", {"preemption_cost": 2.0, "min_replicas": 1, "growth": 0.0}, 2, -2 * 5),
    # preemption weight 3: eviction 10 · 3 · 2.0 = 60, per pod 15
    ("preemption weight", {"preemption_cost": 2.0, "min_replicas": 1, "w": 3.0}, 2, 20 - 2 * 15),
]


@pytest.mark.parametrize(("kw", "removed", "secondary"), [pytest.param(k, r, s, id=i) for i, k, r, s in SHRINKS])
def test_shrink_cost(kw: dict[str, Any], removed: int, secondary: int) -> None:
    rnd = _victim_round(**kw)
    pods = [p.name for p in rnd.running[0].pods][-removed:]  # from n1 first
    plan = make_plan(rnd, place={"hi": ["n1"]}, shrink={"v": (pods, ["hi"])})
    s = score(rnd, plan)
    assert s.secondary == secondary / SCALE
    # the shrunk gang still runs: its tier value (minimum 1 pod of 2 GPUs = 20, kept) stays
    assert tiers(s) == {9: 4.0, 0: 20 * KEPT / SCALE}


# ----------------------------------------------------------------------------- growth


def test_growth_of_a_pending_elastic_gang() -> None:
    rnd = make_round(
        **two_nodes(weights=weights(fragmentation=0)),
        pending=[pending("e", 3, gpu=4, min_replicas=1, submit_time=NOW)],
    )
    plan = make_plan(rnd, place={"e": ["n0", "n0", "n1"]})
    s = score(rnd, plan)
    assert tiers(s) == {0: 40 / SCALE}  # the tier counts the minimum, 1 pod
    assert s.secondary == 2 * 40 / SCALE  # two members above it, 40 each


def test_growth_weight_is_rounded_per_member() -> None:
    rnd = make_round(
        **two_nodes(weights=weights(fragmentation=0, growth=0.33)),
        pending=[pending("e", 3, gpu=1, min_replicas=1, submit_time=NOW)],
    )
    plan = make_plan(rnd, place={"e": ["n0", "n0", "n1"]})
    # round(0.33 · 10) = 3 per member (not round(0.33 · 10 · 2) = 7 for both)
    assert score(rnd, plan).secondary == 2 * 3 / SCALE


def test_growth_of_a_running_gang() -> None:
    rnd = make_round(
        **two_nodes(weights=weights(fragmentation=0)),
        running=[running("r", ["n0", "n0"], gpu=2, replicas=5, min_replicas=1)],
    )
    # already 1 above its minimum (+20); one new pod on the idle n1 makes it 2 above (+40)
    assert score(rnd, make_plan(rnd)).secondary == 20 / SCALE
    plan = make_plan(rnd, place={"r": ["n1"]})
    assert score(rnd, plan).secondary == 2 * 20 / SCALE
    assert tiers(score(rnd, plan)) == {0: 20 * KEPT / SCALE}


def test_growth_of_a_multi_role_running_gang() -> None:
    roles = [role("ps", 2, gpu=0, cpu=8, min_replicas=1), role("worker", 4, gpu=2, min_replicas=2)]
    gang = running("r", {"ps": ["n0"], "worker": ["n0", "n1"]}, roles=roles)
    rnd = make_round(**two_nodes(weights=weights(fragmentation=0)), running=[gang])
    # ps: 8/64 · 16 = 2 -> 20; worker: 2/16 · 16 = 2 -> 20. Minimum: 1 ps + 2 workers.
    assert tiers(score(rnd, make_plan(rnd))) == {0: (20 + 2 * 20) * KEPT / SCALE}
    # one ps and two workers more: 3 members above the minimum, 20 each
    plan = make_plan(rnd, place={"r": {"ps": ["n1"], "worker": ["n1", "n1"]}})
    assert score(rnd, plan).secondary == 3 * 20 / SCALE


# ----------------------------------------------------------------------------- spread


def test_spread_counts_extra_domains_at_the_preferred_level() -> None:
    rnd = make_round(
        cluster(4, gpus=8, cpu=32, racks=2, blocks=1),
        pending=[pending("s", 3, gpu=4, preferred="rack", submit_time=NOW)],
        now=NOW,
        weights=weights(fragmentation=0, spread=2.5),
    )
    # n0, n1 in r0; n2, n3 in r1. Spread cost round(10 · 2.5) = 25 per extra rack.
    one_rack = make_plan(rnd, place={"s": ["n0", "n1", "n1"]})
    two_racks = make_plan(rnd, place={"s": ["n0", "n2", "n3"]})
    assert score(rnd, one_rack).secondary == 0.0
    assert score(rnd, two_racks).secondary == -25 / SCALE
    assert lexicographic_key(score(rnd, one_rack)) > lexicographic_key(score(rnd, two_racks))
    # a gang without a preferred level is never charged for spreading
    plain = make_round(
        rnd.cluster, pending=[pending("s", 3, gpu=4, submit_time=NOW)], now=NOW, weights=weights(fragmentation=0)
    )
    assert score(plain, make_plan(plain, place={"s": ["n0", "n2", "n3"]})).secondary == 0.0


def test_spread_charges_every_level_above_the_preferred_one_narrowest_most() -> None:
    """Issue 15: racks r0..r3 (two nodes each), blocks b0 = {r0, r1} and b1 = {r2, r3}. A gang
    preferring one rack pays 10 per extra rack and half that, 5, per extra block: two racks of
    one block cost 10, two racks of two blocks 15, three racks over both blocks 25."""
    rnd = make_round(
        cluster(8, gpus=8, cpu=32, racks=4, blocks=2),
        pending=[pending("s", 3, gpu=8, preferred="rack", submit_time=NOW)],
        now=NOW,
        weights=weights(fragmentation=0),
    )
    terms = ObjectiveTerms.of(rnd)
    assert terms.spread_levels(rnd.pending[0]) == [("rack", 10), ("block", 5)]
    one_block = make_plan(rnd, place={"s": ["n0", "n1", "n2"]})
    two_blocks = make_plan(rnd, place={"s": ["n0", "n1", "n4"]})
    everywhere = make_plan(rnd, place={"s": ["n0", "n2", "n4"]})
    assert score(rnd, one_block).secondary == -10 / SCALE
    assert score(rnd, two_blocks).secondary == -15 / SCALE
    assert score(rnd, everywhere).secondary == -25 / SCALE


def test_spread_levels_halve_upwards_and_stop_below_a_required_level() -> None:
    """``preferred: node`` charges node 10, rack 5, block round(2.5) = 2; a required block
    holds the gang in one block, so only the levels below it are charged; ``spread = 0``
    charges nothing, and a tiny weight still charges at least 1 per level."""
    rnd = make_round(
        cluster(8, gpus=8, racks=4, blocks=2),
        pending=[
            pending("n", 2, gpu=8, preferred="node"),
            pending("both", 2, gpu=8, required="block", preferred="node"),
            pending("under", 2, gpu=8, required="rack", preferred="block"),
        ],
    )
    terms = ObjectiveTerms.of(rnd)
    assert terms.spread_levels(rnd.pending[0]) == [("node", 10), ("rack", 5), ("block", 2)]
    assert terms.spread_levels(rnd.pending[1]) == [("node", 10), ("rack", 5)]
    assert terms.spread_levels(rnd.pending[2]) == []
    off = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"weights": weights(spread=0)})})
    assert ObjectiveTerms.of(off).spread_levels(off.pending[0]) == []
    tiny = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"weights": weights(spread=0.1)})})
    assert ObjectiveTerms.of(tiny).spread_levels(tiny.pending[0]) == [("node", 1), ("rack", 1), ("block", 1)]


def test_spread_adds_up_over_gangs() -> None:
    rnd = make_round(
        cluster(4, gpus=8, cpu=32, racks=2),
        pending=[
            pending("spread", 2, gpu=4, preferred="rack", submit_time=NOW),
            pending("packed", 2, gpu=4, preferred="rack", submit_time=NOW),
        ],
        now=NOW,
        weights=weights(fragmentation=0),
    )
    # 'spread' uses r0 and r1 (-10), 'packed' only r1 (0): -10 in all, whichever comes last
    plan = make_plan(rnd, place={"spread": ["n0", "n2"], "packed": ["n3", "n3"]})
    assert score(rnd, plan).secondary == -10 / SCALE


def test_spread_at_node_level() -> None:
    rnd = make_round(
        cluster(4, gpus=8, cpu=32),
        pending=[pending("s", 4, gpu=2, preferred="node", submit_time=NOW)],
        now=NOW,
        weights=weights(fragmentation=0),
    )
    plan = make_plan(rnd, place={"s": ["n0", "n1", "n2", "n2"]})
    assert score(rnd, plan).secondary == -(3 - 1) * 10 / SCALE  # three nodes: two extra, 10 each


# ----------------------------------------------------------------------------- opened nodes


OPENED: list[tuple[str, float, int]] = [
    # (id, fragmentation weight, hand cost per opened node in tenths)
    ("weight 1", 1.0, 10),
    ("weight 0.3", 0.3, 3),
    # the default 0.25 is round(2.5) = 2 tenths: Python rounds half to even
    ("default weight", 0.25, 2),
    ("weight 0.35", 0.35, 4),  # round(3.5) = 4
    ("off", 0.0, 0),
]


@pytest.mark.parametrize(("w", "per_node"), [pytest.param(w, c, id=i) for i, w, c in OPENED])
def test_opened_nodes(w: float, per_node: int) -> None:
    rnd = make_round(
        cluster(4, gpus=8, cpu=32),
        running=[running("busy", ["n0"], gpu=1, preemptible=False)],
        pending=[pending("p", 4, gpu=2, submit_time=NOW)],
        now=NOW,
        weights=weights(fragmentation=w),
    )
    # n0 is busy; n1 and n2 are idle and receive pods: two opened nodes
    plan = make_plan(rnd, place={"p": ["n0", "n1", "n1", "n2"]})
    assert score(rnd, plan).secondary == -2 * per_node / SCALE
    packed = make_plan(rnd, place={"p": ["n0", "n0", "n0", "n1"]})
    assert score(rnd, packed).secondary == -1 * per_node / SCALE


def test_a_node_freed_by_an_eviction_is_not_opened() -> None:
    rnd = make_round(
        cluster(2, gpus=8, cpu=32),
        running=[running("v", ["n0"], gpu=8, preemption_cost=1.0)],
        pending=[pending("hi", 1, gpu=8, priority=5, submit_time=NOW)],
        now=NOW,
        weights=weights(fragmentation=2.0),
    )
    # hi lands on n0, which had pods before the plan: only the eviction costs (10 · 1.0)
    assert score(rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"v": ["hi"]})).secondary == -10 / SCALE
    # on the idle n1 it opens a node instead: 10 · 2.0 per node
    assert score(rnd, make_plan(rnd, place={"hi": ["n1"]})).secondary == -20 / SCALE


# ----------------------------------------------------------------------------- everything at once


def test_all_secondary_terms_add_up() -> None:
    rnd = make_round(
        cluster(4, gpus=8, cpu=32, racks=2),
        running=[running("v", ["n0", "n0"], gpu=4, replicas=2, min_replicas=1, preemption_cost=1.5)],
        pending=[  # e first: its growth must still count after hi (no growth) is scored
            pending("e", 3, gpu=2, min_replicas=1, submit_time=NOW - 3600),
            pending("hi", 2, gpu=4, priority=5, preferred="rack", submit_time=NOW),
        ],
        now=NOW,
        weights=weights(fragmentation=0.5, spread=1.0, growth=1.0, preemption=1.0),
    )
    # T_gpu = 32 over four nodes: a 4-GPU pod is 4/32 · 32 = 4 GPU-eq (40), a 2-GPU pod 20.
    # v shrinks by one pod (on n0) for hi: eviction 10 · 1.5 = 15, per pod round(15/2 = 7.5) = 8.
    # hi: one pod on n0 (r0), one on n2 (r1): 1 extra rack -> -10; n2 opened.
    # e: 3 pods on n1 (r0, opened) and n3 (r1, opened): 2 members above its minimum, 20 each.
    # opened: n1, n2, n3 -> 3 · round(10 · 0.5) = 15.
    plan = make_plan(
        rnd,
        place={"hi": ["n0", "n2"], "e": ["n1", "n1", "n3"]},
        shrink={"v": (["v-worker-1"], ["hi"])},
    )
    s = score(rnd, plan)
    assert s.secondary == (-8 - 10 + 2 * 20 - 15) / SCALE
    # tiers: hi 2 · 40 = 80 at priority 5; at 0, v keeps its minimum (40 · KEPT) and e its
    # (20 · 1.1 = 22)
    assert tiers(s) == {5: 8.0, 0: (40 * KEPT + 22) / SCALE}


def test_the_solver_reports_the_hand_computed_optimum() -> None:
    """The plan CP-SAT returns is scored the same way, and on this round its value is known:
    start the 2-pod gang packed on one idle node (opening one: -2) and nothing else."""
    rnd = make_round(
        cluster(3, gpus=8, cpu=32),
        running=[running("busy", ["n0"], gpu=8, preemptible=False)],
        pending=[pending("p", 2, gpu=4, submit_time=NOW - 7200)],
        now=NOW,
    )
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    # T_gpu = 24: a 4-GPU pod is 4/24 · 24 = 4 (40); urgency 1.2 -> round(80 · 1.2) = 96;
    # the running 8-GPU gang stays in the same tier: + 80 · KEPT
    assert tiers(plan.score) == {0: (96 + 80 * KEPT) / SCALE}
    assert plan.score.secondary == -2 / SCALE  # one idle node opened at round(10 · 0.25) = 2
    assert plan.score == _rescored(rnd, plan)


def test_bounds_are_attached_as_given() -> None:
    rnd = _urgency_round(NOW, None)
    plan = make_plan(rnd, place={"p": ["n0"]})
    s = score(rnd, plan, {0: 9.5}, 1.25)
    assert [(t.priority, t.value, t.bound) for t in s.tiers] == [(0, 4.0, 9.5)]
    assert s.secondary_bound == 1.25
    # a tier without a bound is bounded by its own value; no secondary bound is None
    plain = score(rnd, plan)
    assert [(t.value, t.bound) for t in plain.tiers] == [(4.0, 4.0)] and plain.secondary_bound is None


def _rescored(rnd: Round, plan: Plan) -> Score:
    return score(
        rnd,
        plan,
        {t.priority: t.bound for t in plan.score.tiers},
        plan.score.secondary_bound,
    )


# ----------------------------------------------------------------------------- fair share


def _weighted(q: Queue, weight: float) -> Queue:
    return q.model_copy(update={"weight": weight})


def test_fair_shares_divide_the_cohort_nominal_by_weight() -> None:
    """Issue 15: cohort c of qa (weight 3) and qb (unset: 1), nominal 8 GPUs each: qa deserves
    3/4 of 16 = 12 GPUs, qb 4. qa runs 6 (share 0.5), qb 4 (share 1.0); qc, outside any
    cohort, has no share. Weights unset everywhere: no shares at all."""
    nodes = cluster(4, gpus=8)
    gangs = [
        running("a", ["n0"], 6, queue="qa"),
        running("b", ["n1"], 4, queue="qb"),
        running("c", ["n2"], 8, queue="qc"),
    ]
    plain = [queue("qa", cohort="c", gpu=8), queue("qb", cohort="c", gpu=8), queue("qc", gpu=8)]
    assert ObjectiveTerms.of(make_round(nodes, running=gangs, queues=plain)).fair_shares == {}
    weighted = [_weighted(plain[0], 3.0), *plain[1:]]
    shares = ObjectiveTerms.of(make_round(nodes, running=gangs, queues=weighted)).fair_shares
    assert shares == {"qa": pytest.approx(0.5), "qb": pytest.approx(1.0)}
    zero = [_weighted(plain[0], 3.0), _weighted(plain[1], 0.0), plain[2]]
    assert ObjectiveTerms.of(make_round(nodes, running=gangs, queues=zero)).fair_shares["qb"] == float("inf")


def test_weights_of_a_tree_without_quota_share_the_cluster() -> None:
    """Volcano-style: qa (weight 3) and qb (1) in cohort c, no nominal anywhere. They share the
    schedulable capacity, 4 nodes of 8 GPUs (one cordoned: 24): qa deserves 18 GPUs, qb 6. qa
    runs 6 GPUs (1/3), qb 4 (2/3): qb is the more served, whatever the CPU and memory."""
    nodes = cluster(4, gpus=8, cordoned=["n3"])
    gangs = [running("a", ["n0"], 6, queue="qa"), running("b", ["n1"], 4, queue="qb")]
    queues = [_weighted(queue("qa", cohort="c"), 3.0), _weighted(queue("qb", cohort="c"), 1.0)]
    terms = ObjectiveTerms.of(make_round(nodes, running=gangs, queues=queues))
    assert terms.schedulable_capacity["gpu"] == 24 * 1000
    shares = terms.fair_shares
    assert shares["qa"] >= 6 / 18 - 1e-9 and shares["qb"] >= 4 / 6 - 1e-9  # GPU share; CPU may dominate
    assert shares["qa"] < shares["qb"]
    unweighted = [queue("qa", cohort="c"), queue("qb", cohort="c")]
    assert ObjectiveTerms.of(make_round(nodes, running=gangs, queues=unweighted)).fair_shares == {}


def test_tie_break_order_hands_a_weighted_cohort_its_places_least_served_first() -> None:
    """FIFO order b1 (qb), x (qc), a1 (qa): the cohort's gangs hold places 0 and 2; qa (share
    0.5) takes place 0 and qb (1.0) place 2; x, outside the cohort, keeps place 1. Per group
    (priority), places never cross groups."""
    nodes = cluster(4, gpus=8)
    gangs = [running("a", ["n0"], 6, queue="qa"), running("b", ["n1"], 4, queue="qb")]
    queues = [_weighted(queue("qa", cohort="c", gpu=8), 3.0), queue("qb", cohort="c", gpu=8), queue("qc", gpu=8)]
    rnd = make_round(
        nodes,
        running=gangs,
        queues=queues,
        pending=[
            pending("b1", 1, queue="qb", submit_time=0),
            pending("x", 1, queue="qc"),
            pending("a1", 1, queue="qa"),
        ],
    )
    terms = ObjectiveTerms.of(rnd)
    assert terms.tie_break_order([0, 1, 2]) == [2, 1, 0]
    assert terms.tie_break_order([0, 1, 2], group=lambda gi: gi == 0) == [0, 1, 2]


# ----------------------------------------------------------------------------- guarantee in a tree

RECLAIM_ANY = QueuePreemption(reclaim_within_cohort="any", other_queues="never")


def _guarantee_tree(ta: dict[str, int], tb: dict[str, int], keep: dict[str, int] | None = None) -> Round:
    """Root org; cohort ta (``ta`` of its own) holds queue a (nominal 0, reclaims at any
    priority) and, unless ``keep`` is None, a child cohort tk (4 GPUs of its own, ``keep`` as
    lending limit, ``{}``: none) holding queue k (nominal 0); cohort tb (``tb`` of its own) holds queue b (nominal
    0, reclaims at any priority). b runs 16 GPUs on the 2-node cluster."""
    queues = [
        Queue(name="a", cohort="ta", nominal={"gpu": 0}, preemption=RECLAIM_ANY),
        Queue(name="b", cohort="tb", nominal={"gpu": 0}, preemption=RECLAIM_ANY),
    ]
    cohorts = [
        Cohort(name="org"),
        Cohort(name="ta", parent="org", nominal=ta),
        Cohort(name="tb", parent="org", nominal=tb),
    ]
    if keep is not None:
        queues.append(Queue(name="k", cohort="tk", nominal={"gpu": 0}))
        cohorts.append(Cohort(name="tk", parent="ta", nominal={"gpu": 4}, lending_limit=keep))
    return make_round(
        cluster(2),
        queues=queues,
        cohorts=cohorts,
        running=[running("b1", ["n0"], 8, queue="b"), running("b2", ["n1"], 8, queue="b")],
        pending=[pending("a1", gpu=8, queue="a")],
    )


GIB = 1000  # milli-units per GPU

TREE_GUARANTEES: list[tuple[str, dict[str, int], dict[str, int], dict[str, int] | None, dict[str, int], int]] = [
    # (id, ta's own, tb's own, tk's lending limit, GPUs used per queue, guarantee term in tenths)
    # guaranteed cohorts hold GPUs of their own and have a queue reclaiming at any priority
    # below: the term is 10 · 2.0 · Σ min(U, S) over them (a and b, nominal 0, add nothing)
    ("a within ta's 8", {"gpu": 8}, {}, None, {"a": 8, "b": 8}, 160),
    ("a above ta's 8", {"gpu": 8}, {}, None, {"a": 12, "b": 4}, 160),  # min(12, 8)
    ("a idle", {"gpu": 8}, {}, None, {"a": 0, "b": 16}, 0),
    ("both hold quota", {"gpu": 8}, {"gpu": 16}, None, {"a": 4, "b": 12}, 320),  # 4 + 12
    ("no cohort quota", {}, {}, None, {"a": 8, "b": 8}, 0),  # the flat term: nominal 0
    # tk lends nothing: ta's S = 8 + (4 - 4) = 8 and U = a + max(0, k - 4)
    ("k within what tk keeps", {"gpu": 8}, {}, {"gpu": 0}, {"a": 6, "k": 4, "b": 6}, 120),  # min(6, 8)
    ("k beyond it", {"gpu": 8}, {}, {"gpu": 0}, {"a": 6, "k": 6, "b": 4}, 160),  # min(6 + 2, 8)
    ("tk lends all", {"gpu": 8}, {}, {}, {"a": 6, "k": 6, "b": 4}, 240),  # no lending limit: S = 12, U = 12
]


@pytest.mark.parametrize(
    ("ta", "tb", "keep", "used", "value"), [t[1:] for t in TREE_GUARANTEES], ids=[t[0] for t in TREE_GUARANTEES]
)
def test_the_guarantee_counts_a_cohorts_subtree_within_its_quota(
    ta: dict[str, int], tb: dict[str, int], keep: dict[str, int] | None, used: dict[str, int], value: int
) -> None:
    """Weights.guarantee in a cohort tree (docs/objective.md): a cohort holding quota of its own
    guarantees its subtree ``S`` (rule 5), so its subtree's usage within it counts like a
    queue's usage within its nominal (Kueue's hierarchical cohorts)."""
    rnd = _guarantee_tree(ta, tb, keep)
    terms = ObjectiveTerms.of(rnd)
    assert terms.guarantee_value({q: GIB * n for q, n in used.items()}) == value
    assert terms.guarantee_ceiling == round(20 * sum(terms.guaranteed_cohorts.values()) / GIB)


def test_only_cohorts_with_a_reclaiming_queue_below_are_guaranteed() -> None:
    """tk holds quota but its queue k does not reclaim at any priority: not guaranteed; ta and
    tb are; without a queue reclaiming at any priority nothing is (the term is 0 as before)."""
    rnd = _guarantee_tree({"gpu": 8}, {"gpu": 16}, keep={"gpu": 0})
    assert ObjectiveTerms.of(rnd).guaranteed_cohorts == {"ta": 8 * GIB, "tb": 16 * GIB}
    default = [q.model_copy(update={"preemption": QueuePreemption()}) for q in rnd.queues]
    plain = rnd.model_copy(update={"queues": default})
    assert ObjectiveTerms.of(plain).guaranteed_cohorts == {} and ObjectiveTerms.of(plain).guarantee_ceiling == 0
    off = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"weights": Weights(guarantee=0.0)})})
    assert ObjectiveTerms.of(off).guaranteed_cohorts == {}


def test_a_reclaim_through_a_cohorts_guarantee_is_worth_its_gpus_less_the_restart() -> None:
    """a (nominal 0) under ta (8 GPUs of its own) takes back 8 GPUs b borrows at equal priority:
    rule 5 lets it (ta within its quota, tb above its none), and the guarantee term makes it
    worth 8 · 2.0 less b1's restart (8 GPUs x 300 s); the flat term (queues' nominal only)
    saw 0 and only the restart. CP-SAT takes it and proves it."""
    rnd = _guarantee_tree({"gpu": 8}, {})
    reclaim = make_plan(rnd, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
    gain = score(rnd, reclaim).secondary - score(rnd, make_plan(rnd)).secondary
    assert gain == pytest.approx(8 * 2.0 - 8 * 300 / 3600, abs=0.1)
    plan = gangopt.solve(rnd)
    assert plan.admitted == ["a1"] and [p.kind for p in plan.preemptions] == ["evict"]
    assert plan.status == "optimal" and plan.gap == 0.0
    assert plan.score.secondary == pytest.approx(score(rnd, reclaim).secondary)


@pytest.mark.parametrize("mix", ["jobs", "tilted"])
def test_the_running_table_is_each_running_gang_scored_alone(mix: Any) -> None:
    """:attr:`ObjectiveTerms.running_base` values one-role gangs by shape; every entry is what
    the gang-by-gang reading gives (tier value, secondary terms when left alone)."""
    from collections import Counter

    from gangopt.objective import _running_terms
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 100, running_mix=mix)
    elastic = rnd.running[0].model_copy(
        update={"roles": [r.model_copy(update={"min_replicas": 0}) for r in rnd.running[0].roles]}
    )
    rnd = rnd.model_copy(update={"running": [elastic, *rnd.running[1:]]})
    terms = ObjectiveTerms.of(rnd)
    base = terms.running_base
    alone = [_running_terms(terms, run, set(), Counter()) for run in rnd.running]
    assert base.tier == [t for t, _ in alone] == [terms.tier_value(run) for run in rnd.running]
    assert base.surplus == [s for _, s in alone]
    assert any(s != 0 for s in base.surplus)  # the elastic gang above its minimum
    sums: dict[int, int] = {}
    for run, t in zip(rnd.running, base.tier, strict=True):
        sums[run.priority] = sums.get(run.priority, 0) + t
    assert base.tier_sums == sums


@pytest.mark.parametrize("mix", ["jobs", "tilted"])
def test_a_score_from_the_running_table_is_the_gang_by_gang_score(mix: Any) -> None:
    """:func:`score` counts the running gangs a plan leaves alone from the table and the rest
    gang by gang; the same plan scored gang by gang throughout (the path of a round whose
    names repeat) scores the same, on plans that preempt, shrink and grow."""
    from dataclasses import replace

    from gangopt.solvers import SOLVERS
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 100, running_mix=mix)
    plans = [gangopt.solve(rnd, solver=name, annotate=False) for name in SOLVERS if name != "cpsat"]
    assert any(p.preemptions for p in plans)
    assert all(gangopt.validate(rnd, p) == [] for p in plans)
    fast = [score(rnd, p) for p in plans]
    terms = ObjectiveTerms.of(rnd)
    base = replace(terms.running_base)
    base.__dict__["owner"] = None  # the index of a round whose names repeat
    terms.__dict__["running_base"] = base
    assert [score(rnd, p) for p in plans] == fast
    # A plan that touches no running gang (the unstarted plan of a cut-short solve) is scored by
    # the table's sums alone, without its pod and node indexes: each running gang's terms.
    from collections import Counter

    from gangopt.objective import _running_terms
    from gangopt.solvers.greedy.engine import unstarted

    fresh = terms.__dict__["running_base"] = replace(base)  # no index built yet
    nothing = unstarted(rnd)
    assert gangopt.validate(rnd, nothing) == []
    alone = score(rnd, nothing)
    each = [_running_terms(terms, run, set(), Counter()) for run in rnd.running]
    by_priority = Counter[int]()
    for run, (tier, _) in zip(rnd.running, each, strict=True):
        by_priority[run.priority] += tier
    assert {t.priority: t.value for t in alone.tiers} == {p: v / SCALE for p, v in by_priority.items()}
    assert alone.secondary == pytest.approx(sum(s for _, s in each) / SCALE)
    assert not {"owner", "index", "busy"} & set(fresh.__dict__)  # no index built for it


def test_the_preemption_costs_in_one_pass_are_each_gangs_bit_for_bit() -> None:
    # ``preemption_costs`` (greedy's victim order) must give every gang the float
    # ``preemption_cost`` gives it, or the victim order, and with it greedy's plan, changes:
    # sums of several equal pod sizes, explicit costs, two roles, and gangs already memoised.
    from tests.builders import fragmented_round

    rnd = fragmented_round(128, 20, running_mix="jobs")
    two = [role("a", 2, 3), role("b", 1, 5)]
    extra = [
        running("explicit", ["n0", "n1"], gpu=3, preemption_cost=2.5),
        running("two-roles", {"a": ["n0", "n1"], "b": ["n2"]}, roles=two),
        running("seven", ["n3"] * 7, gpu=0, cpu=5).model_copy(update={"seconds_since_checkpoint": 3600.0}),
    ]
    rnd = rnd.model_copy(update={"running": [*rnd.running, *extra]})
    assert {len(g.pods) for g in rnd.running} >= {1, 2, 3, 7}
    alone = ObjectiveTerms(rnd)
    one = alone.pod_geq(extra[-1].roles[0])
    assert sum([one] * 7) != 7 * one  # a sum the batch must make as the gang's cost does
    expected = [alone.preemption_cost(g).hex() for g in rnd.running]
    batch = ObjectiveTerms(rnd)
    asked_first = rnd.running[:-3:3]
    assert [batch.preemption_cost(g).hex() for g in asked_first] == expected[:-3:3]
    assert [c.hex() for c in batch.preemption_costs(rnd.running)] == expected
    assert [batch.preemption_cost(g).hex() for g in rnd.running] == expected  # kept in the memo


@st.composite
def _priced_gangs(draw: st.DrawFn) -> tuple[Round, frozenset[str]]:
    """Running gangs of every kind :meth:`ObjectiveTerms.running_prices` reads: one role or two,
    role minimums or not, a gang-wide minimum or not, an explicit preemption cost or the GPU-hours
    one (float seconds, several pods of one size: a sum made pod by pod), CPU-only pods; random
    weights (the eviction weight and the kept urgency) and some gangs reclaimable."""
    gangs = []
    free = iter(range(128))  # a node of its own per pod: any request fits
    for i in range(draw(st.integers(1, 12))):
        pods = draw(st.integers(1, 9))
        gpu = draw(st.sampled_from([0, 1, 2, 3, 8]))
        cpu = draw(st.sampled_from([1, 5, 12, 96]))
        two = draw(st.integers(0, 3)) == 0
        members = draw(st.one_of(st.none(), st.integers(1, pods + two)))  # at most the pods running
        min_replicas = draw(st.one_of(st.none(), st.integers(0 if members else 1, pods)))  # a minimum of 1 at least
        # with no minimum at all a role's minimum is its replicas: then every replica runs
        replicas = pods if min_replicas is None and members is None else pods + draw(st.integers(0, 3))
        roles = [role("worker", replicas, gpu, cpu=cpu, min_replicas=min_replicas)]
        placed: Any = [f"n{next(free)}" for _ in range(pods)]
        if two:
            ps_min = draw(st.one_of(st.none(), st.integers(0, 1)))
            ps_replicas = 1 if ps_min is None and members is None else 2
            roles.append(role("ps", ps_replicas, 0, cpu=1, min_replicas=ps_min))
            placed = {"worker": placed, "ps": [f"n{next(free)}"]}
        gang = running(
            f"g{i}",
            placed,
            roles=roles,
            priority=draw(st.integers(0, 3)),
            min_members=members,
            preemption_cost=draw(st.one_of(st.none(), st.floats(0, 500, allow_nan=False))),
        ).model_copy(
            update={
                "seconds_since_checkpoint": draw(st.floats(0, 1e6, allow_nan=False)),
                "restart_seconds": draw(st.floats(0, 3600, allow_nan=False)),
            }
        )
        gangs.append(gang)
    w = {
        "preemption": draw(st.floats(0, 5, allow_nan=False)),
        "aging_cap": draw(st.floats(0, 3, allow_nan=False)),
        "short_first": draw(st.floats(0, 1, allow_nan=False)),
    }
    rnd = make_round(cluster(128, 8, cpu=96), running=gangs, weights=weights(**w))
    reclaimable = frozenset(g.name for g in gangs if draw(st.booleans()))
    return rnd, reclaimable


@settings(max_examples=examples(100), deadline=None)
@given(_priced_gangs())
def test_the_running_prices_in_numpy_are_each_gangs_bit_for_bit(case: tuple[Round, frozenset[str]]) -> None:
    # Greedy's cheapest room prices its victims by running_prices: any integer apart from
    # tier_value's or pod_removal_cost's (a rounding, the urgency, a minimum) moves its plans.
    rnd, reclaimable = case
    terms = ObjectiveTerms(rnd)
    terms.__dict__["reclaimable"] = reclaimable  # borrowed work, without building the cohorts
    gangs = list(rnd.running)
    tier, removal = terms.running_prices(gangs)
    assert tier.dtype == removal.dtype == np.int64
    assert tier.tolist() == [terms.tier_value(g) for g in gangs]
    assert removal.tolist() == [terms.pod_removal_cost(g) for g in gangs]
    assert terms.running_prices([])[0].size == 0


def test_the_running_prices_follow_the_roundings_of_the_scalar_ones() -> None:
    # Halves round to even in both (np.rint, round): 2.5 GPU-h at weight 1 is 25 units, and
    # 25 over 2 pods 12.5 -> 12; a tier of 3 pods x 10 at urgency 1.5 is 45.
    gangs = [
        running("a", ["n0", "n1"], gpu=1, preemption_cost=2.5),
        running("b", ["n0", "n1", "n2"], gpu=1, preemption_cost=0.0),
    ]
    rnd = make_round(cluster(4, 8), running=gangs, weights=weights(aging_cap=0.5, short_first=0.0, deadline_boost=0.0))
    terms = ObjectiveTerms(rnd)
    tier, removal = terms.running_prices(gangs)
    assert terms.kept_urgency == 1.5
    assert removal.tolist() == [terms.pod_removal_cost(g) for g in gangs] == [12, 1]
    assert tier.tolist() == [terms.tier_value(g) for g in gangs] == [30, 45]
