"""The CP-SAT model checked alone, one small round per rule of docs/design.md, "The model".

Each test builds a tiny round, encodes it (``encode(prefilter(rnd))``) and asks a plain
CP-SAT solver whether the model allows a decision the rule allows (feasible) and refuses
one it forbids (infeasible). Nothing here goes through the door, the stages or the
expansion: a wrong row in the encoding shows up here, by rule.
"""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from gangopt.objective import SCALE, score
from gangopt.schema import BorrowWithinCohort, Queue, QueuePreemption, Round
from gangopt.solvers.cpsat.encoding import Encoding
from tests.builders import cluster, make_round, pending, queue, role, running
from tests.solvers.cpsat.probe import (
    both,
    class_of,
    encoding_of,
    feasible,
    lexicographic,
    plan_of,
    solve,
    total_at_least,
    total_equal,
    value,
    x_of,
    x_on,
)


def admit(enc: Encoding, *gangs: int, others: int | None = 0) -> dict[cp_model.IntVar, int]:
    """``y`` fixed to 1 for ``gangs`` and to ``others`` (when not None) for the rest."""
    fix = {enc.y[g]: 1 for g in gangs}
    if others is not None:
        fix.update({var: others for g, var in enc.y.items() if g not in gangs})
    return fix


# ----------------------------------------------------------------------------- capacity


def test_capacity_of_a_one_node_class_is_exact_per_resource() -> None:
    """Capacity, one-node class: Σ_r a_{r,q} x_{r,k} ≤ F_{k,q} — two 6-GPU pods never share an
    8-GPU node, one does; and the row holds per resource (CPU binds when GPUs do not)."""
    rnd = make_round(cluster(1, gpus=8), pending=[pending("a", gpu=6), pending("b", gpu=6)])
    enc = encoding_of(rnd)
    assert len(enc.classes) == 1 and enc.classes[0].cls.size == 1
    assert feasible(enc, admit(enc, 0))
    assert feasible(enc, admit(enc, 1))
    assert not feasible(enc, admit(enc, 0, 1))

    rnd = make_round(cluster(1, gpus=8, cpu=10), pending=[pending("a", gpu=1, cpu=6), pending("b", gpu=1, cpu=6)])
    enc = encoding_of(rnd)
    assert feasible(enc, admit(enc, 0))
    assert not feasible(enc, admit(enc, 0, 1))


def test_capacity_of_a_class_of_one_shape_counts_pods_per_node() -> None:
    """Capacity, one shape, no candidates: Σ_r x_{r,k} ≤ n_k · ⌊F_k / a⌋ — two 8-GPU nodes with
    7 GPUs free each (a fixed 1-GPU pod on each, so the class is not idle and no opened-node
    row helps): three 4-GPU pods need 12 of the 14 free GPUs, but one pod per node fits."""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("fixed", ["n0", "n1"], gpu=1, preemptible=False)],
        pending=[pending(f"g{i}", gpu=4) for i in range(3)],
    )
    enc = encoding_of(rnd)
    assert len(enc.classes) == 1 and enc.classes[0].cls.size == 2 and not enc.classes[0].cls.idle
    assert not enc.classes[0].patterns  # one shape: the plain count row
    assert feasible(enc, admit(enc, 0, 1))
    assert not feasible(enc, admit(enc, 0, 1, 2))


def test_packing_patterns_refuse_what_fits_in_total_but_on_no_node() -> None:
    """Capacity by patterns: Σ_p z_{k,p} = n_k and per shape Σ x ≤ Σ_p slots_{p,σ} z_{k,p} —
    two 6-GPU pods and one 4-GPU pod fill 16 GPUs of two 8-GPU nodes exactly, yet no node takes
    6 + 4: the class model must say infeasible; any two of them fit."""
    rnd = make_round(cluster(2, gpus=8), pending=[pending("a", gpu=6), pending("b", gpu=6), pending("c", gpu=4)])
    enc = encoding_of(rnd)
    assert len(enc.classes) == 1
    cm = enc.classes[0]
    assert cm.patterns and cm.cls.size == 2
    assert not feasible(enc, admit(enc, 0, 1, 2))
    for pair in ((0, 1), (0, 2), (1, 2)):
        solution = solve(enc, admit(enc, *pair))
        assert solution is not None, pair
        assert sum(solution[z.index] for z in cm.z) == cm.cls.size  # Σ_p z_{k,p} = n_k


