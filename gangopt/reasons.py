"""Why each waiting gang waits: every check it fails against the finished plan, in plain words.

A waiting gang ``g`` would start beside the plan if ``plan + g`` (at its minimum, preempting
only what ``g`` itself may preempt) were still a valid plan; in a plan proven optimal it is
not, or the plan would not be optimal (``g`` raises its own priority tier and takes only
from lower ones). :func:`waiting_checks` runs each check that makes ``plan + g`` invalid,
exactly, against the plan's arrays, and lists **every** one that fails; the waiting code is
the first failing check in this fixed order (``CHECK_ORDER``, as Kueue orders its admission
checks), "can never run under this limit" before "waits for it":

1. ``eligibility`` (never): a role it needs has no node it may use (cordons, selector,
   affinity, taints: the one reading, :class:`gangopt.arrays.Eligibility`).
2. ``capacity`` (never): its minimum does not fit on the nodes it may use even if they were
   empty; or it can never start this round (:func:`_free_room_never`): its minimum does not
   fit in the room it could use in any plan of this round, the free room before the round
   plus the pods of the running gangs it might preempt (:meth:`_PlanView.ever_room`), which is
   all rule 5 leaves it (the waiting gangs named as ahead of it are those whose minimum fits
   in the room its fixes add: :class:`_Taker`).
3. ``topology`` (never): it would fit, but no single domain of its required level could hold
   it even empty.
4. ``quota`` (never): its minimum alone exceeds a limit of its queue or cohort.
5. ``group`` (never): a gang of its group can never run.
6. ``quota`` (waits): a limit's headroom after the plan, plus what it may preempt in that
   limit, is short of its minimum; the text names the limit (nominal, nominal + borrowing
   limit, cohort), the resource, what it needs, what is free and who of strictly higher
   priority uses the quota; gangs this plan preempted that it may not preempt could come
   back with a raised limit, so its fix removes them.
7. ``outranked`` / ``topology`` / ``capacity`` (waits): its minimum does not fit in the room
   left after the plan on the nodes it may use (within one domain of its required level; not
   on nodes rule 5 keeps for higher priorities), counting the pods it may preempt (rule 5:
   strictly lower priority, ``preemptible``, ``policy.preemption``). The smallest set of gangs
   whose removal makes room is named: ``outranked`` when new pods of strictly higher priority
   in this plan hold it; else ``topology`` when the nodes it may use have room across domains
   but not within one; else ``capacity`` (room held by running pods it may not preempt, lost
   on value/age to gangs of its own priority, or fragmented).
8. ``group`` (waits): the other gangs of its group wait, so it cannot start alone.
   Beside 6 and 7, under their code: **fair share** when a gang of another queue of its
   weighted cohort, below its queue's share, of its priority and value and submitted later,
   holds that room or quota (the weights broke the tie; :func:`_fair_share_check`).
9. ``policy``: no check fails; the plan did not start it (a plan not proven optimal, or a
   start gangopt does not model, e.g. a preemption only to free quota).

Every :class:`Check` carries the change that would make it pass (:class:`Fix`) and the numbers
its text quotes, so the counterfactual test (tests/test_reasons.py) can re-solve with that
change and recompute the numbers independently. Why every check and not the first: on 600
random small rounds (``python -m bench.reasons_truth --rounds 600``: 795 reasons of plans proven
optimal) 98.5 % of these reasons were true by their own counterfactual, against 42.9 % for the
first-failing-check reasons they replaced (55 % in issue 17's own reading); 100 % since session
36 (97.5 % on 88b8926; the nightly profile's 800 rounds: 1,098 of 1,100, 96.82 % on 88b8926).
Waiting gangs ahead for the same room or quota are named too ("behind waiting …"): without
them, the room a fix freed went to them and the reason was false.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import groupby
from typing import TYPE_CHECKING, Literal

import numpy as np

from gangopt import arrays
from gangopt.arrays import BoolArray, IndexArray, IntArray
from gangopt.objective import ObjectiveTerms
from gangopt.prefilter import Prefiltered
from gangopt.quantities import human
from gangopt.schema import NODE_LEVEL, GangSpec, PendingGang, Plan, Round, RunningGang, Waiting, WaitingCode
from gangopt.scope import NEWER, Scope

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

MAX_NAMES = 5
"""Gangs named in one text at most (the rest counted)."""

EXACT_NODES = 400
"""Nodes up to which a multi-role or sliced gang's fit is decided exactly (a small CP-SAT
feasibility model); above it the per-role room counts decide (an upper bound: such a gang may
be told it fits when its roles cannot share the room)."""

DOMAINS_TRIED = 4
"""Domains of a required level whose holders are searched, the roomiest after the plan first:
on the L benchmark round (4,096 nodes, 256 waiting gangs) searching all 128 racks per gang took
7 of the reasons' 14 s."""

CHECK_ORDER: tuple[tuple[WaitingCode, bool], ...] = (
    ("eligibility", True),
    ("capacity", True),
    ("topology", True),
    ("quota", True),
    ("group", True),
    ("quota", False),
    ("outranked", False),
    ("topology", False),
    ("capacity", False),
    ("group", False),
    ("policy", False),
)
"""(code, never) in the order that picks a waiting gang's code: the first failing check."""


@dataclass(frozen=True)
class QuotaRaise:
    """Raise ``queue``'s ``field`` for ``resource`` by ``amount`` milli-units."""

    queue: str
    field: Literal["nominal", "borrowing_limit"]
    resource: str
    amount: int


@dataclass(frozen=True)
class Fix:
    """The change to the round that makes one check pass (what an operator would try)."""

    remove: tuple[str, ...] = ()
    """Gangs (pending admitted, or running) whose removal makes the room."""
    quota: tuple[QuotaRaise, ...] = ()
    free_roles: tuple[str, ...] = ()
    """Roles of the gang whose node selector, affinity and taint limits are dropped."""
    add_nodes: int = 0
    """Empty copies of ``node_template`` (with at least ``node_capacity``) to add."""
    node_template: str | None = None
    node_capacity: tuple[tuple[str, int], ...] = ()
    more_nodes: tuple[tuple[str, int, tuple[tuple[str, int], ...]], ...] = ()
    """Further empty copies to add, of other nodes: (template, copies, capacity), when no one
    node can hold every role (one role kept to A100 nodes, another to H100 ones)."""
    drop_required: bool = False
    ungroup: bool = False
    no_fair_share: bool = False
    """Drop the queues' fair-share weights (``Queue.weight``): the tie-break is FIFO again."""


@dataclass(frozen=True)
class Check:
    """One failing check of a waiting gang: its code, whether it can never pass under the
    round's limits, the text, the fix, and the numbers the text quotes (milli-units)."""

    code: WaitingCode
    never: bool
    text: str
    fix: Fix = field(default_factory=Fix)
    resource: str | None = None
    need: int | None = None
    free: int | None = None
    limit: str | None = None
    """The binding limit: ``"queue q nominal"``, ``"queue q nominal + borrowing limit"``,
    ``"cohort c"`` (quota checks); the domain (room checks within one domain)."""
    rivals: tuple[str, ...] = ()
    """Gangs of strictly higher priority the text names as using the room or quota."""
    scope: int | None = None
    """The quota limit's index in :func:`gangopt.arrays.quota_limits` (quota checks)."""

    @property
    def rank(self) -> int:
        return CHECK_ORDER.index((self.code, self.never))


def waiting_reasons(
    rnd: Round,
    plan: Plan,
    pre: Prefiltered | None = None,
    *,
    deadline: float | None = None,
    setup: float = 0.0,
    checked: Mapping[str, list[Check]] | None = None,
) -> list[Waiting]:
    """One :class:`Waiting` per pending gang the plan does not admit, in input order: the code
    of its first failing check (``CHECK_ORDER``) and the text of every failing check.
    ``pre`` is accepted for the finisher's call and not needed: the checks read the plan.

    With ``deadline`` (a :func:`time.perf_counter` instant), gangs not reached by then (see
    :func:`waiting_checks`) keep the solver's own reason from ``plan.waiting`` (code
    ``policy`` when it gave none) followed by :data:`UNCHECKED`; ``setup``: see
    :func:`waiting_checks`.

    ``checked``: :func:`waiting_checks` made already, of a plan that decides the same as
    ``plan`` (:func:`gangopt.validation.same_decisions`: the checks read nothing else of it but
    its solver and status, which only the policy check's text names, made again here for
    ``plan``): the finisher's, from a child that checked the first greedy plan beside the solve
    (:func:`gangopt.annotate.reasons_beside`)."""
    del pre
    if checked is None:
        checked = waiting_checks(rnd, plan, deadline=deadline, setup=setup)
    else:
        policy = _policy_check(plan)
        checked = {name: [policy if c.code == "policy" else c for c in cs] for name, cs in checked.items()}
    own = {w.gang: w for w in plan.waiting}
    admitted = set(plan.admitted)
    out = []
    for g in rnd.pending:
        checks = checked.get(g.name)
        if checks is not None:
            out.append(Waiting(gang=g.name, code=checks[0].code, reasons=[c.text for c in checks]))
        elif g.name not in admitted:
            mine = own.get(g.name)
            code: WaitingCode = mine.code if mine is not None else "policy"
            out.append(Waiting(gang=g.name, code=code, reasons=[*(mine.reasons if mine else []), UNCHECKED]))
    return out


UNCHECKED = "not checked against the plan: the time limit ran out first (a longer time limit checks every waiting gang)"
"""The reason given to a waiting gang whose checks the time limit cut off."""


def waiting_checks(
    rnd: Round, plan: Plan, *, deadline: float | None = None, setup: float = 0.0
) -> dict[str, list[Check]]:
    """Every failing check per waiting gang, in input order, each list sorted by ``CHECK_ORDER``.

    With ``deadline``, gangs are checked highest priority first (input order within one) and
    those not reached by then are left out. Their cost
    grows with the round: 0.06 CPU-s for the 14 waiting gangs of greedy's plan of the fragmented
    M round, 0.36 for 52 at L, 2.2 for 205 at XL (16,384 nodes, 68,536 running gangs; 33 CPU-s
    before the blockers were searched in runs; ``python -m bench.finisher_costs XL``).
    ``setup``: the seconds the plan's view and the first gang's checks are expected to take
    (0.52 + 0.34 CPU-s at XL), the view not built unless they end by ``deadline``.

    A gang's checks are its own (:func:`_own_checks`) and its comparisons with the waiting gangs
    that could start before it (:func:`_ahead_check`: higher priority, or its priority and at
    least its value; the fair-share and group checks). The gangs are taken in runs of one
    priority: the run's own checks, then its comparisons, which read the own checks of the gangs
    of its priority and above, so that a deadline wastes at most one run's own checks (on a
    round with gang groups, whose comparisons read the partners' own checks whatever their
    priority, one run: every own check first). Runs of one priority and value, the highest
    value first, wasted less but checked the costliest gangs first: 17 of greedy's 205 at XL
    against 28-32 by a deadline 3.5 s away (load 5.5). The deadline holds for the whole: a gang's own
    checks start only when they (as long as the gangs' own checks took on average so far, the
    first aside) and the comparisons of its run's gangs checked by then and its own (as long as
    comparisons took on average so far; before any, :data:`COMPARISONS_SHARE` of the own checks'
    average, the first aside) end by it, and a gang whose comparisons the deadline still cuts is left out whole
    (its reasons would miss the gangs ahead of it). Before, both ran past it: at XL (10 s limit)
    the first gang's own checks took 0.34 CPU-s (they build the view's lazy parts: they count in
    ``setup``) and the comparisons of every gang checked up to 0.33 CPU-s after the deadline,
    which the command's 10.23-10.25 s wall time carried (issue 13; h37-xlfinish in
    docs/benchmarks.md)."""
    admitted = set(plan.admitted)
    waiting = [g for g in rnd.pending if g.name not in admitted]
    if not waiting or (deadline is not None and time.perf_counter() + setup > deadline):
        return {}  # past the deadline no gang would be checked: the plan's view (0.6 CPU-s at XL) unbuilt
    view = _PlanView(rnd, plan)
    gangs = {g.name: _gang(view, g) for g in waiting}
    order = sorted(waiting, key=lambda g: -g.priority)
    grouped = any(g.group for g in rnd.pending)
    runs = [order] if grouped else [list(run) for _, run in groupby(order, key=lambda g: g.priority)]
    clock = _ChecksClock(deadline)
    own: dict[str, list[Check]] = {}
    alike: dict[str, tuple[list[Check], list[BoolArray]]] = {}  # by :func:`_shape`: checks, masks
    done: dict[str, list[Check]] = {}
    rivals: dict[str, _Rival] = {}
    for run in runs:
        reached = 0
        for g in run:
            if clock.late(reached + 1):
                break
            began = time.perf_counter()
            if g.name in view.use:  # pods after a plan not validated: its checks may read its name
                own[g.name] = _own_checks(view, gangs[g.name])
                clock.own(time.perf_counter() - began)
            else:
                shape = _shape(g)
                hit = alike.get(shape)
                if hit is None:
                    own[g.name] = _own_checks(view, gangs[g.name])
                    alike[shape] = (own[g.name], gangs[g.name].masks)
                    clock.own(time.perf_counter() - began)
                else:  # its twin's checks, and its masks as :func:`_own_checks` left them
                    own[g.name], gangs[g.name].masks = hit
            reached += 1
        for g in run[:reached]:
            if clock.passed():
                break
            began = time.perf_counter()
            done[g.name] = _compared(rnd, plan, view, g, gangs, own, rivals)
            clock.compared(time.perf_counter() - began)
        if reached < len(run) or len(done) < len(own):
            break
    return {g.name: done[g.name] for g in waiting if g.name in done}


