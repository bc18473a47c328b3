"""Issue 15's import audit (``gangopt/k8s/queues.py``): a Kueue ClusterQueue, a Volcano Queue
and a Koordinator ElasticQuota, imported with their preemption and quota settings from a small
manifest set (queue objects, running and pending pods), solved, and the outcome compared with
what each project documents. One table row per documented behaviour; every plan passes the
independent validator.

Sources: Kueue's ClusterQueue concept page (``preemption.withinClusterQueue``,
``reclaimWithinCohort``, ``borrowWithinCohort``, ``lendingLimit``, KEP-1224); Volcano's Queue
(``capability``, ``deserved``, ``guarantee``, ``weight``, ``reclaimable``) with the
proportion/capacity plugins and the ``reclaim``/``preempt`` actions; Koordinator's ElasticQuota
proposal (``min``/``max``, runtime quota, revoke of pods above it, no cross-quota preemption).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

import gangopt
from gangopt.k8s import Imported, ImportOptions, import_documents
from gangopt.schema import Plan, Policy

Json = dict[str, Any]
NOW = datetime.fromisoformat("2025-03-03T16:30:00+00:00").timestamp()
POLICY = Policy(time_limit=10, hard_limit=False, now=NOW)
"""``now`` an hour after every pod's creation: no running gang is protected as just started
(``Policy.lookahead``), so the queue policies alone decide."""
KUEUE = "kueue.x-k8s.io/"


def node(name: str, gpus: int = 8) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    *,
    gpus: int = 8,
    node_name: str | None = None,
    priority: int = 0,
    created: str = "2025-03-03T15:00:00Z",
    ns: str = "default",
    labels: Json | None = None,
    annotations: Json | None = None,
) -> Json:
    """A one-container pod requesting ``gpus`` GPUs, running on ``node_name`` or pending."""
    spec: Json = {
        "priority": priority,
        "containers": [{"name": "main", "image": "trainer", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    meta: Json = {"name": name, "namespace": ns, "creationTimestamp": created, "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def imported(objects: list[Json]) -> Imported:
    return import_documents(objects, ImportOptions(policy=POLICY))


def solved(imp: Imported, solver: str = "cpsat") -> Plan:
    plan = gangopt.solve(imp.round, solver=solver)
    assert gangopt.validate(imp.round, plan) == [], solver
    return plan


def outcome(plan: Plan) -> tuple[list[str], list[str]]:
    """(admitted gangs, evicted gangs), names without their namespace."""
    return (
        sorted(g.split("/")[-1] for g in plan.admitted),
        sorted(p.gang.split("/")[-1] for p in plan.preemptions),
    )


# ----------------------------------------------------------------------------- Kueue


def cluster_queue(name: str, nominal: int, preemption: Json | None = None, **resource: Any) -> Json:
    """A ClusterQueue of cohort ``all`` with ``nominal`` GPUs in one flavor (``resource``: the
    flavor's other fields, e.g. ``lendingLimit``)."""
    spec: Json = {
        "cohort": "all",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": nominal, **resource}]}
                ],
            }
        ],
    }
    if preemption is not None:
        spec["preemption"] = preemption
    return {"apiVersion": KUEUE + "v1beta1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, cluster: str) -> Json:
    return {
        "apiVersion": KUEUE + "v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterQueue": cluster},
    }


def kueue_pod(name: str, queue: str, **kw: Any) -> Json:
    return pod(name, labels={KUEUE + "queue-name": queue}, **kw)