def test_capacity_on_a_class_sees_every_resource_that_can_bind() -> None:
    """Shapes that bind (docs/design.md, "Time limit, large rounds"): a resource is left out of a
    class's shapes only when no pod asks more of it per GPU than the class has per GPU — two
    nodes of 8 GPUs and 16 CPUs: 1-GPU pods asking 8 CPUs fit two per node (four, not five,
    though GPUs would take sixteen); pods asking 1 CPU per GPU are counted by GPUs alone."""
    cpu_bound = make_round(
        cluster(2, gpus=8, cpu=16),
        pending=[pending("many", replicas=5, min_replicas=1, gpu=1, cpu=8), pending("two", replicas=2, gpu=2, cpu=2)],
    )
    enc = encoding_of(cpu_bound)
    (cm,) = enc.classes
    assert cm.dims == [0, 1]
    many = x_of(enc, "pending", 0)
    assert feasible(enc, {enc.y[0]: 1, enc.y[1]: 0}, total_equal(many, 4))
    assert not feasible(enc, {enc.y[0]: 1}, total_equal(many, 5))

    gpu_bound = make_round(
        cluster(2, gpus=8, cpu=16),
        pending=[pending("many", replicas=16, min_replicas=1, gpu=1, cpu=1), pending("two", replicas=2, gpu=2, cpu=2)],
    )
    enc = encoding_of(gpu_bound)
    (cm,) = enc.classes
    assert cm.dims == [0]
    many = x_of(enc, "pending", 0)
    assert feasible(enc, {enc.y[0]: 1, enc.y[1]: 0}, total_equal(many, 16))
    assert not feasible(enc, {enc.y[0]: 1, enc.y[1]: 1}, total_at_least(many, 13))


def test_patterns_count_kept_candidate_pods_per_node() -> None:
    """Patterns with candidates: kept_{v,r,k} = Σ_p keep_{p,v,r} z_{k,p} — an elastic victim with
    one 4-GPU pod on each of two nodes may keep both only if a new 8-GPU pod finds no room;
    the 8-GPU gang starts only if one node is emptied (kept = 1, a shrink)."""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("v", ["n0", "n1"], gpu=4, min_replicas=1, replicas=2)],
        pending=[pending("h", gpu=8, priority=5)],
    )
    enc = encoding_of(rnd)
    (cm,) = enc.classes
    assert cm.patterns and cm.entries == [(0, "worker")]
    kept = enc.kept[(0, "worker", 0)]
    assert not feasible(enc, {enc.y[0]: 1, kept: 2})
    assert feasible(enc, {enc.y[0]: 1, kept: 1, enc.alive[0]: 1})
    assert feasible(enc, {enc.y[0]: 0, kept: 2})


# ----------------------------------------------------------------------------- all-or-nothing


def test_a_pending_gang_starts_nothing_or_between_its_minimum_and_maximum() -> None:
    """All-or-nothing: min_g y_g ≤ Σ x ≤ max_g y_g, and per role rmin_r y_g ≤ Σ_k x ≤ replicas_r y_g."""
    rnd = make_round(cluster(1, gpus=8), pending=[pending("e", replicas=4, gpu=1, min_replicas=2)])
    enc = encoding_of(rnd)
    xs = x_of(enc, "pending", 0)
    assert not feasible(enc, {enc.y[0]: 0}, total_equal(xs, 1))  # no pods without y
    assert not feasible(enc, {enc.y[0]: 1}, total_equal(xs, 1))  # below the minimum
    assert feasible(enc, {enc.y[0]: 1}, total_equal(xs, 2))
    assert feasible(enc, {enc.y[0]: 1}, total_equal(xs, 4))
    assert not feasible(enc, {enc.y[0]: 1}, total_at_least(xs, 5))  # above the maximum


def test_gang_wide_bounds_and_role_minimums_hold_together() -> None:
    """All-or-nothing over roles: min_members 3, max_members 4 over two roles of 3 replicas
    (role minimum 1 each): 1+1 too few, 3+2 too many, 0+3 leaves a role empty, 2+2 fits."""
    roles = [role("a", 3, gpu=1, min_replicas=1), role("b", 3, gpu=1, min_replicas=1)]
    rnd = make_round(cluster(1, gpus=8), pending=[pending("g", roles=roles, min_members=3, max_members=4)])
    enc = encoding_of(rnd)
    a, b = x_of(enc, "pending", 0, 0), x_of(enc, "pending", 0, 1)

    def split(na: int, nb: int) -> bool:
        return feasible(enc, {enc.y[0]: 1}, both(total_equal(a, na), total_equal(b, nb)))

    assert split(2, 2)
    assert split(2, 1)
    assert not split(1, 1)
    assert not split(3, 2)
    assert not split(0, 3)


def test_gangs_of_one_group_start_together() -> None:
    """Gang groups: y_g = y_h — one member alone is refused, both together are allowed."""
    rnd = make_round(cluster(2, gpus=8), pending=[pending("a", gpu=8, group="grp"), pending("b", gpu=8, group="grp")])
    enc = encoding_of(rnd)
    assert not feasible(enc, {enc.y[0]: 1, enc.y[1]: 0})
    assert not feasible(enc, {enc.y[0]: 0, enc.y[1]: 1})
    assert feasible(enc, {enc.y[0]: 1, enc.y[1]: 1})


