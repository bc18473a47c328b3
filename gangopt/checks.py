"""Cross-field checks of a round, each reported with the JSON path of the offending field.

Pydantic checks each field alone; these rules span fields (a pod names a node that must
exist, running pods must fit their node). They run inside ``Round`` validation, so a
``Round`` object that exists is always consistent, and every later stage may rely on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import chain, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from gangopt.quantities import format_quantity, human

if TYPE_CHECKING:  # types only: the schema runs these checks, so it imports this module
    from gangopt.schema import GangSpec, Round, RunningGang

Problem = tuple[str, str]
NODE_LEVEL = "node"
"""The implicit finest topology level: every node is its own domain (``gangopt.schema``
re-exports it)."""


MAX_LENDING = 8
"""Most queues and cohorts of a round that may set a ``lending_limit``: each doubles the quota
rows of the limits above it (gangopt/quota_tree.py; 2^8 = 256 rows per limit and resource at
most)."""


def check_round(rnd: Round) -> list[Problem]:
    """Every cross-field problem of ``rnd`` as ``(json_path, message)``, in input order."""
    problems: list[Problem] = []
    problems += _check_cluster(rnd)
    problems += _check_names(rnd)
    problems += _check_cohorts(rnd)
    problems += _check_gangs(rnd)
    problems += _check_running_pods(rnd)
    return problems


def check_queues(rnd: Round) -> list[Problem]:
    """The cross-field problems of ``rnd``'s queues and cohorts alone (a workload's tenants, read
    before any round exists): the paths are ``$.queues[i]...`` and ``$.cohorts[i]...``."""
    return _duplicates([q.name for q in rnd.queues], "$.queues", "queue") + _check_cohorts(rnd)


def _roots(parents: dict[str, str | None]) -> dict[str, str] | None:
    """Each cohort's root, or None when a parent is undeclared or the tree has a cycle."""
    roots: dict[str, str] = {}
    for name in parents:
        seen = [name]
        node = name
        while (parent := parents[node]) is not None:
            if parent not in parents or parent in seen:
                return None
            seen.append(parent)
            node = parent
        roots[name] = node
    return roots


def cohort_roots(rnd: Round) -> dict[str, str | None]:
    """Per queue, the root of its cohort's tree (``Round.cohort_roots``); a cohort not declared
    in ``Round.cohorts`` is its own root. Called on checked rounds only (the trees are sound)."""
    roots = _roots({c.name: c.parent for c in rnd.cohorts}) or {}
    return {q.name: None if q.cohort is None else roots.get(q.cohort, q.cohort) for q in rnd.queues}


def _check_cohorts(rnd: Round) -> list[Problem]:
    """Cohort names are unique, parents are declared, and the parent links form trees."""
    out = _duplicates([c.name for c in rnd.cohorts], "$.cohorts", "cohort")
    declared = {c.name for c in rnd.cohorts}
    for i, c in enumerate(rnd.cohorts):
        if c.parent is not None and c.parent not in declared:
            out.append((f"$.cohorts[{i}].parent", f"unknown cohort {c.parent!r} (declare it in cohorts)"))
    for i, c in enumerate(rnd.cohorts):
        for field in ("borrowing_limit", "lending_limit"):
            limits = getattr(c, field)
            if limits and c.parent is None:
                out.append((f"$.cohorts[{i}].{field}", f"cohort {c.name!r} has no parent to borrow from or lend to"))
                continue
            for res in limits:
                if res not in c.nominal:
                    message = f"{res!r} is not in the cohort's nominal (list it there; 0 holds no quota of its own)"
                    out.append((f"$.cohorts[{i}].{field}.{res}", message))
    out += _check_queue_lending(rnd)
    lending = [f"$.queues[{i}]" for i, q in enumerate(rnd.queues) if q.lending_limit]
    lending += [f"$.cohorts[{i}]" for i, c in enumerate(rnd.cohorts) if c.lending_limit]
    if len(lending) > MAX_LENDING:
        message = f"at most {MAX_LENDING} queues and cohorts may set a lending limit"
        out.append((f"{lending[MAX_LENDING]}.lending_limit", message))
    if out:
        return out
    parents = {c.name: c.parent for c in rnd.cohorts}
    if _roots(parents) is None:
        for i, c in enumerate(rnd.cohorts):
            seen, node = {c.name}, c.parent
            while node is not None and node not in seen:
                seen.add(node)
                node = parents[node]
            if node == c.name:
                out.append((f"$.cohorts[{i}].parent", f"cohort {c.name!r} is its own ancestor (a cycle)"))
                break
    return out


