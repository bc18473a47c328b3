"""The vectorized prefilter agrees with the plain per-node, per-gang definitions it replaced.

Each test keeps a short reference written the obvious way (dicts per node, loops per gang)
and checks the numpy version gives the same answer, including the order of classes, of their
nodes and of their candidate pods (the model is built in that order).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gangopt import arrays
from gangopt import prefilter as pf
from gangopt.io import load_round
from gangopt.prefilter import NodeClass, prefilter
from gangopt.schema import Round
from gangopt.topology import Topology
from tests.strategies import examples, rounds

ROOT = Path(__file__).resolve().parent.parent
# Issue 18, bug 2: job1 (required rack, tolerates the taint) found room in r1, then was pruned
# with its group; its domains stayed in required_domains and the verdicts seemed to disagree.
GROUP_PRUNED = load_round(ROOT / "tests" / "fixtures" / "regressions" / "prefilter-group-pruned-required-domains.json")


def reference_classes(rnd: Round, topo: Topology, resources: list[str], candidates: list[int]) -> list[NodeClass]:
    """Node classes by a Python key per node, in order of their first node (the former code)."""
    growers = pf._movable_running(rnd)[1]
    masks, _ = pf._eligibility(rnd, topo, growers)
    level = pf._relevant_level(rnd, growers)
    n = len(topo.node_names)
    fixed = np.zeros((n, len(resources)), dtype=np.int64)
    cand: dict[int, dict[tuple[int, str], int]] = defaultdict(lambda: defaultdict(int))
    busy = np.zeros(n, dtype=bool)
    for gi, gang in enumerate(rnd.running):
        for pod in gang.pods:
            node = topo.node_index[pod.node]
            busy[node] = True
            if gi in candidates:
                cand[node][(gi, pod.role)] += 1
            else:
                fixed[node] += pf.request_vector(pf.role_named(gang, pod.role), resources)
    free = arrays.cluster_capacity(rnd, resources) - fixed
    domain = topo.codes(level)[0] if level else np.zeros(n, dtype=np.int64)
    groups: dict[tuple[object, ...], list[int]] = {}
    for i in range(n):
        key = (
            tuple(free[i].tolist()),
            tuple(sorted(cand.get(i, {}).items())),
            int(domain[i]),
            bool(busy[i]),
            tuple(bool(m[i]) for m in masks),
        )
        groups.setdefault(key, []).append(i)
    levels = topo.levels[: topo.depth(level) + 1] if level else []
    return [
        NodeClass(
            nodes=nodes,
            free=free[nodes[0]].copy(),
            candidates=dict(cand.get(nodes[0], {})),
            domains={lv: topo.domain(topo.node_names[nodes[0]], lv) for lv in levels},
            idle=not busy[nodes[0]],
        )
        for nodes in groups.values()
    ]


def fast_classes(rnd: Round, topo: Topology, resources: list[str], candidates: list[int]) -> list[NodeClass]:
    growers = pf._movable_running(rnd)[1]
    masks, _ = pf._eligibility(rnd, topo, growers)
    level = pf._relevant_level(rnd, growers)
    pods = pf._RunningPods.of(rnd, topo, resources, candidates)
    free = arrays.cluster_capacity(rnd, resources) - pods.fixed_usage()
    return pf._classes(rnd, topo, free, masks, pods, level)


def described(classes: list[NodeClass]) -> list[tuple[object, ...]]:
    return [(c.nodes, c.free.tolist(), list(c.candidates.items()), c.domains, c.idle) for c in classes]


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_running=6))
def test_classes_match_the_per_node_definition(rnd: Round) -> None:
    topo = Topology(rnd.cluster)
    resources = pf.resource_names(rnd)
    candidates, _ = pf._movable_running(rnd)
    for movable in (candidates, list(range(len(rnd.running)))):  # also: every running gang movable
        assert described(fast_classes(rnd, topo, resources, movable)) == described(
            reference_classes(rnd, topo, resources, movable)
        )


def test_classes_match_on_a_shipped_round() -> None:
    rnd = load_round(ROOT / "instances" / "scale-M.json")
    topo = Topology(rnd.cluster)
    resources = pf.resource_names(rnd)
    movable = list(range(len(rnd.running)))
    fast = fast_classes(rnd, topo, resources, movable)
    assert len(fast) > 10
    assert described(fast) == described(reference_classes(rnd, topo, resources, movable))


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(0, 40), st.integers(0, 4), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_row_groups_numbers_equal_rows_in_order_of_first_row(rows: int, cols: int, values: int, seed: int) -> None:
    key = np.random.default_rng(seed).integers(0, values, size=(rows, cols))
    first: dict[tuple[int, ...], int] = {}
    expected = [first.setdefault(tuple(row), len(first)) for row in key.tolist()]
    assert pf._row_groups(key).tolist() == expected


def test_candidate_signatures_compare_whole_pod_sets() -> None:
    # Nodes 0 and 3 hold the same groups; node 1 a subset of them; node 2 other counts; 4 none.
    node = np.array([0, 0, 1, 2, 2, 3, 3])
    gang = np.array([1, 2, 1, 1, 2, 1, 2])
    role = np.array([0, 0, 0, 0, 0, 0, 0])
    count = np.array([1, 2, 1, 1, 3, 1, 2])
    ids = pf._candidate_signatures(5, node, gang, role, count).tolist()
    assert ids[0] == ids[3]
    assert len({ids[0], ids[1], ids[2], ids[4]}) == 4
    assert ids[4] == 0


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_running=6))
def test_prefilter_prunes_as_the_per_gang_sums_say(rnd: Round) -> None:
    """Gangs kept are exactly those whose roles reach their minimum (the plain per-gang sums)."""
    pre = prefilter(rnd)
    sizes = np.array([c.size for c in pre.classes], dtype=np.int64)
    for gi in pre.pending:
        gang = rnd.pending[gi]
        totals = [
            int(np.minimum(sizes * pre.fits[pf.RoleKey("pending", gi, ri)], r.replicas).sum())
            for ri, r in enumerate(gang.roles)
        ]
        assert all(t >= gang.role_minimum(r) for t, r in zip(totals, gang.roles, strict=True))
        assert sum(totals) >= gang.minimum


def test_request_matrix_is_the_same_for_few_and_many_rows() -> None:
    requests = [{"gpu": i % 3 * 1000, "cpu": 500 * i} for i in range(20)]
    resources = ["cpu", "gpu", "memory"]
    many = arrays.request_matrix(requests, resources)
    few = np.concatenate([arrays.request_matrix(requests[i : i + 2], resources) for i in range(0, 20, 2)])
    assert many.dtype == few.dtype == np.int64
    assert many.flags.c_contiguous
    assert (many == few).all()


def test_request_matrix_names_an_unknown_resource_either_way() -> None:
    for rows in (1, 20):
        try:
            arrays.request_matrix([{"gpu": 1}] * (rows - 1) + [{"tpu": 1}], ["gpu"])
        except KeyError as error:
            assert "tpu" in str(error)
        else:
            raise AssertionError("expected a KeyError")


def test_topology_views_agree_with_node_paths() -> None:
    rnd = load_round(ROOT / "instances" / "topology.json")
    topo = Topology(rnd.cluster)
    nodes = rnd.cluster.nodes
    for depth, level in enumerate(topo.levels):
        codes, names = topo.codes(level)
        path = [(n.topology[level] if depth < len(rnd.cluster.topology_levels) else n.name) for n in nodes]
        assert names == list(dict.fromkeys(path))
        assert [names[c] for c in codes.tolist()] == path
        assert topo.domains_of(level, list(range(len(nodes)))) == path
        assert all(topo.domain(n.name, level) == p for n, p in zip(nodes, path, strict=True))
        for name in names:
            assert topo.nodes_in(level, name) == [n.name for n, p in zip(nodes, path, strict=True) if p == name]
    a, b = nodes[0].name, nodes[-1].name
    assert topo.distance(a, a) == 0
    assert topo.distance(a, b) == len(topo.levels) - next(
        d for d, lv in enumerate(topo.levels) if topo.domain(a, lv) != topo.domain(b, lv)
    )
    # The graph is built on demand: root -> each level -> node, every vertex with its level.
    graph = topo.graph
    assert graph.number_of_nodes() == 1 + sum(len(topo.codes(lv)[1]) for lv in topo.levels)
    assert all(graph.nodes[("node", n.name)]["level"] == "node" for n in nodes)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_running=6))
def test_movable_running_matches_the_per_gang_definition(rnd: Round) -> None:
    """Gang maxima summed over flat role arrays equal the cached property, gang by gang."""
    assert pf._maxima(rnd.running) == [g.maximum for g in rnd.running]
    growers = [i for i, g in enumerate(rnd.running) if len(g.pods) < g.maximum and not pf._sliced(g)]
    top = max([g.priority for g in rnd.pending] + [rnd.running[i].priority for i in growers], default=None)
    if not rnd.policy.preemption or top is None:
        candidates = []
    else:
        candidates = [i for i, g in enumerate(rnd.running) if g.preemptible and g.priority < top]
    assert pf._movable_running(rnd) == (candidates, growers)


def test_gangs_pruned_with_their_group_keep_no_required_domains() -> None:
    pre = prefilter(GROUP_PRUNED)
    assert pre.pruned["job0"].code == "eligibility"  # every node is tainted, job0 tolerates nothing
    assert pre.pruned["job1"].code == "group"
    assert pre.pending == []
    assert pre.required_domains == {}
    assert set(pre.required_domains) <= set(pre.pending)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_running=6))
@example(GROUP_PRUNED)
def test_pending_verdicts_shared_per_shape_match_one_gang_at_a_time(rnd: Round) -> None:
    """Verdicts memoized per gang shape are those of a fresh memo per gang (messages included)."""
    pre = prefilter(rnd)
    assert set(pre.required_domains) <= set(pre.pending)
    sums = pf._FitSums(pre)
    before = pf._usage_before(rnd) if rnd.queues else None
    shared: dict[tuple[object, ...], pf._RoomVerdict] = {}
    for gi, gang in enumerate(rnd.pending):
        fits = [(key, fit) for key, fit in pre.fits.items() if key.kind == "pending" and key.gang == gi]
        alone = pf._pending_verdict(pre, gi, gang, fits, sums, before, {})
        alone_domains = pre.required_domains.pop(gi, None)
        memo = pf._pending_verdict(pre, gi, gang, fits, sums, before, shared)
        assert memo == alone
        assert pre.required_domains.pop(gi, None) == alone_domains


def test_a_role_short_of_its_own_minimum_is_named_with_its_room() -> None:
    """Issue 14: a 2-master gang with room for 1 master was told "needs 16 gpu for 4 pods; the
    whole cluster offers room for 4" (the total, not the role that does not fit)."""
    rnd = load_round(ROOT / "tests" / "fixtures" / "regressions" / "reasons-role-short.json")
    pruned = prefilter(rnd).pruned["job"]
    assert pruned.code == "capacity"
    assert pruned.reason == (
        "role 'master' needs 2 pods (40 cpu each); the whole cluster offers room for 1 even after every allowed "
        "preemption"
    )


