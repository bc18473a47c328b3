"""The one-round commands: ``solve``, ``validate``, ``schema``, ``generate``, ``explain``."""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from gangopt.cli.output import EXIT_FAILURE, EXIT_OK, emit
from gangopt.errors import InputError, Problem
from gangopt.io import load_plan, load_round
from gangopt.parsing import parse_model
from gangopt.schema import Policy, Round, json_schemas
from gangopt.solve import solve
from gangopt.solvers import names as solver_names
from gangopt.validation import validate

T = TypeVar("T")

# Flag -> Policy field, so that a rejected flag value is reported at the policy path it overrides.
_POLICY_FLAGS = {
    "time_limit": "--time-limit",
    "seed": "--seed",
    "workers": "--workers",
    "preemption": "--no-preemption",
}



def add_parsers(sub: Any, command: str | None = None) -> None:
    """The one-round commands: solve, validate, schema, generate, explain.

    ``generate`` is registered only when it runs or every command is (``command`` None): its
    sizes come from the replay's generator, an import ``solve`` never needs (34 M of the
    1,971 M instructions of solving the fragmented S round end to end; issue 13)."""
    p = sub.add_parser("solve", help="decide one round and print the plan as JSON")
    p.add_argument("round", metavar="ROUND.json", help="the round to decide ('-' reads stdin)")
    p.add_argument(
        "--solver",
        choices=solver_names(),
        default="cpsat",
        help="default: cpsat; the others emulate peer schedulers (docs/peers.md)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help="wall-clock seconds for the whole command, reading and parsing the round included (overrides "
        "policy.time_limit; the solve gets the rest, at least a tenth; policy.deterministic: the solve's own)",
    )
    p.add_argument("--seed", type=int, metavar="N", help="random seed (overrides policy.seed)")
    p.add_argument("--workers", type=int, metavar="N", help="CP-SAT workers (overrides policy.workers)")
    p.add_argument("--no-preemption", action="store_true", help="never preempt or shrink running gangs")
    p.add_argument("--explain", action="store_true", help="also print a human-readable summary on stderr")
    p.add_argument(
        "--lp-bounds",
        action="store_true",
        help="bound greedy and peer plans with the LP bounds too, as cpsat's are (tighter gap; imports "
        "OR-Tools' linear solver)",
    )
    p.add_argument("-o", "--output", metavar="PLAN.json", help="write the plan here (atomically) instead of stdout")
    p.set_defaults(func=_cmd_solve)

    p = sub.add_parser("validate", help="check a plan against a round; exit 1 if it breaks a rule")
    p.add_argument("round", metavar="ROUND.json")
    p.add_argument("plan", metavar="PLAN.json")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("schema", help="print the JSON Schemas of the round and the plan (or of a workload)")
    p.add_argument(
        "which",
        nargs="?",
        choices=["round", "plan", "workload"],
        help="only this schema (default: round and plan); workload: what simulate, sweep and capacity replay",
    )
    p.set_defaults(func=_cmd_schema)

    if command in (None, "generate"):
        _add_generate(sub)

    p = sub.add_parser("explain", help="print a human-readable summary of a plan")
    p.add_argument("round", metavar="ROUND.json")
    p.add_argument("plan", metavar="PLAN.json")
    p.set_defaults(func=_cmd_explain)


def _add_generate(sub: Any) -> None:
    from gangopt.replay.generate import SIZES

    p = sub.add_parser("generate", help="write a seeded benchmark round (issue 3 sizes S, M, L, XL)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--size",
        choices=list(SIZES),
        help="a benchmark size: " + ", ".join(f"{k} = {n:,} nodes / {g:,} gangs" for k, (n, g) in SIZES.items()),
    )
    which.add_argument("--nodes", type=int, metavar="N", help="number of 8-GPU nodes (with --gangs)")
    p.add_argument("--gangs", type=int, metavar="G", help="pending gangs (default: the size's; required with --nodes)")
    p.add_argument("--seed", type=int, default=0, metavar="K", help="random seed (default 0)")
    p.add_argument("--contention", action="store_true", help="demand about twice the free GPUs, fragmented racks")
    p.add_argument(
        "--fragmented",
        action="store_true",
        help="running gangs where they happened to land: free GPUs scattered, no node wholly free (issue 13)",
    )
    p.add_argument(
        "--busy", type=float, metavar="F", help="share of GPUs already busy (default: 0.6-0.9 from the seed)"
    )
    p.add_argument(
        "--no-preemption",
        action="store_true",
        help="policy.preemption off: no running gang may be evicted or shrunk (issue 13's family has both)",
    )
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S", help="policy.time_limit (default 10)")
    p.add_argument(
        "--gap-limit",
        type=float,
        metavar="F",
        help="policy.gap_limit (default: the size's issue-3 target, else 0.005; the fragmented bench "
        "rounds of bench/rounds.py keep 0.005 at every size)",
    )
    p.add_argument("-o", "--output", metavar="ROUND.json", help="write the round here (atomically) instead of stdout")
    p.set_defaults(func=_cmd_generate)


def read_round(source: str | Path, whole_process: bool = False) -> Round:
    """:func:`~gangopt.io.load_round` as the one-round commands read a round: in a process that
    ends with the command (``whole_process``, the ``gangopt`` script), without the collector.

    A parse builds millions of objects (the XL round: 68,536 running gangs) and no garbage, yet
    the collector ran 21 times during the XL parse even at gangopt's raised threshold, each run
    walking the young objects and two of them everything parsed so far: 0.56 of 1.65 CPU-s
    (load 6). Now it does not run during the parse, and the round (with everything imported)
    is then frozen (:func:`gc.freeze`): no later run walks it. The round lives until the process
    ends anyway; objects that would have been freed by reference counting still are."""
    return _read(load_round, source, whole_process)


def _read(load: Callable[[str | Path], T], source: str | Path, whole_process: bool) -> T:
    """``load(source)``, and in a ``whole_process`` whose collector is on, with it off during
    the parse and everything tracked so far frozen afterwards (:func:`read_round`)."""
    with _collector_off(whole_process, freeze=True):
        return load(source)


def _cmd_solve(args: argparse.Namespace) -> int:
    """Read, parse and solve within the time limit: the solve gets what the limit leaves after
    the time since the command began (:meth:`Policy.after`; ``args.began``, a ``perf_counter``
    time: the process start under ``gangopt``, else the call of ``main``). At XL the import and
    parse are about 2 s of a 10 s limit, which the solve used to get whole (13 s end to end)."""
    began = time.perf_counter()
    whole = getattr(args, "whole_process", False)
    rnd = read_round(args.round, whole)
    parsed = time.perf_counter() - began
    # The solve's limit leaves the plan's writing (and the process's end) their time too.
    spent = time.perf_counter() - getattr(args, "began", began) + output_seconds(rnd)
    policy = _policy(rnd, args).after(spent)
    # The collector stays off until the plan is written, and what the solve left is then frozen:
    # turned on after it, its first allocation set off a collection of everything the solve
    # left (0.05-0.13 s at XL, load 2.5-3.7), after the solve's limit.
    with _collector_off(whole, freeze=True):
        plan = solve(rnd, policy, solver=args.solver, lp_bounds=True if args.lp_bounds else None)
        plan = plan.model_copy(update={"stats": plan.stats.model_copy(update={"parse_seconds": parsed})})
        text = plan.model_dump_json(indent=2) + "\n"
        # The summary goes first: if it fails (a bug in explain), no plan has been emitted yet.
        explanation = None
        if args.explain:
            from gangopt.explain import summary

            explanation = summary(rnd, plan)
        emit(text, args.output)
    if explanation is not None:
        sys.stderr.write(explanation)
    return EXIT_OK


OUTPUT_SECONDS_PER_PENDING_GANG = 2e-5
"""Seconds the command keeps, per pending gang of the round, after the solve for what follows
it: the plan's JSON, its atomic write (with ``fsync``) and the process's end. Measured at XL
(2,000 pending gangs, a 1.2 MB plan): the JSON 4-8 ms, the write 9 ms, ``os._exit`` of the
0.6 GB process 10 ms (load 2.5): 0.03 s, 1.5e-5 a gang; the solve used to get them from the
limit, and the command ended past it (10.23-10.25 s at a 10 s limit on merged stop 36; issue
13, h37-xlfinish in docs/benchmarks.md)."""


def output_seconds(rnd: Round) -> float:
    """Seconds the command keeps after the solve for writing ``rnd``'s plan
    (:data:`OUTPUT_SECONDS_PER_PENDING_GANG`)."""
    return OUTPUT_SECONDS_PER_PENDING_GANG * len(rnd.pending)



@contextmanager
def _collector_off(whole_process: bool, freeze: bool = False) -> Iterator[None]:
    """No cyclic collection inside the block in a ``whole_process`` (the ``gangopt`` script)
    whose collector is on; with ``freeze``, everything tracked so far is frozen on leaving it
    (the parse: :func:`read_round`). The solve and the plan's writing run inside it too: its objects are freed by
    reference counting (its arrays, plans and models hold no cycles worth a walk), and the
    process ends with the command. At fragmented L busy 0.75 the collector still ran twice at
    gangopt's raised threshold (:mod:`gangopt.gcpause`), 0.025 of the solve's 2.4-3.0 CPU-s, for
    nothing to free. A library caller and the service keep their collector."""
    if not whole_process or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        gc.enable()


def _cmd_validate(args: argparse.Namespace) -> int:
    whole = getattr(args, "whole_process", False)
    rnd = read_round(args.round, whole)
    plan = _read(load_plan, args.plan, whole)
    violations = validate(rnd, plan)
    if not violations:
        emit("plan is valid\n", None)
        return EXIT_OK
    lines = []
    for v in violations:
        where = ", ".join(f"{k} {val}" for k, val in (("gang", v.gang), ("node", v.node)) if val is not None)
        lines.append(f"{v.rule}: {v.message}" + (f" [{where}]" if where else ""))
    lines.append(f"{len(violations)} violation{'s' if len(violations) != 1 else ''}")
    emit("\n".join(lines) + "\n", None)
    return EXIT_FAILURE



def _cmd_schema(args: argparse.Namespace) -> int:
    if args.which == "workload":
        from gangopt.replay.workload import workload_schema  # the replay's models: only here

        emit(json.dumps(workload_schema(), indent=2) + "\n", None)
        return EXIT_OK
    schemas = json_schemas()
    document = schemas if args.which is None else schemas[args.which]
    emit(json.dumps(document, indent=2) + "\n", None)
    return EXIT_OK



def _cmd_generate(args: argparse.Namespace) -> int:
    from gangopt.replay.generate import (
        FRAGMENTED_SHARES,
        GAP_TARGETS,
        SIZES,
        Spec,
        dump_round,
        generate,
        without_preemption,
    )

    if args.nodes is not None and args.gangs is None:
        raise InputError([Problem("--gangs", "required with --nodes")], "arguments")
    nodes, gangs = (args.nodes, args.gangs) if args.size is None else SIZES[args.size]
    gap_limit = GAP_TARGETS[args.size] if args.size is not None else Spec.gap_limit
    gangs = args.gangs if args.gangs is not None else gangs
    try:
        spec = Spec(
            nodes=nodes,
            gangs=gangs,
            seed=args.seed,
            contention=args.contention,
            fragmented=args.fragmented,
            busy=args.busy,
            elastic_share=FRAGMENTED_SHARES[0] if args.fragmented else Spec.elastic_share,
            required_share=FRAGMENTED_SHARES[1] if args.fragmented else Spec.required_share,
            preferred_share=FRAGMENTED_SHARES[2] if args.fragmented else Spec.preferred_share,
            time_limit=args.time_limit,
            gap_limit=gap_limit if args.gap_limit is None else args.gap_limit,
        )
    except ValueError as error:
        flag = "--" + str(error).split(" ", 1)[0].replace("_", "-")
        raise InputError([Problem(flag, str(error))], "arguments") from None
    rnd, info = generate(spec)
    emit(dump_round(without_preemption(rnd) if args.no_preemption else rnd), args.output)
    print(f"generated: {info.line()}", file=sys.stderr)
    return EXIT_OK



def _cmd_explain(args: argparse.Namespace) -> int:
    from gangopt.explain import summary

    whole = getattr(args, "whole_process", False)
    rnd = read_round(args.round, whole)
    plan = _read(load_plan, args.plan, whole)
    emit(summary(rnd, plan), None)
    return EXIT_OK



def _policy(rnd: Round, args: argparse.Namespace) -> Policy:
    """The round's policy with the flags given applied, validated like the round's own policy.

    Rebuilding (rather than ``model_copy(update=...)``) re-runs validation, so ``--workers 0``
    is rejected exactly as ``"workers": 0`` in the file would be, at the same JSON path.
    """
    overrides: dict[str, Any] = {}
    if args.time_limit is not None:
        overrides["time_limit"] = args.time_limit
    if args.seed is not None:
        overrides["seed"] = args.seed
    if args.workers is not None:
        overrides["workers"] = args.workers
    if args.no_preemption:
        overrides["preemption"] = False
    if not overrides:
        return rnd.policy
    try:
        return parse_model(Policy, {**rnd.policy.model_dump(), **overrides}, "policy")
    except InputError as error:
        problems = []
        for p in error.problems:
            field = p.path.removeprefix("$.").split(".")[0].split("[")[0]
            flag = _POLICY_FLAGS.get(field)
            message = f"{p.message} (from {flag})" if flag else p.message
            problems.append(Problem("$.policy" + p.path.removeprefix("$"), message))
        raise InputError(problems, "policy") from None