def _check_queue_lending(rnd: Round) -> list[Problem]:
    """A queue's ``lending_limit`` needs a cohort to lend to, and per resource a nominal quota
    it is at most (Kueue's ClusterQueue webhook: nil when the cohort is empty, lendingLimit <=
    nominalQuota)."""
    out: list[Problem] = []
    for i, q in enumerate(rnd.queues):
        if q.lending_limit and q.cohort is None:
            out.append((f"$.queues[{i}].lending_limit", f"queue {q.name!r} has no cohort to lend to"))
            continue
        for res, amount in q.lending_limit.items():
            path = f"$.queues[{i}].lending_limit.{res}"
            if res not in q.nominal:
                out.append((path, f"{res!r} is not in the queue's nominal (a queue lends only its nominal quota)"))
            elif amount > q.nominal[res]:
                lend, nominal = format_quantity(amount, res), format_quantity(q.nominal[res], res)
                message = f"{lend} is more than the nominal {nominal} (a queue lends at most its nominal)"
                out.append((path, message))
    return out


def _duplicates(names: list[str], path: str, what: str) -> list[Problem]:
    if len(set(names)) == len(names):
        return []
    seen: dict[str, int] = {}
    out: list[Problem] = []
    for i, name in enumerate(names):
        if name in seen:
            out.append((f"{path}[{i}].name", f"duplicate {what} name {name!r} (first at index {seen[name]})"))
        else:
            seen[name] = i
    return out


def _check_cluster(rnd: Round) -> list[Problem]:
    levels = rnd.cluster.topology_levels
    out: list[Problem] = []
    for i, level in enumerate(levels):
        if level == NODE_LEVEL:
            out.append((f"$.cluster.topology_levels[{i}]", "'node' is implicit; do not list it"))
    for level, count in Counter(levels).items():
        if count > 1:
            out.append(("$.cluster.topology_levels", f"level {level!r} listed {count} times"))
    out += _duplicates([n.name for n in rnd.cluster.nodes], "$.cluster.nodes", "node")
    known = set(levels)
    for i, node in enumerate(rnd.cluster.nodes):
        if node.topology.keys() == known:  # a domain at every level and no other: one set comparison
            continue
        path = f"$.cluster.nodes[{i}].topology"
        for level in node.topology:
            if level not in known:
                out.append((f"{path}.{level}", f"unknown topology level {level!r} (levels: {levels})"))
        for level in levels:
            if level not in node.topology:
                out.append((path, f"node {node.name!r} has no domain at level {level!r}"))
    out += _check_tree(rnd)
    return out


def _check_tree(rnd: Round) -> list[Problem]:
    """A domain must have one parent: rack r1 cannot sit in two blocks.

    A node whose domains repeat those of an earlier node found consistent is consistent too
    (parents, once set, stay): at XL 16,384 nodes sit in 512 racks, and the walk up the levels
    runs once per rack instead of once per node."""
    levels = rnd.cluster.topology_levels
    parent: dict[tuple[str, str | None], tuple[str | None, ...]] = {}
    out: list[Problem] = []
    consistent: set[tuple[str | None, ...]] = set()
    for i, node in enumerate(rnd.cluster.nodes):
        path_values = tuple(map(node.topology.get, levels))
        if path_values in consistent or None in path_values:
            continue
        before = len(out)
        for depth, level in enumerate(levels):
            key = (level, path_values[depth])
            above = path_values[:depth]
            if parent.setdefault(key, above) != above:
                out.append(
                    (
                        f"$.cluster.nodes[{i}].topology.{level}",
                        f"domain {key[1]!r} at level {level!r} sits under {parent[key]} and {above}",
                    )
                )
        if len(out) == before:
            consistent.add(path_values)
    return out


