"""Queues: Kueue ClusterQueues (via LocalQueues), Koordinator ElasticQuotas and Volcano Queues."""

from __future__ import annotations

from collections import defaultdict

from gangopt.k8s.context import (
    Context,
    Source,
    as_mapping,
    as_quantity,
    as_resources,
    as_sequence,
    quantities,
    resource_name,
)
from gangopt.k8s.kinds import KOORD_QUOTA_LABEL, KOORD_QUOTA_PARENT, KUEUE
from gangopt.k8s.pods import Pod
from gangopt.quantities import MILLI
from gangopt.schema import BorrowWithinCohort, Cohort, PendingGang, Queue, QueuePreemption, RunningGang

KUEUE_POLICIES = {
    "Never": "never",
    "LowerPriority": "lower_priority",
    "Any": "any",
    "LowerOrNewerEqualPriority": "lower_or_newer_equal_priority",
}
"""Kueue's preemption policy values -> gangopt's (``Queue.preemption``)."""
VOLCANO_PREEMPTION = QueuePreemption(within_queue="lower_priority", reclaim_within_cohort="any", other_queues="never")
"""Volcano's actions: ``preempt`` only inside a queue (lower priority), ``reclaim`` across queues
only from queues above their share, at any priority (reclaimable victims are chosen by queue
share, not priority)."""
KOORDINATOR_PREEMPTION = QueuePreemption(
    within_queue="lower_priority",
    reclaim_within_cohort="never",
    borrow_within_cohort=BorrowWithinCohort(policy="never"),
    other_queues="never",
)
"""Koordinator's coscheduling preemption: priorities are compared only inside an ElasticQuota,
no victim from another quota."""


