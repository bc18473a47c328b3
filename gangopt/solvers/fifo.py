"""The floor: strict FIFO first fit, priorities ignored, no preemption.

Gangs start in arrival order (``submit_time``, then name), each placed first-fit by the
greedy engine, and the first gang that does not fit blocks every later one: head-of-line
blocking, like Kueue ``StrictFIFO`` or Slurm without backfill. Elastic gangs start at their
maximum if it fits. Any sensible scheduler should beat it; replays show how much.
"""

from __future__ import annotations

from collections.abc import Callable

from gangopt.schema import Plan, Round, Waiting
from gangopt.solvers.greedy import greedy


def fifo_first_fit(rnd: Round, *, stop: Callable[[], bool] | None = None) -> Plan:
    """Strict FIFO first fit, no preemption, priorities ignored (see the module docstring).
    ``stop``: greedy's (the gangs its pass did not reach wait "not considered", none of them
    a blocker: they come after every gang it decided)."""
    flat = rnd.model_copy(
        update={
            "pending": [g.model_copy(update={"priority": 0}) for g in rnd.pending],
            "queues": [q.model_copy(update={"weight": None}) for q in rnd.queues],  # strict FIFO: no fair share
            "policy": rnd.policy.model_copy(update={"preemption": False}),
        }
    )
    plan = greedy(flat, stop=stop, solver="fifo_first_fit")
    order = sorted(rnd.pending, key=lambda g: (g.submit_time, g.name))
    admitted = set(plan.admitted)
    blocker = next((g.name for g in order if g.name not in admitted), None)
    if blocker is None:
        return plan
    position = {g.name: i for i, g in enumerate(order)}
    dropped = {name for name in admitted if position[name] > position[blocker]}
    groups = {g.group for g in rnd.pending if g.name in dropped and g.group is not None}
    dropped |= {g.name for g in rnd.pending if g.group in groups and g.name in admitted}
    waiting = list(plan.waiting) + [
        Waiting(gang=name, code="policy", reasons=[f"strict FIFO: waits behind {blocker}, which does not fit"])
        for name in sorted(dropped, key=lambda n: position[n])
    ]
    return plan.model_copy(
        update={
            "admitted": [g for g in plan.admitted if g not in dropped],
            "placements": [p for p in plan.placements if p.gang not in dropped],
            "waiting": waiting,
        }
    )