def _kueue_cohort(a_preemption: Json, a_priority: int, a_nominal: int = 8, b_nominal: int = 8) -> list[Json]:
    """Two ClusterQueues of one cohort on two 8-GPU nodes: cq-b runs b1 and b2 (priority 0,
    one node each), 8 GPUs above its nominal; cq-a's a1 (8 GPUs, ``a_priority``) waits."""
    return [
        node("n0"),
        node("n1"),
        cluster_queue("cq-a", a_nominal, a_preemption),
        cluster_queue("cq-b", b_nominal),
        local_queue("team-a", "cq-a"),
        local_queue("team-b", "cq-b"),
        kueue_pod("b1", "team-b", node_name="n0"),
        kueue_pod("b2", "team-b", node_name="n1", created="2025-03-03T15:05:00Z"),
        kueue_pod("a1", "team-a", priority=a_priority, created="2025-03-03T15:10:00Z"),
    ]


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "kueue_like"])
@pytest.mark.parametrize(
    ("preemption", "priority", "reclaims"),
    [
        ({"reclaimWithinCohort": "Any"}, 0, True),
        ({"reclaimWithinCohort": "LowerPriority"}, 0, False),
        ({"reclaimWithinCohort": "LowerPriority"}, 10, True),
        ({"reclaimWithinCohort": "Never"}, 10, False),
        ({}, 10, False),
    ],
    ids=["any-equal", "lower-equal", "lower-higher", "never-higher", "default-never"],
)
def test_kueue_reclaim_within_cohort(solver: str, preemption: Json, priority: int, reclaims: bool) -> None:
    """Kueue: a ClusterQueue within its nominal quota reclaims what a cohort peer borrows, as
    ``reclaimWithinCohort`` says (Any: any priority; LowerPriority: lower only; Never and the
    default: not at all). The victim is cq-b's newest workload, b2 (Kueue: newest first)."""
    plan = solved(imported(_kueue_cohort(preemption, priority)), solver)
    if reclaims:
        assert outcome(plan)[0] == ["a1"] and len(plan.preemptions) == 1
    else:
        assert outcome(plan) == ([], [])


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "kueue_like"])
@pytest.mark.parametrize(
    ("borrow", "reclaims"),
    [
        ({"policy": "LowerPriority"}, True),
        ({"policy": "LowerPriority", "maxPriorityThreshold": -1}, False),
        ({"policy": "Never"}, False),
        (None, False),
    ],
    ids=["lower", "threshold-below-victims", "never", "unset"],
)
def test_kueue_borrow_within_cohort(solver: str, borrow: Json | None, reclaims: bool) -> None:
    """Kueue: a workload that needs to borrow (cq-a's nominal is 4, a1 needs 8) preempts in the
    cohort only under ``borrowWithinCohort: LowerPriority`` (victims of lower priority, and at
    most ``maxPriorityThreshold``); the cohort's 16 GPUs are then shared 8/8."""
    preemption: Json = {"reclaimWithinCohort": "LowerPriority"}
    if borrow is not None:
        preemption["borrowWithinCohort"] = borrow
    plan = solved(imported(_kueue_cohort(preemption, 10, a_nominal=4, b_nominal=12)), solver)
    if reclaims:
        assert outcome(plan)[0] == ["a1"] and len(plan.preemptions) == 1
    else:
        assert outcome(plan) == ([], [])