def _compared(
    rnd: Round,
    plan: Plan,
    view: _PlanView,
    g: PendingGang,
    gangs: dict[str, _Gang],
    own: dict[str, list[Check]],
    rivals: dict[str, _Rival],
) -> list[Check]:
    """Every failing check of the waiting gang ``g``: its own (``own``), then its comparisons
    with the other waiting gangs (ahead, fair share, group; :func:`waiting_checks`), sorted by
    ``CHECK_ORDER``; the policy's when none fails."""
    checks = list(own[g.name])
    ahead = _ahead_check(view, gangs[g.name], checks, gangs, own, rivals)
    if ahead is not None:
        checks.append(ahead)
    fair = _fair_share_check(view, gangs[g.name], checks)
    if fair is not None:
        checks.append(fair)
    group = _group_check(rnd, g, own)
    if group is not None:
        checks.append(group)
    if not checks:
        checks.append(_policy_check(plan))
    return sorted(checks, key=lambda c: c.rank)


class _ChecksClock:
    """The deadline of :func:`waiting_checks` and what the checks took so far: the mean of the
    own checks computed after the first (which builds the view's lazy parts: 342 ms of the XL
    round's first gang, 5-70 ms each after it) and of the comparisons."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.own_seconds, self.owns = 0.0, -1  # the first own checks not counted
        self.compare_seconds, self.compares = 0.0, 0

    def own(self, seconds: float) -> None:
        if self.owns >= 0:
            self.own_seconds += seconds
        self.owns += 1

    def compared(self, seconds: float) -> None:
        self.compare_seconds += seconds
        self.compares += 1

    def late(self, comparisons: int) -> bool:
        """Whether the next gang's own checks and ``comparisons`` gangs' comparisons (its run's
        so far and its own) would end past the deadline."""
        if self.deadline is None:
            return False
        own = self.own_seconds / self.owns if self.owns > 0 else 0.0
        compare = self.compare_seconds / self.compares if self.compares else COMPARISONS_SHARE * own
        return time.perf_counter() + own + compare * comparisons > self.deadline

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and time.perf_counter() > self.deadline


COMPARISONS_SHARE = 0.35
"""A gang's comparisons with the other waiting gangs (:func:`_ahead_check`, the fair-share and
group checks) against its own checks' seconds, which :func:`waiting_checks` expects until it
has timed a comparison: measured (CPU) 0.33 against 1.31 s at XL (205 waiting gangs), 0.046
against 0.29 at L busy 0.75 (52), 0.061 against 0.22 at L busy 0.6 (67): at most 28 %. Once
timed, their mean (0.1-94 ms each at XL: a gang that can never start builds the room its fixes
free)."""


def _shape(gang: PendingGang) -> str:
    """What a waiting gang's own checks (:func:`_own_checks`) read of it: not its name, submit
    time, deadline or group (those are read by the checks that compare it with others: ahead,
    fair share, group). Twins (the same shape) have the same own checks, computed once: the
    fragmented L round (busy 0.75) leaves 52 gangs waiting in 32 shapes, 0.04 of the
    reasons' 0.30 CPU-s."""
    return repr((gang.queue, gang.priority, gang.roles, gang.min_members, gang.max_members, gang.topology))


def _ahead_check(
    view: _PlanView,
    g: _Gang,
    checks: list[Check],
    gangs: dict[str, _Gang],
    own: dict[str, list[Check]],
    rivals: dict[str, _Rival] | None = None,
) -> Check | None:
    """Waiting gangs ahead of it for what its own checks' fixes would free: of strictly higher
    priority, or of its priority and at least its value, in another group, that can run
    (no "never" check that room cannot pass: eligibility, topology, group) and whose every
    failing check that room or quota would pass. They would start first in the room or quota
    its fixes make, so they are named, and their removal is part of its fix.

    A gang that can never start this round (:func:`_free_room_never`) gets empty nodes from its
    fix, and a gang ahead of it is one whose minimum then really fits (:class:`_Taker`: beside
    the plan, on the nodes it may use, within one domain of its required level): in the nightly
    sample of ``bench.reasons_truth`` (800 rounds) 13 reasons of such gangs were false, their
    added node taken by a waiting gang of higher priority or value, while the check by nodes
    alone named L's 32-pod rack gang job-0184 ahead of one-node 8-GPU gangs."""
    gang = g.spec
    if not checks:
        return None
    stuck = any(c.text.startswith(NEVER_THIS_ROUND) for c in checks)
    removed = {b for c in checks for b in c.fix.remove}
    nodes = np.zeros(view.capacity.shape[0], dtype=bool)
    limits = {c.scope for c in checks if c.scope is not None}
    for b in removed:
        if b in view.use:
            nodes[view.use[b].rows] = True
        if b in view.gang_queue_use:
            limits.update(np.flatnonzero(view.gang_queue_use[b] > 0).tolist())
    template = next((view.index[c.fix.node_template] for c in checks if c.fix.node_template), None)
    if template is not None:
        nodes[template] = True
    freed = _Freed.of(view, checks) if stuck else None

    def able(name: str) -> bool:
        """Whether every own failing check of the waiting gang ``name`` would pass in that room
        or quota."""
        if freed is None:
            mine = own.get(name, [])
            if any(c.code in ("eligibility", "group") or (c.never and c.code == "topology") for c in mine):
                return False
            return all(_passes(c, gangs[name], nodes, limits, template) for c in mine)
        rival = _rival(view, gangs[name], own.get(name, []), rivals)
        return rival.able and rival.scopes <= limits and (not rival.room or rival.taker.starts(freed))

    ahead = []
    for name, h in gangs.items():
        other = h.spec
        if other.priority < gang.priority or name == gang.name or (gang.group and other.group == gang.group):
            continue
        if other.priority == gang.priority and h.value < g.value:
            continue
        if name not in own:
            continue
        if own[name]:
            if able(name):
                ahead.append(name)
            continue
        # No check of its own fails: it waits for its group, which that room may start whole (a
        # partner that could never start this round starts in it; 3 of the nightly sample's
        # false reasons).
        partners = [p for p in view.groups.get(other.group or "", ()) if p != name and p in own]
        if any(own[p] for p in partners) and all(able(p) for p in partners):
            ahead.append(name)
    if not ahead:
        return None
    ahead.sort(key=lambda n: (-view.priority[n], n))
    higher = [n for n in ahead if view.priority[n] > gang.priority]
    same = [n for n in ahead if view.priority[n] == gang.priority]
    parts = []
    if higher:
        parts.append("higher-priority " + _names(higher, view))
    if same:
        parts.append(f"{_listing(same)} (same priority, at least its value)")
    where = "the room its fixes add" if stuck else "the room or quota it waits for"
    text = f"behind waiting {' and '.join(parts)}, which would start first in {where}"
    code: WaitingCode = "outranked" if higher else "capacity"
    return Check(code, False, text, Fix(remove=tuple(ahead)), rivals=tuple(higher))


_ROOM_CODES = ("capacity", "outranked", "topology")
"""The codes of room checks (never or waits): a gang that fails one needs room to start."""


@dataclass(frozen=True)
class _Freed:
    """The room a waiting gang's fixes make, all at once as the counterfactual applies them:
    the gangs removed (their usage after the plan) and ``copies`` empty copies of node
    ``template`` with ``capacity``."""

    removed: tuple[str, ...]
    template: int | None
    copies: int
    capacity: tuple[int, ...]
    """Per resource of the view (empty without copies)."""
    rows: IndexArray = field(compare=False)
    """The nodes the removed gangs use after the plan (ascending)."""
    usage: IntArray = field(compare=False)
    """Their usage there (rows x resources)."""

    @classmethod
    def of(cls, view: _PlanView, checks: list[Check]) -> _Freed:
        removed = tuple(dict.fromkeys(b for c in checks for b in c.fix.remove if b in view.use))
        rows, usage = _usage_on(view, removed)
        added = next((c.fix for c in checks if c.fix.node_template), None)
        if added is None or added.node_template is None:
            return cls(removed, None, 0, (), rows, usage)
        template = view.index[added.node_template]
        capacity = view.capacity[template].copy()
        for res, amount in added.node_capacity:
            capacity[view.resources.index(res)] = amount
        copies = max(c.fix.add_nodes for c in checks)
        return cls(removed, template, copies, tuple(capacity.tolist()), rows, usage)

    @property
    def node(self) -> IntArray:
        """One copy's capacity per resource."""
        return np.asarray(self.capacity, dtype=np.int64)


def _usage_on(view: _PlanView, gangs: Sequence[str]) -> tuple[IndexArray, IntArray]:
    """The nodes ``gangs`` use after the plan (ascending) and their usage there, summed."""
    if not gangs:
        return np.zeros(0, dtype=np.intp), np.zeros((0, len(view.resources)), dtype=np.int64)
    rows = np.unique(np.concatenate([view.use[b].rows for b in gangs]))
    usage = np.zeros((len(rows), len(view.resources)), dtype=np.int64)
    for b in gangs:
        use = view.use[b]
        usage[np.searchsorted(rows, use.rows)] += use.amounts
    return rows, usage


