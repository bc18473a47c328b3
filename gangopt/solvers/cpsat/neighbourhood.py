"""Restricted models for rounds too large to model whole (a large-neighbourhood step).

When the full model would take longer to build than the time limit allows, gangopt builds a
smaller one around the warm-start plan: each role may only use the classes where the warm
start put it plus the few classes with the most room for it (for a gang with a required
level: the classes of its few roomiest feasible domains), and classes nobody may use are left
out. The answer is still checked by the validator and never worse than the warm start, but
CP-SAT's bounds then hold only for the restricted model: plans from this mode report the
cheap per-tier bounds of the whole round instead, and never claim optimality.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gangopt.prefilter import Prefiltered, RoleKey, restricted
from gangopt.schema import Plan

MIN_CLASSES_PER_ROLE = 4
DOMAINS_PER_GANG = 3


def restrict(pre: Prefiltered, start: Plan, budget: int) -> tuple[Prefiltered, dict[RoleKey, set[int]]]:
    """The round restricted around ``start``: a copy of ``pre`` without the classes no role
    may use, and the allowed classes per role (indexes into the copy's classes), aiming at
    about ``budget`` pod-count variables in total. ``pre`` is left as it was."""
    keys = [k for k in pre.fits if k.gang in (pre.pending if k.kind == "pending" else pre.growers)]
    per_role = max(MIN_CLASSES_PER_ROLE, budget // max(1, len(keys)))
    used = _classes_used(pre, start)
    sizes = np.array([c.size for c in pre.classes], dtype=np.int64)
    allowed: dict[RoleKey, set[int]] = {}
    for key in keys:
        fit = pre.fits[key]
        room = fit * sizes
        candidates = _in_best_domains(pre, key, room)
        order = sorted(candidates, key=lambda k: (-int(room[k]), k))
        allowed[key] = set(order[:per_role]) | used.get((key.kind, key.gang), set())
    keep = np.zeros(len(pre.classes), dtype=bool)
    for classes in allowed.values():
        keep[list(classes)] = True
    view, kept = restricted(pre, keep)
    new_index = {int(old): new for new, old in enumerate(kept.tolist())}
    return view, {key: {new_index[k] for k in classes if k in new_index} for key, classes in allowed.items()}


def _classes_used(pre: Prefiltered, plan: Plan) -> dict[tuple[str, int], set[int]]:
    """Classes where the plan puts new pods of each gang."""
    class_of = {node: k for k, c in enumerate(pre.classes) for node in c.nodes}
    pending = {g.name: i for i, g in enumerate(pre.rnd.pending)}
    running = {g.name: i for i, g in enumerate(pre.rnd.running)}
    out: dict[tuple[str, int], set[int]] = defaultdict(set)
    for p in plan.placements:
        k = class_of.get(pre.topo.node_index[p.node])
        if k is None:
            continue
        owner = ("pending", pending[p.gang]) if p.gang in pending else ("running", running[p.gang])
        out[owner].add(k)
    return out


def _in_best_domains(pre: Prefiltered, key: RoleKey, room: np.ndarray) -> list[int]:
    """Classes the role fits on; for a gang with a required level, only those inside its
    roomiest feasible domains (a gang uses one domain, so spreading choices is wasted)."""
    fitting = np.flatnonzero(room > 0).tolist()
    gang = pre.gang(key.kind, key.gang)
    level = gang.topology.required if gang.topology else None
    if key.kind != "pending" or level is None:
        return fitting
    feasible = set(pre.required_domains.get(key.gang, []))
    total: dict[str, int] = defaultdict(int)
    for k in fitting:
        domain = pre.classes[k].domains[level]
        if domain in feasible:
            total[domain] += int(room[k])
    best = set(sorted(total, key=lambda d: (-total[d], d))[:DOMAINS_PER_GANG])
    return [k for k in fitting if pre.classes[k].domains[level] in best]
