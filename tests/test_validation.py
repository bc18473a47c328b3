"""The plan validator, rule by rule: each test builds a small round, a plan that breaks one
rule, and the corrected plan that breaks none (docs/plan-semantics.md, docs/rules.md)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

from gangopt.schema import MatchExpression, Placement, Plan, Preemption, Resize, Round, Taint, Toleration, Waiting
from gangopt.validation import RULES, Violation, affinity_holds, tolerates, validate
from tests.builders import cluster, make_plan, make_round, node, pending, queue, role, running


def rules(rnd: Round, plan: Plan) -> set[str]:
    """Names of the rules the plan breaks."""
    return {v.rule for v in validate(rnd, plan)}


def messages(rnd: Round, plan: Plan, rule: str) -> list[str]:
    return [v.message for v in validate(rnd, plan) if v.rule == rule]


def V(rule: str, message: str, gang: str | None = None, node: str | None = None) -> Violation:
    """A violation, as a test expects it."""
    return Violation(rule=rule, message=message, gang=gang, node=node)


def assert_valid(rnd: Round, plan: Plan) -> None:
    violations = validate(rnd, plan)
    assert violations == [], "\n".join(f"{v.rule}: {v.message}" for v in violations)


def edit(plan: Plan, **update: object) -> Plan:
    """A copy of ``plan`` with some fields replaced (plans are frozen)."""
    return plan.model_copy(update=update)


def test_every_reported_rule_is_a_known_rule_name() -> None:
    rnd = make_round(cluster(1), pending=[pending("g", 2, gpu=8)])
    plan = make_plan(rnd, place={"g": ["n0", "n0"]}, admitted=[])
    found = validate(rnd, plan)
    assert found and all(isinstance(v, Violation) and v.rule in RULES for v in found)
    with pytest.raises(FrozenInstanceError):  # violations are values: callers may set or hash them
        found[0].rule = "other"  # type: ignore[misc]
    assert len(set(found)) == len(found)


# ----------------------------------------------------------------------------- 1. all_or_nothing


class TestAllOrNothing:
    def test_admitted_gang_starts_at_least_its_minimum(self) -> None:
        rnd = make_round(cluster(4), pending=[pending("g", 4, gpu=8)])
        partial = make_plan(rnd, place={"g": ["n0", "n1", "n2"]})
        assert validate(rnd, partial) == [
            V("all_or_nothing", "admitted gang g: 3 pods < minimum 4", "g"),
            V("all_or_nothing", "admitted gang g: role worker has 3 pods < role minimum 4", "g"),
        ]
        assert_valid(rnd, make_plan(rnd, place={"g": ["n0", "n1", "n2", "n3"]}))

    def test_admitted_gang_with_no_pods_at_all_is_partial(self) -> None:
        rnd = make_round(cluster(1), pending=[pending("g", 1, gpu=8)])
        assert validate(rnd, make_plan(rnd, admitted=["g"])) == [
            V("all_or_nothing", "admitted gang g: 0 pods < minimum 1", "g"),
            V("all_or_nothing", "admitted gang g: role worker has 0 pods < role minimum 1", "g"),
        ]

    def test_gang_that_is_not_admitted_has_no_pods(self) -> None:
        """Volcano #3373: pods of an unadmitted gang would hold GPUs without running."""
        rnd = make_round(cluster(2), pending=[pending("g", 2, gpu=8)])
        held = make_plan(rnd, place={"g": ["n0", "n1"]}, admitted=[])
        assert validate(rnd, held) == [V("all_or_nothing", "gang g: not admitted but has 2 new pods", "g")]
        assert_valid(rnd, make_plan(rnd))

    def test_every_role_starts_at_least_its_role_minimum(self) -> None:
        roles = [role("launcher", 1, gpu=0, cpu=1), role("worker", 4, gpu=8, min_replicas=2)]
        rnd = make_round(cluster(4, cpu=16), pending=[pending("g", roles=roles)])
        no_launcher = make_plan(rnd, place={"g": {"worker": ["n0", "n1", "n2", "n3"]}})
        assert validate(rnd, no_launcher) == [
            V("all_or_nothing", "admitted gang g: role launcher has 0 pods < role minimum 1", "g")
        ]
        assert_valid(rnd, make_plan(rnd, place={"g": {"launcher": ["n0"], "worker": ["n0", "n1"]}}))

    def test_no_role_gets_more_pods_than_its_replicas(self) -> None:
        rnd = make_round(cluster(2), pending=[pending("g", 2, gpu=4)])
        assert validate(rnd, make_plan(rnd, place={"g": ["n0", "n0", "n1"]})) == [
            V("all_or_nothing", "admitted gang g: 3 pods > maximum 2", "g"),
            V("all_or_nothing", "admitted gang g: role worker has 3 pods > replicas 2", "g"),
        ]

    def test_elastic_gang_stays_within_max_members(self) -> None:
        rnd = make_round(cluster(2), pending=[pending("g", 4, gpu=4, min_members=2, max_members=3)])
        assert validate(rnd, make_plan(rnd, place={"g": ["n0", "n0", "n1", "n1"]})) == [
            V("all_or_nothing", "admitted gang g: 4 pods > maximum 3", "g")
        ]
        assert_valid(rnd, make_plan(rnd, place={"g": ["n0", "n0", "n1"]}))

    def test_gangs_of_a_group_start_together(self) -> None:
        """Koordinator #872: interleaved gang groups each holding half of what they need."""
        rnd = make_round(
            cluster(2), pending=[pending("a", 1, gpu=8, group="pair"), pending("b", 1, gpu=8, group="pair")]
        )
        half = make_plan(rnd, place={"a": ["n0"]})
        assert validate(rnd, half) == [V("all_or_nothing", "group pair: a admitted but b not")]
        assert_valid(rnd, make_plan(rnd, place={"a": ["n0"], "b": ["n1"]}))

    def test_running_gang_is_not_shrunk_below_its_minimum(self) -> None:
        """Volcano #3595: evicting just enough single pods breaks the victim gang."""
        rnd = make_round(
            cluster(1),
            running=[running("e", ["n0"] * 4, gpu=2, min_replicas=3)],
            pending=[pending("hi", 1, gpu=4, priority=10)],
        )
        broken = make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-2", "e-worker-3"], ["hi"])})
        assert validate(rnd, broken) == [
            V("all_or_nothing", "running gang e after the plan: 2 pods < minimum 3", "e"),
            V("all_or_nothing", "running gang e after the plan: role worker has 2 pods < role minimum 3", "e"),
        ]
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"e": ["hi"]}))

    def test_non_elastic_running_gang_cannot_lose_single_pods(self) -> None:
        rnd = make_round(
            cluster(1), running=[running("r", ["n0", "n0"], gpu=4)], pending=[pending("hi", 1, gpu=4, priority=10)]
        )
        broken = make_plan(rnd, place={"hi": ["n0"]}, shrink={"r": (["r-worker-1"], ["hi"])})
        assert validate(rnd, broken) == [
            V("all_or_nothing", "running gang r after the plan: 1 pods < minimum 2", "r"),
            V("all_or_nothing", "running gang r after the plan: role worker has 1 pods < role minimum 2", "r"),
        ]

    def test_evicted_running_gang_does_not_grow(self) -> None:
        rnd = make_round(cluster(2), running=[running("e", ["n0"], gpu=8, replicas=2, min_replicas=1)])
        plan = make_plan(rnd, place={"e": ["n1"]}, evict={"e": []})
        assert validate(rnd, plan) == [
            V("all_or_nothing", "running gang e: evicted but gets 1 new pods", "e"),
            V("preemption", "gang e: preempted for no gang (for_gangs is empty)", "e"),
            V("preemption", "gang e: evicted, but all 1 pods fit back on n0 within capacity and quota", "e"),
        ]

    def test_running_gang_grows_at_most_to_its_replicas(self) -> None:
        rnd = make_round(cluster(2), running=[running("e", ["n0"], gpu=8, replicas=2, min_replicas=1)])
        assert_valid(rnd, make_plan(rnd, place={"e": ["n1"]}))
        too_many = make_plan(rnd, place={"e": ["n1", "n1"]})
        assert validate(rnd, too_many) == [
            V("all_or_nothing", "running gang e after the plan: 3 pods > maximum 2", "e"),
            V("all_or_nothing", "running gang e after the plan: role worker has 3 pods > replicas 2", "e"),
            V("capacity", "node n1: gpu 16 > capacity 8 (kept 0, new 16)", node="n1"),
        ]