class _Taker:
    """A waiting gang as one that might take the room another gang's fixes make (:class:`_Freed`):
    its room after the plan counting what it may preempt, on the nodes it may use that rule 5
    leaves it, with its pods per node and role counted once; :meth:`starts` then counts only
    the nodes the fixes change and the copies they add (at XL the 194 gangs that can never
    start this round ask about the same few shapes of gang thousands of times)."""

    def __init__(self, view: _PlanView, h: _Gang) -> None:
        self.view, self.h = view, h
        spec = h.spec
        reserved, _ = view.reserved(spec)
        self.masks = [m & ~reserved for m in h.masks]
        self.freeable, _ = view.freeable(spec)
        # New pods of gangs it outranks (lower priority, or its own and less value) give way to
        # it in a re-solve: the nightly sample's 8-pod gang took the node of a 2-pod one of its
        # priority once its fix's copy made room for the rest. Kept as rows and amounts: a room
        # per rival (16,384 x 3 at XL, 87 rival shapes) held 40 MB more at the peak.
        yields = view.outranked_new(spec.priority, h.value)
        pairs = yields[view.pair_owner]
        self.yield_rows, where = np.unique(view.pair_row[pairs], return_inverse=True)
        self.yield_usage = np.zeros((len(self.yield_rows), len(view.resources)), dtype=np.int64)
        np.add.at(self.yield_usage, where, view.pair_amounts[pairs])
        self.victims = view.victim_set(spec) | {view.owners[k] for k in np.flatnonzero(yields).tolist()}
        self.level = spec.topology.required if spec.topology else None
        self.codes = view.domain_codes(self.level)[0] if self.level else None
        room = self.room()
        fits = [
            np.where(mask, arrays.fit_counts(room, req, cap=role.replicas), 0)
            for role, mask, req in zip(spec.roles, self.masks, h.requests, strict=True)
        ]
        if self.codes is not None:
            size = int(self.codes.max()) + 1 if len(self.codes) else 0
            self.base = [np.bincount(self.codes, weights=fit, minlength=size).astype(np.int64) for fit in fits]
        else:
            self.base = [np.asarray([int(fit.sum())], dtype=np.int64) for fit in fits]
        self.exact = len(spec.roles) > 1 or _slice_level(spec) is not None
        self.divisors = [[(j, int(req[j])) for j in np.flatnonzero(req > 0).tolist()] for req in h.requests]
        """Per role, (resource column, request) of what it requests (:func:`_fit`)."""
        self._said: dict[_Freed, bool] = {}

    def room(self, rows: IndexArray | None = None) -> IntArray:
        """Its room after the plan (on ``rows``, or every node): free, what it may preempt,
        and the new pods that give way to it."""
        view = self.view
        if rows is None:
            out: IntArray = view.free + self.freeable
            out[self.yield_rows] += self.yield_usage
            return out
        out = view.free[rows] + self.freeable[rows]
        at = np.searchsorted(self.yield_rows, rows)
        hit = at < len(self.yield_rows)
        hit[hit] = self.yield_rows[at[hit]] == rows[hit]
        out[hit] += self.yield_usage[at[hit]]
        return out

    def starts(self, freed: _Freed) -> bool:
        """Whether its minimum fits in its room with ``freed``'s changes (within one domain
        of its required level): the per-role pod counts, then the exact fit where they cannot
        decide (several roles, or slices)."""
        hit = self._said.get(freed)
        if hit is None:
            hit = self._said[freed] = self._starts(freed)
        return hit

    def _starts(self, freed: _Freed) -> bool:
        view, spec = self.view, self.h.spec
        if any(b in self.victims for b in freed.removed):  # their room is in its room already
            rows, extra = _usage_on(view, [b for b in freed.removed if b not in self.victims])
        else:
            rows, extra = freed.rows, freed.usage
        # The pods it gains per domain and role on those nodes, and per copy. A few nodes are
        # counted in plain Python, node by node (numpy's calls cost more than the arithmetic);
        # at XL 1,216 calls, 768 on fewer than 10 nodes, 116 on 200 or more.
        gains = self._gains(rows, extra) if len(rows) > FEW_NODES else self._gains_few(rows, extra)
        cordoned = freed.template is not None and not view.elig.schedulable[freed.template]
        per_copy = []
        for ri, role in enumerate(spec.roles):
            ok = (
                freed.copies > 0 and freed.template is not None and (bool(self.h.masks[ri][freed.template]) or cordoned)
            )
            per_copy.append(min(max(_fit(list(freed.capacity), self.divisors[ri]), 0), role.replicas) if ok else 0)
        codes = self.codes[rows].tolist() if self.codes is not None else []
        if self.codes is None:
            pods = zip(self.base, gains, per_copy, strict=True)
            counts = [int(b[0]) + gain.get(0, 0) + freed.copies * c for b, gain, c in pods]
            return self._enough(counts) and (not self.exact or self._fits(freed, rows, extra, None))
        domains = set(codes)
        if freed.template is not None and self.level != NODE_LEVEL:
            domains.add(int(self.codes[freed.template]))
        alone = self.level == NODE_LEVEL and freed.copies and self._enough(per_copy)
        if alone and (not self.exact or self._fits(freed, rows, extra, -1)):
            return True  # one copy holds it
        for d in sorted(domains):
            copies = freed.copies if self.level != NODE_LEVEL and freed.template is not None else 0
            if copies and int(self.codes[freed.template]) != d:
                copies = 0
            pods = zip(self.base, gains, per_copy, strict=True)
            counts = [int(b[d]) + gain.get(d, 0) + copies * c for b, gain, c in pods]
            if self._enough(counts) and (not self.exact or self._fits(freed, rows, extra, d)):
                return True
        return False

    def _gains_few(self, rows: IndexArray, extra: IntArray) -> list[dict[int, int]]:
        """Per role, the pods it gains per domain (0 without a level) with ``extra`` room on
        ``rows``, node by node in plain Python."""
        listed = rows.tolist()
        room = self.room(rows).tolist()
        more = extra.tolist()
        codes = self.codes[rows].tolist() if self.codes is not None else [0] * len(listed)
        gains: list[dict[int, int]] = []
        for ri, role in enumerate(self.h.spec.roles):
            mask, divisors = self.masks[ri], self.divisors[ri]
            gain: dict[int, int] = defaultdict(int)
            for i, r in enumerate(listed):
                if mask[r]:
                    was = min(max(_fit(room[i], divisors), 0), role.replicas)
                    now = _fit([a + b for a, b in zip(room[i], more[i], strict=True)], divisors)
                    gain[codes[i]] += min(max(now, 0), role.replicas) - was
            gains.append(gain)
        return gains

    def _gains(self, rows: IndexArray, extra: IntArray) -> list[dict[int, int]]:
        """:meth:`_gains_few` with numpy, for many nodes."""
        room = self.room(rows)
        changed = room + extra
        if self.codes is not None:
            domains, where = np.unique(self.codes[rows], return_inverse=True)
        else:
            domains, where = np.zeros(1, dtype=np.int64), np.zeros(len(rows), dtype=np.intp)
        gains: list[dict[int, int]] = []
        for ri, (role, req) in enumerate(zip(self.h.spec.roles, self.h.requests, strict=True)):
            gain = arrays.fit_counts(changed, req, cap=role.replicas) - arrays.fit_counts(room, req, cap=role.replicas)
            sums = np.bincount(where, weights=np.where(self.masks[ri][rows], gain, 0), minlength=len(domains))
            gains.append(dict(zip(domains.tolist(), np.rint(sums).astype(np.int64).tolist(), strict=True)))
        return gains

    def _enough(self, counts: list[int]) -> bool:
        spec = self.h.spec
        capped = [min(c, r.replicas) for c, r in zip(counts, spec.roles, strict=True)]
        lows = [spec.role_minimum(r) for r in spec.roles]
        return all(c >= low for c, low in zip(capped, lows, strict=True)) and sum(capped) >= spec.minimum

    def _fits(self, freed: _Freed, rows: IndexArray, extra: IntArray, domain: int | None) -> bool:
        """The exact fit (:func:`_fits_masks`) in the room with the changes, on every node
        (``domain`` None), one domain of its required level, or (``-1``) one copy alone."""
        view, h = self.view, self.h
        room = self.room()
        n = room.shape[0]
        room[rows] += extra
        k = freed.copies if freed.template is not None else 0
        if k:
            assert freed.template is not None
            room = np.vstack([room, np.repeat(freed.node[None, :], k, axis=0)])
            cordoned = not view.elig.schedulable[freed.template]
            masks = [
                np.concatenate([m, np.full(k, bool(full[freed.template]) or cordoned)])
                for m, full in zip(self.masks, h.masks, strict=True)
            ]
        else:
            masks = self.masks
        level = _slice_level(h.spec)
        slices = None
        if level is not None:
            codes = view.domain_codes(level)[0]
            top = int(codes.max()) + 1 if len(codes) else 0
            added = (
                np.full(k, codes[freed.template]) if k and level != NODE_LEVEL else top + np.arange(k, dtype=np.int64)
            )
            slices = np.concatenate([codes, added]).astype(np.int64)
        if domain is None:
            chosen = np.arange(n + k, dtype=np.intp)
        elif domain == -1:
            chosen = np.asarray([n], dtype=np.intp)
        else:
            assert self.codes is not None
            inside = np.flatnonzero(self.codes == domain)
            extra_rows = np.arange(n, n + k) if k and int(self.codes[freed.template]) == domain else np.zeros(0)
            chosen = np.concatenate([inside, extra_rows]).astype(np.intp)
        return _fits_masks(h, room, masks, chosen, slices)


@dataclass
class _Rival:
    """What :func:`_ahead_check` reads of a waiting gang's own checks when it may be ahead of a
    gang that can never start this round: whether some check no room passes
    (eligibility, group, topology "never"), the quota limits it waits for, whether it needs
    room, and its :class:`_Taker` (read per gang once: at XL 194 such gangs ask about the same
    200 gangs, 21,502 times)."""

    able: bool
    scopes: set[int]
    room: bool
    taker: _Taker


def _rival(view: _PlanView, h: _Gang, mine: list[Check], rivals: dict[str, _Rival] | None) -> _Rival:
    """``h``'s :class:`_Rival`, kept in ``rivals`` by name; its :class:`_Taker` is shared by
    its twins (:func:`_shape`)."""
    hit = rivals.get(h.spec.name) if rivals is not None else None
    if hit is not None:
        return hit
    shape = _shape(h.spec)
    twin = rivals.get(shape) if rivals is not None else None
    hit = _Rival(
        able=not any(c.code in ("eligibility", "group") or (c.never and c.code == "topology") for c in mine),
        scopes={c.scope for c in mine if c.code == "quota" and c.scope is not None},
        room=any(c.code in _ROOM_CODES for c in mine),
        taker=twin.taker if twin is not None else _Taker(view, h),
    )
    if rivals is not None:
        rivals[h.spec.name] = hit
        rivals.setdefault(shape, hit)
    return hit


def _fair_share_check(view: _PlanView, g: _Gang, checks: list[Check]) -> Check | None:
    """Fair share (``Queue.weight``): gangs of the plan that hold the room or quota this gang
    waits for (named in its checks' fixes) and started ahead of it only by the fair-share
    tie-break: another queue of its weighted cohort below its queue's dominant-resource share
    (:attr:`~gangopt.objective.ObjectiveTerms.fair_shares`), the same priority and tier value
    (a tie, which the weights break: docs/objective.md), submitted after it (FIFO would have
    started it first). Its fix drops the weights; the reason is true when the re-solved round
    then starts the gang (tests/test_reasons.py)."""
    shares = view.terms.fair_shares
    gang = g.spec
    if gang.queue not in shares:
        return None
    cohort = view.rnd.cohort_roots
    pending = {p.name: p for p in view.rnd.pending}
    mine = shares[gang.queue]
    for check in checks:
        ahead = []
        for name in check.fix.remove:
            other = pending.get(name)
            if (
                other is not None
                and name in view.admitted
                and other.queue != gang.queue
                and other.queue in shares
                and cohort.get(other.queue) == cohort.get(gang.queue)
                and other.priority == gang.priority
                and shares[other.queue] < mine
                and view.terms.tier_value(other) == g.value
                and (other.submit_time, other.name) > (gang.submit_time, gang.name)
            ):
                ahead.append(other)
        if ahead:
            others = ", ".join(f"queue {o.queue} at {_share(shares[o.queue])}" for o in ahead[:MAX_NAMES])
            names = _listing([o.name for o in ahead])
            text = (
                f"fair share: queue {gang.queue} is at {_share(mine)} of its deserved share, {others}; "
                f"{names} (its priority and value, submitted later) started first in the room or quota it waits for"
            )
            return Check(check.code, False, text, Fix(no_fair_share=True), limit=check.limit, scope=check.scope)
    return None


def _share(value: float) -> str:
    return "more than its deserved share (it deserves none)" if value == float("inf") else f"{value:.2f}"


def _passes(check: Check, h: _Gang, room: BoolArray, limits: set[int], template: int | None) -> bool:
    """Whether freeing room on the nodes ``room``, quota in ``limits`` and copies of node
    ``template`` could pass ``check`` of the waiting gang ``h``."""
    if check.code == "quota":
        return check.scope in limits
    if check.text.startswith(NEVER_THIS_ROUND):
        return bool((h.usable & room).any())  # room on nodes it may use before the round, or copies
    if check.code == "capacity" and check.never:
        return template is not None and bool(h.usable[template])
    if check.code in ("outranked", "capacity", "topology") and not check.never:
        return bool((h.usable & room).any())
    return check.code == "policy"


# ----------------------------------------------------------------------------- the plan as arrays


