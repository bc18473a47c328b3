"""What gangopt reads: the kinds and API groups it knows, the labels and annotations of each
gang form, and the sorting of input objects by kind."""

from __future__ import annotations

from collections import defaultdict

from gangopt.k8s.context import Context, Obj, Source

# Gang forms: labels and annotations read from pods.
SP_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
KOORD_POD_GROUP_LABEL = "pod-group.scheduling.sigs.k8s.io"
KOORD = "gang.scheduling.koordinator.sh/"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK = "volcano.sh/task-spec"
KUEUE = "kueue.x-k8s.io/"
KOORD_QUOTA_LABEL = "quota.scheduling.koordinator.sh/name"
KOORD_QUOTA_PARENT = "quota.scheduling.koordinator.sh/parent"
KOORD_QUOTA_IS_PARENT = "quota.scheduling.koordinator.sh/is-parent"

# API groups of the gang and queue kinds.
VOLCANO = "scheduling.volcano.sh"
SP = "scheduling.x-k8s.io"
KOORD_GROUP = "scheduling.sigs.k8s.io"
KUEUE_GROUP = "kueue.x-k8s.io"
KOORD_SCHEDULING = "scheduling.koordinator.sh"
UPSTREAM = "scheduling.k8s.io"

_IGNORED_KINDS = {
    "Job": "its pods carry what gangopt needs",
    "Deployment": "its pods carry what gangopt needs",
    "StatefulSet": "its pods carry what gangopt needs",
    "ReplicaSet": "its pods carry what gangopt needs",
    "DaemonSet": "its pods carry what gangopt needs",
    "ResourceFlavor": "flavors are summed into their ClusterQueue's quota",
}


def read_sources(ctx: Context, objects: list[Obj]) -> list[Source]:
    out = []
    for i, obj in enumerate(objects):
        src = Source(i, obj if isinstance(obj, dict) else {})
        if not src.kind or not src.api_version:
            ctx.error(f"items[{i}]", "not a Kubernetes object: apiVersion and kind are required")
        elif not src.name:
            ctx.error(src.path(".metadata.name"), "missing")
        else:
            out.append(src)
    return out


_KNOWN_GROUPS = {
    "Node": {""},
    "Pod": {""},
    "PriorityClass": {"scheduling.k8s.io"},
    "PodGroup": {VOLCANO, SP, KOORD_GROUP},
    "Workload": {KUEUE_GROUP, UPSTREAM},
    "ClusterQueue": {KUEUE_GROUP},
    "Cohort": {KUEUE_GROUP},
    "LocalQueue": {KUEUE_GROUP},
    "Topology": {KUEUE_GROUP},
    "ElasticQuota": {KOORD_GROUP},
    "HyperNode": {"topology.volcano.sh"},
    "ClusterNetworkTopology": {KOORD_SCHEDULING},
    "Queue": {VOLCANO},
}


def by_kind(ctx: Context, sources: list[Source]) -> dict[str, list[Source]]:
    """Objects of the kinds gangopt reads; every other object is a warning, except a gang kind
    of an unknown API group, which is an error: its pods would silently lose their gang."""
    out: dict[str, list[Source]] = defaultdict(list)
    for src in sources:
        groups = _KNOWN_GROUPS.get(src.kind)
        if src.kind == "ElasticQuota" and src.group == SP:
            ctx.warn(
                src, "ignored: scheduler-plugins ElasticQuota (capacity scheduling) is not mapped; no quota applies"
            )
        elif groups is None:
            reason = _IGNORED_KINDS.get(src.kind, f"kind {src.kind} ({src.api_version}) is not read by gangopt")
            ctx.warn(src, f"ignored: {reason}")
        elif src.group not in groups:
            ctx.error(src.path(".apiVersion"), f"unsupported apiVersion {src.api_version!r} for {src.kind}")
        else:
            out[src.kind].append(src)
    return out