# ----------------------------------------------------------------------------- 2. capacity


class TestCapacity:
    def test_new_pods_fit_their_node(self) -> None:
        rnd = make_round(cluster(1), pending=[pending("a", 1, gpu=6), pending("b", 1, gpu=4)])
        both = make_plan(rnd, place={"a": ["n0"], "b": ["n0"]})
        assert validate(rnd, both) == [V("capacity", "node n0: gpu 10 > capacity 8 (kept 0, new 10)", node="n0")]
        assert_valid(rnd, make_plan(rnd, place={"a": ["n0"]}))

    def test_kept_running_pods_count_against_capacity(self) -> None:
        """Kueue #14570: a node double-booked by two decisions."""
        rnd = make_round(cluster(2), running=[running("r", ["n0"], gpu=4)], pending=[pending("p", 1, gpu=6)])
        plan = make_plan(rnd, place={"p": ["n0"]})
        violation = next(v for v in validate(rnd, plan) if v.rule == "capacity")
        assert violation.node == "n0"
        assert violation.message == "node n0: gpu 10 > capacity 8 (kept 4, new 6)"
        assert_valid(rnd, make_plan(rnd, place={"p": ["n1"]}))

    def test_resource_the_node_lacks_has_capacity_zero(self) -> None:
        rnd = make_round(cluster(1), pending=[pending("p", 1, gpu=1, rdma=1)])
        assert validate(rnd, make_plan(rnd, place={"p": ["n0"]})) == [
            V("capacity", "node n0: rdma 1 > capacity 0 (kept 0, new 1)", node="n0")
        ]

    def test_every_resource_is_checked_not_only_gpu(self) -> None:
        rnd = make_round(cluster(1, cpu=4, memory="64Gi"), pending=[pending("p", 2, gpu=1, cpu=1, memory="40Gi")])
        found = messages(rnd, make_plan(rnd, place={"p": ["n0", "n0"]}), "capacity")
        assert found == ["node n0: memory 80Gi > capacity 64Gi (kept 0, new 80Gi)"]


# ----------------------------------------------------------------------------- 3. eligibility


