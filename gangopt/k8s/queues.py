"""Queues: Kueue ClusterQueues (via LocalQueues), Koordinator ElasticQuotas and Volcano Queues."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from gangopt.checks import MAX_LENDING
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
from gangopt.k8s.kinds import KOORD_QUOTA_IS_PARENT, KOORD_QUOTA_LABEL, KOORD_QUOTA_PARENT, KUEUE
from gangopt.k8s.pods import Pod
from gangopt.quantities import MILLI
from gangopt.schema import MAX_WEIGHT, BorrowWithinCohort, Cohort, PendingGang, Queue, QueuePreemption, RunningGang

KUEUE_POLICIES = {
    "Never": "never",
    "LowerPriority": "lower_priority",
    "Any": "any",
    "LowerOrNewerEqualPriority": "lower_or_newer_equal_priority",
}
"""Kueue's preemption policy values -> gangopt's (``Queue.preemption``)."""
VOLCANO_ROOT = "volcano-root"
"""The cohort of the Volcano queues outside a hierarchy: Volcano's root queue."""
KOORD_ROOT = "koordinator-root"
"""The cohort of the ElasticQuotas without a parent quota: Koordinator's root quota."""
VOLCANO_PREEMPTION = QueuePreemption(within_queue="lower_priority", reclaim_within_cohort="any", other_queues="never")
"""Volcano's actions: ``preempt`` only inside a queue (lower priority), ``reclaim`` across queues
only from queues above their share, at any priority (reclaimable victims are chosen by queue
share, not priority)."""
KOORDINATOR_PREEMPTION = QueuePreemption(
    within_queue="lower_priority",
    reclaim_within_cohort="any",
    borrow_within_cohort=BorrowWithinCohort(policy="never"),
    other_queues="never",
)
"""Koordinator's ElasticQuota: priorities are compared only inside a quota (no victim from
another quota by priority); the quota-overuse revoke controller evicts pods of a quota that
uses more than its runtime quota, whatever their priority, once another quota's demand
within its min claims it back: a reclaim at any priority by a quota within its min, never by
one that borrows (its runtime quota gives it nothing beyond what is idle)."""


@dataclass(frozen=True)
class _VolcanoQueue:
    """A Volcano Queue outside a hierarchy, as read (milli-units)."""

    src: Source
    weight: float
    capability: dict[str, int]
    deserved: dict[str, int] | None
    guarantee: dict[str, int]
    reclaimable: bool = True


