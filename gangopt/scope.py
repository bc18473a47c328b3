"""Whom a gang may preempt: the optimizer side's one reading of the queues' preemption policies.

Rule 5 of docs/rules.md says who may preempt whom (:class:`gangopt.schema.QueuePreemption`, the
preemptor's queue decides). The validator keeps its own reading (``gangopt/validation.py``);
the solvers read it here:

* :meth:`Scope.static` — licences that hold whatever the plan does: the victim's own queue
  (``within_queue``) and any other queue (``other_queues``), both for strictly lower
  priorities only.
* :meth:`Scope.reclaims` — the cohort licences (``reclaim_within_cohort``,
  ``borrow_within_cohort``), which depend on the queues' usage: the victim's queue must be
  above its nominal with the victim's lost pods back, on a resource they request, and the
  preemptor's queue within its nominal (else it borrows). The greedy engine and the peers
  read them on their running state; :func:`reclaims_hold` re-reads them on a finished plan,
  since a later decision of the same round can change either queue's usage. CP-SAT's model
  reads :meth:`Scope.reclaim_needs` (the usage a pair's reclaim needs) and
  :meth:`Scope.quota_paths` (the cohort quotas it reads on the way) and encodes that usage as
  constraints on its own variables; its expansion reads :class:`After`.

Under the default policies every licence is "strictly higher priority", exactly the rule
before queue policies existed (:attr:`Scope.plain` lets callers keep their priority-only
fast paths then).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Literal

from gangopt.quota_tree import CohortTree
from gangopt.schema import GangSpec, Plan, Queue, QueuePreemption, Round, RunningGang

DEFAULT_POLICY = QueuePreemption()

ReclaimNeeds = Literal["never", "within_nominal", "borrowing", "own_nominal"]
"""What a licence beyond :meth:`Scope.static` needs of the usage after the plan (see
:meth:`Scope.reclaim_needs`)."""
NEWER = "lower_or_newer_equal_priority"


def newer(victim: GangSpec, gang: GangSpec) -> bool:
    """Whether running ``victim`` was submitted after ``gang`` (a running gang without
    ``submit_time`` is newer than no one; a running preemptor without one is older than no one)."""
    mine = getattr(gang, "submit_time", None)
    theirs = getattr(victim, "submit_time", None)
    return mine is not None and theirs is not None and theirs > mine


class Scope:
    """The preemption policies of one round (see the module docstring)."""

    def __init__(self, rnd: Round) -> None:
        self.rnd = rnd
        self.queues: dict[str, Queue] = {q.name: q for q in rnd.queues}
        self.plain = all(q.preemption == DEFAULT_POLICY for q in rnd.queues)
        """Every queue keeps the default policy: may preempt = strictly higher priority."""
        self.root = rnd.cohort_roots
        """Per queue, the root of its cohort tree: the cohort its reclaims run over."""
        cohorts: dict[str, int] = defaultdict(int)
        for root in self.root.values():
            if root is not None:
                cohorts[root] += 1
        self.beyond_priority = any(
            (q.preemption.reclaim_within_cohort == "any" and cohorts[self.root[q.name] or ""] > 1)
            or q.preemption.within_queue == NEWER
            for q in rnd.queues
        )
        """Some queue may reclaim at equal or higher priority, or preempt newer gangs of equal
        priority: plans may then preempt outside the priority order, which the priority-based
        cheap bounds do not see."""
        self.tree = CohortTree(rnd) if any(c.nominal for c in rnd.cohorts) else None
        """The cohort trees when some cohort holds quota: its subtree's guarantee then counts
        in the cohort reclaims too (:meth:`borrowing_with`, :meth:`within_guarantee`)."""

    def policy(self, queue: str) -> QueuePreemption:
        spec = self.queues.get(queue)
        return spec.preemption if spec is not None else DEFAULT_POLICY

    def static(self, gang: GangSpec, victim: GangSpec) -> bool:
        """Whether ``gang`` may preempt ``victim`` whatever the queues' usage."""
        if gang.priority <= victim.priority:
            return False
        policy = self.policy(gang.queue)
        if gang.queue == victim.queue:
            return policy.within_queue != "never"
        return policy.other_queues == "lower_priority"

    def cohort_mates(self, queue: str, other: str) -> bool:
        """Two different declared queues of one cohort tree."""
        a, b = self.root.get(queue), self.root.get(other)
        return queue != other and a is not None and a == b

    def reclaims(self, gang: GangSpec, victim: GangSpec, borrowing_with: bool, within_nominal: bool) -> bool:
        """Whether ``gang`` may preempt ``victim`` of another queue of its cohort (or a newer
        victim of its own queue, see :meth:`reclaim_needs`), given whether the victim's queue is
        above its nominal with the victim's lost pods back (``borrowing_with``) and whether
        ``gang``'s queue stays within its nominal (``within_nominal``)."""
        needs = self.reclaim_needs(gang, victim)
        if needs == "own_nominal":
            return within_nominal
        return borrowing_with and (needs == "borrowing" or (needs == "within_nominal" and within_nominal))

    def reclaim_needs(self, gang: GangSpec, victim: GangSpec) -> ReclaimNeeds:
        """The usage a cohort reclaim of ``victim`` by ``gang`` needs: ``"never"`` (no usage
        licenses it), ``"within_nominal"`` (the victim's queue borrowing with the victim and
        ``gang``'s queue within its nominal) or ``"borrowing"`` (the victim's queue borrowing
        with the victim, whatever ``gang``'s queue uses: the ``borrow_within_cohort`` licence,
        which implies the ``reclaim_within_cohort`` one), or ``"own_nominal"`` (a newer gang of
        equal priority in ``gang``'s own queue under ``within_queue``
        ``lower_or_newer_equal_priority``: the queue within its nominal). The part of
        :meth:`reclaims` that does not depend on the plan, which CP-SAT's model turns into
        constraints."""
        if gang.queue == victim.queue:
            equal = gang.priority == victim.priority
            if equal and self.policy(gang.queue).within_queue == NEWER and newer(victim, gang):
                return "own_nominal"
            return "never"
        if not self.cohort_mates(gang.queue, victim.queue) or not self.queues[victim.queue].reclaimable:
            return "never"
        policy = self.policy(gang.queue)
        higher = gang.priority > victim.priority
        rule = policy.reclaim_within_cohort
        if not (rule == "any" or (rule == "lower_priority" and higher)):
            return "never"
        borrow = policy.borrow_within_cohort
        threshold = borrow.max_priority_threshold
        if borrow.policy == "lower_priority" and higher and (threshold is None or victim.priority <= threshold):
            return "borrowing"
        return "within_nominal"

    def quota_paths(self, mine: str, theirs: str) -> tuple[list[str], list[str]]:
        """The cohorts holding quota (listing a ``nominal`` of their own) from each queue up to,
        not including, their lowest common cohort: the cohorts whose quota a cohort reclaim
        between the two reads (empty when no cohort holds quota). CP-SAT's model encodes the
        same reading (``_borrowing`` and ``_within_guarantee`` in its encoding)."""
        a, b = self.queues[mine].cohort, self.queues[theirs].cohort
        if self.tree is None or a is None or b is None or not self.cohort_mates(mine, theirs):
            return [], []
        path_a, path_b = self.tree.below_common(a, b)
        spec = self.tree.spec
        return [c for c in path_a if spec[c].nominal], [c for c in path_b if spec[c].nominal]

    def borrowing_with(
        self, gang: GangSpec, victim: GangSpec, usage: Mapping[str, Mapping[str, int]], lost: Mapping[str, int]
    ) -> bool:
        """Whether ``victim``'s queue is above its nominal with ``lost`` (the victim's lost
        pods) back on a resource they request, and on that resource every cohort holding it
        between the queue and the lowest cohort it shares with ``gang``'s queue is above its
        quota too (a cohort's own quota guarantees its subtree)."""
        theirs = self.queues.get(victim.queue)
        if theirs is None:
            return False
        now = usage.get(victim.queue, {})
        over = [r for r, a in lost.items() if r in theirs.nominal and now.get(r, 0) + a > theirs.nominal[r]]
        if not over or victim.queue not in self.queues or gang.queue not in self.queues:
            return bool(over)
        _, path = self.quota_paths(gang.queue, victim.queue)
        if not path or self.tree is None:
            return bool(over)
        tree = self.tree
        for r in over:
            back = {q: {r: u.get(r, 0) + (lost[r] if q == victim.queue else 0)} for q, u in usage.items()}
            back.setdefault(victim.queue, {r: lost[r]})
            if all(tree.usage(c, r, back) > tree.quota(c, r) for c in path if r in tree.spec[c].nominal):
                return True
        return False

    def within_guarantee(self, gang: GangSpec, victim: GangSpec, usage: Mapping[str, Mapping[str, int]]) -> bool:
        """Whether ``gang``'s queue ends within its nominal, or some cohort holding quota between
        it and the lowest cohort it shares with ``victim``'s queue ends within its quota on every
        resource it holds that its subtree limits (within its guarantee at that level)."""
        if within_nominal(self.queues.get(gang.queue), usage.get(gang.queue, {})):
            return True
        if gang.queue not in self.queues or victim.queue not in self.queues:
            return False
        path, _ = self.quota_paths(gang.queue, victim.queue)
        tree = self.tree
        for c in path:
            assert tree is not None
            held = [r for r in sorted(tree.spec[c].nominal) if tree.limited(c, r)]
            if held and all(tree.usage(c, r, usage) <= tree.quota(c, r) for r in held):
                return True
        return False

    def needs_state(self, gang: GangSpec, victim: GangSpec) -> bool:
        """Whether a cohort licence could add to :meth:`static` for this pair (else the static
        answer is final)."""
        return not self.static(gang, victim) and self.reclaim_needs(gang, victim) != "never"


