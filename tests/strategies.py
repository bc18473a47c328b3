"""Hypothesis strategies: random but valid rounds that exercise every feature at small size.

Small on purpose (≤ 8 nodes, ≤ 6 pending gangs): CP-SAT proves optimality on these in
milliseconds, so the property tests can compare against the exact optimum and run hundreds
of examples in CI time.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from gangopt.schema import Round

GPU_SIZES = [1, 2, 4, 8]


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
        if draw(st.integers(0, 9)) == 0:
            node["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
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
            {"name": "team-b", "cohort": "all", "nominal": {"gpu": draw(st.integers(4, 24))}},
        ]
    return Round.model_validate(data)


def _running(
    draw: st.DrawFn, i: int, nodes: list[dict[str, Any]], free: list[dict[str, int]], queues: list[str]
) -> dict[str, Any] | None:
    gpu = draw(st.sampled_from(GPU_SIZES))
    cpu = draw(st.sampled_from([1, 2, 4]))
    want = draw(st.integers(1, 3))
    pods = []
    for j in range(want):
        options = [k for k, f in enumerate(free) if f["gpu"] >= gpu and f["cpu"] >= cpu]
        if not options:
            break
        k = draw(st.sampled_from(options))
        free[k]["gpu"] -= gpu
        free[k]["cpu"] -= cpu
        pods.append({"name": f"r{i}-{j}", "node": nodes[k]["name"]})
    if not pods:
        return None
    elastic = len(pods) > 1 and draw(st.booleans())
    replicas = len(pods) + draw(st.integers(0, 2))
    role: dict[str, Any] = {"replicas": replicas, "requests": {"gpu": gpu, "cpu": cpu}}
    if elastic or replicas > len(pods):
        role["min_replicas"] = draw(st.integers(1, len(pods)))
    return {
        "name": f"run{i}",
        "queue": draw(st.sampled_from(queues)),
        "priority": draw(st.integers(0, 3)),
        "preemptible": draw(st.sampled_from([True, True, False])),
        "seconds_since_checkpoint": draw(st.sampled_from([0, 600, 3600])),
        "roles": [role],
        "pods": pods,
    }


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
        if draw(st.integers(0, 4)) == 0:
            role["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
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