def _kueue_own_queue(within: str, a_priority: int, running_created: str) -> list[Json]:
    """cq-a alone on one node runs a0 (priority 0, created ``running_created``); a1 waits."""
    return [
        node("n0"),
        cluster_queue("cq-a", 8, {"withinClusterQueue": within}),
        local_queue("team-a", "cq-a"),
        kueue_pod("a0", "team-a", node_name="n0", created=running_created),
        kueue_pod("a1", "team-a", priority=a_priority, created="2025-03-03T15:10:00Z"),
    ]


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "kueue_like"])
@pytest.mark.parametrize(
    ("within", "priority", "running_created", "preempts"),
    [
        ("LowerPriority", 10, "2025-03-03T15:00:00Z", True),
        ("LowerPriority", 0, "2025-03-03T15:20:00Z", False),
        ("Never", 10, "2025-03-03T15:00:00Z", False),
        ("LowerOrNewerEqualPriority", 0, "2025-03-03T15:20:00Z", True),
        ("LowerOrNewerEqualPriority", 0, "2025-03-03T15:00:00Z", False),
    ],
    ids=["lower-higher", "lower-equal", "never", "newer-equal", "older-equal"],
)
def test_kueue_within_cluster_queue(
    solver: str, within: str, priority: int, running_created: str, preempts: bool
) -> None:
    """Kueue ``withinClusterQueue``: LowerPriority preempts lower priorities of the own queue,
    Never nothing, LowerOrNewerEqualPriority also equal priorities admitted after the
    preemptor was created."""
    plan = solved(imported(_kueue_own_queue(within, priority, running_created)), solver)
    assert outcome(plan) == ((["a1"], ["a0"]) if preempts else ([], []))


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "kueue_like"])
@pytest.mark.parametrize(("lending", "borrowed"), [(None, 2), (8, 1), (0, 0)], ids=["unset", "half", "none"])
def test_kueue_lending_limit(solver: str, lending: int | None, borrowed: int) -> None:
    """Kueue ``lendingLimit``: idle cq-a (nominal 16) lends at most that much to cq-b (nominal
    0), whose three 8-GPU workloads wait on four empty nodes; 0 lends nothing."""
    extra = {} if lending is None else {"lendingLimit": lending}
    objects = [
        *(node(f"n{i}") for i in range(4)),
        cluster_queue("cq-a", 16, None, **extra),
        cluster_queue("cq-b", 0),
        local_queue("team-b", "cq-b"),
        *(kueue_pod(f"b{i}", "team-b", created=f"2025-03-03T15:0{i}:00Z") for i in range(3)),
    ]
    imp = imported(objects)
    queue = next(q for q in imp.round.queues if q.name == "cq-a")
    assert queue.lending_limit == ({} if lending is None else {"gpu": 1000 * lending})
    assert len(solved(imp, solver).admitted) == borrowed


def test_kueue_lending_limit_above_the_nominal_is_an_error_on_its_path() -> None:
    """Kueue's webhook rejects lendingLimit > nominalQuota; so does the import, naming it."""
    with pytest.raises(gangopt.errors.InputError) as info:
        imported([node("n0"), cluster_queue("cq-a", 8, None, lendingLimit=9)])
    assert [(p.path, p.message) for p in info.value.problems] == [
        (
            "items[1] (ClusterQueue cq-a).spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            "must be less than or equal to the nominalQuota",
        )
    ]


