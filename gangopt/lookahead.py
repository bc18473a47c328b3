"""Look-ahead: what the cpsat solver knows about time, as a restricted view of the round.

A round is a snapshot; a trace is a film. Optimal rounds in a row made a poor film on
contended traces (issue 12): the per-round optimum fills every free GPU, so a gang that needs
a whole node never sees one free up at once, and a gang that has just restarted has lost
nothing since its checkpoint, so it is the cheapest victim again and again (one Philly job was
evicted 29 times). :func:`look_ahead` turns the round's times (``RunningGang.started_at``,
``expected_end``, ``evictions``; ``PendingGang.expected_duration``) and the
:class:`~gangopt.schema.LookAhead` settings into a **restricted round** that the cpsat solver
then decides as usual:

1. **Protection.** A running gang that restarted after an eviction less than
   ``min_run_seconds`` ago (on its first run: ``first_run_seconds``), or was evicted
   ``max_evictions`` times already, is not preemptible in the view. The first-run floor yields
   to blocked gangs of ``urgent_priority`` or higher when nothing but young work could make
   room for them (:func:`_yielding`; b436b2's priority-2 p95 wait 399 s -> 56 s).
2. **Reservations** (Slurm's backfill, in the round). The blocked gangs, highest priority
   first, then longest waiting, get the whole nodes on which they fit earliest, from the
   running gangs' expected ends, up to ``reservations`` gangs a round.
3. **Backfill.** A pending gang of the same or lower priority than a reservation may use its
   nodes only if it surely ends before the reservation starts (``now + expected_duration <=
   start``); otherwise the view gives it a node-affinity term that keeps it off those nodes.
4. **Committed GPU-time budget** (``commit_hours``, default 36). A pending gang that
   would commit at least half the budget (its minimum GPUs x ``expected_duration`` >=
   ``commit_hours`` x the cluster's GPUs / 2) does not start if its tier's running GPUs x
   remaining time (``expected_end``) plus its own would exceed the budget (Slurm's
   GrpTRESRunMins, per priority tier, for the big commitments only), **while the cluster is
   contended for it** (:func:`_contended`: it needs an eviction, or starting it and every other
   waiting gang would leave less than :data:`IDLE_HEADROOM` of the GPUs idle); a tier that runs
   nothing may start anything, so no gang waits for ever. The view gives a held gang a
   node-affinity term no node meets, and it gets no reservation. Why: on the openb window (2
   nodes) an 8-GPU, 58-hour priority-2 pod started at 190.2 h held half the cluster through a
   burst of 168 one-GPU priority-2 pods; held back until 285.9 h, gangopt's p95 wait went from
   4.7 h to 16 min (``bench.tail_cause``). It was the only priority-2 gang waiting when it
   started (priority 2 then had 191 GPU-hours committed, it added 466), so the budget binds
   whether or not others of its tier wait. Smaller gangs are never held: applied to every
   gang, the budget throttled whole tiers (one long priority-1 job, started when its tier ran
   nothing, kept 9 short priority-1 pods of the openb window waiting). Without the contention
   test the budget was opt-in: on the lightly loaded Philly 600-job slice it held three 1-GPU,
   ~890-hour jobs for 400-630 h while a median 9-25 of the 48 GPUs stood idle (mean wait 6.5
   min -> 2.0 h, the worst of seven policies). Holding only while other gangs wait fixed the
   slice but lost most of the openb gain and made b436b2 worse. With the test, over 3 seeds
   and all seven policies (``python -m bench.replay_table --seeds 3``), gangopt passes 13 of
   issue 12's 18 targets on every seed (8 with ``commit_hours`` null): openb mean wait 68 ->
   32 min, p95 4.6 h -> 13 min; b436b2 mean wait 5.7 -> 4.5 h; the slice unchanged.

5. **Aging** (``escalate_after``, default 72 h). A gang that needs whole nodes and has waited
   that long is escalated (:func:`_escalated`): the budget no longer holds it, and it is
   reserved first (``escalated_order``, default highest response ratio first, durations
   capped at ``escalated_ratio_cap``: :func:`_escalated_rank`), also when it fits now; its
   reservation also keeps off gangs of a higher priority below ``urgent_priority``
   (``escalated_holds_higher``: :func:`_outranks`). On the openb window the budget had held
   its two longest-waiting 8-GPU pods 336-345 h; escalated, the largest class's p95 wait is
   155 h instead of 340 h (slurm_backfill_like: 204 h). On b436b2, where later priority-1
   16-GPU gangs passed starving priority-0 ones, the order and the rank take it from 308 h to
   215 h (fifo_first_fit: 206 h), at a price in its p99 wait (145 -> 170 h):
   docs/objective.md, look-ahead step 5.

The view only removes options, so every plan valid for the view is valid for the round; the
door (:mod:`gangopt.solve`) still validates the plan against the original round. These are the
optimizer's choices, not rules: ``gangopt validate`` does not check them and the other solvers
ignore them. Reservations are recomputed every round (nothing is remembered between rounds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gangopt.arrays import (
    BoolArray,
    Eligibility,
    IndexArray,
    IntArray,
    domain_codes,
    domain_members,
    first_fit,
    free_capacity,
    node_index,
    pod_rows,
    request_vector,
    resource_names,
)
from gangopt.objective import ObjectiveTerms
from gangopt.quantities import MILLI
from gangopt.schema import LookAhead, MatchExpression, PendingGang, Plan, Role, Round, RunningGang, Waiting

RESERVED_LABEL = "gangopt.io/reserved-for"
"""Node label of the view: the gang a reserved node is held for. Only the view carries it."""
IDLE_HEADROOM = 0.25
"""Share of the cluster's GPUs that must stay idle after a gang over the committed GPU-time
budget and every other waiting gang start, for the budget to let that gang go
(:func:`_contended`)."""
OVER_BUDGET_LABEL = "gangopt.io/over-commit-budget"
"""A label no node carries: a pending gang the committed GPU-time budget holds back requires it
in the view, so it fits nowhere there."""


@dataclass(frozen=True)
class Reservation:
    """Whole nodes held for a blocked gang from ``start`` (the round's clock)."""

    gang: str
    priority: int
    start: float
    nodes: tuple[str, ...]
    escalated: bool = False
    """Made by aging (``escalate_after``): reserved before the others, also when it fits now."""


@dataclass(frozen=True)
class View:
    """The round as the cpsat solver decides it, and what was restricted."""

    round: Round
    reservations: list[Reservation] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    """Running gangs not preemptible in the view (min run time or eviction budget)."""
    held_off: dict[str, list[str]] = field(default_factory=dict)
    """Pending gang -> the reservations whose nodes it may not use."""
    over_budget: dict[str, float] = field(default_factory=dict)
    """Pending gang held back by ``commit_hours`` -> its tier's committed GPU-hours with it."""

    @property
    def restricted(self) -> bool:
        return bool(self.reservations or self.protected or self.over_budget)

    def note(self, now: float) -> str:
        """One line for the plan's message ("" when nothing was restricted)."""
        parts = []
        for r in self.reservations:
            parts.append(f"{_nodes_text(r.nodes)} reserved for {r.gang} from t+{max(0.0, r.start - now):.0f}s")
        if self.protected:
            parts.append(f"{len(self.protected)} running gang(s) protected from eviction (minimum run time or budget)")
        if self.over_budget:
            parts.append(f"{len(self.over_budget)} pending gang(s) held back by the committed GPU-time budget")
        return f"look-ahead: {'; '.join(parts)}" if parts else ""

    def annotate(self, plan: Plan, now: float) -> Plan:
        """``plan`` with the look-ahead in its message and, for each waiting gang kept off
        reserved nodes, the reservation as its first reason."""
        if not self.restricted:
            return plan
        note = self.note(now)
        by_name = {r.gang: r for r in self.reservations}
        waiting = []
        for w in plan.waiting:
            own = by_name.get(w.gang)
            if own is not None:
                line = (
                    f"{_nodes_text(own.nodes)} reserved for it from t+{max(0.0, own.start - now):.0f}s, when the "
                    "running gangs there are expected to end (look-ahead); only gangs that end before then may use them"
                )
                w = Waiting(gang=w.gang, code=w.code, reasons=[line, *w.reasons])
            held = [by_name[name] for name in self.held_off.get(w.gang, [])]
            if held:
                lines = [
                    f"may not use {_nodes_text(r.nodes)}: reserved for "
                    f"{r.gang} (priority {r.priority}), which can start there at t+{max(0.0, r.start - now):.0f}s, "
                    "and this gang is not known to end before then"
                    for r in held
                ]
                w = Waiting(gang=w.gang, code=w.code, reasons=[*lines, *w.reasons])
            committed = self.over_budget.get(w.gang)
            if committed is not None:
                line = (
                    f"held back by the committed GPU-time budget (look-ahead commit_hours): its priority's running "
                    f"gangs and it would commit {committed:.0f} GPU-hours"
                )
                w = Waiting(gang=w.gang, code=w.code, reasons=[line, *w.reasons])
            waiting.append(w)
        message = f"{plan.message}; {note}" if plan.message else note
        return plan.model_copy(update={"message": message, "waiting": waiting})


def _nodes_text(nodes: Sequence[str]) -> str:
    """The first four node names, and how many more."""
    return ", ".join(nodes[:4]) + (f" and {len(nodes) - 4} more" if len(nodes) > 4 else "")


def look_ahead(rnd: Round) -> View:
    """The restricted view of ``rnd`` (steps in the module docstring)."""
    settings = rnd.policy.lookahead
    now = rnd.now
    running, protected = _protect(rnd, now)
    escalated = _escalated(rnd)
    over = _over_budget(rnd, now, escalated)
    reservations = _reserve(rnd, now, over, escalated) if settings.reservations > 0 else []
    if not protected and not reservations and not over:
        return View(round=rnd)
    cluster = rnd.cluster
    pending = rnd.pending
    held_off: dict[str, list[str]] = {}
    if over:
        pending = [_held_back(g) if g.name in over else g for g in pending]
    if reservations:
        holder = {node: r.gang for r in reservations for node in r.nodes}
        nodes = [
            n.model_copy(update={"labels": {**n.labels, RESERVED_LABEL: holder[n.name]}}) if n.name in holder else n
            for n in cluster.nodes
        ]
        cluster = cluster.model_copy(update={"nodes": nodes})
        pending = []
        for g in [_held_back(g) if g.name in over else g for g in rnd.pending]:
            avoid = [r.gang for r in reservations if _held_off(g, r, now, settings)]
            if avoid:
                held_off[g.name] = avoid
                g = _avoiding(g, avoid)
            pending.append(g)
    view = rnd.model_copy(update={"cluster": cluster, "running": running, "pending": pending})
    return View(round=view, reservations=reservations, protected=protected, held_off=held_off, over_budget=over)


def _protect(rnd: Round, now: float) -> tuple[list[RunningGang], list[str]]:
    settings = rnd.policy.lookahead
    if not rnd.policy.preemption:
        return rnd.running, []
    young: set[str] = set()
    for g in rnd.running:
        floor = settings.min_run_seconds if g.evictions > 0 else settings.first_run_seconds
        spent = settings.max_evictions is not None and g.evictions >= settings.max_evictions
        if g.preemptible and (spent or (g.started_at is not None and now - g.started_at < floor)):
            young.add(g.name)
    young -= _yielding(rnd, young)
    if not young:
        return rnd.running, []
    out = [g.model_copy(update={"preemptible": False}) if g.name in young else g for g in rnd.running]
    return out, [g.name for g in rnd.running if g.name in young]


def _yielding(rnd: Round, protected: set[str]) -> set[str]:
    """The gangs of ``protected`` that lose the first-run floor (``urgent_priority``): first
    runs below that priority, in a round where the pending gangs at or above it that do not fit
    the free room need more GPUs (their minimums) than the free GPUs and the GPUs of the
    lower-priority gangs already evictable hold. Then nothing but young work can make room for
    urgent work, and the floor would make it wait up to ``first_run_seconds``; otherwise the
    floor stands (yielding it whenever urgent work waited made the churn it prevents: see
    docs/objective.md)."""
    urgent = rnd.policy.lookahead.urgent_priority
    settings = rnd.policy.lookahead
    if urgent is None or not protected:
        return set()
    first = {
        g.name
        for g in rnd.running
        if g.name in protected
        and g.priority < urgent
        and g.evictions == 0
        and (settings.max_evictions is None or g.evictions < settings.max_evictions)
    }
    candidates = [g for g in rnd.pending if g.priority >= urgent]
    if not first or not candidates:
        return set()
    resources = resource_names(rnd)
    if "gpu" not in resources:
        return set()
    elig = Eligibility(rnd)
    free = _free(rnd, resources, elig.schedulable)
    terms = ObjectiveTerms.of(rnd)
    everywhere = np.ones(len(free), dtype=np.bool_)
    need = sum(
        _min_gpus(g, terms)
        for g in candidates
        if _place(rnd, g, _demand(g, terms.min_pods(g), resources, elig), free, everywhere) is None
    )
    if need <= 0:
        return set()
    room = float(free[:, resources.index("gpu")].sum()) / MILLI
    room += sum(_held_gpus(g) for g in rnd.running if g.preemptible and g.priority < urgent and g.name not in protected)
    return first if need > room else set()


def _escalated(rnd: Round) -> set[str]:
    """The pending gangs escalated by aging: waited ``escalate_after`` and need whole nodes
    (their minimum asks at least the GPUs of the cluster's largest node). A small gang needs no
    escalation: any node that frees a few GPUs takes it."""
    after = rnd.policy.lookahead.escalate_after
    if after is None:
        return set()
    old = [g for g in rnd.pending if rnd.now - g.submit_time >= after]
    if not old:
        return set()
    node_gpus = max((n.capacity.get("gpu", 0) for n in rnd.cluster.nodes if n.schedulable), default=0) / MILLI
    terms = ObjectiveTerms.of(rnd)
    return {g.name for g in old if node_gpus > 0 and _min_gpus(g, terms) >= node_gpus}


def _held_off(g: PendingGang, r: Reservation, now: float, settings: LookAhead) -> bool:
    """Whether ``g`` must keep off the nodes of reservation ``r``: not the holder, not of a
    higher priority (unless ``r`` is escalated, ``escalated_holds_higher`` is set and ``g`` is
    below ``urgent_priority``: :func:`_outranks`), and not known to end before the reservation
    starts."""
    if g.name == r.gang or (g.priority > r.priority and not _outranks(r, g, settings)):
        return False
    return g.expected_duration is None or now + g.expected_duration > r.start


def _outranks(r: Reservation, g: PendingGang, settings: LookAhead) -> bool:
    """Whether escalated reservation ``r`` keeps off ``g`` although ``g`` has a higher priority
    (``escalated_holds_higher``): aging outranks every priority below the urgent tier. Measured
    on b436b2 (6 nodes, seed 0, docs/objective.md look-ahead step 5): without it, priority-1
    16-GPU gangs arriving up to 100 h later took the nodes held for three starving priority-0
    ones, which waited 308-395 h (largest-class p95 wait 308 h, fifo_first_fit's 206 h)."""
    if not (r.escalated and settings.escalated_holds_higher):
        return False
    return settings.urgent_priority is None or g.priority < settings.urgent_priority


def _over_budget(rnd: Round, now: float, escalated: set[str]) -> dict[str, float]:
    """The pending gangs ``commit_hours`` holds back (step 4 of the module docstring), each with
    its tier's committed GPU-hours had it started. Each gang is judged against the running
    gangs alone (not against others starting in the same round): the view is built before the
    round is decided. A gang over the budget is still let go when the cluster is not contended
    for it (:func:`_contended`)."""
    hours = rnd.policy.lookahead.commit_hours
    if hours is None:
        return {}
    cluster_gpus = sum(n.capacity.get("gpu", 0) for n in rnd.cluster.nodes if n.schedulable) / MILLI
    budget = hours * 3600.0 * cluster_gpus
    committed: dict[int, float] = defaultdict(float)
    for run in rnd.running:
        if run.expected_end is not None and run.expected_end > now:
            committed[run.priority] += _held_gpus(run) * (run.expected_end - now)
    terms = ObjectiveTerms.of(rnd)
    out: dict[str, float] = {}
    for g in rnd.pending:
        tier = committed.get(g.priority, 0.0)
        if g.expected_duration is None or tier <= 0 or g.name in escalated:
            continue  # an escalated gang is no longer held (aging)
        mine = _min_gpus(g, terms) * g.expected_duration
        if mine >= budget / 2 and tier + mine > budget:
            out[g.name] = (tier + mine) / 3600.0
    return _contended(rnd, out, terms, cluster_gpus) if out else out


def _held_gpus(g: RunningGang) -> float:
    """GPUs the running gang's pods hold."""
    per_pod = {r.name: r.requests.get("gpu", 0) / MILLI for r in g.roles}
    return sum(per_pod[p.role] for p in g.pods)


def _min_gpus(g: PendingGang, terms: ObjectiveTerms) -> float:
    """GPUs of the gang's minimum (its minimum pods per role x each role's GPU request)."""
    per_pod = {r.name: r.requests.get("gpu", 0) / MILLI for r in g.roles}
    return sum(per_pod[name] * n for name, n in terms.min_pods(g).items())


def _contended(rnd: Round, over: dict[str, float], terms: ObjectiveTerms, cluster_gpus: float) -> dict[str, float]:
    """The gangs of ``over`` for which the cluster is contended: all but those that fit the idle
    capacity now (first fit, no eviction) with the idle GPUs left after them covering the
    minimum GPUs of every other pending gang (those over the budget aside) plus
    :data:`IDLE_HEADROOM` x the cluster's GPUs. Such a gang takes GPUs no one waits for, on a
    cluster that keeps room for arrivals, and holding it would only keep them idle.

    Measured (``commit_hours`` 36, ``bench.replay_table``'s replays, one by one, seed 0
    unless named): on the Philly 600-job slice the three gangs held were 1-GPU jobs of ~890 h,
    held 48-121 rounds with a median 9-25 of 48 GPUs idle, fitting the idle GPUs in every one
    of those rounds; the openb window's 8-GPU priority-2 pod fitted them by GPU count in 16 %
    of its 1,125 held rounds. No view of the cluster's load separates the two: when that pod
    arrived (189.8 h) no other gang waited and its utilisation over the past 24 h was 0.56
    with a queue 10 % of the time, quieter than the slice at 312.9 h (0.38, queue 100 %); the
    burst it must not block came 36 h later. What differs is what would be left: the slice's
    jobs leave most of the cluster idle, the pod leaves a few GPUs. Without headroom (idle
    left >= others' demand) the slice was as without a budget (mean wait 6.4 min) but on
    seed 1 the pod found a whole node idle at 190.2 h and started (openb p95 5.8 h, as
    without a budget); with 1/8 of the GPUs as headroom, the same; with a quarter it waited
    until 442.9 h, and openb's p95 was 13-15 min on seeds 0-2."""
    resources = resource_names(rnd)
    if "gpu" not in resources:
        return over
    elig = Eligibility(rnd)
    free = _free(rnd, resources, elig.schedulable)
    idle = float(free[:, resources.index("gpu")].sum()) / MILLI
    others = sum(_min_gpus(g, terms) for g in rnd.pending if g.name not in over)
    everywhere = np.ones(len(free), dtype=np.bool_)
    out: dict[str, float] = {}
    for g in rnd.pending:
        if g.name not in over:
            continue
        spare = idle - _min_gpus(g, terms) >= others + IDLE_HEADROOM * cluster_gpus
        if spare and _place(rnd, g, _demand(g, terms.min_pods(g), resources, elig), free, everywhere) is not None:
            continue  # not contended: it takes idle GPUs no one else waits for
        out[g.name] = over[g.name]
    return out


def _held_back(g: PendingGang) -> PendingGang:
    term = MatchExpression(key=OVER_BUDGET_LABEL, operator="Exists")
    roles = [r.model_copy(update={"node_affinity": [*r.node_affinity, term]}) for r in g.roles]
    return g.model_copy(update={"roles": roles})


def _avoiding(g: PendingGang, holders: Sequence[str]) -> PendingGang:
    term = MatchExpression(key=RESERVED_LABEL, operator="NotIn", values=list(holders))
    roles = [r.model_copy(update={"node_affinity": [*r.node_affinity, term]}) for r in g.roles]
    return g.model_copy(update={"roles": roles})


# ----------------------------------------------------------------------------- reservations


def _reserve(
    rnd: Round, now: float, over: dict[str, float] | None = None, escalated: set[str] | None = None
) -> list[Reservation]:
    """Reservations for the blocked gangs, highest priority then longest waiting first (none
    for a gang the committed GPU-time budget holds back: ``over``)."""
    settings = rnd.policy.lookahead
    releases = _releases(rnd)
    if not releases:
        return []  # no running gang has an expected end: nothing frees up at a known time
    resources = resource_names(rnd)
    elig = Eligibility(rnd)
    free = _free(rnd, resources, elig.schedulable)
    terms = ObjectiveTerms.of(rnd)
    timeline = _Timeline.of(releases)
    held = np.zeros(len(rnd.cluster.nodes), dtype=np.bool_)
    out: list[Reservation] = []
    up = escalated or set()

    def key(g: PendingGang) -> tuple[bool, int, float, float, str]:
        if g.name in up:  # escalated: before the rest, in escalated_order, then oldest
            return (False, 0, _escalated_rank(g, now, settings), g.submit_time, g.name)
        return (True, -g.priority, 0.0, g.submit_time, g.name)

    for g in sorted(rnd.pending, key=key):
        if len(out) >= settings.reservations:
            break
        if over and g.name in over:
            continue
        if g.group is not None or (g.topology is not None and g.topology.slice_level is not None):
            continue  # groups and slices start on terms this sketch of a placement does not know
        if now - g.submit_time < settings.reserve_after:
            continue
        demand = _demand(g, terms.min_pods(g), resources, elig)
        open_ = ~held
        rows_now = _place(rnd, g, demand, free, open_)
        if rows_now is not None and g.name not in up:
            continue  # fits now: the round decides it
        # an escalated gang that fits now keeps that room: otherwise same-tier work of equal
        # value takes it in the very round it frees up
        found = (now, rows_now) if rows_now is not None else _earliest(rnd, g, demand, free, open_, timeline)
        if found is not None:
            t, rows_used = found
            held[rows_used] = True
            names = tuple(rnd.cluster.nodes[i].name for i in rows_used.tolist())
            start = max(t, now)
            out.append(Reservation(g.name, g.priority, start, names, escalated=g.name in up))
    return out


def _escalated_rank(g: PendingGang, now: float, settings: LookAhead) -> float:
    """Sort key of an escalated gang in ``escalated_order`` (smaller first); a gang without an
    ``expected_duration`` goes last under ``shortest`` and ``response_ratio``.

    ``response_ratio`` is (wait + d) / d, highest first, with d the ``expected_duration``
    capped at ``escalated_ratio_cap``: the shortest first among gangs that waited alike, but a
    long gang's ratio grows with its wait, so a stream of shorter ones cannot pass it for ever;
    the cap makes it grow at least 1 per cap of wait, and among gangs that would all run longer
    than the cap the oldest goes first. Measured on b436b2 (seed 0, with
    ``escalated_holds_higher``; docs/objective.md look-ahead step 5): shortest first left a
    91-hour 16-GPU gang waiting 424 h behind later, shorter ones (largest-class p95 wait 274 h);
    oldest first served it but made later arrivals wait 247-314 h (p95 247 h, overall p95 wait
    12.5 h); response ratio uncapped: 226 h, but a 475-hour gang waited 226 h behind a 320-hour
    one that arrived 11 h after it (overall p95 wait 6.3 h); capped at 120 h: 215 h (p95 wait
    3.2 h)."""
    if settings.escalated_order == "oldest":
        return g.submit_time
    d = g.expected_duration
    if d is None or d <= 0:
        return float("inf") if d is None else float("-inf")
    if settings.escalated_order == "shortest":
        return d
    if settings.escalated_ratio_cap is not None:
        d = min(d, settings.escalated_ratio_cap)
    return -(now - g.submit_time + d) / d


@dataclass(frozen=True)
class _Timeline:
    """The running pods with an expected end, sorted by it: ``free + released(k)`` is the free
    room once the first ``k`` end times have passed."""

    times: list[float]
    cut: list[int]
    """Per end time, how many pods (in order) have ended by then."""
    nodes: IndexArray
    rows: IntArray

    @classmethod
    def of(cls, releases: dict[float, list[tuple[IndexArray, IntArray]]]) -> _Timeline:
        times = sorted(releases)
        nodes, rows, cut = [], [], []
        total = 0
        for t in times:
            for n, r in releases[t]:
                nodes.append(n)
                rows.append(r)
                total += len(n)
            cut.append(total)
        return cls(times, cut, np.concatenate(nodes), np.concatenate(rows))

    def free_after(self, free: IntArray, k: int) -> IntArray:
        """The free room once the first ``k + 1`` end times have passed."""
        out = free.copy()
        n = self.cut[k]
        np.add.at(out, self.nodes[:n], self.rows[:n])
        return out


def _earliest(
    rnd: Round, g: PendingGang, demand: Demand, free: IntArray, open_: BoolArray, timeline: _Timeline
) -> tuple[float, IndexArray] | None:
    """The first end time after which the gang's minimum fits on ``open_`` nodes, and where.
    Room only grows as gangs end, so a binary search over the end times finds it: a few
    placements per gang instead of one per end time (thousands on a busy cluster)."""
    lo, hi = 0, len(timeline.times) - 1
    best: tuple[float, IndexArray] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        rows = _place(rnd, g, demand, timeline.free_after(free, mid), open_)
        if rows is None:
            lo = mid + 1
        else:
            best = (timeline.times[mid], rows)
            hi = mid - 1
    return best


def _releases(rnd: Round) -> dict[float, list[tuple[IndexArray, IntArray]]]:
    """Per expected end, the nodes and requests of the pods that end then."""
    resources = resource_names(rnd)
    index = node_index(rnd)
    out: dict[float, list[tuple[IndexArray, IntArray]]] = defaultdict(list)
    for g in rnd.running:
        if g.expected_end is not None:
            out[g.expected_end].append(pod_rows(g, resources, index))
    return dict(out)


def _free(rnd: Round, resources: list[str], schedulable: BoolArray) -> IntArray:
    free = np.ascontiguousarray(free_capacity(rnd, resources))
    free[~schedulable] = 0
    return free


Demand = list[tuple[IntArray, BoolArray, int]]
"""Per role of a gang's minimum: request vector, eligible nodes, pods."""


def _demand(g: PendingGang, pods: dict[str, int], resources: list[str], elig: Eligibility) -> Demand:
    roles: dict[str, Role] = {r.name: r for r in g.roles}
    return [
        (request_vector(roles[name].requests, resources), elig.mask(roles[name]), n)
        for name, n in pods.items()
        if n > 0
    ]


def _place(rnd: Round, g: PendingGang, demand: Demand, free: IntArray, open_: BoolArray) -> IndexArray | None:
    """Rows a first-fit placement of the gang's minimum uses on ``free`` (not modified), within
    one domain of its required level if it has one; None if it does not fit."""
    level = g.topology.required if g.topology is not None else None
    if level is None:
        return _fit(demand, free, open_)
    codes, names = domain_codes(rnd, level)
    for members in domain_members(codes, len(names)):
        inside = np.zeros(len(open_), dtype=np.bool_)
        inside[members] = True
        rows = _fit(demand, free, open_ & inside)
        if rows is not None:
            return rows
    return None


def _fit(demand: Demand, free: IntArray, allowed: BoolArray) -> IndexArray | None:
    work = free.copy()
    used: list[IndexArray] = []
    for request, mask, count in demand:
        placed = first_fit(work, np.flatnonzero(mask & allowed).astype(np.intp), request, count)
        if placed is None:
            return None
        used.append(placed[0])
    return np.unique(np.concatenate(used)) if used else np.zeros(0, dtype=np.intp)