def _check_names(rnd: Round) -> list[Problem]:
    out: list[Problem] = []
    out += _duplicates([q.name for q in rnd.queues], "$.queues", "queue")
    names = [g.name for g in rnd.running]
    names += [g.name for g in rnd.pending]
    if len(set(names)) != len(names):  # the paths are only spelled out when there is a duplicate
        seen: dict[str, str] = {}
        for kind, gangs in (("running", rnd.running), ("pending", rnd.pending)):
            for i, gang in enumerate(gangs):
                if gang.name in seen:
                    out.append((f"$.{kind}[{i}].name", f"duplicate gang name {gang.name!r} (also {seen[gang.name]})"))
                else:
                    seen[gang.name] = f"$.{kind}[{i}]"
    pod_names = [pod.name for gang in rnd.running for pod in gang.pods]
    if len(set(pod_names)) == len(pod_names):
        return out
    pods: dict[str, tuple[int, int]] = {}  # a pod's path is spelled out only for a duplicate
    for i, gang in enumerate(rnd.running):
        for j, pod in enumerate(gang.pods):
            if pod.name in pods:
                first = "$.running[{}].pods[{}]".format(*pods[pod.name])
                out.append((f"$.running[{i}].pods[{j}].name", f"duplicate pod name {pod.name!r} (also {first})"))
            else:
                pods[pod.name] = (i, j)
    return out


def _check_gangs(rnd: Round) -> list[Problem]:
    """Each gang's own rules (:func:`_gang_problems`), skipped for a plain gang, where none but
    the queue's can fail: four of five gangs of the XL round are (68,536 running gangs: the rules
    cost 0.23 CPU-s, the test 0.03)."""
    out: list[Problem] = []
    queues = {q.name for q in rnd.queues}
    levels = [*rnd.cluster.topology_levels, NODE_LEVEL]
    for kind, gangs in (("running", rnd.running), ("pending", rnd.pending)):
        for i, gang in enumerate(gangs):
            if (  # plain: one role of replicas pods, no minimums, maximum or topology request
                gang.topology is None
                and gang.min_members is None
                and gang.max_members is None
                and len(gang.roles) == 1
                and gang.roles[0].min_replicas is None
                and (not queues or gang.queue in queues)
            ):
                continue
            out += _gang_problems(f"$.{kind}[{i}]", gang, queues, levels)
    return out


def _gang_problems(path: str, gang: GangSpec, queues: set[str], levels: list[str]) -> list[Problem]:
    out: list[Problem] = []
    if queues and gang.queue not in queues:
        out.append((f"{path}.queue", f"unknown queue {gang.queue!r} (queues: {sorted(queues)})"))
    for j, role in enumerate(gang.roles):
        if role.min_replicas is not None and role.min_replicas > role.replicas:
            out.append(
                (
                    f"{path}.roles[{j}].min_replicas",
                    f"min_replicas {role.min_replicas} exceeds replicas {role.replicas}",
                )
            )
    role_names = [r.name for r in gang.roles]
    out += _duplicates(role_names, f"{path}.roles", "role")
    total = gang.total_replicas
    if gang.minimum == 0:
        out.append(
            (
                f"{path}.min_members",
                "the gang may run with 0 pods: set min_members or a role's min_replicas to 1 or more",
            )
        )
    if gang.min_members is not None and gang.min_members > total:
        out.append(
            (f"{path}.min_members", f"min_members {gang.min_members} exceeds the {total} replicas of its roles")
        )
    if gang.max_members is not None and gang.max_members < gang.minimum:
        out.append((f"{path}.max_members", f"max_members {gang.max_members} is below the minimum {gang.minimum}"))
    out += _check_topology_request(path, gang, levels)
    return out


def _check_topology_request(path: str, gang: GangSpec, levels: list[str]) -> list[Problem]:
    out: list[Problem] = []
    topo = gang.topology
    if topo is None:
        return out
    for field in ("required", "preferred", "slice_level"):
        level = getattr(topo, field)
        if level is not None and level not in levels:
            out.append((f"{path}.topology.{field}", f"unknown topology level {level!r} (levels: {levels})"))
    if (topo.slice_level is None) != (topo.slice_size is None):
        out.append((f"{path}.topology", "slice_level and slice_size go together"))
    if topo.slice_level in levels and topo.slice_size:
        for field in ("required", "preferred"):
            level = getattr(topo, field)
            if level in levels and levels.index(topo.slice_level) < levels.index(level):
                out.append(
                    (
                        f"{path}.topology.slice_level",
                        f"slice level {topo.slice_level!r} is broader than {field} level {level!r}",
                    )
                )
        size = topo.slice_size
        low, high = gang.minimum, gang.maximum
        if not any(m % size == 0 for m in range(max(low, 1), high + 1)):
            out.append(
                (f"{path}.topology.slice_size", f"no member count between {low} and {high} is a multiple of {size}")
            )
    return out