class TestEligibility:
    def test_no_new_pod_on_a_cordoned_node(self) -> None:
        rnd = make_round(cluster(2, cordoned=["n0"]), pending=[pending("p", 1, gpu=8)])
        plan = make_plan(rnd, place={"p": ["n0"]})
        assert validate(rnd, plan) == [
            V("eligibility", "pod p-worker-0 of gang p on node n0: node is cordoned (schedulable=false)", "p", "n0")
        ]
        assert_valid(rnd, make_plan(rnd, place={"p": ["n1"]}))

    def test_kept_pods_on_a_cordoned_node_are_fine(self) -> None:
        rnd = make_round(cluster(1, cordoned=["n0"]), running=[running("r", ["n0"], gpu=8)])
        assert_valid(rnd, make_plan(rnd))

    def test_node_selector_must_match_exactly(self) -> None:
        labels = {"n0": {"accel": "a100"}, "n1": {"accel": "h100"}}
        rnd = make_round(cluster(2, labels=labels), pending=[pending("p", 1, gpu=8, selector={"accel": "h100"})])
        assert validate(rnd, make_plan(rnd, place={"p": ["n0"]})) == [
            V(
                "eligibility",
                "pod p-worker-0 of gang p on node n0: node_selector accel=h100 but node has accel=a100",
                "p",
                "n0",
            )
        ]
        assert_valid(rnd, make_plan(rnd, place={"p": ["n1"]}))

    def test_node_affinity_must_hold(self) -> None:
        labels = {"n0": {"zone": "a"}, "n1": {"zone": "b"}}
        rnd = make_round(
            cluster(2, labels=labels), pending=[pending("p", 1, gpu=8, affinity=[("zone", "NotIn", ["a"])])]
        )
        assert validate(rnd, make_plan(rnd, place={"p": ["n0"]})) == [
            V(
                "eligibility",
                "pod p-worker-0 of gang p on node n0: node_affinity zone NotIn [a] does not hold (node zone=a)",
                "p",
                "n0",
            )
        ]
        assert_valid(rnd, make_plan(rnd, place={"p": ["n1"]}))

    @pytest.mark.parametrize(
        ("operator", "values", "labels", "holds"),
        [
            ("In", ["a", "b"], {"k": "a"}, True),
            ("In", ["a", "b"], {"k": "c"}, False),
            ("In", ["a"], {}, False),
            ("NotIn", ["a"], {"k": "b"}, True),
            ("NotIn", ["a"], {"k": "a"}, False),
            ("NotIn", ["a"], {}, True),
            ("Exists", [], {"k": ""}, True),
            ("Exists", [], {}, False),
            ("DoesNotExist", [], {}, True),
            ("DoesNotExist", [], {"k": "x"}, False),
        ],
    )
    def test_affinity_operators_follow_kubernetes(
        self, operator: str, values: list[str], labels: dict[str, str], holds: bool
    ) -> None:
        term = MatchExpression(key="k", operator=operator, values=values)
        assert affinity_holds(term, labels) is holds

    @pytest.mark.parametrize(
        ("toleration", "taint", "tolerated"),
        [
            (Toleration(key="gpu", operator="Equal", value="x"), Taint(key="gpu", value="x"), True),
            (Toleration(key="gpu", operator="Equal", value="y"), Taint(key="gpu", value="x"), False),
            (Toleration(key="gpu", operator="Exists"), Taint(key="gpu", value="anything"), True),
            (Toleration(key="other", operator="Exists"), Taint(key="gpu", value="x"), False),
            (Toleration(key=None, operator="Exists"), Taint(key="gpu", value="x", effect="NoExecute"), True),
            (
                Toleration(key="gpu", operator="Exists", effect="NoSchedule"),
                Taint(key="gpu", effect="NoExecute"),
                False,
            ),
            (Toleration(key="gpu", operator="Exists", effect="NoExecute"), Taint(key="gpu", effect="NoExecute"), True),
            (Toleration(key="gpu", operator="Exists", effect=None), Taint(key="gpu", effect="NoExecute"), True),
        ],
    )
    def test_toleration_matching_follows_kubernetes(
        self, toleration: Toleration, taint: Taint, tolerated: bool
    ) -> None:
        assert tolerates(toleration, taint) is tolerated

    @pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
    def test_untolerated_hard_taint_blocks(self, effect: str) -> None:
        rnd = make_round(cluster(1, taints={"n0": [("dedicated", "infer", effect)]}), pending=[pending("p", 1, gpu=8)])
        plan = make_plan(rnd, place={"p": ["n0"]})
        assert messages(rnd, plan, "eligibility") == [
            f"pod p-worker-0 of gang p on node n0: taint dedicated=infer:{effect} is not tolerated"
        ]
        tolerant = make_round(
            rnd.cluster,
            pending=[
                pending("p", 1, gpu=8, tolerations=[Toleration(key="dedicated", operator="Equal", value="infer")])
            ],
        )
        assert_valid(tolerant, make_plan(tolerant, place={"p": ["n0"]}))

    def test_prefer_no_schedule_never_blocks(self) -> None:
        rnd = make_round(
            cluster(1, taints={"n0": [("spot", "", "PreferNoSchedule")]}), pending=[pending("p", 1, gpu=8)]
        )
        assert_valid(rnd, make_plan(rnd, place={"p": ["n0"]}))

    def test_growing_running_gang_is_checked_too(self) -> None:
        rnd = make_round(cluster(2, cordoned=["n1"]), running=[running("e", ["n0"], gpu=8, replicas=2, min_replicas=1)])
        assert validate(rnd, make_plan(rnd, place={"e": ["n1"]})) == [
            V("eligibility", "pod e-worker-1 of gang e on node n1: node is cordoned (schedulable=false)", "e", "n1")
        ]


# ----------------------------------------------------------------------------- 4. topology