# ----------------------------------------------------------------------------- topology


def test_required_topology_puts_every_pod_in_one_domain() -> None:
    """Required level: Σ_d w_{g,d} = y_g and Σ_{k∈d} x ≤ max_g w_{g,d} — two 8-GPU pods that
    must share a rack: one per rack is refused, both in one rack allowed."""
    rnd = make_round(cluster(4, gpus=8, racks=2), pending=[pending("g", replicas=2, gpu=8, required="rack")])
    enc = encoding_of(rnd)
    r0, r1 = class_of(enc, "n0"), class_of(enc, "n2")
    assert r0 != r1
    x0, x1 = x_on(enc, "pending", 0, r0), x_on(enc, "pending", 0, r1)
    assert x0 is not None and x1 is not None
    assert not feasible(enc, {enc.y[0]: 1, x0: 1, x1: 1})
    assert feasible(enc, {enc.y[0]: 1, x0: 2})
    assert feasible(enc, {enc.y[0]: 1, x1: 2})


def test_required_topology_keeps_pods_out_of_domains_the_prefilter_ruled_out() -> None:
    """Required level: x is zero outside the domains the prefilter kept — rack r1 has room for
    one of the two 8-GPU pods only (a fixed pod on n2), so no pod may go to r1 at all."""
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        running=[running("fixed", ["n2"], gpu=4, preemptible=False)],
        pending=[pending("g", replicas=2, gpu=8, required="rack")],
    )
    enc = encoding_of(rnd)
    assert enc.pre.required_domains[0] == ["r0"]
    n3 = class_of(enc, "n3")
    x3 = x_on(enc, "pending", 0, n3)
    # The variable may be left out or forced to zero; either way a pod on n3 is impossible.
    assert x3 is None or not feasible(enc, {x3: 1})
    assert feasible(enc, {enc.y[0]: 1})


def test_preferred_topology_costs_one_spread_cost_per_extra_domain() -> None:
    """Preferred level P: Σ_{k∈d} x ≤ max_g u_{g,d}, Σ_d u_{g,d} ≥ y_g, cost per extra domain —
    the best secondary value of a gang split over two racks is exactly one spread cost below
    that of the same gang in one rack (both open two nodes)."""
    rnd = make_round(cluster(4, gpus=8, racks=2), pending=[pending("g", replicas=4, gpu=4, preferred="rack")])
    enc = encoding_of(rnd)
    assert enc.terms.spread_cost > 0
    r0, r1 = class_of(enc, "n0"), class_of(enc, "n2")
    x0, x1 = x_on(enc, "pending", 0, r0), x_on(enc, "pending", 0, r1)
    assert x0 is not None and x1 is not None
    together = solve(enc, {enc.y[0]: 1, x0: 4}, maximize=enc.secondary)
    apart = solve(enc, {enc.y[0]: 1, x0: 2, x1: 2}, maximize=enc.secondary)
    assert together is not None and apart is not None
    assert value(enc.secondary, together) - value(enc.secondary, apart) == enc.terms.spread_cost