class Queues:
    """Kueue ClusterQueues (via LocalQueues), Koordinator ElasticQuotas and Volcano Queues."""

    def __init__(self, ctx: Context, kinds: dict[str, list[Source]]) -> None:
        self.ctx = ctx
        self.queues: dict[str, Queue] = {}
        self.local: dict[tuple[str, str], str] = {}
        self.quota_by_namespace: dict[str, list[str]] = defaultdict(list)
        self.flavors: dict[str, dict[str, list[str]]] = {}
        """Per ClusterQueue, per resource (Kubernetes name), its flavors in order (for admissions)."""
        self.cohorts: dict[str, str | None] = {}
        """Kueue Cohort objects: name -> parent (``spec.parentName``)."""
        for src in kinds.get("Cohort", []):
            self._kueue_cohort(src)
        self._check_cohort_cycles(kinds.get("Cohort", []))
        for src in kinds.get("ClusterQueue", []):
            self._cluster_queue(src)
        for src in kinds.get("LocalQueue", []):
            spec = as_mapping(ctx, src.obj.get("spec"), src.path(".spec"))
            self.local[(src.namespace, src.name)] = str(spec.get("clusterQueue", ""))
        for src in kinds.get("ElasticQuota", []):
            self._elastic_quota(src)
        for src in kinds.get("Queue", []):
            self._volcano_queue(src)

    def _cluster_queue(self, src: Source) -> None:
        """nominalQuota summed over resource groups and flavors; the borrowing limit likewise,
        unlimited when one flavor sets none."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        nominal: dict[str, int] = {}
        borrow: dict[str, int] = {}
        unlimited: set[str] = set()
        for g, group in enumerate(as_sequence(self.ctx, spec.get("resourceGroups"), src.path(".spec.resourceGroups"))):
            gpath = src.path(f".spec.resourceGroups[{g}]")
            for f, flavor in enumerate(as_sequence(self.ctx, as_mapping(self.ctx, group, gpath).get("flavors"), gpath)):
                fpath = f"{gpath}.flavors[{f}]"
                flavor_map = as_mapping(self.ctx, flavor, fpath)
                for r, res in enumerate(as_sequence(self.ctx, flavor_map.get("resources"), f"{fpath}.resources")):
                    rpath = f"{fpath}.resources[{r}]"
                    entry = as_mapping(self.ctx, res, rpath)
                    offered = self.flavors.setdefault(src.name, {}).setdefault(str(entry.get("name", "")), [])
                    offered.append(str(flavor_map.get("name", "")))
                    name = resource_name(str(entry.get("name", "")))
                    nominal[name] = nominal.get(name, 0) + as_quantity(
                        self.ctx, entry.get("nominalQuota", 0), f"{rpath}.nominalQuota"
                    )
                    if entry.get("borrowingLimit") is None:
                        unlimited.add(name)
                    else:
                        limit = as_quantity(self.ctx, entry["borrowingLimit"], f"{rpath}.borrowingLimit")
                        borrow[name] = borrow.get(name, 0) + limit
                    if entry.get("lendingLimit") is not None:
                        self.ctx.warn(src, f"lendingLimit of {name} ignored")
        cohort = spec.get("cohort") or spec.get("cohortName") or None
        limits = {r: v for r, v in borrow.items() if r not in unlimited}
        sharing = as_mapping(self.ctx, spec.get("fairSharing"), src.path(".spec.fairSharing"))
        weight = None
        if sharing.get("weight") is not None:  # a Quantity: "2", "500m"
            weight = as_quantity(self.ctx, sharing["weight"], src.path(".spec.fairSharing.weight")) / MILLI
        self.queues[src.name] = Queue(
            name=src.name,
            cohort=cohort,
            nominal=quantities(nominal),
            borrowing_limit=quantities(limits),
            weight=weight,
            preemption=self._kueue_preemption(src, spec.get("preemption")),
        )

    def _kueue_cohort(self, src: Source) -> None:
        """A Kueue Cohort: its ``spec.parentName`` makes the cohort tree (``Round.cohorts``; a
        parent without a Cohort object is a root, Kueue's default cohort). Its own quota,
        borrowing and lending limits and fair sharing are outside gangopt's supported subset
        (docs/rules.md, rule 6): warned and left out."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec")) if src.obj.get("spec") is not None else {}
        parent = spec.get("parentName")
        if parent is not None and (not isinstance(parent, str) or not parent):
            self.ctx.error(src.path(".spec.parentName"), f"not a cohort name: {parent!r}")
            parent = None
        self.cohorts[src.name] = parent or None
        for key in sorted(set(spec) - {"parentName"}):
            self.ctx.warn(
                src,
                f"spec.{key} ignored: a cohort's own quota, borrowing and lending limits and fair sharing are not "
                "supported; its ClusterQueues share their own nominal quotas over the whole cohort tree",
            )

    def _check_cohort_cycles(self, sources: list[Source]) -> None:
        """A cycle of parents is an error (Kueue disables every member of such a cohort)."""
        for src in sources:
            seen, node = {src.name}, self.cohorts.get(src.name)
            while node is not None and node not in seen:
                seen.add(node)
                node = self.cohorts.get(node)
            if node == src.name:
                self.ctx.error(src.path(".spec.parentName"), f"cohort {src.name} is its own ancestor (a cycle)")

    def build_cohorts(self) -> list[Cohort]:
        """The cohort tree of the Kueue Cohort objects (parents without an object are roots)."""
        parents = dict(self.cohorts)
        for parent in list(parents.values()):
            if parent is not None and parent not in parents:
                parents[parent] = None
        return [Cohort(name=name, parent=parent) for name, parent in sorted(parents.items())]

    def _kueue_preemption(self, src: Source, value: object) -> QueuePreemption:
        """``spec.preemption`` -> ``Queue.preemption``, Kueue's defaults (every knob Never) where
        a field is absent; a ClusterQueue never preempts in queues outside its cohort."""
        path = src.path(".spec.preemption")
        spec = as_mapping(self.ctx, value, path) if value is not None else {}
        within = spec.get("withinClusterQueue")
        borrow_spec = spec.get("borrowWithinCohort")
        borrow = as_mapping(self.ctx, borrow_spec, f"{path}.borrowWithinCohort") if borrow_spec is not None else {}
        threshold = borrow.get("maxPriorityThreshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)):
            self.ctx.warn(src, f"borrowWithinCohort.maxPriorityThreshold {threshold!r} is not an integer: ignored")
            threshold = None
        for key in sorted(set(spec) - {"withinClusterQueue", "reclaimWithinCohort", "borrowWithinCohort"}):
            self.ctx.warn(src, f"preemption.{key} ignored")
        return QueuePreemption.model_validate(
            {
                "within_queue": self._kueue_value(
                    src, "withinClusterQueue", within, ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
                ),
                "reclaim_within_cohort": self._kueue_value(
                    src, "reclaimWithinCohort", spec.get("reclaimWithinCohort"), ("Never", "LowerPriority", "Any")
                ),
                "borrow_within_cohort": {
                    "policy": self._kueue_value(
                        src, "borrowWithinCohort.policy", borrow.get("policy"), ("Never", "LowerPriority")
                    ),
                    "max_priority_threshold": threshold,
                },
                "other_queues": "never",
            }
        )

    def _kueue_value(self, src: Source, key: str, value: object, allowed: tuple[str, ...]) -> str:
        """A Kueue policy value as gangopt's; Kueue's default ``never`` when absent, or unknown (warned)."""
        if value is None:
            return "never"
        if value not in allowed:
            self.ctx.warn(src, f"preemption.{key} {value!r} is not one of {', '.join(allowed)}: Never used")
            return "never"
        return KUEUE_POLICIES[str(value)]

    def _elastic_quota(self, src: Source) -> None:
        """min -> nominal, max - min -> borrowing limit, inside the cohort of its parent quota."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        low = as_resources(self.ctx, spec.get("min"), src.path(".spec.min"))
        high = as_resources(self.ctx, spec.get("max"), src.path(".spec.max"))
        borrow = {r: max(0, high[r] - low.get(r, 0)) for r in high}
        cohort = src.labels.get(KOORD_QUOTA_PARENT) or "koordinator-root"
        self.queues[src.name] = Queue(
            name=src.name,
            cohort=cohort,
            nominal=quantities(low),
            borrowing_limit=quantities(borrow),
            preemption=KOORDINATOR_PREEMPTION,
        )
        self.ctx.warn(
            src,
            "the revoke of pods above a quota's runtime share is not mapped: no victims from another quota "
            "(Queue.preemption other_queues and reclaim_within_cohort never)",
        )
        self.quota_by_namespace[src.namespace].append(src.name)

    def _volcano_queue(self, src: Source) -> None:
        """``capability`` is a hard cap: nominal quota outside any cohort."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        capability = as_resources(self.ctx, spec.get("capability"), src.path(".spec.capability"))
        ignored = sorted(k for k in ("weight", "guarantee", "deserved", "reclaimable", "parent") if k in spec)
        if ignored:
            self.ctx.warn(src, f"{', '.join(ignored)} ignored (only capability is mapped)")
        hierarchy = sorted(k for k in src.annotations if k in ("volcano.sh/hierarchy", "volcano.sh/hierarchy-weights"))
        if hierarchy:
            self.ctx.warn(
                src,
                f"{', '.join(hierarchy)} ignored: Volcano's hierarchy shares deserved capacity down the tree by "
                "the hierarchy weights, which a gangopt cohort tree (Round.cohorts: borrowing of nominal quota) "
                "does not express; each queue stands alone",
            )
        self.queues[src.name] = Queue(name=src.name, nominal=quantities(capability), preemption=VOLCANO_PREEMPTION)
        self.ctx.warn(
            src,
            "reclaim from queues above their deserved share is not mapped: the queue has no cohort "
            "(capability is its nominal), so only preempt within the queue applies",
        )

    def local_queue(self, src: Source, namespace: str, name: str) -> str:
        """A LocalQueue name -> its ClusterQueue (warned and kept as is when unknown)."""
        target = self.local.get((namespace, name))
        if target is None:
            self.ctx.warn(src, f"LocalQueue {namespace}/{name} not in the input; queue {name!r} used")
            return name
        return target

    def of_pod(self, pod: Pod) -> str | None:
        labels = pod.src.labels
        if KUEUE + "queue-name" in labels:
            return self.local_queue(pod.src, pod.src.namespace, labels[KUEUE + "queue-name"])
        if KOORD_QUOTA_LABEL in labels:
            return labels[KOORD_QUOTA_LABEL]
        quotas = self.quota_by_namespace.get(pod.src.namespace, [])
        return quotas[0] if len(quotas) == 1 else None

    def build(self, running: list[RunningGang], pending: list[PendingGang]) -> list[Queue]:
        """The queues; a queue named by a gang but absent from the input is added without
        limits (warned), since the round requires every gang's queue to exist."""
        if not self.queues:
            return []
        out = dict(self.queues)
        for gang in [*running, *pending]:
            if gang.queue not in out:
                self.ctx.warn(f"queue {gang.queue}", f"no quota object in the input (gang {gang.name}): unlimited")
                out[gang.queue] = Queue(name=gang.queue)
        return [out[k] for k in sorted(out)]
