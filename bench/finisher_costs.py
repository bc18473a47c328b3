"""What follows the search, per solver: the waiting reasons and the validator on each solver's
plan of one fragmented round, in one process, with CPU and wall seconds.

    python -m bench.finisher_costs S 0.75          # size S/M/L/XL (or nodes/gangs), busy share

Every registry solver decides the round first (``annotate=False``: its decisions only, each
validated by the door as always); then, on each plan, :func:`gangopt.reasons.waiting_reasons`
(no deadline: every waiting gang checked) and :func:`gangopt.validation.validate` are timed
alone, best of ``--repeat`` runs (default 1). The peer emulations keep their own reasons in
a solve (``Solver.own_reasons``); their plans are explained here all the same, as more plans
of the round to time the reasons on.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import time
from collections.abc import Callable
from typing import TypeVar

import gangopt
from bench.fragmented_table import round_text
from gangopt.parsing import parse_json
from gangopt.reasons import UNCHECKED, waiting_reasons
from gangopt.schema import Round
from gangopt.solvers import SOLVERS
from gangopt.validation import validate

T = TypeVar("T")


def timed(step: Callable[[], T], repeat: int) -> tuple[T, float, float]:
    """``step``'s answer, and its CPU and wall seconds, the best of ``repeat`` runs each."""
    cpu, wall = float("inf"), float("inf")
    for _ in range(max(1, repeat)):
        c, w = time.process_time(), time.perf_counter()
        answer = step()
        cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
    return answer, cpu, wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("size", nargs="?", default="S", help="S, M, L, XL or nodes/gangs (default S)")
    parser.add_argument("busy", nargs="?", type=float, default=0.75, help="busy share (default 0.75)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each step, the best one kept (default 1)")
    args = parser.parse_args(argv)
    rnd = parse_json(Round, round_text(args.size, args.busy))
    pods = sum(len(g.pods) for g in rnd.running)
    print(
        f"fragmented {args.size} busy {args.busy}: {len(rnd.cluster.nodes):,} nodes, {len(rnd.running):,} running "
        f"gangs ({pods:,} pods), {len(rnd.pending):,} pending; load {os.getloadavg()[0]:.1f}"
    )
    print("| solver | waiting | reasons CPU-s | reasons wall s | validate CPU-s | validate wall s | violations |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in ["greedy", *[s for s in SOLVERS if s != "greedy"]]:
        plan = gangopt.solve(rnd, solver=name, annotate=False)
        waiting, r_cpu, r_wall = timed(functools.partial(waiting_reasons, rnd, plan), args.repeat)
        broken, v_cpu, v_wall = timed(functools.partial(validate, rnd, plan), args.repeat)
        checked = sum(1 for w in waiting if UNCHECKED not in w.reasons)
        print(f"| {name} | {checked} | {r_cpu:.3f} | {r_wall:.3f} | {v_cpu:.3f} | {v_wall:.3f} | {len(broken)} |")
    own = resource.getrusage(resource.RUSAGE_SELF)
    print(f"process CPU {own.ru_utime + own.ru_stime:.1f} s")


if __name__ == "__main__":
    main()
