"""The lean replay path (issue 4): ``solve(..., annotate=False)`` for CP-SAT, greedy and every
peer emulation decides exactly what the annotated path decides, the simulator's greedy policy replays exactly
as the annotated one did, and the validator's quick path for running gangs a plan leaves alone
still reports every broken bound."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

import gangopt
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import SimConfig, simulate
from gangopt.schema import BoundPod, Plan, Round, RunningGang, Score, Status
from gangopt.solvers import SOLVERS
from gangopt.validation import validate
from tests.builders import cluster, make_round, role, running
from tests.replay.test_simulation import random_workload
from tests.strategies import examples, rounds


def decisions(plan: Plan) -> tuple[object, ...]:
    """What a replay applies (and the status it records)."""
    return (plan.status, plan.solver, plan.admitted, plan.placements, plan.preemptions, plan.resizes)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_unannotated_greedy_decides_as_the_annotated_one_and_is_valid(rnd: Round) -> None:
    full = gangopt.solve(rnd, solver="greedy")
    lean = gangopt.solve(rnd, solver="greedy", annotate=False)
    assert decisions(lean) == decisions(full)
    assert validate(rnd, lean) == []
    assert lean.score == Score() and lean.gap is None
    assert sorted([*lean.admitted, *(w.gang for w in lean.waiting)]) == sorted(g.name for g in rnd.pending)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_unannotated_peers_decide_as_the_annotated_ones(rnd: Round) -> None:
    for name in [n for n in SOLVERS if n not in ("cpsat", "greedy")]:
        lean = gangopt.solve(rnd, solver=name, annotate=False)
        assert decisions(lean) == decisions(gangopt.solve(rnd, solver=name))
        assert lean.score == Score()


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_unannotated_cpsat_decides_as_the_annotated_one(rnd: Round) -> None:
    """CP-SAT scores its candidates itself, before the finisher: skipping the annotation (as
    replays do) changes no decision, and the plan still passes the validator."""
    lean = gangopt.solve(rnd, annotate=False)
    assert decisions(lean) == decisions(gangopt.solve(rnd))
    assert validate(rnd, lean) == []
    assert lean.score == Score() and lean.gap is None


def test_the_replay_of_the_lean_greedy_policy_is_the_annotated_one() -> None:
    """Same job records and rounds as a policy that returns the fully annotated greedy plan."""
    workload = random_workload(7, 60)

    def annotated(rnd: Round) -> Plan:
        return gangopt.solve(rnd, solver="greedy")

    config = SimConfig(check_rounds=True)
    lean = simulate(workload, parametric_cluster(2), make_policy("greedy"), config)
    full = simulate(workload, parametric_cluster(2), annotated, config)
    assert lean.jobs == full.jobs
    strip = [(r.time, r.status, r.admitted, r.evicted, r.shrunk, r.grown) for r in lean.rounds]
    assert strip == [(r.time, r.status, r.admitted, r.evicted, r.shrunk, r.grown) for r in full.rounds]
    assert any(j.preemptions for j in lean.jobs), "the workload should exercise preemption"


# ----------------------------------------------------------------------------- validator quick path


def nothing_done() -> Plan:
    return Plan(status=Status.FEASIBLE)


def all_or_nothing(rnd: Round, plan: Plan) -> list[str]:
    return [v.message for v in validate(rnd, plan) if v.rule == "all_or_nothing"]


def with_pods(gang: RunningGang, pods: list[BoundPod]) -> RunningGang:
    """``gang`` with other pods, unchecked (a round no checked input would build)."""
    return RunningGang.model_construct(**{**dict(gang), "pods": pods})


def test_a_running_gang_left_alone_within_its_bounds_passes() -> None:
    rnd = make_round(cluster(2), running=[running("r", ["n0", "n1"])])
    assert validate(rnd, nothing_done()) == []


def test_a_running_gang_left_alone_below_its_minimum_is_still_reported() -> None:
    gang = running("r", ["n0", "n1"])
    rnd = make_round(cluster(2)).model_copy(update={"running": [with_pods(gang, gang.pods[:1])]})
    assert any("1 pods < minimum 2" in m for m in all_or_nothing(rnd, nothing_done()))


def test_a_running_gang_left_alone_with_a_pod_of_an_unknown_role_is_still_reported() -> None:
    gang = running("r", ["n0", "n1"])
    stray = BoundPod(name="r-other-0", role="other", node="n1")
    rnd = make_round(cluster(2)).model_copy(update={"running": [with_pods(gang, [gang.pods[0], stray])]})
    assert any("role worker has 1 pods < role minimum 2" in m for m in all_or_nothing(rnd, nothing_done()))


def test_a_running_gang_of_two_roles_left_alone_is_counted_per_role() -> None:
    roles = [role("ps", 1, 0), role("worker", 2, 1)]
    gang = running("r", {"ps": ["n0"], "worker": ["n0", "n1"]}, roles=roles)
    rnd = make_round(cluster(2), running=[gang])
    assert validate(rnd, nothing_done()) == []
    short = with_pods(gang, gang.pods[:2])
    rnd = rnd.model_copy(update={"running": [short]})
    assert any("role worker has 1 pods < role minimum 2" in m for m in all_or_nothing(rnd, nothing_done()))
