"""Scheduling policies a simulation can replay: one round in, one plan out.

A policy is any callable ``Round -> Plan`` (:data:`SchedulingPolicy`). The simulator builds
the round (cluster, running and pending gangs, ``policy.now``, time limit, seed, preemption)
and validates whatever plan comes back with :func:`gangopt.validate`, so a policy cannot cheat.

The policies are the registry's solvers (:data:`gangopt.solvers.SOLVERS`, plus the alias
``gangopt`` for ``cpsat``), each made once per simulation so that a stateful one (Slurm's
reservations) keeps its state between rounds, and run through the door
(:func:`gangopt.solve.run`), which validates every plan. Every solver runs without the
annotation (score, bounds, explained waiting reasons): the simulator reads only the plan's
decisions and status, and the annotation cost about three times the greedy decision itself
on the Philly VC replay, a fifth of CP-SAT's round on the Philly 600-job replay.

``slurm_backfill_like`` is given the jobs' run times in a replay (:func:`make_policy`);
without them it holds a blocked job's nodes (see :class:`gangopt.solvers.peers.SlurmBackfillLike`).
"""

from __future__ import annotations

from collections.abc import Callable

from gangopt.replay.workload import Workload
from gangopt.schema import Plan, Round
from gangopt.solve import run
from gangopt.solvers import get_solver, names

SchedulingPolicy = Callable[[Round], Plan]


class RegistryPolicy:
    """A registry solver as a replay policy. Its plans come through the door, validated."""

    validated = True
    """Marks plans :func:`gangopt.solve.run` already validated (``SimConfig.validate``)."""

    def __init__(self, name: str, workload: Workload | None = None) -> None:
        self.spec = get_solver(name)
        durations = {job.name: job.duration for job in workload.jobs} if workload is not None else None
        self.decide = self.spec.make(durations)

    def __call__(self, rnd: Round) -> Plan:
        return run(rnd, self.spec, self.decide, annotate=False)


POLICY_NAMES: list[str] = sorted(names())
"""Every name :func:`make_policy` accepts (the registry's names and aliases)."""


def make_policy(name: str, workload: Workload | None = None) -> SchedulingPolicy:
    """A fresh instance of the policy called ``name``; ``ValueError`` lists the known names.

    With the ``workload`` being replayed, ``slurm_backfill_like`` knows every job's run time
    (as if users' time limits were exact: the best case for backfill); without it, it holds a
    blocked job's nodes, as Slurm does when every job has the same time limit."""
    try:
        return RegistryPolicy(name, workload)
    except ValueError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICY_NAMES)})") from None
