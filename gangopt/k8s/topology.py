"""Topology levels and each node's domains: from ``--level`` options, a Kueue ``Topology``,
Volcano ``HyperNode`` tiers or the zone label."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from gangopt.k8s.context import Context, Obj, Source, as_count, as_mapping, as_sequence, string_map
from gangopt.k8s.contract import ImportOptions
from gangopt.k8s.nodes import NodeInfo
from gangopt.schema import NODE_LEVEL

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass
class Topology:
    """Levels (name, node label or ``tier<N>``) coarsest first, each node's domains, and how
    peers name levels (node label or Volcano tier) -> gangopt level."""

    levels: list[tuple[str, str]]
    domains: dict[str, dict[str, str]]
    by_label: dict[str, str]
    by_tier: dict[int, str] = field(default_factory=dict)
    kueue_labels: list[str] = field(default_factory=list)
    """The node labels of the Kueue ``Topology`` used, hostname included (for admissions)."""
    koord_layers: dict[str, str] = field(default_factory=dict)
    """Koordinator ``ClusterNetworkTopology`` layer name -> gangopt level (``node`` for the
    layer without a label), for ``network-topology-spec`` gather strategies."""

    def level_of_label(self, label: str) -> str | None:
        return NODE_LEVEL if label == HOSTNAME_LABEL else self.by_label.get(label)

    def levels_names(self) -> list[str]:
        """The level names, coarsest first (without ``node``)."""
        return [name for name, _ in self.levels]


def read_topology(
    ctx: Context, nodes: list[NodeInfo], kinds: dict[str, list[Source]], options: ImportOptions
) -> Topology:
    """Levels from ``options.levels``, else a Kueue ``Topology``, else Volcano ``HyperNode``
    tiers, else a Koordinator ``ClusterNetworkTopology``, else the zone label; the first found
    wins and the others are warned about (a ``ClusterNetworkTopology`` still names the layers
    of Koordinator gather strategies whenever its labels are levels)."""
    hypernodes = kinds.get("HyperNode", [])
    kueue = sorted(kinds.get("Topology", []), key=lambda s: s.name)
    koord = sorted(kinds.get("ClusterNetworkTopology", []), key=lambda s: s.name)
    layers = _koord_layers(ctx, koord[0]) if koord else []
    if options.levels:
        for src in [*kueue, *hypernodes]:
            ctx.warn(src, "ignored: topology levels were given as options")
        found = _label_topology(ctx, nodes, _with_zone(nodes, options.levels))
    elif kueue:
        for src in [*kueue[1:], *hypernodes]:
            ctx.warn(src, f"ignored: topology taken from Topology {kueue[0].name}")
        found = _label_topology(ctx, nodes, _with_zone(nodes, _kueue_levels(ctx, kueue[0])))
        found.kueue_labels = _kueue_labels(kueue[0])
    elif hypernodes:
        found = _hypernode_topology(ctx, nodes, hypernodes)
    else:
        levels: list[tuple[str, str]] = []
        for _, label in layers:
            if label and label != HOSTNAME_LABEL:
                levels.append((_level_name(label, {n for n, _ in levels}), label))
        found = _label_topology(ctx, nodes, _with_zone(nodes, levels))
    for name, label in layers:
        level = found.level_of_label(label) if label else NODE_LEVEL
        if level is not None:
            found.koord_layers[name] = level
    return found


def _koord_layers(ctx: Context, src: Source) -> list[tuple[str, str]]:
    """``spec.hierarchy[]`` as (layerName, labelKey) from the root layer down (the layer
    without a parent first, then each layer's child); the node layer has no label."""
    spec = as_mapping(ctx, src.obj.get("spec"), src.path(".spec"))
    parent: dict[str, str] = {}
    label: dict[str, str] = {}
    for i, layer in enumerate(as_sequence(ctx, spec.get("hierarchy"), src.path(".spec.hierarchy"))):
        entry = as_mapping(ctx, layer, src.path(f".spec.hierarchy[{i}]"))
        name = str(entry.get("layerName", ""))
        if not name:
            ctx.error(src.path(f".spec.hierarchy[{i}].layerName"), "missing")
            continue
        label[name] = str(entry.get("labelKey") or "")
        if entry.get("parentTopologyLayer"):
            parent[name] = str(entry["parentTopologyLayer"])

    def depth(name: str) -> int:
        seen: set[str] = set()
        while name in parent and name not in seen:
            seen.add(name)
            name = parent[name]
        return len(seen)

    return [(name, label[name]) for name in sorted(label, key=lambda n: (depth(n), n))]


def _with_zone(nodes: list[NodeInfo], levels: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The zone label is a level whenever nodes carry it and the caller did not list it."""
    if any(label == ZONE_LABEL for _, label in levels) or not any(ZONE_LABEL in n.labels for n in nodes):
        return levels
    return [("zone", ZONE_LABEL), *levels]


def _kueue_levels(ctx: Context, src: Source) -> list[tuple[str, str]]:
    """``spec.levels[].nodeLabel`` named after the label's last word (``.../topology-block`` ->
    ``block``); the hostname level is gangopt's implicit ``node`` level."""
    spec = as_mapping(ctx, src.obj.get("spec"), src.path(".spec"))
    out: list[tuple[str, str]] = []
    for i, level in enumerate(as_sequence(ctx, spec.get("levels"), src.path(".spec.levels"))):
        label = str(as_mapping(ctx, level, src.path(f".spec.levels[{i}]")).get("nodeLabel", ""))
        if not label:
            ctx.error(src.path(f".spec.levels[{i}].nodeLabel"), "missing")
        elif label != HOSTNAME_LABEL:
            out.append((_level_name(label, {n for n, _ in out}), label))
    return out


def _kueue_labels(src: Source) -> list[str]:
    """``spec.levels[].nodeLabel`` as given, hostname included (already checked by
    :func:`_kueue_levels`)."""
    levels = src.obj.get("spec", {}).get("levels") or []
    return [str(level["nodeLabel"]) for level in levels if isinstance(level, dict) and level.get("nodeLabel")]


def _level_name(label: str, taken: set[str]) -> str:
    word = label.rpartition("/")[2].removeprefix("topology-").removeprefix("topology.") or label
    if label == ZONE_LABEL:
        word = "zone"
    if word in taken or word == NODE_LEVEL:
        word = re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")
    return word


def _label_topology(ctx: Context, nodes: list[NodeInfo], levels: list[tuple[str, str]]) -> Topology:
    """Each node's domain per level is its label value; a node without the label is its own
    domain (warned). Values reused under different parents (rack "1" in two blocks) are
    qualified by their parents' values so the domains form a tree."""
    names = [name for name, _ in levels]
    raw: dict[str, list[str]] = {}
    for node in nodes:
        values = []
        for name, label in levels:
            value = node.labels.get(label)
            if value is None:
                ctx.warn(node.src, f"no label {label!r}: it forms its own {name} domain")
                value = f"{node.name}(no {name})"
            values.append(value)
        raw[node.name] = values
    return Topology(levels, _tree_domains(names, raw), {label: name for name, label in levels})


def _tree_domains(names: list[str], raw: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    qualify = []
    for depth in range(len(names)):
        parents: dict[str, set[tuple[str, ...]]] = defaultdict(set)
        for values in raw.values():
            parents[values[depth]].add(tuple(values[:depth]))
        qualify.append(any(len(p) > 1 for p in parents.values()))
    return {
        node: {
            name: "/".join(values[: depth + 1]) if qualify[depth] else values[depth] for depth, name in enumerate(names)
        }
        for node, values in raw.items()
    }


def _hypernode_topology(ctx: Context, nodes: list[NodeInfo], sources: list[Source]) -> Topology:
    """Volcano HyperNodes: one level per tier (``tier2`` above ``tier1``); a node's domain at a
    tier is the HyperNode of that tier above it. Members match by exact name, regex or labels."""
    tiers: dict[str, int] = {}
    parent: dict[str, str] = {}
    node_parent: dict[str, str] = {}
    hyper_names = {s.name for s in sources}
    for src in sorted(sources, key=lambda s: s.name):
        spec = as_mapping(ctx, src.obj.get("spec"), src.path(".spec"))
        tier = as_count(ctx, spec.get("tier"), src.path(".spec.tier"))
        tiers[src.name] = tier or 1
        for i, m in enumerate(as_sequence(ctx, spec.get("members"), src.path(".spec.members"))):
            member = as_mapping(ctx, m, src.path(f".spec.members[{i}]"))
            is_node = member.get("type", "Node") == "Node"
            candidates = [(n.name, n.labels) for n in nodes] if is_node else [(h, {}) for h in sorted(hyper_names)]
            target = node_parent if is_node else parent
            for name in _members(ctx, src, i, member, candidates):
                target.setdefault(name, src.name)
    levels = [(f"tier{t}", f"tier{t}") for t in sorted(set(tiers.values()), reverse=True)]
    raw: dict[str, list[str]] = {}
    for node in nodes:
        chain: dict[str, str] = {}
        current = node_parent.get(node.name)
        while current is not None and current not in chain.values():
            chain.setdefault(f"tier{tiers[current]}", current)
            current = parent.get(current)
        for name, _ in levels:
            if name not in chain:
                ctx.warn(node.src, f"in no HyperNode of {name}: it forms its own {name} domain")
        raw[node.name] = [chain.get(name, f"{node.name}(no {name})") for name, _ in levels]
    names = [name for name, _ in levels]
    by_tier = {t: f"tier{t}" for t in tiers.values()}
    return Topology(levels, _tree_domains(names, raw), {}, by_tier)


def _members(ctx: Context, src: Source, i: int, member: Obj, candidates: list[tuple[str, dict[str, str]]]) -> list[str]:
    selector = as_mapping(ctx, member.get("selector"), src.path(f".spec.members[{i}].selector"))
    if "exactMatch" in selector:
        name = str(as_mapping(ctx, selector["exactMatch"], src.path(f".spec.members[{i}]")).get("name", ""))
        return [c for c, _ in candidates if c == name]
    if "regexMatch" in selector:
        pattern = str(as_mapping(ctx, selector["regexMatch"], src.path(f".spec.members[{i}]")).get("pattern", ""))
        try:
            regex = re.compile(pattern)
        except re.error as error:
            ctx.error(src.path(f".spec.members[{i}].selector.regexMatch.pattern"), f"bad regex: {error}")
            return []
        return [c for c, _ in candidates if regex.search(c)]
    if "labelMatch" in selector:
        match = string_map(as_mapping(ctx, selector["labelMatch"], src.path(f".spec.members[{i}]")).get("matchLabels"))
        return [c for c, labels in candidates if all(labels.get(k) == v for k, v in match.items())]
    ctx.warn(src, f"members[{i}] has no exactMatch, regexMatch or labelMatch selector: ignored")
    return []
