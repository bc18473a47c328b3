"""The round (input) and the plan (output): the pydantic models at gangopt's boundary.

Names follow Kubernetes habits so that users of Koordinator, Volcano, Kueue, YuniKorn or the
Workload API find their concepts: see ``docs/schema.md`` (generated from these models) for the
mapping. Every model forbids unknown fields, so a typo is an error naming its JSON path rather
than a silently ignored setting.

Resource amounts are parsed into integer milli-units (see :mod:`gangopt.quantities`).
Cross-field rules (unique names, known nodes and levels, running pods within capacity, ...)
are checked in :func:`Round._check_references`, which reports every problem with its path.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    StrictBool,
    StrictFloat,
    StrictInt,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gangopt.checks import NODE_LEVEL as NODE_LEVEL  # the implicit finest topology level: every node
from gangopt.checks import check_round, cohort_roots
from gangopt.quantities import format_quantity, parse_quantity

API_VERSION = "gangopt/v1"

Quantity = Annotated[
    int,
    BeforeValidator(parse_quantity),
    PlainSerializer(format_quantity, return_type=str),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^[0-9.]+(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"},
                {"type": "number", "minimum": 0},
            ],
            "description": "Kubernetes quantity: 8, '500m', '64Gi'. Stored as milli-units.",
        }
    ),
]

# ----------------------------------------------------------------------------- limits

MAX_REPLICAS = 100_000
"""Pods per role at most: far above any real gang (the XL benchmark has ~19,000 pods in all),
and low enough that a typo such as ``replicas: 1e9`` is an input error, not an hours-long solve."""
MAX_NODES = 100_000
"""Nodes per cluster: six times the XL benchmark's 16,384 (and above Kubernetes' tested 15,000)."""
MAX_GANGS = 100_000
"""Running gangs, and pending gangs, per round each."""
MAX_QUEUES = 10_000
MAX_LEVELS = 16
"""Topology levels (Kueue's Topology allows 16 too)."""
MAX_ROLES = 64
"""Roles per gang; Kueue allows 8 pod sets per Workload."""
MAX_ITEMS = 256
"""Taints, tolerations, affinity terms and their values, labels, selectors and resources per
object: Kubernetes sets no number, but a pod or node with more is not a real one."""
MAX_TEXT = 1024
"""Characters of a free-text value (a label value, a taint value)."""
MAX_SECONDS = 1e11
"""Times (``submit_time``, ``deadline``, ``policy.now``) in seconds: any epoch up to about the
year 5000, finite, so that aging and deadline terms stay finite."""
MAX_WEIGHT = 1000.0
"""Objective weights: the terms are scaled to integers for CP-SAT (docs/objective.md), and a
weight of 1e308 made that an infinity (``int()`` of it failed with a 500)."""
FAIL_FAST = True
"""The long lists (nodes, gangs, queues, pods) stop at their first bad item: a 3 MB round with
the same mistake on 60,000 nodes cost 383 MB of error objects (125x its size) when every item
was checked; the problems of that first item are all reported."""
MAX_PLACEMENTS = 10_000_000
"""New pods a plan (an input of ``validate`` and ``explain``) may place: every pending gang at its
maximum stays far below; a bound keeps a plan file from being a memory bomb."""
MAX_COUNT = 10_000_000
"""Member counts (``min_members``, ``max_members``, ``slice_size``): above every total of pods."""

_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
"""Control characters (NUL, newlines, escape sequences) and the invisible format characters
used to make two names look alike or a log line read backwards (bidi overrides, zero widths)."""
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _printable(text: str) -> str:
    if text.isascii() and text.isprintable():  # U+0020-U+007E only: none of them is _INVISIBLE
        return text  # two C calls instead of a regex search: 303,627 names and labels at XL
    bad = _INVISIBLE.search(text)
    if bad is not None:
        raise ValueError(f"contains the invisible or control character U+{ord(bad.group()):04X}")
    return text


ASCII_IDENTITIES = frozenset({_printable})
"""Validators that return every printable-ASCII string unchanged and refuse none:
:mod:`gangopt.parsing` leaves them out of the models' validators when the whole input is
printable ASCII without a JSON escape (644,379 calls, 0.25 of the 1.1 CPU-s of validating the
XL round)."""


def node_name_problem(text: str) -> str | None:
    """Why ``text`` is not a Kubernetes node name (an RFC 1123 subdomain), or None."""
    if len(text) > 253:
        return f"a node name has at most 253 characters, this one {len(text)}"
    if not _DNS_SUBDOMAIN.match(text):
        return (
            f"{text[:60]!r} is not a Kubernetes node name (an RFC 1123 subdomain: lowercase letters, "
            "digits, '-' and '.', starting and ending with a letter or digit)"
        )
    return None


def _node_name(text: str) -> str:
    problem = node_name_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


Name = Annotated[str, Field(min_length=1, max_length=253), AfterValidator(_printable)]
"""A name: 1 to 253 characters (a Kubernetes object name's limit), no control characters."""
NodeName = Annotated[
    str,
    Field(min_length=1, max_length=253, json_schema_extra={"pattern": _DNS_SUBDOMAIN.pattern}),
    AfterValidator(_node_name),
]
"""A node name as Kubernetes allows it: an RFC 1123 DNS subdomain."""
Text = Annotated[str, Field(max_length=MAX_TEXT), AfterValidator(_printable)]
Labels = Annotated[dict[Name, Text], Field(max_length=MAX_ITEMS)]
Resources = Annotated[
    dict[Name, Quantity],
    Field(max_length=MAX_ITEMS),
    PlainSerializer(lambda amounts: {k: format_quantity(v, k) for k, v in amounts.items()}),
]
"""Resource name (``gpu``, ``cpu``, ``memory``, ``rdma/hca``, ...) to amount."""
Seconds = Annotated[StrictFloat, Field(ge=-MAX_SECONDS, le=MAX_SECONDS)]


class _Model(BaseModel):
    """Every number and flag is strict (``StrictInt``, ``StrictFloat``, ``StrictBool``): no
    string or bool is coerced to a number (``"priority": "5"`` and ``"replicas": true`` are
    errors, as in Kubernetes' strict decoding) and floats are finite. Per field rather than
    ``strict=True`` on the config, which would also refuse ``"optimal"`` for a Status enum."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


class _WithDerived(_Model):
    """A model that keeps values derived from it (see :mod:`gangopt.memo`)."""

    _derived: dict[Hashable, tuple[tuple[object, ...], Any]] = PrivateAttr(default_factory=dict)

    @property
    def derived_store(self) -> dict[Hashable, tuple[tuple[object, ...], Any]]:
        """Where :func:`gangopt.memo.derived` keeps what it derived from this object."""
        return self._derived

    def __eq__(self, other: object) -> bool:
        """Equal fields make equal models: the derived store is a cache, not part of the value
        (pydantic would compare it too)."""
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, BaseModel)
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # lists and dicts inside: never hashable anyway


# ----------------------------------------------------------------------------- cluster


class Taint(_Model):
    """A node taint. ``NoSchedule`` and ``NoExecute`` repel pods that do not tolerate them;
    ``PreferNoSchedule`` is a preference and never makes a node ineligible."""

    key: Name
    value: Text = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class Node(_Model):
    """A schedulable machine. ``topology`` names the node's domain at every cluster level."""

    name: NodeName
    capacity: Resources = Field(description="Allocatable amount per resource.")
    labels: Labels = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list, max_length=MAX_ITEMS)
    schedulable: StrictBool = Field(True, description="False for cordoned nodes: no new pods land there.")
    topology: dict[Name, Name] = Field(
        default_factory=dict,
        max_length=MAX_LEVELS,
        description="Domain name per topology level, e.g. {'zone': 'z1', 'rack': 'r7'}.",
    )