class TestTopology:
    def test_required_level_holds_all_pods_in_one_domain(self) -> None:
        rnd = make_round(cluster(4, racks=2), pending=[pending("g", 2, gpu=8, required="rack")])
        spread = make_plan(rnd, place={"g": ["n1", "n2"]})
        assert validate(rnd, spread) == [
            V("topology", "gang g: required rack but pods span 2 domains (r0: 1 pods on n1; r1: 1 pods on n2)", "g")
        ]
        assert_valid(rnd, make_plan(rnd, place={"g": ["n2", "n3"]}))

    def test_growing_running_gang_keeps_its_required_domain(self) -> None:
        rnd = make_round(
            cluster(4, racks=2), running=[running("e", ["n0"], gpu=8, replicas=2, min_replicas=1, required="rack")]
        )
        assert validate(rnd, make_plan(rnd, place={"e": ["n2"]})) == [
            V("topology", "gang e: required rack but pods span 2 domains (r0: 1 pods on n0; r1: 1 pods on n2)", "e")
        ]
        assert_valid(rnd, make_plan(rnd, place={"e": ["n1"]}))

    def test_required_topology_holds_after_preemption(self) -> None:
        """Volcano #4533: the preemptor landed across domains, breaking its hard topology."""
        rnd = make_round(
            cluster(4, racks=2),
            running=[running("v0", ["n1"], gpu=8), running("v1", ["n2"], gpu=8), running("v2", ["n3"], gpu=8)],
            pending=[pending("hi", 2, gpu=8, required="rack", priority=10)],
        )
        across = make_plan(rnd, place={"hi": ["n0", "n2"]}, evict={"v1": ["hi"]})
        assert validate(rnd, across) == [
            V("topology", "gang hi: required rack but pods span 2 domains (r0: 1 pods on n0; r1: 1 pods on n2)", "hi")
        ]
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0", "n1"]}, evict={"v0": ["hi"]}))

    def test_slices_fill_whole_domains(self) -> None:
        rnd = make_round(cluster(4, racks=2), pending=[pending("g", 4, gpu=4, slice_level="rack", slice_size=2)])
        uneven = make_plan(rnd, place={"g": ["n0", "n0", "n1", "n2"]})
        assert validate(rnd, uneven) == [
            V("topology", "gang g: 3 pods in rack r0, not a multiple of slice size 2", "g"),
            V("topology", "gang g: 1 pods in rack r1, not a multiple of slice size 2", "g"),
        ]
        assert_valid(rnd, make_plan(rnd, place={"g": ["n0", "n1", "n2", "n3"]}))

    def test_untouched_running_gang_is_not_blamed_for_its_input_placement(self) -> None:
        rnd = make_round(cluster(4, racks=2), running=[running("r", ["n0", "n2"], gpu=8, required="rack")])
        assert_valid(rnd, make_plan(rnd))


# ----------------------------------------------------------------------------- 5. preemption


def _victim_round(*, preemption: bool = True, preemptible: bool = True, victim_priority: int = 0) -> Round:
    """One 8-GPU node held by a 1-pod victim, a second node busy, and an 8-GPU preemptor."""
    return make_round(
        cluster(2),
        running=[
            running("low", ["n0"], gpu=8, priority=victim_priority, preemptible=preemptible),
            running("other", ["n1"], gpu=8, priority=20, preemptible=False),
        ],
        pending=[pending("hi", 1, gpu=8, priority=10)],
        preemption=preemption,
    )


def _quota_churn_round() -> Round:
    """Queue q may use 12 GPUs; v runs 4 on n0; h (priority 1) needs 4, l (priority 0) 8."""
    return make_round(
        cluster(2),
        queues=[queue("q", gpu=12)],
        running=[running("v", ["n0"], gpu=4, queue="q")],
        pending=[pending("h", 1, gpu=4, priority=1, queue="q"), pending("l", 1, gpu=8, queue="q")],
    )