def within_nominal(queue: Queue | None, usage: Mapping[str, int]) -> bool:
    """Whether ``queue``'s usage is within its nominal on every resource it lists."""
    if queue is None:
        return True
    return all(usage.get(r, 0) <= nominal for r, nominal in queue.nominal.items())


def reclaims_hold(rnd: Round, plan: Plan, scope: Scope | None = None) -> bool:
    """Whether every gang that a preemption of ``plan`` is for, or that gets new pods on a node a
    victim left, may preempt that victim, read on the cluster after the plan. The greedy engine
    decides reclaims on its running state; this re-reads them on the finished plan."""
    scope = scope or Scope(rnd)
    if scope.plain or not plan.preemptions:
        return True
    return all(licences_after(rnd, plan, scope).values())


class After:
    """The cluster after a decision (running pods ``removed`` by name, ``new_pods`` as
    ``(gang, role)``): per queue the requests of kept and new pods, on which rule 5's licences
    are read. :func:`licences_after` reads a finished plan with it; CP-SAT's expansion reads its
    decision with it while it repairs (reprieves) the decision."""

    def __init__(
        self, rnd: Round, removed: Iterable[str], new_pods: Iterable[tuple[str, str]], scope: Scope | None = None
    ) -> None:
        self.scope = scope or Scope(rnd)
        self.specs: dict[str, GangSpec] = {g.name: g for g in [*rnd.pending, *rnd.running]}
        self.requests = {(g.name, r.name): r.requests for g in self.specs.values() for r in g.roles}
        self.usage: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        gone = set(removed)
        for g in rnd.running:
            for pod in g.pods:
                if pod.name not in gone:
                    for r, a in self.requests[(g.name, pod.role)].items():
                        self.usage[g.queue][r] += a
        for gang, role in new_pods:
            for r, a in self.requests[(gang, role)].items():
                self.usage[self.specs[gang].queue][r] += a

    def may(self, gang: GangSpec, victim: RunningGang, lost_pods: set[str]) -> bool:
        """Whether ``gang`` may preempt ``victim``, which loses ``lost_pods``, on this cluster
        (:meth:`Scope.static`, else :meth:`Scope.reclaims`)."""
        scope = self.scope
        if scope.static(gang, victim):
            return True
        if scope.reclaim_needs(gang, victim) == "never":
            return False
        lost: dict[str, int] = defaultdict(int)
        for pod in victim.pods:
            if pod.name in lost_pods:
                for r, a in self.requests[(victim.name, pod.role)].items():
                    lost[r] += a
        borrowing = scope.borrowing_with(gang, victim, self.usage, lost)
        within = scope.within_guarantee(gang, victim, self.usage)
        return scope.reclaims(gang, victim, borrowing, within)


def licences_after(rnd: Round, plan: Plan, scope: Scope | None = None) -> dict[tuple[str, str], bool]:
    """Per ``(gang, victim)``: a preemption's victim and each gang it is for or that gets new pods
    on a node the victim left, whether the gang may preempt the victim on the cluster after
    the plan (:meth:`Scope.static`, else :meth:`Scope.reclaims`)."""
    removed = [pod for p in plan.preemptions for pod in p.pods]
    after = After(rnd, removed, [(p.gang, p.role) for p in plan.placements], scope)
    running = {g.name: g for g in rnd.running}
    on_node: dict[str, set[str]] = defaultdict(set)
    for p in plan.placements:
        on_node[p.node].add(p.gang)
    out: dict[tuple[str, str], bool] = {}
    for pre in plan.preemptions:
        victim = running[pre.gang]
        gone = set(pre.pods)
        users = set(pre.for_gangs) | {g for pod in victim.pods if pod.name in gone for g in on_node[pod.node]}
        for name in sorted(users):
            out[(name, victim.name)] = after.may(after.specs[name], victim, gone)
    return out