def _check_running_pods(rnd: Round) -> list[Problem]:
    """Running pods name nodes and roles that exist, within their gang's bounds, and the pods on
    each node fit its capacity.

    A one-role gang whose count is within its bounds is checked as a whole: its pods' nodes and
    roles in one numpy comparison over every pod, its usage in one scatter-add per resource
    (:func:`_overloaded`); any other gang goes through :func:`_running_gang_problems` pod by pod.
    At XL (68,536 running gangs, 73,956 pods) these checks took 0.48 CPU-s and take 0.14 (best of 5
    at load 3-8; all of check_round 0.77 -> 0.25)."""
    import numpy as np  # only where a round is checked; every command that parses one uses it

    out: list[Problem] = []
    running = rnd.running
    index = {n.name: i for i, n in enumerate(rnd.cluster.nodes)}
    shapes: dict[tuple[tuple[str, int], ...], int] = {}
    requests: list[dict[str, int]] = []
    names: list[str | None] = []  # per gang: its one role's name when the gang is checked whole
    gang_shape: list[int] = []
    pods_of = list(map(attrgetter("pods"), running))
    sizes = list(map(len, pods_of))
    for gang, count in zip(running, sizes, strict=True):
        roles = gang.roles
        if len(roles) != 1:
            names.append(None)
            gang_shape.append(-1)
            continue
        role = roles[0]
        if gang.min_members is None and gang.max_members is None and role.min_replicas is None:
            within = count == role.replicas  # all of them: no cached totals needed (0.2 CPU-s at XL)
        else:
            within = gang.minimum <= count <= role.replicas and count <= gang.maximum
        names.append(role.name if within else None)
        gang_shape.append(_shape(role.requests, shapes, requests) if within else -1)
    pods = list(chain.from_iterable(pods_of))
    node = np.array(list(map(index.get, map(attrgetter("node"), pods), repeat(-1))), dtype=np.int64)
    pod_role = np.array(list(map(attrgetter("role"), pods)), dtype=object)
    pod_gang = np.repeat(np.arange(len(running), dtype=np.int64), sizes)
    whole = np.repeat(np.array(names, dtype=object), sizes) == pod_role
    whole &= node >= 0
    whole &= np.repeat(np.bincount(pod_gang, weights=~whole, minlength=len(running)) == 0, sizes)
    counted: list[tuple[int, int]] = []  # (node, shape) of each pod of the other gangs with both known
    shape_of = lambda amounts: _shape(amounts, shapes, requests)  # noqa: E731
    for i in np.flatnonzero(np.bincount(pod_gang, weights=whole, minlength=len(running)) < sizes).tolist():
        out += _running_gang_problems(i, running[i], index, shape_of, counted)
    pod_node = np.concatenate([node[whole], np.array([n for n, _ in counted], dtype=np.int64)])
    shape = np.asarray(gang_shape, dtype=np.int64)[pod_gang[whole]]
    pod_shape = np.concatenate([shape, np.array([s for _, s in counted], dtype=np.int64)])
    if _overloaded(rnd, pod_node, pod_shape, requests):
        out += _capacity_problems(rnd)
    return out


def _shape(
    amounts: dict[str, int], shapes: dict[tuple[tuple[str, int], ...], int], requests: list[dict[str, int]]
) -> int:
    """The number of the request ``amounts`` (equal requests, one number)."""
    key = tuple(amounts.items())
    shape = shapes.get(key)
    if shape is None:
        shape = shapes[key] = len(requests)
        requests.append(amounts)
    return shape


def _overloaded(rnd: Round, node: Any, shape: Any, requests: list[dict[str, int]]) -> bool:
    """Whether some node may hold more than its capacity, given each counted pod's ``node`` and
    request ``shape`` numbers: sums in int64, and true whenever int64 could overflow, so that
    :func:`_capacity_problems` then decides with Python integers."""
    import numpy as np

    nodes = rnd.cluster.nodes
    resources = sorted({res for amounts in requests for res in amounts})
    column = {res: k for k, res in enumerate(resources)}
    amounts = np.zeros((len(requests), len(resources)), dtype=np.int64)
    for s, request in enumerate(requests):
        for res, amount in request.items():
            amounts[s, column[res]] = amount
    pods = np.bincount(node, minlength=len(nodes))
    if int(pods.max(initial=0)) * int(amounts.max(initial=0)) >= 2**62:
        return True
    used = np.zeros((len(nodes), len(resources)), dtype=np.int64)
    np.add.at(used, node, amounts[shape])
    capacity = np.zeros((len(nodes), len(resources)), dtype=np.int64)
    for res, k in column.items():
        capacity[:, k] = [n.capacity.get(res, 0) for n in nodes]
    return bool((used > capacity).any())