class TestPreemption:
    def test_a_needed_preemption_is_valid(self) -> None:
        rnd = _victim_round()
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]}))

    def test_only_when_policy_allows(self) -> None:
        rnd = _victim_round(preemption=False)
        plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]})
        assert validate(rnd, plan) == [V("preemption", "gang low: loses 1 pods but policy.preemption is false", "low")]

    def test_only_preemptible_victims(self) -> None:
        rnd = _victim_round(preemptible=False)
        assert validate(rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]})) == [
            V("preemption", "gang low: loses 1 pods but is not preemptible", "low")
        ]

    @pytest.mark.parametrize("victim_priority", [10, 11])
    def test_only_for_strictly_higher_priority(self, victim_priority: int) -> None:
        rnd = _victim_round(victim_priority=victim_priority)
        plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]})
        p = victim_priority
        assert validate(rnd, plan) == [
            V(
                "preemption",
                f"gang low (priority {p}) preempted for gang hi of priority 10, not strictly higher",
                "low",
            ),
            V(
                "preemption",
                f"node n0 loses pods of gang low (priority {p}) but receives new pods of gang hi (priority 10), "
                "not strictly higher",
                "low",
                "n0",
            ),
            V(
                "preemption",
                f"gang low: evicted, but all 1 pods fit back on n0 within capacity and quota beside the new pods "
                f"of priority above {p} (the rest went to gangs of its priority or lower)",
                "low",
            ),
        ]

    def test_for_gangs_must_name_someone(self) -> None:
        rnd = _victim_round()
        plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"low": []})
        assert validate(rnd, plan) == [V("preemption", "gang low: preempted for no gang (for_gangs is empty)", "low")]

    def test_beneficiary_uses_a_node_the_victim_freed(self) -> None:
        rnd = make_round(
            cluster(2),
            running=[running("low", ["n1"], gpu=8)],
            pending=[pending("hi", 1, gpu=8, priority=10)],
        )
        elsewhere = make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]})
        assert validate(rnd, elsewhere) == [
            V("preemption", "gang low: none of hi has a new pod on its nodes n1", "low"),
            V("preemption", "gang low: evicted, but all 1 pods fit back on n1 within capacity and quota", "low"),
        ]
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"]}))

    def test_freed_node_serves_only_higher_priorities(self) -> None:
        """Same-priority churn: a 1-GPU high-priority pod must not license evicting a running
        1-GPU job so that a waiting 7-GPU job of the victim's own priority fits beside it."""
        rnd = make_round(
            cluster(1),
            running=[running("a", ["n0"], gpu=1)],
            pending=[pending("b", 1, gpu=1, priority=1), pending("c", 1, gpu=7)],
        )
        churn = make_plan(rnd, place={"b": ["n0"], "c": ["n0"]}, evict={"a": ["b"]})
        found = messages(rnd, churn, "preemption")
        assert found == [
            "node n0 loses pods of gang a (priority 0) but receives new pods of gang c (priority 0), "
            "not strictly higher",
            "gang a: evicted, but all 1 pods fit back on n0 within capacity and quota beside the new "
            "pods of priority above 0 (the rest went to gangs of its priority or lower)",
        ]
        assert_valid(rnd, make_plan(rnd, place={"b": ["n0"]}))

    def test_freed_node_of_a_multi_node_victim_stays_for_higher_priorities(self) -> None:
        """The victim's other node is freed too, but only the preemptor's priority may use it."""
        rnd = make_round(
            cluster(2),
            running=[running("v", ["n0", "n1"], gpu=8)],
            pending=[
                pending("hi", 1, gpu=8, priority=5),
                pending("mid", 1, gpu=8, priority=3),
                pending("lo", 1, gpu=8),
            ],
        )
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"], "mid": ["n1"]}, evict={"v": ["hi"]}))
        lower = make_plan(rnd, place={"hi": ["n0"], "lo": ["n1"]}, evict={"v": ["hi"]})
        assert validate(rnd, lower) == [
            V(
                "preemption",
                "node n1 loses pods of gang v (priority 0) but receives new pods of gang lo (priority 0), "
                "not strictly higher",
                "v",
                "n1",
            )
        ]

    def test_quota_a_victim_held_may_not_go_to_its_own_priority(self) -> None:
        """The quota form of the same churn: the preemptor lands beside the victim, and the
        victim's share of the queue's quota starts a waiting gang of the victim's priority."""
        rnd = _quota_churn_round()
        churn = make_plan(rnd, place={"h": ["n0"], "l": ["n1"]}, evict={"v": ["h"]})
        assert messages(rnd, churn, "preemption") == [
            "gang v: evicted, but all 1 pods fit back on n0 within capacity and quota beside the new "
            "pods of priority above 0 (the rest went to gangs of its priority or lower)"
        ]
        assert_valid(rnd, make_plan(rnd, place={"h": ["n0"]}))

    def test_beneficiary_must_start_pods(self) -> None:
        rnd = _victim_round()
        plan = make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi", "other"]})
        assert validate(rnd, plan) == [
            V("preemption", "gang low: preempted for gang other, which gets no new pods", "low")
        ]

    def test_no_victim_that_would_fit_back(self) -> None:
        """Kueue #5243: preempting many small pods spread over nodes, freeing no whole node."""
        nodes = ["n0", "n1", "n2", "n3"]
        rnd = make_round(
            cluster(4),
            running=[running(f"v{i}", [n], gpu=2) for i, n in enumerate(nodes)]
            + [running(f"k{i}", [n], gpu=6) for i, n in enumerate(nodes)],
            pending=[pending("big", 1, gpu=8, priority=10)],
        )
        spread = make_plan(rnd, place={"big": ["n0"]}, evict={f"v{i}": ["big"] for i in range(4)})
        assert validate(rnd, spread) == [
            V("capacity", "node n0: gpu 14 > capacity 8 (kept 6, new 8)", node="n0"),
            *(
                V("preemption", message, f"v{i}")
                for i in (1, 2, 3)
                for message in (
                    f"gang v{i}: none of big has a new pod on its nodes n{i}",
                    f"gang v{i}: evicted, but all 1 pods fit back on n{i} within capacity and quota",
                )
            ),
        ]
        assert_valid(rnd, make_plan(rnd, place={"big": ["n0"]}, evict={"v0": ["big"], "k0": ["big"]}))

    def test_shrink_removes_no_pod_that_would_fit_back(self) -> None:
        rnd = make_round(
            cluster(1),
            running=[running("e", ["n0"] * 4, gpu=2, min_replicas=1)],
            pending=[pending("hi", 1, gpu=4, priority=10)],
        )
        greedy = make_plan(
            rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-1", "e-worker-2", "e-worker-3"], ["hi"])}
        )
        assert validate(rnd, greedy) == [
            V("preemption", "gang e: shrunk, but pod e-worker-1 fits back on n0 within capacity and quota", "e", "n0")
        ]
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-2", "e-worker-3"], ["hi"])}))

    def test_sliced_shrink_gives_back_whole_slices_only(self) -> None:
        rnd = make_round(
            cluster(1),
            running=[running("e", ["n0"] * 6, gpu=1, min_replicas=2, slice_level="node", slice_size=2)],
            pending=[pending("hi", 1, gpu=4, priority=10)],
        )
        one_slice = make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-4", "e-worker-5"], ["hi"])})
        assert_valid(rnd, one_slice)
        two_slices = make_plan(
            rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-2", "e-worker-3", "e-worker-4", "e-worker-5"], ["hi"])}
        )
        assert validate(rnd, two_slices) == [
            V(
                "preemption",
                "gang e: shrunk, but pod e-worker-2, e-worker-3 fits back on n0 within capacity and quota",
                "e",
                "n0",
            )
        ]

    def test_sliced_shrink_of_one_needed_pod_takes_its_whole_slice(self) -> None:
        """6 GPUs free a pod short: one pod would do by capacity, but slices come in pairs."""
        rnd = make_round(
            cluster(1),
            running=[running("e", ["n0"] * 4, gpu=1, min_replicas=2, slice_level="node", slice_size=2)],
            pending=[pending("hi", 1, gpu=5, priority=10)],
        )
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-2", "e-worker-3"], ["hi"])}))

    def test_quota_can_make_a_preemption_necessary(self) -> None:
        rnd = make_round(
            cluster(1, gpus=16),
            queues=[queue("q", gpu=8)],
            running=[running("low", ["n0"], gpu=8, queue="q")],
            pending=[pending("hi", 1, gpu=8, queue="q", priority=10)],
        )
        assert_valid(rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]}))
        roomy = make_round(rnd.cluster, queues=[queue("q", gpu=16)], running=rnd.running, pending=rnd.pending)
        assert validate(roomy, make_plan(roomy, place={"hi": ["n0"]}, evict={"low": ["hi"]})) == [
            V("preemption", "gang low: evicted, but all 1 pods fit back on n0 within capacity and quota", "low")
        ]