def test_preferred_topology_charges_the_levels_above_at_half_the_cost() -> None:
    """Issue 15: racks r0..r3 of two nodes, blocks b0 = {r0, r1}, b1 = {r2, r3}; a 2-rack
    gang preferring one rack: two racks of one block are worth exactly the block cost
    (spread_cost / 2) more than two racks of two blocks."""
    rnd = make_round(cluster(8, gpus=8, racks=4, blocks=2), pending=[pending("g", replicas=4, gpu=8, preferred="rack")])
    enc = encoding_of(rnd)
    levels = dict(enc.terms.spread_levels(rnd.pending[0]))
    assert levels == {"rack": enc.terms.spread_cost, "block": enc.terms.spread_cost // 2}
    x = [x_on(enc, "pending", 0, class_of(enc, f"n{2 * r}")) for r in range(4)]
    assert all(v is not None for v in x)
    same = solve(enc, {enc.y[0]: 1, x[0]: 2, x[1]: 2}, maximize=enc.secondary)
    across = solve(enc, {enc.y[0]: 1, x[0]: 2, x[2]: 2}, maximize=enc.secondary)
    assert same is not None and across is not None
    assert value(enc.secondary, same) - value(enc.secondary, across) == levels["block"]


def test_slices_fill_each_domain_with_whole_slices() -> None:
    """Slices at level S of size m: Σ_{k∈d} x = m · s_{g,d} — four pods in slices of two per
    rack: 2 + 2 and 4 + 0 are allowed, 3 + 1 is not."""
    rnd = make_round(
        cluster(4, gpus=8, racks=2),
        pending=[pending("g", replicas=4, gpu=4, slice_level="rack", slice_size=2)],
    )
    enc = encoding_of(rnd)
    r0, r1 = class_of(enc, "n0"), class_of(enc, "n2")
    x0, x1 = x_on(enc, "pending", 0, r0), x_on(enc, "pending", 0, r1)
    assert x0 is not None and x1 is not None
    assert feasible(enc, {enc.y[0]: 1, x0: 2, x1: 2})
    assert feasible(enc, {enc.y[0]: 1, x0: 4, x1: 0})
    assert not feasible(enc, {enc.y[0]: 1, x0: 3, x1: 1})


# ----------------------------------------------------------------------------- quotas


def test_a_queue_outside_a_cohort_stays_within_its_nominal_quota() -> None:
    """Quotas: usage after the plan ≤ max(limit, usage before), limit = nominal outside a
    cohort — a queue of 8 GPUs starts one 8-GPU gang, not two, on a 16-GPU cluster."""
    rnd = make_round(
        cluster(2, gpus=8),
        queues=[queue("q", gpu=8)],
        pending=[pending("a", gpu=8, queue="q"), pending("b", gpu=8, queue="q")],
    )
    enc = encoding_of(rnd)
    assert feasible(enc, admit(enc, 0))
    assert feasible(enc, admit(enc, 1))
    assert not feasible(enc, admit(enc, 0, 1))


def test_a_cohort_lends_up_to_the_sum_of_its_nominal_quotas() -> None:
    """Quotas, cohort without borrowing limit: only the cohort row binds, total ≤ Σ nominal —
    q1 (4 GPUs) may borrow q2's 4 for an 8-GPU gang, but not start it beside q2's 4-GPU gang."""
    rnd = make_round(
        cluster(2, gpus=8),
        queues=[queue("q1", cohort="c", gpu=4), queue("q2", cohort="c", gpu=4)],
        pending=[pending("a", gpu=8, queue="q1"), pending("b", gpu=4, queue="q2")],
    )
    enc = encoding_of(rnd)
    assert feasible(enc, admit(enc, 0))
    assert feasible(enc, admit(enc, 1))
    assert not feasible(enc, admit(enc, 0, 1))


def test_a_borrowing_limit_caps_a_queue_inside_its_cohort() -> None:
    """Quotas, borrowing limit: limit = nominal + borrowing_limit — q1 (4 GPUs, may borrow 2)
    starts 6 GPUs, not 8, though the cohort (12) has room for 8."""
    rnd = make_round(
        cluster(2, gpus=8),
        queues=[
            queue("q1", cohort="c", gpu=4, borrowing_limit={"gpu": 2}),
            queue("q2", cohort="c", gpu=8),
        ],
        pending=[pending("a", gpu=4, queue="q1"), pending("b", gpu=2, queue="q1"), pending("c", gpu=2, queue="q1")],
    )
    enc = encoding_of(rnd)
    assert feasible(enc, admit(enc, 0, 1))  # 6 GPUs
    assert not feasible(enc, admit(enc, 0, 1, 2))  # 8 GPUs


def over_quota_round(*, preemptible: bool) -> Round:
    """Queue q (4 GPUs) already uses 8 through running gang "old"; "new" (1 GPU, q, higher
    priority) waits; n1 is idle."""
    return make_round(
        cluster(2, gpus=8),
        queues=[queue("q", gpu=4)],
        running=[running("old", ["n0"], gpu=8, queue="q", preemptible=preemptible)],
        pending=[pending("new", gpu=1, queue="q", priority=5)],
    )


def test_usage_above_a_limit_before_the_round_may_stay_but_not_grow() -> None:
    """Quotas: usage after ≤ max(limit, usage before) — a queue already at 8 of its 4 GPUs keeps
    its running gang (usage stays 8) but starts nothing more beside it; after evicting it
    (usage 1 ≤ 4) the new gang may start on the freed node."""
    enc = encoding_of(over_quota_round(preemptible=True))
    assert 0 in enc.alive
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 0})
    assert not feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1})
    assert feasible(enc, {enc.alive[0]: 0, enc.y[0]: 1})

    enc = encoding_of(over_quota_round(preemptible=False))
    assert not enc.alive  # a fixed gang: its usage is a constant of the row
    assert not feasible(enc, {enc.y[0]: 1})


def test_a_running_gang_over_its_queue_limit_does_not_grow() -> None:
    """Quotas on growth: an elastic gang whose queue is already over its limit gains no pod;
    the same gang without the quota grows."""
    grower = running("e", ["n0"] * 4, gpu=1, queue="q", replicas=8, min_replicas=2)
    free = make_round(cluster(1, gpus=8), queues=[queue("q", gpu=8)], running=[grower])
    tight = make_round(cluster(1, gpus=8), queues=[queue("q", gpu=2)], running=[grower])
    for rnd, grows in ((free, True), (tight, False)):
        enc = encoding_of(rnd)
        assert 0 in enc.alive
        assert feasible(enc, constrain=total_at_least(x_of(enc, "running", 0), 1)) is grows


