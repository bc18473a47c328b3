"""Probes for checking a CP-SAT encoding alone: solve a copy of its model with decisions
forced, decode a solution to a plan, evaluate the objective's terms at a solution.

Every probe works on a clone of ``enc.model``, so one encoding can be asked several questions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping

from ortools.sat.python import cp_model

from gangopt.prefilter import RoleKey, prefilter
from gangopt.schema import Plan, Round, RunningGang, Status
from gangopt.solvers.cpsat.encoding import Encoding, encode
from gangopt.solvers.cpsat.expansion import ClassValues, Decision, expand, to_plan_parts
from tests.builders import cluster, make_round, pending, running

Pick = Callable[[cp_model.IntVar], cp_model.IntVar]
"""Maps a variable of ``enc.model`` to the same variable in the probe's clone."""
Constrain = Callable[[cp_model.CpModel, Pick], None]
Solution = list[int]


def encoding_of(rnd: Round) -> Encoding:
    """The model of ``rnd`` as the solver builds it: prefilter, then encode."""
    return encode(prefilter(rnd))


def solve(
    enc: Encoding,
    fix: Mapping[cp_model.IntVar, int] | None = None,
    constrain: Constrain | None = None,
    maximize: Iterable[tuple[cp_model.IntVar, int]] | None = None,
) -> Solution | None:
    """A solution of a copy of ``enc.model`` with ``fix`` (variable -> value) and
    ``constrain`` added, optimal for ``maximize`` when given; None when infeasible."""
    model = enc.model.clone()
    model.clear_hints()  # type: ignore[no-untyped-call]

    def pick(var: cp_model.IntVar) -> cp_model.IntVar:
        return model.get_int_var_from_proto_index(var.index)

    for var, value in (fix or {}).items():
        model.add(pick(var) == value)
    if constrain is not None:
        constrain(model, pick)
    if maximize is not None:
        terms = list(maximize)
        model.maximize(cp_model.LinearExpr.weighted_sum([pick(v) for v, _ in terms], [c for _, c in terms]))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10.0
    status = solver.solve(model)
    assert status in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE), solver.status_name(status)
    if status == cp_model.INFEASIBLE:
        return None
    return list(solver.response_proto.solution)


def feasible(
    enc: Encoding, fix: Mapping[cp_model.IntVar, int] | None = None, constrain: Constrain | None = None
) -> bool:
    """Whether the model allows ``fix`` and ``constrain``."""
    return solve(enc, fix, constrain) is not None


def x_of(enc: Encoding, kind: str, gang: int, role: int = 0) -> list[cp_model.IntVar]:
    """The new-pod variables of one role, over every class."""
    return [var for _, var in enc.x_of_role.get(RoleKey(kind, gang, role), [])]


def x_on(enc: Encoding, kind: str, gang: int, k: int, role: int = 0) -> cp_model.IntVar | None:
    """New pods of one role on class ``k`` (None when the model has no such variable)."""
    return enc.x.get((RoleKey(kind, gang, role), k))


def class_of(enc: Encoding, node: str) -> int:
    """The model's class of the node named ``node``."""
    index = enc.pre.topo.node_index[node]
    return next(k for k, cm in enumerate(enc.classes) if index in cm.cls.nodes)


def total_at_least(vars_: list[cp_model.IntVar], amount: int) -> Constrain:
    """A constraint: the variables sum to at least ``amount``."""

    def add(model: cp_model.CpModel, pick: Pick) -> None:
        model.add(sum(pick(v) for v in vars_) >= amount)

    return add


def total_equal(vars_: list[cp_model.IntVar], amount: int) -> Constrain:
    """A constraint: the variables sum to exactly ``amount``."""

    def add(model: cp_model.CpModel, pick: Pick) -> None:
        model.add(sum(pick(v) for v in vars_) == amount)

    return add


def both(*constraints: Constrain) -> Constrain:
    def add(model: cp_model.CpModel, pick: Pick) -> None:
        for c in constraints:
            c(model, pick)

    return add


def value(terms: Iterable[tuple[cp_model.IntVar, int]], solution: Solution) -> int:
    """A linear expression's value at ``solution``."""
    return sum(c * solution[v.index] for v, c in terms)


def lexicographic(enc: Encoding, step: int = 10_000) -> list[tuple[cp_model.IntVar, int]]:
    """The tiers (higher priorities weigh ``step`` times more than the next) then the
    secondary terms, as one objective: enough for the tiny rounds of these tests."""
    out = [(v, c) for v, c in enc.secondary]
    for rank, priority in enumerate(sorted(enc.tiers), start=1):
        out += [(v, c * step**rank) for v, c in enc.tiers[priority]]
    return out


def values_of(enc: Encoding, solution: Solution) -> ClassValues:
    """The class-level decisions in a full solution of the model."""
    return ClassValues(
        admitted={g for g, v in enc.y.items() if solution[v.index]},
        alive={g: bool(solution[v.index]) for g, v in enc.alive.items()},
        x={key: solution[v.index] for key, v in enc.x.items()},
        kept={key: solution[v.index] for key, v in enc.kept.items()},
        z={k: [solution[z.index] for z in cm.z] for k, cm in enumerate(enc.classes) if cm.z},
    )


def plan_of(enc: Encoding, solution: Solution) -> Plan:
    """The plan a solution of the model stands for (expanded to nodes, no repair)."""
    return plan_from(enc.pre.rnd, expand(enc.pre, enc.classes, values_of(enc, solution)))


def plan_from(rnd: Round, decision: Decision) -> Plan:
    placements, preemptions, resizes = to_plan_parts(rnd, decision)
    return Plan(
        status=Status.FEASIBLE,
        solver="cpsat",
        admitted=sorted(decision.admitted),
        placements=placements,
        preemptions=preemptions,
        resizes=resizes,
    )


def busy_round(seed: int, nodes: int = 16, work_limit: float | None = None) -> Round:
    """8-GPU nodes half full of low-priority work (some elastic), and a queue over three priorities."""
    rng = random.Random(seed)
    cl = cluster(nodes, gpus=8, racks=nodes // 4)
    runs: list[RunningGang] = []
    for j in range(nodes // 2):
        size = rng.choice([2, 4])
        spot = f"n{rng.randrange(nodes)}"
        if sum(r.roles[0].requests["gpu"] for r in runs if r.pods[0].node == spot) + size * 1000 > 8000:
            continue
        runs.append(
            running(
                f"run{j}", [spot], gpu=size, replicas=rng.choice([1, 2]), min_replicas=1, priority=rng.choice([0, 1])
            )
        )
    jobs = [
        pending(
            f"job{i}",
            rng.choice([1, 2, 4]),
            rng.choice([2, 4, 8]),
            priority=rng.choice([0, 1, 2]),
            submit_time=rng.randrange(3600),
            required="rack" if rng.random() < 0.3 else None,
        )
        for i in range(nodes)
    ]
    return make_round(cl, running=runs, pending=jobs, now=3600, work_limit=work_limit)
