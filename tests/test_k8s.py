"""Kubernetes import and export: each peer's gang form becomes the gang its users expect, broken
manifests are errors naming the object and field, and a plan comes back as Bindings, Evictions
and status patches that match it exactly.

Fixtures (tests/fixtures/k8s, see its README) follow each project's documented examples; every
form is imported together with ``cluster.yaml``, a ``kubectl get -o yaml`` List of 8-GPU nodes,
running pods and PriorityClasses.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import gangopt
from gangopt.cli import main
from gangopt.errors import InputError
from gangopt.k8s import Imported, ImportOptions, ObjectRef, export_plan, import_documents, load_documents
from gangopt.k8s.export import REQUEST_ANNOTATION
from gangopt.objective import tree_fractions
from gangopt.quantities import parse_quantity
from gangopt.replay.generate import dump_round
from gangopt.schema import PendingGang, Placement, Plan, Policy, Round, RunningGang, Status

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "k8s"
FORMS = ["scheduler-plugins", "koordinator", "volcano", "kueue", "kep-4671"]
POLICY = Policy(time_limit=10, hard_limit=False)
Json = dict[str, Any]


def docs(*names: str) -> list[Json]:
    return load_documents([FIXTURES / f"{n}.yaml" for n in names])


def imported(*names: str, objects: list[Json] | None = None, **options: Any) -> Imported:
    found = docs(*names) + (objects or [])
    return import_documents(found, ImportOptions(policy=POLICY, **options))


def solved(imp: Imported) -> Plan:
    """The plan for the imported round, checked by the independent validator."""
    plan = gangopt.solve(imp.round)
    assert gangopt.validate(imp.round, plan) == []
    return plan


def pending(imp: Imported, name: str) -> PendingGang:
    return next(g for g in imp.round.pending if g.name == name)


def running(imp: Imported, name: str) -> RunningGang:
    return next(g for g in imp.round.running if g.name == name)


def roles(gang: PendingGang | RunningGang) -> dict[str, tuple[int, int | None]]:
    """role -> (replicas, min_replicas)"""
    return {r.name: (r.replicas, r.min_replicas) for r in gang.roles}


def pod(name: str, *, ns: str = "default", gpus: int = 0, node: str | None = None, **meta: Any) -> Json:
    """A minimal pod, for cases the fixtures do not cover."""
    resources = {"requests": {"cpu": "1"}, **({"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {})}
    spec: Json = {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": "2025-03-03T15:00:00Z", **meta},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def pod_group(name: str, min_member: Any, ns: str = "default") -> Json:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member},
    }


def sp_member(name: str, group: str, **kw: Any) -> Json:
    return pod(name, labels={"scheduling.x-k8s.io/pod-group": group}, **kw)


# ----------------------------------------------------------------------------- the cluster


def test_nodes_keep_allocatable_gpu_cpu_memory_pods_and_mark_taints_and_cordons() -> None:
    imp = imported("cluster")
    nodes = {n.name: n for n in imp.round.cluster.nodes}
    assert len(nodes) == 8
    n1 = nodes["gpu-node-01"]
    assert n1.capacity == {"cpu": 191_500, "gpu": 8_000, "memory": 2000 * 2**30 * 1000, "pods": 110_000}
    assert "ephemeral-storage" not in n1.capacity  # no pod requests it
    assert n1.labels["cloud.provider.com/topology-rack"] == "r1"
    assert [(t.key, t.value, t.effect) for t in nodes["gpu-node-07"].taints] == [
        ("dedicated", "inference", "NoSchedule")
    ]
    assert nodes["gpu-node-08"].schedulable is False
    assert all(n.schedulable for name, n in nodes.items() if name != "gpu-node-08")
    assert imp.round.cluster.topology_levels == ["zone"]


def test_user_levels_follow_zone_and_qualify_reused_values() -> None:
    imp = imported(
        "cluster", levels=[("block", "cloud.provider.com/topology-block"), ("rack", "cloud.provider.com/topology-rack")]
    )
    assert imp.round.cluster.topology_levels == ["zone", "block", "rack"]
    node = next(n for n in imp.round.cluster.nodes if n.name == "gpu-node-07")
    assert node.topology == {"zone": "us-east-1a", "block": "b2", "rack": "r4"}


def test_running_pods_become_running_gangs_named_by_namespace() -> None:
    imp = imported("cluster")
    old = running(imp, "research/old-train")
    assert [(p.name, p.node) for p in old.pods] == [
        ("research/old-train-worker-0", "gpu-node-03"),
        ("research/old-train-worker-1", "gpu-node-04"),
    ]
    assert old.priority == 10 and old.min_members == 2 and old.preemptible
    assert imp.running_pods["research/old-train-worker-0"] == ObjectRef("v1", "Pod", "research", "old-train-worker-0")
    notebook = running(imp, "default/notebook-7f9c8")
    assert notebook.priority == 100  # the globalDefault PriorityClass
    device_plugin = running(imp, "kube-system/nvidia-device-plugin-daemonset-x7k2p")
    assert not device_plugin.preemptible  # DaemonSet pod, system-node-critical
    names = {g.name for g in [*imp.round.running, *imp.round.pending]}
    assert "default/data-prep-2p9xq" not in names  # Succeeded: uses nothing


def test_unknown_kinds_are_warnings_naming_the_object() -> None:
    imp = imported("cluster")
    assert "Service default/kubernetes: ignored: kind Service (v1) is not read by gangopt" in imp.warnings


# ----------------------------------------------------------------------------- gang forms


def test_scheduler_plugins_pod_group() -> None:
    imp = imported("cluster", "scheduler-plugins")
    gang = pending(imp, "default/nginx")
    assert roles(gang) == {"worker": (4, None)}
    assert gang.min_members == 3 and gang.minimum == 3 and gang.maximum == 4
    assert gang.roles[0].requests == {"cpu": 3000, "memory": 500 * 2**20 * 1000, "pods": 1000}
    assert gang.priority == 100
    assert imp.gang_objects["default/nginx"] == ObjectRef(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", "default", "nginx"
    )
    assert [p.name for p in imp.pending_pods["default/nginx"]["worker"]] == sorted(
        f"nginx-6b4f9c7d8-{s}" for s in ("4jw2m", "8kq7d", "c5n2x", "t9v6p")
    )
    assert any(w.startswith("Deployment default/nginx: ignored") for w in imp.warnings)


def test_koordinator_annotations_pod_group_gang_group_and_elastic_quota() -> None:
    imp = imported("cluster", "koordinator")
    example = pending(imp, "default/gang-example")
    assert roles(example) == {"worker": (2, None)} and example.min_members == 2
    assert example.roles[0].requests["gpu"] == 2000
    assert example.queue == "quota-example"
    a, b = pending(imp, "default/gang-a"), pending(imp, "default/gang-b")
    assert a.group == b.group == "default/gang-a,default/gang-b"
    assert (
        "Pod default/gang-b-0: gang mode NonStrict: gangopt always places a gang all-or-nothing (Strict)"
        in imp.warnings
    )
    pg = pending(imp, "default/gang-example2")
    assert roles(pg) == {"worker": (3, None)} and pg.min_members == 2
    quota = next(q for q in imp.round.queues if q.name == "quota-example")
    assert quota.nominal == {"cpu": 20_000, "memory": 200 * 2**30 * 1000, "gpu": 8000}
    assert quota.borrowing_limit["gpu"] == 8000 and quota.cohort == "koordinator-root"


def test_volcano_pod_group_task_minimums_queue_priority_and_hypernode_topology() -> None:
    imp = imported("cluster", "volcano")
    gang = pending(imp, "research/dist-mnist-3c5e0a8b-6d1f-4e2a-9b7c-1f2e3d4c5b6a")
    assert roles(gang) == {"ps": (1, 1), "worker": (3, 2)}
    assert gang.min_members == 3 and gang.priority == 1000 and gang.queue == "research"
    assert gang.topology is not None and gang.topology.required == "tier1"
    assert imp.round.cluster.topology_levels == ["tier2", "tier1"]
    domains = {n.name: n.topology for n in imp.round.cluster.nodes}
    assert domains["gpu-node-01"] == {"tier2": "s-b1", "tier1": "s-r1"}  # regex member
    assert domains["gpu-node-03"] == {"tier2": "s-b1", "tier1": "s-r2"}  # exact-name members
    assert domains["gpu-node-05"] == {"tier2": "s-b2", "tier1": "s-r3"}  # label member, regex HyperNode member
    queue = next(q for q in imp.round.queues if q.name == "research")
    # Volcano's root queue shares the cluster's 64 GPUs: research alone deserves all, capped at 32
    assert queue.nominal["gpu"] == 32_000 and queue.cohort == "volcano-root" and queue.borrowing_limit["gpu"] == 0


def test_volcano_soft_topology_prefers_the_lowest_tier() -> None:
    """Issue 15: soft mode scores nodes by closeness to the job's hypernode at every tier, and
    ``highestTierAllowed`` bounds hard mode only; it maps to ``preferred`` at the lowest tier
    (tier1), whose charges climb to tier2, so the gang stays in one rack, else one block. It
    was ``preferred: tier2`` (racks free), and a soft request without a tier was dropped."""
    found = docs("cluster", "volcano")
    for obj in found:
        if obj.get("kind") == "PodGroup" and "networkTopology" in obj.get("spec", {}):
            obj["spec"]["networkTopology"] = {"mode": "soft", "highestTierAllowed": 2}
    imp = import_documents(found, ImportOptions(policy=POLICY))
    gang = pending(imp, "research/dist-mnist-3c5e0a8b-6d1f-4e2a-9b7c-1f2e3d4c5b6a")
    assert gang.topology is not None and (gang.topology.required, gang.topology.preferred) == (None, "tier1")
    for obj in found:
        if obj.get("kind") == "PodGroup" and "networkTopology" in obj.get("spec", {}):
            obj["spec"]["networkTopology"] = {"mode": "soft"}
    again = pending(import_documents(found, ImportOptions(policy=POLICY)), gang.name)
    assert again.topology == gang.topology


NETWORK_SPEC = "gang.scheduling.koordinator.sh/network-topology-spec"
KOORD_TOPOLOGY: Json = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "ClusterNetworkTopology",
    "metadata": {"name": "default"},
    "spec": {
        "hierarchy": [
            {"layerName": "nodeLayer", "parentTopologyLayer": "rackLayer"},
            {
                "layerName": "rackLayer",
                "labelKey": "cloud.provider.com/topology-rack",
                "parentTopologyLayer": "blockLayer",
            },
            {"layerName": "blockLayer", "labelKey": "cloud.provider.com/topology-block"},
        ]
    },
}


def test_koordinator_gather_strategy_maps_must_and_prefer_gather() -> None:
    """Issue 15: ``network-topology-spec`` through the ``ClusterNetworkTopology`` (its labels
    become the levels): MustGather at blockLayer -> ``required: block``, PreferGather at
    rackLayer -> ``preferred: rack`` (a required level and a preferred one together); a
    PreferGather alone -> ``preferred``; an unknown layer is a warning. It was ignored."""
    spec = {
        "gatherStrategy": [
            {"layer": "blockLayer", "strategy": "MustGather"},
            {"layer": "rackLayer", "strategy": "PreferGather"},
        ]
    }
    found = [*docs("cluster", "koordinator"), KOORD_TOPOLOGY]
    for obj in found:
        if obj["kind"] == "PodGroup":
            obj["metadata"].setdefault("annotations", {})[NETWORK_SPEC] = json.dumps(spec)
    imp = import_documents(found, ImportOptions(policy=POLICY))
    assert imp.round.cluster.topology_levels == ["zone", "block", "rack"]
    gang = pending(imp, "default/gang-example2")
    assert gang.topology is not None and (gang.topology.required, gang.topology.preferred) == ("block", "rack")
    plan = solved(imp)
    assert gang.name in plan.admitted
    soft = {
        "gatherStrategy": [
            {"layer": "rackLayer", "strategy": "PreferGather"},
            {"layer": "leafLayer", "strategy": "PreferGather"},
        ]
    }
    for obj in found:
        if obj["kind"] == "PodGroup":
            obj["metadata"]["annotations"][NETWORK_SPEC] = json.dumps(soft)
    imp = import_documents(found, ImportOptions(policy=POLICY))
    gang = pending(imp, "default/gang-example2")
    assert gang.topology is not None and (gang.topology.required, gang.topology.preferred) == (None, "rack")
    assert any("layer 'leafLayer' is no level" in w for w in imp.warnings)


def test_kueue_workloads_with_and_without_pods_cluster_queue_and_topology() -> None:
    imp = imported("cluster", "kueue")
    assert imp.round.cluster.topology_levels == ["zone", "block", "rack"]
    tas = pending(imp, "default/job-tas-sample-job-4f2d1")
    assert roles(tas) == {"main": (2, None)}
    assert tas.priority == 1000 and tas.queue == "tas-cluster-queue"
    assert tas.topology is not None and tas.topology.required == "block"
    assert len(imp.pending_pods[tas.name]["main"]) == 2
    elastic = pending(imp, "default/job-elastic-train-9b7c3")
    assert roles(elastic) == {"main": (4, 2)} and elastic.priority == 100
    assert elastic.topology is not None and elastic.topology.preferred == "rack"
    assert imp.pending_pods[elastic.name] == {"main": []}
    assert any(
        w.startswith("Workload default/job-elastic-train-9b7c3: no pods yet") and "Kueue admission" in w
        for w in imp.warnings
    )
    queue = next(q for q in imp.round.queues if q.name == "tas-cluster-queue")
    assert queue.nominal["gpu"] == 32_000 and queue.borrowing_limit == {"gpu": 8000} and queue.cohort == "research"


def test_kueue_fair_sharing_weight_is_the_queue_weight() -> None:
    """Issue 15: ``spec.fairSharing.weight`` (a Quantity) -> ``Queue.weight``; unset stays unset."""
    assert next(q for q in imported("cluster", "kueue").round.queues if q.name == "tas-cluster-queue").weight is None
    found = docs("cluster", "kueue")
    for obj in found:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["fairSharing"] = {"weight": "1500m"}
    imp = import_documents(found, ImportOptions(policy=POLICY))
    assert next(q for q in imp.round.queues if q.name == "tas-cluster-queue").weight == 1.5


def test_kep_4671_workload_gang_policy() -> None:
    imp = imported("cluster", "kep-4671")
    gang = pending(imp, "ns-1/job-1")
    assert roles(gang) == {"worker": (4, None)} and gang.min_members == 3
    assert imp.gang_objects[gang.name].kind == "Workload"


def test_pods_without_a_gang_are_one_pod_gangs() -> None:
    imp = imported("cluster", objects=[pod("solo", gpus=1)])
    gang = pending(imp, "default/solo")
    assert roles(gang) == {"worker": (1, None)}
    assert imp.gang_objects["default/solo"] == ObjectRef("v1", "Pod", "default", "solo")


def test_different_shapes_in_one_gang_are_different_roles() -> None:
    members = [sp_member("a-0", "a", gpus=8), sp_member("a-1", "a", gpus=8), sp_member("a-launcher", "a")]
    imp = imported("cluster", objects=[pod_group("a", 3), *members])
    assert roles(pending(imp, "default/a")) == {"worker": (2, None), "worker-1": (1, None)}


def _partly_bound_gang() -> Imported:
    """PodGroup g (minMember 2) with two pods bound to nodes and a third still pending."""
    members = [
        sp_member("g-0", "g", gpus=8, node="gpu-node-01"),
        sp_member("g-1", "g", gpus=8, node="gpu-node-02"),
        sp_member("g-2", "g", gpus=8),
    ]
    return imported("cluster", objects=[pod_group("g", 2), *members])


def test_partly_bound_gang_runs_and_its_unbound_pods_are_growth() -> None:
    imp = _partly_bound_gang()
    gang = running(imp, "default/g")
    assert roles(gang) == {"worker": (3, None)} and gang.minimum == 2 and gang.maximum == 3
    assert [p.name for p in imp.pending_pods["default/g"]["worker"]] == ["g-2"]


def test_pod_group_with_too_few_pods_waits_outside_the_round() -> None:
    imp = imported("cluster", objects=[pod_group("big", 4), sp_member("big-0", "big")])
    assert "default/big" not in {g.name for g in imp.round.pending}
    assert any(w.startswith("PodGroup default/big: 1 pods exist, fewer than its minimum 4") for w in imp.warnings)


# ----------------------------------------------------------------------------- pod requests


def test_init_containers_sidecars_and_overhead_follow_the_kubernetes_rule() -> None:
    p = pod("init")
    p["spec"]["containers"] = [
        {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
        {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}},
    ]
    p["spec"]["initContainers"] = [
        {"name": "big-cpu", "resources": {"requests": {"cpu": "5"}}},
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        {"name": "big-memory", "resources": {"requests": {"memory": "4Gi"}}},
    ]
    p["spec"]["overhead"] = {"cpu": "250m"}
    imp = imported("cluster", objects=[p])
    requests = pending(imp, "default/init").roles[0].requests
    # cpu: max(2 + 1 containers, 5 init) + 0.25; memory: max(1 + 1 sidecar, 4 + 1 sidecar); gpu from the limit
    assert requests == {"cpu": 5250, "memory": 5 * 2**30 * 1000, "gpu": 1000, "pods": 1000}


def test_priority_class_missing_falls_back_to_global_default_with_a_warning() -> None:
    p = pod("orphan-class")
    p["spec"]["priorityClassName"] = "does-not-exist"
    imp = imported("cluster", objects=[p])
    assert pending(imp, "default/orphan-class").priority == 100
    assert (
        "Pod default/orphan-class: PriorityClass 'does-not-exist' not in the input; priority 100 used" in imp.warnings
    )


def test_node_affinity_selector_and_tolerations_are_kept() -> None:
    p = pod("picky")
    p["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    p["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}]
    p["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "cloud.provider.com/topology-rack", "operator": "In", "values": ["r4"]}
                        ]
                    },
                    {"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]},
                ]
            }
        }
    }
    imp = imported("cluster", objects=[p])
    role = pending(imp, "default/picky").roles[0]
    assert role.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert [(e.key, e.operator, e.values) for e in role.node_affinity] == [
        ("cloud.provider.com/topology-rack", "In", ["r4"])
    ]
    assert [(t.key, t.value, t.effect) for t in role.tolerations] == [("dedicated", "inference", "NoSchedule")]
    assert any("only the first is used" in w and w.startswith("Pod default/picky") for w in imp.warnings)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("fixture", "path", "message"),
    [
        ("bad-quantity", "items[0] (Pod default/trainer-0).spec.containers[0].resources.requests.cpu", "cannot parse"),
        ("bad-missing-node", "items[0] (Pod default/orphan-0).spec.nodeName", "gpu-node-99"),
        ("bad-min-member", "items[0] (PodGroup default/broken).spec.minMember", "non-negative integer"),
        ("bad-unknown-kind", "items[1] (PodGroup default/mystery).apiVersion", "unsupported apiVersion"),
    ],
)
def test_broken_manifests_name_the_object_and_field(fixture: str, path: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        import_documents(docs(fixture))
    assert [p.path for p in caught.value.problems] == [path]
    assert message in caught.value.problems[0].message


def test_cli_import_error_exits_2_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "round.json"
    code = main(["import", "k8s", str(FIXTURES / "cluster.yaml"), str(FIXTURES / "bad-quantity.yaml"), "-o", str(out)])
    assert code == 2 and not out.exists()
    err = capsys.readouterr()
    assert err.out == ""
    assert (
        err.err.startswith("error: items[")
        and "(Pod default/trainer-0).spec.containers[0].resources.requests.cpu: " in err.err
    )


def test_cli_rejects_a_bad_level_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "k8s", str(FIXTURES / "cluster.yaml"), "--level", "rack"]) == 2
    assert "error: --level: expected NAME=LABEL" in capsys.readouterr().err


# ----------------------------------------------------------------------------- determinism, formats


def test_same_input_gives_the_same_round_in_any_order() -> None:
    objects = docs("cluster", "volcano", "kueue")
    first = dump_round(import_documents(objects).round)
    assert dump_round(import_documents(docs("cluster", "volcano", "kueue")).round) == first
    assert dump_round(import_documents(list(reversed(objects))).round) == first


def test_json_and_yaml_inputs_give_the_same_round() -> None:
    objects = docs("cluster", "koordinator")
    as_json = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    as_yaml = yaml.safe_dump_all(objects)
    from_json = import_documents(load_documents(text=as_json))
    from_yaml = import_documents(load_documents(text=as_yaml))
    assert from_json.round == from_yaml.round == import_documents(objects).round
    assert from_json.warnings == from_yaml.warnings


# ----------------------------------------------------------------------------- round trip


def check_export(plan: Plan, imp: Imported, objects: list[Json]) -> None:
    """Every placement has exactly one Binding to its node, of a pod of its gang and role;
    evictions are exactly the preempted pods; every object says which call applies it."""
    bindings = [o for o in objects if o["kind"] == "Binding"]
    pods_of = {
        (p.namespace, p.name): (gang, role)
        for gang, rs in imp.pending_pods.items()
        for role, ps in rs.items()
        for p in ps
    }
    bound = Counter((b["metadata"]["namespace"], b["metadata"]["name"]) for b in bindings)
    assert all(count == 1 for count in bound.values())
    placed_nodes = Counter((p.gang, p.role, p.node) for p in plan.placements if imp.pending_pods[p.gang][p.role])
    binding_nodes = Counter(
        (*pods_of[(b["metadata"]["namespace"], b["metadata"]["name"])], b["target"]["name"]) for b in bindings
    )
    assert binding_nodes == placed_nodes
    evicted = {f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objects if o["kind"] == "Eviction"}
    assert evicted == {p for pre in plan.preemptions for p in pre.pods}
    for o in objects:
        assert o["metadata"]["annotations"][REQUEST_ANNOTATION].split(" ")[0] in ("POST", "PATCH")


@pytest.mark.parametrize("form", FORMS)
def test_round_trip_import_solve_validate_export(form: str) -> None:
    imp = imported("cluster", form)
    plan = solved(imp)
    assert plan.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert gangopt.validate(imp.round, plan) == []
    assert plan.placements
    check_export(plan, imp, export_plan(plan, imp))


@pytest.mark.parametrize("form", ["volcano", "scheduler-plugins", "koordinator"])
def test_an_admitted_pod_group_gets_the_status_its_scheduler_writes(form: str) -> None:
    """Issue 15: a PodGroup the plan admits gets its scheduler's status after the Bindings:
    Volcano ``phase: Running`` with condition ``Scheduled``; scheduler-plugins and Koordinator
    ``phase: Scheduled`` with ``scheduled`` = the pods placed. A gang without a PodGroup, or
    one that waits, gets none of these."""
    imp = imported("cluster", form)
    plan = solved(imp)
    objects = export_plan(plan, imp)
    patches = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "PodGroup" and o["status"].get("phase")
    }
    groups = {
        (ref.namespace, ref.name): gang
        for gang, ref in imp.gang_objects.items()
        if ref.kind == "PodGroup" and gang in plan.admitted
    }
    assert groups and set(patches) == set(groups)
    first_patch = min(i for i, o in enumerate(objects) if o["kind"] == "PodGroup")
    assert all(o["kind"] != "Binding" for o in objects[first_patch:])
    for key, gang in groups.items():
        status = patches[key]["status"]
        n = sum(1 for p in plan.placements if p.gang == gang)
        if form == "volcano":
            assert status["phase"] == "Running"
            assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Scheduled", "True")]
        else:
            assert status == {"phase": "Scheduled", "scheduled": n}
        ref = imp.gang_objects[gang]
        assert patches[key]["metadata"]["annotations"][REQUEST_ANNOTATION].endswith(
            f"/namespaces/{ref.namespace}/podgroups/{ref.name}/status"
        )


def test_preemption_exports_evictions_and_bindings_on_the_freed_nodes() -> None:
    members = [sp_member(f"urgent-{i}", "urgent", gpus=8) for i in range(5)]
    for m in members:
        m["spec"]["priorityClassName"] = "high"
    imp = imported("cluster", objects=[pod_group("urgent", 5), *members])
    plan = solved(imp)
    assert gangopt.validate(imp.round, plan) == []
    assert "default/urgent" in plan.admitted
    assert [p.gang for p in plan.preemptions] == ["research/old-train"]
    objects = export_plan(plan, imp)
    check_export(plan, imp, objects)
    assert [o["kind"] for o in objects[:2]] == ["Eviction", "Eviction"]  # evictions come first
    assert objects[0]["metadata"]["annotations"][REQUEST_ANNOTATION] == (
        "POST /api/v1/namespaces/research/pods/old-train-worker-0/eviction"
    )


def test_growth_of_a_running_gang_binds_its_unbound_pod() -> None:
    imp = _partly_bound_gang()
    plan = solved(imp)
    assert [p.gang for p in plan.placements] == ["default/g"]
    (binding,) = export_plan(plan, imp)
    assert binding["metadata"]["name"] == "g-2" and binding["target"]["name"] == plan.placements[0].node


def test_waiting_gangs_get_a_status_condition() -> None:
    members = [sp_member(f"huge-{i}", "huge", gpus=8) for i in range(10)]
    imp = imported("cluster", objects=[pod_group("huge", 10), *members, pod("too-big", gpus=16)])
    plan = solved(imp)
    patches = {o["metadata"]["name"]: o for o in export_plan(plan, imp) if "status" in o}
    group = patches["huge"]
    assert group["metadata"]["annotations"][REQUEST_ANNOTATION] == (
        "PATCH /apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/huge/status"
    )
    (condition,) = group["status"]["conditions"]
    waiting = next(w for w in plan.waiting if w.gang == "default/huge")
    assert condition["type"] == "GangoptScheduled" and condition["status"] == "False"
    assert condition["reason"] == waiting.code and condition["message"] == "; ".join(waiting.reasons)
    plain = patches["too-big"]
    assert plain["kind"] == "Pod" and plain["status"]["conditions"][0]["type"] == "PodScheduled"
    assert plain["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert (
        plain["metadata"]["annotations"][REQUEST_ANNOTATION] == "PATCH /api/v1/namespaces/default/pods/too-big/status"
    )


ELASTIC = "default/job-elastic-train-9b7c3"
"""The Kueue fixture's Workload without pods (pod set ``main``: 4 pods, minCount 2, 4 GPUs and
32 CPUs each, preferred rack)."""


def check_kueue_admission(patch: Json, imp: Imported, plan: Plan, gang: str) -> None:
    """The patch has the shape of Kueue's ``Workload.status`` (v1beta1 API: clusterQueue, at
    most 8 pod-set assignments named after the Workload's pod sets, count >= 0, resource usage
    in quantities; topology levels 1-8 labels and per domain one value per level and a count
    >= 1) and says what the plan says: the gang's queue, its pods per pod set, their requests
    times the count, and domains holding exactly the plan's pods."""
    ref = imp.gang_objects[gang]
    assert (patch["apiVersion"], patch["kind"]) == ("kueue.x-k8s.io/v1beta1", "Workload")
    assert (patch["metadata"]["namespace"], patch["metadata"]["name"]) == (ref.namespace, ref.name)
    assert patch["metadata"]["annotations"][REQUEST_ANNOTATION] == (
        f"PATCH /apis/kueue.x-k8s.io/v1beta1/namespaces/{ref.namespace}/workloads/{ref.name}/status"
    )
    spec = pending(imp, gang)
    admission = patch["status"]["admission"]
    assert admission["clusterQueue"] == spec.queue
    assignments = admission["podSetAssignments"]
    assert 1 <= len(assignments) <= 8
    roles = {r.name: r for r in spec.roles}
    nodes = {n.name: n for n in imp.round.cluster.nodes}
    for a in assignments:
        mine = [p for p in plan.placements if p.gang == gang and p.role == a["name"]]
        assert a["count"] == len(mine) > 0
        usage = {res: parse_quantity(q) for res, q in a["resourceUsage"].items()}
        wanted = {("nvidia.com/gpu" if r == "gpu" else r): v * len(mine) for r, v in roles[a["name"]].requests.items()}
        assert usage == {r: v for r, v in wanted.items() if r != "pods"}
        topo = a["topologyAssignment"]
        assert 1 <= len(topo["levels"]) <= 8
        assert all(len(d["values"]) == len(topo["levels"]) and d["count"] >= 1 for d in topo["domains"])
        per_domain = Counter(tuple(nodes[p.node].labels[label] for label in topo["levels"]) for p in mine)
        assert {tuple(d["values"]): d["count"] for d in topo["domains"]} == per_domain
    (condition,) = patch["status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("QuotaReserved", "True")


def test_an_admitted_kueue_workload_without_pods_exports_its_admission() -> None:
    """Issue 15: import -> solve -> export. The Workload without pods gets the
    ``status.admission`` patch Kueue's scheduler would write (no Binding: it has no pods);
    with ``kubernetes.io/hostname`` a Topology level, the topology assignment names nodes
    only, as Kueue writes it. The Workload whose pods exist is exported as before: Bindings,
    no admission."""
    imp = imported("cluster", "kueue")
    plan = solved(imp)
    assert ELASTIC in plan.admitted
    notes: list[str] = []
    objects = export_plan(plan, imp, notes)
    check_export(plan, imp, objects)
    (patch,) = [o for o in objects if o["kind"] == "Workload"]
    check_kueue_admission(patch, imp, plan, ELASTIC)
    (assignment,) = patch["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {"cpu": "tas-flavor", "memory": "tas-flavor", "nvidia.com/gpu": "tas-flavor"}
    assert assignment["topologyAssignment"]["levels"] == ["kubernetes.io/hostname"]
    assert 2 <= assignment["count"] <= 4
    tas = "default/job-tas-sample-job-4f2d1"
    assert {b["metadata"]["name"] for b in objects if b["kind"] == "Binding"} == {
        p.name for p in imp.pending_pods[tas]["main"]
    }
    assert notes == []


def test_kueue_admission_without_a_hostname_level_names_every_level_and_leaves_ambiguous_flavors_out() -> None:
    """A Topology of block and rack: each domain is its block and rack values (Kueue's form);
    a resource the ClusterQueue offers in two flavors gets none (with a note), not a guess."""
    found = docs("cluster", "kueue")
    for obj in found:
        if obj["kind"] == "Topology":
            obj["spec"]["levels"] = [lv for lv in obj["spec"]["levels"] if lv["nodeLabel"] != "kubernetes.io/hostname"]
        if obj["kind"] == "ClusterQueue":
            spare = {"name": "spare-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
            obj["spec"]["resourceGroups"][0]["flavors"].append(spare)
    imp = import_documents(found, ImportOptions(policy=POLICY))
    plan = solved(imp)
    notes: list[str] = []
    (patch,) = [o for o in export_plan(plan, imp, notes) if o["kind"] == "Workload"]
    check_kueue_admission(patch, imp, plan, ELASTIC)
    (assignment,) = patch["status"]["admission"]["podSetAssignments"]
    assert assignment["topologyAssignment"]["levels"] == [
        "cloud.provider.com/topology-block",
        "cloud.provider.com/topology-rack",
    ]
    assert assignment["flavors"] == {"cpu": "tas-flavor", "memory": "tas-flavor"}
    assert notes == [
        f"gang {ELASTIC} pod set main: nvidia.com/gpu has flavors ['tas-flavor', 'spare-flavor'] in "
        "tas-cluster-queue: flavor left out"
    ]


def test_a_v1beta2_kueue_workload_gets_its_topology_assignment_in_slices() -> None:
    """Kueue v1beta2 writes a topology assignment as slices: levels, then per slice the
    domain count, the values by level (``roots``) and the pod counts; same pods as v1beta1."""
    found = docs("cluster", "kueue")
    for obj in found:
        if obj["kind"] == "Workload":
            obj["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    imp = import_documents(found, ImportOptions(policy=POLICY))
    plan = solved(imp)
    (patch,) = [o for o in export_plan(plan, imp) if o["kind"] == "Workload"]
    assert patch["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    (assignment,) = patch["status"]["admission"]["podSetAssignments"]
    topology = assignment["topologyAssignment"]
    (piece,) = topology["slices"]
    assert topology["levels"] == ["kubernetes.io/hostname"]
    assert len(piece["valuesPerLevel"]) == len(topology["levels"])
    assert all(len(v["roots"]) == piece["domainCount"] for v in piece["valuesPerLevel"])
    assert len(piece["podCounts"]) == piece["domainCount"] and all(n >= 1 for n in piece["podCounts"])
    placed = Counter(p.node for p in plan.placements if p.gang == ELASTIC)
    assert dict(zip(piece["valuesPerLevel"][0]["roots"], piece["podCounts"], strict=True)) == dict(placed)
    assert assignment["count"] == sum(placed.values())


def test_a_kueue_admission_from_a_hand_written_plan_counts_its_placements() -> None:
    """One placement of the Workload without pods: count 1, its requests once, one domain."""
    imp = imported("cluster", "kueue")
    plan = Plan(
        status=Status.FEASIBLE,
        admitted=[ELASTIC],
        placements=[Placement(gang=ELASTIC, role="main", pod="x-main-0", node="gpu-node-01")],
    )
    (patch,) = export_plan(plan, imp)
    check_kueue_admission(patch, imp, plan, ELASTIC)
    (assignment,) = patch["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"]["nvidia.com/gpu"] == "4"
    assert assignment["topologyAssignment"]["domains"] == [{"values": ["gpu-node-01"], "count": 1}]


def test_a_plan_that_does_not_match_the_manifests_is_an_error_naming_the_plan_path() -> None:
    imp = imported("cluster", "kep-4671")
    extra = [
        Placement(gang="ns-1/job-1", role="worker", pod=f"ns-1/job-1-worker-{i}", node="gpu-node-01") for i in range(5)
    ]
    plan = Plan(status=Status.FEASIBLE, placements=[Placement(gang="nope", role="worker", pod="p", node="n"), *extra])
    with pytest.raises(InputError) as caught:
        export_plan(plan, imp)
    assert [p.path for p in caught.value.problems] == ["$.placements[0].gang", "$.placements[5]"]


# ----------------------------------------------------------------------------- CLI


def test_cli_import_solve_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifests = [str(FIXTURES / "cluster.yaml"), str(FIXTURES / "volcano.yaml")]
    round_file, plan_file, out = tmp_path / "round.json", tmp_path / "plan.json", tmp_path / "apply.json"
    assert main(["import", "k8s", *manifests, "-o", str(round_file), "--time-limit", "5"]) == 0
    err = capsys.readouterr().err
    assert "warning: Job research/dist-mnist: ignored: its pods carry what gangopt needs" in err.splitlines()
    assert json.loads(round_file.read_text())["policy"]["time_limit"] == 5
    assert main(["solve", str(round_file), "-o", str(plan_file)]) == 0
    code = main(["export", "k8s", str(plan_file), "--manifests", *manifests, "--format", "json", "-o", str(out)])
    assert code == 0
    listing = json.loads(out.read_text())
    assert listing["kind"] == "List"
    imp = import_documents(load_documents(manifests))
    check_export(gangopt.load_plan(plan_file), imp, listing["items"])
    assert main(["export", "k8s", str(plan_file), "--manifests", *manifests]) == 0
    stream = list(yaml.safe_load_all(capsys.readouterr().out))
    assert stream == listing["items"]


def test_gang_caught_mid_binding_runs_with_its_minimum_lowered_and_a_warning() -> None:
    members = [
        sp_member("m-0", "m", gpus=8, node="gpu-node-01"),
        sp_member("m-1", "m", gpus=8),
        sp_member("m-2", "m", gpus=8),
    ]
    imp = imported("cluster", objects=[pod_group("m", 3), *members])
    gang = running(imp, "default/m")
    assert gang.minimum == 1 and gang.maximum == 3
    assert "PodGroup default/m: only 1 of its minimum 3 pods are bound: minimum lowered to 1" in imp.warnings


def test_running_gang_started_at_is_its_newest_bound_pods_creation() -> None:
    """A restarted gang's pods are created anew: the newest bound pod dates its current run
    (what the look-ahead's protection from eviction churn reads); the unbound pod does not count."""
    stamps = ["2025-03-03T15:00:00Z", "2025-03-03T15:10:00Z", "2025-03-03T16:00:00Z"]
    members = [
        sp_member(f"g-{i}", "g", gpus=8, node=node, creationTimestamp=stamp)
        for i, (node, stamp) in enumerate(zip(["gpu-node-01", "gpu-node-02", None], stamps, strict=True))
    ]
    imp = imported("cluster", objects=[pod_group("g", 2), *members])
    gang = running(imp, "default/g")
    assert gang.started_at == datetime.fromisoformat("2025-03-03T15:10:00+00:00").timestamp()
    # its submit time (what within_queue lower_or_newer_equal_priority compares) is its oldest
    # pod's creation when the group object carries none, as for pending gangs
    assert gang.submit_time == datetime.fromisoformat("2025-03-03T15:00:00+00:00").timestamp()


# ----------------------------------------------------------------------------- queue preemption policies


def _cluster_queue(name: str, preemption: Json | None) -> Json:
    spec: Json = {
        "cohort": "all",
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
            }
        ],
    }
    if preemption is not None:
        spec["preemption"] = preemption
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _queue(imp: Imported, name: str) -> Any:
    return next(q for q in imp.round.queues if q.name == name)


@pytest.mark.parametrize(
    ("preemption", "expected", "warned"),
    [
        (None, ("never", "never", "never", None), None),
        (
            {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            ("lower_priority", "any", "never", None),
            None,
        ),
        (
            {
                "withinClusterQueue": "LowerOrNewerEqualPriority",
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
            ("lower_or_newer_equal_priority", "lower_priority", "lower_priority", 100),
            None,
        ),
        ({"reclaimWithinCohort": "Sometimes"}, ("never", "never", "never", None), "'Sometimes' is not one of"),
    ],
)
def test_kueue_cluster_queue_preemption_maps_onto_the_queue_policy(
    preemption: Json | None, expected: tuple[str, str, str, int | None], warned: str | None
) -> None:
    imp = imported("cluster", objects=[_cluster_queue("cq", preemption)])
    policy = _queue(imp, "cq").preemption
    got = (
        policy.within_queue,
        policy.reclaim_within_cohort,
        policy.borrow_within_cohort.policy,
        policy.borrow_within_cohort.max_priority_threshold,
    )
    assert got == expected
    assert policy.other_queues == "never"  # a ClusterQueue never preempts outside its cohort
    if warned is not None:
        assert any(w.startswith("ClusterQueue cq") and warned in w for w in imp.warnings), imp.warnings


def test_volcano_and_koordinator_queues_scope_preemption_to_the_queue() -> None:
    volcano = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "vq"}, "spec": {}}
    koord = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "eq", "namespace": "team"},
        "spec": {"min": {"nvidia.com/gpu": 8}, "max": {"nvidia.com/gpu": 16}},
    }
    imp = imported("cluster", objects=[volcano, koord])
    vq, eq = _queue(imp, "vq").preemption, _queue(imp, "eq").preemption
    assert (vq.within_queue, vq.other_queues, vq.reclaim_within_cohort) == ("lower_priority", "never", "any")
    assert (eq.within_queue, eq.other_queues, eq.reclaim_within_cohort) == ("lower_priority", "never", "any")
    assert eq.borrow_within_cohort.policy == "never"
    assert any("deserved share from weight over the cluster's capacity" in w for w in imp.warnings)
    assert any("revoke mapped as reclaim at any priority" in w for w in imp.warnings)


# ----------------------------------------------------------------------------- cohort trees


def _cohort(name: str, spec: Json) -> Json:
    return {"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _queue_in(name: str, cohort: str) -> Json:
    queue = _cluster_queue(name, None)
    queue["spec"]["cohort"] = cohort
    return queue


def test_kueue_cohort_parents_make_one_tree_whose_root_every_queue_reads() -> None:
    """Kueue Cohort ``spec.parentName``: ClusterQueues of sibling cohorts share the root (a
    parent with no Cohort object is a root, Kueue's default cohort); each queue keeps the
    cohort it names, a node of the tree."""
    objects = [
        _cohort("vision", {"parentName": "research"}),
        _cohort("research", {"parentName": "org", "resourceGroups": []}),
        _queue_in("cq-a", "vision"),
        _queue_in("cq-b", "research"),
        _queue_in("cq-c", "other"),
    ]
    imp = imported("cluster", objects=objects)
    assert [(c.name, c.parent) for c in imp.round.cohorts] == [
        ("org", None),
        ("research", "org"),
        ("vision", "research"),
    ]
    assert [(q.name, q.cohort) for q in imp.round.queues if q.name.startswith("cq-")] == [
        ("cq-a", "vision"),
        ("cq-b", "research"),
        ("cq-c", "other"),
    ]
    roots = imp.round.cohort_roots
    assert [roots[q] for q in ("cq-a", "cq-b", "cq-c")] == ["org", "org", "other"]
    assert not any(w.startswith("Cohort") for w in imp.warnings), imp.warnings


def _groups(*flavors: tuple[str, Json]) -> list[Json]:
    """Kueue resourceGroups with one group of GPU flavors: ``(flavor, fields)``."""
    resources = [{"name": f, "resources": [{"name": "nvidia.com/gpu", **fields}]} for f, fields in flavors]
    return [{"coveredResources": ["nvidia.com/gpu"], "flavors": resources}]


def test_kueue_cohort_resource_groups_and_fair_sharing_map_onto_the_cohort() -> None:
    """A Kueue Cohort's own ``resourceGroups`` (nominalQuota, borrowingLimit, lendingLimit,
    summed over flavors; a limit one flavor leaves unset is unlimited) and
    ``fairSharing.weight`` become the cohort's ``nominal``, limits and ``weight``; limits on a
    root (no parentName) are warned and left out."""
    objects = [
        _cohort("org", {"resourceGroups": _groups(("a", {"nominalQuota": 4, "borrowingLimit": 2}))}),
        _cohort(
            "research",
            {
                "parentName": "org",
                "resourceGroups": _groups(
                    ("a", {"nominalQuota": 8, "borrowingLimit": 2, "lendingLimit": 4}),
                    ("b", {"nominalQuota": 8, "borrowingLimit": 1}),
                ),
                "fairSharing": {"weight": "2"},
            },
        ),
        _queue_in("cq-a", "research"),
    ]
    imp = imported("cluster", objects=objects)
    cohorts = {c.name: c for c in imp.round.cohorts}
    gpu = 1000  # milli-units
    assert cohorts["org"].nominal == {"gpu": 4 * gpu} and cohorts["org"].borrowing_limit == {}
    research = cohorts["research"]
    assert research.nominal == {"gpu": 16 * gpu}
    assert research.borrowing_limit == {"gpu": 3 * gpu}
    assert research.lending_limit == {}  # flavor b lends without limit
    assert research.weight == 2.0
    assert any(w.startswith("Cohort org") and "a cohort without parentName is a root" in w for w in imp.warnings)
    research_warnings = [w for w in imp.warnings if w.startswith("Cohort research")]
    assert len(research_warnings) == 1 and "gpu quotas of flavors a, b summed" in research_warnings[0]
    assert gangopt.validate(imp.round, gangopt.solve(imp.round)) == []


def test_kueue_and_volcano_trees_round_trip_through_the_round_file() -> None:
    """Imported cohort trees (a Kueue tree with quotas and limits, a Volcano hierarchy) survive
    the round file: written, read back and imported again in another order they give the same
    round, the same tree (every queue keeps the cohort it named, so quotas stay per level) and
    a plan the validator accepts."""
    objects = [
        _cohort("org", {}),
        _cohort(
            "research",
            {
                "parentName": "org",
                "resourceGroups": _groups(("a", {"nominalQuota": 8, "borrowingLimit": 0, "lendingLimit": 4})),
                "fairSharing": {"weight": "500m"},
            },
        ),
        _queue_in("cq-a", "research"),
        _queue_in("cq-b", "org"),
        _volcano_queue("prod", "root/eng/prod", "1/2/8"),
        _volcano_queue("sci", "root/sci", "1/1"),
    ]
    first = imported("cluster", objects=objects).round
    text = dump_round(first)
    back = Round.model_validate(json.loads(text))
    assert back == first and back.cohort_roots == first.cohort_roots
    assert back.cohort_roots["cq-a"] == "org" and back.cohort_roots["prod"] == "root"
    assert dump_round(imported("cluster", objects=list(reversed(objects))).round) == text
    research = next(c for c in back.cohorts if c.name == "research")
    assert (research.nominal, research.borrowing_limit, research.lending_limit, research.weight) == (
        {"gpu": 8000},
        {"gpu": 0},
        {"gpu": 4000},
        0.5,
    )
    assert gangopt.validate(back, gangopt.solve(back)) == []


def _volcano_queue(name: str, hierarchy: str | None, weights: str | None, gpus: int = 8) -> Json:
    annotations = {}
    if hierarchy is not None:
        annotations["volcano.sh/hierarchy"] = hierarchy
    if weights is not None:
        annotations["volcano.sh/hierarchy-weights"] = weights
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"capability": {"nvidia.com/gpu": gpus}},
    }