# ----------------------------------------------------------------------------- preemption


def test_a_victim_is_evicted_whole_or_shrunk_within_its_minimum() -> None:
    """Running gang v: members within [min_v·alive_v, max_v·alive_v] — a rigid victim keeps 0
    or 2 of its pods, never 1; an elastic one (minimum 2 of 4) may keep 2 but not 1."""
    rigid = make_round(
        cluster(2, gpus=8),
        running=[running("v", ["n0", "n1"], gpu=8)],
        pending=[pending("h", gpu=8, priority=5)],
    )
    enc = encoding_of(rigid)
    kept = [var for _, _, var in enc.kept_of_gang[0]]
    assert not feasible(enc, {enc.alive[0]: 1}, total_equal(kept, 1))
    assert feasible(enc, {enc.alive[0]: 0, enc.y[0]: 1})
    assert feasible(enc, {enc.alive[0]: 1}, total_equal(kept, 2))

    elastic = make_round(
        cluster(4, gpus=8),
        running=[running("v", ["n0", "n1", "n2", "n3"], gpu=8, min_replicas=2)],
        pending=[pending("h", replicas=2, gpu=8, priority=5)],
    )
    enc = encoding_of(elastic)
    kept = [var for _, _, var in enc.kept_of_gang[0]]
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1}, total_equal(kept, 2))
    assert not feasible(enc, {enc.alive[0]: 1}, total_equal(kept, 1))


def test_a_preemption_needs_a_strictly_higher_priority_beneficiary_on_the_victims_node() -> None:
    """Preemption needs a beneficiary: victim_v ≤ Σ x of strictly higher priority on classes
    where v runs — evicting v (priority 0) for a same-priority gang is refused; for a
    higher-priority gang only when that gang lands on v's node, not on the idle one."""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("v", ["n0"], gpu=8, priority=0)],
        pending=[pending("h", gpu=8, priority=5), pending("s", gpu=8, priority=0)],
    )
    enc = encoding_of(rnd)
    on_v, idle = class_of(enc, "n0"), class_of(enc, "n1")
    h_on_v, h_idle = x_on(enc, "pending", 0, on_v), x_on(enc, "pending", 0, idle)
    assert h_on_v is not None and h_idle is not None
    assert not feasible(enc, {enc.alive[0]: 0, enc.y[0]: 0})  # nobody gains: no eviction
    assert not feasible(enc, {enc.alive[0]: 0, enc.y[0]: 0, enc.y[1]: 1})  # same priority only
    assert not feasible(enc, {enc.alive[0]: 0, h_idle: 1})  # the beneficiary lands elsewhere
    assert feasible(enc, {enc.alive[0]: 0, h_on_v: 1})


def test_only_a_lower_priority_preemptible_gang_is_a_candidate() -> None:
    """Candidates (prefilter) and the model: a gang of the top priority, or a non-preemptible
    one, is never a victim (its pods are constants of the capacity rows), so an elastic gang
    of 1 to 2 pods of 8 GPUs starts one pod beside it, not two; a lower-priority preemptible
    one makes way for both."""
    blockers = (
        running("v", ["n0"], gpu=8, priority=5),
        running("v", ["n0"], gpu=8, preemptible=False),
        running("v", ["n0"], gpu=8, priority=0),
    )
    for victim in blockers:
        rnd = make_round(
            cluster(2, gpus=8), running=[victim], pending=[pending("h", replicas=2, min_replicas=1, gpu=8, priority=5)]
        )
        enc = encoding_of(rnd)
        movable = victim.preemptible and victim.priority < 5
        assert bool(enc.alive) is movable
        xs = x_of(enc, "pending", 0)
        assert feasible(enc, {enc.y[0]: 1}, total_equal(xs, 1))
        assert feasible(enc, {enc.y[0]: 1}, total_equal(xs, 2)) is movable