def test_kueue_lending_limit_sums_over_flavors_and_warns_about_them() -> None:
    """Two flavors of one resource: their quotas are summed (warned: gangopt has no flavors);
    a flavor without lendingLimit lends all of its quota, so only the other keeps some back."""
    queue = cluster_queue("cq-a", 8, None, lendingLimit=2)
    flavors = queue["spec"]["resourceGroups"][0]["flavors"]
    flavors.append({"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]})
    imp = imported([node("n0"), queue])
    cq = next(q for q in imp.round.queues if q.name == "cq-a")
    assert (cq.nominal, cq.lending_limit) == ({"gpu": 16_000}, {"gpu": 10_000})
    assert any("gpu quotas of flavors h100, a100 summed" in w for w in imp.warnings), imp.warnings
    alone = imported([node("n0"), cluster_queue("solo", 8, None, lendingLimit=2) | {}])
    assert not any("summed" in w for w in alone.warnings)


# ----------------------------------------------------------------------------- Koordinator


def elastic_quota(name: str, low: int, high: int) -> Json:
    """An ElasticQuota of namespace ``name`` (min ``low``, max ``high`` GPUs) under the root."""
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": name},
        "spec": {"min": {"nvidia.com/gpu": low}, "max": {"nvidia.com/gpu": high}},
    }


def koord_pod(name: str, quota: str, **kw: Any) -> Json:
    return pod(name, ns=quota, labels={"quota.scheduling.koordinator.sh/name": quota}, **kw)


KOORD_CASES: list[tuple[str, list[Json], tuple[list[str], int]]] = [
    (
        # quota revoke: b uses 16 of min 8 (borrowing a's idle min); a's demand within its
        # min claims it back at equal priority: one of b's pods is revoked
        "revoke-borrowed-quota",
        [
            node("n0"),
            node("n1"),
            elastic_quota("qa", 8, 16),
            elastic_quota("qb", 8, 16),
            koord_pod("b1", "qb", node_name="n0"),
            koord_pod("b2", "qb", node_name="n1"),
            koord_pod("a1", "qa", created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 1),
    ),
    (
        # no cross-quota preemption: b runs within its min; a higher-priority pod of a waits
        "no-cross-quota-preemption",
        [
            node("n0"),
            elastic_quota("qa", 8, 16),
            elastic_quota("qb", 8, 16),
            koord_pod("b1", "qb", node_name="n0"),
            koord_pod("a1", "qa", priority=1000),
        ],
        ([], 0),
    ),
    (
        # priorities are compared inside a quota: a's higher-priority pod preempts a's own
        "preemption-within-the-quota",
        [
            node("n0"),
            elastic_quota("qa", 8, 16),
            koord_pod("a0", "qa", node_name="n0"),
            koord_pod("a1", "qa", priority=1000, created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 1),
    ),
    (
        # max caps the quota even with idle nodes
        "max-caps",
        [
            *(node(f"n{i}") for i in range(3)),
            elastic_quota("qa", 0, 8),
            koord_pod("a1", "qa"),
            koord_pod("a2", "qa", created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 0),
    ),
    (
        # min is lent while idle: a borrows b's idle min up to its max
        "idle-min-is-lent",
        [
            node("n0"),
            node("n1"),
            elastic_quota("qa", 8, 16),
            elastic_quota("qb", 8, 16),
            koord_pod("a1", "qa"),
            koord_pod("a2", "qa", created="2025-03-03T15:10:00Z"),
        ],
        (["a1", "a2"], 0),
    ),
]


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in KOORD_CASES], ids=[c[0] for c in KOORD_CASES])
def test_koordinator_elastic_quota(solver: str, objects: list[Json], expected: tuple[list[str], int]) -> None:
    """Koordinator's ElasticQuota as imported: min is a guarantee (revoke), max a cap, and
    priorities reach only inside a quota."""
    plan = solved(imported(objects), solver)
    admitted, evicted = outcome(plan)
    assert (admitted, len(evicted)) == expected


# ----------------------------------------------------------------------------- Volcano


def volcano_queue(name: str, weight: int = 1, **spec: Any) -> Json:
    """A Volcano Queue; ``spec``: capability, deserved, guarantee, reclaimable (GPU counts for
    the resource lists)."""
    body: Json = {"weight": weight, "reclaimable": spec.pop("reclaimable", True)}
    for key in ("capability", "deserved"):
        if key in spec:
            body[key] = {"nvidia.com/gpu": spec.pop(key)}
    if "guarantee" in spec:
        body["guarantee"] = {"resource": {"nvidia.com/gpu": spec.pop("guarantee")}}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": body}


def volcano_job(
    name: str, queue: str, pods: int = 1, *, gpus: int = 8, nodes: list[str] | None = None, **kw: Any
) -> list[Json]:
    """A Volcano PodGroup (minMember ``pods``) in ``queue`` and its pods, running on ``nodes``
    or pending."""
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": kw.get("created", "2025-03-03T15:00:00Z"),
        },
        "spec": {"minMember": pods, "queue": queue},
    }
    members = [
        pod(
            f"{name}-{i}",
            gpus=gpus,
            node_name=nodes[i] if nodes else None,
            annotations={"scheduling.k8s.io/group-name": name},
            **kw,
        )
        for i in range(pods)
    ]
    return [group, *members]


def _b_holds_four_nodes(qa: Json, qb: Json) -> list[Json]:
    """Four 4-GPU nodes, each running a one-pod job of qb; qa's a1 (two 4-GPU pods) waits."""
    return [
        *(node(f"n{i}", gpus=4) for i in range(4)),
        qa,
        qb,
        *(x for i in range(4) for x in volcano_job(f"b{i}", "qb", gpus=4, nodes=[f"n{i}"])),
        *volcano_job("a1", "qa", 2, gpus=4, created="2025-03-03T15:10:00Z"),
    ]