def _water_fill(total: int, weights: Mapping[str, float], caps: Mapping[str, int | None]) -> dict[str, int]:
    """``total`` shared by ``weights``, no one above its cap (None: none), what a capped one
    leaves going to the others by weight (Volcano's proportion plugin without requests)."""
    out = {name: 0 for name in weights}
    active = {name for name, w in weights.items() if w > 0}
    left = total
    while active:
        scale = sum(weights[n] for n in active)
        capped = {n for n in active if (cap := caps.get(n)) is not None and cap <= left * weights[n] / scale}
        if not capped:
            for n in active:
                out[n] = int(left * weights[n] / scale)
            break
        for n in sorted(capped):
            out[n] = int(caps[n] or 0)
            left -= out[n]
        active -= capped
    return out


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
        self.cohort_specs: dict[str, Cohort] = {}
        """Kueue Cohort objects and Volcano hierarchy levels as ``Round.cohorts`` entries."""
        self.volcano: dict[str, _VolcanoQueue] = {}
        """Volcano queues outside a hierarchy, built once the cluster's capacity is known."""
        self.koord_root_min: dict[str, int] = {}
        """Σ min per resource of the ElasticQuotas directly under Koordinator's root quota."""
        self.koord_child_min: dict[str, dict[str, int]] = defaultdict(dict)
        """Per parent quota name, Σ min per resource of the ElasticQuotas labelled its children."""
        self.koord_parents: dict[str, tuple[Source, str, dict[str, int], dict[str, int]]] = {}
        """ElasticQuotas labelled ``is-parent``: (object, parent cohort, min, max - min)."""
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

    def _resource_groups(
        self, src: Source, spec: dict[str, object], flavors: dict[str, list[str]] | None = None
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]]:
        """``spec.resourceGroups`` of a ClusterQueue or Cohort: nominalQuota summed over groups
        and flavors per resource; borrowingLimit and lendingLimit likewise, unlimited (left
        out) when one flavor sets none; and per resource some flavor sets a lendingLimit for,
        what the flavors keep back (Σ nominalQuota - lendingLimit over the flavors that set
        one: a ClusterQueue's flavor without a lendingLimit lends all its quota). A
        lendingLimit above its nominalQuota is an error (Kueue's webhook rejects it). Several
        flavors of one resource are warned: gangopt has no flavors. ``flavors`` collects each
        resource's flavors in order."""
        nominal: dict[str, int] = {}
        kept: dict[str, int] = {}
        limits: dict[str, dict[str, int]] = {"borrowingLimit": {}, "lendingLimit": {}}
        unlimited: dict[str, set[str]] = {"borrowingLimit": set(), "lendingLimit": set()}
        offered: dict[str, list[str]] = defaultdict(list)
        for g, group in enumerate(as_sequence(self.ctx, spec.get("resourceGroups"), src.path(".spec.resourceGroups"))):
            gpath = src.path(f".spec.resourceGroups[{g}]")
            for f, flavor in enumerate(as_sequence(self.ctx, as_mapping(self.ctx, group, gpath).get("flavors"), gpath)):
                fpath = f"{gpath}.flavors[{f}]"
                flavor_map = as_mapping(self.ctx, flavor, fpath)
                for r, res in enumerate(as_sequence(self.ctx, flavor_map.get("resources"), f"{fpath}.resources")):
                    rpath = f"{fpath}.resources[{r}]"
                    entry = as_mapping(self.ctx, res, rpath)
                    if flavors is not None:
                        flavors.setdefault(str(entry.get("name", "")), []).append(str(flavor_map.get("name", "")))
                    name = resource_name(str(entry.get("name", "")))
                    offered[name].append(str(flavor_map.get("name", "")))
                    amount = as_quantity(self.ctx, entry.get("nominalQuota", 0), f"{rpath}.nominalQuota")
                    nominal[name] = nominal.get(name, 0) + amount
                    values: dict[str, int] = {}
                    for key, summed in limits.items():
                        if entry.get(key) is None:
                            unlimited[key].add(name)
                        else:
                            values[key] = as_quantity(self.ctx, entry[key], f"{rpath}.{key}")
                            summed[name] = summed.get(name, 0) + values[key]
                    if "lendingLimit" in values:
                        if values["lendingLimit"] > amount:
                            self.ctx.error(f"{rpath}.lendingLimit", "must be less than or equal to the nominalQuota")
                        kept[name] = kept.get(name, 0) + max(0, amount - values["lendingLimit"])
        for name, names in sorted(offered.items()):
            if len(names) > 1:
                self.ctx.warn(
                    src,
                    f"{name} quotas of flavors {', '.join(names)} summed: gangopt has no flavors (a gang may use "
                    "any mix of them, where Kueue gives each pod set one flavor)",
                )
        borrow, lend = ({r: v for r, v in limits[k].items() if r not in unlimited[k]} for k in limits)
        return nominal, borrow, lend, kept

    def _weight(self, src: Source, spec: dict[str, object]) -> float | None:
        """``spec.fairSharing.weight`` (a Quantity: "2", "500m"), None when unset."""
        sharing = as_mapping(self.ctx, spec.get("fairSharing"), src.path(".spec.fairSharing"))
        if sharing.get("weight") is None:
            return None
        return as_quantity(self.ctx, sharing["weight"], src.path(".spec.fairSharing.weight")) / MILLI

    def _cluster_queue(self, src: Source) -> None:
        """nominalQuota summed over resource groups and flavors; the borrowing limit likewise,
        unlimited when one flavor sets none; the lending limit as the nominal minus what the
        flavors keep back (``Queue.lending_limit``; without a cohort there is no one to lend
        to: warned, left out, as Kueue's webhook requires it nil then)."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        nominal, limits, _, kept = self._resource_groups(src, spec, self.flavors.setdefault(src.name, {}))
        cohort = spec.get("cohort") or spec.get("cohortName") or None
        if kept and cohort is None:
            self.ctx.warn(src, "lendingLimit ignored: a ClusterQueue without a cohort lends to no one")
            kept = {}
        weight = self._weight(src, spec)
        self.queues[src.name] = Queue(
            name=src.name,
            cohort=cohort,
            nominal=quantities(nominal),
            borrowing_limit=quantities(limits),
            lending_limit=quantities({r: max(0, nominal[r] - keep) for r, keep in kept.items()}),
            weight=weight,
            preemption=self._kueue_preemption(src, spec.get("preemption")),
        )

    def _kueue_cohort(self, src: Source) -> None:
        """A Kueue Cohort: its ``spec.parentName`` makes the cohort tree (``Round.cohorts``; a
        parent without a Cohort object is a root, Kueue's default cohort), its
        ``spec.resourceGroups`` its own quota, borrowing and lending limits (summed over
        flavors), ``spec.fairSharing.weight`` its fair-share weight (docs/rules.md, rule 6).
        Limits on a cohort without parent have no one to borrow from or lend to: warned, left
        out."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec")) if src.obj.get("spec") is not None else {}
        parent = spec.get("parentName")
        if parent is not None and (not isinstance(parent, str) or not parent):
            self.ctx.error(src.path(".spec.parentName"), f"not a cohort name: {parent!r}")
            parent = None
        self.cohorts[src.name] = parent or None
        nominal, borrow, lend, _ = self._resource_groups(src, spec)
        if not parent and (borrow or lend):
            self.ctx.warn(src, "borrowingLimit and lendingLimit ignored: a cohort without parentName is a root")
            borrow, lend = {}, {}
        self.cohort_specs[src.name] = Cohort(
            name=src.name,
            parent=parent or None,
            nominal=quantities(nominal),
            borrowing_limit=quantities(borrow),
            lending_limit=quantities(lend),
            weight=self._weight(src, spec),
        )
        for key in sorted(set(spec) - {"parentName", "resourceGroups", "fairSharing"}):
            self.ctx.warn(src, f"spec.{key} ignored")

    def _check_cohort_cycles(self, sources: list[Source]) -> None:
        """A cycle of parents is an error (Kueue disables every member of such a cohort)."""
        for src in sources:
            seen, node = {src.name}, self.cohorts.get(src.name)
            while node is not None and node not in seen:
                seen.add(node)
                node = self.cohorts.get(node)
            if node == src.name:
                self.ctx.error(src.path(".spec.parentName"), f"cohort {src.name} is its own ancestor (a cycle)")

    def build_cohorts(self, capacity: Mapping[str, int] | None = None) -> list[Cohort]:
        """The cohort trees of the Kueue Cohort objects and the Volcano hierarchies (parents
        without an object are roots); Koordinator's parent quotas (``is-parent``) as cohorts
        whose subtree is guaranteed their min (their own nominal is what their children's mins
        leave of it) and may use up to their max (``borrowing_limit`` max - min); and
        Koordinator's root quota, whose total is the
        cluster's ``capacity`` (milli-units per resource): it holds what the mins leave, so a
        quota borrows idle capacity up to its max even where the mins sum to less than the
        cluster (min 0, max 8 runs 8 on an idle cluster)."""
        specs = dict(self.cohort_specs)
        for name, (src, parent, low, borrow) in sorted(self.koord_parents.items()):
            below = self.koord_child_min.get(name, {})
            over = sorted(r for r, amount in below.items() if amount > low.get(r, 0))
            if over:
                self.ctx.warn(src, f"its children's mins exceed its min on {', '.join(over)}: the children's count")
            own = {r: max(0, amount - below.get(r, 0)) for r, amount in low.items()}
            specs[name] = Cohort(name=name, parent=parent, nominal=quantities(own), borrowing_limit=quantities(borrow))
        if self.koord_root_min and KOORD_ROOT not in specs:
            total = capacity or {}
            spare = {r: max(0, total.get(r, 0) - low) for r, low in self.koord_root_min.items()}
            specs[KOORD_ROOT] = Cohort(name=KOORD_ROOT, nominal=quantities(spare))
        for c in list(specs.values()):
            if c.parent is not None and c.parent not in specs:
                specs[c.parent] = Cohort(name=c.parent)
        return [specs[name] for name in sorted(specs)]

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
        """min -> nominal (0 for a resource only ``max`` lists), max - min -> borrowing limit,
        inside the cohort of its parent quota, or Koordinator's root quota (:meth:`build_cohorts`
        gives it the cluster's capacity beyond the mins, which any quota may borrow). A parent
        quota (``is-parent: "true"``, which holds no pods) becomes that cohort."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        low = as_resources(self.ctx, spec.get("min"), src.path(".spec.min"))
        high = as_resources(self.ctx, spec.get("max"), src.path(".spec.max"))
        low = {r: low.get(r, 0) for r in sorted(set(low) | set(high))}
        borrow = {r: max(0, high[r] - low[r]) for r in high}
        cohort = src.labels.get(KOORD_QUOTA_PARENT) or KOORD_ROOT
        mins = self.koord_root_min if cohort == KOORD_ROOT else self.koord_child_min[cohort]
        for r, amount in low.items():
            mins[r] = mins.get(r, 0) + amount
        if src.labels.get(KOORD_QUOTA_IS_PARENT) == "true":
            self.koord_parents[src.name] = (src, cohort, low, borrow)
            return
        self.queues[src.name] = Queue(
            name=src.name,
            cohort=cohort,
            nominal=quantities(low),
            borrowing_limit=quantities(borrow),
            preemption=KOORDINATOR_PREEMPTION,
        )
        self.ctx.warn(
            src,
            "revoke mapped as reclaim at any priority by quotas within their min from quotas above theirs "
            "(runtime quota by shared-weight and delayEvictTime are not: a quota above its min may lose it all)",
        )
        self.quota_by_namespace[src.namespace].append(src.name)

    def _volcano_queue(self, src: Source) -> None:
        """A queue in a ``volcano.sh/hierarchy``: ``capability`` is a hard cap inside the cohort
        tree of its hierarchy, with no borrowing (:meth:`_volcano_hierarchy`). Any other Volcano
        queue shares Volcano's root queue with the others, as the proportion plugin and the
        reclaim action read them (:meth:`_volcano_shares`, once the cluster's capacity is known)."""
        spec = as_mapping(self.ctx, src.obj.get("spec"), src.path(".spec"))
        capability = as_resources(self.ctx, spec.get("capability"), src.path(".spec.capability"))
        cohort, weight = self._volcano_hierarchy(src)
        reclaimable = self._volcano_reclaimable(src, spec)
        if cohort is not None:
            ignored = sorted(k for k in ("weight", "guarantee", "deserved", "parent") if k in spec)
            if ignored:
                self.ctx.warn(src, f"{', '.join(ignored)} ignored in a hierarchy (only capability is mapped)")
            self.queues[src.name] = Queue(
                name=src.name,
                cohort=cohort,
                nominal=quantities(capability),
                borrowing_limit=quantities({r: 0 for r in capability}),
                weight=weight,
                reclaimable=reclaimable,
                preemption=VOLCANO_PREEMPTION,
            )
            return
        raw_weight = spec.get("weight", 1)
        if isinstance(raw_weight, bool) or not isinstance(raw_weight, int | float) or not 0 <= raw_weight <= MAX_WEIGHT:
            self.ctx.warn(src, f"weight {raw_weight!r} is not a number in [0, {MAX_WEIGHT:g}]: 1 used")
            raw_weight = 1
        guarantee_spec = as_mapping(self.ctx, spec.get("guarantee"), src.path(".spec.guarantee"))
        self.volcano[src.name] = _VolcanoQueue(
            src=src,
            weight=float(raw_weight),
            capability=capability,
            deserved=as_resources(self.ctx, spec.get("deserved"), src.path(".spec.deserved"))
            if spec.get("deserved") is not None
            else None,
            guarantee=as_resources(self.ctx, guarantee_spec.get("resource"), src.path(".spec.guarantee.resource")),
            reclaimable=reclaimable,
        )
        if "parent" in spec:
            self.ctx.warn(src, "parent ignored (use volcano.sh/hierarchy)")

    def _volcano_shares(self, capacity: Mapping[str, int]) -> None:
        """Volcano queues outside a hierarchy, as the proportion plugin and the reclaim action
        read them: every one in the cohort ``VOLCANO_ROOT``; ``nominal`` its deserved share
        (``deserved`` when set, the capacity plugin's; else the cluster's capacity water-filled
        by ``weight`` and clipped to ``capability``, the proportion plugin's share when every
        queue wants more than it, warned: proportion also clips to what a queue requests) and
        at least its ``guarantee``; ``borrowing_limit`` the rest of its ``capability``;
        ``lending_limit`` its nominal minus its ``guarantee`` (a guarantee is not lent). The
        reclaim action takes back, at any priority, what a queue uses above its deserved share
        (``reclaim_within_cohort: any``)."""
        if not self.volcano:
            return
        resources = sorted(r for r in capacity if r != "pods")
        shares: dict[str, dict[str, int]] = {name: {} for name in self.volcano}
        for r in resources:
            caps = {n: v.capability.get(r) for n, v in self.volcano.items() if v.deserved is None}
            filled = _water_fill(capacity[r], {n: self.volcano[n].weight for n in caps}, caps)
            for n, amount in filled.items():
                shares[n][r] = amount
        lending = 0
        for name, v in sorted(self.volcano.items()):
            if v.deserved is None:
                self.ctx.warn(
                    v.src,
                    "deserved share from weight over the cluster's capacity (proportion clips it to what the queue "
                    "requests, gangopt does not)",
                )
            nominal = dict(v.deserved) if v.deserved is not None else shares[name]
            for r, amount in v.guarantee.items():
                nominal[r] = max(nominal.get(r, 0), amount)
            for r, cap in v.capability.items():  # capability caps all (Volcano refuses deserved above it)
                if nominal.get(r, 0) > cap:
                    self.ctx.warn(v.src, f"deserved or guarantee of {r} above its capability: capped")
                nominal[r] = min(nominal.get(r, 0), cap)
            borrow = {r: max(0, cap - nominal[r]) for r, cap in v.capability.items()}
            lend = {r: max(0, nominal[r] - amount) for r, amount in v.guarantee.items() if amount > 0 and r in nominal}
            if lend and lending >= MAX_LENDING:
                self.ctx.warn(v.src, f"guarantee not mapped: at most {MAX_LENDING} queues may keep quota back")
                lend = {}
            lending += bool(lend)
            self.queues[name] = Queue(
                name=name,
                cohort=VOLCANO_ROOT,
                nominal=quantities(nominal),
                borrowing_limit=quantities(borrow),
                lending_limit=quantities(lend),
                weight=v.weight,
                reclaimable=v.reclaimable,
                preemption=VOLCANO_PREEMPTION,
            )

    def _volcano_reclaimable(self, src: Source, spec: Mapping[str, object]) -> bool:
        """``spec.reclaimable`` (default true): false keeps other queues' reclaims off the queue."""
        value = spec.get("reclaimable", True)
        if not isinstance(value, bool):
            self.ctx.warn(src, f"reclaimable {value!r} is not true or false: true used")
            return True
        return value

    def _volcano_hierarchy(self, src: Source) -> tuple[str | None, float | None]:
        """``volcano.sh/hierarchy: root/eng/prod`` with ``volcano.sh/hierarchy-weights: 1/2/8``
        (Volcano's hierarchical DRF): every prefix but the whole path is a cohort named by its
        path (``root``, ``root/eng``) with the weight of its level, the queue sits in the
        longest one with the last weight. Weights share deserved capacity down the tree as
        gangopt's fair share does (docs/objective.md); the queue's ``capability`` stays a hard
        cap (``borrowing_limit`` 0). Returns the queue's cohort and weight (None, None without
        a hierarchy)."""
        path_text = src.annotations.get("volcano.sh/hierarchy")
        weights_text = src.annotations.get("volcano.sh/hierarchy-weights")
        if path_text is None:
            if weights_text is not None:
                self.ctx.warn(src, "volcano.sh/hierarchy-weights ignored without volcano.sh/hierarchy")
            return None, None
        levels = [p for p in path_text.strip("/").split("/") if p]
        if len(levels) < 2:
            self.ctx.warn(src, f"volcano.sh/hierarchy {path_text!r} has no level above the queue: it stands alone")
            return None, None
        weights: list[float | None] = [None] * len(levels)
        if weights_text is not None:
            try:
                parsed = [float(w) for w in weights_text.strip("/").split("/")]
            except ValueError:
                parsed = []
            if len(parsed) != len(levels) or any(not 0 <= w <= MAX_WEIGHT for w in parsed):
                self.ctx.warn(
                    src,
                    f"volcano.sh/hierarchy-weights {weights_text!r} is not one weight in [0, {MAX_WEIGHT:g}] per level "
                    f"of {path_text!r}: every level weighs 1",
                )
            else:
                weights = list(parsed)
        parent: str | None = None
        for depth in range(1, len(levels)):
            name = "/".join(levels[:depth])
            cohort = Cohort(name=name, parent=parent, weight=weights[depth - 1] if parent is not None else None)
            known = self.cohort_specs.setdefault(name, cohort)
            if known != cohort:
                self.ctx.warn(src, f"volcano.sh/hierarchy level {name!r} differs from another queue's: the first kept")
            parent = name
        self.ctx.warn(
            src,
            "volcano.sh/hierarchy mapped to a cohort tree with its weights as fair-share weights; Volcano's reclaim "
            "by hierarchical deserved share is not: capability stays a hard cap (borrowing_limit 0)",
        )
        return parent, weights[-1]

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

    def build(
        self, running: list[RunningGang], pending: list[PendingGang], capacity: Mapping[str, int] | None = None
    ) -> list[Queue]:
        """The queues; a queue named by a gang but absent from the input is added without
        limits (warned), since the round requires every gang's queue to exist. ``capacity``
        (the cluster's, milli-units per resource) gives Volcano queues their deserved shares."""
        self._volcano_shares(capacity or {})
        if not self.queues:
            return []
        out = dict(self.queues)
        for gang in [*running, *pending]:
            if gang.queue not in out:
                self.ctx.warn(f"queue {gang.queue}", f"no quota object in the input (gang {gang.name}): unlimited")
                out[gang.queue] = Queue(name=gang.queue)
        return [out[k] for k in sorted(out)]