def test_nodes_freed_by_an_eviction_take_new_pods_of_higher_priority_only() -> None:
    """Rule 5 (node form, eviction): Σ x_low,k ≤ ub · alive_v on a class where v loses pods —
    a 1-GPU priority-5 pod may evict v, but the 7 GPUs left on v's node may not start a
    priority-1 gang (v's own priority) in the same round; on the other node it may start.
    (``s`` may preempt the priority-0 job ``u``, so its room counts the candidates'; a gang
    that may preempt no one is held to the free room by the prefilter and has no variable on
    v's node at all: tests/test_prefilter.py.)"""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("v", ["n0"], gpu=8, priority=1), running("u", ["n1"], gpu=1, priority=0)],
        pending=[pending("h", gpu=1, priority=5), pending("s", gpu=7, priority=1)],
    )
    enc = encoding_of(rnd)
    on_v, idle = class_of(enc, "n0"), class_of(enc, "n1")
    h_on_v = x_on(enc, "pending", 0, on_v)
    s_on_v, s_idle = x_on(enc, "pending", 1, on_v), x_on(enc, "pending", 1, idle)
    assert h_on_v is not None and s_on_v is not None and s_idle is not None
    assert feasible(enc, {enc.alive[0]: 0, h_on_v: 1})
    assert not feasible(enc, {enc.alive[0]: 0, h_on_v: 1, s_on_v: 1})
    assert feasible(enc, {enc.alive[0]: 0, h_on_v: 1, s_idle: 1})


def test_a_victims_node_no_higher_gang_can_use_is_not_freed_for_lower_ones() -> None:
    """Rule 5 on a class where no strictly higher pod may land (no helper there): v keeps
    all its pods on it while alive, and once v is evicted (for ``h`` on n0) its pod's node n1
    takes no new pod of v's priority or lower (Σ x_low,k ≤ ub · alive_v). (``s`` may preempt
    the priority-0 job ``u`` on n2, so its room counts the candidates'.)"""
    rnd = make_round(
        cluster(3, gpus=8, labels={"n0": {"pool": "h"}}),
        running=[running("v", ["n0", "n1"], gpu=8, priority=1), running("u", ["n2"], gpu=1, priority=0)],
        pending=[pending("h", gpu=8, priority=5, selector={"pool": "h"}), pending("s", gpu=8, priority=1)],
    )
    enc = encoding_of(rnd)
    n0, n1 = class_of(enc, "n0"), class_of(enc, "n1")
    assert n0 != n1 and x_on(enc, "pending", 0, n1) is None
    s_on_n1 = x_on(enc, "pending", 1, n1)
    assert s_on_n1 is not None
    assert feasible(enc, {enc.alive[0]: 0, enc.y[0]: 1, enc.y[1]: 0})
    assert not feasible(enc, {enc.alive[0]: 0, enc.y[0]: 1, s_on_n1: 1})


def test_a_running_gang_keeps_its_gang_wide_minimum() -> None:
    """Running gang v: Σ members ≥ min_v · alive_v — two roles of 2 pods (role minimum 1 each)
    and min_members 3: keeping one pod of each is refused, keeping three is allowed."""
    roles = [role("a", 2, gpu=4, min_replicas=1), role("b", 2, gpu=4, min_replicas=1)]
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("v", {"a": ["n0", "n1"], "b": ["n0", "n1"]}, roles=roles, min_members=3)],
        pending=[pending("h", replicas=2, min_replicas=1, gpu=4, priority=5)],
    )
    enc = encoding_of(rnd)
    kept = [var for _, _, var in enc.kept_of_gang[0]]
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1}, total_equal(kept, 3))
    assert not feasible(enc, {enc.alive[0]: 1}, total_equal(kept, 2))


def test_nodes_where_a_victim_shrinks_take_new_pods_of_higher_priority_only() -> None:
    """Rule 5 (node form, shrink): the ``loses_{v,k}`` literal — an elastic victim (4 x 2 GPUs,
    minimum 2) shrunk by two pods on its node: a priority-5 gang may use the room, a gang of
    v's priority may not share it. (``s``, held to n0 by its selector, may preempt the
    priority-0 job ``u`` on n1, so its room counts the candidates'.)"""
    rnd = make_round(
        cluster(2, gpus=8, labels={"n0": {"pool": "a"}}),
        running=[
            running("v", ["n0"] * 4, gpu=2, min_replicas=2, priority=1),
            running("u", ["n1"], gpu=1, priority=0),
        ],
        pending=[pending("h", gpu=2, priority=5), pending("s", gpu=2, priority=1, selector={"pool": "a"})],
    )
    enc = encoding_of(rnd)
    kept = [var for _, _, var in enc.kept_of_gang[0]]
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1, enc.y[1]: 0}, total_equal(kept, 3))
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1, enc.y[1]: 0}, total_equal(kept, 2))
    assert not feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1, enc.y[1]: 1}, total_equal(kept, 2))
    assert not feasible(enc, {enc.y[0]: 1, enc.y[1]: 1})  # no shrink lets both in


# ----------------------------------------------------------------------------- growth