def _capacity_problems(rnd: Round) -> list[Problem]:
    """Every node whose running pods (those naming a node and a role that exist) request more than
    its capacity, per resource, with Python integers: nodes in the order of their first pod."""
    nodes = {n.name: n for n in rnd.cluster.nodes}
    index = {n.name: i for i, n in enumerate(rnd.cluster.nodes)}
    used: dict[str, dict[str, int]] = {}
    for gang in rnd.running:
        roles = {r.name: r for r in gang.roles}
        for pod in gang.pods:
            if pod.node in nodes and pod.role in roles:
                on_node = used.setdefault(pod.node, {})
                for res, amount in roles[pod.role].requests.items():
                    on_node[res] = on_node.get(res, 0) + amount
    out: list[Problem] = []
    for name, usage in used.items():
        capacity = nodes[name].capacity
        for res, amount in sorted(usage.items()):
            if amount > capacity.get(res, 0):
                out.append(
                    (
                        f"$.cluster.nodes[{index[name]}].capacity.{res}",
                        f"running pods on node {name!r} request {human(amount, res)}, "
                        f"more than its capacity {human(capacity.get(res, 0), res)}",
                    )
                )
    return out


def _running_gang_problems(
    i: int,
    gang: RunningGang,
    index: dict[str, int],
    shape_of: Callable[[dict[str, int]], int],
    counted: list[tuple[int, int]],
) -> list[Problem]:
    """The problems of running gang ``i`` alone; each of its pods on a known node with a known
    role goes into ``counted`` as ``(node, shape)``."""
    out: list[Problem] = []
    roles = {r.name: r for r in gang.roles}
    per_role: Counter[str] = Counter()
    # Each pod's path is only spelled out when it has a problem: formatting it for every
    # pod was a fifth of these checks at XL (27,877 pods).
    for j, pod in enumerate(gang.pods):
        if pod.node not in index:
            message = f"pod {pod.name!r} is bound to node {pod.node!r}, which does not exist"
            out.append((f"$.running[{i}].pods[{j}].node", message))
            continue
        if pod.role not in roles:
            out.append((f"$.running[{i}].pods[{j}].role", f"unknown role {pod.role!r} (roles: {sorted(roles)})"))
            continue
        per_role[pod.role] += 1
        counted.append((index[pod.node], shape_of(roles[pod.role].requests)))
    for j, role in enumerate(gang.roles):
        if per_role[role.name] > role.replicas:
            out.append(
                (
                    f"$.running[{i}].roles[{j}].replicas",
                    f"{per_role[role.name]} pods running, more than replicas {role.replicas}",
                )
            )
    if sum(per_role.values()) == len(gang.pods) and len(gang.pods) < gang.minimum:
        out.append(
            (f"$.running[{i}].pods", f"{len(gang.pods)} pods running, fewer than the gang minimum {gang.minimum}")
        )
    # A running gang outside its own bounds could only be left alone by breaking them, and
    # every plan must end each running gang within them (rule 1): such a round made every
    # solver's plan fail validation ("internal: greedy plan failed validation").
    known = sum(per_role.values()) == len(gang.pods)  # every pod's role known: counts hold
    within = all(per_role[r.name] <= r.replicas for r in gang.roles)
    if known and within and len(gang.pods) > gang.maximum:
        message = f"{len(gang.pods)} pods running, more than the gang maximum {gang.maximum}"
        out.append((f"$.running[{i}].max_members", message))
    for j, role in enumerate(gang.roles):
        floor = gang.role_minimum(role)
        if known and per_role[role.name] < floor <= role.replicas and len(gang.pods) >= gang.minimum:
            out.append(
                (
                    f"$.running[{i}].roles[{j}].min_replicas",
                    f"{per_role[role.name]} pods of role {role.name!r} running, fewer than its minimum {floor}",
                )
            )
    return out
