"""Scheduling policies a simulation can replay: one round in, one plan out.

A policy is any callable ``Round -> Plan`` (:data:`SchedulingPolicy`). The simulator builds
the round (cluster, running and pending gangs, ``policy.now``, time limit, seed, preemption)
and validates whatever plan comes back with :func:`gangopt.validate`, so a policy cannot cheat.
A policy that keeps state between rounds (a back-off timer, a fair-share history, Slurm's
reservations) is a class with ``__call__``; the registry holds *factories* so that every
simulation starts from a fresh instance.

Shipped:

* ``gangopt``: :func:`gangopt.solve` with CP-SAT, within ``round.policy.time_limit``.
* ``greedy``: :func:`gangopt.solve` with ``solver="greedy"`` (priority order, first fit,
  Koordinator/Kueue-style preemption; see :mod:`gangopt.solvers.greedy.engine`) and ``annotate=False``:
  validated, but without the score, bounds and explained waiting reasons, which the
  simulator does not use and which cost three times the decision.
* ``fifo_first_fit``: the floor. Strict FIFO by submission time, priorities ignored, no
  preemption: gangs start in arrival order, each first-fit (the greedy placement), and the
  first gang that does not fit blocks every later one (head-of-line blocking, like Kueue
  ``StrictFIFO`` or Slurm without backfill). Elastic gangs start at their maximum if it fits.
* ``koordinator_like``, ``volcano_like``, ``kueue_like``, ``slurm_backfill_like``: emulations
  of those schedulers' decision procedures (:mod:`gangopt.solvers.peers.common`, docs/peers.md).
  ``slurm_backfill_like`` is stateful (it remembers when it started each job); in a replay
  it is given the jobs' run times (:func:`make_policy`), without them it holds a blocked
  job's nodes (see :class:`gangopt.solvers.peers.common.SlurmBackfillLike`).
"""

from __future__ import annotations

from collections.abc import Callable

from gangopt.replay.workload import Workload
from gangopt.schema import Plan, Round, Waiting
from gangopt.solvers.cpsat.search import solve
from gangopt.solvers.greedy.engine import greedy
from gangopt.solvers.peers import common as peers

SchedulingPolicy = Callable[[Round], Plan]
PolicyFactory = Callable[[], SchedulingPolicy]


def gangopt_policy(rnd: Round) -> Plan:
    """CP-SAT within the round's time limit (the simulator sets a short one)."""
    return solve(rnd)


def greedy_policy(rnd: Round) -> Plan:
    """The greedy baseline of :mod:`gangopt.solvers.greedy.engine`, validated but not annotated (the
    simulator reads only the plan's decisions and status)."""
    return solve(rnd, solver="greedy", annotate=False)


def fifo_first_fit(rnd: Round) -> Plan:
    """Strict FIFO first fit, no preemption, priorities ignored (see the module docstring)."""
    flat = rnd.model_copy(
        update={
            "pending": [g.model_copy(update={"priority": 0}) for g in rnd.pending],
            "policy": rnd.policy.model_copy(update={"preemption": False}),
        }
    )
    plan = greedy(flat)
    order = sorted(rnd.pending, key=lambda g: (g.submit_time, g.name))
    admitted = set(plan.admitted)
    blocker = next((g.name for g in order if g.name not in admitted), None)
    if blocker is None:
        return plan.model_copy(update={"solver": "fifo_first_fit"})
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
            "solver": "fifo_first_fit",
            "admitted": [g for g in plan.admitted if g not in dropped],
            "placements": [p for p in plan.placements if p.gang not in dropped],
            "waiting": waiting,
        }
    )


POLICIES: dict[str, PolicyFactory] = {
    "gangopt": lambda: gangopt_policy,
    "greedy": lambda: greedy_policy,
    "fifo_first_fit": lambda: fifo_first_fit,
    "koordinator_like": lambda: peers.koordinator_like,
    "volcano_like": lambda: peers.volcano_like,
    "kueue_like": lambda: peers.kueue_like,
    "slurm_backfill_like": lambda: peers.SlurmBackfillLike(),
}
"""Policy name -> factory of a fresh policy instance."""


def make_policy(name: str, workload: Workload | None = None) -> SchedulingPolicy:
    """A fresh instance of the policy called ``name``; ``ValueError`` lists the known names.

    With the ``workload`` being replayed, ``slurm_backfill_like`` knows every job's run time
    (as if users' time limits were exact: the best case for backfill); without it, it holds a
    blocked job's nodes, as Slurm does when every job has the same time limit."""
    if name == "slurm_backfill_like" and workload is not None:
        return peers.SlurmBackfillLike({job.name: job.duration for job in workload.jobs})
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(sorted(POLICIES))})") from None
