"""What a solver hands back to the door (:mod:`gangopt.solve`): the plan and what it knows.

A solver decides; it does not judge. It returns the plan's decisions (admitted gangs,
placements, preemptions, resizes, and its own waiting reasons) with whatever it learned on
the way that the finisher (:mod:`gangopt.annotate`) can use instead of recomputing: the
prefiltered round, the plan's unbounded score, and the bounds it proved (CP-SAT's stages).
Modelled on PyJobShop's ``Result``: objective and bound travel with the solution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gangopt.prefilter import Prefiltered
from gangopt.schema import Plan, Score, Stats


@dataclass(frozen=True)
class ProvenBounds:
    """Bounds a solver proved, in GPU-equivalents: per priority tier, and on the secondary
    terms (None: not proven; the cheap bound is used alone)."""

    tiers: dict[int, float] = field(default_factory=dict)
    secondary: float | None = None


@dataclass(frozen=True)
class Result:
    """One solver's answer for one round."""

    plan: Plan
    """The decisions, with ``status``, ``solver`` and ``message`` set by the solver."""
    stats: Stats = field(default_factory=Stats)
    """What the solver did (prefilter, model size, stages, times); the door adds the total."""
    pre: Prefiltered | None = None
    """The prefiltered round, when the solver made it (else the finisher makes it once)."""
    score: Score | None = None
    """The plan's score without bounds, when the solver computed it to choose the plan."""
    proven: ProvenBounds | None = None
    """Bounds the solver proved for this round; the finisher takes the tighter of these and
    the cheap ones, part by part."""
    slowdown: float | None = None
    """How many times slower than its CPU time the solver's own single-threaded steps ran
    (:func:`gangopt.annotate.slowdown`), when the solver measured it: the door scales its
    reserve for validation by it. None: the door measures the whole call (right for solvers
    that neither wait for a child nor run threads)."""
    bounds_decide: bool = False
    """The plan's status rests on bounds alone (a plan the cheap bounds proved within
    ``policy.gap_limit``, no search cut short): the finisher, whose bounds are tighter (no gap
    limit stops them), marks it ``optimal`` when they close the gap. The fragmented S round
    (gap limit 0.5 %): proven within 0.072 % by the looser bound, 0 by the finisher's."""
    finished: bool = False
    """The plan is already annotated and validated (the CP-SAT fallback prepared before a
    hard deadline, so that killing the search costs no time after it)."""