def test_a_running_elastic_gang_grows_within_its_replicas_and_the_free_room() -> None:
    """Running gang v, non-candidate: current + grown within [rmin_r, replicas_r] — 2 of 6
    pods of 2 GPUs on an 8-GPU node where a fixed pod holds 2 more (2 GPUs left): it may grow by
    1, not 2 (capacity), and on a larger node by 4, never beyond its replicas."""
    rnd = make_round(
        cluster(1, gpus=8),
        running=[
            running("e", ["n0", "n0"], gpu=2, replicas=6, min_replicas=1),
            running("fixed", ["n0"], gpu=2, preemptible=False),
        ],
    )
    enc = encoding_of(rnd)
    grow = x_of(enc, "running", 0)
    assert grow
    assert feasible(enc, constrain=total_equal(grow, 1))
    assert not feasible(enc, constrain=total_equal(grow, 2))

    rnd = make_round(cluster(1, gpus=64), running=[running("e", ["n0", "n0"], gpu=2, replicas=6, min_replicas=1)])
    enc = encoding_of(rnd)
    grow = x_of(enc, "running", 0)
    assert feasible(enc, constrain=total_equal(grow, 4))
    assert not feasible(enc, constrain=total_at_least(grow, 5))


def test_a_gang_does_not_shrink_on_one_class_and_grow_on_another() -> None:
    """Grow or shrink, across classes: an elastic candidate on n0 and n1 that gives n0's pod
    up for ``h`` may not grow onto the idle n2 in the same round (that would move a pod);
    growing there while keeping both pods, or shrinking alone, is allowed."""
    rnd = make_round(
        cluster(3, gpus=8, labels={"n0": {"pool": "h"}, "n1": {"pool": "h"}}),
        running=[running("e", ["n0", "n1"], gpu=4, replicas=4, min_replicas=1, priority=0)],
        pending=[pending("h", gpu=8, priority=5, selector={"pool": "h"})],
    )
    enc = encoding_of(rnd)
    hosts, idle = class_of(enc, "n0"), class_of(enc, "n2")
    assert hosts != idle
    kept = enc.kept[(0, "worker", hosts)]
    grow = x_on(enc, "running", 0, idle)
    assert grow is not None
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1, kept: 1})
    assert feasible(enc, {enc.alive[0]: 1, kept: 2, grow: 2})
    assert not feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1, kept: 1, grow: 1})


def test_a_gang_that_grows_keeps_every_pod() -> None:
    """Grow or shrink: a candidate gang that gains pods keeps all its pods (no pod moves) — an
    elastic candidate on two nodes may shrink on one or grow, not both at once."""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("e", ["n0", "n1"], gpu=4, replicas=4, min_replicas=1, priority=0)],
        pending=[pending("h", gpu=8, priority=5)],
    )
    enc = encoding_of(rnd)
    assert 0 in enc.alive and 0 in enc.pre.growers
    kept = [var for _, _, var in enc.kept_of_gang[0]]
    grow = x_of(enc, "running", 0)
    assert feasible(enc, {enc.alive[0]: 1}, both(total_equal(kept, 2), total_equal(grow, 2)))
    assert feasible(enc, {enc.alive[0]: 1, enc.y[0]: 1}, total_equal(kept, 1))
    assert not feasible(enc, {enc.alive[0]: 1}, both(total_equal(kept, 1), total_at_least(grow, 1)))


# ----------------------------------------------------------------------------- objective


def objective_round() -> Round:
    """Preemption (a 3-pod victim, so its whole-gang cost is not 3 x its per-pod cost), growth,
    an elastic pending gang, a preferred rack and idle nodes, over two priorities."""
    return make_round(
        cluster(4, gpus=8, racks=2),
        running=[
            running("low", ["n0"] * 3, gpu=2, priority=0, preemption_cost=2.0),
            running("grow", ["n1"], gpu=2, replicas=3, min_replicas=1, priority=5),
            running("shrinks", ["n2"] * 3, gpu=2, min_replicas=1, priority=0, preemption_cost=1.5),
        ],
        pending=[
            pending("high", replicas=2, gpu=4, priority=5, submit_time=0),
            pending("spread", replicas=2, gpu=4, preferred="rack", priority=0, submit_time=5),
            pending("elastic", replicas=4, gpu=2, min_replicas=2, priority=0, submit_time=10),
        ],
        now=3600,
    )


def forced(enc: Encoding, case: str) -> dict[cp_model.IntVar, int]:
    """The decision each objective case forces (by running gang name)."""
    names = [g.name for g in enc.pre.rnd.running]
    low, shrinks = names.index("low"), names.index("shrinks")
    if case == "evict":
        return {enc.alive[low]: 0}
    kept = enc.kept[(shrinks, "worker", class_of(enc, "n2"))]
    if case == "shrink":
        return {enc.alive[low]: 1, enc.alive[shrinks]: 1, kept: 1}
    return {enc.alive[low]: 1, enc.alive[shrinks]: 1, kept: 3}


