"""Restricted models around a plan (``restrict``), for rounds too large to model whole.

docs/design.md, "Size guard": each role keeps the classes the greedy plan used plus its
roomiest few; a gang with a required level only its roomiest feasible domains. The
prefiltered round it starts from stays as it was (reasons and bounds still read it).
"""

from __future__ import annotations

import copy

import pytest

from gangopt.prefilter import Prefiltered, RoleKey, prefilter
from gangopt.schema import Plan
from gangopt.solvers.cpsat.encoding import encode
from gangopt.solvers.cpsat.guard import estimated_variables
from gangopt.solvers.cpsat.hints import plan_values
from gangopt.solvers.cpsat.neighbourhood import DOMAINS_PER_GANG, MIN_CLASSES_PER_ROLE, restrict
from gangopt.solvers.greedy import greedy
from tests.solvers.cpsat.probe import busy_round, feasible


def snapshot(pre: Prefiltered) -> tuple[object, ...]:
    """Everything of ``pre`` that restrict could write into, as plain values."""
    return (
        [(c.nodes[:], c.free.tolist(), dict(c.candidates), dict(c.domains), c.idle) for c in pre.classes],
        {key: fit.tolist() for key, fit in pre.fits.items()},
        {gi: dict(roles) for gi, roles in pre.stranded.items()},
        copy.deepcopy(pre.required_domains),
        pre.pending[:],
        pre.nodes_pruned,
    )


def key_of(pre: Prefiltered, gang: str, role: str) -> RoleKey:
    for kind, gangs in (("pending", pre.rnd.pending), ("running", pre.rnd.running)):
        for gi, g in enumerate(gangs):
            if g.name == gang:
                return RoleKey(kind, gi, next(i for i, r in enumerate(g.roles) if r.name == role))
    raise KeyError(gang)


def used_classes(view: Prefiltered, plan: Plan) -> dict[RoleKey, set[int]]:
    """Per role, the view's classes holding the plan's new pods (every node must be in one)."""
    class_of = {node: k for k, c in enumerate(view.classes) for node in c.nodes}
    out: dict[RoleKey, set[int]] = {}
    for p in plan.placements:
        k = class_of[view.topo.node_index[p.node]]  # KeyError: the plan's node was dropped
        out.setdefault(key_of(view, p.gang, p.role), set()).add(k)
    return out


@pytest.mark.parametrize(("seed", "budget"), [(3, 24), (5, 40), (7, 10_000)])
def test_restrict_leaves_the_prefiltered_round_as_it_was(seed: int, budget: int) -> None:
    """restrict returns a copy: classes, fit table, stranded pods and counters of ``pre`` unchanged."""
    rnd = busy_round(seed, nodes=32)
    pre = prefilter(rnd)
    before = snapshot(pre)
    view, _ = restrict(pre, greedy(rnd), budget)
    assert snapshot(pre) == before
    assert view is not pre
    if len(view.classes) < len(pre.classes):
        assert view.classes is not pre.classes and view.fits is not pre.fits


@pytest.mark.parametrize("seed", [3, 5, 7])
def test_restrict_keeps_every_class_the_plan_uses_and_respects_the_budget(seed: int) -> None:
    """Each role may use the classes of the plan's pods; beyond them, about ``budget``
    placements in all (at least MIN_CLASSES_PER_ROLE per role), and classes no role may use are
    dropped."""
    rnd = busy_round(seed, nodes=32)
    pre = prefilter(rnd)
    plan = greedy(rnd)
    budget = 24
    view, allowed = restrict(pre, plan, budget)
    assert sum(len(classes) for classes in allowed.values()) < estimated_variables(pre)
    used = used_classes(view, plan)
    for key, classes in used.items():
        assert classes <= allowed[key], key
    keys = len(allowed)
    per_role = max(MIN_CLASSES_PER_ROLE, budget // keys)
    extra = sum(len(classes - used.get(key, set())) for key, classes in allowed.items())
    assert extra <= keys * per_role
    assert all(len(classes - used.get(key, set())) <= per_role for key, classes in allowed.items())
    reachable = set().union(*allowed.values())
    assert reachable == set(range(len(view.classes)))
    for key, classes in allowed.items():
        assert all(view.fits[key][k] > 0 for k in classes - used.get(key, set())), key


@pytest.mark.parametrize("seed", [3, 5, 7])
def test_a_gang_with_a_required_level_keeps_only_its_roomiest_domains(seed: int) -> None:
    """Required level: a pending gang's allowed classes (beyond the plan's) lie in at most
    DOMAINS_PER_GANG feasible domains of that level."""
    rnd = busy_round(seed, nodes=32)
    pre = prefilter(rnd)
    view, allowed = restrict(pre, greedy(rnd), 24)
    checked = 0
    for key, classes in allowed.items():
        gang = view.gang(key.kind, key.gang)
        level = gang.topology.required if gang.topology else None
        if key.kind != "pending" or level is None:
            continue
        domains = {view.classes[k].domains[level] for k in classes}
        assert domains <= set(view.required_domains[key.gang])
        assert len(domains) <= DOMAINS_PER_GANG + 1  # + the plan's own domain
        checked += 1
    assert checked


@pytest.mark.parametrize("seed", [3, 5, 7])
def test_a_model_over_the_restriction_is_feasible_with_the_greedy_plan(seed: int) -> None:
    """encode(view, allowed) accepts the plan it was restricted around, fixed as constraints."""
    rnd = busy_round(seed, nodes=32)
    pre = prefilter(rnd)
    plan = greedy(rnd)
    view, allowed = restrict(pre, plan, 24)
    enc = encode(view, allowed)
    assert len(enc.x) < len(encode(pre).x)
    values = plan_values(enc, plan)
    decisions = {v.index: v for v in [*enc.y.values(), *enc.x.values(), *enc.alive.values(), *enc.kept.values()]}
    assert sum(values[v.index] for v in enc.y.values()) == len(plan.admitted)
    assert feasible(enc, {decisions[i]: value for i, value in values.items()})
    # Every x of the restricted model is on an allowed class of its role.
    for key, k in enc.x:
        assert k in allowed[key]
