"""Hypothesis strategies: random but valid rounds that exercise every feature at small size.

Small on purpose (≤ 8 nodes, ≤ 6 pending gangs): CP-SAT proves optimality on these in
milliseconds, so the property tests can compare against the exact optimum and run hundreds
of examples in CI time.

Features drawn: racks and blocks; cordoned nodes; node labels (``gpu.model`` always, ``spot``
on some nodes); taints of every effect (``NoSchedule``, ``NoExecute``, ``PreferNoSchedule``)
with two values; running gangs of one or two roles (a CPU-only ``ps`` role beside the
workers), elastic or not, with a required or preferred topology level (a required level
holds for the pods already placed); pending gangs with roles, minimums, node selectors,
node affinity (``In``/``NotIn``/``Exists``/``DoesNotExist``), tolerations (``Exists`` or
``Equal`` with a value, always with a key, some for one effect only), topology requests,
deadlines and groups; queues in a cohort, or one queue on its own.
"""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from gangopt.schema import BorrowWithinCohort, QueuePreemption, Round


def examples(n: int) -> int:
    """``n`` examples under the default profile (100 examples), scaled with the loaded profile:
    ``nightly`` (2,000) runs 20 · n, ``quick`` (10) n / 10. Explicit ``max_examples`` in
    ``@settings`` would otherwise override every profile."""
    return max(1, n * settings().max_examples // 100)


GPU_SIZES = [1, 2, 4, 8]
TAINT_EFFECTS = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
AFFINITY = [
    {"key": "gpu.model", "operator": "In", "values": ["A100"]},
    {"key": "gpu.model", "operator": "NotIn", "values": ["H100"]},
    {"key": "spot", "operator": "Exists"},
    {"key": "spot", "operator": "DoesNotExist"},
    {"key": "gpu.model", "operator": "In", "values": ["A100", "H100"]},
]
TOLERATIONS = [
    {"key": "dedicated", "operator": "Exists"},
    {"key": "dedicated", "operator": "Equal", "value": "infra"},
    {"key": "dedicated", "operator": "Equal", "value": "batch"},
    {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
    {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
]


@st.composite
def rounds(draw: st.DrawFn, max_nodes: int = 8, max_pending: int = 6, max_running: int = 4) -> Round:
    """A random round: racks of two nodes, blocks of two racks, mixed priorities, preemptible
    and elastic running gangs, pending gangs with roles, topology, groups and quotas."""
    n_nodes = draw(st.integers(2, max_nodes))
    nodes: list[dict[str, Any]] = []
    free: list[dict[str, int]] = []
    for i in range(n_nodes):
        gpus = draw(st.sampled_from([4, 8, 8]))
        cpu = draw(st.sampled_from([16, 32, 64]))
        node: dict[str, Any] = {
            "name": f"n{i}",
            "capacity": {"gpu": gpus, "cpu": cpu, "memory": "512Gi"},
            "labels": {"gpu.model": draw(st.sampled_from(["A100", "H100"]))},
            "topology": {"block": f"b{i // 4}", "rack": f"r{i // 2}"},
        }
        if draw(st.integers(0, 3)) == 0:
            node["labels"]["spot"] = "true"
        if draw(st.integers(0, 6)) == 0:
            effect = draw(st.sampled_from(TAINT_EFFECTS))
            value = draw(st.sampled_from(["infra", "infra", "batch"]))
            node["taints"] = [{"key": "dedicated", "value": value, "effect": effect}]
        if draw(st.integers(0, 14)) == 0:
            node["schedulable"] = False
        nodes.append(node)
        free.append({"gpu": gpus, "cpu": cpu})
    use_queues = draw(st.booleans())
    queue_names = ["team-a", "team-b"] if use_queues else ["default"]
    running = [_running(draw, i, nodes, free, queue_names) for i in range(draw(st.integers(0, max_running)))]
    running = [r for r in running if r is not None]
    n_pending = draw(st.integers(1, max_pending))
    pending = [_pending(draw, i, queue_names) for i in range(n_pending)]
    if n_pending >= 2 and draw(st.integers(0, 4)) == 0:
        pending[0]["group"] = "grp"
        pending[1]["group"] = "grp"
    data: dict[str, Any] = {
        "cluster": {"topology_levels": ["block", "rack"], "nodes": nodes},
        "running": running,
        "pending": pending,
        "policy": {
            "time_limit": 10,
            "seed": draw(st.integers(0, 3)),
            "preemption": draw(st.sampled_from([True, True, False])),
            "now": 7200,
        },
    }
    if use_queues:
        data["queues"] = [
            {
                "name": "team-a",
                "cohort": "all",
                "nominal": {"gpu": draw(st.integers(4, 24))},
                "borrowing_limit": {"gpu": 8},
            },
            # team-b alone (no cohort): it never borrows and never lends
            {
                "name": "team-b",
                "cohort": draw(st.sampled_from(["all", "all", None])),
                "nominal": {"gpu": draw(st.integers(4, 24))},
            },
        ]
    return Round.model_validate(data)


def _running(
    draw: st.DrawFn, i: int, nodes: list[dict[str, Any]], free: list[dict[str, int]], queues: list[str]
) -> dict[str, Any] | None:
    gpu = draw(st.sampled_from(GPU_SIZES))
    cpu = draw(st.sampled_from([1, 2, 4]))
    want = draw(st.integers(1, 3))
    topology = draw(st.sampled_from([None, None, None, "required", "preferred"]))
    level = draw(st.sampled_from(["rack", "block", "node"]))
    domain: str | None = None  # a required level holds for the pods already placed

    def place(name: str, role: str, need_gpu: int, need_cpu: int) -> bool:
        nonlocal domain
        options = [k for k, f in enumerate(free) if f["gpu"] >= need_gpu and f["cpu"] >= need_cpu]
        if topology == "required" and domain is not None:
            options = [k for k in options if _domain(nodes[k], level) == domain]
        if not options:
            return False
        k = draw(st.sampled_from(options))
        free[k]["gpu"] -= need_gpu
        free[k]["cpu"] -= need_cpu
        domain = _domain(nodes[k], level)
        pods.append({"name": name, "role": role, "node": nodes[k]["name"]})
        return True

    pods: list[dict[str, Any]] = []
    for j in range(want):
        if not place(f"r{i}-{j}", "worker", gpu, cpu):
            break
    if not pods:
        return None
    workers = len(pods)
    elastic = workers > 1 and draw(st.booleans())
    replicas = workers + draw(st.integers(0, 2))
    role: dict[str, Any] = {"name": "worker", "replicas": replicas, "requests": {"gpu": gpu, "cpu": cpu}}
    if elastic or replicas > workers:
        role["min_replicas"] = draw(st.integers(1, workers))
    roles = [role]
    if draw(st.integers(0, 3)) == 0 and place(f"r{i}-ps", "ps", 0, 1):
        # a CPU-only parameter server: one running, maybe room for a second
        ps: dict[str, Any] = {"name": "ps", "replicas": draw(st.integers(1, 2)), "requests": {"cpu": 1}}
        if ps["replicas"] > 1:
            ps["min_replicas"] = 1
        roles.append(ps)
    gang: dict[str, Any] = {
        "name": f"run{i}",
        "queue": draw(st.sampled_from(queues)),
        "priority": draw(st.integers(0, 3)),
        "preemptible": draw(st.sampled_from([True, True, False])),
        "seconds_since_checkpoint": draw(st.sampled_from([0, 600, 3600])),
        "roles": roles,
        "pods": pods,
    }
    if topology is not None:
        gang["topology"] = {topology: level}
    return gang


def _domain(node: dict[str, Any], level: str) -> str:
    return str(node["name"] if level == "node" else node["topology"][level])


def _pending(draw: st.DrawFn, i: int, queues: list[str]) -> dict[str, Any]:
    roles = []
    for r in range(draw(st.integers(1, 2))):
        replicas = draw(st.integers(1, 4))
        role: dict[str, Any] = {
            "name": f"role{r}",
            "replicas": replicas,
            "requests": {"gpu": draw(st.sampled_from([0, *GPU_SIZES])), "cpu": draw(st.sampled_from([1, 2, 8]))},
        }
        if draw(st.integers(0, 3)) == 0:
            role["min_replicas"] = draw(st.integers(1 if r == 0 else 0, replicas))
        if draw(st.integers(0, 5)) == 0:
            role["node_selector"] = {"gpu.model": draw(st.sampled_from(["A100", "H100"]))}
        if draw(st.integers(0, 5)) == 0:
            role["node_affinity"] = [draw(st.sampled_from(AFFINITY))]
        if draw(st.integers(0, 3)) == 0:
            role["tolerations"] = draw(st.lists(st.sampled_from(TOLERATIONS), min_size=1, max_size=2, unique_by=str))
        roles.append(role)
    gang: dict[str, Any] = {
        "name": f"job{i}",
        "queue": draw(st.sampled_from(queues)),
        "priority": draw(st.integers(0, 4)),
        "submit_time": draw(st.sampled_from([0, 3600, 7000])),
        "roles": roles,
    }
    if draw(st.integers(0, 4)) == 0:
        gang["deadline"] = draw(st.sampled_from([7000, 9000]))
    total_min = sum(r.get("min_replicas", r["replicas"]) for r in roles)
    total = sum(r["replicas"] for r in roles)
    topology = draw(st.sampled_from([None, None, "required", "preferred", "slice"]))
    if topology == "required":
        gang["topology"] = {"required": draw(st.sampled_from(["rack", "block", "node"]))}
    elif topology == "preferred":
        gang["topology"] = {"preferred": draw(st.sampled_from(["rack", "block"]))}
    elif topology == "slice" and len(roles) == 1:
        roles[0]["replicas"] = 2 * roles[0]["replicas"]
        roles[0].pop("min_replicas", None)
        gang["topology"] = {"slice_level": draw(st.sampled_from(["rack", "node"])), "slice_size": 2}
    elif total_min < total and draw(st.booleans()):
        gang["min_members"] = max(1, total_min)
    return gang


POLICIES = st.builds(
    QueuePreemption,
    within_queue=st.sampled_from(["never", "lower_priority", "lower_or_newer_equal_priority"]),
    reclaim_within_cohort=st.sampled_from(["never", "lower_priority", "any"]),
    borrow_within_cohort=st.builds(
        BorrowWithinCohort,
        policy=st.sampled_from(["never", "lower_priority"]),
        max_priority_threshold=st.sampled_from([None, 0, 5]),
    ),
    other_queues=st.sampled_from(["never", "lower_priority"]),
)
"""A queue's preemption policy (``Queue.preemption``), every combination of the knobs."""


@st.composite
def fragmented_rounds(draw: st.DrawFn, nodes: tuple[int, int], gangs: tuple[int, int]) -> Round:
    """A fragmented round (:func:`tests.builders.fragmented_round`) of a drawn size within
    ``nodes`` and ``gangs`` (inclusive), busy 0.6, 0.75 or 0.9, seed and running mix (few
    large running gangs, or many single-GPU ones): larger than :func:`rounds`, for the slot
    bounds and the slot placer."""
    from tests.builders import fragmented_round

    return fragmented_round(
        draw(st.integers(*nodes)),
        draw(st.integers(*gangs)),
        draw(st.sampled_from([0.6, 0.75, 0.9])),
        draw(st.integers(0, 10_000)),
        running_mix=draw(st.sampled_from(["tilted", "jobs"])),
    )


@st.composite
def cohort_rounds(draw: st.DrawFn, max_nodes: int = 4, max_pending: int = 4, cohort_quotas: bool = False) -> Round:
    """A full small cluster shared by two or three queues of one cohort with small nominals and
    random preemption policies (:data:`POLICIES`): running gangs of one to three 2-, 4- or
    8-GPU pods (elastic or sliced in racks sometimes) fill the nodes, most of them in queue
    ``q0`` (so it borrows, and some were submitted after waiting gangs of their queue; the queues
    sit in one cohort, or in sibling cohorts of one tree, which reads the same), pending
    gangs come from every queue. Cohort reclaims are on the
    table in most rounds, which :func:`rounds` almost never draws (0 of 64 greedy plans there
    reclaimed; measured while writing issue 15's CP-SAT reclaim encoding).

    ``cohort_quotas``: always a tree (a team cohort's parent is the root or an earlier team,
    so trees are up to four levels deep), whose cohorts hold quota of their own, borrowing
    and lending limits and fair-share weights at random, and whose queues keep part of their
    nominal with a lending limit, one in three (docs/rules.md, rule 6)."""
    n_nodes = draw(st.integers(2, max_nodes))
    names = [f"q{i}" for i in range(draw(st.integers(2, 3)))]
    nodes = [
        {"name": f"n{i}", "capacity": {"gpu": 8, "cpu": 64}, "topology": {"rack": f"r{i // 2}"}} for i in range(n_nodes)
    ]
    free = [8] * n_nodes
    running: list[dict[str, Any]] = []
    for i in range(2 * n_nodes):
        gpu = draw(st.sampled_from([2, 4, 8]))
        want = draw(st.integers(1, 3))
        pods: list[dict[str, Any]] = []
        for j in range(want):
            options = [k for k, f in enumerate(free) if f >= gpu]
            if not options:
                break
            k = draw(st.sampled_from(options))
            free[k] -= gpu
            pods.append({"name": f"r{i}-{j}", "role": "worker", "node": f"n{k}"})
        if not pods:
            continue
        role: dict[str, Any] = {"name": "worker", "replicas": len(pods), "requests": {"gpu": gpu, "cpu": 1}}
        if len(pods) > 1 and draw(st.booleans()):
            role["min_replicas"] = 1
        running.append(
            {
                "name": f"run{i}",
                "queue": draw(st.sampled_from(["q0", "q0", *names])),
                "priority": draw(st.integers(0, 2)),
                "preemptible": draw(st.sampled_from([True, True, True, False])),
                "seconds_since_checkpoint": draw(st.sampled_from([0, 600])),
                "submit_time": draw(st.sampled_from([None, 0, 1800, 3600])),
                "roles": [role],
                "pods": pods,
            }
        )
    pending = []
    for i in range(draw(st.integers(1, max_pending))):
        gang: dict[str, Any] = {
            "name": f"job{i}",
            "queue": draw(st.sampled_from(names)),
            "priority": draw(st.integers(0, 2)),
            "submit_time": draw(st.sampled_from([0, 3600])),
            "roles": [
                {
                    "name": "worker",
                    "replicas": draw(st.integers(1, 2)),
                    "requests": {"gpu": draw(st.sampled_from([2, 4, 8])), "cpu": 1},
                }
            ],
        }
        if draw(st.integers(0, 4)) == 0:
            gang["topology"] = {"required": "rack"}
        pending.append(gang)
    total = 8 * n_nodes
    tree = cohort_quotas or draw(st.booleans())  # sibling cohorts under one root: one cohort all the same
    queues = [
        {
            "name": q,
            "cohort": f"team{i}" if tree else "all",
            "nominal": {"gpu": draw(st.integers(0, total // len(names)))},
            "preemption": draw(POLICIES).model_dump(),
        }
        for i, q in enumerate(names)
    ]
    data: dict[str, Any] = {
        "cluster": {"topology_levels": ["rack"], "nodes": nodes},
        "running": running,
        "pending": pending,
        "queues": queues,
        "policy": {"time_limit": 10, "seed": 0, "now": 7200},
    }
    if tree:
        data["cohorts"] = [{"name": "all"}, *({"name": f"team{i}", "parent": "all"} for i in range(len(names)))]
    if cohort_quotas:
        small = st.integers(0, 8)
        for i, cohort in enumerate(data["cohorts"]):
            if i > 1:
                cohort["parent"] = draw(st.sampled_from(["all", *(f"team{j}" for j in range(i - 1))]))
            if draw(st.booleans()):
                cohort["nominal"] = {"gpu": draw(small)}
                if i > 0 and draw(st.booleans()):
                    cohort["borrowing_limit"] = {"gpu": draw(small)}
                if i > 0 and draw(st.booleans()):
                    cohort["lending_limit"] = {"gpu": draw(small)}
            if i > 0 and draw(st.booleans()):
                cohort["weight"] = draw(st.sampled_from([0.5, 1.0, 2.0]))
        for q in queues:  # ClusterQueue lendingLimit: keep part of the nominal for the queue
            if draw(st.integers(0, 2)) == 0:
                q["lending_limit"] = {"gpu": draw(st.integers(0, q["nominal"]["gpu"]))}
    return Round.model_validate(data)
