"""Every solver by name: :data:`SOLVERS` is the only list.

A solver decides a round and hands back a :class:`~gangopt.result.Result`; it does
not annotate or validate (the door, :mod:`gangopt.solve`, does that for all of them). The
same names serve ``gangopt solve --solver``, ``gangopt simulate --policy``, the service's
``?solver=`` and every test that runs "each solver". Adding a peer emulation is one module in
:mod:`gangopt.solvers.peers` and one entry here.

``make(durations)`` returns a fresh decider: a stateful solver (Slurm's reservations) keeps
its state between the rounds of one replay; ``durations`` are the jobs' run times when a
replay knows them (only the Slurm emulation reads them).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from gangopt.annotate import LIMIT_TOLERANCE, pass_hopeless, pass_reserve, stop_by
from gangopt.result import Result
from gangopt.schema import Plan, Round, Stats
from gangopt.solvers.fifo import fifo_first_fit
from gangopt.solvers.greedy import greedy
from gangopt.solvers.greedy.engine import unstarted
from gangopt.solvers.peers import SlurmBackfillLike, koordinator_like, kueue_like, volcano_like

Decide = Callable[[Round], Result]
Durations = Mapping[str, float] | None


@dataclass(frozen=True)
class Solver:
    """One entry of the registry."""

    name: str
    about: str
    make: Callable[[Durations], Decide]
    """A fresh decider (see the module docstring)."""
    own_reasons: bool = False
    """Keep the solver's own waiting reasons (the peers word them as their schedulers do)
    instead of gangopt's explained ones."""
    fallback: bool = False
    """A plan that fails validation is replaced by the greedy plan (CP-SAT); otherwise it is
    an internal error: there is nothing behind greedy or a peer emulation to fall back to."""
    lp_bounds: bool = False
    """The finisher bounds this solver's plans with the LP bounds too (slots and growth, OR-Tools'
    GLOP) unless the caller says otherwise: CP-SAT, which imports OR-Tools anyway. Greedy and the
    peers get them when asked (``solve(..., lp_bounds=True)``, ``gangopt solve --lp-bounds``), so
    that they never import OR-Tools by default."""
    lookahead: bool = False
    """Decide the round's look-ahead view (:mod:`gangopt.lookahead`: reservations, eviction
    protection) instead of the round itself; the plan is validated against the round."""


def _plain(decide: Callable[..., Plan], name: str) -> Callable[[Durations], Decide]:
    """A plan function taking a ``stop`` (the peers, FIFO) as the registry decider of solver
    ``name``, clocked (:func:`_clocked`), with the round's size in its stats."""

    def make(durations: Durations) -> Decide:
        def run(rnd: Round) -> Result:
            plan = _clocked(rnd, decide, name)
            return Result(plan=plan, stats=Stats(nodes=len(rnd.cluster.nodes), gangs=len(rnd.pending)))

        return run

    return make


def _clocked(rnd: Round, decide: Callable[..., Plan], name: str) -> Plan:
    """``decide(rnd, stop=...)`` within the time limit (from this call): its pass stops where only
    the work after it still fits (:func:`gangopt.annotate.stop_by`, keeping
    :func:`~gangopt.annotate.pass_reserve` with the finisher prefiltering again), and is not even
    built when it would stop at its first ask (:func:`~gangopt.annotate.pass_hopeless`: the
    plan of :func:`~gangopt.solvers.greedy.engine.unstarted`). Under ``policy.deterministic``
    (replays) the pass always runs whole. Greedy's pass and every peer's run alone (``gangopt
    solve --solver PEER``): at 16,384 nodes greedy's pass is about 4 CPU-s, koordinator_like's
    9-10 (25 s of wall for a 10 s limit at load 6, stop 30)."""
    if rnd.policy.deterministic:
        return decide(rnd, stop=None)
    wall, cpu = time.perf_counter(), time.process_time()
    end = wall + (1 + LIMIT_TOLERANCE) * rnd.policy.time_limit
    reserve = pass_reserve(rnd, prefiltered=False)
    if pass_hopeless(rnd, end, reserve, wall, cpu):
        return unstarted(rnd, name)
    return decide(rnd, stop=stop_by(end, reserve, wall, cpu))


def _cpsat(rnd: Round) -> Result:
    # Imported on first use: OR-Tools' CP-SAT (with the pandas it pulls in) costs about half a
    # second of CPU to import, which validate, explain, schema, greedy and the peers never need.
    # The import counts against the time limit.
    start = time.perf_counter()
    from gangopt.solvers.cpsat import solve_cpsat

    return solve_cpsat(rnd, start)


def _greedy(rnd: Round) -> Result:
    """Greedy's pass within the time limit (:func:`_clocked`): at 16,384 nodes the pass alone is
    about 4 CPU-s, past a 3 s limit. Under ``policy.deterministic`` (replays) it runs whole."""
    return Result(plan=_clocked(rnd, greedy, "greedy"))


def _slurm(durations: Durations) -> Decide:
    return _plain(SlurmBackfillLike(durations), "slurm_backfill_like")(durations)


SOLVERS: dict[str, Solver] = {
    s.name: s
    for s in (
        Solver("cpsat", "the optimizer: one CP-SAT model per round", lambda _: _cpsat, fallback=True,
               lookahead=True, lp_bounds=True),
        Solver("greedy", "the baseline: one gang at a time, first fit, Koordinator/Kueue-style preemption",
               lambda _: _greedy),
        Solver("fifo_first_fit", "the floor: strict FIFO, priorities ignored, no preemption",
               _plain(fifo_first_fit, "fifo_first_fit"), own_reasons=True),
        Solver("koordinator_like", "Koordinator's coscheduling and network-topology plugins",
               _plain(koordinator_like, "koordinator_like"), own_reasons=True),
        Solver("volcano_like", "Volcano's allocate, preempt and reclaim actions",
               _plain(volcano_like, "volcano_like"), own_reasons=True),
        Solver("kueue_like", "Kueue's admission with cohorts, preemption and TAS",
               _plain(kueue_like, "kueue_like"), own_reasons=True),
        Solver("slurm_backfill_like", "Slurm's priority scheduling with backfill reservations",
               _slurm, own_reasons=True),
    )
}
"""The solvers, by name (docs/peers.md says what each emulation mimics and leaves out)."""

ALIASES = {"gangopt": "cpsat"}
"""Other names accepted for a solver: replays have always called CP-SAT's policy 'gangopt'."""

SolverName = Literal[
    "cpsat", "greedy", "fifo_first_fit", "koordinator_like", "volcano_like", "kueue_like", "slurm_backfill_like"
]
"""The names of :data:`SOLVERS` as a type (for the service's query parameter and type checks)."""
if set(get_args(SolverName)) != set(SOLVERS):  # pragma: no cover - a registry edit without the type
    raise ImportError("SolverName must list exactly the names in SOLVERS")


def get_solver(name: str) -> Solver:
    """The solver called ``name`` (or an alias); ``ValueError`` lists the known names."""
    solver = SOLVERS.get(ALIASES.get(name, name))
    if solver is None:
        raise ValueError(f"unknown solver {name!r} (known: {', '.join(SOLVERS)})")
    return solver


def names() -> list[str]:
    """Every accepted name: the solvers', then the aliases."""
    return [*SOLVERS, *ALIASES]


__all__ = ["ALIASES", "SOLVERS", "Decide", "Solver", "SolverName", "get_solver", "names"]
