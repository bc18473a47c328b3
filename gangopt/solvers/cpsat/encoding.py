"""The CP-SAT model of one round, over node classes (docs/design.md, "The model", gives the equations).

Decisions:

- ``y[g]``: pending gang g starts (all-or-nothing).
- ``x[role, k]``: new pods of a role on nodes of class k (pending gangs and running gangs
  that grow).
- ``alive[v]``: a running gang that may lose pods keeps running; ``kept[v, role, k]``: its
  pods kept on class k.
- ``z[k, p]``: nodes of class k filled with packing pattern p. A class of several nodes with
  more than one pod shape (or preemptible pods) needs patterns, because a sum over nodes does
  not say whether the pods pack on each node; a one-node class uses plain capacity rows.
- topology: ``w[g, d]`` the one domain of a required level, ``u[g, d]`` domains used at a
  preferred level, ``s[g, d]`` slices in a domain.

The objective is lexicographic (see :mod:`gangopt.objective`); :class:`Encoding` keeps each
priority tier and the secondary terms as separate linear expressions, and
:mod:`gangopt.solvers.cpsat` optimizes them in stages.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from ortools.sat.python import cp_model

from gangopt.objective import SCALE, ObjectiveTerms
from gangopt.prefilter import NodeClass, Prefiltered, RoleKey, request_vector, role_named
from gangopt.quantities import MILLI
from gangopt.quota_tree import quota_rows, row_bounds
from gangopt.schema import PendingGang, RunningGang
from gangopt.scope import Scope

MAX_PATTERNS = 48
"""Patterns per class before the class is split into one-node classes (exact, but larger)."""

Expr = cp_model.LinearExprT
Terms = list[tuple[cp_model.IntVar, int]]
LowPods = list[tuple[RoleKey, cp_model.IntVar]]
Licensed = Sequence[tuple[cp_model.IntVar, LowPods]]


@dataclass(frozen=True)
class Pattern:
    """How one node of a class is filled: candidate pods kept, and pod slots per shape."""

    kept: tuple[int, ...]
    """Per candidate entry of the class (sorted order), pods kept on the node."""
    slots: tuple[int, ...]
    """Per shape of the class, how many new pods of that shape the node takes."""


@dataclass
class ClassModel:
    """What the model holds for one node class."""

    cls: NodeClass
    keys: list[RoleKey]
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    patterns: list[Pattern] = field(default_factory=list)
    z: list[cp_model.IntVar] = field(default_factory=list)
    entries: list[tuple[int, str]] = field(default_factory=list)
    """Candidate (running gang, role) entries on this class, in pattern order."""

    dims: list[int] = field(default_factory=list)
    """Resources that can bind on this class; the others are implied by the GPU count (every
    pod that could land here asks for no more of them per GPU than the class has per GPU)."""

    def project(self, request: np.ndarray) -> tuple[int, ...]:
        """A request seen through the binding resources: the pod's shape on this class."""
        return tuple(int(request[d]) for d in self.dims)

    def pods_per_node(self, shape: tuple[int, ...]) -> int:
        """How many pods of ``shape`` one node of the class takes (ignoring candidate pods)."""
        room = self.cls.free[self.dims]
        req = np.array(shape, dtype=np.int64)
        positive = req > 0
        if not positive.any():
            return 1 << 30
        return int((room[positive] // req[positive]).min())


@dataclass
class Usage:
    """Requests of kept and new pods per ``(queue, resource)`` after the plan: variable terms
    ``(var, amount, owner)`` (owner: the candidate running gang whose pods the term counts, -1
    for new pods), the constant part (running gangs that cannot lose pods), and the usage
    before the round."""

    terms: dict[tuple[str, str], list[tuple[cp_model.IntVar, int, int]]]
    const: dict[tuple[str, str], int]
    before: dict[tuple[str, str], int]
    most: dict[tuple[str, str], int] = field(default_factory=dict)
    """Per cell, the largest value of its variable terms."""
    owned: dict[tuple[str, str], dict[int, list[tuple[cp_model.IntVar, int]]]] = field(default_factory=dict)
    """Per cell and candidate running gang, its terms (a victim's reclaim row leaves them out)."""


@dataclass
class Encoding:
    """The model and the variables the solver and the expansion read back."""

    model: cp_model.CpModel
    pre: Prefiltered
    terms: ObjectiveTerms
    y: dict[int, cp_model.IntVar] = field(default_factory=dict)
    alive: dict[int, cp_model.IntVar] = field(default_factory=dict)
    x: dict[tuple[RoleKey, int], cp_model.IntVar] = field(default_factory=dict)
    kept: dict[tuple[int, str, int], cp_model.IntVar] = field(default_factory=dict)
    classes: list[ClassModel] = field(default_factory=list)
    tiers: dict[int, Terms] = field(default_factory=dict)
    tier_constant: dict[int, int] = field(default_factory=dict)
    secondary: Terms = field(default_factory=list)
    secondary_constant: int = 0
    fifo: Terms = field(default_factory=list)
    # Indexes over x and kept, filled as variables are made (the model is built in one pass
    # over them; scanning all of x per gang would make the build quadratic).
    x_of_role: dict[RoleKey, list[tuple[int, cp_model.IntVar]]] = field(default_factory=lambda: defaultdict(list))
    x_of_gang: dict[tuple[str, int], list[tuple[int, cp_model.IntVar]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    x_on_class: dict[int, list[tuple[RoleKey, cp_model.IntVar]]] = field(default_factory=lambda: defaultdict(list))
    kept_of_gang: dict[int, list[tuple[str, int, cp_model.IntVar]]] = field(default_factory=lambda: defaultdict(list))
    """Last tie-break: among otherwise equal plans, start the gangs that came first."""

    scope: Scope | None = None
    """Whom a gang may preempt (read once, by the first victim's constraints)."""
    victim: dict[int, cp_model.IntVar] = field(default_factory=dict)
    """Running gang index -> whether it loses pods (the repair's cuts read it)."""
    kept_off: dict[int, list[tuple[int, LowPods, Licensed]]] = field(default_factory=lambda: defaultdict(list))
    """Per class of several nodes with patterns: each victim there with the new pods that may
    not land where it loses pods (:func:`_lower_off_losing_nodes`), read jointly per node by
    :func:`_lower_off_every_losing_node`."""
    witness_on: dict[int, list[tuple[int, cp_model.IntVar]]] = field(default_factory=lambda: defaultdict(list))
    """Per class of several nodes with patterns: each victim under a quota with the literal
    "its witness class is this one", which needs a beneficiary's pod on a node of the class
    where the victim itself loses pods (:func:`_lower_off_every_losing_node` routes it)."""
    stricter: bool = False
    """Whether a rule is encoded stricter than the round's (rule 5 per class of several nodes,
    elastic gangs with pods outside the model: see :func:`_victim_needs_beneficiary`); the
    model's optima are then no bounds."""
    usage: Usage | None = None
    """Queue usage after the plan as linear terms (built once, for quotas and reclaims)."""
    within: dict[str, cp_model.IntVar] = field(default_factory=dict)
    """Per queue: true only if the queue ends within its nominal (cohort reclaims)."""
    within_tree: dict[tuple[str, ...], cp_model.IntVar | None] = field(default_factory=dict)
    """Per cohort holding quota, and per queue and path of such cohorts: true only if the
    cohort ends within its quota, or the queue within its guarantee (cohort trees)."""
    usage_of: dict[tuple[str, str], cp_model.IntVar] = field(default_factory=dict)
    """Per (queue, resource): one variable equal to its variable usage terms, so that each
    victim's reclaim row reads it instead of repeating thousands of terms (measured on the
    contended M round with four cohort queues: the repeated rows kept the model from
    returning within its 10 s limit)."""
    bounds: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Variable index -> (lb, ub), recorded at creation: reading them back from the C++
    proto costs microseconds per call, which adds up to seconds on large rounds."""

    def int_var(self, lb: int, ub: int, name: str = "") -> cp_model.IntVar:
        var = self.model.new_int_var(lb, ub, name)
        self.bounds[var.index] = (lb, ub)
        return var

    def bool_var(self, name: str = "") -> cp_model.IntVar:
        return self.int_var(0, 1, name)

    def ub(self, var: cp_model.IntVar) -> int:
        if var.index in self.bounds:
            return self.bounds[var.index][1]
        domain = var.proto.domain  # a C++ repeated field: negative indexes do not work
        return int(domain[len(domain) - 1])

    def lb(self, var: cp_model.IntVar) -> int:
        if var.index in self.bounds:
            return self.bounds[var.index][0]
        return int(var.proto.domain[0])


def cut(enc: Encoding, pairs: list[tuple[str, str]]) -> None:
    """Forbid each (pending gang, running gang) pair of ``pairs`` together: the pending gang
    starts only if the running gang loses no pods. The repair adds these after a model answer
    handed a victim's quota to gangs of its own priority (rule 5's second reprieve check,
    which the model does not see); they cut off that answer, not the round's other plans."""
    pending = {g.name: gi for gi, g in enumerate(enc.pre.rnd.pending)}
    running = {g.name: gi for gi, g in enumerate(enc.pre.rnd.running)}
    for gang, victim in pairs:
        y, v = enc.y.get(pending.get(gang, -1)), enc.victim.get(running.get(victim, -1))
        if y is not None and v is not None:
            enc.model.add(y + v <= 1)


def encode(pre: Prefiltered, allowed: dict[RoleKey, set[int]] | None = None) -> Encoding:
    """Build the CP-SAT model of ``pre``; see the module docstring. With ``allowed``, a role's
    pods may only go to those classes (a restricted model, see :mod:`gangopt.solvers.cpsat.neighbourhood`)."""
    enc = Encoding(model=cp_model.CpModel(), pre=pre, terms=ObjectiveTerms.of(pre.rnd))
    _split_big_pattern_classes(enc, allowed)
    _gang_variables(enc)
    for k, cm in enumerate(enc.classes):
        _class_variables(enc, k, cm)
    _capacity(enc)
    _gang_rules(enc)
    _running_rules(enc)
    _topology(enc)
    _quotas(enc)
    _aggregate_rows(enc)
    _objective(enc)
    return enc


# ----------------------------------------------------------------------------- classes


def _keys_by_class(pre: Prefiltered, allowed: dict[RoleKey, set[int]] | None) -> list[list[RoleKey]]:
    """For each class, the kept roles that fit (and are allowed) there, in one matrix pass."""
    keys = [key for key in pre.fits if _kept_key(pre, key)]
    if not keys or not pre.classes:
        return [[] for _ in pre.classes]
    fits = np.stack([pre.fits[key] for key in keys]) > 0
    if allowed is not None:
        mask = np.zeros_like(fits)
        for i, key in enumerate(keys):
            mask[i, sorted(allowed.get(key, set()))] = True
        fits &= mask
    return [[keys[i] for i in np.flatnonzero(fits[:, k]).tolist()] for k in range(len(pre.classes))]


def _kept_key(pre: Prefiltered, key: RoleKey) -> bool:
    return key.gang in (pre.pending if key.kind == "pending" else pre.growers)


def _split_big_pattern_classes(enc: Encoding, allowed: dict[RoleKey, set[int]] | None) -> None:
    """Build each class's patterns; a class whose patterns explode becomes one-node classes."""
    pre = enc.pre
    keys_by_class = _keys_by_class(pre, allowed)
    models: list[ClassModel] = []
    origin: list[int] = []
    for k, cls in enumerate(pre.classes):
        cm = ClassModel(cls=cls, keys=keys_by_class[k])
        _make_patterns(enc, cm)
        if cls.size > 1 and len(cm.patterns) > MAX_PATTERNS:
            for node in cls.nodes:
                single = NodeClass(
                    nodes=[node], free=cls.free, candidates=cls.candidates, domains=cls.domains, idle=cls.idle
                )
                one = ClassModel(cls=single, keys=keys_by_class[k])
                _make_patterns(enc, one)
                models.append(one)
                origin.append(k)
        else:
            models.append(cm)
            origin.append(k)
    if len(models) != len(pre.classes):
        # The model's own view of the round: the prefilter's output stays as it was.
        index = np.array(origin, dtype=np.int64)
        enc.pre = replace(
            pre,
            classes=[cm.cls for cm in models],
            fits={key: fit[index] for key, fit in pre.fits.items()},
            domain_index={},
            derived={},
        )
    enc.classes = models


def _needs_patterns(cm: ClassModel, shapes: list[tuple[int, ...]]) -> bool:
    return cm.cls.size > 1 and (len(shapes) > 1 or bool(cm.cls.candidates))


def _binding_dims(pre: Prefiltered, free: np.ndarray, items: list[np.ndarray]) -> list[int]:
    """Resources that can bind: all but those whose per-GPU request never exceeds the class's
    free amount per GPU, for every pod that may sit here. Then "the GPUs fit" implies "they
    fit", so patterns need only the GPU count and stay few (exact, not a relaxation)."""
    every = list(range(len(pre.resources)))
    if not pre.resources or pre.resources[0] != "gpu" or free[0] <= 0 or not items:
        return every
    if any(item[0] <= 0 for item in items):
        return every
    stacked = np.stack(items)
    dominated = (stacked[:, 1:] * free[0] <= free[1:] * stacked[:, :1]).all(axis=0)
    return [0] + [r + 1 for r in range(len(pre.resources) - 1) if not dominated[r]]


def _make_patterns(enc: Encoding, cm: ClassModel) -> None:
    pre = enc.pre
    cm.entries = sorted(cm.cls.candidates)
    cand_req = [request_vector(role_named(pre.rnd.running[gi], name), pre.resources) for gi, name in cm.entries]
    cm.dims = _binding_dims(pre, cm.cls.free, [pre.requests[key] for key in cm.keys] + cand_req)
    shapes = sorted({cm.project(pre.requests[key]) for key in cm.keys}, reverse=True)
    cm.shapes = shapes
    cm.patterns = []
    if not _needs_patterns(cm, shapes):
        return
    ranges = [range(cm.cls.candidates[e] + 1) for e in cm.entries]
    shape_arr = [np.array(s, dtype=np.int64) for s in shapes]
    for kept in itertools.product(*ranges):
        room = cm.cls.free[cm.dims].copy()
        for count, req in zip(kept, cand_req, strict=True):
            room -= count * req[cm.dims]
        for slots in _maximal_fills(room, shape_arr):
            cm.patterns.append(Pattern(kept=tuple(kept), slots=slots))
            if len(cm.patterns) > MAX_PATTERNS:
                return
    if cm.cls.idle:
        empty = Pattern(kept=(), slots=tuple(0 for _ in shapes))
        if empty not in cm.patterns:
            cm.patterns.append(empty)


def _maximal_fills(room: np.ndarray, shapes: list[np.ndarray]) -> list[tuple[int, ...]]:
    """Every multiset of shapes that fits in ``room`` and leaves no room for one more pod."""
    out: list[tuple[int, ...]] = []

    def fits(rest: np.ndarray, shape: np.ndarray) -> bool:
        return bool((shape <= rest).all())

    def walk(i: int, rest: np.ndarray, counts: list[int]) -> None:
        if len(out) > MAX_PATTERNS:
            return
        if i == len(shapes):
            if not any(fits(rest, s) for s in shapes):
                out.append(tuple(counts))
            return
        shape = shapes[i]
        positive = shape > 0
        most = int((rest[positive] // shape[positive]).min()) if positive.any() else 0
        for n in range(most, -1, -1):
            walk(i + 1, rest - n * shape, [*counts, n])

    walk(0, room, [])
    return out


# ----------------------------------------------------------------------------- variables


def _gang_variables(enc: Encoding) -> None:
    m, pre = enc.model, enc.pre
    for gi in pre.pending:
        enc.y[gi] = enc.bool_var(f"y[{pre.rnd.pending[gi].name}]")
    for gi in sorted(set(pre.candidates) | set(pre.growers)):
        gang = pre.rnd.running[gi]
        if gi in pre.candidates:
            enc.alive[gi] = enc.bool_var(f"alive[{gang.name}]")
        else:
            enc.alive[gi] = m.new_constant(1)


def _current(gang: RunningGang, role_name: str) -> int:
    return sum(1 for p in gang.pods if p.role == role_name)


def _outside_required_domain(pre: Prefiltered, key: RoleKey, cm: ClassModel) -> bool:
    """Pods of a gang with a required level never go to a domain the prefilter ruled out."""
    if key.kind != "pending":
        return False
    topo = pre.rnd.pending[key.gang].topology
    if topo is None or topo.required is None:
        return False
    return cm.cls.domains[topo.required] not in pre.required_domains.get(key.gang, [])


def _class_variables(enc: Encoding, k: int, cm: ClassModel) -> None:
    """x for the roles that fit on the class, kept for its candidate pods, z for its patterns."""
    m, pre = enc.model, enc.pre
    for key in cm.keys:
        if _outside_required_domain(pre, key, cm):
            continue
        gang = pre.gang(key.kind, key.gang)
        role = gang.roles[key.role]
        room = role.replicas - (_current(gang, role.name) if isinstance(gang, RunningGang) else 0)
        ub = int(min(room, pre.fits[key][k] * cm.cls.size))
        if ub > 0:
            var = enc.int_var(0, ub)
            enc.x[(key, k)] = var
            enc.x_of_role[key].append((k, var))
            enc.x_of_gang[(key.kind, key.gang)].append((k, var))
            enc.x_on_class[k].append((key, var))
    for (gi, name), count in cm.cls.candidates.items():
        if gi in enc.alive:
            var = enc.int_var(0, count * cm.cls.size)
            enc.kept[(gi, name, k)] = var
            enc.kept_of_gang[gi].append((name, k, var))
            m.add(var <= count * cm.cls.size * enc.alive[gi])
    cm.z = [enc.int_var(0, cm.cls.size) for _ in cm.patterns]


def _x_of(enc: Encoding, key: RoleKey) -> list[tuple[int, cp_model.IntVar]]:
    return enc.x_of_role.get(key, [])


# ----------------------------------------------------------------------------- constraints


def _capacity(enc: Encoding) -> None:
    """Exact per-node capacity: plain rows on one-node classes, a pod count on classes of one
    shape, patterns on the rest."""
    m, pre = enc.model, enc.pre
    for k, cm in enumerate(enc.classes):
        new = [(key, enc.x[(key, k)]) for key in cm.keys if (key, k) in enc.x]
        kept = [(e, enc.kept[(e[0], e[1], k)]) for e in cm.entries if (e[0], e[1], k) in enc.kept]
        if cm.patterns:
            _pattern_rows(enc, cm, new, kept)
        elif cm.cls.size == 1:
            _node_rows(enc, cm, new, kept)
        elif new:
            per_node = cm.pods_per_node(cm.project(pre.requests[new[0][0]]))
            m.add(sum(var for _, var in new) <= per_node * cm.cls.size)


def _pattern_rows(
    enc: Encoding,
    cm: ClassModel,
    new: list[tuple[RoleKey, cp_model.IntVar]],
    kept: list[tuple[tuple[int, str], cp_model.IntVar]],
) -> None:
    """Nodes of the class are split among patterns; pods of a shape use that shape's slots."""
    m, pre = enc.model, enc.pre
    m.add(sum(cm.z) == cm.cls.size)
    for s, shape in enumerate(cm.shapes):
        users = [var for key, var in new if cm.project(pre.requests[key]) == shape]
        slots = [(z, p.slots[s]) for p, z in zip(cm.patterns, cm.z, strict=True) if p.slots and p.slots[s]]
        if users:
            m.add(sum(users) <= sum(c * z for z, c in slots))
    for entry, var in kept:
        i = cm.entries.index(entry)
        m.add(var == sum(p.kept[i] * z for p, z in zip(cm.patterns, cm.z, strict=True) if p.kept and p.kept[i]))


def _node_rows(
    enc: Encoding,
    cm: ClassModel,
    new: list[tuple[RoleKey, cp_model.IntVar]],
    kept: list[tuple[tuple[int, str], cp_model.IntVar]],
) -> None:
    """One node: per resource, new pods plus kept candidate pods within the fixed free room."""
    m, pre = enc.model, enc.pre
    for r in range(len(pre.resources)):
        row = [(var, int(pre.requests[key][r])) for key, var in new]
        row += [
            (var, int(request_vector(role_named(pre.rnd.running[e[0]], e[1]), pre.resources)[r])) for e, var in kept
        ]
        row = [(v, c) for v, c in row if c]
        if row:
            expr = cp_model.LinearExpr.weighted_sum([v for v, _ in row], [c for _, c in row])
            m.add(expr <= int(cm.cls.free[r]))


def _gang_rules(enc: Encoding) -> None:
    """All-or-nothing with elastic bounds, per gang and per role; gang groups together."""
    m, pre = enc.model, enc.pre
    groups: dict[str, list[int]] = defaultdict(list)
    for gi in pre.pending:
        gang = pre.rnd.pending[gi]
        y = enc.y[gi]
        total: list[cp_model.IntVar] = []
        for ri, role in enumerate(gang.roles):
            xs = [var for _, var in _x_of(enc, RoleKey("pending", gi, ri))]
            total += xs
            m.add(sum(xs) >= gang.role_minimum(role) * y)
            m.add(sum(xs) <= role.replicas * y)
        m.add(sum(total) >= gang.minimum * y)
        m.add(sum(total) <= gang.maximum * y)
        if gang.group:
            groups[gang.group].append(gi)
    for members in groups.values():
        for gi in members[1:]:
            m.add(enc.y[gi] == enc.y[members[0]])


def members(enc: Encoding, gi: int, role_name: str) -> tuple[list[cp_model.IntVar], int, int]:
    """Pods of running gang ``gi``'s role after the plan: (variables summed, constant, stranded)
    where stranded pods count only while the gang stays alive."""
    pre = enc.pre
    gang = pre.rnd.running[gi]
    ri = next(i for i, r in enumerate(gang.roles) if r.name == role_name)
    grow = [var for _, var in _x_of(enc, RoleKey("running", gi, ri))]
    if gi in pre.candidates:
        kept = [var for name, _, var in enc.kept_of_gang.get(gi, []) if name == role_name]
        stranded = pre.stranded.get(gi, {}).get(role_name, 0)
        return kept + grow, 0, stranded
    return grow, _current(gang, role_name), 0


def _running_rules(enc: Encoding) -> None:
    """A running gang ends with 0 pods or within its bounds; losing pods needs a reason."""
    m, pre = enc.model, enc.pre
    for gi, alive in enc.alive.items():
        gang = pre.rnd.running[gi]
        everything: list[cp_model.LinearExprT] = []
        for role in gang.roles:
            vars_, const, stranded = members(enc, gi, role.name)
            expr = sum(vars_) + const + stranded * alive
            everything.append(expr)
            m.add(expr >= gang.role_minimum(role) * alive)
            m.add(expr <= role.replicas * alive)
        m.add(sum(everything) >= gang.minimum * alive)
        m.add(sum(everything) <= gang.maximum * alive)
        if gi in pre.candidates:
            _victim_needs_beneficiary(enc, gi)
            _grow_or_shrink(enc, gi)
    for k in sorted(set(enc.kept_off) | set(enc.witness_on)):
        victims, witnesses = enc.kept_off.get(k, []), enc.witness_on.get(k, [])
        if len(victims) > 1 or witnesses:
            _lower_off_every_losing_node(enc, k, victims, witnesses)


def _grow_or_shrink(enc: Encoding, gi: int) -> None:
    """A running gang either keeps all its pods (and may grow) or loses some (and does not
    grow): losing a pod and gaining one would just move it, at a restart's cost. Gangs split
    in slices keep all pods or none."""
    m, pre = enc.model, enc.pre
    gang = pre.rnd.running[gi]
    kept = [var for _, _, var in enc.kept_of_gang.get(gi, [])]
    stranded = sum(pre.stranded.get(gi, {}).values())
    kept_all = sum(kept) + stranded * enc.alive[gi]
    if gang.topology is not None and gang.topology.slice_level is not None:
        m.add(kept_all == len(gang.pods) * enc.alive[gi])
        return
    grow = [var for _, var in enc.x_of_gang.get(("running", gi), [])]
    if not grow:
        return
    growing = enc.bool_var(f"growing[{gang.name}]")
    m.add(sum(grow) <= sum(enc.ub(v) for v in grow) * growing)
    m.add(kept_all >= len(gang.pods) * growing)


def _victim_needs_beneficiary(enc: Encoding, gi: int) -> None:
    """A gang loses pods only if a pod of a gang that may preempt it lands where it runs, and
    pods of gangs that may not preempt it stay off the classes where it loses pods (rule 5).

    "May preempt" is :mod:`gangopt.scope`'s reading: the static licences (strictly higher
    priority within the queue policies) are fixed per pair; a cohort reclaim
    (:meth:`~gangopt.scope.Scope.reclaim_needs`) holds only on some usage after the plan, so
    such a pair's pods count as the victim's beneficiaries under a licence literal that
    implies that usage (:func:`_reclaim_licence`), and are kept off the classes where the
    victim loses pods without it."""
    m, pre = enc.model, enc.pre
    gang = pre.rnd.running[gi]
    scope = Scope(pre.rnd) if enc.scope is None else enc.scope
    enc.scope = scope
    kept = [var for _, _, var in enc.kept_of_gang.get(gi, [])]
    stranded = sum(pre.stranded.get(gi, {}).values())
    # Pods on nodes left out of the model stay or go with the whole gang: the model cannot
    # shrink an elastic gang there, which rule 5 allows when the pods free quota (a hypothesis
    # round: greedy shrank one pod on a cordoned node and one where the preemptor landed, 20.0
    # on tier 0 against the model's 0.0, whose only way was to evict the gang). Without a quota
    # on the gang's queue such a pod is never needed (nobody lands on its node), so no loss.
    limited = any(q.name == gang.queue and q.nominal for q in pre.rnd.queues)
    enc.stricter |= bool(stranded) and limited and len(gang.pods) > gang.minimum  # restricted models only
    victim = enc.victim[gi] = enc.bool_var(f"victim[{gang.name}]")
    m.add(sum(kept) + stranded * enc.alive[gi] >= len(gang.pods) * (1 - victim))
    hosts = {k for _, k, _ in enc.kept_of_gang.get(gi, [])}
    # New pods on each class where the gang runs: higher priorities may take its place, the
    # others may not land where it loses pods (rule 5 of docs/plan-semantics.md).
    helpers_on: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    lower_on: dict[int, list[tuple[RoleKey, cp_model.IntVar]]] = defaultdict(list)
    # Cohort reclaims: per class and licence literal, the pods of the gangs that may preempt
    # the gang only under that licence; "helps" literals stand for "such a pod lands here".
    reclaim_on: dict[int, dict[int, tuple[cp_model.IntVar, list[tuple[RoleKey, cp_model.IntVar]]]]] = defaultdict(
        dict
    )
    licences: dict[tuple[str, str], cp_model.IntVar | None] = {}
    # made on first need, once per path of quota-holding cohorts on the victim's side
    borrowing: dict[tuple[str, ...], cp_model.IntVar | None] = {}
    for k in hosts:
        for key, var in enc.x_on_class.get(k, []):
            spec = pre.gang(key.kind, key.gang)
            if scope.static(spec, gang):
                helpers_on[k].append(var)
                continue
            needs = scope.reclaim_needs(spec, gang)
            lit = None
            if needs == "own_nominal":  # a newer gang of equal priority in spec's own queue
                lit = _within(enc, spec.queue)
                if lit is None:  # the queue lists no nominal: always within it
                    helpers_on[k].append(var)
                    continue
            elif needs != "never":
                if (spec.queue, needs) not in licences:
                    mine, theirs = scope.quota_paths(spec.queue, gang.queue)
                    if tuple(theirs) not in borrowing:
                        borrowing[tuple(theirs)] = _borrowing(enc, gi, theirs)
                    above = borrowing[tuple(theirs)]
                    licences[(spec.queue, needs)] = (
                        None if above is None else _reclaim_licence(enc, above, spec.queue, needs, mine)
                    )
                lit = licences[(spec.queue, needs)]
            if lit is None:
                lower_on[k].append((key, var))
            else:
                reclaim_on[k].setdefault(lit.index, (lit, []))[1].append((key, var))
    for k, groups in reclaim_on.items():
        for lit, pairs in groups.values():
            helps = enc.bool_var()  # a pod of a gang this licence covers lands on class k
            m.add(sum(var for _, var in pairs) >= 1).only_enforce_if(helps)
            m.add_implication(helps, lit)
            helpers_on[k].append(helps)
    # Rule 5 wants a beneficiary on *some* node where the gang lost pods. Without a quota on
    # the gang's queue that means one on every class where it loses pods (a pod given back
    # where no preemptor landed fits again, so the reprieve forbids the loss). Under a quota
    # the other losses may free quota only (a hypothesis round: run1 shrunk on n0 for quota and
    # on n1 where job0 landed; greedy's secondary -0.7 against a model that wanted a
    # beneficiary per class and "proved" -1.4): one witness class then suffices. On a class of
    # several nodes the witness is a node, not the class: a beneficiary's pod on a node where
    # the gang loses pods (a hypothesis round, tests/test_regressions.py RULE5_BENEFICIARY:
    # run6 shrunk on n1 while job0 landed on n0 of its class; the validator refused the plan).
    witnesses: list[cp_model.IntVar] = []
    for k in sorted(hosts):
        cm = enc.classes[k]
        kept_k = [enc.kept[(gi, name, k)] for (g, name) in cm.entries if g == gi and (gi, name, k) in enc.kept]
        full = sum(count for (g, _), count in cm.cls.candidates.items() if g == gi) * cm.cls.size
        low = lower_on.get(k, [])
        licensed = list(reclaim_on.get(k, {}).values())
        if not helpers_on.get(k) and not limited:
            m.add(sum(kept_k) >= full * enc.alive[gi])
            if low:  # the gang loses pods here only by eviction
                low_vars = [v for _, v in low]
                m.add(sum(low_vars) <= sum(enc.ub(v) for v in low_vars) * enc.alive[gi])
            continue
        if (low or licensed) and kept_k:
            if cm.patterns and cm.cls.size > 1:  # node by node through the patterns
                _lower_off_losing_nodes(enc, cm, gi, low, licensed)
                enc.kept_off[k].append((gi, low, licensed))
            else:  # exact on one node; a class of several without patterns holds no candidates today
                enc.stricter |= cm.cls.size > 1
                loses = enc.bool_var()
                m.add(sum(kept_k) >= full - full * loses)
                if low:
                    low_vars = [v for _, v in low]
                    m.add(sum(low_vars) <= sum(enc.ub(v) for v in low_vars) * (1 - loses))
                for lit, pairs in licensed:
                    m.add(sum(v for _, v in pairs) == 0).only_enforce_if([loses, lit.Not()])
        if not helpers_on.get(k):
            continue
        if limited:
            witness = enc.bool_var()  # the gang loses a pod on class k and a beneficiary lands there
            m.add(sum(helpers_on[k]) >= 1).only_enforce_if(witness)
            m.add(sum(kept_k) <= full - 1).only_enforce_if(witness)
            if cm.patterns and cm.cls.size > 1:  # ... on one same node: routed per pattern
                enc.witness_on[k].append((gi, witness))
            witnesses.append(witness)
            continue
        helped = enc.bool_var()
        m.add(sum(kept_k) >= full * enc.alive[gi] - full * helped)
        m.add(helped <= sum(helpers_on[k]))
    if limited:
        m.add(victim <= sum(witnesses))
    elif helpers := [v for vs in helpers_on.values() for v in vs]:
        m.add(victim <= sum(helpers))
    else:
        m.add(victim == 0)


def _lower_off_losing_nodes(
    enc: Encoding,
    cm: ClassModel,
    gi: int,
    lower: list[tuple[RoleKey, cp_model.IntVar]],
    licensed: Sequence[tuple[cp_model.IntVar, list[tuple[RoleKey, cp_model.IntVar]]]] = (),
) -> None:
    """Rule 5's node form on a class of several nodes, node by node through the patterns: the
    new pods of gangs that may not preempt ``gi`` fit, shape by shape, in the slots of the
    nodes whose pattern keeps all of ``gi``'s pods. Per class (``gi`` loses a pod somewhere on
    the class: no lower pod anywhere on it) was stricter than the rule, so the model's optimum
    was no bound (a hypothesis round: greedy shrank a gang on n1 and put a priority-0 gang on
    n0 of the same class, 5.2 on tier 0 against the model's "proven" 5.0;
    tests/test_regressions.py). Licensed pods of a shape take the losing nodes' slots first in
    the expansion, so per shape this is also enough for the placement to exist.

    ``licensed`` pods (cohort reclaims) count as lower ones unless their licence literal
    holds: each group adds a variable that equals its pods of the shape when the licence is
    off (and may be 0 when it is on)."""
    idx = [i for i, e in enumerate(cm.entries) if e[0] == gi]
    keeps_all = [
        bool(p.kept) and all(p.kept[i] >= cm.cls.candidates[cm.entries[i]] for i in idx) for p in cm.patterns
    ]
    for s, shape in enumerate(cm.shapes):
        users: list[cp_model.LinearExprT] = [
            var for key, var in lower if cm.project(enc.pre.requests[key]) == shape
        ]
        for lit, pairs in licensed:
            group = [var for key, var in pairs if cm.project(enc.pre.requests[key]) == shape]
            if group:
                most = sum(enc.ub(v) for v in group)
                unlicensed = enc.int_var(0, most)
                enc.model.add(unlicensed >= sum(group) - most * lit)
                users.append(unlicensed)
        if not users:
            continue
        open_ = [(p, z) for p, z, ok in zip(cm.patterns, cm.z, keeps_all, strict=True) if ok and p.slots]
        room = [(z, p.slots[s]) for p, z in open_ if p.slots[s]]
        enc.model.add(sum(users) <= sum(c * z for z, c in room))


def _lower_off_every_losing_node(
    enc: Encoding,
    k: int,
    victims: list[tuple[int, LowPods, Licensed]],
    witnesses: Sequence[tuple[int, cp_model.IntVar]] = (),
) -> None:
    """Rule 5's node form for several victims on one class at once: a new pod may land only on
    a node where no victim it may not preempt lost pods. :func:`_lower_off_losing_nodes` reads
    it per victim, which lets a pod that may preempt neither of two victims fit "where the
    first kept its pods" and "where the second kept its pods" with no node where both did (a
    hypothesis round, tests/test_regressions.py ``RULE5_TWO_VICTIMS``: job1 started on n0,
    where run0 lost a pod; the door refused the plan and returned greedy's, status feasible).

    Per shape, the class's new pods are split by the victims they must avoid (and, for
    cohort reclaims, the licence literals that would let them land there anyway) and routed
    to the patterns that keep those victims whole: one flow variable per group and pattern,
    each pattern's slots shared by all groups. Exact, so the model's bounds stay the round's.

    ``witnesses`` (victims under a quota whose one witness class is this one, with its
    literal) read the same flows: the literal needs one pod routed to a pattern where the
    victim loses pods, of a group that does not always avoid it (a licensed group's flow there
    already needs its licence). Read per class, run6 lost its pod on n1 while job0 landed on
    n0 (tests/test_regressions.py ``RULE5_BENEFICIARY``: the validator refused CP-SAT's plan,
    greedy's was returned as a fallback). The flows are then built for every shape of the
    class, a victim or not.
    """
    m, pre, cm = enc.model, enc.pre, enc.classes[k]
    keeps: dict[int, list[bool]] = {}
    for gi in sorted({gi for gi, _, _ in victims} | {gi for gi, _ in witnesses}):
        idx = [i for i, e in enumerate(cm.entries) if e[0] == gi]
        keeps[gi] = [
            bool(p.kept) and all(p.kept[i] >= cm.cls.candidates[cm.entries[i]] for i in idx) for p in cm.patterns
        ]
    # per new-pod variable: the victims it always avoids, and (victim, licence) pairs it avoids
    # unless the licence holds
    avoid: dict[int, tuple[set[int], set[tuple[int, int]]]] = {}
    licence: dict[int, cp_model.IntVar] = {}
    for gi, low, licensed in victims:
        for _, var in low:
            avoid.setdefault(var.index, (set(), set()))[0].add(gi)
        for lit, pairs in licensed:
            licence[lit.index] = lit
            for _, var in pairs:
                avoid.setdefault(var.index, (set(), set()))[1].add((gi, lit.index))
    # per witness victim: the flows of pods that may preempt it onto patterns where it loses pods
    hits: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    for s, shape in enumerate(cm.shapes):
        groups: dict[tuple[frozenset[int], frozenset[tuple[int, int]]], list[cp_model.IntVar]] = defaultdict(list)
        for key, var in enc.x_on_class.get(k, []):
            if cm.project(pre.requests[key]) == shape:
                hard, soft = avoid.get(var.index, (set(), set()))
                groups[(frozenset(hard), frozenset(soft))].append(var)
        involved = {gi for always, unless in groups for gi in [*always, *(v for v, _ in unless)]}
        if not witnesses and len(involved) < 2:
            continue  # one victim at most: the per-victim rows are exact
        flows: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for (always, unless), pods in groups.items():
            most = sum(enc.ub(v) for v in pods)
            routed: list[cp_model.IntVar] = []
            for j, (p, z) in enumerate(zip(cm.patterns, cm.z, strict=True)):
                if not p.slots or not p.slots[s] or not all(keeps[gi][j] for gi in always):
                    continue
                f = enc.int_var(0, min(most, p.slots[s] * enc.ub(z)))
                # only under every licence that lets the group onto a node losing pods
                for li in sorted({li for gi, li in unless if not keeps[gi][j]}):
                    m.add(f == 0).only_enforce_if(licence[li].Not())
                routed.append(f)
                flows[j].append(f)
                for gi, _ in witnesses:  # a group that always avoids gi has no flow where gi loses pods
                    if not keeps[gi][j]:
                        hits[gi].append(f)
            m.add(sum(routed) == sum(pods))
        for j, fs in flows.items():
            m.add(sum(fs) <= cm.patterns[j].slots[s] * cm.z[j])
    for gi, witness in witnesses:
        m.add(sum(hits[gi]) >= 1).only_enforce_if(witness)


def _borrowing(enc: Encoding, gi: int, path: Sequence[str] = ()) -> cp_model.IntVar | None:
    """A literal that implies running gang ``gi``'s queue is *borrowing with it* (rule 5,
    clause 3): above its nominal with the gang's lost pods back, on a resource those pods
    request and the queue lists in ``nominal``, and on that same resource every cohort of
    ``path`` (the quota-holding cohorts between the queue and the lowest cohort it shares with
    the preemptor's, :meth:`~gangopt.scope.Scope.quota_paths`) that holds it above its quota
    too, ``U_c > S_c`` with the gang whole (a cohort's own quota guarantees its subtree); None
    when no plan makes it so. Exact, not a relaxation: "with the lost pods back" is the usage
    counting the gang whole (a gang that loses pods does not grow, :func:`_grow_or_shrink`),
    "lost pods request r" is "some role requesting r lost a pod", and ``U_c`` is the maximum
    of its linear forms (:meth:`~gangopt.quota_tree.CohortTree.forms`), so ``U_c > S_c`` is
    "some form above", one literal per form when a lending limit makes several."""
    m, pre = enc.model, enc.pre
    gang = pre.rnd.running[gi]
    scope = enc.scope
    assert scope is not None
    theirs = scope.queues[gang.queue]
    usage = _usage(enc)
    borrow_any: list[cp_model.IntVar] = []
    for res in sorted(theirs.nominal):
        roles = [r for r in gang.roles if r.requests.get(res, 0) > 0]
        if not roles:
            continue
        cell = (gang.queue, res)
        own = usage.owned.get(cell, {}).get(gi, [])
        whole = sum(r.requests[res] * _current(gang, r.name) for r in roles)
        need = theirs.nominal[res] + 1 - whole - usage.const.get(cell, 0)
        if need > 0 and usage.most.get(cell, 0) - sum(a * enc.ub(v) for v, a in own) < need:
            continue  # the queue never borrows this resource with the gang whole
        cohorts: list[list[tuple[cp_model.LinearExprT, int]]] = []
        for c in path:
            rows = _above_quota(enc, c, res, gi, whole)
            if rows is None:
                break  # c holds res and is never above its quota with the gang whole
            cohorts.append(rows)
        else:
            above = enc.bool_var()  # above the nominal on res with the gang whole, and it lost such a pod
            # the queue's usage without the gang's own terms
            theirs_now = cp_model.LinearExpr.weighted_sum([v for v, _ in own], [a for _, a in own])
            if need > 0:
                m.add(_usage_var(enc, gang.queue, res) - theirs_now >= need).only_enforce_if(above)
            for rows in cohorts:
                _some_row(enc, above, rows)
            kept_r = [v for name, _, v in enc.kept_of_gang.get(gi, []) if any(r.name == name for r in roles)]
            stranded_r = sum(pre.stranded.get(gi, {}).get(r.name, 0) for r in roles)
            count_r = sum(_current(gang, r.name) for r in roles)
            m.add(sum(kept_r) + stranded_r * enc.alive[gi] <= count_r - 1).only_enforce_if(above)
            borrow_any.append(above)
    if not borrow_any:
        return None
    borrowing = enc.bool_var(f"borrowing[{gang.name}]")
    m.add_bool_or(borrow_any).only_enforce_if(borrowing)
    return borrowing


def _tree_usage(
    enc: Encoding, queues: frozenset[str], res: str, without: int = -1
) -> tuple[cp_model.LinearExprT, int, int]:
    """The summed usage of ``queues`` in ``res`` after the plan as (variable part, constant
    part, largest value of the variable part); with ``without`` (a running gang index), that
    gang's own terms are left out of the variable part."""
    usage = _usage(enc)
    parts: list[cp_model.LinearExprT] = []
    const = most = 0
    for q in sorted(queues):
        cell = (q, res)
        const += usage.const.get(cell, 0)
        if usage.terms.get(cell):
            parts.append(_usage_var(enc, q, res))
            most += usage.most.get(cell, 0)
        own = usage.owned.get(cell, {}).get(without, []) if without >= 0 else []
        if own:
            parts.append(cp_model.LinearExpr.weighted_sum([v for v, _ in own], [-a for _, a in own]))
            most -= sum(a * enc.ub(v) for v, a in own)
    return sum(parts), const, most


def _above_quota(
    enc: Encoding, cohort: str, res: str, gi: int, whole: int
) -> list[tuple[cp_model.LinearExprT, int]] | None:
    """Rows ``expr ≥ need`` of which one must hold for ``cohort``'s subtree to be above its
    quota on ``res`` with running gang ``gi`` counted whole (``whole`` of ``res``): ``[]``
    when that always holds or the cohort does not hold ``res``, None when it never does."""
    scope = enc.scope
    assert scope is not None and scope.tree is not None
    tree = scope.tree
    if res not in tree.spec[cohort].nominal:
        return []
    queue = enc.pre.rnd.running[gi].queue
    quota = tree.quota(cohort, res)
    rows: list[tuple[cp_model.LinearExprT, int]] = []
    for queues, offset in tree.ordered_forms(cohort, res):
        if queue in queues:
            expr, const, most = _tree_usage(enc, queues, res, without=gi)
            const += whole
        else:
            expr, const, most = _tree_usage(enc, queues, res)
        need = quota + offset + 1 - const
        if need <= 0:
            return []  # this form is above whatever the plan does
        if most >= need:
            rows.append((expr, need))
    return rows or None


def _some_row(enc: Encoding, lit: cp_model.IntVar, rows: list[tuple[cp_model.LinearExprT, int]]) -> None:
    """``lit`` implies ``expr ≥ need`` for one of ``rows`` (nothing for no rows)."""
    if len(rows) == 1:
        enc.model.add(rows[0][0] >= rows[0][1]).only_enforce_if(lit)
    elif rows:
        picks = [enc.bool_var() for _ in rows]
        for pick, (expr, need) in zip(picks, rows, strict=True):
            enc.model.add(expr >= need).only_enforce_if(pick)
        enc.model.add_bool_or(picks).only_enforce_if(lit)


def _reclaim_licence(
    enc: Encoding, borrowing: cp_model.IntVar, queue: str, needs: str, path: Sequence[str] = ()
) -> cp_model.IntVar:
    """A literal that implies the usage under which gangs of ``queue`` may reclaim a victim
    (:meth:`gangopt.scope.Scope.reclaims`): the victim's queue ``borrowing`` with it and, when
    ``needs`` is ``"within_nominal"``, ``queue`` within its guarantee
    (:func:`_within_guarantee` over ``path``, the quota-holding cohorts on its side)."""
    within = _within_guarantee(enc, queue, path) if needs == "within_nominal" else None
    if within is None:
        return borrowing
    licence = enc.bool_var()
    enc.model.add_implication(licence, borrowing)
    enc.model.add_implication(licence, within)
    return licence


def _within(enc: Encoding, queue: str) -> cp_model.IntVar | None:
    """A literal that implies ``queue`` ends within its nominal on every resource it lists
    (made once per queue), or None when it lists none (always within)."""
    scope, usage = enc.scope, _usage(enc)
    assert scope is not None
    mine = scope.queues.get(queue)
    if mine is None or not mine.nominal:
        return None
    if queue not in enc.within:
        within = enc.bool_var(f"within[{queue}]")
        for res, nominal in sorted(mine.nominal.items()):
            room = nominal - usage.const.get((queue, res), 0)
            if not usage.terms.get((queue, res)):
                if room < 0:
                    enc.model.add(within == 0)
                continue
            enc.model.add(_usage_var(enc, queue, res) <= room).only_enforce_if(within)
        enc.within[queue] = within
    return enc.within[queue]


def _within_guarantee(enc: Encoding, queue: str, path: Sequence[str]) -> cp_model.IntVar | None:
    """A literal that implies ``queue`` ends within its guarantee: within its nominal
    (:func:`_within`), or some cohort of ``path`` holding quota ends within it, ``U_c ≤ S_c``
    on every resource it holds that its subtree limits (every linear form of ``U_c`` within:
    exact) — :meth:`gangopt.scope.Scope.within_guarantee`. None when always within."""
    own = _within(enc, queue)
    if own is None or not path:
        return own
    key = (queue, *path)
    if key in enc.within_tree:
        return enc.within_tree[key]
    options = [own]
    for c in path:
        lit = _cohort_within(enc, c)
        if lit is not None:
            options.append(lit)
    within = own
    if len(options) > 1:
        within = enc.bool_var(f"within_guarantee[{queue}]")
        enc.model.add_bool_or(options).only_enforce_if(within)
    enc.within_tree[key] = within
    return within


def _cohort_within(enc: Encoding, cohort: str) -> cp_model.IntVar | None:
    """A literal that implies ``cohort``'s subtree ends within its quota on every resource the
    cohort holds that its subtree limits (made once per cohort), or None when it holds none."""
    key = ("cohort", cohort)
    if key in enc.within_tree:
        return enc.within_tree[key]
    scope = enc.scope
    assert scope is not None and scope.tree is not None
    tree = scope.tree
    held = [r for r in sorted(tree.spec[cohort].nominal) if tree.limited(cohort, r)]
    lit = None
    if held:
        lit = enc.bool_var(f"within[{cohort}]")
        for res in held:
            quota = tree.quota(cohort, res)
            for queues, offset in tree.ordered_forms(cohort, res):
                expr, const, most = _tree_usage(enc, queues, res)
                room = quota + offset - const
                if room < 0:
                    enc.model.add(lit == 0)
                elif most > room:
                    enc.model.add(expr <= room).only_enforce_if(lit)
    enc.within_tree[key] = lit
    return lit


def _domain_of(cm: ClassModel, level: str) -> str:
    return cm.cls.domains[level]


def _topology(enc: Encoding) -> None:
    """Required level: one domain; preferred: count domains used; slices: multiples."""
    m, pre = enc.model, enc.pre
    for gi in pre.pending:
        gang = pre.rnd.pending[gi]
        topo = gang.topology
        if topo is None:
            continue
        xs = enc.x_of_gang.get(("pending", gi), [])
        if topo.required:
            allowed = set(pre.required_domains.get(gi, []))
            by_domain: dict[str, list[cp_model.IntVar]] = defaultdict(list)
            for k, var in xs:
                d = _domain_of(enc.classes[k], topo.required)
                if d in allowed:
                    by_domain[d].append(var)
                else:
                    m.add(var == 0)
            w = {d: enc.bool_var() for d in sorted(by_domain)}
            m.add(sum(w.values()) == enc.y[gi])
            for d, vars_ in by_domain.items():
                m.add(sum(vars_) <= gang.maximum * w[d])
        if topo.preferred:
            _preferred(enc, gi, xs)
        if topo.slice_level and topo.slice_size:
            by_domain = defaultdict(list)
            for k, var in xs:
                by_domain[_domain_of(enc.classes[k], topo.slice_level)].append(var)
            for _domain, vars_ in sorted(by_domain.items()):
                s = enc.int_var(0, gang.maximum // topo.slice_size)
                m.add(sum(vars_) == topo.slice_size * s)


def _preferred(enc: Encoding, gi: int, xs: list[tuple[int, cp_model.IntVar]]) -> None:
    """Preferred level: ``u[g, d]`` per domain used at that level and at each level above it
    (below the required one), each extra domain charged its level's cost
    (:meth:`~gangopt.objective.ObjectiveTerms.spread_levels`). A domain used implies its
    parent is used (``u_child ≤ u_parent``): true of every plan, and it gives the LP relaxation
    the tree, which the per-level rows alone do not."""
    m, gang = enc.model, enc.pre.rnd.pending[gi]
    charged = enc.terms.spread_levels(gang)
    if not charged and gang.topology is not None and gang.topology.preferred:
        charged = [(gang.topology.preferred, 0)]  # spread off: the level is still counted
    prev: tuple[str, dict[str, cp_model.IntVar]] | None = None
    for level, cost in charged:
        by_domain: dict[str, list[cp_model.IntVar]] = defaultdict(list)
        for k, var in xs:
            by_domain[_domain_of(enc.classes[k], level)].append(var)
        u = {d: enc.bool_var() for d in sorted(by_domain)}
        if not u:
            return
        for d, vars_ in by_domain.items():
            m.add(sum(vars_) <= gang.maximum * u[d])
        m.add(sum(u.values()) >= enc.y[gi])
        if cost:
            enc.secondary += [(var, -cost) for var in u.values()]
            enc.secondary.append((enc.y[gi], cost))
        if prev is not None:
            pairs = {(_domain_of(enc.classes[k], prev[0]), _domain_of(enc.classes[k], level)) for k, _ in xs}
            for child, parent in sorted(pairs):
                m.add(prev[1][child] <= u[parent])
        prev = (level, u)


def _quotas(enc: Encoding) -> None:
    """Queue and cohort limits; usage already over a limit may stay but not grow."""
    rnd = enc.pre.rnd
    if not rnd.queues:
        return
    found = _usage(enc)
    usage = {cell: [(v, a) for v, a, _ in terms] for cell, terms in found.terms.items()}
    const, before = found.const, found.before
    # Queue and cohort-tree limits as rows (gangopt/quota_tree.py), each bounded with rule 6's
    # tolerance read at its node (quota_tree.row_bounds: exact also where a lending limit
    # splits a cohort's limit into several rows).
    rows = quota_rows(rnd)
    was = [sum(before.get((q, row.resource), 0) for q in row.queues) for row in rows]
    bounds = row_bounds([row.limit for row in rows], [(row.label, row.resource) for row in rows], was)
    for row, bound in zip(rows, bounds, strict=True):
        _limit_row(enc, [(q, row.resource) for q in row.queues], usage, const, before, bound)


def _usage(enc: Encoding) -> Usage:
    """Per ``(queue, resource)``, the usage after the plan (see :class:`Usage`), built once."""
    if enc.usage is not None:
        return enc.usage
    rnd, pre = enc.pre.rnd, enc.pre
    terms: dict[tuple[str, str], list[tuple[cp_model.IntVar, int, int]]] = defaultdict(list)
    const: dict[tuple[str, str], int] = defaultdict(int)
    before: dict[tuple[str, str], int] = defaultdict(int)
    for (key, _), var in enc.x.items():
        gang = pre.gang(key.kind, key.gang)
        for res, amount in gang.roles[key.role].requests.items():
            terms[(gang.queue, res)].append((var, amount, -1))
    for gi, gang in enumerate(rnd.running):
        for role in gang.roles:
            count = _current(gang, role.name)
            for res, amount in role.requests.items():
                before[(gang.queue, res)] += amount * count
            if gi not in pre.candidates:
                for res, amount in role.requests.items():
                    const[(gang.queue, res)] += amount * count
                continue
            _, _, stranded = members(enc, gi, role.name)
            kept_vars = [v for name, _, v in enc.kept_of_gang.get(gi, []) if name == role.name]
            for res, amount in role.requests.items():
                terms[(gang.queue, res)] += [(v, amount, gi) for v in kept_vars]
                if stranded:
                    terms[(gang.queue, res)].append((enc.alive[gi], amount * stranded, gi))
    most = {cell: sum(a * enc.ub(v) for v, a, _ in cell_terms) for cell, cell_terms in terms.items()}
    owned: dict[tuple[str, str], dict[int, list[tuple[cp_model.IntVar, int]]]] = defaultdict(lambda: defaultdict(list))
    for cell, cell_terms in terms.items():
        for v, a, owner in cell_terms:
            if owner >= 0:
                owned[cell][owner].append((v, a))
    enc.usage = Usage(terms=terms, const=const, before=before, most=most, owned=owned)
    return enc.usage


def _usage_var(enc: Encoding, queue: str, res: str) -> cp_model.IntVar:
    """One variable equal to the variable part of ``queue``'s usage of ``res`` (see
    :attr:`Encoding.usage_of`)."""
    if (queue, res) not in enc.usage_of:
        usage = _usage(enc)
        cell = usage.terms.get((queue, res), [])
        var = enc.int_var(0, usage.most.get((queue, res), 0))
        expr = cp_model.LinearExpr.weighted_sum([v for v, _, _ in cell], [a for _, a, _ in cell])
        enc.model.add(var == expr)
        enc.usage_of[(queue, res)] = var
    return enc.usage_of[(queue, res)]


def _limit_row(
    enc: Encoding,
    cells: list[tuple[str, str]],
    usage: dict[tuple[str, str], list[tuple[cp_model.IntVar, int]]],
    const: dict[tuple[str, str], int],
    before: dict[tuple[str, str], int],
    limit: int,
) -> None:
    terms = [t for c in cells for t in usage.get(c, [])]
    fixed = sum(const.get(c, 0) for c in cells)
    was = sum(before.get(c, 0) for c in cells)
    bound = max(limit, was) - fixed
    if terms:
        enc.model.add(cp_model.LinearExpr.weighted_sum([v for v, _ in terms], [a for _, a in terms]) <= bound)


def _aggregate_rows(enc: Encoding) -> None:
    """Redundant capacity rows for the main resource over the cluster and each domain: the LP
    relaxation does not find these by itself, and they let CP-SAT prove bounds
    (optimization-notes §2). A row that cannot bind (all demand fits) is left out.

    Each class's part of a row (terms, capacity, most demand) is computed once and reused by
    the cluster row and every domain row that contains the class.
    """
    pre = enc.pre
    if not pre.resources:
        return
    r = 0  # resources are sorted gpu first
    parts: list[tuple[list[cp_model.IntVar], list[int], int, int]] = []
    for k, cm in enumerate(enc.classes):
        vars_: list[cp_model.IntVar] = []
        coeffs: list[int] = []
        for key, var in enc.x_on_class.get(k, []):
            amount = int(pre.requests[key][r])
            if amount:
                vars_.append(var)
                coeffs.append(amount)
        for gi, name in cm.entries:
            kept = enc.kept.get((gi, name, k))
            amount = role_named(pre.rnd.running[gi], name).requests.get(pre.resources[r], 0)
            if kept is not None and amount:
                vars_.append(kept)
                coeffs.append(amount)
        most = sum(c * enc.ub(v) for v, c in zip(vars_, coeffs, strict=True))
        parts.append((vars_, coeffs, int(cm.cls.free[r]) * cm.cls.size, most))
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for k, cm in enumerate(enc.classes):
        groups[("cluster", "")].append(k)
        for level, name in cm.cls.domains.items():
            groups[(level, name)].append(k)
    for members_ in groups.values():
        if len(members_) < 2:
            continue
        cap = sum(parts[k][2] for k in members_)
        if sum(parts[k][3] for k in members_) <= cap:
            continue
        vars_ = [v for k in members_ for v in parts[k][0]]
        coeffs = [c for k in members_ for c in parts[k][1]]
        enc.model.add(cp_model.LinearExpr.weighted_sum(vars_, coeffs) <= cap)


# ----------------------------------------------------------------------------- objective


def _objective(enc: Encoding) -> None:
    """Fill the tier and secondary terms (maximized; costs enter negated)."""
    pre, terms = enc.pre, enc.terms
    rnd = pre.rnd
    for gi, gang in enumerate(rnd.pending):
        enc.tiers.setdefault(gang.priority, [])
        enc.tier_constant.setdefault(gang.priority, 0)
        if gi in enc.y:
            enc.tiers[gang.priority].append((enc.y[gi], terms.tier_value(gang)))
            _growth_terms(enc, gang, "pending", gi, enc.y[gi])
    for gi, run in enumerate(rnd.running):
        _running_objective(enc, gi, run)
    _opened_nodes(enc)
    _guarantee(enc)
    _fifo(enc)


def _guarantee(enc: Encoding) -> None:
    """The guarantee term (:meth:`~gangopt.objective.ObjectiveTerms.guarantee_value`): per
    guaranteed queue ``held ≤ min(usage of the base resource, nominal)``, per guaranteed
    cohort ``held ≤ min(U, S)`` (its subtree's usage and quota, rule 6; ``U`` is the maximum
    of its linear forms, so with a lending limit below, ``held`` rests on one form picked by
    a literal: exact), and the term
    ``G · MILLI² ≤ round(MILLI · SCALE · guarantee) · Σ held + MILLI²/2`` (usage is in
    milli-units; rounding half up, so G is the scorer's ``round`` or one more at an exact half:
    never below the plan's value, so the stages' bounds hold). Without it the model's optimum
    ignored the value a lender's reclaim brings, and its secondary bound did not bound the
    plans that reclaim."""
    terms = enc.terms
    queues = terms.guaranteed
    if not queues:
        return
    m, base = enc.model, terms.base_resource
    usage = _usage(enc)
    held: list[cp_model.IntVar] = []
    most = 0
    for queue, nominal in sorted(queues.items()):
        cell = usage.terms.get((queue, base), [])
        fixed = usage.const.get((queue, base), 0)
        top = min(nominal, fixed + sum(a * enc.ub(v) for v, a, _ in cell))
        if top <= 0:
            continue
        h = enc.int_var(0, top)
        expr = cp_model.LinearExpr.weighted_sum([v for v, _, _ in cell], [a for _, a, _ in cell]) + fixed
        m.add(h <= expr)
        held.append(h)
        most += top
    for cohort, quota in sorted(terms.guaranteed_cohorts.items()):
        rows: list[tuple[cp_model.LinearExprT, int, int]] = []  # (expr, constant, largest value) per form
        for queues_f, offset in terms.cohort_tree.ordered_forms(cohort, base):
            form, const, most_f = _tree_usage(enc, queues_f, base)
            rows.append((form, const - offset, most_f + const - offset))
        top = min(quota, max((r[2] for r in rows), default=0))
        if top <= 0:
            continue
        h = enc.int_var(0, top)
        if len(rows) == 1:
            m.add(h <= rows[0][0] + rows[0][1])
        else:
            picks = [enc.bool_var() for _ in rows]
            for pick, (form, const, _) in zip(picks, rows, strict=True):
                m.add(h <= form + const).only_enforce_if(pick)
            m.add_bool_or(picks)
        held.append(h)
        most += top
    if not held:
        return
    per = round(MILLI * SCALE * enc.pre.rnd.policy.weights.guarantee)
    unit, half = MILLI * MILLI, MILLI * MILLI // 2
    top_g = (per * most + half) // unit
    # small coefficients for the LP (2.0 per GPU: 50·G ≤ Σ held + 25, not 10⁶·G ≤ 20,000·Σ held
    # + 500,000, which kept the contended M round's first stage from finishing in 22 s)
    common = math.gcd(per, unit, half)
    g = enc.int_var(0, top_g, "guarantee")
    m.add(g * (unit // common) <= (per // common) * sum(held) + half // common)
    enc.secondary.append((g, 1))


def _fifo(enc: Encoding) -> None:
    """Weight n for the oldest pending gang down to 1 for the newest (submit time, then name),
    the gangs of a weighted cohort least-served queue first (fair share, docs/objective.md)."""
    order = sorted(enc.y, key=lambda gi: (enc.pre.rnd.pending[gi].submit_time, enc.pre.rnd.pending[gi].name))
    order = enc.terms.tie_break_order(order)
    enc.fifo = [(enc.y[gi], len(order) - rank) for rank, gi in enumerate(order)]


def _running_objective(enc: Encoding, gi: int, gang: RunningGang) -> None:
    """A running gang's tier value (kept alive) and its secondary terms."""
    pre, terms = enc.pre, enc.terms
    enc.tiers.setdefault(gang.priority, [])
    enc.tier_constant.setdefault(gang.priority, 0)
    if gi in pre.candidates:
        enc.tiers[gang.priority].append((enc.alive[gi], terms.tier_value(gang)))
        _eviction_terms(enc, gi)
    else:
        enc.tier_constant[gang.priority] += terms.tier_value(gang)
    if gi in enc.alive:
        _growth_terms(enc, gang, "running", gi, enc.alive[gi])
    else:
        enc.secondary_constant += _static_surplus(enc, gang)


def _static_surplus(enc: Encoding, gang: RunningGang) -> int:
    minimum = enc.terms.min_pods(gang)
    return sum(enc.terms.growth_value(r) * (_current(gang, r.name) - minimum[r.name]) for r in gang.roles)


def _growth_terms(enc: Encoding, gang: PendingGang | RunningGang, kind: str, gi: int, on: cp_model.IntVar) -> None:
    """Members above the minimum: + growth value each (as members - minimum * on)."""
    minimum = enc.terms.min_pods(gang)
    for ri, role in enumerate(gang.roles):
        value = enc.terms.growth_value(role)
        if value == 0:
            continue
        if kind == "pending":
            vars_ = [var for _, var in _x_of(enc, RoleKey("pending", gi, ri))]
            const, stranded = 0, 0
        else:
            vars_, const, stranded = members(enc, gi, role.name)
        enc.secondary += [(v, value) for v in vars_]
        enc.secondary_constant += value * const
        enc.secondary.append((on, value * (stranded - minimum[role.name])))


def _eviction_terms(enc: Encoding, gi: int) -> None:
    """Cost per pod removed, and the whole-gang cost when it is evicted (see objective.py)."""
    gang = enc.pre.rnd.running[gi]
    per_pod = enc.terms.pod_removal_cost(gang)
    whole = enc.terms.eviction_cost(gang)
    current = len(gang.pods)
    kept = [var for _, _, var in enc.kept_of_gang.get(gi, [])]
    stranded = sum(enc.pre.stranded.get(gi, {}).values())
    # -(per_pod * (current - kept_all) + (whole - per_pod * current) * (1 - alive))
    enc.secondary += [(v, per_pod) for v in kept]
    enc.secondary.append((enc.alive[gi], per_pod * stranded + (whole - per_pod * current)))
    enc.secondary_constant -= per_pod * current + (whole - per_pod * current)


def _opened_nodes(enc: Encoding) -> None:
    """Idle nodes that receive new pods cost ``open_node_cost`` each."""
    cost = enc.terms.open_node_cost
    if cost == 0:
        return
    m = enc.model
    for k, cm in enumerate(enc.classes):
        if not cm.cls.idle:
            continue
        xs = [enc.x[(key, k)] for key in cm.keys if (key, k) in enc.x]
        if not xs:
            continue
        if cm.patterns:
            empty = [z for p, z in zip(cm.patterns, cm.z, strict=True) if not any(p.slots)]
            if empty:
                enc.secondary.append((empty[0], cost))
                enc.secondary_constant -= cost * cm.cls.size
            continue
        per_node = sum(enc.ub(v) for v in xs) if cm.cls.size == 1 else cm.pods_per_node(cm.shapes[0])
        opened = enc.int_var(0, cm.cls.size)
        m.add(sum(xs) <= per_node * opened)
        enc.secondary.append((opened, -cost))
