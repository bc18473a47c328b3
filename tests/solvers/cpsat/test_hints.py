"""Warm starts: a plan mapped to the model's decision variables (``plan_values``), completed
to a full assignment (``complete``, ``warm_start``).

The greedy plan is valid, so its values must satisfy every row of the model: fixing them as
constraints leaves the model feasible. A row that cut off valid plans would show up here as
an infeasible hint (the solver then silently starts from the trivial plan).
"""

from __future__ import annotations

import pytest

from gangopt.schema import Plan, Round
from gangopt.solvers.cpsat.encoding import Encoding
from gangopt.solvers.cpsat.hints import plan_values, trivial_values, warm_start
from gangopt.solvers.greedy import greedy
from tests.builders import cluster, make_plan, make_round, pending, queue, running
from tests.solvers.cpsat.probe import busy_round, encoding_of, feasible


def fixed(enc: Encoding, values: dict[int, int]) -> bool:
    """Whether the model is feasible with every variable in ``values`` fixed to its value."""
    variables = {var.index: var for var in [*enc.y.values(), *enc.x.values(), *enc.alive.values(), *enc.kept.values()]}
    return feasible(enc, {variables[i]: v for i, v in values.items() if i in variables})


SMALL: dict[str, Round] = {
    "eviction and growth": make_round(
        cluster(2, gpus=8),
        running=[
            running("low", ["n0"], gpu=8, priority=0),
            running("grows", ["n1"], gpu=2, replicas=3, min_replicas=1, priority=5),
        ],
        pending=[pending("high", gpu=8, priority=5), pending("other", gpu=4)],
    ),
    "shrink": make_round(
        cluster(1, gpus=8),
        running=[running("el", ["n0"] * 4, gpu=2, min_replicas=1, priority=0)],
        pending=[pending("high", gpu=4, priority=5)],
    ),
    "topology and quota": make_round(
        cluster(8, gpus=8, racks=4),
        queues=[queue("q", gpu=24), queue("default")],
        running=[running("busy", ["n0", "n3"], gpu=4, queue="q", preemptible=False)],
        pending=[
            pending("rack", replicas=2, gpu=8, required="rack", queue="q"),
            pending("spread", replicas=3, gpu=4, preferred="rack", queue="q"),
            pending("sliced", replicas=4, gpu=4, slice_level="rack", slice_size=2),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_greedy_plan_maps_to_a_feasible_assignment_of_small_rounds(name: str) -> None:
    """plan_values(greedy plan), fixed as constraints, leaves the model feasible."""
    rnd = SMALL[name]
    plan = greedy(rnd)
    assert plan.admitted
    enc = encoding_of(rnd)
    values = plan_values(enc, plan)
    assert set(values) >= {v.index for v in [*enc.y.values(), *enc.x.values()]}
    assert fixed(enc, values)


def test_the_small_rounds_exercise_preemption_shrinks_and_growth() -> None:
    """The rounds above are only worth their name if greedy evicts, shrinks and grows there."""
    kinds = {p.kind for rnd in SMALL.values() for p in greedy(rnd).preemptions}
    assert kinds == {"evict", "shrink"}
    assert any(r.to_members > r.from_members for rnd in SMALL.values() for r in greedy(rnd).resizes)


@pytest.mark.parametrize("seed", [2, 6, 9])
def test_the_greedy_plan_maps_to_a_feasible_assignment_of_busy_rounds(seed: int) -> None:
    """Busy rounds where greedy both preempts and grows running gangs (seeds chosen so)."""
    rnd = busy_round(seed)
    plan = greedy(rnd)
    assert plan.preemptions and any(r.to_members > r.from_members for r in plan.resizes)
    enc = encoding_of(rnd)
    assert fixed(enc, plan_values(enc, plan))


def test_warm_start_completes_the_plan_it_was_given() -> None:
    """warm_start returns a full solution whose decisions are the plan's, and leaves it as the
    model's hint."""
    rnd = busy_round(6)
    plan = greedy(rnd)
    enc = encoding_of(rnd)
    values = plan_values(enc, plan)
    solution = warm_start(enc, plan, 2.0)
    assert solution is not None
    assert len(solution) == len(enc.model.proto.variables)
    assert all(solution[i] == v for i, v in values.items())
    assert list(enc.model.proto.solution_hint.values) == solution


def test_the_trivial_plan_is_always_feasible() -> None:
    """trivial_values (nothing starts, nothing is preempted) satisfies the model."""
    for rnd in [*SMALL.values(), busy_round(2)]:
        enc = encoding_of(rnd)
        assert fixed(enc, trivial_values(enc))


def test_a_plan_the_model_refuses_falls_back_to_the_trivial_start() -> None:
    """A plan that breaks capacity does not complete; warm_start then starts from nothing."""
    rnd = make_round(cluster(1, gpus=8), pending=[pending("a", gpu=6), pending("b", gpu=6)])
    broken: Plan = make_plan(rnd, place={"a": ["n0"], "b": ["n0"]})
    enc = encoding_of(rnd)
    assert not fixed(enc, plan_values(enc, broken))
    solution = warm_start(enc, broken, 1.0)
    assert solution is not None
    assert all(solution[v.index] == 0 for v in enc.y.values())
