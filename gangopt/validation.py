"""Independent plan validator: does a plan keep every rule of docs/plan-semantics.md?

This module deliberately shares no code with the encoder. It recomputes, in plain Python
over the round and the plan (numpy only to add up the requests per node), what the cluster
looks like after the plan (kept running pods plus new pods) and checks each rule on that
picture. A solver that mis-encodes a rule then
produces a plan this module rejects, instead of two copies of one bug agreeing with each other.

Rules (see docs/rules.md for the peer-scheduler bug behind each one):
``all_or_nothing``, ``capacity``, ``eligibility``, ``topology``, ``preemption``, ``quota``,
``stability`` and ``consistency`` (names in the plan refer to the round and agree with each other).

Every message names the gang, node, pod and resource concretely, so a failing plan can be
debugged from the message alone.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import combinations, islice
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from gangopt.gcpause import fewer_collections
from gangopt.quantities import format_quantity
from gangopt.schema import (
    NODE_LEVEL,
    BoundPod,
    MatchExpression,
    Node,
    PendingGang,
    Placement,
    Plan,
    Preemption,
    Queue,
    QueuePreemption,
    Role,
    Round,
    RunningGang,
    Taint,
    Toleration,
    TopologyRequest,
)

Gang = PendingGang | RunningGang
Amounts = Mapping[str, int]
"""Resource name -> milli-units."""

RULES = (
    "all_or_nothing",
    "capacity",
    "eligibility",
    "topology",
    "preemption",
    "quota",
    "stability",
    "consistency",
)
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""Taint effects that make a node ineligible; ``PreferNoSchedule`` is only a preference."""
MAX_SLICE_REPRIEVES = 2000
"""Most pod combinations tried when asking whether part of a sliced shrink was needless."""
_DEFAULT_POLICY = QueuePreemption()


@dataclass(frozen=True)
class Violation:
    """One broken rule."""

    rule: str
    message: str
    gang: str | None = None
    node: str | None = None


def validate(rnd: Round, plan: Plan) -> list[Violation]:
    """Every violation of the plan contract by ``plan`` for ``rnd`` (empty when valid).

    Checks run in the order of :data:`RULES`; each reports every problem it finds rather
    than stopping at the first, so one run lists all of a solver's mistakes. The whole is
    :func:`validate_decisions` then :func:`validate_waiting`: the door may run the first in a
    child beside the finisher, which writes only the second's part of the plan
    (:mod:`gangopt.beside`).

    The garbage collector runs less often meanwhile (:mod:`gangopt.gcpause`, as the CLI does
    around everything): the checks build many small containers and no cycles, and outside
    the CLI (a library caller, the benchmarks) they set off one full collection per
    validation of the fragmented XL round, 0.58 of its 1.7 CPU-s, walking every object of the
    round.
    """
    with fewer_collections():
        ctx = _Context(rnd, plan)  # one index of the round and plan for both parts
        return _decisions(ctx) + _waiting_list(ctx)


def validate_decisions(rnd: Round, plan: Plan) -> list[Violation]:
    """The violations by ``plan``'s decisions (admitted gangs, placements, preemptions,
    resizes): every rule, but for the waiting list's part of ``consistency``. What it reads of
    the plan no finisher changes, so it holds for every plan with the same decisions
    (:func:`same_decisions`); all but a few milliseconds of the validator (0.6 s of 77,300
    pods at 16,384 nodes)."""
    with fewer_collections():
        return _decisions(_Context(rnd, plan))


def _decisions(ctx: _Context) -> list[Violation]:
    """Every check of :data:`_CHECKS` on ``ctx``, in order (:func:`validate_decisions`)."""
    out: list[Violation] = []
    for check in _CHECKS:
        out.extend(check(ctx))
    return out


def validate_waiting(rnd: Round, plan: Plan) -> list[Violation]:
    """The violations by ``plan``'s waiting list (``consistency``): each pending gang admitted
    or waiting exactly once, every waiting gang with a reason. The part of the validator that
    reads what the finisher writes (:mod:`gangopt.annotate`), and the plan's pending gangs only."""
    return _waiting_list(_Context(rnd, plan))


def same_decisions(a: Plan, b: Plan) -> bool:
    """Whether two plans decide the same: admitted gangs, placements, preemptions and resizes
    (what :func:`validate_decisions` reads)."""
    return (
        a.admitted == b.admitted
        and a.placements == b.placements
        and a.preemptions == b.preemptions
        and a.resizes == b.resizes
    )


def _qty(milli: int, resource: str) -> str:
    """An exact amount in Kubernetes notation ("8", "500m", "64Gi"), for messages."""
    return format_quantity(milli, resource)


def _capacity(node: Node, resource: str) -> int:
    """The node's capacity of a resource in milli-units; a resource it does not list has none."""
    return node.capacity.get(resource, 0)


def _domain(node: Node, level: str) -> str:
    """The node's domain at ``level``; at the implicit level ``node`` that is the node itself."""
    return node.name if level == NODE_LEVEL else node.topology[level]


# ----------------------------------------------------------------------------- the picture after the plan


