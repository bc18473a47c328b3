"""The greedy baseline (gangopt.solvers.greedy.engine) and the round-as-arrays helpers (gangopt.arrays).

Every plan greedy returns here must pass the independent validator: that is the baseline's
contract (it is the CP-SAT hint and the fallback), so :func:`decide` checks it every time.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gangopt
from gangopt.arrays import (
    Eligibility,
    capacity_matrix,
    first_fit,
    fit_counts,
    free_capacity,
    quota_limits,
    request_matrix,
    request_vector,
    resource_names,
)
from gangopt.objective import score
from gangopt.schema import PendingGang, Plan, Round, Status, Toleration
from gangopt.solvers.greedy.engine import RESERVED, UNEXPLAINED, GreedyEngine, Growth, greedy
from gangopt.validation import validate
from tests.builders import cluster, make_plan, make_round, node, pending, queue, role, running
from tests.strategies import examples, fragmented_rounds, rounds


def decide(rnd: Round, growth: Growth = "eager") -> Plan:
    """Greedy plan for ``rnd``; fails the test if the validator finds anything."""
    plan = greedy(rnd, growth=growth)
    assert validate(rnd, plan) == []
    assert plan.status == Status.FEASIBLE and plan.solver == "greedy"
    assert sorted([*plan.admitted, *(w.gang for w in plan.waiting)]) == sorted(g.name for g in rnd.pending)
    return plan


def nodes_of(plan: Plan, gang: str) -> list[str]:
    return [p.node for p in plan.placements if p.gang == gang]


def waiting(plan: Plan) -> dict[str, str]:
    return {w.gang: w.code for w in plan.waiting}


# ----------------------------------------------------------------------------- ordering, all-or-nothing


def test_admits_in_priority_order_then_submit_time() -> None:
    rnd = make_round(
        cluster(2, gpus=8),
        pending=[
            pending("low", 2, gpu=8, priority=1),
            pending("late", 1, gpu=8, priority=5, submit_time=20.0),
            pending("early", 1, gpu=8, priority=5, submit_time=10.0),
        ],
    )
    plan = decide(rnd)
    assert plan.admitted == ["early", "late"]
    assert nodes_of(plan, "early") == ["n0"] and nodes_of(plan, "late") == ["n1"]
    assert waiting(plan) == {"low": "capacity"}


def test_all_or_nothing_gang_that_cannot_fit_whole_gets_nothing() -> None:
    rnd = make_round(cluster(2, gpus=8), pending=[pending("big", 3, gpu=8), pending("small", 1, gpu=4)])
    plan = decide(rnd)
    assert plan.admitted == ["small"]
    assert nodes_of(plan, "big") == []
    assert waiting(plan) == {"big": "capacity"}
    assert "needs 3 pods" in plan.waiting[0].reasons[0]


def test_pod_names_follow_the_contract() -> None:
    rnd = make_round(
        cluster(2, gpus=8, cpu=64),
        pending=[pending("job", roles=[role("launcher", 1, gpu=0, cpu=1), role("worker", 2, gpu=8)])],
    )
    plan = decide(rnd)
    assert [(p.role, p.pod) for p in plan.placements] == [
        ("launcher", "job-launcher-0"),
        ("worker", "job-worker-0"),
        ("worker", "job-worker-1"),
    ]


def test_group_starts_together_or_not_at_all() -> None:
    rnd = make_round(
        cluster(2, gpus=8),
        pending=[
            pending("a", 1, gpu=8, group="g", priority=5),
            pending("b", 3, gpu=8, group="g", priority=1),
            pending("c", 1, gpu=8, priority=3),
        ],
    )
    plan = decide(rnd)
    assert plan.admitted == ["c"]
    assert waiting(plan) == {"a": "group", "b": "capacity"}
    assert "b waits" in plan.waiting[0].reasons[0]


def test_group_whose_gangs_fit_alone_but_not_together() -> None:
    rnd = make_round(
        cluster(2, gpus=8),
        pending=[pending("a", 1, gpu=8, group="g"), pending("b", 2, gpu=8, group="g")],
    )
    plan = decide(rnd)
    assert plan.admitted == [] and set(waiting(plan).values()) == {"capacity"}
    assert "do not fit together" in plan.waiting[0].reasons[0]


# ----------------------------------------------------------------------------- preemption


def test_preemption_evicts_a_lower_priority_gang_whole() -> None:
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("low", ["n0", "n1"], gpu=4, priority=0)],
        pending=[pending("high", 2, gpu=8, priority=10)],
    )
    plan = decide(rnd)
    assert plan.admitted == ["high"]
    (pre,) = plan.preemptions
    assert (pre.gang, pre.kind, pre.for_gangs) == ("low", "evict", ["high"])
    assert pre.pods == ["low-worker-0", "low-worker-1"] and pre.nodes == ["n0", "n1"]


def test_never_preempts_higher_equal_or_non_preemptible_gangs() -> None:
    rnd = make_round(
        cluster(3, gpus=8),
        running=[
            running("higher", ["n0"], gpu=8, priority=20),
            running("equal", ["n1"], gpu=8, priority=10),
            running("pinned", ["n2"], gpu=8, priority=0, preemptible=False),
        ],
        pending=[pending("p", 1, gpu=8, priority=10)],
    )
    plan = decide(rnd)
    assert plan.preemptions == [] and plan.admitted == []
    assert waiting(plan) == {"p": "capacity"}


def test_no_preemption_when_policy_forbids_it() -> None:
    rnd = make_round(
        cluster(1, gpus=8),
        running=[running("low", ["n0"], gpu=8, priority=0)],
        pending=[pending("high", 1, gpu=8, priority=10)],
        preemption=False,
    )
    plan = decide(rnd)
    assert plan.preemptions == [] and waiting(plan) == {"high": "capacity"}


def test_reprieve_keeps_victims_the_plan_does_not_use() -> None:
    # Victims in order: v1 (priority 0) then v2 (priority 1). Removing v1 alone frees only 4 GPUs
    # on n0; removing both fits the pod on n1, where v1 never was: v1 is put back.
    rnd = make_round(
        cluster(2, gpus=8),
        running=[
            running("v1", ["n0"], gpu=4, priority=0),
            running("keep", ["n0"], gpu=4, priority=9),
            running("v2", ["n1"], gpu=8, priority=1),
        ],
        pending=[pending("p", 1, gpu=8, priority=5)],
    )
    plan = decide(rnd)
    assert [(p.gang, p.kind) for p in plan.preemptions] == [("v2", "evict")]
    assert nodes_of(plan, "p") == ["n1"]


def test_elastic_victims_shrink_before_anyone_is_evicted() -> None:
    rnd = make_round(
        cluster(2, gpus=8),
        running=[
            running("elastic", ["n0"] * 4, gpu=2, replicas=4, min_replicas=2, priority=0),
            running("rigid", ["n1"], gpu=8, priority=0),
        ],
        pending=[pending("p", 1, gpu=4, priority=5)],
    )
    plan = decide(rnd)
    (pre,) = plan.preemptions
    assert (pre.gang, pre.kind, pre.pods) == ("elastic", "shrink", ["elastic-worker-2", "elastic-worker-3"])
    assert [(r.gang, r.from_members, r.to_members) for r in plan.resizes] == [("elastic", 4, 2)]


def test_shrinking_never_goes_below_the_minimum_evicts_whole_instead() -> None:
    rnd = make_round(
        cluster(1, gpus=8),
        running=[running("elastic", ["n0"] * 4, gpu=2, replicas=4, min_replicas=2, priority=0)],
        pending=[pending("p", 1, gpu=6, priority=5)],
    )
    plan = decide(rnd)
    (pre,) = plan.preemptions
    assert pre.kind == "evict" and len(pre.pods) == 4
    assert plan.resizes == []


# ----------------------------------------------------------------------------- topology, quota, eligibility


def test_required_topology_puts_the_gang_in_one_domain() -> None:
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        running=[running("busy", ["n1"], gpu=8, priority=99)],
        pending=[pending("p", 2, gpu=8, required="rack")],
    )
    plan = decide(rnd)
    assert nodes_of(plan, "p") == ["n2", "n3"]


def test_required_topology_picks_the_tightest_domain_that_fits() -> None:
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        running=[running("busy", ["n2"], gpu=4, priority=99)],
        pending=[pending("p", 1, gpu=4, required="rack")],
    )
    plan = decide(rnd)
    assert nodes_of(plan, "p") == ["n2"]  # rack r1 has 12 GPUs free, r0 16: best fit is r1


def test_required_topology_that_no_domain_satisfies_waits_with_code_topology() -> None:
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        running=[running("a", ["n0"], gpu=8, priority=99), running("b", ["n2"], gpu=8, priority=99)],
        pending=[pending("p", 2, gpu=8, required="rack")],
    )
    plan = decide(rnd)
    assert waiting(plan) == {"p": "topology"}


def test_slices_fill_whole_domains() -> None:
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        running=[running("busy", ["n0"], gpu=4, priority=99)],
        pending=[pending("p", 4, gpu=4, slice_level="rack", slice_size=2)],
    )
    plan = decide(rnd)
    per_rack = Counter(int(n[1:]) // 2 for n in nodes_of(plan, "p"))
    assert all(v % 2 == 0 for v in per_rack.values())


def test_quota_is_respected_even_with_free_capacity() -> None:
    rnd = make_round(
        cluster(4, gpus=8),
        queues=[queue("team", gpu=8)],
        pending=[pending("first", 1, gpu=8, queue="team"), pending("second", 1, gpu=8, queue="team")],
    )
    plan = decide(rnd)
    assert plan.admitted == ["first"]
    assert waiting(plan) == {"second": "quota"}
    assert "queue team" in plan.waiting[0].reasons[0]


def test_cohort_borrowing_within_limits() -> None:
    rnd = make_round(
        cluster(4, gpus=8),
        queues=[queue("a", cohort="c", gpu=8, borrowing_limit={"gpu": 8}), queue("b", cohort="c", gpu=16)],
        pending=[pending(f"a{i}", 1, gpu=8, queue="a", submit_time=i) for i in range(3)],
    )
    plan = decide(rnd)
    assert plan.admitted == ["a0", "a1"]  # nominal 8 + borrowing limit 8
    assert waiting(plan) == {"a2": "quota"}


def test_eligibility_selector_affinity_and_taints() -> None:
    rnd = make_round(
        cluster(
            3,
            gpus=8,
            labels={"n0": {"type": "a100"}, "n1": {"type": "h100"}, "n2": {"type": "h100"}},
            taints={"n1": [("dedicated", "x", "NoSchedule")], "n2": [("soft", "", "PreferNoSchedule")]},
        ),
        pending=[
            pending("nowhere", 1, gpu=1, selector={"type": "tpu"}),
            pending("h100", 1, gpu=8, selector={"type": "h100"}),
            pending(
                "tolerant",
                1,
                gpu=8,
                affinity=[("type", "NotIn", ["a100"])],
                tolerations=[Toleration(key="dedicated", operator="Exists")],
            ),
        ],
    )
    plan = decide(rnd)
    assert nodes_of(plan, "h100") == ["n2"]  # n1's NoSchedule taint repels; PreferNoSchedule does not
    assert nodes_of(plan, "tolerant") == ["n1"]
    assert waiting(plan) == {"nowhere": "eligibility"}
    assert "type=tpu" in plan.waiting[0].reasons[0]


# ----------------------------------------------------------------------------- elastic growth


def test_pending_elastic_gang_grows_up_to_what_fits() -> None:
    rnd = make_round(cluster(3, gpus=8), pending=[pending("e", 5, gpu=8, min_replicas=2)])
    plan = decide(rnd)
    assert nodes_of(plan, "e") == ["n0", "n1", "n2"]


def test_running_elastic_gang_grows_with_fresh_pod_names() -> None:
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("e", ["n0", "n0"], gpu=4, replicas=4, min_replicas=1, priority=1)],
    )
    plan = decide(rnd)
    assert [(p.pod, p.node) for p in plan.placements] == [("e-worker-2", "n1"), ("e-worker-3", "n1")]
    assert [(r.from_members, r.to_members) for r in plan.resizes] == [(2, 4)]


def test_deferred_growth_leaves_room_for_lower_priority_minimums() -> None:
    rnd = make_round(
        cluster(3, gpus=8),
        pending=[pending("elastic", 3, gpu=8, min_replicas=1, priority=9), pending("small", 1, gpu=8, priority=1)],
    )
    eager = decide(rnd, "eager")
    assert eager.admitted == ["elastic"] and len(nodes_of(eager, "elastic")) == 3
    deferred = decide(rnd, "deferred")
    assert deferred.admitted == ["elastic", "small"] and len(nodes_of(deferred, "elastic")) == 2


# ----------------------------------------------------------------------------- weakness, determinism, fuzz


def test_fragmentation_is_the_weakness_cpsat_fixes() -> None:
    """First-fit puts the small gang on the big node, so the big gang waits, although a valid
    plan starts both (small on n1, big on n0). Greedy never revisits a placement."""
    rnd = make_round(
        cluster_of_sizes(8, 4),
        pending=[pending("small", 1, gpu=4, priority=1), pending("big", 1, gpu=8, priority=0)],
    )
    plan = decide(rnd)
    assert plan.admitted == ["small"] and nodes_of(plan, "small") == ["n0"]
    assert waiting(plan) == {"big": "capacity"}
    better = make_plan(rnd, place={"small": ["n1"], "big": ["n0"]})
    assert validate(rnd, better) == [] and len(better.admitted) == 2


def cluster_of_sizes(*gpus: int):  # type: ignore[no-untyped-def]
    from gangopt.schema import Cluster

    return Cluster(nodes=[node(f"n{i}", g) for i, g in enumerate(gpus)])


def test_same_round_twice_gives_the_same_plan() -> None:
    rnd = random_round(random.Random(7))
    assert greedy(rnd).model_dump_json() == greedy(rnd).model_dump_json()
    copy = Round.model_validate_json(rnd.model_dump_json())
    assert greedy(copy).model_dump_json() == greedy(rnd).model_dump_json()


@pytest.mark.parametrize("growth", ["eager", "deferred"])
def test_unexplained_plans_decide_the_same(growth: Growth) -> None:
    """``explain=False`` (CP-SAT's candidates) changes the waiting reasons only: the same
    admissions, placements and preemptions, and every waiting gang still listed, once."""
    codes: Counter[str] = Counter()
    for seed in range(60):
        rnd = random_round(random.Random(seed))
        plan, lean = greedy(rnd, growth=growth), greedy(rnd, growth=growth, explain=False)
        strip = {"waiting"}
        assert lean.model_dump(exclude=strip) == plan.model_dump(exclude=strip)
        assert [w.gang for w in lean.waiting] == [w.gang for w in plan.waiting]
        assert all(w.code == "policy" and w.reasons == [UNEXPLAINED] for w in lean.waiting)
        assert validate(rnd, lean) == []
        codes.update(w.code for w in plan.waiting)
    assert codes["capacity"] and codes["group"]  # the explained plans had real diagnoses to skip


@pytest.mark.parametrize("growth", ["eager", "deferred"])
def test_random_rounds_always_give_valid_plans(growth: Growth) -> None:
    stats: Counter[str] = Counter()
    for seed in range(150):
        rnd = random_round(random.Random(seed))
        plan = decide(rnd, growth)
        stats.update(p.kind for p in plan.preemptions)
        stats.update(w.code for w in plan.waiting)
        stats["admitted"] += len(plan.admitted)
    # the generator really exercises preemption, shrinking and every waiting code it can
    assert stats["evict"] and stats["shrink"] and stats["admitted"]
    assert stats["capacity"] and stats["quota"] and stats["eligibility"] and stats["group"]


def random_round(rng: random.Random) -> Round:
    """A small random round: labels, taints, cordons, racks, quotas, elastic and sliced gangs."""
    n = rng.choice([2, 4, 6, 8])
    racks = rng.choice([None, 2])
    gpus = rng.choice([4, 8])
    labels = {f"n{i}": {"type": rng.choice("ab")} for i in range(n) if rng.random() < 0.7}
    taints = {
        f"n{i}": [("dedicated", "x", rng.choice(["NoSchedule", "PreferNoSchedule", "NoExecute"]))]
        for i in range(n)
        if rng.random() < 0.2
    }
    cordoned = [f"n{i}" for i in range(n) if rng.random() < 0.1]
    cl = cluster(n, gpus=gpus, racks=racks, cpu=32, labels=labels, taints=taints, cordoned=cordoned)
    levels = [*(["rack"] if racks else []), "node"]
    use_quota = rng.random() < 0.5
    queues = []
    if use_quota:
        limit = {"gpu": rng.randint(0, 8)} if rng.random() < 0.5 else None
        queues = [
            queue("qa", gpu=rng.randint(0, 16)),
            queue("qb", cohort="c", gpu=rng.randint(0, 16), borrowing_limit=limit),
            queue("qc", cohort="c", gpu=rng.randint(0, 16)),
        ]

    def pick_queue() -> str:
        return rng.choice(["qa", "qb", "qc"]) if use_quota else "default"

    free = {f"n{i}": gpus for i in range(n)}
    runs = []
    for k in range(rng.randint(0, 6)):
        g = rng.choice([1, 2, 4])
        nodes = []
        for _ in range(rng.randint(1, 4)):
            fits = [x for x in free if free[x] >= g]
            if fits:
                x = rng.choice(fits)
                free[x] -= g
                nodes.append(x)
        if not nodes:
            continue
        replicas, min_replicas = None, None
        if len(nodes) > 1 and rng.random() < 0.4:
            replicas, min_replicas = len(nodes) + rng.randint(0, 3), rng.randint(1, len(nodes))
        runs.append(
            running(
                f"r{k}",
                nodes,
                gpu=g,
                priority=rng.randint(0, 5),
                preemptible=rng.random() < 0.8,
                queue=pick_queue(),
                replicas=replicas,
                min_replicas=min_replicas,
            )
        )
    pend = []
    for k in range(rng.randint(1, 7)):
        g = rng.choice([1, 2, 4, 8])
        reps = rng.randint(1, 6)
        kw: dict[str, object] = {}
        if rng.random() < 0.3:
            kw["min_replicas"] = rng.randint(1, reps)
        if rng.random() < 0.3:
            kw["required"] = rng.choice(levels)
        if rng.random() < 0.15:
            level, size = rng.choice(levels), rng.choice([1, 2])
            low = int(kw.get("min_replicas", reps))  # type: ignore[call-overload]
            coarse = "required" in kw and levels.index(level) < levels.index(str(kw["required"]))
            if not coarse and any(m % size == 0 for m in range(low, reps + 1)):
                kw.update(slice_level=level, slice_size=size)
        if rng.random() < 0.2:
            kw["selector"] = {"type": rng.choice("abc")}
        if rng.random() < 0.2:
            kw["affinity"] = [("type", rng.choice(["In", "NotIn", "Exists", "DoesNotExist"]), ["a"])]
        if rng.random() < 0.3:
            kw["tolerations"] = [Toleration(key="dedicated", operator="Exists")]
        roles = None
        if rng.random() < 0.2:
            worker_min = kw.pop("min_replicas", None)
            roles = [role("launcher", 1, 0, cpu=1), role("worker", reps, g, min_replicas=worker_min)]  # type: ignore[arg-type]
            for key in ("selector", "affinity", "tolerations", "slice_level", "slice_size"):
                kw.pop(key, None)
        pend.append(
            pending(
                f"p{k}",
                reps,
                g,
                roles=roles,
                priority=rng.randint(0, 6),
                queue=pick_queue(),
                group=rng.choice([None, None, None, "g1", "g2"]),
                submit_time=rng.random(),
                **kw,
            )  # type: ignore[arg-type]
        )
    return make_round(cl, running=runs, pending=pend, queues=queues, preemption=rng.random() < 0.8)


# ----------------------------------------------------------------------------- arrays


def test_free_capacity_and_fit_counts() -> None:
    rnd = make_round(
        cluster(3, gpus=8, cpu=32),
        running=[running("r", ["n0", "n0", "n1"], gpu=2, cpu=8)],
    )
    resources = resource_names(rnd)
    assert resources == ["cpu", "gpu"]
    free = free_capacity(rnd, resources)
    assert free.tolist() == [[16000, 4000], [24000, 6000], [32000, 8000]]
    request = request_vector({"gpu": 2000, "cpu": 10000}, resources)
    assert fit_counts(free, request).tolist() == [1, 2, 3]
    assert fit_counts(free, request, cap=2).tolist() == [1, 2, 2]
    assert fit_counts(free, request, rows=np.array([2, 0])).tolist() == [3, 1]
    assert fit_counts(free, np.zeros(2, dtype=np.int64)).min() > 10**9  # requests nothing


def test_first_fit_fills_nodes_in_order_and_mutates_free() -> None:
    free = np.asfortranarray(np.array([[1], [4], [4], [8]], dtype=np.int64))
    rows, take = first_fit(free, np.array([0, 1, 2, 3]), np.array([2], dtype=np.int64), 3) or ((), ())
    assert list(rows) == [1, 2] and list(take) == [2, 1]
    assert free[:, 0].tolist() == [1, 0, 2, 8]
    assert first_fit(free, np.array([0, 1]), np.array([2], dtype=np.int64), 1) is None
    assert free[:, 0].tolist() == [1, 0, 2, 8]  # untouched on failure
    got = first_fit(free, np.array([0, 1, 2]), np.array([2], dtype=np.int64), 5, partial=True)
    assert got is not None and got[1].tolist() == [1]


def test_eligibility_masks_follow_kubernetes_semantics() -> None:
    rnd = make_round(
        cluster(
            4,
            labels={"n0": {"t": "a"}, "n1": {"t": "b"}, "n2": {"x": "1"}},
            taints={"n0": [("k", "v", "NoExecute")], "n3": [("k", "w", "PreferNoSchedule")]},
            cordoned=["n2"],
        )
    )
    elig = Eligibility(rnd)

    def mask(**kw: Any) -> list[bool]:
        return [bool(x) for x in elig.mask(role(**kw))]

    assert mask() == [False, True, False, True]
    assert mask(tolerations=[Toleration(key="k", value="v")]) == [True, True, False, True]
    assert mask(tolerations=[Toleration(operator="Exists")]) == [True, True, False, True]
    assert mask(tolerations=[Toleration(key="k", value="other")]) == [False, True, False, True]
    assert mask(selector={"t": "b"}) == [False, True, False, False]
    assert mask(affinity=[("t", "NotIn", ["a"])]) == [False, True, False, True]
    assert mask(affinity=[("t", "In", ["a", "b"])], tolerations=[Toleration(operator="Exists")]) == [
        True,
        True,
        False,
        False,
    ]
    assert mask(affinity=[("t", "Exists", [])]) == [False, True, False, False]
    assert mask(affinity=[("t", "DoesNotExist", [])]) == [False, False, False, True]
    assert elig.indices(role(selector={"t": "b"})).tolist() == [1]


def test_quota_limits_match_the_queue_semantics() -> None:
    rnd = make_round(
        cluster(1),
        queues=[
            queue("solo", gpu=4),
            queue("a", cohort="c", gpu=8, borrowing_limit={"gpu": 2}),
            queue("b", cohort="c", gpu=8),
            queue("free"),
        ],
    )
    resources = resource_names(rnd)
    q = quota_limits(rnd, resources)
    assert sorted(zip(q.labels, q.limit.tolist(), strict=True)) == [
        ("cohort c", 16000),
        ("queue a", 10000),
        ("queue solo", 4000),
    ]
    gpu = request_vector({"gpu": 1000}, resources)
    assert q.pod_usage("free", gpu).sum() == 0 and q.pod_usage("unknown", gpu).sum() == 0
    assert sorted(q.pod_usage("a", gpu).tolist()) == [0, 1000, 1000]
    assert capacity_matrix(rnd, resources).flags.f_contiguous


def test_request_matrix_and_quota_rows_per_role() -> None:
    rnd = make_round(cluster(1, gpus=8, cpu=32), queues=[queue("a", cohort="c", gpu=8, borrowing_limit={"gpu": 2})])
    resources = resource_names(rnd)
    requests = request_matrix([{"gpu": 2000}, {"cpu": 500, "gpu": 1000}], resources)
    assert requests.tolist() == [[0, 2000], [500, 1000]]
    assert request_vector({"cpu": 500}, resources).tolist() == [500, 0]
    with pytest.raises(KeyError, match="rdma"):
        request_matrix([{"gpu": 1}, {"rdma": 1}], resources)
    q = quota_limits(rnd, resources)
    assert q.pod_usage("a", requests).tolist() == [q.pod_usage("a", row).tolist() for row in requests]
    assert q.pod_usage("unknown", requests).shape == (2, q.size)


# ----------------------------------------------------------------------------- preferred levels


def _two_blocks(*gangs: PendingGang) -> Round:
    """Racks r0..r3 of two 8-GPU nodes, blocks b0 = {r0, r1}, b1 = {r2, r3}; n0, n2, n3 and n4
    are taken, so b0 has one free node (n1) and b1 three (n5 in r2, n6 and n7 in r3)."""
    busy = running("ops", ["n0", "n2", "n3", "n4"], gpu=8, preemptible=False)
    return make_round(cluster(8, gpus=8, racks=4, blocks=2), running=[busy], pending=list(gangs))


def test_preferred_climbs_to_the_smallest_domain_that_holds_the_gang() -> None:
    """Issue 15, Kueue TAS ``preferred``: no rack holds three nodes, block b1 does, so the gang
    stays in b1 (first fit in node order took n1 in b0 and spilled into b1), and inside b1 the
    rack with more room (r3) fills first: two racks, one block."""
    plan = decide(_two_blocks(pending("g", 3, gpu=8, preferred="rack")))
    assert sorted(nodes_of(plan, "g")) == ["n5", "n6", "n7"]
    assert nodes_of(plan, "g")[:2] == ["n6", "n7"]


def test_required_and_preferred_levels_together() -> None:
    """``required: block`` and ``preferred: rack``: b1 is the only block with room for two
    nodes, and inside it the rack that holds both (r3), not first fit's n5 and n6."""
    plan = decide(_two_blocks(pending("g", 2, gpu=8, required="block", preferred="rack")))
    assert sorted(nodes_of(plan, "g")) == ["n6", "n7"]


def test_preferred_without_a_domain_that_holds_it_spreads_fewest_domains_first() -> None:
    """Four nodes: no block holds them; they go to the block with the most room first (b1:
    n5, n6, n7), then b0 (n1), never an idle preference failing the gang."""
    plan = decide(_two_blocks(pending("g", 4, gpu=8, preferred="rack")))
    assert sorted(nodes_of(plan, "g")) == ["n1", "n5", "n6", "n7"]
    assert nodes_of(plan, "g")[-1] == "n1"


def test_a_preferred_elastic_gang_grows_inside_its_domains_first() -> None:
    """Free: n1 (r0, b0), n3 (r1, b0), n4 and n5 (r2, b1), n7 (r3, b1). The minimum (2) goes to
    r2, the one rack that holds it; the third member then goes to n7 in the same block, not to
    n1, first in node order, in the other block (one block charged instead of two)."""
    busy = running("ops", ["n0", "n2", "n6"], gpu=8, preemptible=False)
    gang = pending("g", 3, gpu=8, min_replicas=2, preferred="rack")
    plan = decide(make_round(cluster(8, gpus=8, racks=4, blocks=2), running=[busy], pending=[gang]))
    assert nodes_of(plan, "g") == ["n4", "n5", "n7"]


@st.composite
def _one_preferred_gang(draw: st.DrawFn) -> Round:
    """Spines s0, s1 > blocks (two per spine) > racks (two per block) > two 8-GPU nodes: 16
    nodes with random pinned (non-preemptible) GPUs, and one rigid gang of 1-6 pods of 2, 4
    or 8 GPUs preferring a rack or a block."""
    nodes, pods = [], []
    for i in range(16):
        name = f"n{i}"
        topo = {"spine": f"s{i // 8}", "block": f"b{i // 4}", "rack": f"r{i // 2}"}
        nodes.append({"name": name, "capacity": {"gpu": 8, "cpu": 64}, "topology": topo})
        busy = draw(st.sampled_from([0, 0, 2, 4, 8]))
        if busy:
            pods.append((name, busy))
    running_gangs = [
        {
            "name": f"pin{k}",
            "preemptible": False,
            "roles": [{"name": "w", "replicas": 1, "requests": {"gpu": gpu, "cpu": 1}}],
            "pods": [{"name": f"pin{k}-0", "role": "w", "node": node}],
        }
        for k, (node, gpu) in enumerate(pods)
    ]
    gang = {
        "name": "g",
        "roles": [
            {
                "name": "w",
                "replicas": draw(st.integers(1, 6)),
                "requests": {"gpu": draw(st.sampled_from([2, 4, 8])), "cpu": 1},
            }
        ],
        "topology": {"preferred": draw(st.sampled_from(["rack", "block"]))},
    }
    return Round.model_validate(
        {
            "cluster": {"topology_levels": ["spine", "block", "rack"], "nodes": nodes},
            "running": running_gangs,
            "pending": [gang],
            "policy": {"time_limit": 10, "workers": 1},
        }
    )


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_one_preferred_gang())
def test_greedy_keeps_a_preferred_gang_in_the_smallest_domain_that_holds_it(rnd: Round) -> None:
    """Issue 15, Kueue TAS ``preferred`` as a property: the gang starts whenever its pods fit
    anywhere, and lands inside one domain of the narrowest level (preferred, then each level
    above) where a single domain holds all its pods. CP-SAT's spread charge is never above
    greedy's (both plans through the validator)."""
    plan = decide(rnd)
    gang = rnd.pending[0]
    role = gang.roles[0]
    free = {n.name: n.capacity["gpu"] for n in rnd.cluster.nodes}
    for run in rnd.running:
        free[run.pods[0].node] -= run.roles[0].requests["gpu"]
    fits = {name: room // role.requests["gpu"] for name, room in free.items()}
    assert (plan.admitted == ["g"]) == (sum(fits.values()) >= role.replicas)
    if not plan.admitted:
        return
    assert gang.topology is not None and gang.topology.preferred is not None
    levels = ["spine", "block", "rack"]
    topo = {n.name: n.topology for n in rnd.cluster.nodes}
    for level in reversed(levels[: levels.index(gang.topology.preferred) + 1]):
        held: dict[str, int] = {}
        for name, k in fits.items():
            held[topo[name][level]] = held.get(topo[name][level], 0) + k
        if max(held.values()) >= role.replicas:
            assert len({topo[p.node][level] for p in plan.placements}) == 1, level
            break
    optimal = gangopt.solve(rnd)
    assert gangopt.validate(rnd, optimal) == []
    assert score(rnd, optimal).secondary >= score(rnd, plan).secondary


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_growth_modes_agree_without_pending_elastic_gangs(rnd: Round) -> None:
    """CP-SAT skips the deferred-growth candidate when no pending gang is elastic: the two modes
    differ only in when admitted pending gangs grow (running elastic gangs grow last in both)."""
    rigid = [g.model_copy(update={"max_members": g.minimum}) if g.elastic else g for g in rnd.pending]
    rnd = rnd.model_copy(update={"pending": rigid})
    assume(not any(g.elastic for g in rnd.pending))
    assert decide(rnd, "deferred").model_dump() == decide(rnd, "eager").model_dump()


def test_the_settle_caches_agree_with_a_fresh_reading() -> None:
    """The rows :meth:`GreedyEngine._served_rows` reads from its per-settle cache of the new
    pods by priority, and the reserved rows :meth:`GreedyEngine._reserved` keeps per priority,
    are those a fresh scan of the plan gives (default policies, fragmented round with
    evictions)."""
    from bench.rounds import fragmented_spec
    from gangopt.replay.generate import generate
    from gangopt.solvers.greedy.engine import RESERVED, GreedyEngine

    rnd, _ = generate(fragmented_spec(64, 24, busy=0.75, seed=3, running_mix="tilted"))
    engine = GreedyEngine(rnd, "eager")
    engine.run()
    assert engine.scope.plain and engine.victim_order  # greedy evicted: the caches are read
    cache: dict[int, np.ndarray] = {}
    for gi in range(len(engine.running)):
        cached = engine._served_rows(gi, {}, cache)
        assert cache  # filled on first use
        assert np.array_equal(cached, engine._served_rows(gi, {}))
    for priority in sorted({g.spec.priority for g in engine.pending}):
        work = engine.free.copy()
        with engine._reserved(work, [g for g in engine.pending if g.spec.priority == priority][:1]):
            marked = np.flatnonzero((work < engine.free).any(axis=1))
        expected = np.flatnonzero(engine.floor >= priority) if priority <= engine.floor_max else []
        assert np.array_equal(marked, expected)
        assert (engine.free - work)[marked].max(initial=RESERVED) == RESERVED


@pytest.mark.parametrize("mix", ["jobs", "tilted"])
def test_a_removal_try_skipped_as_certain_to_fail_changes_no_plan(mix: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortfall check (``_Shortfall``) only skips tries that would fail: with it never
    answering, every try runs and the plans are the same, on rounds where it answers often."""
    from gangopt.solvers.greedy import engine
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 100, running_mix=mix)
    answers: Counter[bool] = Counter()
    certain = engine._Shortfall.certain

    def counted(self: Any, end: int) -> bool:
        answer = certain(self, end)
        answers[answer] += 1
        return answer

    monkeypatch.setattr(engine._Shortfall, "certain", counted)
    skipping = greedy(rnd)
    monkeypatch.setattr(engine._Shortfall, "certain", lambda self, end: False)
    trying = greedy(rnd)
    assert answers[True] > 0 and skipping.preemptions
    assert skipping == trying
    assert validate(rnd, skipping) == []


@settings(max_examples=examples(15), deadline=None, suppress_health_check=list(HealthCheck))
@given(rnd=st.one_of(rounds(max_nodes=6, max_pending=5), fragmented_rounds(nodes=(8, 24), gangs=(4, 12))))
def test_an_engine_built_like_a_used_one_decides_as_one_built_alone(rnd: Round) -> None:
    # ``like`` shares the round's gang views, pod index and victim order, not the state: an
    # engine built like one that already ran (preempted, grew) decides the round the same way.
    engines: list[GreedyEngine] = []
    first = greedy(rnd, explain=False, engines=engines)
    built_like = GreedyEngine(rnd, "eager", like=engines[-1])
    built_like.explain, built_like.reclaim = False, engines[-1].reclaim  # as greedy's last decision
    assert built_like.rp_node is engines[-1].rp_node and built_like.kept is not engines[-1].kept
    again = built_like.run()
    assert again.model_dump() == first.model_dump()
    assert validate(rnd, again) == []


def test_an_engine_is_not_built_like_one_of_another_round() -> None:
    rnd = make_round(cluster(2), running=[running("r", ["n0"], gpu=4)], pending=[pending("p", 1, gpu=8, priority=5)])
    other = rnd.model_copy()
    engines: list[GreedyEngine] = []
    greedy(other, engines=engines)
    engine = GreedyEngine(rnd, "eager", like=engines[0])
    assert engine.rp_node is not engines[0].rp_node  # another round object: built, not shared
    plan = engine.run()
    assert plan.admitted == greedy(rnd).admitted == ["p"]
    assert validate(rnd, plan) == []


def test_a_pass_stopped_at_its_deadline_is_a_valid_prefix_of_the_whole_pass() -> None:
    """A pass whose ``stop`` says so after ``k`` transactions decides exactly those, as the whole
    pass decides them (every decision reads only the ones before it), and leaves the rest
    waiting, not considered, with a message that counts them; the plan passes the validator."""
    from gangopt.solvers.greedy.engine import NOT_CONSIDERED
    from tests.builders import fragmented_round

    rnd = fragmented_round(128, 50, running_mix="jobs")
    whole = greedy(rnd)
    order = [rnd.pending[i].name for members in GreedyEngine(rnd, "eager").transactions() for i in members]
    assert whole.admitted and not any(NOT_CONSIDERED in w.reasons for w in whole.waiting)
    for k in (0, 7, 30):
        asked = iter(range(1 << 30))
        cut = greedy(rnd, stop=lambda: next(asked) >= k)  # noqa: B023 - called inside this iteration only
        assert validate(rnd, cut) == []
        decided = set(order[:k])
        assert set(cut.admitted) == set(whole.admitted) & decided
        skipped = {w.gang for w in cut.waiting if w.reasons == [NOT_CONSIDERED]}
        assert skipped == set(order[k:])
        assert all(w.code == "policy" for w in cut.waiting if w.gang in skipped)
        assert f"after {k} of {len(rnd.pending)} pending gangs; {len(rnd.pending) - k} not considered" in cut.message
    # Stopped before growing (deferred growth: 5 elastic gangs grow after every admission):
    # every gang decided as the whole pass decides it, none grown.
    deferred = greedy(rnd, growth="deferred")
    asked = iter(range(1 << 30))
    ungrown = greedy(rnd, growth="deferred", stop=lambda: next(asked) >= len(order))
    assert validate(rnd, ungrown) == [] and ungrown.admitted == deferred.admitted
    assert "before growing elastic gangs" in ungrown.message
    assert len(ungrown.placements) < len(deferred.placements)  # the growth it left out


def test_an_unstarted_plan_is_the_plan_of_a_pass_stopped_at_its_first_ask() -> None:
    """:func:`~gangopt.solvers.greedy.engine.unstarted` (a pass not built: it would stop at its
    first ask) says what the engine stopped before its first gang says, without the engine's
    setup: every pending gang waits "not considered", nothing starts or is evicted, the plan is
    valid, and the message is the stopped pass's."""
    from gangopt.solvers.greedy.engine import NOT_CONSIDERED, unstarted
    from tests.builders import fragmented_round

    rnd = fragmented_round(128, 50, running_mix="jobs")
    stopped = greedy(rnd, stop=lambda: True)
    plan = unstarted(rnd)
    assert plan.message == stopped.message and "after 0 of 50 pending gangs; 50 not considered" in plan.message
    assert plan.admitted == stopped.admitted == [] and plan.placements == stopped.placements == []
    assert plan.preemptions == stopped.preemptions and plan.resizes == stopped.resizes
    assert sorted((w.gang, w.code, tuple(w.reasons)) for w in plan.waiting) == sorted(
        (w.gang, w.code, tuple(w.reasons)) for w in stopped.waiting
    )
    assert all(w.reasons == [NOT_CONSIDERED] for w in plan.waiting)
    assert validate(rnd, plan) == []
    assert unstarted(rnd, "kueue_like").solver == "kueue_like"


def test_victims_rank_lowest_priority_then_cost_then_name() -> None:
    """The victim order (one array sort) is the order of the key (priority, preemption cost,
    name): names break ties of equal cost, non-preemptible gangs are left out."""
    rng = random.Random(7)
    names = [f"r{i:02d}" for i in range(40)]
    rng.shuffle(names)
    gangs = [
        running(
            name,
            [f"n{i % 8}"],
            gpu=1,
            priority=rng.choice([0, 1, 2]),
            preemption_cost=rng.choice([None, 0.5, 1.0, 1.0]),
            preemptible=rng.random() > 0.2,
        )
        for i, name in enumerate(names)
    ]
    rnd = make_round(cluster(8, gpus=8), running=gangs, pending=[pending("p", 1, priority=5)])
    engine = GreedyEngine(rnd, "eager")
    expected = sorted(
        (i for i, g in enumerate(rnd.running) if g.preemptible),
        key=lambda i: (rnd.running[i].priority, engine.terms.preemption_cost(rnd.running[i]), rnd.running[i].name),
    )
    assert engine.victim_rank.tolist() == expected
    assert len(expected) < len(gangs)  # some are not preemptible
    built_like = GreedyEngine(rnd, "eager", like=engine)
    assert built_like.victim_rank.tolist() == expected
    assert built_like.plan() == engine.plan()


def test_the_removal_cursor_is_the_free_capacity_with_the_leading_pods_removed() -> None:
    """``_Shortfall`` moves one matrix forward and back by the pods between two tries (a few
    by a sort of their nodes, many by a mask, in place): after every move it is the free
    capacity with the first ``end`` victim pods added back at once, and its slot counts are a
    recount's, so the tries and their skips are those of sums made from scratch."""
    from gangopt.solvers.greedy.engine import _node_sums, _Shortfall
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    engine = GreedyEngine(rnd, "eager")
    flat, _, _, _ = engine.units(engine.victim_rank)
    nodes, rows = engine.rp_node[flat], engine.rp_rows[flat]
    gangs = engine.pending[:2]
    counts = [engine.min_counts(g) for g in gangs]
    short = _Shortfall(engine.free, gangs, counts, nodes, rows)
    rng = random.Random(0)
    n = len(flat)
    ends = [1, 3, n, 2, n // 2, n // 2 + 5, n // 2 + 1, 0, *(rng.randrange(n + 1) for _ in range(20)), n - 1]
    small = 0
    for end in ends:
        small += 16 * abs(end - short.end) < len(engine.free)
        work = short.work_at(end)
        expected = engine.free.copy()
        np.add.at(expected, nodes[:end], rows[:end])
        assert np.array_equal(work, expected)
        for (elig, req, need), slots in zip(short.needs, short.slots, strict=True):
            assert slots == int(fit_counts(expected, req, cap=need, rows=np.flatnonzero(elig)).sum())
    assert 0 < small < len(ends)  # both ways of moving were taken
    for size in (5, 3 * len(engine.free)):
        some = np.asarray([rng.randrange(len(engine.free)) for _ in range(size)], dtype=np.intp)
        some_rows = engine.rp_rows[[rng.randrange(len(engine.rp_rows)) for _ in range(size)]]
        touched, sums = _node_sums(len(engine.free), some, some_rows)
        expected_nodes, inverse = np.unique(some, return_inverse=True)
        expected_sums = np.zeros_like(sums)
        np.add.at(expected_sums, inverse, some_rows)
        assert np.array_equal(touched, expected_nodes) and np.array_equal(sums, expected_sums)


# ----------------------------------------------------------------------------- sparing spread victims


def _spread_round(*, first: int, other_nodes: int, hopeless_between: bool) -> Round:
    """n0: a pod of ``spread`` (4 GPUs, priority 0, the cheapest victim) beside ``solo`` (4 GPUs,
    priority 0); n1-n3: a pod of ``spread`` beside a priority-9 gang no one may preempt;
    n4...: ``other`` (priority 0, one 8-GPU pod per node, the costliest victim). ``p`` needs
    one whole node; with ``hopeless_between`` a priority-5 gang (a 16-GPU pod: it never fits)
    is pending too, so ``p``'s priority ``first`` is not the lowest pending above 0."""
    n = 4 + other_nodes
    pend = [pending("p", 1, gpu=8, priority=first)]
    if hopeless_between:
        pend.append(pending("big", 1, gpu=16, priority=5))
    return make_round(
        cluster(n, gpus=8),
        running=[
            running("spread", ["n0", "n1", "n2", "n3"], gpu=4, priority=0, preemption_cost=0.1),
            running("solo", ["n0"], gpu=4, priority=0, preemption_cost=1.0),
            *[running(f"keep{i}", [f"n{i}"], gpu=4, priority=9) for i in (1, 2, 3)],
            running("other", [f"n{4 + i}" for i in range(other_nodes)], gpu=8, priority=0, preemption_cost=2.0),
        ],
        pending=pend,
    )


@pytest.mark.parametrize(
    ("first", "other_nodes", "hopeless_between", "evicted", "lands"),
    [
        # The fewest leading units (spread, solo) free n0 only; spread, a rigid gang worth 16
        # GPUs, loses its pods on n1-n3 for nothing. Without it the transaction lands on n4 and
        # evicts other (8 GPUs) instead: spared (3f6be61 evicts spread and solo).
        (5, 1, False, {"other"}, "n4"),
        # The same with a priority-10 transaction while priority 5 is pending: it is not the
        # lowest pending priority above the victims', so nothing is spared (spread and solo).
        (10, 1, True, {"spread", "solo"}, "n0"),
        # other on 3 nodes (24 GPUs) costs more than spread and solo (20): not spared.
        (5, 3, False, {"spread", "solo"}, "n0"),
    ],
)
def test_a_spread_victim_is_spared_when_other_room_costs_less(
    first: int, other_nodes: int, hopeless_between: bool, evicted: set[str], lands: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the spare alone: the cheapest room (below) would move row 2's transaction to n4 as well
    monkeypatch.setattr(GreedyEngine, "prices_domains", False)
    rnd = _spread_round(first=first, other_nodes=other_nodes, hopeless_between=hopeless_between)
    plan = decide(rnd)
    assert "p" in plan.admitted and nodes_of(plan, "p") == [lands]
    assert {p.gang for p in plan.preemptions if p.kind == "evict"} == evicted
    assert {p.gang for p in plan.preemptions} == evicted  # nothing else shrunk


# ----------------------------------------------------------------------------- the room cheapest to clear


def _room_round(case: str) -> Round:
    """Two rooms for ``p`` (priority 5, 8 GPUs a pod), the victims on the first the cheaper to
    preempt (preemption cost 0.1 against 1.0), so greedy's victim order clears it first.

    * ``node``: n0 holds ``big`` (8 one-GPU pods, 8 GPU-eq, rigid); n1 holds ``small`` (4 GPUs,
      4 free beside it); n2 a priority-9 gang no one may preempt. ``p``: one pod.
    * ``tier``: the same, ``small`` of priority 3: evicting it costs a higher tier.
    * ``dear``: the same, ``small`` a rigid gang of 3 four-GPU pods on n1 and n2 (12 GPU-eq).
    * ``rack``: racks r0 (n0, n1) and r1 (n2, n3); ``wide`` (one 8-GPU pod on n0 and on n1,
      16 GPU-eq) fills r0, ``small`` (8 GPUs) n2, n3 is free. ``p``: 2 pods in one rack.
    * ``spared``: the spare's round (:func:`_spread_round`, row 2): a priority-10 transaction
      while priority 5 is pending, which the spare leaves alone.
    """
    if case == "spared":
        return _spread_round(first=10, other_nodes=1, hopeless_between=True)
    if case == "rack":
        return make_round(
            cluster(4, gpus=8, racks=2),
            running=[
                running("wide", ["n0", "n1"], gpu=8, priority=0, preemption_cost=0.1),
                running("small", ["n2"], gpu=8, priority=0, preemption_cost=1.0),
            ],
            pending=[pending("p", 2, gpu=8, priority=5, required="rack")],
        )
    small = running(
        "small",
        ["n1", "n2", "n2"] if case == "dear" else ["n1"],
        gpu=4,
        priority=3 if case == "tier" else 0,
        preemption_cost=1.0,
    )
    keep = [] if case == "dear" else [running("keep", ["n2"], gpu=8, priority=9)]
    return make_round(
        cluster(3, gpus=8),
        running=[running("big", ["n0"] * 8, gpu=1, priority=0, preemption_cost=0.1), small, *keep],
        pending=[pending("p", 1, gpu=8, priority=5)],
    )


@pytest.mark.parametrize(
    ("case", "evicted", "lands"),
    [
        # Greedy's order evicts big (8 GPU-eq) and lands on n0; clearing n1 costs small's 4:
        # cheaper, taken (88b8926 evicts big).
        ("node", {"small"}, ["n1"]),
        # small is of priority 3: a higher tier than big's 0, so big's room is the cheaper.
        ("tier", {"big"}, ["n0"]),
        # small is rigid over n1 and n2, 12 GPU-eq: dearer than big, greedy's choice stays.
        ("dear", {"big"}, ["n0"]),
        # Rack-bound: clearing r0 evicts wide (16), r1 needs only small (8): r1 (88b8926: r0).
        ("rack", {"small"}, ["n2", "n3"]),
        # The spare's row 2: spread and solo on n0 (20 GPU-eq) against other on n4 (8): the
        # cheapest room applies to every priority (88b8926 and the spare alone: n0).
        ("spared", {"other"}, ["n4"]),
    ],
)
def test_a_preemption_takes_the_room_cheapest_to_clear(case: str, evicted: set[str], lands: list[str]) -> None:
    rnd = _room_round(case)
    plan = decide(rnd)
    assert "p" in plan.admitted and sorted(nodes_of(plan, "p")) == lands
    assert {p.gang for p in plan.preemptions} == evicted  # evicted whole, nothing else shrunk
    assert all(p.kind == "evict" for p in plan.preemptions)


@pytest.mark.parametrize("pick", ["first three", "every seventh", "a tenth at random", "every gang", "none"])
def test_reductions_over_some_gangs_pods_are_those_over_every_pod(pick: str) -> None:
    """``_segments`` reduces over the pods of some running gangs only (the preemptions' victim
    checks): per gang the same answer as the ``reduceat`` over every running pod, before the
    pass and after it (pods removed, new pods placed), or None where that is not cheaper."""
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    engine = GreedyEngine(rnd, "eager")
    n = len(engine.running)
    rng = np.random.default_rng(0)
    gangs = {
        "first three": np.arange(3),
        "every seventh": np.arange(0, n, 7),
        "a tenth at random": np.sort(rng.choice(n, n // 10, replace=False)),
        "every gang": np.arange(n),
        "none": np.arange(0),
    }[pick].astype(np.intp)
    for stage in ("before", "after"):
        if stage == "after":
            engine.run()
        key = rng.random(len(engine.rp_node))
        mask = key < 0.3
        seg = engine._segments(gangs)
        if pick in ("every gang", "none"):
            assert seg is None
            continue
        assert seg is not None
        pods, starts = seg
        assert np.array_equal(np.sort(pods), np.flatnonzero(np.isin(engine.rp_gang, gangs)))
        whole_or = np.logical_or.reduceat(mask, engine.rp_start[:-1])[gangs]
        whole_min = np.minimum.reduceat(key, engine.rp_start[:-1])[gangs]
        assert np.array_equal(np.logical_or.reduceat(mask[pods], starts), whole_or)
        assert np.array_equal(np.minimum.reduceat(key[pods], starts), whole_min)
        blocked = np.logical_or.reduceat(engine.lowest_new[engine.rp_node] <= engine.rp_priority, engine.rp_start[:-1])
        assert np.array_equal(engine._unblocked_rows(gangs), gangs[~blocked[gangs]])


def test_the_cheapest_rooms_limited_are_the_first_of_all() -> None:
    """``_cheapest_room`` makes only the ``limit`` cheapest domains' node ranks: the same arrays,
    in the same order, as the first of every domain's."""
    from gangopt.schema import TopologyRequest
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    engine = GreedyEngine(rnd, "eager")
    tried = 0
    for level in rnd.cluster.topology_levels:
        spec = engine.pending[0].spec
        g = engine._gang(spec.model_copy(update={"topology": TopologyRequest(required=level)}))
        c = engine.min_counts(g)
        every = engine._cheapest_room(g, c, engine.victim_rank, g.spec.priority, len(engine.free))
        for limit in (1, 2, 5):
            some = engine._cheapest_room(g, c, engine.victim_rank, g.spec.priority, limit)
            assert len(some) == min(limit, len(every))
            assert all(np.array_equal(a, b) for a, b in zip(some, every, strict=False))
        tried += len(every) > 2
    assert tried  # some gang has more domains than the limits


def test_domain_sums_are_the_bincounts_they_replace() -> None:
    """``_domain_sums`` gives per domain what ``np.bincount`` over the nodes' codes gives (floats
    summed node by node): by ``reduceat`` on consecutive domains where every partial sum is
    exact, by the bincount itself otherwise (a node made to look full by ``_reserved`` is
    2**52 below its room: there the float sum rounds, and so must the answer)."""
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    nodes = rnd.cluster.nodes
    shuffled = rnd.model_copy(update={"cluster": rnd.cluster.model_copy(update={"nodes": nodes[::2] + nodes[1::2]})})
    rng = np.random.default_rng(1)
    for r, consecutive in ((rnd, True), (shuffled, False)):
        engine = GreedyEngine(r, "eager")
        for level in [*r.cluster.topology_levels, "node"]:
            codes, groups = engine.level(level)
            # one domain, or one node each: consecutive in any node order
            assert (engine._runs(level) is not None) == (consecutive or len(groups) == 1 or level == "node")
            small = rng.integers(-5, 50, len(codes))
            rounding = small.copy()
            first = groups[0]
            if len(first) >= 3:  # 2**53 + 1 + 1: 2**53 in floats, 2**53 + 2 in integers
                rounding[first[:3]] = [2**53, 1, 1]
            for values in (small, rounding, engine.free[:, 0] - RESERVED * (rng.random(len(codes)) < 0.1)):
                want = np.bincount(codes, weights=values, minlength=len(groups))
                got = np.asarray(engine._domain_sums(level, values), dtype=np.float64)
                assert np.array_equal(got, want), (level, consecutive)
            rows = np.sort(rng.choice(len(codes), len(codes) // 3, replace=False)).astype(np.intp)
            want = np.bincount(codes[rows], weights=small[rows], minlength=len(groups))
            assert np.array_equal(np.asarray(engine._domain_sums(level, small[rows], rows), dtype=np.float64), want)
    assert any(len(m) >= 3 for m in GreedyEngine(rnd, "eager").level("rack")[1])  # the rounding case ran


def test_the_shortfall_keeps_each_nodes_fits_as_a_recount_would() -> None:
    """``_Shortfall`` moves its matrix to any number of leading victim pods removed and keeps, per
    role to place, the pods that fit on each eligible node and their sum (the nodes moved
    recounted after the move only): after moves of a few pods and of many, forwards and back,
    the matrix, the per-node fits and the slots are those computed from scratch."""
    from gangopt.solvers.greedy.engine import _Shortfall
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    engine = GreedyEngine(rnd, "eager")
    g = engine.pending[0]
    counts = engine.min_counts(g)
    flat, _, _, _ = engine.units(engine.victim_rank[:300])
    nodes, rows = engine.rp_node[flat], engine.rp_rows[flat]
    short = _Shortfall(engine.free, [g], [counts], nodes, rows)
    rng = np.random.default_rng(2)
    ends = [1, 3, 2, 40, len(flat), 5, 0, *rng.integers(0, len(flat) + 1, 20).tolist()]
    assert len(flat) > 16 * 2  # moves of many pods (by the mask) as well as of a few (by a sort)
    for end in ends:
        short.move(end)
        want = engine.free.copy()
        np.add.at(want, nodes[:end], rows[:end])
        assert np.array_equal(short.work, want)
        for i, (r, n) in enumerate((r, n) for r, n in enumerate(counts) if n):
            fits = np.zeros(len(want), dtype=np.int64)
            fits[g.idx[r]] = fit_counts(want, g.reqs[r], cap=n, rows=g.idx[r])
            assert np.array_equal(short.fits[i], fits)
            assert short.slots[i] == int(fits.sum())


@pytest.mark.parametrize("pods", [1, 6, 40, 200])
def test_a_preferred_fill_over_every_node_is_the_general_one(pods: int) -> None:
    """``_fill_preferred`` over every node (a gang without a required level) reads the codes,
    eligible rows and domains as they are instead of through ``nodes``: the same pods on the
    same nodes, and the same room left, as the general path over the same nodes (forced by an
    engine whose matrix has one row more), for gangs a rack, a block, a zone or only the
    cluster holds, on the free room before and after the pass."""
    from gangopt.schema import TopologyRequest
    from tests.builders import fragmented_round

    rnd = fragmented_round(256, 60, running_mix="jobs")
    spec = rnd.pending[0].model_copy(update={"topology": TopologyRequest(preferred="rack")})
    engine = GreedyEngine(rnd, "eager")
    (g,) = engine._gangs([spec])
    levels = [level for level, _ in engine.terms.spread_levels(spec)]
    assert levels == ["rack", "block", "zone"]
    every = np.arange(len(engine.free), dtype=np.intp)
    placed = 0
    for stage in ("before", "after"):
        if stage == "after":
            engine.run()
        fast, slow = engine.free.copy(order="K"), engine.free.copy(order="K")
        got = engine._fill_preferred(fast, every, g, [pods], levels, sliced=False)
        real = engine.free
        engine.free = np.vstack([real, real[:1]])  # not every node: the general path
        try:
            want = engine._fill_preferred(slow, every, g, [pods], levels, sliced=False)
        finally:
            engine.free = real
        assert got == want
        assert np.array_equal(fast, slow)
        placed += got is not None
    assert placed  # some placement was made and compared
    inside = np.arange(40, 72, dtype=np.intp)  # no level to order by: ascending positions stay put
    codes = {"rack": engine.level("rack")[0]}
    offer = np.arange(32, dtype=np.int64)[::-1].copy()
    assert np.array_equal(GreedyEngine._tree_order(codes, [], offer, inside), np.lexsort([inside]))
    assert not np.array_equal(GreedyEngine._tree_order(codes, ["rack"], offer, inside), np.arange(32))