def test_volcano_hierarchy_maps_onto_a_weighted_cohort_tree() -> None:
    """``volcano.sh/hierarchy: root/eng/prod`` with ``hierarchy-weights: 1/2/8``: cohorts named
    by their paths, each level's weight on its cohort, the last on the queue; capability stays
    a hard cap (borrowing_limit 0), and the fair-share fractions follow the weights down the
    tree (eng 2 : sci 1, then prod 8 : dev 2 inside eng)."""
    objects = [
        _volcano_queue("prod", "root/eng/prod", "1/2/8"),
        _volcano_queue("dev", "root/eng/dev", "1/2/2"),
        _volcano_queue("sci", "root/sci", "1/1"),
    ]
    imp = imported("cluster", objects=objects)
    cohorts = {c.name: (c.parent, c.weight) for c in imp.round.cohorts}
    assert cohorts == {"root": (None, None), "root/eng": ("root", 2.0)}
    queues = {q.name: q for q in imp.round.queues}
    assert (queues["prod"].cohort, queues["prod"].weight) == ("root/eng", 8.0)
    assert (queues["sci"].cohort, queues["sci"].weight) == ("root", 1.0)
    assert queues["prod"].borrowing_limit == {"gpu": 0} and queues["prod"].nominal == {"gpu": 8000}
    fractions = tree_fractions("root", [queues[n] for n in ("prod", "dev", "sci")], list(imp.round.cohorts))
    assert fractions == pytest.approx({"prod": 2 / 3 * 0.8, "dev": 2 / 3 * 0.2, "sci": 1 / 3})
    assert any("volcano.sh/hierarchy mapped to a cohort tree" in w for w in imp.warnings)