@pytest.mark.parametrize("case", ["keep", "evict", "shrink", "spread"])
def test_the_tier_and_secondary_terms_equal_the_score_of_the_decoded_plan(case: str) -> None:
    """Objective: each tier's terms (plus its constant) and the secondary terms (plus their
    constant), divided by SCALE, equal ``objective.score`` of the plan the solution stands for;
    checked at the best plan keeping every running gang, evicting one, shrinking one, and with
    the preferred-rack gang split over both racks."""
    rnd = objective_round()
    enc = encoding_of(rnd)
    fix = forced(enc, case)
    constrain = None
    if case == "spread":
        spread = next(gi for gi in enc.y if rnd.pending[gi].name == "spread")
        by_rack: dict[str, list[cp_model.IntVar]] = {"r0": [], "r1": []}
        for (key, k), var in enc.x.items():
            if key.kind == "pending" and key.gang == spread:
                by_rack[enc.classes[k].cls.domains["rack"]].append(var)
        fix[enc.y[spread]] = 1
        constrain = both(total_equal(by_rack["r0"], 1), total_equal(by_rack["r1"], 1))
    solution = solve(enc, fix, constrain, maximize=lexicographic(enc))
    assert solution is not None
    plan = plan_of(enc, solution)
    kinds = {p.kind for p in plan.preemptions}
    assert kinds == {"evict": {"evict"}, "shrink": {"shrink"}}.get(case, set())
    s = score(rnd, plan)
    for tier in s.tiers:
        model_value = value(enc.tiers.get(tier.priority, []), solution) + enc.tier_constant.get(tier.priority, 0)
        assert model_value / SCALE == pytest.approx(tier.value), tier.priority
    assert (value(enc.secondary, solution) + enc.secondary_constant) / SCALE == pytest.approx(s.secondary)


def test_fifo_weights_order_gangs_by_submit_time() -> None:
    """FIFO tie-break: weight n for the oldest pending gang down to 1 for the newest."""
    rnd = make_round(
        cluster(1, gpus=8),
        pending=[
            pending("late", gpu=1, submit_time=20),
            pending("early", gpu=1, submit_time=5),
            pending("mid", gpu=1, submit_time=10),
        ],
    )
    enc = encoding_of(rnd)
    by_index = {v.index: w for v, w in enc.fifo}
    weight = {rnd.pending[gi].name: by_index[var.index] for gi, var in enc.y.items()}
    assert weight == {"early": 3, "mid": 2, "late": 1}


# ----------------------------------------------------------------------------- cohort reclaims


def _reclaim_round(b_nominal: int, a_nominal: int = 8, borrow: str = "never") -> Round:
    """Queue a (reclaim at any priority, no other-queue licence) waits with one 8-GPU gang of
    b's priority; b runs two 8-GPU gangs on two nodes, with nominal ``b_nominal``."""
    policy = QueuePreemption(
        reclaim_within_cohort="any", other_queues="never", borrow_within_cohort=BorrowWithinCohort(policy=borrow)
    )
    return make_round(
        cluster(2, gpus=8),
        queues=[
            Queue(name="a", cohort="c", nominal={"gpu": a_nominal}, preemption=policy),
            Queue(name="b", cohort="c", nominal={"gpu": b_nominal}),
        ],
        running=[running("b1", ["n0"], gpu=8, queue="b"), running("b2", ["n1"], gpu=8, queue="b")],
        pending=[pending("a1", gpu=8, queue="a")],
    )


def test_a_cohort_reclaim_is_licensed_only_while_the_victims_queue_borrows() -> None:
    """Rule 5, clause 3: a1 (equal priority) may take b1's node only while b is above its
    nominal with b1 back (b uses 16 of nominal 8); at nominal 16 b lends nothing back."""
    enc = encoding_of(_reclaim_round(b_nominal=8))
    a1_on_b1 = x_on(enc, "pending", 0, class_of(enc, "n0"))
    assert a1_on_b1 is not None
    assert feasible(enc, {enc.alive[0]: 0, a1_on_b1: 1})
    assert not feasible(enc, {enc.alive[0]: 0, enc.alive[1]: 0})  # b then within its nominal: one only
    enc = encoding_of(_reclaim_round(b_nominal=16))
    assert not feasible(enc, {enc.alive[0]: 0})
    assert not feasible(enc, admit(enc, 0))


def test_a_reclaim_needs_the_reclaimers_queue_within_its_nominal_unless_it_may_borrow() -> None:
    """With a's nominal 0 a1 would borrow: ``borrow_within_cohort`` never refuses the reclaim,
    lower_priority allows it only for strictly higher priorities (a1 is of b1's priority)."""
    for borrow in ("never", "lower_priority"):
        enc = encoding_of(_reclaim_round(b_nominal=0, a_nominal=0, borrow=borrow))
        assert not feasible(enc, {enc.alive[0]: 0}), borrow
    enc = encoding_of(_reclaim_round(b_nominal=0, a_nominal=8))
    assert feasible(enc, {enc.alive[0]: 0})
