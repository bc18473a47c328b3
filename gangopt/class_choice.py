"""A choice to place from the node-class LP (:mod:`gangopt.slot_classes`): large rounds' plans.

On rounds too large for the per-node slot models (over 1,500 pending and candidate gangs
without the clock's leave, e.g. issue 13's fragmented XL round: 16,384 nodes, 54,869
candidate running gangs) the slot placer (:mod:`gangopt.solvers.cpsat.placer`) had no choice
to place, so CP-SAT returned greedy's plan. The class LP that bounds such a round's tiers says
which pending gangs start (and in which required domain) for the first tier the plan leaves
open; this module reads that as a :class:`~gangopt.slots.SlotChoice` for the slot placer:

* **Started gangs**: the pending gangs the LP starts at one half or more, each in its largest
  required-domain column.
* **No victims named** (``levels`` and ``evicted`` empty): the LP's evictions are per node
  class and relaxed (a rigid gang may lose part of its units at part of its value), so the
  placer makes room with greedy's preemption (lowest priority, then cheapest, first) and its
  reprieve. Measured on the fragmented 4,096-node round (busy 0.75, greedy p5 40,784.8, p0
  50,284.9 GPU-eq): the LP's node states turned into victims node by node (each state on the
  nodes of its class where it costs least) placed every chosen gang but lost priority 5
  (40,174.8); with no victims named, p5 40,784.8 and p0 50,414.9 (one pass, 1.4 CPU-s).

The door keeps the plan only when it validates and is lexicographically better
(:func:`gangopt.solvers.cpsat.placer.place_choices`), placing the chosen gangs the plan it
bounded left out first, from greedy's state after its highest priority when it may (one
pass at XL: 3.2 CPU-s, priority 5 +70.5 and priority 0 +2,035.0 GPU-eq on greedy's plan;
docs/benchmarks.md, "h33-XL"); :func:`affordable` says whether a pass ends in time.
Deterministic: no clock, no randomness.
"""

from __future__ import annotations

import time

import numpy as np

from gangopt.prefilter import Prefiltered
from gangopt.slot_classes import open_solution
from gangopt.slots import SlotChoice

SECONDS_PER_POD = 7e-5
"""Estimated CPU seconds of one slot-placer pass per pod (running, and pending minimums): 1.26
CPU-s for the 19,476 of the fragmented 4,096-node round, 6.1-7.3 for the 78,415 of the
16,384-node one (busy 0.75, load 4); so at a 10 s limit the XL round's choice is never placed
(greedy and the bounds alone take most of it). With greedy's engine shared (``like``, as the
door passes it) a pass there is 4.35-4.79 CPU-s (load 4-6, h30-XLgap): still a whole greedy
run, and the LP's choice there is greedy's own admissions but for 3 gangs that fit nowhere
after greedy's run (docs/benchmarks.md, "h30-XLgap")."""

SHARE = 0.25
"""Without a clock (``policy.deterministic``) the class choice is placed when its estimated
passes (:data:`PASSES_ESTIMATED`) fit in this share of the time limit."""

PASSES_ESTIMATED = 2
"""Passes counted for the choice without a clock: the first and the one with preferred levels
set aside (:func:`gangopt.solvers.cpsat.placer.placed`). On a clocked solve one pass is
counted: :func:`~gangopt.solvers.cpsat.placer.placed` starts a further pass only when one as
long as the last ends before the deadline, and the first pass places the chosen gangs the
plan left out first (its ``ahead``), which at XL was the second pass's work. Counting two
refused the choice at XL even at a 30 s limit (11.0 s estimated, about 8 s spent and the
search's deadline 17 s into the solve); one (5.5 s) lets it run there: placed in 4 of 7 runs
under load 2-3, 3.29-3.37 % instead of greedy's 3.96 % (docs/benchmarks.md, "h33-XL")."""


def class_choice(pre: Prefiltered, values: dict[int, int], until: float | None = None) -> SlotChoice | None:
    """The class LP's choice for the first tier a plan of tier ``values`` (objective units)
    leaves open, once :func:`gangopt.slot_classes.class_tier_bounds` has bounded that plan;
    None when it did not, proved every tier, or its placement would not end in time
    (:func:`affordable`)."""
    solution = open_solution(pre, values)
    if solution is None or not affordable(pre, until):
        return None
    started: dict[int, tuple[str, int] | None] = {}
    for g in np.flatnonzero(solution.started > 0.5).tolist():
        started[int(pre.pending[g])] = solution.domains.get(g)
    return SlotChoice(
        priority=solution.priority,
        levels=frozenset(),
        value=solution.bound,
        bound=solution.bound,
        started=started,
        evicted=frozenset(),
        shed={},
    )


def estimate(pre: Prefiltered, passes: int = PASSES_ESTIMATED) -> float:
    """Estimated CPU seconds of ``passes`` placer passes on the round."""
    rnd = pre.rnd
    pods = pre.kept(
        "class-choice-pods",
        lambda: sum(len(g.pods) for g in rnd.running) + sum(g.minimum for g in rnd.pending),
    )
    return passes * SECONDS_PER_POD * pods


def affordable(pre: Prefiltered, until: float | None) -> bool:
    """Whether the choice's placement ends in time: its first pass before ``until`` (a
    :func:`time.perf_counter` instant) on a clocked solve, the further passes gated by the
    clock as they go; else :data:`PASSES_ESTIMATED` passes within :data:`SHARE` of the time
    limit (a rule on the round)."""
    if until is None:
        return estimate(pre) <= SHARE * pre.rnd.policy.time_limit
    return time.perf_counter() + estimate(pre, 1) <= until


__all__ = ["affordable", "class_choice", "estimate"]