class _Context:
    """The round and the plan, indexed once, and the cluster state the plan leads to.

    Placements naming an unknown gang, role or node are reported by the consistency check
    and left out of everything else (they cannot be located); preemption entries are
    reduced to the pods that really belong to the named running gang.
    """

    def __init__(self, rnd: Round, plan: Plan) -> None:
        self.rnd = rnd
        self.plan = plan
        self.pending: dict[str, PendingGang] = {g.name: g for g in rnd.pending}
        self.admitted: set[str] = set(plan.admitted)  # other names there: see _admitted_list

    @cached_property
    def nodes(self) -> dict[str, Node]:
        """The round's nodes by name, built on first need: the check of the waiting list
        (:func:`validate_waiting`, which the door runs after the finisher) reads none, and at
        fragmented XL this index and :attr:`running`'s were most of its 0.03 s."""
        return {n.name: n for n in self.rnd.cluster.nodes}

    @cached_property
    def running(self) -> dict[str, RunningGang]:
        """The round's running gangs by name, built on first need (:attr:`nodes`)."""
        return {g.name: g for g in self.rnd.running}

    def gang(self, name: str) -> Gang | None:
        """The pending or running gang of that name, if any."""
        return self.pending.get(name) or self.running.get(name)

    def spec(self, placement: Placement) -> Gang:
        """The gang of a located placement (one of :attr:`new`)."""
        return self.pending.get(placement.gang) or self.running[placement.gang]

    def role(self, gang: str, role: str) -> Role | None:
        """The role of that name in that gang, if both exist."""
        return self.roles_of(gang).get(role)

    def roles_of(self, gang: str) -> dict[str, Role]:
        """The gang's roles by name (empty for an unknown gang; a running gang's when a name is
        both, as a round built without checks may have it), built on first need per gang: the
        checks look a role up for every new pod, while a map for every gang of the round was
        70,536 dictionaries at fragmented XL, most never read."""
        known = self._roles.get(gang)
        if known is None:
            spec: Gang | None = self.running.get(gang)
            spec = self.pending.get(gang) if spec is None else spec
            known = self._roles[gang] = {} if spec is None else {r.name: r for r in spec.roles}
        return known

    @cached_property
    def _roles(self) -> dict[str, dict[str, Role]]:
        """:meth:`roles_of`'s answers by gang name."""
        return {}

    @cached_property
    def new(self) -> list[Placement]:
        """Placements that can be located: known gang, role and node."""
        return [p for p in self.plan.placements if self.role(p.gang, p.role) is not None and p.node in self.nodes]

    @cached_property
    def new_by_gang(self) -> dict[str, list[Placement]]:
        out: dict[str, list[Placement]] = defaultdict(list)
        for p in self.new:
            out[p.gang].append(p)
        return out

    @cached_property
    def new_gangs_on_node(self) -> dict[str, list[str]]:
        """Per node, the gangs with new pods there (each once, in placement order)."""
        out: dict[str, dict[str, None]] = defaultdict(dict)
        for p in self.new:
            out[p.node][p.gang] = None
        return {node: list(gangs) for node, gangs in out.items()}

    @cached_property
    def removed(self) -> dict[str, set[str]]:
        """Per running gang, the names of its pods that the plan's preemptions remove."""
        out: dict[str, set[str]] = defaultdict(set)
        for pre in self.plan.preemptions:
            gang = self.running.get(pre.gang)
            if gang is None:
                continue
            own = {p.name for p in gang.pods}
            out[gang.name].update(pod for pod in pre.pods if pod in own)
        return out

    def kept(self, gang: RunningGang) -> list[BoundPod]:
        """Pods of a running gang that the plan leaves in place (do not modify: for the many
        gangs a plan leaves alone, this is the gang's own list)."""
        gone = self.removed.get(gang.name)
        if not gone:
            return gang.pods
        return [p for p in gang.pods if p.name not in gone]

    def untouched(self, gang: RunningGang) -> bool:
        """Whether the plan neither removes a pod of the running gang nor gives it a new one:
        its members are then its running pods, as the round has them (most gangs of a large
        round: 68,000 of the fragmented XL round's 68,536)."""
        return not self.removed.get(gang.name) and gang.name not in self.new_by_gang

    def lost(self, gang: RunningGang) -> list[BoundPod]:
        """Pods of a running gang that the plan removes."""
        gone = self.removed.get(gang.name)
        return [p for p in gang.pods if p.name in gone] if gone else []

    def evicted(self, gang: RunningGang) -> bool:
        """Whether the plan removes every pod of the running gang."""
        return not self.kept(gang)

    def requests(self, gang: str, role: str) -> Amounts:
        """Per-pod requests of a role; none for a running pod of a role its gang lacks (a round
        built without checks, as replays may)."""
        spec = self.role(gang, role)
        return spec.requests if spec is not None else {}

    def members(self, gang: Gang) -> Counter[str]:
        """Pods per role after the plan (roles without pods may be absent): new pods, plus
        kept pods for a running gang. Counted once per gang (do not modify): the checks ask for
        every running gang's twice or three times (the fragmented XL round: 68,536 gangs)."""
        known = self._members.get(gang.name)
        if known is not None and known[0] is gang:
            return known[1]
        pods: Sequence[BoundPod | Placement] = self.new_by_gang.get(gang.name, [])
        if isinstance(gang, RunningGang):
            pods = [*pods, *self.kept(gang)]
        count = Counter(p.role for p in pods)
        self._members[gang.name] = (gang, count)
        return count

    @cached_property
    def _members(self) -> dict[str, tuple[Gang, Counter[str]]]:
        """:meth:`members`' answers by gang name, with the gang asked about."""
        return {}

    def pod_nodes(self, gang: Gang) -> list[str]:
        """Node of every pod the gang has after the plan (kept and new)."""
        nodes = [p.node for p in self.new_by_gang.get(gang.name, [])]
        if isinstance(gang, RunningGang):
            nodes += [p.node for p in self.kept(gang)]
        return nodes

    @cached_property
    def pod_owner(self) -> dict[str, str]:
        """Each running pod's name -> its gang's name (the last gang, should two share a name):
        one pass over the running pods for rules 7 and the consistency check."""
        return {pod.name: g.name for g in self.rnd.running for pod in g.pods}

    @cached_property
    def node_row(self) -> dict[str, int]:
        """Each node's row in :attr:`usage`'s matrices (the cluster's order)."""
        return {name: i for i, name in enumerate(self.nodes)}

    @cached_property
    def usage(self) -> _Usage:
        """Requests per node and resource of the kept running pods and of the new pods, with the
        nodes' capacities: one matrix each, so that rule 2 compares them all at once. Every
        running pod passes here; the Python loop only notes its node's row and its role's
        requests (one key per distinct requests), numpy adds them up. On the fragmented XL round
        (73,956 running pods on 16,384 nodes) the per-node counters this replaces, added pod by
        pod, and the check over them took 0.24-0.33 of the validator's 0.5-0.8 CPU-s; now
        0.14-0.15 (the rule is unchanged: kept + new <= capacity, per node and resource)."""
        node_row = self.node_row
        keys: dict[tuple[tuple[str, int], ...], int] = {}
        kept_rows: list[int] = []
        kept_keys: list[int] = []
        for gang in self.rnd.running:
            pods = self.kept(gang)
            roles = gang.roles
            if len(roles) == 1:
                name = roles[0].name
                k = keys.setdefault(tuple(roles[0].requests.items()), len(keys))
                for pod in pods:
                    if pod.role == name:  # a pod of a role its gang lacks requests nothing
                        kept_rows.append(node_row.get(pod.node, -1))
                        kept_keys.append(k)
                continue
            by_name = {r.name: keys.setdefault(tuple(r.requests.items()), len(keys)) for r in roles}
            for pod in pods:
                k = by_name.get(pod.role, -1)
                if k >= 0:
                    kept_rows.append(node_row.get(pod.node, -1))
                    kept_keys.append(k)
        new_rows, new_keys = [], []
        for placement in self.new:  # located placements: known gang, role and node
            role = self.roles_of(placement.gang)[placement.role]
            new_rows.append(node_row[placement.node])
            new_keys.append(keys.setdefault(tuple(role.requests.items()), len(keys)))
        columns: dict[str, int] = {}
        for key in keys:
            for res, _ in key:
                columns.setdefault(res, len(columns))
        vectors = np.zeros((len(keys), len(columns)), dtype=np.int64)
        for key, k in keys.items():
            for res, amount in key:
                vectors[k, columns[res]] = amount
        capacity = np.array(
            [[node.capacity.get(res, 0) for res in columns] for node in self.nodes.values()], dtype=np.int64
        ).reshape(len(self.nodes), len(columns))
        return _Usage(
            columns,
            _summed(len(self.nodes), vectors, kept_rows, kept_keys),
            _summed(len(self.nodes), vectors, new_rows, new_keys),
            capacity,
        )

    @cached_property
    def new_by_priority(self) -> dict[int, tuple[dict[str, Counter[str]], dict[str, Counter[str]]]]:
        """Per priority, the requests of new pods of gangs of that priority, per node and per
        queue (what a victim of that priority or higher may not be evicted for)."""
        out: dict[int, tuple[dict[str, Counter[str]], dict[str, Counter[str]]]] = {}
        for p in self.new:
            spec = self.spec(p)
            nodes, queues = out.setdefault(spec.priority, (defaultdict(Counter), defaultdict(Counter)))
            amounts = self.requests(p.gang, p.role)
            nodes[p.node].update(amounts)
            queues[spec.queue].update(amounts)
        return out

    @cached_property
    def _up_to(self) -> dict[int, tuple[dict[str, Counter[str]], dict[str, Counter[str]]]]:
        """:meth:`new_up_to`'s answers by priority (read-only to its callers)."""
        return {}

    def new_up_to(self, priority: int) -> tuple[dict[str, Counter[str]], dict[str, Counter[str]]]:
        """Requests of new pods of gangs of ``priority`` or lower, per node and per queue; summed
        once per priority (the callers only read them): summed per victim, the validator took 0.95
        CPU-s on greedy's plan for the fragmented XL round (566 reprieve checks), 0.51 now."""
        known = self._up_to.get(priority)
        if known is None:
            known = self._up_to[priority] = self._sum_up_to(priority)
        return known

    def _sum_up_to(self, priority: int) -> tuple[dict[str, Counter[str]], dict[str, Counter[str]]]:
        nodes: dict[str, Counter[str]] = defaultdict(Counter)
        queues: dict[str, Counter[str]] = defaultdict(Counter)
        for prio, (by_node, by_queue) in self.new_by_priority.items():
            if prio <= priority:
                for name, amounts in by_node.items():
                    nodes[name].update(amounts)
                for name, amounts in by_queue.items():
                    queues[name].update(amounts)
        return nodes, queues

    def new_not_preempting(self, victim: RunningGang) -> tuple[dict[str, Counter[str]], dict[str, Counter[str]]]:
        """Requests of new pods of the gangs that may not preempt ``victim``, per node and per
        queue. Under the default policies that is every gang of the victim's priority or lower
        (read per priority, as before); otherwise gang by gang."""
        if self.default_policies:
            return self.new_up_to(victim.priority)
        nodes: dict[str, Counter[str]] = defaultdict(Counter)
        queues: dict[str, Counter[str]] = defaultdict(Counter)
        for name, pods in self.new_by_gang.items():
            spec = self.pending.get(name) or self.running[name]  # located placements' gangs
            if _may_not_preempt(self, spec, victim) is None:
                continue
            for p in pods:
                amounts = self.requests(p.gang, p.role)
                nodes[p.node].update(amounts)
                queues[spec.queue].update(amounts)
        return nodes, queues

    @cached_property
    def queues(self) -> dict[str, Queue]:
        return {q.name: q for q in self.rnd.queues}

    def queue_spec(self, name: str) -> Queue | None:
        return self.queues.get(name)

    def queue_policy(self, name: str) -> QueuePreemption:
        """The preemption policy of queue ``name``; the defaults for a queue the round does not declare."""
        queue = self.queues.get(name)
        return queue.preemption if queue is not None else _DEFAULT_POLICY

    @cached_property
    def default_policies(self) -> bool:
        """Whether every queue keeps the default preemption policy (then "may preempt" is
        "strictly higher priority")."""
        return all(q.preemption == _DEFAULT_POLICY for q in self.rnd.queues)

    @cached_property
    def queue_before(self) -> dict[str, Counter[str]]:
        """Per queue, the requests of all running pods before the plan."""
        out: dict[str, Counter[str]] = defaultdict(Counter)
        for gang in self.rnd.running:
            for pod in gang.pods:
                out[gang.queue].update(self.requests(gang.name, pod.role))
        return out

    @cached_property
    def queue_after(self) -> dict[str, Counter[str]]:
        """Per queue, the requests of kept running pods and new pods after the plan."""
        out: dict[str, Counter[str]] = defaultdict(Counter)
        for gang in self.rnd.running:
            for pod in self.kept(gang):
                out[gang.queue].update(self.requests(gang.name, pod.role))
        for p in self.new:
            out[self.spec(p).queue].update(self.requests(p.gang, p.role))
        return out


