"""Whom a gang may preempt: the optimizer side's one reading of the queues' preemption policies.

Rule 5 of docs/rules.md says who may preempt whom (:class:`gangopt.schema.QueuePreemption`, the
preemptor's queue decides). The validator keeps its own reading (``gangopt/validation.py``);
the solvers read it here:

* :meth:`Scope.static` — licences that hold whatever the plan does: the victim's own queue
  (``within_queue``) and any other queue (``other_queues``), both for strictly lower
  priorities only. CP-SAT's model uses only these (its model has no per-queue state to read
  a reclaim licence from), so its plans are valid under every policy.
* :meth:`Scope.reclaims` — the cohort licences (``reclaim_within_cohort``,
  ``borrow_within_cohort``), which depend on the queues' usage: the victim's queue must be
  above its nominal with the victim's lost pods back, on a resource they request, and the
  preemptor's queue within its nominal (else it borrows). The greedy engine and the peers
  read them on their running state; :func:`reclaims_hold` re-reads them on a finished plan,
  since a later decision of the same round can change either queue's usage.

Under the default policies every licence is "strictly higher priority", exactly the rule
before queue policies existed (:attr:`Scope.plain` lets callers keep their priority-only
fast paths then).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from gangopt.schema import GangSpec, Plan, Queue, QueuePreemption, Round

DEFAULT_POLICY = QueuePreemption()


class Scope:
    """The preemption policies of one round (see the module docstring)."""

    def __init__(self, rnd: Round) -> None:
        self.rnd = rnd
        self.queues: dict[str, Queue] = {q.name: q for q in rnd.queues}
        self.plain = all(q.preemption == DEFAULT_POLICY for q in rnd.queues)
        """Every queue keeps the default policy: may preempt = strictly higher priority."""
        cohorts: dict[str, int] = defaultdict(int)
        for q in rnd.queues:
            if q.cohort is not None:
                cohorts[q.cohort] += 1
        self.beyond_priority = any(
            q.preemption.reclaim_within_cohort == "any" and q.cohort is not None and cohorts[q.cohort] > 1
            for q in rnd.queues
        )
        """Some queue may reclaim at equal or higher priority: plans may then preempt outside the
        priority order, which CP-SAT's model and the priority-based bounds do not see."""

    def policy(self, queue: str) -> QueuePreemption:
        spec = self.queues.get(queue)
        return spec.preemption if spec is not None else DEFAULT_POLICY

    def static(self, gang: GangSpec, victim: GangSpec) -> bool:
        """Whether ``gang`` may preempt ``victim`` whatever the queues' usage."""
        if gang.priority <= victim.priority:
            return False
        policy = self.policy(gang.queue)
        if gang.queue == victim.queue:
            return policy.within_queue == "lower_priority"
        return policy.other_queues == "lower_priority"

    def cohort_mates(self, queue: str, other: str) -> bool:
        """Two different declared queues of one cohort."""
        a, b = self.queues.get(queue), self.queues.get(other)
        return queue != other and a is not None and b is not None and a.cohort is not None and a.cohort == b.cohort

    def reclaims(self, gang: GangSpec, victim: GangSpec, borrowing_with: bool, within_nominal: bool) -> bool:
        """Whether ``gang`` may preempt ``victim`` of another queue of its cohort, given whether the
        victim's queue is above its nominal with the victim's lost pods back (``borrowing_with``)
        and whether ``gang``'s queue stays within its nominal (``within_nominal``)."""
        if not borrowing_with or not self.cohort_mates(gang.queue, victim.queue):
            return False
        policy = self.policy(gang.queue)
        higher = gang.priority > victim.priority
        if within_nominal:
            rule = policy.reclaim_within_cohort
            return rule == "any" or (rule == "lower_priority" and higher)
        borrow = policy.borrow_within_cohort
        threshold = borrow.max_priority_threshold
        return (
            policy.reclaim_within_cohort != "never"
            and borrow.policy == "lower_priority"
            and higher
            and (threshold is None or victim.priority <= threshold)
        )

    def needs_state(self, gang: GangSpec, victim: GangSpec) -> bool:
        """Whether a cohort licence could add to :meth:`static` for this pair (else the static
        answer is final)."""
        return not self.static(gang, victim) and self.cohort_mates(gang.queue, victim.queue)


def above_nominal(queue: Queue, usage: Mapping[str, int], extra: Mapping[str, int]) -> bool:
    """Whether ``usage + extra`` of ``queue`` is above its nominal on a resource ``extra`` (the
    victim's lost pods) requests."""
    return any(usage.get(r, 0) + a > queue.nominal[r] for r, a in extra.items() if r in queue.nominal)


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


def licences_after(rnd: Round, plan: Plan, scope: Scope | None = None) -> dict[tuple[str, str], bool]:
    """Per ``(gang, victim)``: a preemption's victim and each gang it is for or that gets new pods
    on a node the victim left, whether the gang may preempt the victim on the cluster after
    the plan (:meth:`Scope.static`, else :meth:`Scope.reclaims`)."""
    scope = scope or Scope(rnd)
    specs: dict[str, GangSpec] = {g.name: g for g in [*rnd.pending, *rnd.running]}
    running = {g.name: g for g in rnd.running}
    requests = {(g.name, r.name): r.requests for g in specs.values() for r in g.roles}
    after: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    removed = {pod for p in plan.preemptions for pod in p.pods}
    for g in rnd.running:
        for pod in g.pods:
            if pod.name not in removed:
                for r, a in requests[(g.name, pod.role)].items():
                    after[g.queue][r] += a
    on_node: dict[str, set[str]] = defaultdict(set)
    for p in plan.placements:
        on_node[p.node].add(p.gang)
        for r, a in requests[(p.gang, p.role)].items():
            after[specs[p.gang].queue][r] += a
    out: dict[tuple[str, str], bool] = {}
    for pre in plan.preemptions:
        victim = running[pre.gang]
        gone = set(pre.pods)
        lost: dict[str, int] = defaultdict(int)
        for pod in victim.pods:
            if pod.name in gone:
                for r, a in requests[(victim.name, pod.role)].items():
                    lost[r] += a
        users = set(pre.for_gangs) | {g for pod in victim.pods if pod.name in gone for g in on_node[pod.node]}
        for name in sorted(users):
            gang = specs[name]
            if scope.static(gang, victim):
                out[(name, victim.name)] = True
                continue
            theirs = scope.queues.get(victim.queue)
            borrowing = theirs is not None and above_nominal(theirs, after[victim.queue], lost)
            within = within_nominal(scope.queues.get(gang.queue), after[gang.queue])
            out[(name, victim.name)] = scope.reclaims(gang, victim, borrowing, within)
    return out
