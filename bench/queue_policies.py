"""What queue preemption policies cost (issue 15): the contended 1,024-node round (size M) with
its gangs spread over four queues of one cohort, each with a nominal quarter of the GPUs,
under the default policies and under Kueue-like reclaim (``reclaim_within_cohort: any``,
``other_queues: never``), solved by cpsat, greedy and every peer emulation.

    python -m bench.queue_policies [SIZE] [tree] [lend]

``lend`` adds a run with every queue keeping half of its nominal (``lending_limit``, Kueue's
ClusterQueue lendingLimit) under Kueue-like reclaim. ``tree`` adds a run: the four queues in
two cohorts of a tree, ``left`` (t0, t1) and ``right`` (t2, t3) under ``all``, each queue
keeping half its nominal and each cohort holding the other halves of its queues as quota of
its own, ``left`` borrowing at most an eighth of the GPUs from ``all``, under Kueue-like
reclaim (docs/rules.md, rules 5 and 6).

Prints per solver the wall and CPU seconds, gangs admitted and preempted, the plan's gap to
the bounds (``-`` when none is known), and whether the validator accepts the plan.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import gangopt
from bench.rounds import round_text
from gangopt.parsing import parse_json
from gangopt.quantities import MILLI
from gangopt.schema import Round

SOLVERS = ["cpsat", "greedy", "koordinator_like", "volcano_like", "kueue_like", "slurm_backfill_like", "fifo_first_fit"]
QUEUES = ["t0", "t1", "t2", "t3"]
RECLAIM = {"reclaim_within_cohort": "any", "other_queues": "never"}


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def with_queues(rnd: Round, policy: dict[str, Any]) -> Round:
    """Running gangs mostly in t0 (so t0 borrows), pending gangs round-robin."""
    # capacities are milli-units; a nominal written as a number is whole GPUs
    total = sum(n.capacity.get("gpu", 0) for n in rnd.cluster.nodes) // MILLI
    data = rnd.model_dump()
    data["queues"] = [
        {"name": q, "cohort": "all", "nominal": {"gpu": total // 4}, "preemption": policy} for q in QUEUES
    ]
    for i, gang in enumerate(data["running"]):
        gang["queue"] = QUEUES[(i * 7) % 4 if i % 3 else 0]
    for i, gang in enumerate(data["pending"]):
        gang["queue"] = QUEUES[i % 4]
    return Round.model_validate(data)


def as_tree(rnd: Round) -> Round:
    """:func:`with_queues`'s round with its queues in the cohort tree of the module docstring."""
    total = sum(n.capacity.get("gpu", 0) for n in rnd.cluster.nodes) // MILLI
    data = rnd.model_dump()
    for i, q in enumerate(data["queues"]):
        q["cohort"] = "left" if i < 2 else "right"
        q["nominal"] = {"gpu": total // 8}
    half = {"gpu": total // 4}  # the other halves of its two queues' quarters
    data["cohorts"] = [
        {"name": "all"},
        {"name": "left", "parent": "all", "nominal": half, "borrowing_limit": {"gpu": total // 8}},
        {"name": "right", "parent": "all", "nominal": half},
    ]
    return Round.model_validate(data)


def with_lending(rnd: Round) -> Round:
    """:func:`with_queues`'s round with every queue keeping half of its nominal for its own
    gangs (``lending_limit`` = half the nominal: Kueue's ClusterQueue lendingLimit)."""
    data = rnd.model_dump()
    for q, spec in zip(data["queues"], rnd.queues, strict=True):
        q["lending_limit"] = {"gpu": spec.nominal["gpu"] // MILLI // 2}  # whole GPUs
    return Round.model_validate(data)


def _gap(gap: float | None) -> str:
    return "     -" if gap is None else f"{100 * gap:5.2f}%"


def main(size: str = "M", *extra: str) -> None:
    base = parse_json(Round, round_text(size, contention=True), "round")
    runs = [
        ("default policies", with_queues(base, {})),
        ("reclaim any, other_queues never", with_queues(base, RECLAIM)),
    ]
    if "tree" in extra:
        runs.append(("cohort tree with cohort quotas, reclaim any", as_tree(with_queues(base, RECLAIM))))
    if "lend" in extra:
        runs.append(("queues lending half their nominal, reclaim any", with_lending(with_queues(base, RECLAIM))))
    for label, rnd in runs:
        print(f"{size}, {label}: {len(rnd.running)} running, {len(rnd.pending)} pending gangs")
        for name in SOLVERS:
            t0, c0 = time.perf_counter(), cpu_seconds()
            plan = gangopt.solve(rnd, solver=name)
            wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
            valid = gangopt.validate(rnd, plan) == []
            print(
                f"  {name:20s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  admitted {len(plan.admitted):4d}  "
                f"preempted {len(plan.preemptions):3d}  gap {_gap(plan.gap)}  {plan.status}  valid {valid}"
            )


if __name__ == "__main__":
    main(*sys.argv[1:])