@pytest.mark.parametrize(
    ("hierarchy", "weights", "warned", "cohort", "weight"),
    [
        ("root/eng", "1/x", "is not one weight", "root", None),
        ("root/eng", "1/2/3", "is not one weight", "root", None),
        ("solo", None, "has no level above the queue", "volcano-root", 1.0),
        (None, "1/2", "hierarchy-weights ignored without", "volcano-root", 1.0),
    ],
)
def test_volcano_hierarchy_that_cannot_be_mapped_is_warned(
    hierarchy: str | None, weights: str | None, warned: str, cohort: str, weight: float | None
) -> None:
    """Weights that do not match the path are dropped (every level weighs 1); a path without
    a level above the queue, or weights without a path, leave the queue in Volcano's root
    queue with its own weight (1 by default)."""
    imp = imported("cluster", objects=[_volcano_queue("q", hierarchy, weights)])
    assert any(warned in w for w in imp.warnings), imp.warnings
    q = next(q for q in imp.round.queues if q.name == "q")
    assert (q.cohort, q.weight) == (cohort, weight)


def test_a_kueue_cohort_cycle_is_an_error_naming_the_object() -> None:
    objects = [_cohort("x", {"parentName": "y"}), _cohort("y", {"parentName": "x"})]
    with pytest.raises(InputError) as caught:
        imported("cluster", objects=objects)
    assert "cohort x is its own ancestor (a cycle)" in str(caught.value)
    assert ".spec.parentName" in str(caught.value)