def _lone_round(**policy: object) -> Round:
    """Two 8-GPU nodes, each with one 1-GPU priority-0 job running; waiting: a priority-5 and a
    priority-0 gang of one 8-GPU pod each."""
    from tests.builders import cluster, make_round, pending, running

    return make_round(
        cluster(2),
        running=[running("run0", ["n0"], priority=0), running("run1", ["n1"], priority=0)],
        pending=[pending("high", 1, 8, priority=5), pending("low", 1, 8, priority=0)],
        **policy,  # type: ignore[arg-type]
    )


def test_a_gang_that_may_preempt_nothing_fits_only_in_the_free_room() -> None:
    """Rule 5 (freed nodes serve preemptors only): the priority-0 gang may land on no node
    where a pod was evicted, and it may evict none itself, so 7 free GPUs per node are all it
    can have: it is pruned, with the reason. The priority-5 gang may evict a priority-0 job:
    kept, and started. Before, both counted the candidates' room, and the priority-0 gang
    reached the model and the bounds (the fragmented 16,384-node round: 194 such gangs,
    1,167 GPU-eq of priority 0's node-class bound)."""
    import gangopt

    rnd = _lone_round()
    pre = prefilter(rnd)
    assert set(pre.pruned) == {"low"}
    assert pre.pruned["low"].code == "capacity"
    assert pre.pruned["low"].reason == (
        "role 'worker': no node has room for one pod (8 gpu), even after every allowed preemption"
    )
    assert [rnd.pending[i].name for i in pre.pending] == ["high"]
    assert pre.fits[pf.RoleKey("pending", 0, 0)].tolist() == [1, 1]  # a class per node: their jobs differ
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    assert plan.admitted == ["high"]
    assert [w.gang for w in plan.waiting] == ["low"]