class _Usage(NamedTuple):
    """Requests and capacity per node (rows: the cluster's order) and resource (``columns``),
    in milli-units: :attr:`_Context.usage`."""

    columns: dict[str, int]
    kept: npt.NDArray[np.int64]
    """The running pods the plan keeps."""
    new: npt.NDArray[np.int64]
    """The plan's located new pods."""
    capacity: npt.NDArray[np.int64]


def _summed(nodes: int, vectors: npt.NDArray[np.int64], rows: list[int], keys: list[int]) -> npt.NDArray[np.int64]:
    """Per node, the sum of ``vectors[keys[i]]`` over the pods ``i`` on row ``rows[i]`` (rows
    of -1, nodes the round does not have, left out: the consistency check names them)."""
    out = np.zeros((nodes, vectors.shape[1]), dtype=np.int64)
    at, which = np.asarray(rows, dtype=np.int64), np.asarray(keys, dtype=np.int64)
    known = at >= 0
    np.add.at(out, at[known], vectors[which[known]])
    return out


# ----------------------------------------------------------------------------- rule 1: all_or_nothing


def _check_all_or_nothing(ctx: _Context) -> list[Violation]:
    """Partial gangs hold resources without running (Volcano #3373, scheduler-plugins #713):
    a gang runs with at least its minimum, per role too, or not at all."""
    out: list[Violation] = []
    for gang in ctx.rnd.pending:
        out += _pending_members(ctx, gang)
    out += _groups(ctx)
    removed, new = ctx.removed, ctx.new_by_gang
    for run in ctx.rnd.running:
        if run.pods and not removed.get(run.name) and run.name not in new and _one_role_within(run):
            continue  # untouched and within its bounds (:func:`_running_members`' first case, inline)
        out += _running_members(ctx, run)
    return out


def _pending_members(ctx: _Context, gang: PendingGang) -> list[Violation]:
    """An admitted gang starts between its minimum and maximum; an unadmitted one starts nothing."""
    count = ctx.members(gang)
    total = sum(count.values())
    if gang.name not in ctx.admitted:
        if total == 0:
            return []
        return [_v("all_or_nothing", f"gang {gang.name}: not admitted but has {total} new pods", gang.name)]
    out = _bounds(gang, count, f"admitted gang {gang.name}")
    return out


def _running_members(ctx: _Context, run: RunningGang) -> list[Violation]:
    """A running gang keeps 0 pods (evicted, and then gets no new ones) or stays within bounds."""
    if run.pods and ctx.untouched(run) and _one_role_within(run):
        return []  # not evicted: it keeps every pod
    if ctx.evicted(run):
        new = len(ctx.new_by_gang.get(run.name, []))
        if new == 0:
            return []
        return [_v("all_or_nothing", f"running gang {run.name}: evicted but gets {new} new pods", run.name)]
    return _bounds(run, ctx.members(run), f"running gang {run.name} after the plan")


def _one_role_within(run: RunningGang) -> bool:
    """Whether a running gang of one role, all of whose pods are of that role, is within its
    bounds as it runs (what :func:`_bounds` finds of its pods without counting them by role
    first: a counter per gang was 0.4 of the validator's 1.7 CPU-s on the fragmented XL round)."""
    roles = run.roles
    if len(roles) != 1:
        return False
    role = roles[0]
    name = role.name
    for pod in run.pods:
        if pod.role != name:
            return False
    n = len(run.pods)
    return run.minimum <= n <= run.maximum and run.role_minimum(role) <= n <= role.replicas


def _bounds(gang: Gang, count: Mapping[str, int], what: str) -> list[Violation]:
    """Member count against the gang-wide minimum/maximum and every role's minimum/replicas."""
    out: list[Violation] = []
    total = sum(count.values())
    if total < gang.minimum:
        out.append(_v("all_or_nothing", f"{what}: {total} pods < minimum {gang.minimum}", gang.name))
    if total > gang.maximum:
        out.append(_v("all_or_nothing", f"{what}: {total} pods > maximum {gang.maximum}", gang.name))
    for role in gang.roles:
        n, low = count.get(role.name, 0), gang.role_minimum(role)
        if n < low:
            out.append(_v("all_or_nothing", f"{what}: role {role.name} has {n} pods < role minimum {low}", gang.name))
        if n > role.replicas:
            out.append(
                _v("all_or_nothing", f"{what}: role {role.name} has {n} pods > replicas {role.replicas}", gang.name)
            )
    return out