class Cluster(_WithDerived):
    """Nodes and the topology tree they sit in."""

    topology_levels: list[Name] = Field(
        default_factory=list,
        max_length=MAX_LEVELS,
        description="Levels from broadest to narrowest, e.g. ['zone', 'block', 'rack']. "
        "The level 'node' is implicit and always the narrowest.",
    )
    nodes: list[Node] = Field(max_length=MAX_NODES, fail_fast=FAIL_FAST)


# ----------------------------------------------------------------------------- gangs


class Toleration(_Model):
    """Kubernetes toleration. ``key=None`` with ``operator='Exists'`` tolerates every taint."""

    key: Name | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: Text = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None

    @model_validator(mode="after")
    def _key_or_exists(self) -> Toleration:
        # Kubernetes rejects it too ("operator must be Exists when `key` is empty"); readers
        # disagreed on what it tolerates (a taint with an empty value, or nothing).
        if not self.key and self.operator == "Equal":
            raise PydanticCustomError(
                "toleration_key", "a toleration without key must use operator Exists (it then tolerates every taint)"
            )
        return self


class MatchExpression(_Model):
    """One term of a required node affinity; all terms of a role must hold."""

    key: Name
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[Text] = Field(default_factory=list, max_length=MAX_ITEMS)


class Role(_Model):
    """A pod set of a gang (e.g. 1 launcher, 16 workers): identical pods."""

    name: Name = "worker"
    replicas: StrictInt = Field(
        ge=1,
        le=MAX_REPLICAS,
        description="Pods wanted (the most the role will run).",
    )
    min_replicas: StrictInt | None = Field(
        None, ge=0, le=MAX_REPLICAS, description="Fewest pods of this role the gang can run with (default: replicas)."
    )
    requests: Resources = Field(description="Per-pod resource requests.")
    node_selector: Labels = Field(default_factory=dict)
    node_affinity: list[MatchExpression] = Field(default_factory=list, max_length=MAX_ITEMS)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=MAX_ITEMS)


class TopologyRequest(_Model):
    """Where a gang's pods may sit, at the cluster's topology levels (or ``node``).

    ``required``: all pods of the gang inside one domain of that level (hard).
    ``preferred``: as few domains of that level as possible, and of each level above it (soft;
    every extra domain costs, the preferred level most: docs/objective.md). With ``required``
    too, the levels charged stop below the required one (a gang may want one block, and one
    rack inside it if it can).
    ``slice_level``/``slice_size``: the pods split into groups of ``slice_size`` pods, each
    group inside one domain of ``slice_level`` (Kueue pod-set slices, Volcano sub-groups).
    """

    required: Name | None = None
    preferred: Name | None = None
    slice_level: Name | None = None
    slice_size: StrictInt | None = Field(None, ge=1, le=MAX_COUNT)


