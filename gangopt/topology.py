"""The cluster's topology as a tree of domains (networkx), and array views of it.

The tree runs root -> broadest level (e.g. zone) -> ... -> narrowest (rack) -> node. A node's
distance to another is the number of levels one climbs to their lowest common domain, so
same node = 0, same rack = 1, same block = 2, ... This is what "pack tightly" means.
"""

from __future__ import annotations

from functools import cached_property
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

import numpy as np

from gangopt.memo import derived

if TYPE_CHECKING:
    import networkx as nx
from gangopt.schema import NODE_LEVEL, Cluster

ROOT = ("cluster", "cluster")
Domain = tuple[str, str]
"""A domain is ``(level, name)``; names are unique within a level (checked on input)."""


class Topology:
    """Domains of a cluster, queried by level."""

    @classmethod
    def of(cls, cluster: Cluster) -> Topology:
        """The topology of ``cluster``, built once per cluster object and kept on it."""
        return derived(cluster, "topology", (cluster.nodes, cluster.topology_levels), lambda: cls(cluster))

    def __init__(self, cluster: Cluster) -> None:
        self.levels: list[str] = [*cluster.topology_levels, NODE_LEVEL]
        self.node_names: list[str] = list(map(attrgetter("name"), cluster.nodes))
        self.node_index: dict[str, int] = dict(zip(self.node_names, range(len(self.node_names)), strict=True))
        # One column of domain names per level (not one path per node): a 16,384-node cluster
        # is then a handful of lists, cheap to build and to leave to the garbage collector.
        paths = list(map(attrgetter("topology"), cluster.nodes))
        self._columns: list[list[str]] = [
            *(list(map(itemgetter(level), paths)) for level in cluster.topology_levels),
            self.node_names,
        ]
        self._by_level: dict[str, tuple[np.ndarray, list[str]]] = {}

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The domain tree, root -> broadest level -> ... -> node (each vertex has its ``level``).

        Built on first use only: the solver works on :meth:`codes`, and building the graph of
        a 16,384-node cluster costs a quarter of a second (importing networkx another 0.4 s of
        CPU, which is why it is imported here)."""
        import networkx as nx

        graph = nx.DiGraph()
        graph.add_node(ROOT, level="cluster")
        for i in range(len(self.node_names)):
            parent: Domain = ROOT
            for level, column in zip(self.levels, self._columns, strict=True):
                child = (level, column[i])
                graph.add_edge(parent, child)
                graph.nodes[child]["level"] = level
                parent = child
        return graph

    def depth(self, level: str) -> int:
        """Position of ``level`` from the broadest (0) to ``node`` (last)."""
        return self.levels.index(level)

    def domain(self, node: str, level: str) -> str:
        """Name of the domain at ``level`` that holds ``node``."""
        return self._columns[self.depth(level)][self.node_index[node]]

    def domains_of(self, level: str, rows: list[int]) -> list[str]:
        """Name of the domain at ``level`` of each node row in ``rows`` (no per-level codes needed)."""
        return list(map(self._columns[self.depth(level)].__getitem__, rows))

    def distance(self, a: str, b: str) -> int:
        """Levels climbed from ``a`` and ``b`` to their lowest common domain (0 if a == b)."""
        ia, ib = self.node_index[a], self.node_index[b]
        for depth, column in enumerate(self._columns):
            if column[ia] != column[ib]:
                return len(self.levels) - depth
        return 0

    def domains(self, level: str) -> list[str]:
        """Domain names at ``level``, in first-seen node order."""
        return list(self.codes(level)[1])

    def nodes_in(self, level: str, domain: str) -> list[str]:
        """Node names inside one domain, in input order."""
        column = self._columns[self.depth(level)]
        return [n for n, d in zip(self.node_names, column, strict=True) if d == domain]

    def codes(self, level: str) -> tuple[np.ndarray, list[str]]:
        """Per node, the index of its domain at ``level``; and the domain names (first-seen
        node order). Computed per level on first use."""
        hit = self._by_level.get(level)
        if hit is None:
            if level not in self.levels:
                raise KeyError(level)
            column = self._columns[self.depth(level)]
            names = list(dict.fromkeys(column))  # first-seen order
            position = {name: i for i, name in enumerate(names)}
            codes = np.fromiter(map(position.__getitem__, column), dtype=np.int64, count=len(column))
            hit = self._by_level[level] = (codes, names)
        return hit