# ----------------------------------------------------------------------------- 6. quota


class TestQuota:
    def test_queue_without_cohort_stays_within_nominal(self) -> None:
        rnd = make_round(cluster(2), queues=[queue("q", gpu=8)], pending=[pending("g", 2, gpu=8, queue="q")])
        plan = make_plan(rnd, place={"g": ["n0", "n1"]})
        assert validate(rnd, plan) == [V("quota", "queue q: gpu 16 > limit 8")]
        roomy = make_round(rnd.cluster, queues=[queue("q", gpu=16)], pending=rnd.pending)
        assert_valid(roomy, make_plan(roomy, place={"g": ["n0", "n1"]}))

    def test_unlisted_resources_are_not_limited(self) -> None:
        rnd = make_round(
            cluster(1, cpu=64), queues=[queue("q", nominal={"cpu": 64})], pending=[pending("g", 1, gpu=8, queue="q")]
        )
        assert_valid(rnd, make_plan(rnd, place={"g": ["n0"]}))

    def test_borrowing_stops_at_the_borrowing_limit(self) -> None:
        queues = [queue("a", cohort="c", gpu=8, borrowing_limit={"gpu": 4}), queue("b", cohort="c", gpu=8)]
        rnd = make_round(cluster(2), queues=queues, pending=[pending("g", 4, gpu=4, queue="a", min_members=3)])
        over = make_plan(rnd, place={"g": ["n0", "n0", "n1", "n1"]})
        assert messages(rnd, over, "quota") == ["queue a (nominal + borrowing limit): gpu 16 > limit 12"]
        assert_valid(rnd, make_plan(rnd, place={"g": ["n0", "n0", "n1"]}))

    def test_borrowing_without_limit_is_bounded_by_the_cohort(self) -> None:
        queues = [queue("a", cohort="c", gpu=8), queue("b", cohort="c", gpu=8)]
        rnd = make_round(
            cluster(3),
            queues=queues,
            pending=[pending("big", 2, gpu=8, queue="a"), pending("small", 1, gpu=8, queue="b")],
        )
        assert_valid(rnd, make_plan(rnd, place={"big": ["n0", "n1"]}))
        both = make_plan(rnd, place={"big": ["n0", "n1"], "small": ["n2"]})
        assert messages(rnd, both, "quota") == ["cohort c: gpu 24 > limit 16"]

    def test_existing_over_usage_is_tolerated_but_not_increased(self) -> None:
        rnd = make_round(
            cluster(2),
            queues=[queue("q", gpu=4)],
            running=[running("r", ["n0"], gpu=8, queue="q")],
            pending=[pending("g", 1, gpu=1, queue="q")],
        )
        assert_valid(rnd, make_plan(rnd))
        worse = make_plan(rnd, place={"g": ["n1"]})
        assert messages(rnd, worse, "quota") == ["queue q: gpu 9 > limit 4, above 8 before the round"]


# ----------------------------------------------------------------------------- 7. stability


class TestStability:
    def test_kept_running_pod_is_not_placed_again(self) -> None:
        rnd = make_round(cluster(2), running=[running("r", ["n0"], gpu=4)])
        moved = Plan(status="feasible", placements=[Placement(gang="r", role="worker", pod="r-worker-0", node="n1")])
        assert validate(rnd, moved) == [
            V("all_or_nothing", "running gang r after the plan: 2 pods > maximum 1", "r"),
            V("all_or_nothing", "running gang r after the plan: role worker has 2 pods > replicas 1", "r"),
            V(
                "stability",
                "pod r-worker-0 of running gang r stays on node n0, but the plan places it again on node n1",
                "r",
                "n1",
            ),
            V("consistency", "gang r role worker: new pods named r-worker-0, expected r-worker-1", "r"),
            V("consistency", "gang r goes from 1 to 2 members without a resize entry", "r"),
        ]
        assert_valid(rnd, make_plan(rnd))

    def test_running_pods_are_not_moved_by_shrink_and_grow(self) -> None:
        rnd = make_round(
            cluster(2),
            running=[running("e", ["n0", "n0"], gpu=4, replicas=3, min_replicas=1, priority=0)],
            pending=[pending("hi", 1, gpu=4, priority=10)],
        )
        moved = make_plan(rnd, place={"hi": ["n0"], "e": ["n1"]}, shrink={"e": (["e-worker-1"], ["hi"])})
        assert validate(rnd, moved) == [
            V("stability", "running gang e: role worker loses 1 pods and gains 1 new ones (moves pods)", "e")
        ]


