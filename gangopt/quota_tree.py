"""Quota limits over cohort trees as linear rows: the optimizer side's one reading of rule 6.

Rule 6 of docs/rules.md limits every queue and every node of a cohort tree. A cohort's usage
counts what each child cohort uses beyond the part of its quota it keeps
(``max(0, U_d - G_d)``, ``G_d`` set by its ``lending_limit``), and each member queue what it
uses beyond the part of its nominal it keeps (``max(0, u_q - G_q)``, ``G_q = nominal -
lending_limit``, Kueue's ClusterQueue lendingLimit), which is not linear; but a sum
of such maxima is the maximum of the sums over every choice of "take the child or leave it
out", so each limit is exactly a set of linear rows ``Σ_{q in Q} usage_q ≤ limit + offset``
(:func:`quota_rows`). Without lending limits every cohort limit is one row over the queues of
its subtree, and a tree without cohort quotas gives one row per root over all its queues:
the flattened tree, as before cohorts held quota. The greedy engine and the peers read the
rows through :func:`gangopt.arrays.quota_limits`, CP-SAT's encoding and the prefilter read
them here; the validator keeps its own reading (``gangopt/validation.py``).

Usage already over a limit before the round is tolerated as rule 6 says, at the node: every
row of a node gets the node's excess before the round (:func:`row_bounds`), so the rows and
the rule agree exactly.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from itertools import product
from typing import NamedTuple

from gangopt.checks import MAX_LENDING as MAX_LENDING  # the bound on the rows, checked on load
from gangopt.memo import derived
from gangopt.schema import Cohort, Round


class QuotaRow(NamedTuple):
    """One linear quota row: the summed usage of ``queues`` in ``resource`` ≤ ``limit``."""

    label: str
    queues: tuple[str, ...]
    resource: str
    limit: int


class CohortTree:
    """The cohorts of a round as a tree per resource (see the module docstring): declared
    cohorts, and cohorts queues name without declaring them (roots of their own)."""

    def __init__(self, rnd: Round) -> None:
        self.rnd = rnd
        self.spec: dict[str, Cohort] = {c.name: c for c in rnd.cohorts}
        for q in rnd.queues:
            if q.cohort is not None and q.cohort not in self.spec:
                self.spec[q.cohort] = Cohort(name=q.cohort)
        self.members: dict[str, list[str]] = {name: [] for name in self.spec}
        self.children: dict[str, list[str]] = {name: [] for name in self.spec}
        for q in rnd.queues:
            if q.cohort is not None:
                self.members[q.cohort].append(q.name)
        for c in self.spec.values():
            if c.parent is not None:
                self.children[c.parent].append(c.name)
        self.nominal = {q.name: q.nominal for q in rnd.queues}
        self.lending = {q.name: q.lending_limit for q in rnd.queues}

    def quota(self, cohort: str, res: str) -> int:
        """``S``: the subtree's quota: the cohort's own, what each member queue lends (its
        nominal minus :meth:`queue_kept`) and what each child cohort lends (its quota minus
        :meth:`kept`)."""
        own = self.spec[cohort].nominal.get(res, 0)
        queues = sum(self.nominal[q].get(res, 0) - self.queue_kept(q, res) for q in self.members[cohort])
        lent = sum(self.quota(d, res) - self.kept(d, res) for d in self.children[cohort])
        return own + queues + lent

    def queue_kept(self, queue: str, res: str) -> int:
        """``G_q``: the part of a queue's nominal its ``lending_limit`` keeps for its own gangs
        (Kueue's guaranteed quota, nominalQuota - lendingLimit)."""
        limit = self.lending[queue].get(res)
        return 0 if limit is None else max(0, self.nominal[queue].get(res, 0) - limit)

    def kept(self, cohort: str, res: str) -> int:
        """``G``: the part of the subtree's quota its ``lending_limit`` keeps from the parent."""
        limit = self.spec[cohort].lending_limit.get(res)
        return 0 if limit is None else max(0, self.quota(cohort, res) - limit)

    def limited(self, cohort: str, res: str) -> bool:
        """Whether a queue of the subtree lists ``res`` in its nominal (else nothing counts)."""
        return any(res in self.nominal[q] for q in self.members[cohort]) or any(
            self.limited(d, res) for d in self.children[cohort]
        )

    def limit(self, cohort: str, res: str) -> int | None:
        """The subtree's limit: ``S`` at a root, ``S + borrowing_limit`` below, else None."""
        spec = self.spec[cohort]
        if spec.parent is None:
            return self.quota(cohort, res)
        if res in spec.borrowing_limit:
            return self.quota(cohort, res) + spec.borrowing_limit[res]
        return None

    def forms(self, cohort: str, res: str) -> dict[frozenset[str], int]:
        """The subtree's usage ``U`` as ``max`` over these ``{queues: offset}`` of
        ``Σ usage - offset`` (one form, offset 0, without lending limits below)."""
        listing = [q for q in self.members[cohort] if res in self.nominal[q]]
        own = frozenset(q for q in listing if not self.queue_kept(q, res))
        parts: list[dict[frozenset[str], int]] = [{own: 0}]
        for q in listing:  # a queue counts only beyond what it keeps: max(0, usage - G_q)
            if keep := self.queue_kept(q, res):
                parts.append({frozenset(): 0, frozenset([q]): keep})
        for d in self.children[cohort]:
            if not self.limited(d, res):
                continue
            sub = self.forms(d, res)
            keep = self.kept(d, res)
            if keep > 0:  # max(0, U_d - G_d); U_d's forms may already hold the empty set
                sub = {qs: off + keep for qs, off in sub.items()} | {frozenset(): 0}
            parts.append(sub)
        out: dict[frozenset[str], int] = {}
        for combo in product(*(list(p.items()) for p in parts)):
            queues = frozenset().union(*(qs for qs, _ in combo))
            offset = sum(off for _, off in combo)
            out[queues] = min(offset, out.get(queues, offset))
        return out

    def queues_below(self, cohort: str) -> set[str]:
        """The queues of ``cohort``'s subtree."""
        out = set(self.members[cohort])
        for d in self.children[cohort]:
            out |= self.queues_below(d)
        return out

    def ordered_forms(self, cohort: str, res: str) -> list[tuple[frozenset[str], int]]:
        """:meth:`forms` in a fixed order (CP-SAT's model makes a literal per form)."""
        return sorted(self.forms(cohort, res).items(), key=lambda f: (sorted(f[0]), f[1]))

    def below_common(self, a: str, b: str) -> tuple[list[str], list[str]]:
        """The cohorts from ``a`` and from ``b`` up to, not including, their lowest common
        ancestor (both in one tree)."""

        def up(c: str) -> list[str]:
            out = [c]
            while (parent := self.spec[out[-1]].parent) is not None:
                out.append(parent)
            return out

        up_a, up_b = up(a), up(b)
        common = next(c for c in up_a if c in up_b)
        return up_a[: up_a.index(common)], up_b[: up_b.index(common)]

    def usage(self, cohort: str, res: str, per_queue: Mapping[str, Mapping[str, int]]) -> int:
        """``U`` of the subtree from per-queue usage (read through :meth:`forms`)."""
        return max(
            (sum(per_queue.get(q, {}).get(res, 0) for q in qs) - off for qs, off in self.forms(cohort, res).items()),
            default=0,
        )


def quota_rows(rnd: Round) -> tuple[QuotaRow, ...]:
    """Every quota row of ``rnd``: per queue ``nominal`` (no cohort) or ``nominal +
    borrowing_limit`` (in a cohort, when listed); per cohort and resource a queue of its
    subtree limits, the subtree's limit (:meth:`CohortTree.limit`) over each form of its usage.
    Built once per round (the prefilter reads them per pending gang)."""
    return derived(rnd, "quota-rows", (rnd.queues, rnd.cohorts), lambda: tuple(_rows(rnd)))


def _rows(rnd: Round) -> list[QuotaRow]:
    rows: list[QuotaRow] = []
    for q in rnd.queues:
        for res, nominal in sorted(q.nominal.items()):
            if q.cohort is None:
                rows.append(QuotaRow(f"queue {q.name}", (q.name,), res, nominal))
            elif res in q.borrowing_limit:
                rows.append(QuotaRow(f"queue {q.name}", (q.name,), res, nominal + q.borrowing_limit[res]))
    if not any(q.cohort is not None for q in rnd.queues):
        return rows
    tree = CohortTree(rnd)
    for name in sorted(tree.spec):
        resources = sorted({r for q in tree.members[name] for r in tree.nominal[q]} | _below(tree, name))
        for res in resources:
            limit = tree.limit(name, res) if tree.limited(name, res) else None
            if limit is None:
                continue
            for queues, offset in sorted(tree.forms(name, res).items(), key=lambda f: (sorted(f[0]), f[1])):
                if queues:
                    rows.append(QuotaRow(f"cohort {name}", tuple(sorted(queues)), res, limit + offset))
    return rows


def _below(tree: CohortTree, cohort: str) -> set[str]:
    """Resources the queues of ``cohort``'s child subtrees list."""
    out: set[str] = set()
    for d in tree.children[cohort]:
        out |= {r for q in tree.members[d] for r in tree.nominal[q]} | _below(tree, d)
    return out


def row_bounds(limits: Sequence[int], nodes: Sequence[Hashable], before: Sequence[int]) -> list[int]:
    """Per row, the bound a plan must keep, rule 6's tolerance read exactly: usage already over a
    limit before the round may stay, ``U_after <= max(L, U_before)``, with ``U`` the node's
    usage (the most of its rows' ``Σ - offset``), not each row's own sum.

    Rows of one node (``nodes``: the same label and resource) share ``L = limit - offset``, so
    ``before - limit`` is ``(Σ_before - offset) - L`` and its most over the node's rows is
    ``U_before - L``; every row then gets ``limit + max(0, U_before - L)``. Without lending
    limits (one row per node) that is ``max(limit, before)``. Taking each row's own sum instead
    was stricter than the rule when a lending limit splits a node over its limit before the
    round: greedy and kueue_like then evicted a gang the validator's reprieve put back (found
    by the nightly profile of the tree properties, tests/test_quota_tree.py)."""
    excess: dict[Hashable, int] = {}
    for limit, node, was in zip(limits, nodes, before, strict=True):
        excess[node] = max(excess.get(node, was - limit), was - limit)
    return [limit + max(0, excess[node]) for limit, node in zip(limits, nodes, strict=True)]