def _groups(ctx: _Context) -> list[Violation]:
    """Gangs of one group start together or not at all (Koordinator #872 interleaving deadlock)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for gang in ctx.rnd.pending:
        if gang.group is not None:
            groups[gang.group].append(gang.name)
    out: list[Violation] = []
    for group, names in groups.items():
        started = [n for n in names if n in ctx.admitted]
        if started and len(started) < len(names):
            waiting = [n for n in names if n not in ctx.admitted]
            out.append(
                _v("all_or_nothing", f"group {group}: {', '.join(started)} admitted but {', '.join(waiting)} not")
            )
    return out


# ----------------------------------------------------------------------------- rule 2: capacity


def _check_capacity(ctx: _Context) -> list[Violation]:
    """No node is overcommitted (Kueue #14570 double-booked a node): kept + new <= capacity,
    every node and resource at once (:attr:`_Context.usage`), the messages for those over."""
    out: list[Violation] = []
    u = ctx.usage
    used = u.kept + u.new
    nodes = list(ctx.nodes.values())
    for row in np.flatnonzero((used > u.capacity).any(axis=1)).tolist():
        node = nodes[row]
        for res in sorted(u.columns):
            c = u.columns[res]
            kept, new, cap = int(u.kept[row, c]), int(u.new[row, c]), int(u.capacity[row, c])
            if kept + new > cap:
                used_here = kept + new
                out.append(
                    _v(
                        "capacity",
                        f"node {node.name}: {res} {_qty(used_here, res)} > capacity {_qty(cap, res)} "
                        f"(kept {_qty(kept, res)}, new {_qty(new, res)})",
                        node=node.name,
                    )
                )
    return out


# ----------------------------------------------------------------------------- rule 3: eligibility


def _check_eligibility(ctx: _Context) -> list[Violation]:
    """New pods only on nodes they may use: schedulable, selector, affinity, taints."""
    out: list[Violation] = []
    for p in ctx.new:
        role = ctx.role(p.gang, p.role)
        assert role is not None  # ctx.new holds located placements only
        for reason in ineligibility(ctx.nodes[p.node], role):
            out.append(_v("eligibility", f"pod {p.pod} of gang {p.gang} on node {p.node}: {reason}", p.gang, p.node))
    return out


def ineligibility(node: Node, role: Role) -> list[str]:
    """Why a pod of ``role`` may not be placed on ``node`` (empty when it may)."""
    reasons: list[str] = []
    if not node.schedulable:
        reasons.append("node is cordoned (schedulable=false)")
    for key, want in role.node_selector.items():
        if node.labels.get(key) != want:
            have = node.labels.get(key)
            reasons.append(
                f"node_selector {key}={want} but node has {key}={have}"
                if have is not None
                else f"node_selector {key}={want} but node has no label {key}"
            )
    for term in role.node_affinity:
        if not affinity_holds(term, node.labels):
            reasons.append(f"node_affinity {_term(term)} does not hold (node {term.key}={node.labels.get(term.key)})")
    for taint in node.taints:
        if taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in role.tolerations):
            reasons.append(f"taint {taint.key}={taint.value}:{taint.effect} is not tolerated")
    return reasons


def affinity_holds(term: MatchExpression, labels: Mapping[str, str]) -> bool:
    """Kubernetes node-affinity semantics: ``NotIn`` and ``DoesNotExist`` hold on absent labels."""
    value = labels.get(term.key)
    if term.operator == "In":
        return value is not None and value in term.values
    if term.operator == "NotIn":
        return value is None or value not in term.values
    if term.operator == "Exists":
        return value is not None
    return value is None  # DoesNotExist


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes ``ToleratesTaint``: an empty key matches every key (with ``Exists``, every
    taint), ``Exists`` matches any value, ``Equal`` the same value, no effect every effect."""
    if toleration.effect is not None and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def _term(term: MatchExpression) -> str:
    values = f" [{', '.join(term.values)}]" if term.values else ""
    return f"{term.key} {term.operator}{values}"


# ----------------------------------------------------------------------------- rule 4: topology


def _check_topology(ctx: _Context) -> list[Violation]:
    """Hard topology holds after the plan (Volcano #4533: preemptor spread across domains)."""
    out: list[Violation] = []
    gangs: list[Gang] = [*ctx.rnd.pending, *ctx.rnd.running]
    for gang in gangs:
        topo = gang.topology
        if topo is None or not _placement_changed(ctx, gang):
            continue
        nodes = [ctx.nodes[n] for n in ctx.pod_nodes(gang)]
        if topo.required is not None and ctx.new_by_gang.get(gang.name):
            out += _required_domain(gang, topo.required, nodes)
        if topo.slice_size is not None:
            out += _slices(gang, topo, nodes)
    return out


def _placement_changed(ctx: _Context, gang: Gang) -> bool:
    """Pending gangs with new pods; running gangs that grow or shrink (not evicted). A running
    gang the plan leaves alone is not blamed for how its input placement looks."""
    new = bool(ctx.new_by_gang.get(gang.name))
    if isinstance(gang, PendingGang):
        return new
    return not ctx.evicted(gang) and (new or bool(ctx.lost(gang)))


def _required_domain(gang: Gang, level: str, nodes: list[Node]) -> list[Violation]:
    """All pods of the gang in one domain of the required level (checked when the gang gets new pods)."""
    by_domain: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        by_domain[_domain(node, level)].append(node.name)
    if len(by_domain) <= 1:
        return []
    spread = "; ".join(f"{d}: {len(ns)} pods on {', '.join(sorted(set(ns)))}" for d, ns in sorted(by_domain.items()))
    return [
        _v(
            "topology",
            f"gang {gang.name}: required {level} but pods span {len(by_domain)} domains ({spread})",
            gang.name,
        )
    ]


def _slices(gang: Gang, topo: TopologyRequest, nodes: list[Node]) -> list[Violation]:
    """In every domain of the slice level, the gang's pod count is a multiple of the slice size."""
    level, size = topo.slice_level, topo.slice_size
    assert level is not None and size is not None  # they go together (Round checks it)
    count = Counter(_domain(n, level) for n in nodes)
    return [
        _v("topology", f"gang {gang.name}: {n} pods in {level} {d}, not a multiple of slice size {size}", gang.name)
        for d, n in sorted(count.items())
        if n % size
    ]


# ----------------------------------------------------------------------------- rule 5: preemption


def _check_preemption(ctx: _Context) -> list[Violation]:
    """Preemption is gang-aware, priority-ordered, local and necessary (Volcano #3595,
    Kueue #5243 / #13662): see :func:`_preemption_entry`."""
    out: list[Violation] = []
    for pre in ctx.plan.preemptions:
        victim = ctx.running.get(pre.gang)
        if victim is not None and ctx.lost(victim):
            out += _preemption_entry(ctx, pre, victim)
    return out


def _preemption_entry(ctx: _Context, pre: Preemption, victim: RunningGang) -> list[Violation]:
    """One victim: allowed by policy, preemptible, for strictly higher priorities, whose new
    pods land where the victim was, and not reprievable."""
    name, lost = victim.name, ctx.lost(victim)
    out: list[Violation] = []
    if not ctx.rnd.policy.preemption:
        out.append(_v("preemption", f"gang {name}: loses {len(lost)} pods but policy.preemption is false", name))
    if not victim.preemptible:
        out.append(_v("preemption", f"gang {name}: loses {len(lost)} pods but is not preemptible", name))
    out += _beneficiaries(ctx, pre, victim, lost)
    out += _freed_nodes_kept_for_higher(ctx, victim, lost)
    out += _reprieves(ctx, victim, lost)
    return out


def _beneficiaries(ctx: _Context, pre: Preemption, victim: RunningGang, lost: list[BoundPod]) -> list[Violation]:
    """Every gang in ``for_gangs`` outranks the victim and starts pods; one of them uses a victim node."""
    name = victim.name
    if not pre.for_gangs:
        return [_v("preemption", f"gang {name}: preempted for no gang (for_gangs is empty)", name)]
    out: list[Violation] = []
    for other in pre.for_gangs:
        spec = ctx.gang(other)
        if spec is None:
            continue  # reported by the consistency check
        refusal = _may_not_preempt(ctx, spec, victim)
        if refusal is not None:
            out.append(_v("preemption", f"gang {name} (priority {victim.priority}) preempted for {refusal}", name))
        if not ctx.new_by_gang.get(other):
            out.append(_v("preemption", f"gang {name}: preempted for gang {other}, which gets no new pods", name))
    victim_nodes = {p.node for p in lost}
    users = [o for o in pre.for_gangs if any(p.node in victim_nodes for p in ctx.new_by_gang.get(o, []))]
    if not users:
        out.append(
            _v(
                "preemption",
                f"gang {name}: none of {', '.join(pre.for_gangs)} has a new pod on its nodes "
                f"{', '.join(sorted(victim_nodes))}",
                name,
            )
        )
    return out


def _freed_nodes_kept_for_higher(ctx: _Context, victim: RunningGang, lost: list[BoundPod]) -> list[Violation]:
    """A node that loses pods of the victim receives new pods only from gangs that may preempt
    it (strictly higher priority, or reclaiming nominal quota): otherwise a higher-priority pod
    landing there would license evicting running work to start (or grow) work of the victim's
    own priority, which no peer scheduler allows."""
    out: list[Violation] = []
    for node in sorted({p.node for p in lost}):
        for other in ctx.new_gangs_on_node.get(node, []):
            spec = ctx.pending.get(other) or ctx.running[other]  # a located placement's gang
            refusal = _may_not_preempt(ctx, spec, victim, f"gang {other} (priority {spec.priority})")
            if refusal is None:
                continue
            out.append(
                _v(
                    "preemption",
                    f"node {node} loses pods of gang {victim.name} (priority {victim.priority}) but receives "
                    f"new pods of {refusal}",
                    victim.name,
                    node,
                )
            )
    return out


def _newer_equal_refusal(ctx: _Context, gang: Gang, victim: RunningGang, what: str) -> str | None:
    """Rule 5, clause 1 under ``within_queue: lower_or_newer_equal_priority``: an equal-priority
    victim of the own queue submitted strictly later than ``gang``, while the queue ends within
    its nominal on every resource it lists (Kueue: the preemptor fits in the nominal quota)."""
    mine = getattr(gang, "submit_time", None)
    if mine is None or victim.submit_time is None or not victim.submit_time > mine:
        return f"{what}, of equal priority but not submitted before the victim (submit_time)"
    queue = ctx.queue_spec(gang.queue)
    after = ctx.queue_after.get(gang.queue, Counter())
    over = sorted(r for r, nominal in (queue.nominal.items() if queue else []) if after[r] > nominal)
    if over:
        return f"{what}, of equal priority, but queue {gang.queue} ends above its nominal on {', '.join(over)}"
    return None


def _may_not_preempt(ctx: _Context, gang: Gang, victim: RunningGang, what: str = "") -> str | None:
    """Why ``gang`` may not preempt ``victim`` under the preemption policy of ``gang``'s queue
    (docs/rules.md, rule 5), or None if it may; the answer starts with ``what`` (the gang).
    Read on the cluster after the plan."""
    what = what or f"gang {gang.name} of priority {gang.priority}"
    policy = ctx.queue_policy(gang.queue)
    higher = gang.priority > victim.priority
    if gang.queue == victim.queue:
        if policy.within_queue == "never":
            return f"{what} of its own queue {gang.queue}, whose policy within_queue is never"
        if higher:
            return None
        if policy.within_queue != "lower_or_newer_equal_priority" or gang.priority != victim.priority:
            return f"{what}, not strictly higher"
        return _newer_equal_refusal(ctx, gang, victim, what)
    if higher and policy.other_queues == "lower_priority":
        return None
    mine, theirs = ctx.queue_spec(gang.queue), ctx.queue_spec(victim.queue)
    roots = [_tree_root(ctx.rnd, q.cohort) if q is not None and q.cohort is not None else None for q in (mine, theirs)]
    if roots[0] is None or roots[0] != roots[1]:
        theirs = None
    if theirs is not None and not theirs.reclaimable:
        return f"{what} of queue {gang.queue}, but queue {victim.queue} is not reclaimable (reclaimable false)"
    if theirs is None or not _borrowing_with(ctx, victim, theirs, mine):
        if policy.other_queues == "never":
            return (
                f"{what} of queue {gang.queue} (policy other_queues never), but queue {victim.queue} is no cohort "
                "peer above its nominal with the victim's pods back"
            )
        return f"{what}, not strictly higher"
    assert mine is not None  # a cohort peer
    after = ctx.queue_after.get(mine.name, Counter())
    borrows = sorted(r for r, nominal in mine.nominal.items() if after[r] > nominal)
    if not borrows or _subtree_within(ctx, mine, theirs):
        rule = policy.reclaim_within_cohort
        if rule == "any" or (rule == "lower_priority" and higher):
            return None
        return f"{what} reclaiming for queue {mine.name} under reclaim_within_cohort {rule}"
    borrow = policy.borrow_within_cohort
    threshold = borrow.max_priority_threshold
    if (
        policy.reclaim_within_cohort != "never"
        and borrow.policy == "lower_priority"
        and higher
        and (threshold is None or victim.priority <= threshold)
    ):
        return None
    return (
        f"{what} of queue {mine.name}, which ends above its nominal {', '.join(borrows)} (it borrows), under "
        f"borrow_within_cohort {borrow.policy}"
        + (f" with max_priority_threshold {threshold}" if threshold is not None else "")
    )


def _borrowing_with(ctx: _Context, victim: RunningGang, queue: Queue, preemptor: Queue | None = None) -> bool:
    """Whether ``queue`` (the victim's) is above its nominal, after the plan with the victim's
    lost pods put back, on a resource they request: reclaim takes back only what the queue
    borrows (Kueue stops at the nominal too). Against a ``preemptor`` of another branch of the
    tree, on that resource every cohort between the victim's queue and their lowest common
    cohort that holds it (lists it in ``nominal``) must be above its quota too: a cohort's own
    quota guarantees its subtree."""
    lost: Counter[str] = Counter()
    for pod in ctx.lost(victim):
        lost.update(ctx.requests(victim.name, pod.role))
    after = ctx.queue_after.get(queue.name, Counter())
    over = [r for r, amount in lost.items() if r in queue.nominal and after[r] + amount > queue.nominal[r]]
    if not over or preemptor is None or preemptor.cohort is None or queue.cohort is None:
        return bool(over)
    tree = _Tree(ctx.rnd)
    _, path = tree.below_common(preemptor.cohort, queue.cohort)
    for r in over:
        amounts = {q: used[r] for q, used in ctx.queue_after.items()}
        amounts[queue.name] = amounts.get(queue.name, 0) + lost[r]
        if all(tree.usage(c, r, amounts) > tree.quota(c, r) for c in path if r in tree.own(c, "nominal")):
            return True
    return False


def _subtree_within(ctx: _Context, mine: Queue, theirs: Queue | None) -> bool:
    """Whether a cohort between ``mine`` (the preemptor's queue) and its lowest common cohort
    with ``theirs`` holds quota (lists resources in ``nominal``) and ends within it on every
    one of them its subtree limits: the preemptor is then within its guarantee at that level."""
    if theirs is None or mine.cohort is None or theirs.cohort is None:
        return False
    tree = _Tree(ctx.rnd)
    path, _ = tree.below_common(mine.cohort, theirs.cohort)
    for c in path:
        held = [r for r in sorted(tree.own(c, "nominal")) if tree.subtree(c, r)]
        if held and all(
            tree.usage(c, r, {q: used[r] for q, used in ctx.queue_after.items()}) <= tree.quota(c, r) for r in held
        ):
            return True
    return False


def _reprieves(ctx: _Context, victim: RunningGang, lost: list[BoundPod]) -> list[Violation]:
    """Nothing is preempted that the plan does not need: an evicted gang must not fit back whole,
    a shrunk gang must not take back any one pod (any one slice, for sliced gangs). Checked
    twice: on top of the whole plan, and on top of the new pods of the gangs that may preempt
    the victim only, since room or quota a victim held that went to anyone else (its own
    priority or lower, by default) was not needed by anyone the victim yields to."""
    for above in (False, True):
        found = _reprieve_violation(ctx, victim, lost, above)
        if found is not None:
            return [found]
    return []


def _reprieve_violation(ctx: _Context, victim: RunningGang, lost: list[BoundPod], above: bool) -> Violation | None:
    name = victim.name
    where = ""
    if above and ctx.default_policies:
        where = f" beside the new pods of priority above {victim.priority} (the rest went to gangs of its priority or lower)"  # noqa: E501
    elif above:
        where = " beside the new pods of the gangs that may preempt it (the rest went to gangs that may not)"
    if ctx.evicted(victim):
        if not _fits_back(ctx, victim, lost, above):
            return None
        nodes = ", ".join(sorted({p.node for p in lost}))
        message = f"gang {name}: evicted, but all {len(lost)} pods fit back on {nodes} within capacity and quota"
        return _v("preemption", message + where, name)
    candidates = _reprieve_candidates(ctx, victim, lost)
    pods = next((pods for pods in candidates if _fits_back(ctx, victim, pods, above)), None)
    if pods is None:
        return None
    names, nodes = ", ".join(p.name for p in pods), ", ".join(sorted({p.node for p in pods}))
    message = f"gang {name}: shrunk, but pod {names} fits back on {nodes} within capacity and quota"
    return _v("preemption", message + where, name, pods[0].node)


def _reprieve_candidates(ctx: _Context, victim: RunningGang, lost: list[BoundPod]) -> Iterable[list[BoundPod]]:
    """Pods that could be given back together: each single pod, or for a sliced gang each set of
    ``slice_size`` lost pods of one slice domain (a single pod back would break its slices)."""
    topo = victim.topology
    if topo is None or topo.slice_level is None or not topo.slice_size or topo.slice_size == 1:
        return ([p] for p in lost)
    level, size = topo.slice_level, topo.slice_size
    by_domain: dict[str, list[BoundPod]] = defaultdict(list)
    for pod in lost:
        by_domain[_domain(ctx.nodes[pod.node], level)].append(pod)
    combos = (list(c) for pods in by_domain.values() for c in combinations(pods, size))
    return islice(combos, MAX_SLICE_REPRIEVES)


def _fits_back(ctx: _Context, victim: RunningGang, pods: list[BoundPod], above: bool) -> bool:
    """Whether ``pods`` of the victim could stay where they were on top of the plan: capacity
    on their nodes and every quota of the victim's queue and cohort still hold. With ``above``,
    on top of the new pods of the gangs that may preempt the victim only.

    Capacity first, from :attr:`_Context.usage`'s matrices, and the quota only when it holds
    (the same answer: both must hold): greedy's plan of the fragmented L round asks 1,000
    times, 0.08 of the validator's 0.17 CPU-s with a counter per node and queue each time."""
    per_node: dict[str, dict[str, int]] = {}
    total: dict[str, int] = {}
    for pod in pods:
        amounts = ctx.requests(victim.name, pod.role)
        here = per_node.setdefault(pod.node, {})
        for r, a in amounts.items():
            here[r] = here.get(r, 0) + a
            total[r] = total.get(r, 0) + a
    low_nodes, low_queues = ctx.new_not_preempting(victim) if above else ({}, {})
    usage, rows = ctx.usage, ctx.node_row
    for node, extra in per_node.items():
        row, low, capacity = rows[node], low_nodes.get(node), ctx.nodes[node].capacity
        for r, a in extra.items():
            c = usage.columns.get(r)
            used = 0 if c is None else int(usage.kept[row, c]) + int(usage.new[row, c])
            if low is not None:
                used -= low[r]
            if used + a > capacity.get(r, 0):
                return False
    scopes = [s for s in _quota_scopes(ctx.rnd) if victim.queue in s.queues and total.get(s.resource, 0)]
    if not scopes:
        return True
    extras: dict[str, Counter[str]] = {q: Counter({r: -a for r, a in c.items()}) for q, c in low_queues.items()}
    extras.setdefault(victim.queue, Counter()).update(total)
    return not any(_scope_over(ctx, scope, extra=extras) for scope in scopes)


# ----------------------------------------------------------------------------- rule 6: quota


class _Scope(NamedTuple):
    """One quota limit: the queues whose usage counts, the resource, the limit in milli-units,
    and for a cohort how the queues' usage makes the subtree's (``measure``; None: the sum)."""

    label: str
    queues: frozenset[str]
    resource: str
    limit: int
    measure: Callable[[Mapping[str, int]], int] | None = None


def _tree_root(rnd: Round, cohort: str) -> str:
    """The root of ``cohort``'s tree (``Round.cohorts``; an undeclared cohort is its own)."""
    parent = {c.name: c.parent for c in rnd.cohorts}
    while (up := parent.get(cohort)) is not None:
        cohort = up
    return cohort


def _quota_scopes(rnd: Round) -> list[_Scope]:
    """Every limit of the round: per queue ``nominal`` (no cohort) or ``nominal +
    borrowing_limit`` (in a cohort, when listed), and per cohort of a tree its subtree's
    limit (:func:`_cohort_scopes`). Unlisted resources (and, in a cohort, unlisted borrowing
    limits) are unlimited; a cohort counts only queues that list the resource in ``nominal``."""
    scopes: list[_Scope] = []
    for q in rnd.queues:
        for res, nominal in sorted(q.nominal.items()):
            if q.cohort is None:
                scopes.append(_Scope(f"queue {q.name}", frozenset([q.name]), res, nominal))
            elif res in q.borrowing_limit:
                limit = nominal + q.borrowing_limit[res]
                scopes.append(_Scope(f"queue {q.name} (nominal + borrowing limit)", frozenset([q.name]), res, limit))
    return scopes + _cohort_scopes(rnd)


class _Tree:
    """The cohort trees of a round, read directly from docs/rules.md, rule 6: a subtree's quota
    ``S`` is what its queues lend (``nominal - G_q``, ``G_q = nominal - lending_limit_q``, 0
    without one) + the cohort's own + what each child cohort lends (``S_d - G_d``, ``G_d =
    max(0, S_d - lending_limit_d)``); its usage ``U`` is its queues' ``max(0, usage - G_q)`` +
    ``max(0, U_d - G_d)`` per child. Only queues listing a resource count for it."""

    def __init__(self, rnd: Round) -> None:
        self.declared = {c.name: c for c in rnd.cohorts}
        self.parent: dict[str, str | None] = {c.name: c.parent for c in rnd.cohorts}
        for q in rnd.queues:
            if q.cohort is not None:
                self.parent.setdefault(q.cohort, None)
        self.queues_of: dict[str, list[Queue]] = defaultdict(list)
        self.kids: dict[str, list[str]] = defaultdict(list)
        for q in rnd.queues:
            if q.cohort is not None:
                self.queues_of[q.cohort].append(q)
        for name, up in self.parent.items():
            if up is not None:
                self.kids[up].append(name)

    def own(self, name: str, field: str) -> Mapping[str, int]:
        spec = self.declared.get(name)
        return {} if spec is None else getattr(spec, field)

    def subtree(self, name: str, res: str) -> set[str]:
        out = {q.name for q in self.queues_of[name] if res in q.nominal}
        for d in self.kids[name]:
            out |= self.subtree(d, res)
        return out

    def quota(self, name: str, res: str) -> int:
        lent = sum(q.nominal.get(res, 0) - _reserved(q, res) for q in self.queues_of[name])
        total = self.own(name, "nominal").get(res, 0) + lent
        return total + sum(self.quota(d, res) - self.keeps(d, res) for d in self.kids[name])

    def keeps(self, name: str, res: str) -> int:
        lending = self.own(name, "lending_limit").get(res)
        return 0 if lending is None else max(0, self.quota(name, res) - lending)

    def usage(self, name: str, res: str, amounts: Mapping[str, int]) -> int:
        total = sum(
            max(0, amounts.get(q.name, 0) - _reserved(q, res)) for q in self.queues_of[name] if res in q.nominal
        )
        return total + sum(max(0, self.usage(d, res, amounts) - self.keeps(d, res)) for d in self.kids[name])

    def up(self, cohort: str) -> list[str]:
        """``cohort`` and its ancestors, up to the root."""
        out = [cohort]
        while (parent := self.parent.get(out[-1])) is not None:
            out.append(parent)
        return out

    def below_common(self, a: str, b: str) -> tuple[list[str], list[str]]:
        """The cohorts from ``a`` and from ``b`` up to, not including, their lowest common one."""
        up_a, up_b = self.up(a), self.up(b)
        common = next(c for c in up_a if c in up_b)
        return up_a[: up_a.index(common)], up_b[: up_b.index(common)]


def _reserved(queue: Queue, res: str) -> int:
    """The part of ``queue``'s nominal it does not lend (``nominal - lending_limit`` when it sets
    one, Kueue's ClusterQueue lendingLimit): its usage up to it counts in no cohort."""
    if res not in queue.lending_limit:
        return 0
    return max(0, queue.nominal.get(res, 0) - queue.lending_limit[res])


def _cohort_scopes(rnd: Round) -> list[_Scope]:
    """Rule 6 at every cohort of every tree (:class:`_Tree`): the limit is ``S`` at a root and
    ``S + borrowing_limit`` below (when listed)."""
    tree = _Tree(rnd)
    scopes: list[_Scope] = []
    for name in sorted(tree.parent):
        for res in sorted({r for q in rnd.queues for r in q.nominal}):
            members = tree.subtree(name, res)
            if not members:
                continue
            if tree.parent[name] is None:
                label, limit = f"cohort {name}", tree.quota(name, res)
            elif res in tree.own(name, "borrowing_limit"):
                label = f"cohort {name} (quota + borrowing limit)"
                limit = tree.quota(name, res) + tree.own(name, "borrowing_limit")[res]
            else:
                continue
            measure = functools.partial(tree.usage, name, res)
            scopes.append(_Scope(label, frozenset(members), res, limit, measure))
    return scopes


def _scope_over(ctx: _Context, scope: _Scope, extra: Mapping[str, Amounts] | None = None) -> bool:
    """Whether usage after the plan (plus ``extra`` per queue) breaks the scope's limit. Usage
    already over the limit before the round is tolerated while the plan does not raise it."""
    after, before = _scope_usage(ctx, scope, extra)
    return after > max(scope.limit, before)


def _scope_usage(ctx: _Context, scope: _Scope, extra: Mapping[str, Amounts] | None = None) -> tuple[int, int]:
    """Usage of the scope's resource after the plan (plus ``extra``) and before the round."""
    res = scope.resource
    after = {q: ctx.queue_after.get(q, Counter())[res] + (extra or {}).get(q, {}).get(res, 0) for q in scope.queues}
    before = {q: ctx.queue_before.get(q, Counter())[res] for q in scope.queues}
    if scope.measure is None:
        return sum(after.values()), sum(before.values())
    return scope.measure(after), scope.measure(before)


def _check_quota(ctx: _Context) -> list[Violation]:
    """Queues stay within quota (Kueue ClusterQueue / Koordinator ElasticQuota semantics)."""
    out: list[Violation] = []
    for scope in _quota_scopes(ctx.rnd):
        if not _scope_over(ctx, scope):
            continue
        after, before = _scope_usage(ctx, scope)
        res = scope.resource
        note = f", above {_qty(before, res)} before the round" if before > scope.limit else ""
        out.append(_v("quota", f"{scope.label}: {res} {_qty(after, res)} > limit {_qty(scope.limit, res)}{note}"))
    return out


# ----------------------------------------------------------------------------- rule 7: stability


def _check_stability(ctx: _Context) -> list[Violation]:
    """Running pods that are not preempted stay on their node under their name: no new pod
    reuses a kept pod's name, and no role of a running gang loses pods and gains others."""
    # a new pod's name among the running pods' (one map shared with the consistency check),
    # then whether the plan keeps that pod: no pass over the pods here (0.04 of the validator's
    # CPU-s at fragmented XL)
    out: list[Violation] = []
    for p in ctx.plan.placements:
        owner = ctx.pod_owner.get(p.pod)
        if owner is not None and p.pod not in ctx.removed.get(owner, ()):
            pod = next(q for q in ctx.running[owner].pods if q.name == p.pod)
            out.append(
                _v(
                    "stability",
                    f"pod {p.pod} of running gang {owner} stays on node {pod.node}, "
                    f"but the plan places it again on node {p.node}",
                    owner,
                    p.node,
                )
            )
    removed = ctx.removed
    for run in ctx.rnd.running:
        if removed.get(run.name):  # else it loses no pods: nothing moves
            out += _moves(ctx, run)
    return out


def _moves(ctx: _Context, run: RunningGang) -> list[Violation]:
    """Removing pods of a role and adding pods to the same role moves (or renames) them."""
    if not ctx.removed.get(run.name) or ctx.evicted(run):
        return []  # reported by all_or_nothing when it grows; or it loses no pods
    lost = Counter(p.role for p in ctx.lost(run))
    new = Counter(p.role for p in ctx.new_by_gang.get(run.name, []))
    return [
        _v(
            "stability",
            f"running gang {run.name}: role {role} loses {lost[role]} pods and gains {new[role]} new ones (moves pods)",
            run.name,
        )
        for role in sorted(set(lost) & set(new))
    ]


# ----------------------------------------------------------------------------- consistency


def _check_consistency(ctx: _Context) -> list[Violation]:
    """Every name in the plan refers to the round, and the plan's lists agree with each other."""
    return [
        *_placement_names(ctx),
        *_pod_names(ctx),
        *_admitted_list(ctx),
        *_preemption_lists(ctx),
        *_resize_list(ctx),
    ]


def _placement_names(ctx: _Context) -> list[Violation]:
    """Placements name a known gang, one of its roles, and a known node."""
    out: list[Violation] = []
    for p in ctx.plan.placements:
        spec = ctx.gang(p.gang)
        if spec is None:
            out.append(_v("consistency", f"pod {p.pod}: unknown gang {p.gang}", p.gang))
        elif ctx.role(p.gang, p.role) is None:
            roles = ", ".join(r.name for r in spec.roles)
            out.append(_v("consistency", f"pod {p.pod}: gang {p.gang} has no role {p.role} (roles: {roles})", p.gang))
        if p.node not in ctx.nodes:
            out.append(_v("consistency", f"pod {p.pod} of gang {p.gang}: unknown node {p.node}", p.gang, p.node))
    return out


def _pod_names(ctx: _Context) -> list[Violation]:
    """New pod names are unique, do not reuse a preempted pod's name (a kept pod's name is a
    stability violation), and follow ``{gang}-{role}-{i}`` with the lowest free indices."""
    out: list[Violation] = []
    taken = ctx.pod_owner
    removed = {pod for pods in ctx.removed.values() for pod in pods}
    for name, n in sorted(Counter(p.pod for p in ctx.plan.placements).items()):
        if n > 1:
            out.append(_v("consistency", f"pod name {name} is placed {n} times"))
    for p in ctx.plan.placements:
        if p.pod in removed:
            out.append(
                _v(
                    "consistency",
                    f"new pod {p.pod} of gang {p.gang} reuses the name of a preempted pod of gang {taken[p.pod]}",
                    p.gang,
                    p.node,
                )
            )
    taken_names = set(taken)  # built once: a copy per gang made large rounds quadratic
    for gang, placements in ctx.new_by_gang.items():
        out += _naming(gang, placements, taken_names)
    return out


def _naming(gang: str, placements: list[Placement], taken: set[str]) -> list[Violation]:
    """Per role, k new pods are named by the k lowest indices whose name no running pod has."""
    by_role: dict[str, list[str]] = defaultdict(list)
    for p in placements:
        by_role[p.role].append(p.pod)
    out: list[Violation] = []
    for role, names in by_role.items():
        free = (f"{gang}-{role}-{i}" for i in range(len(taken) + len(names)))  # at most len(taken) are taken
        expected = list(islice((n for n in free if n not in taken), len(names)))
        if sorted(set(names)) != sorted(expected):
            out.append(
                _v(
                    "consistency",
                    f"gang {gang} role {role}: new pods named {', '.join(sorted(names))}, "
                    f"expected {', '.join(expected)}",
                    gang,
                )
            )
    return out


def _admitted_list(ctx: _Context) -> list[Violation]:
    """The admitted list names pending gangs, each once (the waiting list: :func:`_waiting_list`)."""
    return _listed_once(ctx, "admitted", Counter(ctx.plan.admitted))


def _waiting_list(ctx: _Context) -> list[Violation]:
    """Each pending gang is admitted or waiting, exactly once; the waiting list names pending
    gangs only, each once and with a reason."""
    waiting = Counter(w.gang for w in ctx.plan.waiting)
    out = _listed_once(ctx, "waiting", waiting)
    for name in ctx.pending:
        if name in ctx.admitted and waiting[name]:
            out.append(_v("consistency", f"gang {name} is both admitted and waiting", name))
        elif name not in ctx.admitted and not waiting[name]:
            out.append(_v("consistency", f"pending gang {name} is neither admitted nor waiting", name))
    for w in ctx.plan.waiting:
        if not any(r.strip() for r in w.reasons):
            out.append(_v("consistency", f"waiting gang {w.gang} ({w.code}) gives no reason", w.gang))
    return out


def _listed_once(ctx: _Context, label: str, listed: Counter[str]) -> list[Violation]:
    """The names a plan's ``label`` list counts (``listed``) are pending gangs, each listed once."""
    out: list[Violation] = []
    for name, n in sorted(listed.items()):
        if name not in ctx.pending:
            what = "a running gang" if name in ctx.running else "an unknown gang"
            out.append(_v("consistency", f"{label} lists {what} {name}", name))
        elif n > 1:
            out.append(_v("consistency", f"{label} lists gang {name} {n} times", name))
    return out


def _preemption_lists(ctx: _Context) -> list[Violation]:
    """One entry per running victim, naming its own pods and their nodes, its priority, an
    ``evict`` only for all pods and a ``shrink`` only for some, and known beneficiaries."""
    out: list[Violation] = []
    for name, n in sorted(Counter(pre.gang for pre in ctx.plan.preemptions).items()):
        if n > 1:
            out.append(_v("consistency", f"preemptions list gang {name} {n} times", name))
    for pre in ctx.plan.preemptions:
        victim = ctx.running.get(pre.gang)
        if victim is None:
            what = "pending gang" if pre.gang in ctx.pending else "unknown gang"
            out.append(_v("consistency", f"preemption of {what} {pre.gang}", pre.gang))
            continue
        out += _preemption_entry_fields(ctx, pre, victim)
    return out


def _preemption_entry_fields(ctx: _Context, pre: Preemption, victim: RunningGang) -> list[Violation]:
    """The fields of one preemption entry against the victim as the round describes it."""
    name, pods = victim.name, {p.name: p for p in victim.pods}
    out = [
        _v("consistency", f"preemption of gang {name} lists pod {pod}, which is not one of its pods", name)
        for pod in pre.pods
        if pod not in pods
    ]
    out += [
        _v("consistency", f"preemption of gang {name} lists pod {pod} {n} times", name)
        for pod, n in sorted(Counter(pre.pods).items())
        if n > 1
    ]
    listed = {pods[p].node for p in pre.pods if p in pods}
    if set(pre.nodes) != listed:
        out.append(
            _v(
                "consistency",
                f"preemption of gang {name} lists nodes {', '.join(sorted(set(pre.nodes)))}, "
                f"but its listed pods are on {', '.join(sorted(listed))}",
                name,
            )
        )
    lost = len({p for p in pre.pods if p in pods})
    if pre.kind == "evict" and lost < len(pods):
        out.append(_v("consistency", f"eviction of gang {name} lists {lost} of its {len(pods)} pods, not all", name))
    if pre.kind == "shrink" and lost == len(pods):
        out.append(_v("consistency", f"shrink of gang {name} removes all {lost} pods (that is an evict)", name))
    if pre.priority != victim.priority:
        out.append(
            _v(
                "consistency",
                f"preemption of gang {name} says priority {pre.priority}, gang has {victim.priority}",
                name,
            )
        )
    if not pre.cost >= 0:
        out.append(_v("consistency", f"preemption of gang {name} has cost {pre.cost}, not a non-negative number", name))
    for other in pre.for_gangs:
        if ctx.gang(other) is None:
            out.append(_v("consistency", f"preemption of gang {name} is for unknown gang {other}", name))
    return out


def _resize_list(ctx: _Context) -> list[Violation]:
    """Exactly the running gangs whose member count changes (evicted gangs optional, to 0) have
    one resize, from their running pod count to their count after the plan."""
    out: list[Violation] = []
    resizes: dict[str, int] = Counter(r.gang for r in ctx.plan.resizes)
    for name, n in sorted(resizes.items()):
        if n > 1 and name in ctx.running:
            out.append(_v("consistency", f"resizes list gang {name} {n} times", name))
    for r in ctx.plan.resizes:
        run = ctx.running.get(r.gang)
        if run is None:
            what = "pending gang" if r.gang in ctx.pending else "unknown gang"
            out.append(_v("consistency", f"resize of {what} {r.gang}", r.gang))
            continue
        after = sum(ctx.members(run).values())
        if (r.from_members, r.to_members) != (len(run.pods), after):
            out.append(
                _v(
                    "consistency",
                    f"resize of gang {r.gang} says {r.from_members} -> {r.to_members}, "
                    f"the plan does {len(run.pods)} -> {after}",
                    r.gang,
                )
            )
        elif after == len(run.pods):
            out.append(_v("consistency", f"resize of gang {r.gang} does not change its {after} members", r.gang))
    for run in ctx.rnd.running:
        if ctx.untouched(run):
            continue  # its members are its running pods
        after = sum(ctx.members(run).values())
        if after != len(run.pods) and not ctx.evicted(run) and not resizes[run.name]:
            out.append(
                _v(
                    "consistency",
                    f"gang {run.name} goes from {len(run.pods)} to {after} members without a resize entry",
                    run.name,
                )
            )
    return out


# ----------------------------------------------------------------------------- plumbing


def _v(rule: str, message: str, gang: str | None = None, node: str | None = None) -> Violation:
    return Violation(rule=rule, message=message, gang=gang, node=node)


_CHECKS: tuple[Callable[[_Context], list[Violation]], ...] = (
    _check_all_or_nothing,
    _check_capacity,
    _check_eligibility,
    _check_topology,
    _check_preemption,
    _check_quota,
    _check_stability,
    _check_consistency,
)