# ----------------------------------------------------------------------------- consistency


def _basic() -> tuple[Round, Plan]:
    """A round with one running victim, one elastic grower and two pending gangs, and a valid plan."""
    rnd = make_round(
        cluster(4),
        running=[
            running("low", ["n0"], gpu=8),
            running("e", ["n1"], gpu=8, replicas=2, min_replicas=1),
        ],
        pending=[pending("hi", 1, gpu=8, priority=10), pending("wait", 2, gpu=8)],
    )
    plan = make_plan(rnd, place={"hi": ["n0"], "e": ["n2"]}, evict={"low": ["hi"]})
    return rnd, plan


class TestConsistency:
    def test_the_basic_plan_is_valid(self) -> None:
        rnd, plan = _basic()
        assert_valid(rnd, plan)
        assert plan.resizes == [Resize(gang="e", from_members=1, to_members=2)]

    @pytest.mark.parametrize(
        ("placement", "expected"),
        [
            (
                Placement(gang="ghost", role="worker", pod="ghost-worker-0", node="n3"),
                V("consistency", "pod ghost-worker-0: unknown gang ghost", "ghost"),
            ),
            (
                Placement(gang="wait", role="boss", pod="wait-boss-0", node="n3"),
                V("consistency", "pod wait-boss-0: gang wait has no role boss (roles: worker)", "wait"),
            ),
            (
                Placement(gang="hi", role="worker", pod="hi-worker-1", node="n9"),
                V("consistency", "pod hi-worker-1 of gang hi: unknown node n9", "hi", "n9"),
            ),
        ],
    )
    def test_placements_name_known_gangs_roles_and_nodes(self, placement: Placement, expected: Violation) -> None:
        rnd, plan = _basic()
        broken = edit(plan, placements=[*plan.placements, placement])
        assert validate(rnd, broken) == [expected]

    def test_pod_names_are_unique(self) -> None:
        rnd, plan = _basic()
        twice = edit(plan, placements=[*plan.placements, plan.placements[0]])
        assert validate(rnd, twice) == [
            V("all_or_nothing", "admitted gang hi: 2 pods > maximum 1", "hi"),
            V("all_or_nothing", "admitted gang hi: role worker has 2 pods > replicas 1", "hi"),
            V("capacity", "node n0: gpu 16 > capacity 8 (kept 0, new 16)", node="n0"),
            V("consistency", "pod name hi-worker-0 is placed 2 times"),
            V(
                "consistency",
                "gang hi role worker: new pods named hi-worker-0, hi-worker-0, expected hi-worker-0, hi-worker-1",
                "hi",
            ),
        ]

    def test_new_pod_does_not_reuse_a_preempted_pods_name(self) -> None:
        rnd, plan = _basic()
        reuse = edit(
            plan,
            placements=[p.model_copy(update={"pod": "low-worker-0"}) if p.gang == "hi" else p for p in plan.placements],
        )
        assert validate(rnd, reuse) == [
            V(
                "consistency",
                "new pod low-worker-0 of gang hi reuses the name of a preempted pod of gang low",
                "hi",
                "n0",
            ),
            V("consistency", "gang hi role worker: new pods named low-worker-0, expected hi-worker-0", "hi"),
        ]

    def test_new_pods_are_named_by_the_lowest_free_index(self) -> None:
        rnd, plan = _basic()
        renamed = [p.model_copy(update={"pod": "e-worker-7"}) if p.gang == "e" else p for p in plan.placements]
        found = messages(rnd, edit(plan, placements=renamed), "consistency")
        assert found == ["gang e role worker: new pods named e-worker-7, expected e-worker-1"]

    def test_every_pending_gang_is_admitted_or_waiting(self) -> None:
        rnd, plan = _basic()
        forgotten = edit(plan, waiting=[])
        assert messages(rnd, forgotten, "consistency") == ["pending gang wait is neither admitted nor waiting"]
        both = edit(plan, waiting=[*plan.waiting, Waiting(gang="hi", code="capacity", reasons=["full"])])
        assert messages(rnd, both, "consistency") == ["gang hi is both admitted and waiting"]

    def test_admitted_lists_only_pending_gangs(self) -> None:
        rnd, plan = _basic()
        assert validate(rnd, edit(plan, admitted=[*plan.admitted, "e", "ghost"])) == [
            V("consistency", "admitted lists a running gang e", "e"),
            V("consistency", "admitted lists an unknown gang ghost", "ghost"),
        ]

    def test_waiting_gang_gives_a_reason(self) -> None:
        rnd, plan = _basic()
        silent = edit(plan, waiting=[Waiting(gang="wait", code="capacity", reasons=[])])
        assert messages(rnd, silent, "consistency") == ["waiting gang wait (capacity) gives no reason"]

    def _with_preemption(self, **update: object) -> tuple[Round, Plan]:
        rnd, plan = _basic()
        pre = plan.preemptions[0].model_copy(update=update)
        return rnd, edit(plan, preemptions=[pre])

    def test_preemption_lists_the_victims_own_pods(self) -> None:
        rnd, plan = self._with_preemption(pods=["low-worker-0", "e-worker-0"])
        assert validate(rnd, plan) == [
            V("consistency", "preemption of gang low lists pod e-worker-0, which is not one of its pods", "low")
        ]

    def test_preemption_lists_the_nodes_of_its_pods(self) -> None:
        rnd, plan = self._with_preemption(nodes=["n3"])
        assert messages(rnd, plan, "consistency") == [
            "preemption of gang low lists nodes n3, but its listed pods are on n0"
        ]

    def test_preemption_states_the_victims_priority(self) -> None:
        rnd, plan = self._with_preemption(priority=5)
        assert messages(rnd, plan, "consistency") == ["preemption of gang low says priority 5, gang has 0"]

    def test_evict_lists_all_pods_and_shrink_not_all(self) -> None:
        rnd, plan = self._with_preemption(kind="shrink")
        assert messages(rnd, plan, "consistency") == ["shrink of gang low removes all 1 pods (that is an evict)"]
        rnd2 = make_round(
            cluster(1),
            running=[running("r", ["n0", "n0"], gpu=4, min_replicas=1)],
            pending=[pending("hi", 1, gpu=4, priority=10)],
        )
        shrink = make_plan(rnd2, place={"hi": ["n0"]}, shrink={"r": (["r-worker-1"], ["hi"])})
        assert_valid(rnd2, shrink)
        partial_evict = edit(shrink, preemptions=[shrink.preemptions[0].model_copy(update={"kind": "evict"})])
        assert validate(rnd2, partial_evict) == [
            V("consistency", "eviction of gang r lists 1 of its 2 pods, not all", "r")
        ]

    def test_preemption_of_a_gang_that_is_not_running(self) -> None:
        rnd, plan = _basic()
        bogus = Preemption(gang="wait", kind="evict", pods=[], nodes=[], priority=0, cost=0.0, for_gangs=["hi"])
        assert validate(rnd, edit(plan, preemptions=[*plan.preemptions, bogus])) == [
            V("consistency", "preemption of pending gang wait", "wait")
        ]

    def test_preemption_for_unknown_gang(self) -> None:
        rnd, plan = self._with_preemption(for_gangs=["hi", "ghost"])
        assert validate(rnd, plan) == [V("consistency", "preemption of gang low is for unknown gang ghost", "low")]

    def test_resizes_match_the_member_counts(self) -> None:
        rnd, plan = _basic()
        missing = edit(plan, resizes=[])
        assert messages(rnd, missing, "consistency") == ["gang e goes from 1 to 2 members without a resize entry"]
        wrong = edit(plan, resizes=[Resize(gang="e", from_members=1, to_members=3)])
        assert messages(rnd, wrong, "consistency") == ["resize of gang e says 1 -> 3, the plan does 1 -> 2"]
        noop = edit(plan, resizes=[*plan.resizes, Resize(gang="low", from_members=1, to_members=1)])
        assert messages(rnd, noop, "consistency") == ["resize of gang low says 1 -> 1, the plan does 1 -> 0"]


