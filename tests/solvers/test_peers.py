"""The peer emulations (gangopt.solvers.peers.common): each one's characteristic behaviour on tiny rounds, and
every plan through the independent validator."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

import gangopt
from gangopt.cli import main
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.policies import POLICY_NAMES, make_policy
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.replay.workload import Workload
from gangopt.schema import Plan, Round
from gangopt.solvers import SOLVERS
from gangopt.solvers.greedy.engine import greedy
from gangopt.solvers.peers import (
    SlurmBackfillLike,
    koordinator_like,
    kueue_like,
    slurm_backfill_like,
    volcano_like,
)
from gangopt.validation import validate
from tests.builders import cluster, make_round, pending, queue, running
from tests.replay.test_simulation import job, random_workload
from tests.strategies import examples, rounds

PEERS = [name for name in SOLVERS if name not in ("cpsat", "greedy")]
"""The emulations and the FIFO floor."""


def check(rnd: Round, plan: Plan, solver: str) -> Plan:
    """The plan is valid, names its solver, and accounts for every pending gang once."""
    assert validate(rnd, plan) == []
    assert plan.solver == solver
    assert sorted([*plan.admitted, *(w.gang for w in plan.waiting)]) == sorted(g.name for g in rnd.pending)
    return plan


def nodes_of(plan: Plan, gang: str) -> list[str]:
    return sorted(p.node for p in plan.placements if p.gang == gang)


def reason(plan: Plan, gang: str) -> str:
    return next(w.reasons[0] for w in plan.waiting if w.gang == gang)


def evicted(plan: Plan) -> list[str]:
    return sorted(p.gang for p in plan.preemptions)


# ----------------------------------------------------------------------------- Koordinator


def test_koordinator_preempts_the_min_cost_node_not_the_lowest_priorities() -> None:
    # n0 holds four priority-0 jobs (cost 4 x rank 1), n1 one priority-1 job (cost rank 2).
    rnd = make_round(
        cluster(2),
        running=[
            *(running(f"low{i}", ["n0"], gpu=2, priority=0) for i in range(4)),
            running("mid", ["n1"], gpu=8, priority=1),
        ],
        pending=[pending("urgent", gpu=8, priority=10)],
    )
    plan = check(rnd, koordinator_like(rnd), "koordinator_like")
    assert plan.admitted == ["urgent"] and nodes_of(plan, "urgent") == ["n1"]
    assert evicted(plan) == ["mid"]
    # the greedy baseline evicts the lowest priorities instead
    assert evicted(greedy(rnd)) == ["low0", "low1", "low2", "low3"]


def test_koordinator_spreads_plain_gangs_and_bin_packs_topology_gangs() -> None:
    rnd = make_round(
        cluster(2, racks=1),
        running=[running("busy", ["n0"], gpu=4, preemptible=False)],
        pending=[pending("plain", gpu=4, priority=1), pending("topo", gpu=4, preferred="rack")],
    )
    plan = check(rnd, koordinator_like(rnd), "koordinator_like")
    assert nodes_of(plan, "plain") == ["n1"]  # LeastAllocated: the emptier node
    assert nodes_of(plan, "topo") == ["n0"]  # topology solver: the smallest offerSlot that fits


def test_koordinator_topology_solver_needs_room_for_every_pod_and_says_where() -> None:
    rnd = make_round(
        cluster(4, racks=2),
        running=[running("busy", ["n0", "n2"], gpu=8, preemptible=False)],
        pending=[pending("elastic", replicas=3, min_replicas=2, gpu=8, required="rack")],
    )
    plan = check(rnd, koordinator_like(rnd), "koordinator_like")
    assert plan.admitted == []  # its minimum (2) fits nowhere in one rack either; the solver asks for 3
    text = reason(plan, "elastic")
    assert "network topology solver" in text and "offerSlot: r0=1, r1=1" in text


def test_koordinator_rejects_a_gang_group_strictly() -> None:
    rnd = make_round(
        cluster(2),
        pending=[pending("a", gpu=8, group="g"), pending("b", replicas=2, gpu=8, group="g")],
    )
    plan = check(rnd, koordinator_like(rnd), "koordinator_like")
    assert plan.admitted == [] and plan.placements == []  # each fits alone, not both: none holds GPUs
    assert sorted(w.gang for w in plan.waiting) == ["a", "b"]


# ----------------------------------------------------------------------------- Volcano


def test_volcano_discards_a_job_that_cannot_reach_min_member() -> None:
    rnd = make_round(
        cluster(2),
        pending=[
            pending("big", replicas=3, gpu=8, priority=5),
            pending("elastic", replicas=3, min_replicas=1, gpu=8),
        ],
    )
    plan = check(rnd, volcano_like(rnd), "volcano_like")
    assert plan.admitted == ["elastic"] and len(nodes_of(plan, "elastic")) == 2
    assert reason(plan, "big").startswith("1/3 tasks in gang unschedulable: pod group is not ready, 3 minAvailable")


def test_volcano_preempts_only_tasks_above_min_available() -> None:
    rnd = make_round(
        cluster(2, cpu=32),
        running=[
            running("rigid", ["n0"], gpu=8, cpu=1, priority=0),
            running("flex", ["n1", "n1"], gpu=4, cpu=1, replicas=2, min_replicas=1, priority=0),
        ],
        pending=[pending("urgent", gpu=4, cpu=1, priority=10), pending("whole", gpu=8, cpu=1, priority=10)],
    )
    plan = check(rnd, volcano_like(rnd), "volcano_like")
    assert plan.admitted == ["urgent"]
    assert [(p.gang, p.kind) for p in plan.preemptions] == [("flex", "shrink")]
    assert "whole" in {w.gang for w in plan.waiting}  # "rigid" is never evicted whole


def test_volcano_proportion_splits_the_cluster_between_queues() -> None:
    rnd = make_round(
        cluster(4),
        pending=[
            *(pending(f"a{i}", gpu=8, priority=5, queue="team-a", submit_time=i) for i in range(3)),
            *(pending(f"b{i}", gpu=8, queue="team-b", submit_time=i) for i in range(2)),
        ],
    )
    plan = check(rnd, volcano_like(rnd), "volcano_like")
    assert sorted(plan.admitted) == ["a0", "a1", "b0", "b1"]  # 16 GPUs deserved each
    assert "queue team-a is overused" in reason(plan, "a2")
    assert sorted(greedy(rnd).admitted) == ["a0", "a1", "a2", "b0"]  # priority alone


def test_volcano_hard_topology_takes_the_tightest_hypernode() -> None:
    rnd = make_round(
        cluster(8, racks=4, blocks=2),
        running=[running("busy", ["n0", "n2", "n3"], gpu=8, preemptible=False)],
        pending=[pending("job", replicas=2, gpu=4, required="block")],
    )
    plan = check(rnd, volcano_like(rnd), "volcano_like")
    assert nodes_of(plan, "job") == ["n1", "n1"]  # rack tier first, best bin-pack score


# ----------------------------------------------------------------------------- Kueue


def test_kueue_strict_fifo_head_blocks_its_cluster_queue() -> None:
    rnd = make_round(
        cluster(2),
        queues=[queue("q", gpu=16)],
        running=[running("busy", ["n0"], gpu=8, queue="q", preemptible=False)],
        pending=[
            pending("head", replicas=2, gpu=8, queue="q", priority=5),
            pending("small", gpu=8, queue="q"),
        ],
    )
    strict = check(rnd, kueue_like(rnd, strategy="StrictFIFO"), "kueue_like")
    assert strict.admitted == []
    assert "StrictFIFO: waits behind the head of ClusterQueue q, head" in reason(strict, "small")
    assert "insufficient unused quota for gpu" in reason(strict, "head")
    best_effort = check(rnd, kueue_like(rnd), "kueue_like")
    assert best_effort.admitted == ["small"]


def test_kueue_admits_on_quota_and_does_not_preempt_for_capacity() -> None:
    rnd = make_round(
        cluster(2),
        queues=[queue("q", gpu=64)],
        running=[running("low", ["n0"], gpu=8, queue="q", priority=0)],
        pending=[pending("wide", replicas=2, gpu=8, queue="q", priority=5)],
    )
    plan = check(rnd, kueue_like(rnd), "kueue_like")
    assert plan.admitted == [] and plan.preemptions == []
    assert "quota reserved but pods unschedulable" in reason(plan, "wide")
    assert "1 Insufficient gpu" in reason(plan, "wide")


def test_kueue_reclaims_from_a_borrowing_queue_before_its_own() -> None:
    rnd = make_round(
        cluster(2),
        queues=[queue("a", cohort="all", gpu=12), queue("b", cohort="all", gpu=4)],
        running=[
            running("a-low", ["n0"], gpu=8, queue="a", priority=0),
            running("b-borrow", ["n1"], gpu=8, queue="b", priority=0),
        ],
        pending=[pending("a-urgent", gpu=8, queue="a", priority=5)],
    )
    plan = check(rnd, kueue_like(rnd), "kueue_like")
    assert plan.admitted == ["a-urgent"] and evicted(plan) == ["b-borrow"]
    # greedy orders borrowers first too (issue 15): a-low is within a's nominal
    assert evicted(greedy(rnd)) == ["b-borrow"]


def test_kueue_tas_best_fit_takes_the_domain_with_least_leftover() -> None:
    rnd = make_round(
        cluster(4, racks=2),
        running=[running("busy", ["n2"], gpu=8, preemptible=False)],
        pending=[pending("job", gpu=8, required="rack")],
    )
    plan = check(rnd, kueue_like(rnd), "kueue_like")
    assert nodes_of(plan, "job") == ["n3"]  # rack r1 has one free node: no leftover


def test_kueue_partial_admission_takes_the_largest_count_within_quota() -> None:
    rnd = make_round(
        cluster(4),
        queues=[queue("q", gpu=24)],
        pending=[pending("elastic", replicas=4, min_replicas=1, gpu=8, queue="q")],
    )
    plan = check(rnd, kueue_like(rnd), "kueue_like")
    assert len(nodes_of(plan, "elastic")) == 3


# ----------------------------------------------------------------------------- Slurm


def _slurm_round() -> Round:
    return make_round(
        cluster(4),
        running=[running("A", ["n0"], gpu=8), running("B", ["n1"], gpu=8)],
        pending=[
            pending("head", replicas=3, gpu=8, priority=10),
            pending("short", gpu=8, submit_time=1),
            pending("long", gpu=8, submit_time=2),
        ],
        now=1000.0,
    )


def test_slurm_backfills_a_job_that_ends_before_the_reservation() -> None:
    rnd = _slurm_round()
    durations = {"A": 100.0, "B": 1000.0, "head": 500.0, "short": 50.0, "long": 500.0}
    plan = check(rnd, slurm_backfill_like(rnd, durations=durations), "slurm_backfill_like")
    assert plan.admitted == ["short"] and nodes_of(plan, "short") == ["n2"]
    assert reason(plan, "head").startswith("Reason=Resources")
    assert "reserved n0, n2, n3 at t+100s" in reason(plan, "head")
    assert reason(plan, "long").startswith("Reason=Priority") and "job head" in reason(plan, "long")
    assert {w.gang: w.code for w in plan.waiting} == {"head": "capacity", "long": "outranked"}


def test_slurm_without_run_times_holds_the_blocked_jobs_nodes() -> None:
    rnd = make_round(
        cluster(4),
        running=[running("A", ["n0"], gpu=8), running("B", ["n1"], gpu=8), running("C", ["n3"], gpu=8)],
        pending=[pending("head", replicas=2, gpu=8, priority=10), pending("small", replicas=1, gpu=8)],
    )
    plan = check(rnd, slurm_backfill_like(rnd), "slurm_backfill_like")
    assert plan.admitted == ["small"] and nodes_of(plan, "small") == ["n2"]  # head holds n0, n1
    assert "reserved n0, n1 when the jobs running there end" in reason(plan, "head")
    blocked = make_round(
        cluster(3),
        running=[running("A", ["n0"], gpu=8)],
        pending=[pending("head", replicas=3, gpu=8, priority=10), pending("small", gpu=8)],
    )
    plan = check(blocked, slurm_backfill_like(blocked), "slurm_backfill_like")
    assert plan.admitted == [] and reason(plan, "small").startswith("Reason=Priority")


def _backfill_choice_round() -> Round:
    """The top job "head" needs a whole node; only n1 has room now (4 GPUs), and all of it
    once "B" ends at t=100. The later, smaller "small" fits that room now."""
    return make_round(
        cluster(2),
        running=[running("A", ["n0"], gpu=8), running("B", ["n1"], gpu=4)],
        pending=[pending("head", gpu=8, priority=5), pending("small", gpu=4, submit_time=1)],
        now=0.0,
    )


def test_volcano_gives_the_room_to_a_later_job_where_slurm_reserves_it() -> None:
    # Volcano's allocate: "head" cannot reach minMember, its statement is discarded (nothing
    # held) and "small" takes n1. Slurm: "head" reserves n1 from t=100 and "small", which would
    # run until t=1000, may not delay it. A job that ends by t=100 is backfilled onto n1.
    rnd = _backfill_choice_round()
    plan = check(rnd, volcano_like(rnd), "volcano_like")
    assert plan.admitted == ["small"] and nodes_of(plan, "small") == ["n1"]
    assert reason(plan, "head").startswith("1/1 tasks in gang unschedulable")
    durations = {"A": 1000.0, "B": 100.0, "head": 500.0, "small": 1000.0}
    plan = check(rnd, slurm_backfill_like(rnd, durations=durations), "slurm_backfill_like")
    assert plan.admitted == []
    assert "reserved n1 at t+100s" in reason(plan, "head")
    assert {w.gang: w.code for w in plan.waiting} == {"head": "capacity", "small": "outranked"}
    assert reason(plan, "small").startswith("Reason=Priority") and "job head" in reason(plan, "small")
    short = {**durations, "small": 100.0}
    plan = check(rnd, slurm_backfill_like(rnd, durations=short), "slurm_backfill_like")
    assert plan.admitted == ["small"] and nodes_of(plan, "small") == ["n1"]


def test_volcano_and_slurm_replays_differ_when_a_gang_is_blocked() -> None:
    # The round above as a replay: Volcano starts "small" at t=20 and "head" waits for "A" to
    # end (t=1000); Slurm (given the run times) starts "head" at t=100, when "B" ends, and
    # "small" at t=600, when "head" ends. Single-GPU jobs on identical nodes never show this:
    # a job waits only when no GPU is free, so no later job can start either.
    wl = Workload(
        jobs=[
            job("A", 0.0, 1000.0, gpus=8),
            job("B", 0.0, 100.0, gpus=4),
            job("head", 10.0, 500.0, gpus=8, priority=5),
            job("small", 20.0, 1000.0, gpus=4),
        ]
    )
    starts: dict[str, dict[str, float | None]] = {}
    for name in ("volcano_like", "slurm_backfill_like"):
        result = simulate(wl, parametric_cluster(2), make_policy(name, wl), SimConfig(interval=0.0), name=name)
        starts[name] = {r.name: r.first_start for r in result.jobs}
    assert starts["volcano_like"] == {"A": 0.0, "B": 0.0, "head": 1000.0, "small": 20.0}
    assert starts["slurm_backfill_like"] == {"A": 0.0, "B": 0.0, "head": 100.0, "small": 600.0}


def test_slurm_reservations_of_several_blocked_jobs_take_successive_ends() -> None:
    # Each blocked job reserves the node that frees first among those no earlier job holds:
    # "w2" skips n0 (held by "w1" from t+100) and "w3" skips n0 and n1.
    rnd = make_round(
        cluster(3),
        running=[running("A", ["n0"], gpu=8), running("B", ["n1"], gpu=8), running("C", ["n2"], gpu=8)],
        pending=[pending(f"w{i}", gpu=8, submit_time=i) for i in (1, 2, 3)],
        now=0.0,
    )
    durations = {"A": 100.0, "B": 200.0, "C": 300.0, "w1": 50.0, "w2": 50.0, "w3": 50.0}
    plan = check(rnd, slurm_backfill_like(rnd, durations=durations), "slurm_backfill_like")
    assert plan.admitted == []
    assert "reserved n0 at t+100s" in reason(plan, "w1")
    assert "reserved n1 at t+200s" in reason(plan, "w2")
    assert "reserved n2 at t+300s" in reason(plan, "w3")


def test_slurm_policy_remembers_start_times_between_rounds() -> None:
    policy = SlurmBackfillLike({"j": 300.0})
    rnd = make_round(cluster(1), pending=[pending("j", gpu=8)], now=10.0)
    assert policy(rnd).admitted == ["j"]
    assert policy.started == {"j": 10.0}


# ----------------------------------------------------------------------------- all peers


@pytest.mark.parametrize("name", PEERS)
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rnd=rounds())
def test_every_peer_plan_validates(name: str, rnd: Round) -> None:
    plan = gangopt.solve(rnd, solver=name)  # raises if the validator objects
    assert validate(rnd, plan) == []
    assert sorted([*plan.admitted, *(w.gang for w in plan.waiting)]) == sorted(g.name for g in rnd.pending)
    assert all(w.reasons and w.reasons[0] for w in plan.waiting)


@pytest.mark.parametrize("name", PEERS)
def test_cli_solves_with_a_peer(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "instances/preemption.json", "--solver", name]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["solver"] == name


@pytest.mark.parametrize("name", PEERS)
def test_peers_replay_a_workload(name: str) -> None:
    assert name in POLICY_NAMES
    wl = random_workload(2, n=20)
    result = simulate(wl, parametric_cluster(3), make_policy(name), SimConfig(interval=30.0), name=name)
    assert all(r.state == "finished" for r in result.jobs)


def test_victim_units_are_each_victims_kept_pods_in_the_victims_order() -> None:
    """``victim_units`` (one pass over the victims' pods since h27-XL) gives each victim's kept
    pods, victims in the given order, one eviction unit each: what its per-victim loop gave."""
    import numpy as np

    from gangopt.solvers.peers.common import Peer, victim_units
    from tests.builders import fragmented_round

    peer = Peer(fragmented_round(64, 20, seed=1))
    rng = np.random.default_rng(0)
    peer.kept[:] = rng.random(peer.kept.size) < 0.7
    victims = rng.permutation(len(peer.running))[:30].tolist()
    flat, starts, unit_victim, evict = victim_units(peer, victims)
    expected = []
    for gi in victims:
        s, e = int(peer.rp_start[gi]), int(peer.rp_start[gi + 1])
        expected.append((s + np.flatnonzero(peer.kept[s:e])).tolist())
    assert [flat[starts[u] : starts[u + 1]].tolist() for u in range(len(victims))] == expected
    assert unit_victim.tolist() == victims and evict.all() and len(starts) == len(victims) + 1


def test_slurm_joins_the_running_releases_once_and_the_later_ones_after_them() -> None:
    """A reservation reads the running jobs' releases joined once per end and the jobs started
    this round after them; releases without pods drop out (they free nothing)."""
    import numpy as np

    from gangopt.solvers.peers.slurm import _joined

    def rel(nodes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(nodes, dtype=np.intp), np.ones((len(nodes), 2), dtype=np.int64) * (len(nodes) + 1)

    running = [rel([3, 1]), rel([]), rel([2])]
    later = [rel([0]), rel([]), rel([4, 4, 5])]
    whole = _joined(running + later)
    joined = _joined(running + later, _joined(running), len(running))
    for a, b in zip(whole, joined, strict=True):
        assert a.tolist() == b.tolist()
    assert whole[0].tolist() == [3, 1, 2, 0, 4, 4, 5] and whole[2].tolist() == [2, 1, 1, 3]
    assert _joined(running, _joined(running), len(running))[2].tolist() == [2, 1]