class GangSpec(_Model):
    """What every gang has, pending or running (and every job of a workload)."""

    name: Name
    queue: Name = "default"
    priority: StrictInt = Field(
        0,
        ge=-(2**31),
        le=2**31 - 1,
        description="Higher runs first; a gang preempts strictly lower priorities only, except where its "
        "queue's preemption policy reclaims nominal quota at any priority. A 32-bit integer, "
        "as a Kubernetes PriorityClass value.",
    )
    roles: list[Role] = Field(min_length=1, max_length=MAX_ROLES)
    min_members: StrictInt | None = Field(
        None, ge=1, le=MAX_COUNT, description="All-or-nothing threshold over all roles (default: sum of role minimums)."
    )
    max_members: StrictInt | None = Field(
        None, ge=1, le=MAX_COUNT, description="Elastic ceiling over all roles (default: sum of replicas)."
    )
    topology: TopologyRequest | None = None

    @cached_property
    def total_replicas(self) -> int:
        return sum(r.replicas for r in self.roles)

    def role_minimum(self, role: Role) -> int:
        """Fewest pods of ``role``: its ``min_replicas``, else all of them when the gang sets no
        ``min_members``, else none (only the gang-wide minimum binds, as Volcano's minMember)."""
        if role.min_replicas is not None:
            return role.min_replicas
        return role.replicas if self.min_members is None else 0

    @cached_property
    def minimum(self) -> int:
        """Fewest pods the gang can run with."""
        role_min = sum(self.role_minimum(r) for r in self.roles)
        return max(role_min, self.min_members or 0)

    @cached_property
    def maximum(self) -> int:
        """Most pods the gang may run."""
        return min(self.total_replicas, self.max_members or self.total_replicas)

    @cached_property
    def elastic(self) -> bool:
        if self.min_members is None and all(r.min_replicas is None for r in self.roles):
            # its minimum is every replica, so at least its maximum: said without computing
            # both (0.04 CPU-s over the 16,262 running gangs of fragmented L, 59 of them elastic)
            return False
        return self.minimum < self.maximum

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; an ``update`` of a field the totals above derive from drops the cached totals
        (a copy starts from this gang's ``__dict__``, so it would keep stale ones).

        The totals are cached because a replay asks for them hundreds of thousands of times
        (every round, several times per running gang); gangs are frozen, so they cannot go stale.
        """
        copied = super().model_copy(update=update, deep=deep)
        if update and not _TOTALS_INPUTS.isdisjoint(update):
            for name in _CACHED_TOTALS:
                copied.__dict__.pop(name, None)
        return copied


_CACHED_TOTALS = ("total_replicas", "minimum", "maximum", "elastic")
"""The :class:`GangSpec` properties cached on the instance."""
_TOTALS_INPUTS = frozenset({"roles", "min_members", "max_members"})
"""The fields they derive from."""


class PendingGang(GangSpec):
    """A gang waiting to start: all ``minimum`` pods start together or none does."""

    submit_time: Seconds = Field(0.0, description="Seconds (any epoch, same as policy.now).")
    deadline: Seconds | None = Field(None, description="Latest wanted start time, same clock as submit_time.")
    group: Name | None = Field(None, description="Gangs of one group start together or not at all.")
    expected_duration: StrictFloat | None = Field(
        None,
        ge=0,
        le=MAX_SECONDS,
        description="Expected run time in seconds at the gang's full size (from the user's time limit or "
        "history; in replays, the job's remaining work). Lets the cpsat solver's look-ahead backfill: "
        "a gang that surely ends before a reservation starts may use the reserved nodes "
        "(see Policy.lookahead). Unknown: it never ends before any reservation.",
    )


class BoundPod(_Model):
    """A pod of a running gang, already on a node."""

    name: Name
    role: Name = "worker"
    node: Name


class RunningGang(GangSpec):
    """A gang already running. It may be preempted (whole), shrunk (elastic, down to its
    minimum) or grown (elastic, up to its maximum) by the plan."""

    pods: list[BoundPod] = Field(min_length=1, max_length=MAX_REPLICAS, fail_fast=FAIL_FAST)
    preemptible: StrictBool = True
    preemption_cost: StrictFloat | None = Field(
        None,
        ge=0,
        le=1e9,
        description="Cost of evicting the whole gang, in GPU-hours lost. "
        "Default: GPUs x (seconds_since_checkpoint + restart_seconds) / 3600.",
    )
    seconds_since_checkpoint: StrictFloat = Field(0.0, ge=0, le=MAX_SECONDS)
    restart_seconds: StrictFloat = Field(
        300.0, ge=0, le=MAX_SECONDS, description="Time to restart and reload a checkpoint."
    )
    submit_time: Seconds | None = Field(
        None,
        description="When the gang was submitted (Kueue: its Workload's creation), same clock as policy.now. "
        "Read only by Queue.preemption.within_queue lower_or_newer_equal_priority; unknown: the gang is "
        "newer than no pending gang.",
    )
    started_at: Seconds | None = Field(
        None,
        description="When the gang's current run started (its last start or restart), same clock as "
        "policy.now. With Policy.lookahead.min_run_seconds, a gang that started less than that long "
        "ago is not evicted or shrunk by the cpsat solver.",
    )
    expected_end: Seconds | None = Field(
        None,
        description="When the gang is expected to finish, same clock as policy.now: when its pods free "
        "their nodes, which the cpsat solver's look-ahead uses to reserve a future slot for a "
        "blocked gang. Unknown: it holds its nodes beyond any reservation.",
    )
    evictions: StrictInt = Field(
        0,
        ge=0,
        le=MAX_COUNT,
        description="Times this gang was already evicted; with Policy.lookahead.max_evictions, a gang "
        "evicted that often is not evicted again by the cpsat solver.",
    )


# ----------------------------------------------------------------------------- queues, policy


class BorrowWithinCohort(_Model):
    """Whether a gang whose queue ends above its nominal quota (it borrows) may still preempt
    in other queues of its cohort (Kueue ``borrowWithinCohort``)."""

    policy: Literal["never", "lower_priority"] = Field(
        "lower_priority",
        description="lower_priority: victims of strictly lower priority in cohort queues above their nominal; "
        "never: a borrowing gang reclaims nothing (Kueue's default).",
    )
    max_priority_threshold: StrictInt | None = Field(
        None,
        ge=-(2**31),
        le=2**31 - 1,
        description="Only victims of this priority or lower (Kueue maxPriorityThreshold); null: no threshold.",
    )


class QueuePreemption(_Model):
    """Whom the gangs of a queue may preempt (docs/rules.md, rule 5), modelled on Kueue's
    ClusterQueue ``spec.preemption``. The preemptor's queue decides. The defaults are gangopt's
    historic rule (priorities are global: any preemptible gang of strictly lower priority, in
    any queue); Kueue, Volcano and Koordinator scope preemption to a queue and reclaim within a
    cohort, which ``gangopt import`` sets from their objects."""

    within_queue: Literal["never", "lower_priority", "lower_or_newer_equal_priority"] = Field(
        "lower_priority",
        description="Victims in the preemptor's own queue: never, strictly lower priority, or also equal "
        "priority submitted later (RunningGang.submit_time after the preemptor's) while the queue ends "
        "within its nominal quota (Kueue withinClusterQueue LowerOrNewerEqualPriority). Otherwise equal "
        "priorities never preempt each other inside a queue.",
    )
    reclaim_within_cohort: Literal["never", "lower_priority", "any"] = Field(
        "lower_priority",
        description="Victims in another queue of the cohort that is above its nominal quota, while the "
        "preemptor's queue stays within its own nominal (the nominal quota is a guarantee): never, "
        "strictly lower priority, or any priority (Kueue reclaimWithinCohort).",
    )
    borrow_within_cohort: BorrowWithinCohort = Field(
        default_factory=BorrowWithinCohort,
        description="The same reclaim when the preemptor's queue ends above its nominal (borrows).",
    )
    other_queues: Literal["never", "lower_priority"] = Field(
        "lower_priority",
        description="Victims in any other queue, whatever its cohort and usage: strictly lower priority "
        "(gangopt's global priorities, the default) or never (Kueue, Volcano and Koordinator: a queue's "
        "work within its quota is not another queue's victim).",
    )


class Queue(_Model):
    """A tenant queue with quotas (Kueue ClusterQueue / Koordinator ElasticQuota).

    A queue may use ``nominal`` of a resource; inside a ``cohort`` it may borrow up to
    ``borrowing_limit`` more (unlimited when the resource is not listed), as long as the whole
    cohort stays within the sum of its members' nominal quotas; ``lending_limit`` keeps part of
    its nominal out of that sum, for its own gangs only. Resources not listed in ``nominal`` are
    not limited. ``preemption`` says whom its gangs may preempt.
    """

    name: Name
    cohort: Name | None = None
    nominal: Resources = Field(default_factory=dict)
    borrowing_limit: Resources = Field(default_factory=dict)
    lending_limit: Resources = Field(
        default_factory=dict,
        description="Most of the queue's unused nominal quota its cohort may lend to other queues (Kueue "
        "ClusterQueue lendingLimit); the rest, nominal - lending_limit, is kept for the queue's own gangs "
        "and its usage up to it counts in no cohort. Unlisted: all of it is lent. Only on a queue with a "
        "cohort, per resource listed in nominal, at most the nominal (Kueue: lendingLimit <= nominalQuota).",
    )
    weight: StrictFloat | None = Field(
        None,
        ge=0,
        le=MAX_WEIGHT,
        description="Fair-share weight in its cohort (Kueue fairSharing.weight, Volcano's queue weight). A "
        "cohort in which some queue sets one shares its nominal total by weight (unset members count 1), "
        "and among plans equal in value its gangs start least-served queue first (docs/objective.md, "
        "fair share). Unset everywhere: no fair-share term, plans as before.",
    )
    reclaimable: bool = Field(
        True,
        description="Whether gangs of other queues of its cohort may reclaim this queue's work when it is "
        "above its nominal (reclaim_within_cohort, borrow_within_cohort of their queue). false (Volcano "
        "Queue reclaimable: false): no cohort reclaim takes a victim from it; other_queues lower_priority "
        "still applies (docs/rules.md, rule 5).",
    )
    preemption: QueuePreemption = Field(default_factory=QueuePreemption)


class Cohort(_Model):
    """A node of a cohort tree (Kueue's Cohort: ``spec.parentName``, ``spec.resourceGroups``,
    ``spec.fairSharing.weight``; Volcano's ``volcano.sh/hierarchy``). Queues whose cohorts share a
    root form one cohort for the cohort reclaims of rule 5 and for fair share; quota rule 6 is
    read at every node of the tree: a cohort's subtree may use its members' nominal quotas plus
    the cohort's own ``nominal`` plus what it borrows from its parent, up to ``borrowing_limit``,
    and lends its parent all but what ``lending_limit`` keeps back (docs/rules.md, rule 6).
    Without these fields a tree means what it meant before cohorts held quota: its queues
    share the sum of their nominal quotas."""

    name: Name
    parent: Name | None = Field(
        None, description="The parent cohort (declared in Round.cohorts); null: a root of a tree."
    )
    nominal: Resources = Field(
        default_factory=dict,
        description="Quota the cohort itself holds, lent to its subtree (Kueue Cohort nominalQuota). A "
        "resource listed here (0 allowed) is one the cohort's borrowing_limit and lending_limit may name.",
    )
    borrowing_limit: Resources = Field(
        default_factory=dict,
        description="Most the cohort's subtree may use beyond its own quota (members' nominal + the "
        "cohort's nominal), borrowed from the parent; unlisted: unlimited. Only on a cohort with a parent.",
    )
    lending_limit: Resources = Field(
        default_factory=dict,
        description="Most of the subtree's quota the parent may lend to others; the rest is kept for the "
        "subtree. Unlisted: all of it is lent. Only on a cohort with a parent.",
    )
    weight: StrictFloat | None = Field(
        None,
        ge=0,
        le=MAX_WEIGHT,
        description="Fair-share weight among its siblings (Kueue Cohort fairSharing.weight, Volcano "
        "hierarchy-weights): a parent's deserved share is split by weight between its member queues and "
        "child cohorts, and a child cohort's share again among its own children (unset weights count 1). "
        "Unset on every cohort: each queue's weight is read over its whole tree, as before.",
    )


class Weights(_Model):
    """Weights of the objective; see docs/objective.md for the exact formula."""

    aging_per_hour: StrictFloat = Field(
        0.1, ge=0, le=MAX_WEIGHT, description="Value added per hour waited, as a fraction."
    )
    aging_cap: StrictFloat = Field(1.0, ge=0, le=MAX_WEIGHT, description="Most value aging can add, as a fraction.")
    deadline_boost: StrictFloat = Field(
        1.0, ge=0, le=MAX_WEIGHT, description="Value added to a gang at or near its deadline."
    )
    deadline_horizon: StrictFloat = Field(
        3600.0, ge=0, le=MAX_SECONDS, description="Seconds before a deadline the boost starts."
    )
    short_first: StrictFloat = Field(
        2.0,
        ge=0,
        le=MAX_WEIGHT,
        description="Value added to a pending gang with a known expected_duration d, as a fraction: "
        "short_first x 3600 / (3600 + d), so a job of minutes gains almost all of it and one of a day "
        "4 %. Shortest work first within a priority tier lowers mean wait and JCT: on the Philly 600-job "
        "replay (6 nodes) 2.0 took gangopt's mean wait from 12.6 to 6.3 min and p99 from 66 to 40 min. "
        "It costs restarts: on the uncontended whole Philly VC it raised preemptions from 143 to 233 "
        "(waits unchanged); set 0 where restarts matter more than waits. No effect on gangs without "
        "expected_duration.",
    )
    preemption: StrictFloat = Field(1.0, ge=0, le=MAX_WEIGHT, description="Cost per GPU-hour lost by preemption.")
    growth: StrictFloat = Field(
        1.0, ge=0, le=MAX_WEIGHT, description="Value per GPU of elastic members above the minimum."
    )
    spread: StrictFloat = Field(
        1.0,
        ge=0,
        le=MAX_WEIGHT,
        description="Cost per extra domain at a gang's preferred level; each level above it costs half the "
        "level below (at least 0.1), so a gang that must span two blocks takes two of one spine.",
    )
    fragmentation: StrictFloat = Field(0.25, ge=0, le=MAX_WEIGHT, description="Cost per idle node opened by new pods.")
    guarantee: StrictFloat = Field(
        2.0,
        ge=0,
        le=MAX_WEIGHT,
        description="Value per GPU-equivalent of a queue's usage within its nominal quota, for queues whose "
        "preemption policy reclaims at any priority (reclaim_within_cohort: any): taking back lent quota "
        "from a same-priority borrower is otherwise worth nothing but a restart. At 2.0 a lender reclaims "
        "an 8-GPU borrower that ran less than 1 h 55 min since its checkpoint (with the default 5-minute "
        "restart and preemption weight 1: 16 GPU-equivalents against 8 x (t + 300 s) / 3600 GPU-hours). "
        "In a cohort tree, a cohort holding quota of its own with such a queue below also counts its "
        "subtree's usage within the subtree's quota (docs/objective.md). No effect on other queues.",
    )


class LookAhead(_Model):
    """How the cpsat solver plans beyond the round (docs/objective.md, "Look-ahead").

    These are decisions of gangopt's optimizer, not rules of the round: a plan that ignores
    them is still valid (``gangopt validate`` does not check them), the greedy solver and the
    peer emulations ignore them, and the cpsat solver follows them in every plan it returns
    (its portfolio candidates are decided under them too). They need the round's times:
    ``RunningGang.started_at``/``expected_end``/``evictions`` and
    ``PendingGang.expected_duration``; without those they change nothing.
    """

    reservations: StrictInt = Field(
        2,
        ge=0,
        le=MAX_GANGS,
        description="Blocked gangs (highest priority, then longest waiting) that get a reserved future "
        "slot: the whole nodes on which they fit earliest, by the running gangs' expected ends. Gangs of "
        "the same or lower priority that would not end before it (expected_duration) do not start "
        "there (Slurm's backfill, decided in the round). 0 turns reservations off.",
    )
    reserve_after: StrictFloat = Field(
        1800.0,
        ge=0,
        le=MAX_SECONDS,
        description="Seconds a gang must have waited before it may get a reservation: waiting escalates a "
        "blocked gang into one (aging). Reserving at once held nodes idle for gangs that would have "
        "started soon anyway: on the 12-job example of docs/capacity-planning.md mean wait went from 4.2 "
        "to 7.2 min with 0 s, back to 4.2 with 1800 s.",
    )
    min_run_seconds: StrictFloat = Field(
        900.0,
        ge=0,
        le=MAX_SECONDS,
        description="A running gang that restarted after an eviction (evictions >= 1) less than this many "
        "seconds ago (started_at) is not evicted or shrunk: a gang that just restarted has lost nothing "
        "since its checkpoint, so it is the cheapest victim, and without this floor it is evicted again "
        "and again. See first_run_seconds for gangs never evicted.",
    )
    first_run_seconds: StrictFloat = Field(
        300.0,
        ge=0,
        le=MAX_SECONDS,
        description="The same floor for a gang on its first run (never evicted), shorter: a higher-priority "
        "gang then waits at most this long for young lower-priority work to become evictable. Measured on "
        "the Philly 600-job replay (6 nodes): 300 s took gangopt's preemptions from 86 to 64 (greedy: 75) "
        "with mean wait 6.3 -> 5.7 min; 900 s kept priority-2 jobs of the b436b2 replay waiting 19 min at "
        "p95.",
    )
    max_evictions: StrictInt | None = Field(
        None,
        ge=0,
        le=MAX_COUNT,
        description="A running gang already evicted this many times (evictions) is not evicted again; "
        "null: no budget.",
    )
    commit_hours: StrictFloat | None = Field(
        36.0,
        gt=0,
        le=MAX_SECONDS,
        description="Committed GPU-time budget per priority tier (Slurm's GrpTRESRunMins, per tier), in "
        "hours of the whole cluster's GPUs: a pending gang whose minimum GPUs x expected_duration is at "
        "least half of commit_hours x the cluster's GPUs does not start if the GPUs x remaining time "
        "(expected_end) of its tier's running gangs plus its own would exceed that budget, unless the "
        "cluster is not contended for it: it fits the idle GPUs without an eviction and, after it and "
        "every other waiting gang, a quarter of the cluster's GPUs would still be idle. A tier running "
        "nothing may always start one; smaller gangs are never held. null: no budget. Default 36 "
        "(docs/objective.md, look-ahead step 4: on the openb window it cut gangopt's p95 wait from "
        "hours to minutes on every seed, and the contention test keeps it from holding long jobs on "
        "the lightly loaded Philly slice).",
    )
    escalate_after: StrictFloat | None = Field(
        259_200.0,
        gt=0,
        le=MAX_SECONDS,
        description="Aging: a pending gang that needs whole nodes (its minimum asks at least the GPUs of "
        "the largest node) and has waited this many seconds is escalated: commit_hours no longer holds "
        "it, and it gets a reservation before every gang not escalated (escalated ones shortest "
        "expected_duration first), also when it fits now. Default 72 h (docs/objective.md, look-ahead "
        "step 5: on the openb window the largest class's p95 wait went from 340 h to 155 h). null: off.",
    )
    escalated_order: Literal["response_ratio", "shortest", "oldest"] = Field(
        "response_ratio",
        description="The order in which escalated gangs (escalate_after) get their reservations. "
        "response_ratio: highest (wait + expected_duration) / expected_duration first (Brinch Hansen's "
        "highest response ratio next: short gangs first, but a long one's ratio grows as it waits, so it "
        "cannot be passed for ever); shortest: shortest expected_duration first; oldest: longest waiting "
        "first. Default response_ratio (docs/objective.md, look-ahead step 5: with "
        "escalated_holds_higher and escalated_ratio_cap, b436b2's largest-class p95 wait 308 h -> 215 h; "
        "shortest first let a stream of shorter 16-GPU gangs pass a 91-hour one for 395-424 h; oldest "
        "first, 247 h).",
    )
    escalated_ratio_cap: StrictFloat | None = Field(
        432_000.0,
        gt=0,
        le=MAX_SECONDS,
        description="Seconds: escalated_order response_ratio counts a longer expected_duration as this "
        "long, so every escalated gang's ratio grows by at least 1 per this many seconds of wait, and "
        "among gangs that would all run longer, the oldest goes first (uncapped, a 475-hour gang's ratio "
        "never caught up with a 320-hour one's). Default 120 h (docs/objective.md, look-ahead step 5: "
        "b436b2's largest-class p95 wait 226 h uncapped, 215 h at 120-168 h, 235 h at 72 h, where it "
        "also caps the 91-hour gangs). null: no cap.",
    )
    escalated_holds_higher: StrictBool = Field(
        True,
        description="Whether the reservation of an escalated gang also keeps off gangs of a higher "
        "priority (below urgent_priority; every priority when that is null) that would not end before it "
        "starts, as it keeps off its own and lower priorities: aging then outranks priority below the "
        "urgent tier. Default true (docs/objective.md, look-ahead step 5: on b436b2, priority-1 16-GPU "
        "gangs arriving later took the nodes held for starving priority-0 ones, which waited 308-395 h; "
        "the price is b436b2's p95 wait, 3.2 h -> 6.3 h). false: only its own and lower priorities.",
    )
    urgent_priority: StrictInt | None = Field(
        2,
        ge=-(2**31),
        le=2**31 - 1,
        description="The first_run_seconds floor yields to pending gangs of this priority or higher when "
        "nothing else can make room for them: when those that do not fit the free room need more GPUs "
        "than the free ones plus those of already evictable lower-priority gangs, first runs below this "
        "priority are evictable however young (min_run_seconds still holds). Default 2, the replays' top "
        "tier (docs/objective.md, look-ahead step 1: b436b2's priority-2 p95 wait 399 s -> 56 s); set "
        "it to your latency-sensitive PriorityClass value. null: the floor holds for every priority.",
    )


DETERMINISTIC_SHARE = 0.3
"""The default ``Policy.work_limit`` as a share of ``time_limit``: CP-SAT's deterministic work
units. One worker stopped by deterministic time gives the same plan on every run; measured
here, a second of wall time buys 0.3 to 0.5 deterministic units, so the deterministic limit
normally binds first and the wall-clock limit is the safety net."""


SOLVE_FLOOR = 0.1
"""The least share of ``time_limit`` a solve gets from :meth:`Policy.after` however long the
parse took: at the XL round's 1.5 s parse a 1 s limit still lets greedy's plan be explained."""


SAFETY_NET = "wall-clock safety net"
"""What a plan's message says when the wall clock cut a solve under ``Policy.deterministic``
(where the clock gates nothing else): that round may not repeat on a rerun."""


class Policy(_Model):
    """How to solve this round."""

    time_limit: StrictFloat = Field(10.0, gt=0, le=1e6, description="Wall-clock seconds for the whole solve.")
    work_limit: StrictFloat | None = Field(
        None,
        gt=0,
        le=1e9,
        description="CP-SAT deterministic work units for all stages (default: 0.3 x time_limit). "
        "A solve that stops on work rather than on the wall clock gives the same plan on every run.",
    )
    deterministic: StrictBool = Field(
        False,
        description="Every gate of the cpsat solver counts deterministic work (CP-SAT's deterministic "
        "time, slot-placer passes, candidates, large-neighbourhood sub-solves, explained gangs), never "
        "the wall clock: the same round and seed give the same plan whatever the machine's load. "
        "time_limit is then only a far safety net; a plan it cut says 'wall-clock safety net' in its "
        "message. Replays set it (with work_limit = 0.3 x the round's budget and time_limit = 4 x). "
        "false: time_limit is held end to end (CLI, service), and a loaded machine may try less.",
    )
    seed: StrictInt = Field(0, ge=0, le=2**31 - 1)
    workers: StrictInt = Field(1, ge=1, le=64, description="CP-SAT workers; 1 is deterministic and fastest on 2 cores.")
    preemption: StrictBool = Field(True, description="Whether running gangs may be preempted or shrunk.")
    hard_limit: StrictBool = Field(
        True,
        description="Run CP-SAT in a child process that is killed shortly after time_limit, so the "
        "call never overruns (the greedy plan is returned then). Models estimated below 5,000 "
        "variables are searched in-process anyway (CP-SAT keeps its own limits on those; a fork "
        "costs about 45 ms). False solves every model in-process: less overhead, but a large "
        "model that overruns can block the caller.",
    )
    now: Seconds | None = Field(None, description="Current time (default: latest submit_time).")
    gap_limit: StrictFloat = Field(
        0.0,
        ge=0,
        le=1,
        description="Relative gap on the plan's total value (priority tiers plus secondary terms, "
        "see Plan.gap) at which the search stops, once every priority tier is proven optimal. "
        "Priority tiers are always searched to proven optimality or the time limit. 0 proves "
        "optimality; 0.005 lets a greedy plan that meets the round's cheap bounds that closely be "
        "returned without building a model, and makes large rounds much faster.",
    )
    weights: Weights = Field(default_factory=Weights)
    lookahead: LookAhead = Field(default_factory=LookAhead)

    @property
    def work(self) -> float:
        """CP-SAT deterministic work units the solve may spend: ``work_limit``, by default
        :data:`DETERMINISTIC_SHARE` x ``time_limit``."""
        return self.work_limit if self.work_limit is not None else DETERMINISTIC_SHARE * self.time_limit

    def after(self, seconds: float) -> Policy:
        """This policy for a solve that starts ``seconds`` into the caller's clock (the command
        line's process start, a service worker's start on the request), so that ``time_limit``
        covers reading and parsing the round too: the limit less ``seconds``, at least
        :data:`SOLVE_FLOOR` of it.

        ``work_limit`` is pinned to :attr:`work` (its default follows ``time_limit``), so a solve
        stopped by work gives the same plan however long the parse took; under ``deterministic``
        nothing changes (the time limit is only a safety net there, and the plan must not depend
        on the machine's speed)."""
        if self.deterministic or seconds <= 0:
            return self
        limit = max(self.time_limit - seconds, SOLVE_FLOOR * self.time_limit)
        return self.model_copy(update={"time_limit": limit, "work_limit": self.work})


class Round(_WithDerived):
    """One scheduling round: the cluster, what runs on it, what waits, and how to decide."""

    api_version: Literal["gangopt/v1"] = "gangopt/v1"
    cluster: Cluster
    queues: list[Queue] = Field(default_factory=list, max_length=MAX_QUEUES, fail_fast=FAIL_FAST)
    cohorts: list[Cohort] = Field(
        default_factory=list,
        max_length=MAX_QUEUES,
        fail_fast=FAIL_FAST,
        description="Cohort trees (Cohort): a queue's cohort may be any node of a tree; reclaim and fair "
        "share run over the whole tree, quotas at every node of it. Empty: every cohort stands alone.",
    )
    running: list[RunningGang] = Field(default_factory=list, max_length=MAX_GANGS, fail_fast=FAIL_FAST)
    pending: list[PendingGang] = Field(default_factory=list, max_length=MAX_GANGS, fail_fast=FAIL_FAST)
    policy: Policy = Field(default_factory=Policy)

    @model_validator(mode="after")
    def _check_references(self) -> Round:
        problems = check_round(self)
        if problems:
            path, message = problems[0]
            listing = "; ".join(f"{p}: {m}" for p, m in problems[:20])
            raise PydanticCustomError(
                "round_invalid",
                "{listing}",
                {"path": path, "message": message, "problems": problems, "listing": listing},
            )
        return self

    @property
    def cohort_roots(self) -> dict[str, str | None]:
        """Per queue, the root of its cohort's tree: the cohort every rule that reads a whole
        cohort (reclaim, fair share, the borrower's view of the peers) reads. A cohort not
        declared in ``cohorts`` stands alone; None: no cohort. Computed on each call (a walk
        over the cohorts: microseconds; readers take it once per solve)."""
        return cohort_roots(self)

    @property
    def now(self) -> float:
        if self.policy.now is not None:
            return self.policy.now
        return max((g.submit_time for g in self.pending), default=0.0)


# ----------------------------------------------------------------------------- plan


class Status(StrEnum):
    """How the plan was obtained."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    FALLBACK = "fallback"
    INFEASIBLE = "infeasible"


class Placement(_Model):
    """One new pod on one node."""

    gang: str
    role: str
    pod: str = Field(description="Pod name: '<gang>-<role>-<index>' for new pods.")
    node: str


class Preemption(_Model):
    """Running pods removed by the plan: a whole gang (``evict``) or elastic surplus (``shrink``)."""

    gang: str
    kind: Literal["evict", "shrink"]
    pods: list[str]
    nodes: list[str]
    priority: int
    cost: float = Field(description="GPU-hours lost (see RunningGang.preemption_cost).")
    for_gangs: list[str] = Field(
        description="Gangs that use the freed capacity and may preempt this one: of higher priority, or "
        "reclaiming their queue's nominal quota (Queue.preemption)."
    )


class Resize(_Model):
    """A running elastic gang that grows or shrinks."""

    gang: str
    from_members: int
    to_members: int


WaitingCode = Literal["capacity", "topology", "quota", "eligibility", "outranked", "group", "policy"]


class Waiting(_Model):
    """A pending gang left waiting, and why, in plain words."""

    gang: str
    code: WaitingCode
    reasons: list[str]


class TierScore(_Model):
    """Value admitted at one priority level (see docs/objective.md)."""

    priority: int
    value: float
    bound: float


class Score(_Model):
    """The lexicographic objective: tiers from the highest priority down, then the rest."""

    tiers: list[TierScore] = Field(default_factory=list)
    secondary: float = 0.0
    secondary_bound: float | None = Field(
        0.0,
        description="Proven bound on the secondary terms (from CP-SAT or the cheap bounds of "
        "gangopt.bounds); null when none is known.",
    )


class Stats(_Model):
    """What the pipeline did and how long each step took."""

    nodes: int = 0
    nodes_pruned: int = 0
    node_classes: int = 0
    gangs: int = 0
    gangs_pruned: int = 0
    variables: int = 0
    constraints: int = 0
    stages: int = 0
    parse_seconds: float = Field(
        0.0,
        description="Wall seconds spent reading and checking the round before the solve (the command line "
        "and the service fill it; 0 when a library caller parsed the round). Not part of total_seconds; "
        "the command line and the service count it in policy.time_limit (the solve gets the rest).",
    )
    prefilter_seconds: float = 0.0
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    total_seconds: float = 0.0
    cpu_seconds: float = Field(
        0.0,
        description="CPU seconds the solve used: this process (all its threads) and the solver's child "
        "processes. Machines are shared, so this, not wall time, compares solvers; solves running "
        "concurrently in one process (the service) are counted together.",
    )


class Plan(_Model):
    """The decision for one round."""

    api_version: Literal["gangopt/v1"] = "gangopt/v1"
    status: Status
    solver: str = "cpsat"
    message: str = ""
    score: Score = Field(default_factory=Score)
    gap: float | None = Field(
        None,
        description="Relative gap of the plan's total value (tier values plus the secondary terms, "
        "all in GPU-equivalents) to the sum of their proven bounds, divided by the total value: "
        "0 = proven optimal. Per-part bounds are in score. Null when no bound is known.",
    )
    admitted: list[str] = Field(
        default_factory=list, max_length=MAX_GANGS, description="Pending gangs started by this plan."
    )
    placements: list[Placement] = Field(default_factory=list, max_length=MAX_PLACEMENTS, fail_fast=FAIL_FAST)
    preemptions: list[Preemption] = Field(default_factory=list, max_length=MAX_GANGS, fail_fast=FAIL_FAST)
    resizes: list[Resize] = Field(default_factory=list, max_length=MAX_GANGS, fail_fast=FAIL_FAST)
    waiting: list[Waiting] = Field(default_factory=list, max_length=MAX_GANGS, fail_fast=FAIL_FAST)
    stats: Stats = Field(default_factory=Stats)


def json_schemas() -> dict[str, Any]:
    """The JSON Schemas of the round and the plan, as ``gangopt schema`` prints them."""
    return {
        "round": Round.model_json_schema(mode="validation"),
        "plan": Plan.model_json_schema(mode="serialization"),
    }