def test_builders_make_named_nodes_in_racks_and_blocks() -> None:
    c = cluster(8, racks=4, blocks=2)
    assert c.topology_levels == ["block", "rack"]
    assert [(n.name, n.topology["block"], n.topology["rack"]) for n in c.nodes[::2]] == [
        ("n0", "b0", "r0"),
        ("n2", "b0", "r1"),
        ("n4", "b1", "r2"),
        ("n6", "b1", "r3"),
    ]
    assert node("x", 4).capacity == {"gpu": 4000}


def test_the_new_pods_up_to_a_priority_are_summed_once_and_the_same() -> None:
    """The reprieve check reads, per victim, the new pods of its priority or lower: summed once
    per priority and kept, they are what a fresh sum gives."""
    from gangopt.solvers.greedy import greedy
    from gangopt.validation import _Context
    from tests.builders import fragmented_round

    rnd = fragmented_round(64, 24, seed=3)
    plan = greedy(rnd)
    ctx = _Context(rnd, plan)
    priorities = sorted({g.priority for g in [*rnd.pending, *rnd.running]})
    assert len(priorities) > 1 and plan.placements
    for p in priorities:
        kept = ctx.new_up_to(p)
        assert ctx.new_up_to(p) is kept
        assert kept == ctx._sum_up_to(p)
    nodes, _ = ctx.new_up_to(max(priorities))
    assert sum(sum(c.values()) for c in nodes.values()) > 0  # every new pod counted at the top


def test_a_running_gang_the_plan_leaves_alone_is_still_held_to_its_bounds() -> None:
    """Untouched one-role running gangs are checked without counting their pods by role
    (``_one_role_within``); one above its replicas (a round built without checks) is still
    reported, and its well-formed neighbours are not."""
    from gangopt.solvers.greedy.engine import greedy
    from tests.builders import fragmented_round

    rnd = fragmented_round(128, 50, running_mix="jobs")
    plan = greedy(rnd)
    touched = {p.gang for p in plan.preemptions} | {p.gang for p in plan.placements}
    victim = next(g for g in rnd.running if g.name not in touched and len(g.roles) == 1)
    extra = victim.pods[0].model_copy(update={"name": f"{victim.pods[0].name}-extra"})
    wide = victim.model_copy(update={"pods": [*victim.pods, extra]})
    bad = rnd.model_copy(update={"running": [wide if g is victim else g for g in rnd.running]})
    found = [v for v in validate(bad, plan) if v.rule == "all_or_nothing"]
    assert found and {v.gang for v in found} == {victim.name}  # above its maximum and its replicas
    assert validate(rnd, plan) == []