VOLCANO_CASES: list[tuple[str, list[Json], tuple[list[str], int]]] = [
    (
        # proportion: equal weights deserve 8 GPUs each; reclaim takes back what b uses above
        # its deserved share for a, below its own, at equal priority
        "reclaim-above-deserved",
        [
            node("n0"),
            node("n1"),
            volcano_queue("qa"),
            volcano_queue("qb"),
            *volcano_job("b1", "qb", nodes=["n0"]),
            *volcano_job("b2", "qb", nodes=["n1"], created="2025-03-03T15:05:00Z"),
            *volcano_job("a1", "qa", created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 1),
    ),
    (
        # weight 3 deserves 12 of 16 GPUs: a takes 8 back from b (b keeps its 4 and more)
        "weight-3-reclaims",
        _b_holds_four_nodes(volcano_queue("qa", weight=3), volcano_queue("qb", weight=1)),
        (["a1"], 2),
    ),
    (
        # weight 1 of 4 deserves 4 GPUs: a1's 8 would put a above its share, so no reclaim
        "weight-1-does-not",
        _b_holds_four_nodes(volcano_queue("qa", weight=1), volcano_queue("qb", weight=3)),
        ([], 0),
    ),
    (
        # the capacity plugin's deserved, set on the queue, does the same as weight 3:1
        "deserved-field",
        _b_holds_four_nodes(volcano_queue("qa", deserved=12), volcano_queue("qb", deserved=4)),
        (["a1"], 2),
    ),
    (
        # capability is a hard cap, idle nodes or not
        "capability-caps",
        [
            *(node(f"n{i}") for i in range(3)),
            volcano_queue("qa", capability=8),
            *volcano_job("a1", "qa"),
            *volcano_job("a2", "qa", created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 0),
    ),
    (
        # capability caps a deserved share set above it (warned)
        "deserved-above-capability",
        [
            *(node(f"n{i}") for i in range(3)),
            volcano_queue("qa", deserved=24, capability=8),
            *volcano_job("a1", "qa"),
            *volcano_job("a2", "qa", created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 0),
    ),
    (
        # guarantee is reserved for its queue: idle a lends b none of its 8 guaranteed GPUs
        "guarantee-not-lent",
        [
            node("n0"),
            node("n1"),
            volcano_queue("qa", guarantee=8),
            volcano_queue("qb"),
            *volcano_job("b1", "qb"),
            *volcano_job("b2", "qb", created="2025-03-03T15:10:00Z"),
        ],
        (["b1"], 0),
    ),
    (
        # without it, idle a's deserved share is lent
        "deserved-lent-when-idle",
        [
            node("n0"),
            node("n1"),
            volcano_queue("qa"),
            volcano_queue("qb"),
            *volcano_job("b1", "qb"),
            *volcano_job("b2", "qb", created="2025-03-03T15:10:00Z"),
        ],
        (["b1", "b2"], 0),
    ),
    (
        # preempt stays inside a queue: a's higher priority does not reach b within its share
        "no-cross-queue-preemption",
        [
            node("n0"),
            node("n1"),
            volcano_queue("qa"),
            volcano_queue("qb"),
            *volcano_job("b1", "qb", nodes=["n0"]),
            *volcano_job("a0", "qa", nodes=["n1"]),
            *volcano_job("a1", "qa", priority=1000, created="2025-03-03T15:10:00Z"),
        ],
        (["a1"], 1),  # a1 takes a0's place: preempt within the queue, by priority
    ),
]


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in VOLCANO_CASES], ids=[c[0] for c in VOLCANO_CASES])
def test_volcano_queue(solver: str, objects: list[Json], expected: tuple[list[str], int]) -> None:
    """Volcano's Queue as imported: deserved shares by weight (proportion) or ``deserved``
    (capacity), reclaim of what a queue uses above its share, ``capability`` a cap,
    ``guarantee`` not lent, and priority preemption inside a queue only."""
    plan = solved(imported(objects), solver)
    admitted, evicted = outcome(plan)
    assert (admitted, len(evicted)) == expected
    assert set(evicted) <= {"a0", "b0", "b1", "b2", "b3"}
    if any(o["metadata"]["name"] == "a0" for o in objects):  # b1 is within its share: never a victim
        assert evicted == ["a0"]


def test_what_the_import_cannot_map_is_warned_precisely() -> None:
    """A ClusterQueue's lendingLimit without a cohort (Kueue's webhook wants it nil: there is
    no one to lend to) is warned by name, and the round still loads."""
    lone = cluster_queue("lone", 8, None, lendingLimit=2)
    del lone["spec"]["cohort"]
    imp = imported([node("n0"), lone])
    queues = {q.name: q for q in imp.round.queues}
    assert queues["lone"].lending_limit == {} and queues["lone"].cohort is None
    assert any(w.startswith("ClusterQueue lone: lendingLimit ignored") for w in imp.warnings), imp.warnings


def _koordinator_tree(pending: int) -> list[Json]:
    """Koordinator's quota tree on four 8-GPU nodes: parent quota org (min 16, max 24) holds
    team-a and team-b (min 8 each; team-a max 32); other (min 0, max 32) is idle at the root.
    team-a has ``pending`` 8-GPU pods waiting."""
    org = elastic_quota("org", 16, 24)
    org["metadata"]["labels"] = {"quota.scheduling.koordinator.sh/is-parent": "true"}
    teams = [elastic_quota("team-a", 8, 32), elastic_quota("team-b", 8, 16)]
    for team in teams:
        team["metadata"]["labels"] = {"quota.scheduling.koordinator.sh/parent": "org"}
    return [
        *(node(f"n{i}") for i in range(4)),
        org,
        *teams,
        elastic_quota("other", 0, 32),
        *(koord_pod(f"a{i}", "team-a", created=f"2025-03-03T15:0{i}:00Z") for i in range(pending)),
    ]


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "koordinator_like", "kueue_like"])
def test_koordinator_parent_quota_bounds_its_subtree(solver: str) -> None:
    """Koordinator's quota tree: a parent quota's max caps its children together (team-a's 32
    stops at org's 24, the cluster has 32 free), and its min guarantees them more than their own
    mins (16, plus 8 borrowed from the idle root: team-a runs 24, above the 16 of the children's
    mins that bounded it when parent quotas were queues)."""
    imp = imported(_koordinator_tree(4))
    cohorts = {c.name: c for c in imp.round.cohorts}
    assert (cohorts["org"].parent, cohorts["org"].nominal, cohorts["org"].borrowing_limit) == (
        "koordinator-root",
        {"gpu": 0},
        {"gpu": 8000},
    )
    assert "org" not in {q.name for q in imp.round.queues}
    assert len(solved(imp, solver).admitted) == 3


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "volcano_like"])
def test_volcano_reclaimable_false_keeps_what_the_queue_uses_above_its_share(solver: str) -> None:
    """``reclaimable: false`` on qb (the reclaim-above-deserved round): Volcano's reclaim action
    skips the queue, so a1 waits and nothing is evicted; qb reclaimable, a1 starts (that case in
    VOLCANO_CASES)."""
    objects = [o for o in next(c[1] for c in VOLCANO_CASES if c[0] == "reclaim-above-deserved")]
    objects = [
        volcano_queue("qb", reclaimable=False) if o.get("kind") == "Queue" and o["metadata"]["name"] == "qb" else o
        for o in objects
    ]
    imp = imported(objects)
    assert not any("reclaimable" in w for w in imp.warnings), imp.warnings
    assert {q.name: q.reclaimable for q in imp.round.queues} == {"qa": True, "qb": False}
    plan = solved(imp, solver)
    assert outcome(plan) == ([], [])