def test_a_gang_that_may_preempt_outside_the_priority_order_keeps_the_candidates_room() -> None:
    """A queue that may preempt newer gangs of its own priority (`lower_or_newer_equal_priority`)
    reaches past the priority order: the priority-0 gang may then evict a newer priority-0 job,
    so its room is not cut to the free room (it is kept)."""
    from gangopt.schema import Queue, QueuePreemption

    rnd = _lone_round()
    queue = Queue(name="default", preemption=QueuePreemption(within_queue="lower_or_newer_equal_priority"))
    rnd = rnd.model_copy(update={"queues": [queue]})
    assert pf._preempting_nothing(rnd, pf._movable_running(rnd)[0]) is None
    assert "low" not in prefilter(rnd).pruned


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(max_running=6))
def test_the_free_room_alone_for_gangs_that_may_preempt_nothing(rnd: Round) -> None:
    """A pending role of a gang at or below the lowest candidate's priority (no queue reaching
    past the priority order) fits per class as in the room every running pod leaves, the
    plain per-node count; the others as in the room the pods that always stay leave."""
    pre = prefilter(rnd)
    candidates, _ = pf._movable_running(rnd)
    alone = pf._preempting_nothing(rnd, candidates)
    free = np.maximum(arrays.free_capacity(rnd, pre.resources), 0)
    for key, fit in pre.fits.items():
        if key.kind != "pending":
            continue
        gang = rnd.pending[key.gang]
        role = gang.roles[key.role]
        request = pf.request_vector(role, pre.resources)
        for c, cls in enumerate(pre.classes):
            room = free[cls.nodes[0]] if alone is not None and gang.priority <= alone else np.maximum(cls.free, 0)
            plain = arrays.fit_counts(room[None, :], request, cap=role.replicas)[0]
            assert fit[c] in (0, plain)  # 0: not eligible there
            # every node of a class leaves the same room (the same free room and candidates)
            assert (free[cls.nodes] == free[cls.nodes[0]]).all()
