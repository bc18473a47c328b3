"""The cluster's topology as a tree of domains (networkx), and array views of it.

The tree runs root -> broadest level (e.g. zone) -> ... -> narrowest (rack) -> node. A node's
distance to another is the number of levels one climbs to their lowest common domain, so
same node = 0, same rack = 1, same block = 2, ... This is what "pack tightly" means.
"""

from __future__ import annotations

from functools import cached_property

import networkx as nx
import numpy as np

from gangopt.schema import NODE_LEVEL, Cluster

ROOT = ("cluster", "cluster")
Domain = tuple[str, str]
"""A domain is ``(level, name)``; names are unique within a level (checked on input)."""


_CACHE: dict[int, tuple[Cluster, Topology]] = {}
_CACHE_SIZE = 2  # clusters can be large: keep only the last few alive


class Topology:
    """Domains of a cluster, queried by level."""

    @classmethod
    def of(cls, cluster: Cluster) -> Topology:
        """The topology of ``cluster``, built once per cluster object (it is immutable)."""
        hit = _CACHE.get(id(cluster))
        if hit is not None and hit[0] is cluster:
            return hit[1]
        topo = cls(cluster)
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[id(cluster)] = (cluster, topo)
        return topo

    def __init__(self, cluster: Cluster) -> None:
        self.levels: list[str] = [*cluster.topology_levels, NODE_LEVEL]
        self.node_names: list[str] = [n.name for n in cluster.nodes]
        self.node_index: dict[str, int] = {name: i for i, name in enumerate(self.node_names)}
        self.graph: nx.DiGraph = nx.DiGraph()
        self.graph.add_node(ROOT, level="cluster")
        self._domain_of: dict[str, list[str]] = {}
        for node in cluster.nodes:
            path = [node.topology[level] for level in cluster.topology_levels] + [node.name]
            self._domain_of[node.name] = path
            parent: Domain = ROOT
            for level, name in zip(self.levels, path, strict=True):
                child = (level, name)
                self.graph.add_edge(parent, child)
                self.graph.nodes[child]["level"] = level
                parent = child

    def depth(self, level: str) -> int:
        """Position of ``level`` from the broadest (0) to ``node`` (last)."""
        return self.levels.index(level)

    def domain(self, node: str, level: str) -> str:
        """Name of the domain at ``level`` that holds ``node``."""
        return self._domain_of[node][self.depth(level)]

    def distance(self, a: str, b: str) -> int:
        """Levels climbed from ``a`` and ``b`` to their lowest common domain (0 if a == b)."""
        pa, pb = self._domain_of[a], self._domain_of[b]
        for depth in range(len(self.levels)):
            if pa[depth] != pb[depth]:
                return len(self.levels) - depth
        return 0

    def domains(self, level: str) -> list[str]:
        """Domain names at ``level``, in first-seen node order."""
        return list(self.codes(level)[1])

    def nodes_in(self, level: str, domain: str) -> list[str]:
        """Node names inside one domain, in input order."""
        depth = self.depth(level)
        return [n for n in self.node_names if self._domain_of[n][depth] == domain]

    def codes(self, level: str) -> tuple[np.ndarray, list[str]]:
        """Per node, the index of its domain at ``level``; and the domain names."""
        return self._codes[level]

    @cached_property
    def _codes(self) -> dict[str, tuple[np.ndarray, list[str]]]:
        out: dict[str, tuple[np.ndarray, list[str]]] = {}
        for depth, level in enumerate(self.levels):
            names: dict[str, int] = {}
            codes = np.fromiter(
                (names.setdefault(self._domain_of[n][depth], len(names)) for n in self.node_names),
                dtype=np.int64,
                count=len(self.node_names),
            )
            out[level] = (codes, list(names))
        return out
