"""The one finisher: every solver's plan leaves with reasons, a bounded score and a gap.

The door (:mod:`gangopt.solve`) hands each solver's :class:`~gangopt.result.Result`
here, whatever the solver: CP-SAT, greedy, or a peer emulation. The finisher adds

1. a reason for every waiting gang (:mod:`gangopt.reasons`), unless the solver's own reasons
   are the point (the peer emulations speak as their schedulers would);
2. the plan's score per priority tier and on the secondary terms (:mod:`gangopt.objective`),
   each with the tighter of the bound the solver proved and the round's cheap bounds
   (:mod:`gangopt.bounds`);
3. ``gap``: how much value any plan could still add, relative to this plan's.

It judges; it decides nothing and validates nothing (the door does, after it).
"""

from __future__ import annotations

from gangopt.bounds import CheapBounds, cheap_bounds, packed_tier_bounds, reaches_ceilings, tier_ceilings
from gangopt.objective import SCALE, score, with_bounds
from gangopt.prefilter import Prefiltered, prefilter
from gangopt.reasons import waiting_reasons
from gangopt.result import ProvenBounds, Result
from gangopt.schema import Plan, Round, Score, TierScore
from gangopt.scope import Scope
from gangopt.slots import slot_tier_bounds


def annotate(rnd: Round, result: Result, *, explain_waiting: bool = True) -> Plan:
    """``result.plan`` with waiting reasons, bounded score, gap and the solver's stats.

    ``explain_waiting=False`` keeps the solver's own waiting reasons. The prefiltered round
    and the plan's score are taken from ``result`` when the solver computed them, so a round
    is prefiltered and a plan scored once per solve."""
    pre = result.pre if result.pre is not None else prefilter(rnd)
    plan = result.plan
    if explain_waiting:
        plan = plan.model_copy(update={"waiting": waiting_reasons(rnd, plan, pre)})
    unbounded = result.score if result.score is not None else score(rnd, plan)
    tiers, secondary = combined_bounds(result.proven or ProvenBounds(), cheap_bounds_for(pre, unbounded))
    bounded = with_bounds(unbounded, tiers, secondary)
    return plan.model_copy(update={"score": bounded, "gap": plan_gap(bounded), "stats": result.stats})


def cheap_bounds_for(pre: Prefiltered, unbounded: Score) -> CheapBounds:
    """The cheap bounds, tight on the secondary terms when a plan scoring ``unbounded``
    shows that every tier's ceiling can be reached (every optimal plan then runs every kept
    gang); when it shows that only the top tiers can, the first tier below them is bounded by
    what fits beside them (:func:`~gangopt.bounds.packed_tier_bounds`)."""
    values, ceilings = tier_values(unbounded), tier_ceilings(pre)
    bounds = cheap_bounds(pre, reaches_ceilings(values, ceilings))
    reached = {p: values.get(p, 0.0) >= v / SCALE - 1e-9 for p, v in ceilings.items()}
    if all(reached.values()) or Scope(pre.rnd).beyond_priority:
        # every tier at its ceiling: nothing to tighten; or queues may reclaim at equal or
        # higher priority, which the tighter bounds (room per priority) do not allow for
        return bounds
    packed = packed_tier_bounds(pre, reached)
    tiers = {p: min(v, packed.get(p, v)) for p, v in bounds.tiers.items()}
    slots = slot_tier_bounds(pre, {p: round(v * SCALE) for p, v in values.items()}, tiers)
    tiers = {p: min(v, slots.get(p, v)) for p, v in tiers.items()}
    return CheapBounds(tiers=tiers, secondary=bounds.secondary)


def combined_bounds(proven: ProvenBounds, cheap: CheapBounds) -> tuple[dict[int, float], float]:
    """The tighter of the solver's proven bounds and the cheap ones, part by part (both hold)."""
    combined = {p: min(v, proven.tiers.get(p, v)) for p, v in cheap.tiers_in_units().items()}
    cheap_secondary = cheap.secondary / SCALE
    secondary = cheap_secondary if proven.secondary is None else min(proven.secondary, cheap_secondary)
    return combined, secondary


def plan_gap(s: Score) -> float | None:
    """Relative gap of the total value (tiers plus secondary, all in GPU-equivalents) to the
    sum of the bounds, over the total value. The order stays lexicographic; this is the one
    number that says how much value any plan could add. None when the secondary is unbounded."""
    if s.secondary_bound is None:
        return None
    value = sum(t.value for t in s.tiers) + s.secondary
    bound = sum(t.bound for t in s.tiers) + s.secondary_bound
    return max(0.0, bound - value) / max(1.0 / SCALE, abs(value))


def tier_gap(tier: TierScore) -> float:
    """One tier's relative gap to its bound."""
    return max(0.0, tier.bound - tier.value) / max(1.0 / SCALE, abs(tier.value))


def tier_values(s: Score) -> dict[int, float]:
    """Each tier's value by priority."""
    return {t.priority: t.value for t in s.tiers}