class _PlanView:
    """The round after the plan: free room per node, usage per gang and node, quota usage per
    limit, and what a gang of each priority may preempt (computed once per priority)."""

    def __init__(self, rnd: Round, plan: Plan) -> None:
        self.rnd, self.plan = rnd, plan
        self.resources = arrays.resource_names(rnd)
        self.index = arrays.node_index(rnd)
        self.capacity = arrays.cluster_capacity(rnd, self.resources)
        self.elig = arrays.per_cluster(rnd.cluster, "eligibility", lambda: arrays.Eligibility(rnd))
        self.terms = ObjectiveTerms.of(rnd)
        self.limits = arrays.quota_limits(rnd, self.resources)
        self.priority = {g.name: g.priority for g in [*rnd.running, *rnd.pending]}
        self.running = {g.name: g for g in rnd.running}
        self.admitted = set(plan.admitted)
        removed = {pod for p in plan.preemptions for pod in p.pods}
        n, m = self.capacity.shape
        queue_of = {g.name: g.queue for g in [*rnd.running, *rnd.pending]}
        role_keys = [(g.name, r.name) for g in [*rnd.running, *rnd.pending] for r in g.roles]
        role_row = {key: i for i, key in enumerate(role_keys)}
        table = arrays.request_matrix(
            [r.requests for g in [*rnd.running, *rnd.pending] for r in g.roles], self.resources
        )
        owners: list[str] = []
        pods: list[tuple[int, int, int]] = []  # (owner, node row, role row)
        seen: dict[str, int] = {}
        for run in rnd.running:
            for pod in run.pods:
                if pod.name not in removed:
                    k = seen.setdefault(run.name, len(seen))
                    pods.append((k, self.index[pod.node], role_row[(run.name, pod.role)]))
        for p in plan.placements:
            k = seen.setdefault(p.gang, len(seen))
            pods.append((k, self.index[p.node], role_row[(p.gang, p.role)]))
        owners = list(seen)
        self.preempted_gangs = _preempted(rnd, plan)
        """The running gangs whose pods the plan's preemptions can name (:func:`_preempted`), found
        once: each pass over the running gangs is 15-20 ms at XL (68,536), and three were made."""
        pod_row = {p.name: self.index[p.node] for g in self.preempted_gangs for p in g.pods}
        self.lost: dict[str, IndexArray] = {}
        """Per running gang that loses pods in the plan, the nodes where it lost them."""
        self.preempted_for: dict[str, list[str]] = defaultdict(list)
        """Per gang, the running gangs the plan preempts for it."""
        for pre in plan.preemptions:
            self.lost[pre.gang] = np.unique(np.array([pod_row[p] for p in pre.pods], dtype=np.intp))
            for b in pre.for_gangs:
                self.preempted_for[b].append(pre.gang)
        self.new: set[str] = {p.gang for p in plan.placements}
        """Gangs with new pods in the plan."""
        flat = np.array(pods, dtype=np.int64).reshape(len(pods), 3)
        amounts = table[flat[:, 2]] if len(pods) else np.zeros((0, m), dtype=np.int64)
        total = np.zeros((n, m), dtype=np.int64)
        np.add.at(total, flat[:, 1], amounts)
        self.free: IntArray = self.capacity - total
        key = flat[:, 0] * max(n, 1) + flat[:, 1]
        order = np.argsort(key, kind="stable")
        keys, start = np.unique(key[order], return_index=True)
        sums = np.add.reduceat(amounts[order], start, axis=0) if len(keys) else amounts
        self.pair_owner = keys // max(n, 1)
        """Per (gang, node) pair with usage after the plan: the gang's number in :attr:`owners`."""
        self.pair_row = keys % max(n, 1)
        self.owners = owners
        cuts = np.flatnonzero(np.diff(self.pair_owner)) + 1
        bounds = [0, *cuts.tolist(), len(keys)]
        self.pair_amounts: IntArray = sums
        self.pair_start: IndexArray = np.asarray(bounds, dtype=np.intp)
        """Per gang of :attr:`owners` (its number ``k``), its pairs: ``pair_start[k]`` to
        ``pair_start[k + 1] - 1`` (every owner has pods, so pairs)."""
        self.use = _Uses(seen, self.pair_row, sums, self.pair_start)
        """Per gang with pods after the plan, its usage per node."""
        queues = self.limits.queues
        row = {q: i for i, q in enumerate(queues)}
        per_queue = np.zeros((len(queues), m), dtype=np.int64)
        self.gang_queue_use: dict[str, IntArray] = {}
        totals = np.add.reduceat(sums, self.pair_start[:-1], axis=0) if len(keys) else sums
        for gang, k in seen.items() if row else ():
            q = queue_of[gang]
            if q in row:
                amount = totals[k]
                per_queue[row[q]] += amount
                self.gang_queue_use[gang] = self.limits.usage(_one_queue(len(queues), row[q], amount))
        self.quota_after = self.limits.usage(per_queue)
        self.lost_quota: dict[str, IntArray] = {}
        """Per running gang that loses pods in the plan, what those pods held of each limit."""
        pod_role = {p.name: (g.name, p.role) for g in self.preempted_gangs for p in g.pods}
        for pre in plan.preemptions:
            q = queue_of[pre.gang]
            if q in row:
                amount = sum((table[role_row[pod_role[pod]]] for pod in pre.pods), np.zeros(m, dtype=np.int64))
                self.lost_quota[pre.gang] = self.limits.usage(_one_queue(len(queues), row[q], amount))
        before = self.limits.usage(arrays.queue_usage(rnd, self.resources, queues))
        self.quota_bound = self.limits.effective_limit(before)
        self.scope = Scope(rnd)
        self._freeable: dict[tuple[int, str], tuple[IntArray, IntArray, list[str]]] = {}
        self._victims: dict[tuple[int, str], list[str]] = {}
        self._rank: IntArray | None = None
        self._victim_sets: dict[tuple[int, str], frozenset[str]] = {}
        self._victim_masks: dict[tuple[int, str], BoolArray] = {}
        self._reserved: dict[tuple[int, str], tuple[BoolArray, list[str]]] = {}
        self._codes: dict[str, tuple[IntArray, list[str]]] = {}
        self._new_ranks: tuple[BoolArray, IntArray, IntArray] | None = None
        self._ever: dict[tuple[int, str], IntArray] = {}
        self.domains: dict[str, list[tuple[str, IndexArray]]] = {}
        """Per level, its domains' names and rows (:func:`_domains`; read only)."""

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Per gang group, its pending gangs."""
        out: dict[str, list[str]] = defaultdict(list)
        for g in self.rnd.pending:
            if g.group:
                out[g.group].append(g.name)
        return out

    def domain_codes(self, level: str) -> tuple[IntArray, list[str]]:
        """:func:`arrays.domain_codes`, once per level (read only): every fit with slices and
        every gang with a required level asked again (0.85 of the profiled 10.7 s of the
        fragmented XL round's reasons)."""
        hit = self._codes.get(level)
        if hit is None:
            hit = self._codes[level] = arrays.domain_codes(self.rnd, level)
        return hit

    def holders(self, usable: BoolArray) -> IndexArray:
        """Gangs with usage after the plan on the nodes ``usable``: strictly higher priorities
        first, new pods before running ones, then by name (the order the holders are tried in)."""
        if self._rank is None:
            order = sorted(range(len(self.owners)), key=lambda k: self._order_key(self.owners[k]))
            self._rank = np.empty(len(self.owners), dtype=np.int64)
            self._rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
            self._by_rank: IndexArray = np.asarray(order, dtype=np.intp)
        present = np.zeros(len(self.owners), dtype=bool)
        present[self.pair_owner[usable[self.pair_row]]] = True
        return self._by_rank[present[self._by_rank]]

    def outranked_new(self, priority: int, value: int) -> BoolArray:
        """Per gang of :attr:`owners`, whether it is a pending gang this plan starts of lower
        ``priority``, or of that priority and less tier ``value`` than a gang's: one that would
        give way to that gang in a re-solve."""
        if self._new_ranks is None:
            pending = {g.name: g for g in self.rnd.pending}
            specs = [pending.get(o) for o in self.owners]
            self._new_ranks = (
                np.fromiter((s is not None for s in specs), dtype=bool, count=len(specs)),
                np.fromiter((s.priority if s else 0 for s in specs), dtype=np.int64, count=len(specs)),
                np.fromiter((self.terms.tier_value(s) if s else 0 for s in specs), dtype=np.int64, count=len(specs)),
            )
        new, prio, values = self._new_ranks
        out: BoolArray = new & ((prio < priority) | ((prio == priority) & (values < value)))
        return out

    def victim_mask(self, gang: GangSpec) -> BoolArray:
        """Per gang of :attr:`owners`, whether ``gang`` may preempt it."""
        key = (gang.priority, gang.queue)
        hit = self._victim_masks.get(key)
        if hit is None:
            victims = self.victim_set(gang)
            hit = self._victim_masks[key] = np.fromiter(
                (o in victims for o in self.owners), dtype=bool, count=len(self.owners)
            )
        return hit

    def _order_key(self, name: str) -> tuple[int, bool, str]:
        return (-self.priority[name], name in self.running, name)

    def reserved(self, gang: GangSpec) -> tuple[BoolArray, list[str]]:
        """Nodes ``gang`` may not use after this plan (rule 5: a node where a gang lost pods
        takes new pods only of gangs that may preempt it), and those gangs; kept per priority
        and queue (read only)."""
        key = (gang.priority, gang.queue)
        hit = self._reserved.get(key)
        if hit is None:
            mask = np.zeros(self.capacity.shape[0], dtype=bool)
            names = [v for v in self.lost if not self.scope.static(gang, self.running[v])]
            for v in names:
                mask[self.lost[v]] = True
            hit = self._reserved[key] = (mask, names)
        return hit

    def may_preempt(self, gang: PendingGang, victim: str) -> bool:
        """Rule 5 for one pair: preemption on, the victim running, preemptible, and ``gang``
        licensed by its queue's policy whatever the usage (by default: lower priority)."""
        run = self.running.get(victim)
        return run is not None and self._preemptible_by(run, gang)

    def _preemptible_by(self, run: RunningGang, gang: GangSpec) -> bool:
        """Rule 5, the one reading here: ``gang`` may preempt ``run``. Cohort reclaims (which
        depend on the queues' usage, :meth:`gangopt.scope.Scope.reclaims`) are not offered: a
        reason never promises room that only a reclaim could free."""
        return self.rnd.policy.preemption and run.preemptible and self.scope.static(gang, run)

    def preempts_none(self, gang: GangSpec) -> bool:
        """Whether ``gang`` may preempt no running gang at all (:meth:`_preemptible_by`, pods
        or not) and no queue reaches past the priority order (:attr:`Scope.beyond_priority`):
        then every node a preemption frees is one rule 5 keeps from it (its victim is one it
        may not preempt), and the free room before the round is all it can ever use."""
        if self.scope.beyond_priority:
            return False
        _, kinds, _ = self._kinds
        return not any(self._preemptible_by(self.rnd.running[i], gang) for i in kinds)

    def _ever_preemptible_by(self, run: RunningGang, gang: GangSpec) -> bool:
        """Whether ``gang`` might preempt ``run`` in some plan of this round: rule 5 by
        priority and queue policy (:meth:`_preemptible_by`), or a cohort reclaim whatever the
        queues' usage (:meth:`Scope.reclaim_needs`; a newer gang of its priority and queue
        under ``lower_or_newer_equal_priority`` counted whatever its age)."""
        if not (self.rnd.policy.preemption and run.preemptible):
            return False
        if self.scope.static(gang, run):
            return True
        if run.queue == gang.queue and run.priority == gang.priority:
            return self.scope.policy(gang.queue).within_queue == NEWER
        return self.scope.reclaim_needs(gang, run) != "never"

    def ever_room(self, gang: GangSpec) -> IntArray:
        """Room per node ``gang`` could use in any plan of this round: the free room before the
        round and the pods of every running gang it might preempt
        (:meth:`_ever_preemptible_by`). The rest is held by running gangs it may never preempt;
        running pods do not move, and rule 5 keeps it off every node where such a gang loses
        pods, so no plan gives it more (kept per priority and queue; read only)."""
        key = (gang.priority, gang.queue)
        hit = self._ever.get(key)
        if hit is None:
            victim = self._per_running(self._ever_preemptible_by, gang)
            if not victim.any():
                hit = self.free_before
            else:
                hit = self.free_before.copy()
                # Their pods before the round: after the plan, less what the plan grew them by,
                # plus what it preempted of them.
                owner = self._owner_running
                mine = (owner >= 0) & victim[np.maximum(owner, 0)] if len(owner) else np.zeros(0, dtype=bool)
                pairs = mine[self.pair_owner]
                np.add.at(hit, self.pair_row[pairs], self.pair_amounts[pairs])
                for i, rows, amounts in self._changes:
                    if victim[i]:
                        np.add.at(hit, rows, amounts)
            self._ever[key] = hit
        return hit

    @cached_property
    def _owner_running(self) -> IndexArray:
        """Per gang of :attr:`owners`, its index in the round's running gangs (-1: pending).
        The owners are numbered running gangs first, in input order, those with pods after
        the plan (an evicted gang gets no new pod), then the gangs the plan starts."""
        _, _, live = self._kinds
        rows = np.flatnonzero(live)
        out: IndexArray = np.concatenate([rows, np.full(len(self.owners) - len(rows), -1)]).astype(np.intp)
        if any(o in self.running for o in self.owners[len(rows) :]):  # a plan not validated
            index = {g.name: i for i, g in enumerate(self.rnd.running)}
            out = np.fromiter((index.get(o, -1) for o in self.owners), dtype=np.intp, count=len(self.owners))
        return out

    @cached_property
    def _moved(self) -> list[tuple[str, int, IntArray]]:
        """Every pod the plan places or preempts: its gang, node and what it adds to the room
        after the plan to give the room before the round (a new pod its request, a preempted
        one its request taken away; a few thousand pods at XL, not the 68,536 running gangs)."""
        requests: dict[tuple[str, str], IntArray] = {}
        pending = {g.name: g for g in self.rnd.pending}  # the running ones: :attr:`running`

        def request(gang: str, role: str) -> IntArray:
            hit = requests.get((gang, role))
            if hit is None:
                spec = next(r for r in (self.running.get(gang) or pending[gang]).roles if r.name == role)
                hit = requests[(gang, role)] = arrays.request_vector(spec.requests, self.resources)
            return hit

        out = [(p.gang, self.index[p.node], request(p.gang, p.role)) for p in self.plan.placements]
        removed = {pod for pre in self.plan.preemptions for pod in pre.pods}
        for run in self.preempted_gangs:
            for pod in run.pods:
                if pod.name in removed:
                    out.append((run.name, self.index[pod.node], -request(run.name, pod.role)))
        return out

    @cached_property
    def _changes(self) -> list[tuple[int, IndexArray, IntArray]]:
        """Per running gang the plan grows or preempts: its index, nodes and the usage to add
        to its usage after the plan to give its usage before the round (growth taken away,
        preempted pods put back), one row per pod."""
        rows: dict[str, list[int]] = defaultdict(list)
        amounts: dict[str, list[IntArray]] = defaultdict(list)
        for gang, row, amount in self._moved:
            if gang in self.running:
                rows[gang].append(row)
                amounts[gang].append(-amount)
        m = len(self.resources)
        index = {g.name: i for i, g in enumerate(self.rnd.running) if g.name in rows}
        return [
            (index[n], np.asarray(rows[n], dtype=np.intp), np.asarray(amounts[n], dtype=np.int64).reshape(-1, m))
            for n in rows
        ]

    @cached_property
    def free_before(self) -> IntArray:
        """Free room per node before the round (every running pod in place, no new pod): the
        room after the plan with the plan's placements taken back and its preempted pods put
        back (:attr:`_moved`)."""
        out = self.free.copy()
        for _, row, amount in self._moved:
            out[row] += amount
        return out

    def victims(self, gang: GangSpec) -> list[str]:
        """Running gangs ``gang`` may preempt (:meth:`_preemptible_by`), only those with pods
        left after the plan; kept per priority and queue."""
        key = (gang.priority, gang.queue)
        hit = self._victims.get(key)
        if hit is None:
            _, _, live = self._kinds
            rows = np.flatnonzero(self._per_running(self._preemptible_by, gang) & live)
            hit = self._victims[key] = [self.rnd.running[i].name for i in rows.tolist()]
        return hit

    def _per_running(self, allowed: Callable[[RunningGang, GangSpec], bool], gang: GangSpec) -> BoolArray:
        """Per running gang, ``allowed(it, gang)`` (rule 5 or a reclaim for ``gang``). Rule 5
        reads the victim's priority, queue and preemptible flag only: asked once per kind of
        running gang (the fragmented XL round: 4 kinds, 68,536 gangs). The running gangs'
        kinds and whether they have pods are read once per view (not once per priority and
        queue asked: 4 passes over the 16,262 gangs at L)."""
        codes, kinds, _ = self._kinds
        running = self.rnd.running
        ok = np.fromiter((allowed(running[i], gang) for i in kinds), bool, len(kinds))
        out: BoolArray = ok[codes] if len(kinds) else np.zeros(0, dtype=bool)
        return out

    @cached_property
    def _kinds(self) -> tuple[IndexArray, list[int], BoolArray]:
        """Per running gang its kind's number (priority, queue, preemptible: what rule 5 reads of
        a victim), each kind's first gang (its index), and whether the gang has pods after the
        plan: read once per view, not once per priority and queue asked (4 passes over the
        16,262 running gangs of the fragmented L round)."""
        number: dict[tuple[int, str, bool], int] = {}
        first: list[int] = []
        codes: list[int] = []
        for i, g in enumerate(self.rnd.running):
            kind = (g.priority, g.queue, g.preemptible)
            k = number.get(kind)
            if k is None:
                k = number[kind] = len(first)
                first.append(i)
            codes.append(k)
        live = np.fromiter((g.name in self.use for g in self.rnd.running), bool, len(self.rnd.running))
        return np.asarray(codes, dtype=np.intp), first, live

    def victim_set(self, gang: GangSpec) -> frozenset[str]:
        """:meth:`victims` as a set (kept per priority and queue)."""
        key = (gang.priority, gang.queue)
        hit = self._victim_sets.get(key)
        if hit is None:
            hit = self._victim_sets[key] = frozenset(self.victims(gang))
        return hit

    def freeable(self, gang: GangSpec) -> tuple[IntArray, IntArray]:
        """What ``gang`` may free by preemption: room per node, and quota usage per limit (all
        pods of its victims, new growth included)."""
        key = (gang.priority, gang.queue)
        hit = self._freeable.get(key)
        if hit is None:
            names = self.victims(gang)
            room = np.zeros_like(self.free)
            quota = np.zeros_like(self.quota_after)
            pairs = self.victim_mask(gang)[self.pair_owner]
            np.add.at(room, self.pair_row[pairs], self.pair_amounts[pairs])
            for name in names:
                if name in self.gang_queue_use:
                    quota += self.gang_queue_use[name]
            hit = self._freeable[key] = (room, quota, names)
        return hit[0], hit[1]


def _preempted(rnd: Round, plan: Plan) -> list[RunningGang]:
    """The running gangs whose pods ``plan``'s preemptions can name: those it preempts, or
    every running gang when an entry names a pod of another (a plan not yet validated)."""
    named = {p.gang for p in plan.preemptions}
    some = [g for g in rnd.running if g.name in named]
    pods = {pod.name for g in some for pod in g.pods}
    return some if all(pod in pods for p in plan.preemptions for pod in p.pods) else list(rnd.running)


class _Uses(Mapping[str, "_Use"]):
    """Per gang with pods after the plan, its :class:`_Use`, made when asked (the fragmented
    XL round has 68,536 running gangs; a waiting gang's checks ask for a few)."""

    def __init__(self, number: dict[str, int], rows: IndexArray, amounts: IntArray, start: IndexArray) -> None:
        self.number, self.rows, self.amounts, self.start = number, rows, amounts, start

    def __getitem__(self, gang: str) -> _Use:
        k = self.number[gang]
        a, b = int(self.start[k]), int(self.start[k + 1])
        return _Use(self.rows[a:b], self.amounts[a:b])

    def __contains__(self, gang: object) -> bool:
        return gang in self.number

    def __iter__(self) -> Iterator[str]:
        return iter(self.number)

    def __len__(self) -> int:
        return len(self.number)


@dataclass(frozen=True)
class _Use:
    """A gang's usage after the plan: its nodes (rows, ascending, unique) and amounts there."""

    rows: IndexArray
    amounts: IntArray

    def add_to(self, matrix: IntArray, sign: int = 1) -> None:
        """Add (``sign=-1``: subtract) this usage to a nodes x resources matrix, in place."""
        matrix[self.rows] += sign * self.amounts


def _one_queue(queues: int, row: int, amount: IntArray) -> IntArray:
    per_queue = np.zeros((queues, amount.shape[0]), dtype=np.int64)
    per_queue[row] = amount
    return per_queue


# ----------------------------------------------------------------------------- one gang's checks


@dataclass
class _Gang:
    """A waiting gang as arrays: its roles' requests, eligible nodes and minimum configuration."""

    spec: PendingGang
    requests: IntArray
    """Per role, per resource (roles x resources)."""
    masks: list[BoolArray]
    minimum: dict[str, int]
    """Pods per role of its minimum configuration (:meth:`ObjectiveTerms.min_pods`)."""
    value: int = 0
    """Its priority tier value (:meth:`ObjectiveTerms.tier_value`)."""

    _usable: tuple[int, BoolArray] | None = None

    @property
    def usable(self) -> BoolArray:
        """Nodes some role of its minimum configuration may use (kept until ``masks`` is replaced)."""
        if self._usable is None or self._usable[0] != id(self.masks):
            mask = np.zeros(self.masks[0].shape, dtype=bool)
            for role, m in zip(self.spec.roles, self.masks, strict=True):
                if self.minimum[role.name] > 0:
                    mask |= m
            self._usable = (id(self.masks), mask)
        return self._usable[1]

    def need(self) -> IntArray:
        """Requests of its minimum configuration, per resource."""
        counts = np.array([self.minimum[r.name] for r in self.spec.roles], dtype=np.int64)
        out: IntArray = (self.requests * counts[:, None]).sum(axis=0)
        return out


def _gang(view: _PlanView, gang: PendingGang) -> _Gang:
    return _Gang(
        spec=gang,
        requests=arrays.request_matrix([r.requests for r in gang.roles], view.resources),
        masks=[view.elig.mask(r) for r in gang.roles],
        minimum=view.terms.min_pods(gang),
        value=view.terms.tier_value(gang),
    )


def _own_checks(view: _PlanView, g: _Gang) -> list[Check]:
    """Every failing check of the gang on its own (the group check is added by the caller)."""
    gang = g.spec
    checks: list[Check] = []
    blocked = [r for r, m in zip(gang.roles, g.masks, strict=True) if gang.role_minimum(r) > 0 and not m.any()]
    if blocked:
        texts = "; ".join(f"role {r.name!r}: {view.elig.explain(r)}" for r in blocked)
        fix = Fix(free_roles=tuple(r.name for r in blocked))
        checks.append(Check("eligibility", True, f"can never run: {texts}", fix))
        # The rest is checked as if the fix were made: those roles may use any schedulable node.
        g.masks = [view.elig.schedulable if r in blocked else m for r, m in zip(gang.roles, g.masks, strict=True)]
    checks += _room_checks(view, g)
    checks += _quota_checks(view, g)
    return sorted(checks, key=lambda c: c.rank)


def _room_checks(view: _PlanView, g: _Gang) -> list[Check]:
    """Capacity and topology: never (the nodes it may use, empty), or waits (after the plan,
    counting what it may preempt, on the nodes rule 5 leaves it)."""
    gang = g.spec
    level = gang.topology.required if gang.topology else None
    everything = np.arange(len(view.rnd.cluster.nodes), dtype=np.intp)
    room, _ = view.freeable(gang)
    free = view.free + room
    if not _fits(view, g, view.capacity, everything):
        return [_capacity_never(view, g, free)]  # its fix adds room beside the plan's: enough
    domains = _domains(view, level)
    checks: list[Check] = []
    if level is not None and not any(_domain_fits(view, g, view.capacity, domains)):
        checks.append(_topology_never(view, g, level, domains))
        level = None  # the rest as if the level were dropped (its fix)
    if not _fits_after(view, g, view.ever_room(gang), level, domains):
        # Listed first (never); the room checks after the plan still name who holds the room.
        checks.append(_free_room_never(view, g, free, level, domains))
    reserved, holders = view.reserved(gang)
    if not (reserved & g.usable).any():
        return [*checks, *_room_waits_checks(view, g, free, level, domains)]
    kept = _Gang(g.spec, g.requests, [m & ~reserved for m in g.masks], g.minimum, g.value)
    waits = _room_waits_checks(view, kept, free, level, domains)
    if waits and _fits_after(view, g, free, level, domains):
        return [*checks, _reserved_check(view, g, reserved, holders)]
    return [*checks, *waits]


def _reserved_check(view: _PlanView, g: _Gang, reserved: BoolArray, holders: list[str]) -> Check:
    """Rule 5 keeps the room it would use for higher priorities: those nodes lost pods of gangs
    of its priority or higher, preempted for gangs of strictly higher priority."""
    gang = g.spec
    lost = [view.lost[v] for v in holders]  # the nodes each lost pods on, all looked at at once
    owner = np.repeat(np.arange(len(holders)), [len(rows) for rows in lost])
    rows = np.concatenate(lost) if lost else np.zeros(0, dtype=np.intp)
    usable = np.bincount(owner, weights=g.usable[rows], minlength=len(holders)) > 0
    names = [v for v, hit in zip(holders, usable.tolist(), strict=True) if hit]
    nodes = [view.rnd.cluster.nodes[i].name for i in np.flatnonzero(reserved & g.usable).tolist()]
    named = set(names)  # a list here made koordinator_like's XL plan (2,860 preemptions) take 11 CPU-s
    beneficiaries = sorted({b for b, vs in view.preempted_for.items() for v in vs if v in named})
    higher = [b for b in beneficiaries if view.priority[b] > gang.priority]
    text = (
        f"the room it needs is on nodes {_listing(nodes)}, where this plan preempted {_names(names, view)} for "
        f"{_names(higher, view)}; rule 5 keeps such nodes for gangs of higher priority than the preempted"
    )
    return Check("outranked" if higher else "capacity", False, text, Fix(remove=tuple(names)), rivals=tuple(higher))


def _fits_after(
    view: _PlanView, g: _Gang, free: IntArray, level: str | None, domains: list[tuple[str, IndexArray]]
) -> bool:
    """Whether its minimum fits in ``free`` (within one of ``domains`` with a ``level``): when
    :func:`_room_waits_checks` finds no failing check, without looking for one."""
    if level is None:
        return _fits(view, g, free, np.arange(len(view.rnd.cluster.nodes), dtype=np.intp))
    return any(_domain_fits(view, g, free, domains))


def _room_waits_checks(
    view: _PlanView, g: _Gang, free: IntArray, level: str | None, domains: list[tuple[str, IndexArray]]
) -> list[Check]:
    """The room check after the plan: none when its minimum fits, else the failing one."""
    gang = g.spec
    everything = np.arange(len(view.rnd.cluster.nodes), dtype=np.intp)
    if _fits_after(view, g, free, level, domains):
        return []
    if level is None:
        return [_room_waits(view, g, free, everything, None)]
    name, rows, blockers = _best_domain(view, g, free, domains)
    check = _room_waits(view, g, free, rows, f"{level} {name}", blockers)
    if check.code != "outranked" and _fits(view, g, free, everything):
        assert check.resource is not None and check.need is not None and check.free is not None
        text = (
            f"needs its minimum of {_pods(gang.minimum)} within one {level}; no {level} has room after this plan "
            f"(best {level} {name}: needs {human(check.need, check.resource)}, "
            f"{human(check.free, check.resource)} free on the nodes it may use), though those nodes have room "
            f"across {level}s"
        )
        fix = Fix(drop_required=True)
        return [Check("topology", False, text, fix, check.resource, check.need, check.free, check.limit)]
    return [check]


def _domains(view: _PlanView, level: str | None) -> list[tuple[str, IndexArray]]:
    """Rows per domain of ``level`` (none without a level)."""
    if level is None:
        return []
    hit = view.domains.get(level)
    if hit is None:
        codes, names = view.domain_codes(level)
        hit = view.domains[level] = list(zip(names, arrays.domain_members(codes, len(names)), strict=True))
    return hit


def _best_domain(
    view: _PlanView, g: _Gang, free: IntArray, domains: list[tuple[str, IndexArray]]
) -> tuple[str, IndexArray, list[str]]:
    """The domain whose room the fewest gangs hold (then the fewest of higher priority, then
    the first): the one the text names, and those gangs (:func:`_blockers`)."""
    j = view.resources.index(_short_resource(view, g, free, np.arange(len(g.usable), dtype=np.intp))[0])
    fitting = _domain_fits(view, g, view.capacity, domains)
    able = [(k, d) for k, (d, fits) in enumerate(zip(domains, fitting, strict=True)) if fits]
    able = able or list(enumerate(domains))  # none even empty on the nodes rule 5 leaves it
    # The roomiest few after the plan: a 4,096-node round has 128 racks per waiting gang.
    roomy = _domain_sums(np.where(g.usable, np.maximum(free[:, j], 0), 0), domains)
    able.sort(key=lambda kd: (-roomy[kd[0]], kd[0]))
    best: tuple[tuple[int, int, int], tuple[str, IndexArray, list[str]]] | None = None
    for k, (name, rows) in able[:DOMAINS_TRIED]:
        blockers = _blockers(view, g, free, rows)
        higher = sum(view.priority[b] > g.spec.priority for b in blockers)
        key = (len(blockers), higher, k)
        if best is None or key < best[0]:
            best = (key, (name, rows, blockers))
    assert best is not None  # domains is not empty: the level has at least one
    return best[1]


def _domain_sums(values: IntArray, domains: list[tuple[str, IndexArray]]) -> list[int]:
    """Per domain (its rows), the sum of ``values`` there: one cumulative sum over the domains'
    rows instead of a sum per domain (the 128 racks of a 4,096-node round per waiting gang
    with a required level)."""
    if not domains:
        return []
    order = np.concatenate([rows for _, rows in domains])
    sizes = np.asarray([len(rows) for _, rows in domains])
    ends = np.cumsum(sizes)
    total = np.concatenate([[0], np.cumsum(values[order])])
    sums: list[int] = (total[ends] - total[ends - sizes]).tolist()
    return sums


def _room_waits(
    view: _PlanView, g: _Gang, free: IntArray, rows: IndexArray, where: str | None, blockers: list[str] | None = None
) -> Check:
    """The room check that fails: the smallest set of gangs whose room would let it start
    (``blockers`` when the caller has them: :func:`_blockers` of the same arguments), and
    the numbers (need and free room of the resource that falls shortest)."""
    gang = g.spec
    blockers = _blockers(view, g, free, rows) if blockers is None else blockers
    res, need, have = _short_resource(view, g, free, rows)
    room_v, _ = view.freeable(gang)
    freed = int(room_v[_usable_rows(g, rows), view.resources.index(res)].sum())
    counted = f" (counting {human(freed, res)} of pods it may preempt)" if freed else ""
    place = f" in {where}" if where else ""
    text = (
        f"no room for its minimum of {_pods(gang.minimum)}{place}: needs {human(need, res)}, the nodes it may use "
        f"have {human(have, res)} free after this plan{counted}"
    )
    if have >= need:
        text += " but not on few enough nodes (each pod needs its whole request on one node)"
    higher = [b for b in blockers if view.priority[b] > gang.priority]
    new_higher = [b for b in higher if b not in view.running or (b in view.new and b not in view.lost)]
    parts = _holders(view, gang, blockers)
    if parts:
        text += "; " + "; ".join(parts)
    code: WaitingCode = "outranked" if new_higher else "capacity"
    return Check(code, False, text, Fix(remove=tuple(blockers)), res, need, have, where, tuple(higher))


def _holders(view: _PlanView, gang: PendingGang, blockers: Sequence[str]) -> list[str]:
    """The room's holders by kind: new pods of this plan (of higher priority: "taken by"; of
    its own: "lost on value/age to"), and running gangs it may not preempt ("held by")."""
    new = [b for b in blockers if b not in view.running or (b in view.new and b not in view.lost)]
    higher = [b for b in new if view.priority[b] > gang.priority]
    same_new = [b for b in new if view.priority[b] == gang.priority]
    lower_new = [b for b in new if view.priority[b] < gang.priority]
    kept = [b for b in blockers if b not in new]
    parts = []
    if higher:
        parts.append("room taken by higher-priority " + _names(higher, view))
    if same_new:
        parts.append(f"lost on value/age to {_listing(same_new)} (same priority {gang.priority})")
    if lower_new:
        parts.append("room taken by lower-priority " + _names(lower_new, view))
    if kept:
        why = [f"{b} ({_why_kept(view, view.running[b], gang)})" for b in kept]
        parts.append("held by running " + _listing(why))
    return parts


def _why_kept(view: _PlanView, run: RunningGang, gang: PendingGang) -> str:
    if run.name in view.lost and run.name not in view.use:
        return f"priority {run.priority}, preempted by this plan for the gangs named, back without them"
    if run.priority >= gang.priority:
        return f"priority {run.priority}, not lower"
    if not view.rnd.policy.preemption:
        return "preemption is off"
    if not view.scope.static(gang, run):
        policy = view.scope.policy(gang.queue)
        knob = "within_queue" if run.queue == gang.queue else "other_queues"
        text = f"queue {run.queue}; queue {gang.queue}'s policy {knob} is {getattr(policy, knob)}"
        if view.scope.cohort_mates(gang.queue, run.queue):
            text += f", reclaim_within_cohort {policy.reclaim_within_cohort}"
        return text
    return "not preemptible"


def _pods(n: int) -> str:
    return f"{n} pod" if n == 1 else f"{n} pods"


def _names(names: Sequence[str], view: _PlanView) -> str:
    return _listing([f"{n} (priority {view.priority[n]})" for n in names])


def _listing(items: Sequence[str]) -> str:
    head = ", ".join(items[:MAX_NAMES])
    return head + (f" and {len(items) - MAX_NAMES} more" if len(items) > MAX_NAMES else "")


def _usable_rows(g: _Gang, rows: IndexArray) -> IndexArray:
    usable = g.usable
    return rows[usable[rows]] if len(rows) else rows


def _short_resource(view: _PlanView, g: _Gang, free: IntArray, rows: IndexArray) -> tuple[str, int, int]:
    """(resource, need, free on the usable nodes of ``rows``): the first resource (gpu first)
    short in total, else the gang's main one."""
    need = g.need()
    usable = _usable_rows(g, rows)
    have = np.maximum(free[usable], 0).sum(axis=0) if len(usable) else np.zeros(len(view.resources), dtype=np.int64)
    order = sorted(range(len(view.resources)), key=lambda j: (view.resources[j] != "gpu", view.resources[j]))
    for j in order:
        if need[j] > have[j]:
            return view.resources[j], int(need[j]), int(have[j])
    j = next((j for j in order if need[j] > 0), order[0] if order else 0)
    return view.resources[j], int(need[j]), int(have[j])


def _blockers(view: _PlanView, g: _Gang, free: IntArray, rows: IndexArray) -> list[str]:
    """The smallest set (irreducible: no member can be left out) of gangs holding room on the
    nodes it may use within ``rows`` whose removal lets its minimum fit: strictly higher
    priority first, then its own, then the rest; each group by name.

    Two passes over the holders in that order: the shortest prefix whose room lets it fit,
    then, from its last holder back to its first, each holder left out when the rest still
    lets it fit (:meth:`_Holders.smallest`)."""
    within = np.zeros(len(g.usable), dtype=bool)
    within[rows] = True
    owners = view.holders(g.usable & within)
    held = owners[~view.victim_mask(g.spec)[owners]]
    chosen = [view.owners[k] for k in _Holders(view, held, _Room(view, g, free, rows, within)).smallest()]
    # Without a gang, the gangs preempted for it come back, unless this gang may preempt them.
    attached = [v for b in chosen for v in view.preempted_for.get(b, []) if not view.may_preempt(g.spec, v)]
    return list(dict.fromkeys([*chosen, *attached]))


FEW_NODES = 16
"""Nodes up to which :meth:`_Room.add` counts node by node in plain Python."""


class _Holders:
    """The holders of :func:`_blockers` in their order (numbers of :attr:`_PlanView.owners`),
    so that a run of them (holders ``a`` to ``b - 1``) is added to or taken from the room at
    once, its pairs gathered without a loop over the holders (a waiting gang of the
    fragmented L round has up to 16,755 of them, of which it looks at a few hundred)."""

    def __init__(self, view: _PlanView, held: IndexArray, room: _Room) -> None:
        self.view, self.held, self.room = view, held, room
        self.first = view.pair_start[held]
        self.offset = np.concatenate([[0], np.cumsum(view.pair_start[held + 1] - self.first)])

    def shift(self, a: int, b: int, sign: int) -> None:
        """Add (``sign=1``) or take away (``-1``) the usage of holders ``a`` to ``b - 1``."""
        view = self.view
        if b - a == 1:
            lo = int(self.first[a])
            hi = lo + int(self.offset[b] - self.offset[a])
            self.room.add(view.pair_row[lo:hi], view.pair_amounts[lo:hi], sign, unique=True)
        elif b > a:
            base = int(self.offset[a])
            pairs = np.arange(base, int(self.offset[b]), dtype=np.intp)
            pairs += np.repeat(self.first[a:b] - self.offset[a:b], np.diff(self.offset[a : b + 1]))
            self.room.add(view.pair_row[pairs], view.pair_amounts[pairs], sign, unique=False)

    def without(self, a: int) -> bool | None:
        """:meth:`_Room.fits_without` holder ``a``."""
        lo = int(self.first[a])
        hi = lo + int(self.offset[a + 1] - self.offset[a])
        return self.room.fits_without(self.view.pair_row[lo:hi], self.view.pair_amounts[lo:hi])

    def smallest(self) -> list[int]:
        """The holders, in order, of :func:`_blockers`' set: the shortest prefix that lets the
        gang fit, then from its last holder back to its first each one left out whose removal
        still lets it fit (every holder when even all of them do not).

        Room only helps (:meth:`_Room.fits` is monotone in it), so both passes take runs of
        holders at once, found by doubling then halving, and give the answer of one holder at
        a time: in the backward pass, when leaving out the run down to holder ``a`` fits, each
        holder of it would have been left out in turn, and the holder below the longest such
        run is kept. The fragmented L round (4,096 nodes, 16,262 running gangs) added back
        62,873 holders one by one for its 52 waiting gangs: 3.7 of the reasons' 4.4 CPU-s."""
        room, n = self.room, len(self.held)
        if room.fits():
            return []
        lo, step = 0, 1  # prefix ``lo`` does not fit; it is in the room
        while True:
            hi = min(n, lo + step)
            self.shift(lo, hi, 1)
            if room.fits():
                break
            if hi == n:
                return [int(k) for k in self.held]  # no prefix fits, so no holder can be left out
            lo, step = hi, 2 * step
        while hi - lo > 1:  # prefix ``hi`` fits and is in the room
            mid = (lo + hi) // 2
            self.shift(mid, hi, -1)
            if room.fits():
                hi = mid
            else:
                self.shift(mid, hi, 1)
                lo = mid
        kept: list[int] = []
        top = hi  # holders below ``top``: undecided, in the room, which fits
        while top > 0:
            if self.without(top - 1) is False:  # holder ``top - 1`` is kept, as below
                kept.append(top - 1)
                top -= 1
                continue
            good, step = top, 1  # leaving out ``good`` to ``top - 1`` fits; they are out
            bad = -1
            while good > 0:
                a = max(0, good - step)
                self.shift(a, good, -1)
                if not room.fits():
                    bad = a
                    break
                good, step = a, 2 * step
            if bad < 0:
                break  # every undecided holder left out
            while good - bad > 1:  # ``bad`` to ``top - 1`` are out; leaving them out does not fit
                mid = (bad + good) // 2
                self.shift(bad, mid, 1)
                if room.fits():
                    good = mid
                    self.shift(bad, mid, -1)
                else:
                    bad = mid
            self.shift(bad, good, 1)  # holder ``bad`` is kept
            kept.append(bad)
            top = bad
        return [int(self.held[k]) for k in reversed(kept)]


class _Room:
    """Room on the nodes ``rows`` for a waiting gang, with each role's pod count kept up to
    date as usage is added back or taken away."""

    def __init__(self, view: _PlanView, g: _Gang, free: IntArray, rows: IndexArray, within: BoolArray) -> None:
        self.view, self.g, self.rows, self.within = view, g, rows, within
        self.room = free.copy()
        self.fit = [np.zeros(len(within), dtype=np.int64) for _ in g.masks]
        self.count = []
        self.active = [mask & within for mask in g.masks]
        """Per role, the nodes its count covers."""
        self.divisors = [[(j, int(req[j])) for j in np.flatnonzero(req > 0).tolist()] for req in g.requests]
        """Per role, (resource column, request) of what it requests (:func:`arrays.fit_counts`)."""
        for ri, (role, mask, req) in enumerate(zip(g.spec.roles, g.masks, g.requests, strict=True)):
            sub = rows[mask[rows]]
            self.fit[ri][sub] = arrays.fit_counts(self.room, req, cap=role.replicas, rows=sub)
            self.count.append(int(self.fit[ri].sum()))

    def add(self, rows: IndexArray, amounts: IntArray, sign: int = 1, unique: bool = True) -> None:
        """Add (``sign=-1``: take away) ``amounts`` on ``rows``; ``unique=False`` when rows
        repeat. A few nodes (a small gang's usage, a short run of them) are counted node by
        node in plain Python, as :func:`arrays.fit_counts` would: there the numpy calls cost
        more than the arithmetic (fragmented L round: 23,134 runs added or taken away, 83 % of
        them on at most :data:`FEW_NODES` nodes)."""
        if len(rows) <= FEW_NODES:
            # In Python ints, row by row, each row read and written once (a run of them may
            # repeat a row); a numpy scalar op per resource and role cost more than the sums.
            roles, room, count = self.g.spec.roles, self.room, self.count
            for r, amount in zip(rows.tolist(), amounts.tolist(), strict=True):
                values = [v + sign * a for v, a in zip(room[r].tolist(), amount, strict=True)]
                room[r] = values
                for ri, role in enumerate(roles):
                    if self.active[ri][r]:
                        fit = _fit(values, self.divisors[ri])
                        fit = min(max(fit, 0), role.replicas)
                        fit_ri = self.fit[ri]
                        count[ri] += fit - int(fit_ri[r])
                        fit_ri[r] = fit
            return
        if unique:
            self.room[rows] += sign * amounts
            touched = rows
        else:
            np.add.at(self.room, rows, sign * amounts)
            touched = np.unique(rows)
        for ri, (role, req) in enumerate(zip(self.g.spec.roles, self.g.requests, strict=True)):
            sub = touched[self.active[ri][touched]]
            if len(sub):
                new = arrays.fit_counts(self.room, req, cap=role.replicas, rows=sub)
                self.count[ri] += int(new.sum() - self.fit[ri][sub].sum())
                self.fit[ri][sub] = new

    def fits(self) -> bool:
        said = self._counted(self.count)
        return _fits(self.view, self.g, self.room, self.rows) if said is None else said

    def fits_without(self, rows: IndexArray, amounts: IntArray) -> bool | None:
        """:meth:`fits` with ``amounts`` taken away on ``rows`` (one holder's: unique, at most
        :data:`FEW_NODES`), the room left as it is; None when only the exact fit could say. A
        holder the backward pass of :meth:`_Holders.smallest` keeps is then neither taken
        away nor put back (the fragmented XL round keeps thousands)."""
        if len(rows) > FEW_NODES:
            return None
        count = list(self.count)
        for r, amount in zip(rows.tolist(), amounts.tolist(), strict=True):
            values = [v - a for v, a in zip(self.room[r].tolist(), amount, strict=True)]
            for ri, role in enumerate(self.g.spec.roles):
                if self.active[ri][r]:
                    fit = _fit(values, self.divisors[ri])
                    count[ri] += min(max(fit, 0), role.replicas) - int(self.fit[ri][r])
        return self._counted(count)

    def _counted(self, count: list[int]) -> bool | None:
        """What the per-role pod counts ``count`` decide: whether its minimum fits, None when
        they cannot (several roles placed, or slices: the exact fit decides). The gang's
        numbers are read once per room (:attr:`_limits`): the backward pass asks thousands of
        times (2,828 for one gang of the fragmented L round)."""
        replicas, lows, minimum, sliced = self._limits
        counts = [min(c, r) for c, r in zip(count, replicas, strict=True)]
        if any(c < low for c, low in zip(counts, lows, strict=True)):
            return False
        if sum(counts) < minimum:
            return False
        if sum(c > 0 for c in counts) <= 1 and not sliced:
            return True
        return None

    @cached_property
    def _limits(self) -> tuple[list[int], list[int], int, bool]:
        """Per role its replicas and minimum, the gang's minimum, and whether it is sliced."""
        gang = self.g.spec
        lows = [gang.role_minimum(r) for r in gang.roles]
        return [r.replicas for r in gang.roles], lows, gang.minimum, _slice_level(gang) is not None


def _fit(values: list[int], divisors: list[tuple[int, int]]) -> int:
    """Pods of a request that fit in the room ``values`` (one node's, per resource): the least
    of ``values[j] // q`` over its ``divisors`` (resource column, request), as
    :func:`arrays.fit_counts` counts one row; :data:`arrays.UNBOUNDED` for a request of
    nothing. A loop, not ``min`` over a generator: asked 61,000 times by the reasons of the
    fragmented L round."""
    if not divisors:
        return arrays.UNBOUNDED
    j, q = divisors[0]
    fit = values[j] // q
    for j, q in divisors[1:]:
        here = values[j] // q
        if here < fit:
            fit = here
    return fit


NEVER_THIS_ROUND = "can never start this round"
"""The text's start of :func:`_free_room_never` (and what :func:`_ahead_check` looks for)."""


def _free_room_never(
    view: _PlanView, g: _Gang, free: IntArray, level: str | None, domains: list[tuple[str, IndexArray]]
) -> Check:
    """Its minimum does not fit in the room it could use in any plan of this round
    (:meth:`_PlanView.ever_room`: the free room before the round and the pods of the running
    gangs it might preempt) on the nodes it may use, within one domain of a required ``level``:
    no plan of this round can start it. Running pods do not move, rule 5 keeps it off every
    node where a gang it may not preempt loses pods, and new pods only take room.

    On the fragmented 4,096-node round (busy 0.75, no node wholly free) 49 waiting priority-0
    gangs of 8-GPU pods are such (priority 0 is the lowest candidate priority; the free GPUs
    per node run from 0 to 7), and the prefilter prunes them (:func:`gangopt.prefilter._preempting_nothing`).
    Their reasons read "behind waiting higher-priority …" (code ``outranked``), untrue: removing
    those gangs would not start them. So do two priority-5 gangs of that round that may
    preempt, job-0184 (32 pods in one rack) and job-0383 (128 in one block), which the
    prefilter prunes for topology: no rack (block) holds them even after every allowed
    preemption. The fix: empty nodes added (:func:`_capacity_never`'s), the room no preemption
    frees. ``free``: the room after the plan, counting what it may preempt, beside which the
    copies are counted."""
    gang = g.spec
    everything = np.arange(view.capacity.shape[0], dtype=np.intp)
    before = view.ever_room(gang)
    none = view.preempts_none(gang)
    counting = "" if none else ", counting the pods of running gangs it may preempt"
    res, need, have = _short_resource(view, g, before, everything)
    lone = ""
    for role, mask in zip(gang.roles, g.masks, strict=True):
        if g.minimum[role.name] == 0:
            continue
        req = arrays.request_vector(role.requests, view.resources)
        rows = np.flatnonzero(mask)
        if not len(rows) or not arrays.fit_counts(before[rows], req, 1).any():
            wants = ", ".join(human(int(v), r) for r, v in zip(view.resources, req, strict=True) if v)
            j = view.resources.index(res)
            most = int(np.maximum(before[rows, j], 0).max()) if len(rows) else 0
            lone = (
                f"no node it may use has room for one pod of role {role.name!r} ({wants}) before this round"
                f"{counting} (at most {human(most, res)} free on one)"
            )
            break
    if not lone:
        where = f" within one {level}" if level is not None else ""
        lone = (
            f"its minimum of {_pods(gang.minimum)} does not fit{where} in the free room of the nodes it may use "
            f"before this round{counting}"
        )
    if none:
        why = "preemption is off" if not view.rnd.policy.preemption else "no running gang it may preempt"
        tail = f"it may preempt no running pod ({why}; rule 5 keeps it off every node a preemption frees)"
    else:
        tail = (
            "the rest is held by running gangs it may not preempt (rule 5 keeps it off every node where they lose pods)"
        )
    text = (
        f"{NEVER_THIS_ROUND}: {lone}; its minimum needs {human(need, res)}, {human(have, res)} free on those nodes "
        f"in all; {tail}"
    )
    fix, _ = _added_nodes(view, g, free, alone=True)
    return Check("capacity", True, text, fix, res, need, have)


def _capacity_never(view: _PlanView, g: _Gang, free: IntArray) -> Check:
    """The nodes it may use cannot hold its minimum even empty. The fix: :func:`_added_nodes`."""
    gang = g.spec
    n = view.capacity.shape[0]
    if n == 0:  # no node to copy (and, with empty requests, no resource to name): the round's cluster is empty
        return Check(
            "capacity", True, f"can never run on this cluster: it has no nodes for its minimum of {_pods(gang.minimum)}"
        )
    res, need, have = _short_resource(view, g, view.capacity, np.arange(n, dtype=np.intp))
    fix, raised = _added_nodes(view, g, free)
    text = (
        f"can never run on this cluster: needs {human(need, res)} for its minimum of {_pods(gang.minimum)}; the "
        f"nodes it may use have {human(have, res)} in all"
    )
    if have >= need:
        text += ", but its pods do not fit on them (each pod needs its whole request on one node)"
    if raised:
        text += "; no such node can hold one of its pods"
    return Check("capacity", True, text, fix, res, need, have)


def _added_nodes(view: _PlanView, g: _Gang, free: IntArray, alone: bool = False) -> tuple[Fix, bool]:
    """The fewest empty copies of one node it may use (raised to hold one pod of each role)
    that let its minimum fit beside the room it has after the plan (``free``), in one domain of
    a required level; and whether the copy had to be raised. With ``alone``, the copies of its
    largest usable node that hold its minimum by themselves (enough, not the fewest): a gang
    that can never start this round (:func:`_free_room_never`) may use little of the room
    after the plan anyway, and at XL trying every rack's largest node beside that room cost
    the reasons of the 194 such gangs 2.8 CPU-s (1.85 -> 4.6 for the whole finisher's reasons)."""
    gang = g.spec
    n = view.capacity.shape[0]
    res, _, _ = _short_resource(view, g, view.capacity, np.arange(n, dtype=np.intp))
    j = view.resources.index(res)
    level = gang.topology.required if gang.topology else None
    codes = view.domain_codes(level)[0] if level else np.zeros(n, dtype=np.int64)
    one_pod = g.requests.max(axis=0)
    if _slice_level(gang) == NODE_LEVEL and gang.topology and gang.topology.slice_size:
        one_pod = one_pod * gang.topology.slice_size  # a node holds whole slices or nothing
    if level == NODE_LEVEL:
        one_pod = np.maximum(one_pod, g.need())  # copies cannot join a node: one node holds it all
    # Templates: per role it needs and per domain, its largest node (any node if none is usable).
    templates: dict[int, None] = {}
    for role, mask in zip(gang.roles, g.masks, strict=True):
        if g.minimum[role.name] == 0:
            continue
        usable = np.flatnonzero(mask)
        usable = usable if len(usable) else np.arange(n, dtype=np.intp)
        for d in dict.fromkeys(codes[usable].tolist()) if not alone else (None,):
            here = usable[codes[usable] == d] if d is not None else usable
            templates[int(here[np.argmax(view.capacity[here, j])])] = None
    options = []
    for template in templates:
        capacity = np.maximum(view.capacity[template], one_pod)
        base = np.flatnonzero(codes == codes[template]).astype(np.intp) if not alone else np.zeros(0, np.intp)
        k = _copies(view, g, template, capacity, free, base)
        options.append((k is None, k or gang.minimum, template, capacity))
    none, k, template, capacity = min(options, key=lambda o: (o[0], o[1], o[2]))
    if none and level is None and _slice_level(gang) is None:
        per_role = _copies_per_role(view, g, free)
        if per_role is not None:
            return per_role, False
    node = view.rnd.cluster.nodes[template].name
    caps = tuple((r, int(v)) for r, v in zip(view.resources, capacity, strict=True) if v)
    raised = not (capacity == view.capacity[template]).all()
    return Fix(add_nodes=k, node_template=node, node_capacity=caps), raised


def _copies_per_role(view: _PlanView, g: _Gang, free: IntArray) -> Fix | None:
    """When copies of no one node let its minimum fit (its roles may use different nodes and
    the plan holds the room of one): per role it needs, copies of its largest usable node, as
    many as that role's minimum pods (enough, not the fewest), if they let it fit beside
    ``free``. The nightly sample's three false "can never run on this cluster" reasons: copies
    of an A100 node for a gang whose other role may use H100 nodes only."""
    added: list[tuple[int, int, IntArray]] = []
    for role, mask, req in zip(g.spec.roles, g.masks, g.requests, strict=True):
        pods = g.minimum[role.name]
        usable = np.flatnonzero(mask)
        if pods == 0 or not len(usable):
            continue
        j = int(np.argmax(req)) if req.any() else 0
        template = int(usable[np.argmax(view.capacity[usable, j])])
        added.append((template, pods, np.maximum(view.capacity[template], req)))
    if len(added) < 2:
        return None
    room = np.vstack([free, *(np.repeat(cap[None, :], k, axis=0) for _, k, cap in added)])
    masks = [
        np.concatenate([m, *(np.full(k, bool(m[t]) or not view.elig.schedulable[t]) for t, k, _ in added)])
        for m in g.masks
    ]
    if not _fits_masks(g, room, masks, np.arange(room.shape[0], dtype=np.intp), None):
        return None
    nodes = view.rnd.cluster.nodes
    copies = [
        (nodes[t].name, k, tuple((r, int(v)) for r, v in zip(view.resources, cap, strict=True) if v))
        for t, k, cap in added
    ]
    (first, k, caps), more = copies[0], tuple(copies[1:])
    return Fix(add_nodes=k, node_template=first, node_capacity=caps, more_nodes=more)


def _copies(
    view: _PlanView, g: _Gang, template: int, capacity: IntArray, free: IntArray, base: IndexArray
) -> int | None:
    """The fewest empty copies of node ``template`` (with ``capacity``) that let its minimum
    fit beside ``free`` on the nodes ``base``; None if copies of it cannot."""
    cordoned = not view.elig.schedulable[template]
    copy_ok = [bool(m[template]) or cordoned for m in g.masks]
    level = _slice_level(g.spec)
    codes = view.domain_codes(level)[0] if level else None
    for k in range(1, g.spec.minimum + 1):
        room = np.vstack([free[base], np.repeat(capacity[None, :], k, axis=0)])
        masks = [np.concatenate([m[base], np.full(k, ok)]) for m, ok in zip(g.masks, copy_ok, strict=True)]
        slices = None
        if codes is not None:  # copies share the template's domain; at level node each is its own
            added = np.full(k, codes[template]) if level != NODE_LEVEL else codes.max() + 1 + np.arange(k)
            slices = np.concatenate([codes[base], added])
        if _fits_masks(g, room, masks, np.arange(room.shape[0], dtype=np.intp), slices):
            return k
    return None


def _topology_never(view: _PlanView, g: _Gang, level: str, domains: list[tuple[str, IndexArray]]) -> Check:
    gang = g.spec
    res, need, _ = _short_resource(view, g, view.capacity, np.arange(view.capacity.shape[0], dtype=np.intp))
    j = view.resources.index(res)
    have = _domain_sums(np.where(g.usable, np.maximum(view.capacity[:, j], 0), 0), domains)
    sizes = [(h, k) for k, h in enumerate(have)]
    best_have, k = max(sizes, key=lambda s: (s[0], -s[1]))
    best = domains[k][0]
    text = (
        f"can never run with its required level {level}: needs {human(need, res)} for {_pods(gang.minimum)} within one "
        f"{level}; the largest {level} ({best}) has {human(best_have, res)} on the nodes it may use"
    )
    return Check("topology", True, text, Fix(drop_required=True), res, need, best_have, f"{level} {best}")


# ----------------------------------------------------------------------------- quota


def _quota_checks(view: _PlanView, g: _Gang) -> list[Check]:
    """Per limit of its queue and cohort: never (its minimum alone exceeds the limit) or waits
    (the headroom after the plan, plus what it may preempt within the limit, is short)."""
    limits = view.limits
    if not limits.size:
        return []
    gang = g.spec
    add = limits.pod_usage(gang.queue, g.need())
    _, freeable = view.freeable(gang)
    out = []
    for c in np.flatnonzero(add > 0).tolist():
        need = int(add[c])
        bound = int(view.quota_bound[c])
        res = view.resources[int(limits.resource[c])]
        name, raise_ = _limit_name(view, c, gang)
        headroom = bound - int(view.quota_after[c]) + int(freeable[c])
        short = need - headroom
        # Gangs this plan preempted that it may not preempt would take a raised limit back
        # first, and their room with it: they are part of the cause, and their removal of the
        # fix. Raising the limit by the shortfall and what they would take back was not enough
        # in 9 of the 1,100 reasons of the nightly sample (``bench.reasons_truth``, 800 rounds):
        # back in place, their pods pushed the plan's gang off their node into the room this
        # gang counted, or another limit of its queue, short by what they took, kept it out.
        back = [v for v, q in view.lost_quota.items() if q[c] > 0 and not view.may_preempt(gang, v)]
        comeback = sum(int(view.lost_quota[v][c]) for v in back)
        # Raising the limit by ``amount`` raises the bound a plan must keep, max(limit, usage
        # before the round), by ``short``.
        amount = bound + short - int(limits.limit[c])
        again = (
            f" ({_names(back, view)}, preempted by this plan, could come back with a raised limit, taking "
            f"{human(comeback, res)} of it and its room)"
            if comeback
            else ""
        )
        if need > bound:
            text = (
                f"can never run under {name} ({human(int(limits.limit[c]), res)}): its minimum needs "
                f"{human(need, res)}, the limit allows {human(bound, res)}"
            )
            if headroom < bound:
                text += f" ({human(headroom, res)} of it free after this plan)"
            text += again
            fix = Fix(remove=tuple(back), quota=(QuotaRaise(*raise_, res, amount),))
            out.append(Check("quota", True, text, fix, res, need, bound, name, scope=c))
            continue
        if need <= headroom:
            continue
        users = _quota_users(view, c, gang)
        text = (
            f"waits for quota: {name} ({human(int(limits.limit[c]), res)}) has {human(headroom, res)} free after "
            f"this plan{' (counting what it may preempt)' if freeable[c] else ''}; its minimum needs "
            f"{human(need, res)}, {human(short, res)} more{again}"
        )
        higher = [u for u in users if view.priority[u] > gang.priority]
        same = [u for u in users if view.priority[u] == gang.priority and u not in view.running]
        if higher:
            text += "; used by higher-priority " + _names(higher, view)
        if same:
            text += f"; lost on value/age to {_listing(same)} (same priority {gang.priority})"
        fix = Fix(remove=tuple(back), quota=(QuotaRaise(*raise_, res, amount),))
        out.append(Check("quota", False, text, fix, res, need, headroom, name, tuple(higher), scope=c))
    return out


def _limit_name(
    view: _PlanView, c: int, gang: PendingGang
) -> tuple[str, tuple[str, Literal["nominal", "borrowing_limit"]]]:
    """A limit's name for texts (which one binds) and the queue field that raises it."""
    label = view.limits.labels[c]
    queue = next(q for q in view.rnd.queues if q.name == gang.queue)
    if label.startswith("cohort "):
        name = label.removeprefix("cohort ")
        held = any(c.name == name and (c.nominal or c.borrowing_limit) for c in view.rnd.cohorts)
        held = held or any(q.lending_limit for q in view.rnd.queues)  # some nominal kept back
        what = "its subtree's quota and limits, docs/rules.md rule 6" if held else "sum of nominal quotas"
        return f"cohort {name!r} ({what})", (queue.name, "nominal")
    if queue.cohort is None:
        return f"queue {queue.name!r} nominal quota", (queue.name, "nominal")
    return f"queue {queue.name!r} nominal + borrowing limit", (queue.name, "borrowing_limit")


def _quota_users(view: _PlanView, c: int, gang: PendingGang) -> list[str]:
    """Gangs with usage in limit ``c`` after the plan, of its priority or higher, highest first."""
    users = [
        u
        for u, use in view.gang_queue_use.items()
        if use[c] > 0 and view.priority[u] >= gang.priority and u != gang.name
    ]
    return sorted(users, key=lambda u: (-view.priority[u], u))


# ----------------------------------------------------------------------------- group, policy


def _group_check(rnd: Round, gang: PendingGang, own: dict[str, list[Check]]) -> Check | None:
    """Its group's other gangs wait (they are not admitted, since groups start whole)."""
    if not gang.group:
        return None
    partners = [g.name for g in rnd.pending if g.group == gang.group and g.name != gang.name]
    if not partners:
        return None
    never = [p for p in partners if any(c.never for c in own.get(p, []))]
    if never:
        text = f"can never run in its gang group {gang.group!r}: {', '.join(never)} can never run"
        return Check("group", True, text, Fix(ungroup=True))
    why = [f"{p} ({own[p][0].code})" if own.get(p) else p for p in partners]
    text = f"its gang group {gang.group!r} starts whole or not at all, and {_listing(why)} wait"
    return Check("group", False, text, Fix(ungroup=True))


def _policy_check(plan: Plan) -> Check:
    text = "fits beside this plan (room, quota, group); " + (
        f"the {plan.solver} plan ({plan.status}) did not start it"
        if plan.status != "optimal"
        else "it needs a start gangopt does not model (a preemption only to free quota, or freed room its "
        "own priority already uses)"
    )
    return Check("policy", False, text)


# ----------------------------------------------------------------------------- does it fit


def _fits(view: _PlanView, g: _Gang, room: IntArray, rows: IndexArray) -> bool:
    """Whether its minimum fits in ``room`` on ``rows`` (nodes each role may use)."""
    level = _slice_level(g.spec)
    slices = view.domain_codes(level)[0] if level else None
    return _fits_masks(g, room, g.masks, rows, slices)


def _domain_fits(view: _PlanView, g: _Gang, room: IntArray, domains: list[tuple[str, IndexArray]]) -> Iterator[bool]:
    """:func:`_fits` in each of ``domains`` (their rows), in order: the per-role room counts of
    every domain at once, then :func:`_fits` itself only where they cannot decide (several
    roles placed, or slices), when asked. A waiting gang of the fragmented XL round (16,384
    nodes, 512 racks) asked it rack by rack: 61,864 calls, 3.1 of the reasons' 21 s (profiled)."""
    gang = g.spec
    if not domains:
        return
    order = np.concatenate([rows for _, rows in domains])
    ends = np.cumsum([len(rows) for _, rows in domains])
    starts = ends - np.asarray([len(rows) for _, rows in domains])
    counts = []
    for role, mask, req in zip(gang.roles, g.masks, g.requests, strict=True):
        fit = arrays.fit_counts(room, req, cap=role.replicas) * mask
        total = np.concatenate([[0], np.cumsum(fit[order])])
        counts.append(np.minimum(total[ends] - total[starts], role.replicas))
    per_role = np.stack(counts) if counts else np.zeros((0, len(domains)), dtype=np.int64)
    lows = np.asarray([gang.role_minimum(r) for r in gang.roles], dtype=np.int64)
    able = (per_role >= lows[:, None]).all(axis=0) & (per_role.sum(axis=0) >= gang.minimum)
    single = ((per_role > 0).sum(axis=0) <= 1) & (_slice_level(gang) is None)
    for k, (_, rows) in enumerate(domains):
        yield bool(able[k]) and (bool(single[k]) or _fits(view, g, room, rows))


def _slice_level(gang: PendingGang) -> str | None:
    return gang.topology.slice_level if gang.topology and gang.topology.slice_level else None


def _fits_masks(g: _Gang, room: IntArray, masks: list[BoolArray], rows: IndexArray, slices: IntArray | None) -> bool:
    """Per-role room counts decide when they say no (an upper bound) or when one role's pods
    are all that is placed and no slices apply (then they are exact); else a small CP-SAT
    feasibility model over the nodes decides."""
    gang = g.spec
    counts = []
    per_node = []
    for role, mask, req in zip(gang.roles, masks, g.requests, strict=True):
        sub = rows[mask[rows]] if len(rows) else rows
        fit = arrays.fit_counts(room, req, cap=role.replicas, rows=sub) if len(sub) else np.zeros(0, dtype=np.int64)
        per_node.append((sub, fit))
        counts.append(min(int(fit.sum()), role.replicas))
    if any(c < gang.role_minimum(r) for c, r in zip(counts, gang.roles, strict=True)) or sum(counts) < gang.minimum:
        return False
    placed = [r for r, c in zip(gang.roles, counts, strict=True) if c > 0]
    if len(placed) <= 1 and slices is None:
        return True
    if len(rows) > EXACT_NODES:
        return True
    return _fits_exactly(g, room, per_node, slices)


def _fits_exactly(
    g: _Gang, room: IntArray, per_node: list[tuple[IndexArray, IntArray]], slices: IntArray | None
) -> bool:
    """A CP-SAT feasibility model: pods per role and node within each node's room, role and
    gang minimums, and (``slices``: each row's slice domain) a multiple of the slice size per
    slice domain. OR-Tools is imported here: validate and explain never need it (0.5 s of CPU)."""
    from ortools.sat.python import cp_model

    gang = g.spec
    model = cp_model.CpModel()
    x: dict[tuple[int, int], cp_model.IntVar] = {}
    most = 0
    for ri, (sub, fit) in enumerate(per_node):
        for n, f in zip(sub.tolist(), fit.tolist(), strict=True):
            if f > 0:
                x[(ri, n)] = model.new_int_var(0, int(f), f"x{ri}_{n}")
                most += int(f)
    by_node: dict[int, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    for (ri, n), var in x.items():
        by_node[n].append((ri, var))
    for n, items in by_node.items():
        for j in range(room.shape[1]):
            coeffs = [(int(g.requests[ri, j]), var) for ri, var in items if g.requests[ri, j]]
            if len(coeffs) > 1:
                model.add(sum(a * v for a, v in coeffs) <= max(0, int(room[n, j])))
    total = []
    for ri, role in enumerate(gang.roles):
        pods = [var for (r, _), var in x.items() if r == ri]
        model.add(sum(pods) >= gang.role_minimum(role))
        model.add(sum(pods) <= role.replicas)
        total += pods
    model.add(sum(total) >= gang.minimum)
    model.add(sum(total) <= gang.maximum)
    if slices is not None:
        size = gang.topology.slice_size if gang.topology and gang.topology.slice_size else 1
        for d in sorted(set(slices[[n for _, n in x]].tolist())):
            pods = [var for (_, n), var in x.items() if slices[n] == d]
            if pods:
                count = model.new_int_var(0, most, f"s{d}")
                model.add(sum(pods) == size * count)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 5.0
    return solver.solve(model) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
