"""Slurm: priority scheduling with backfill reservations.

See docs/peers.md for the decision procedure this emulation follows and what it leaves out;
the shared machinery is :mod:`gangopt.solvers.peers.common`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from functools import cached_property

import numpy as np

from gangopt.arrays import BoolArray, IndexArray, IntArray
from gangopt.schema import Plan, Policy, Round
from gangopt.solvers.greedy.engine import Attempt, GangView, WaitingCode
from gangopt.solvers.peers.common import PREEMPT_NOTE, Peer, Stop, stopping


class _Slurm(Peer):
    solver = "slurm_backfill_like"
    node_score = "first"
    grows_running = False

    def __init__(self, rnd: Round, durations: Mapping[str, float] | None, started: Mapping[str, float]) -> None:
        super().__init__(rnd)
        self.durations = durations
        self.now = rnd.now
        self.reserved = np.zeros(len(self.free), dtype=np.bool_)
        self.reservations: list[tuple[str, float | None, BoolArray]] = []
        self.ends: dict[str, float | None] = {}
        self._pending_by_name = {g.name: g for g in self.pending}
        for g in rnd.running:
            self.ends[g.name] = self._end(g.name, started.get(g.name))

    def _end(self, name: str, start: float | None) -> float | None:
        """Expected end: start + duration (start unknown: now + the whole duration)."""
        if self.durations is None or name not in self.durations:
            return None
        return (self.now if start is None else start) + self.durations[name]

    def preempt(self, gangs: list[GangView], counts: list[list[int]]) -> Attempt | None:
        return None  # PreemptType=preempt/none, Slurm's default

    def _phrase(self, g: GangView, counts: list[int], code: WaitingCode, reason: str) -> tuple[WaitingCode, str]:
        if code == "quota":
            return code, f"Reason=AssocGrpGRES: {reason}"
        return code, f"Reason=Resources: {reason}"

    def admit(self, gangs: list[GangView]) -> None:
        counts = [self.min_counts(g) for g in gangs]
        if not self._fits(gangs, counts) or any(self.hopeless(g, c) for g, c in zip(gangs, counts, strict=True)):
            self.wait(gangs, counts)  # held by a limit (Assoc/QOS) or never fits: no reservation
            return
        ends = [self._end(g.name, self.now) for g in gangs]
        end = None if any(e is None for e in ends) else max(e for e in ends if e is not None)
        # may use a reservation's nodes only if it surely ends before that reservation starts
        blocked = self.reserved.copy()
        for _, start, nodes in self.reservations:
            if end is not None and start is not None and end <= start:
                blocked &= ~nodes
        work = self.free.copy(order="K")
        work[blocked] = 0
        result = self.attempt(gangs, counts, work, self.used)
        if result is not None:
            result.free[blocked] = self.free[blocked]
            for g, e in zip(gangs, ends, strict=True):
                self.ends[g.name] = e
            self.commit(gangs, counts, result)
            return
        outranked = self.attempt(gangs, counts, self.free.copy(order="K"), self.used) is not None
        start, held = self._reserve(gangs, counts)
        node_names = [self.rnd.cluster.nodes[i].name for i in np.flatnonzero(held).tolist()] if held is not None else []
        when = (
            "when the jobs running there end (no time limits known)"
            if start is None
            else f"at t+{max(0.0, start - self.now):.0f}s"
        )
        where = f"; reserved {', '.join(node_names)} {when}" if node_names else "; no start time can be planned"
        if outranked:
            holder = next((name for name, _, n in self.reservations if (n & blocked).any()), "?")
            self._wait_as(
                gangs,
                "outranked",
                f"Reason=Priority: starting now would delay the reservation of higher-priority job {holder}{where}",
            )
        else:
            found = self.diagnose(gangs[0], counts[0], alone=len(gangs) == 1)
            code, reason = found if found is not None else ("capacity", "the jobs of its group do not fit together")
            self._wait_as(gangs, code, f"Reason=Resources: {reason.replace(PREEMPT_NOTE, '')}{where}")
        if held is not None:
            self.reservations.append((gangs[0].name, start, held))
            self.reserved |= held

    def _fits(self, gangs: list[GangView], counts: list[list[int]]) -> bool:
        demand = sum(
            (np.asarray(c, dtype=np.int64) @ g.qreq for g, c in zip(gangs, counts, strict=True)),
            start=np.zeros(self.quota.size, dtype=np.int64),
        )
        return bool((self.used + demand <= self.limit).all())

    @cached_property
    def _running_releases(self) -> dict[float, list[tuple[IndexArray, IntArray]]]:
        """What the running jobs give back and when: per expected end, their pods' nodes and
        requests (without durations all end ``now``). Computed once per round, not once per
        waiting job: Slurm preempts nothing, so the running pods do not change during a round."""
        timed = self.durations is not None
        events: dict[float, list[tuple[IndexArray, IntArray]]] = defaultdict(list)
        for gi, g in enumerate(self.running):
            s, e = self.rp_start[gi], self.rp_start[gi + 1]
            end = self.ends.get(g.name) if timed else self.now
            if end is not None:
                pods = s + np.flatnonzero(self.kept[s:e])
                events[end].append((self.rp_node[pods], self.rp_rows[pods]))
        return dict(events)

    @cached_property
    def _running_joined(self) -> dict[float, tuple[IndexArray, IntArray, IndexArray]]:
        """:attr:`_running_releases` joined per end (:func:`_joined`), once per round."""
        return {t: _joined(v) for t, v in self._running_releases.items()}

    def _reserve(self, gangs: list[GangView], counts: list[list[int]]) -> tuple[float | None, BoolArray | None]:
        """Earliest start and the whole nodes it would use then, on nodes no earlier
        reservation holds. With expected ends: release running jobs (and jobs started this
        round) in order of their end. Without: every job has the same time limit, so the running
        jobs all end first and the reservation is where it would go once they have."""
        timed = self.durations is not None
        events = defaultdict(list, {t: list(v) for t, v in self._running_releases.items()})
        if timed:
            for name, alloc in self.allocs.items():
                end = self.ends.get(name)
                if end is not None and alloc:
                    g = self._pending_by_name[name]
                    nodes = np.asarray([node for _, node, _ in alloc], dtype=np.intp)
                    rows = np.stack([k * g.reqs[r] for r, _, k in alloc])
                    events[end].append((nodes, rows))
        base = self.free.copy(order="K")
        open_ = ~self.reserved
        failed = False
        for t in sorted(events):
            # a job's release counts when one of its nodes is open (what frees up on held nodes
            # is zeroed in every trial): every job of the event at once, not one by one (68,536
            # running jobs per waiting job at fragmented XL: 240 of this peer's CPU-s)
            nodes, rows, lengths = _joined(
                events[t], self._running_joined.get(t), len(self._running_releases.get(t, []))
            )
            hit = np.logical_or.reduceat(open_[nodes], np.cumsum(lengths) - lengths) if lengths.size else lengths > 0
            touched = bool(hit.any())
            if touched:
                chosen = np.repeat(hit, lengths)
                for j in range(base.shape[1]):
                    np.add.at(base[:, j], nodes[chosen], rows[chosen, j])
            if failed and not touched:
                # only held nodes freed up: the trial equals the one that just failed. In a full
                # cluster most jobs wait and every node soon holds a reservation; retrying would
                # cost each waiting job one placement per running job (O(pending x running)).
                continue
            trial = base.copy(order="K")
            trial[self.reserved] = 0
            found = self.attempt(gangs, counts, trial, self.used)
            if found is not None:
                held = np.zeros(len(self.free), dtype=np.bool_)
                for alloc, _ in found.allocs:
                    held[[node for _, node, _ in alloc]] = True
                return (t if timed else None), held
            failed = True
        return None, None


def _joined(
    releases: list[tuple[IndexArray, IntArray]],
    joined: tuple[IndexArray, IntArray, IndexArray] | None = None,
    skip: int = 0,
) -> tuple[IndexArray, IntArray, IndexArray]:
    """The releases' nodes and request rows, concatenated, and how many pods each release has
    (releases without pods left out: they free nothing and touch no node). ``joined``: the
    first ``skip`` releases already joined (the running jobs'); the rest go after them."""
    parts = [(n, r) for n, r in releases[skip:] if len(n)]
    if joined is not None and not parts:
        return joined
    nodes = [n for n, _ in parts]
    rows = [r for _, r in parts]
    lengths = np.asarray([len(n) for n in nodes], dtype=np.intp)
    if joined is not None:
        nodes, rows, lengths = [joined[0], *nodes], [joined[1], *rows], np.concatenate([joined[2], lengths])
    if not nodes:
        return np.zeros(0, dtype=np.intp), np.zeros((0, 0), dtype=np.int64), lengths
    return np.concatenate(nodes).astype(np.intp), np.concatenate(rows), lengths


class SlurmBackfillLike:
    """Slurm's main scheduler plus ``sched/backfill`` (peers.md §2.6), as a policy that keeps
    the start times of the jobs it started between rounds (a simulation's fresh instance).

    Mimics:

    * **Strict priority order** (priority, then age = submission time): a job that cannot start
      gets a **reservation**: the earliest time enough resources free up, from running jobs'
      expected ends, and the **whole nodes** it would use then.
    * **Backfill**: a later job starts now only if it fits on nodes no earlier reservation
      holds, or if it surely ends (start + expected run time) before that reservation starts.
    * ``--nodes=min-max``: an elastic job starts with as many members as fit at once (never
      on reserved nodes).
    * ``topology/tree``: a ``required`` gang goes to the tightest domain that fits (best fit);
      a ``preferred`` gang goes to the lowest domain at its level or above that holds it
      (the lowest switch whose subtree satisfies the job: greedy's placement); slices each
      fill one domain of their level; first fit in node order otherwise.
    * Reasons as ``squeue`` shows them: ``Reason=Resources`` (waits for resources, with its
      reservation), ``Reason=Priority`` (would delay a higher-priority job's reservation);
      a job over its queue's quota (``AssocGrp*`` limits) or that can never fit gets no
      reservation.

    **Run times.** The round carries none. ``durations`` (gang name → expected run time in
    seconds, e.g. the workload's durations, or users' time limits) gives expected ends: a job
    started by this instance ends at its start + duration; a running job it did not start ends
    at ``now`` + its full duration (conservative); a job without a duration never ends within
    the plan. **Without durations** (a single round from the CLI) every job is treated as
    having the same time limit: all running jobs end before any job started now, so a blocked
    job's reservation is the set of nodes it would take once the running jobs have ended, and
    backfill jobs may not touch those nodes at all ("the blocked job's nodes are held").

    Leaves out: the multifactor priority (fair share, QOS, job size: the round's priority is
    used), partitions (one partition: the whole cluster), ``bf_window``/``bf_resolution``/
    ``bf_max_job_test`` limits, ``--time-min``, ``--switches`` waits, and preemption (Slurm's
    default ``PreemptType=preempt/none``). Running jobs never grow or shrink.
    """

    __name__ = "slurm_backfill_like"

    def __init__(self, durations: Mapping[str, float] | None = None) -> None:
        self.durations = durations
        self.started: dict[str, float] = {}

    def __call__(self, rnd: Round, *, stop: Stop = None) -> Plan:
        """This round's plan; ``stop``: the pass ends when it says so, the jobs not reached
        waiting "not considered" (:func:`~gangopt.solvers.peers.common.stopping`)."""
        plan = stopping(_Slurm(rnd, self.durations, self.started), stop).decide()
        live = {g.name for g in rnd.running}
        self.started = {k: v for k, v in self.started.items() if k in live}
        for name in plan.admitted:
            self.started[name] = rnd.now
        return plan


def slurm_backfill_like(
    rnd: Round, policy: Policy | None = None, *, durations: Mapping[str, float] | None = None, stop: Stop = None
) -> Plan:
    """One round of :class:`SlurmBackfillLike` (see there for what it mimics and leaves out)."""
    if policy is not None:
        rnd = rnd.model_copy(update={"policy": policy})
    return SlurmBackfillLike(durations)(rnd, stop=stop)
