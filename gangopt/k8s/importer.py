"""The import, start to end: objects -> kinds -> pods, nodes, topology, queues, gangs -> round."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from gangopt.errors import InputError, problems_from_validation
from gangopt.k8s.assemble import assemble
from gangopt.k8s.context import GPU_NAMES, Context, Source, timestamp
from gangopt.k8s.contract import Imported, ImportOptions, KueueSetup
from gangopt.k8s.gangs import Gangs
from gangopt.k8s.kinds import by_kind, read_sources
from gangopt.k8s.nodes import has_pods_allocatable, read_node
from gangopt.k8s.pods import PriorityClasses, check_bindings, read_pods, template_resources
from gangopt.k8s.queues import Queues
from gangopt.k8s.topology import read_topology
from gangopt.parsing import guarded
from gangopt.schema import Cluster, Policy, Round


def import_documents(objects: list[dict[str, Any]], options: ImportOptions | None = None) -> Imported:
    """Map Kubernetes objects to a round. Deterministic: nodes, gangs and pods are sorted by
    name, so the same objects (in any order, JSON or YAML) give the same round.

    Every model is built inside the parse boundary (:func:`gangopt.parsing.guarded`): a value
    no reader checked (a taint key of 300 characters) is still an input error, not a 500."""
    with guarded("imported round"):
        return _import(objects, options or ImportOptions())


def _import(objects: list[dict[str, Any]], options: ImportOptions) -> Imported:
    ctx = Context()
    sources = read_sources(ctx, objects)
    ctx.raise_problems()
    kinds = by_kind(ctx, sources)
    priorities = PriorityClasses(ctx, kinds.get("PriorityClass", []))
    node_sources = kinds.get("Node", [])
    pods_resource = bool(node_sources) and all(has_pods_allocatable(s) for s in node_sources)
    pods = read_pods(ctx, kinds.get("Pod", []), priorities, pods_resource)
    requested = {r for p in pods for r, _ in p.shape.requests}
    requested |= {r for s in kinds.get("Workload", []) for r in template_resources(ctx, s)}
    nodes = [read_node(ctx, s, requested, pods_resource) for s in node_sources]
    topology = read_topology(ctx, nodes, kinds, options)
    check_bindings(ctx, pods, {n.name for n in nodes})
    queues = Queues(ctx, kinds)
    gangs = Gangs(ctx, kinds, priorities, topology, queues, pods_resource).assign(pods)
    ctx.raise_problems()
    result = assemble(ctx, gangs, queues)
    policy = _policy(ctx, sources, options.policy)
    built = [n.build(ctx, topology.domains[n.name]) for n in sorted(nodes, key=lambda n: n.name)]
    ctx.raise_problems()
    cluster = Cluster(topology_levels=[name for name, _ in topology.levels], nodes=[n for n in built if n])
    try:
        rnd = Round(
            cluster=cluster,
            queues=queues.build(result.running, result.pending, _capacity(cluster)),
            cohorts=queues.build_cohorts(_capacity(cluster)),
            running=result.running,
            pending=result.pending,
            policy=policy,
        )
    except ValidationError as error:
        raise InputError(problems_from_validation(error), "imported round") from None
    kueue = KueueSetup(queues.flavors, topology.kueue_labels, _gpu_name(node_sources))
    return Imported(rnd, ctx.warning_lines(), result.pending_pods, result.running_pods, result.gang_objects, kueue)


def _capacity(cluster: Cluster) -> dict[str, int]:
    """The cluster's total capacity per resource (milli-units): Koordinator's root quota."""
    total: dict[str, int] = {}
    for n in cluster.nodes:
        for r, amount in n.capacity.items():
            total[r] = total.get(r, 0) + amount
    return total


def _gpu_name(nodes: list[Source]) -> str:
    """The GPU resource name the nodes report (the first in name order among those that report
    one; ``nvidia.com/gpu`` when none does): gangopt's ``gpu`` goes back under it in a Kueue
    admission."""
    for src in sorted(nodes, key=lambda s: s.name):
        status = src.obj.get("status")
        allocatable = status.get("allocatable") if isinstance(status, dict) else None
        if isinstance(allocatable, dict):
            for name in sorted(GPU_NAMES):
                if name in allocatable:
                    return name
    return "nvidia.com/gpu"


def _policy(ctx: Context, sources: Iterable[Source], policy: Policy | None) -> Policy:
    """``now`` = the latest creationTimestamp in the input, unless the caller set it."""
    policy = policy or Policy()
    if policy.now is not None:
        return policy
    times = [t for t in (timestamp(ctx, s) for s in sources) if t is not None]
    return policy.model_copy(update={"now": max(times)}) if times else policy
