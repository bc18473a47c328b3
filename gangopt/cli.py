"""The ``gangopt`` command line: solve, validate, schema, explain, generate.

Exit codes are a contract that scripts and schedulers wrapping gangopt rely on:

- ``0``: success (``validate``: the plan is valid);
- ``1``: the plan is invalid (``validate``) or something other than the input failed, reported
  as one line on stderr;
- ``2``: the input is unusable (malformed JSON, unknown field, bad quantity, cross-field
  problem, bad flag). Every problem is printed on stderr as ``error: $.json.path: message``
  and nothing is written to stdout, so a wrapper never parses half a plan.

Output is built completely in memory before anything is written, and ``-o`` writes a
temporary file in the target directory and renames it over the target, so a reader never
sees a partial plan even if gangopt is killed mid-write.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from gangopt.cli_capacity import add_parsers as _add_capacity
from gangopt.cli_k8s import add_parsers as _add_k8s
from gangopt.cli_serve import add_parser as _add_serve
from gangopt.cli_simulate import add_parser as _add_simulate
from gangopt.errors import InputError, Problem, parse_model
from gangopt.explain import summary
from gangopt.files import write_atomic
from gangopt.generate import GAP_TARGETS, SIZES, Spec, dump_round, generate
from gangopt.io import load_plan, load_round
from gangopt.peers import SOLVERS as PEER_SOLVERS
from gangopt.schema import Policy, Round, json_schemas
from gangopt.solving import solve
from gangopt.validation import validate

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2

# Flag -> Policy field, so that a rejected flag value is reported at the policy path it overrides.
_POLICY_FLAGS = {
    "time_limit": "--time-limit",
    "seed": "--seed",
    "workers": "--workers",
    "preemption": "--no-preemption",
}


class _ArgumentError(Exception):
    """argparse's usage errors, raised instead of exiting so ``main`` keeps control of the exit."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _ArgumentError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; separate from :func:`main` so docs and tests can inspect it."""
    parser = _Parser(prog="gangopt", description="Optimal gang placement for GPU clusters, one round at a time.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("solve", help="decide one round and print the plan as JSON")
    p.add_argument("round", metavar="ROUND.json", help="the round to decide ('-' reads stdin)")
    p.add_argument(
        "--solver",
        choices=["cpsat", "greedy", *PEER_SOLVERS],
        default="cpsat",
        help="default: cpsat; the others emulate peer schedulers (docs/peers.md)",
    )
    p.add_argument("--time-limit", type=float, metavar="S", help="wall-clock seconds (overrides policy.time_limit)")
    p.add_argument("--seed", type=int, metavar="N", help="random seed (overrides policy.seed)")
    p.add_argument("--workers", type=int, metavar="N", help="CP-SAT workers (overrides policy.workers)")
    p.add_argument("--no-preemption", action="store_true", help="never preempt or shrink running gangs")
    p.add_argument("--explain", action="store_true", help="also print a human-readable summary on stderr")
    p.add_argument("-o", "--output", metavar="PLAN.json", help="write the plan here (atomically) instead of stdout")
    p.set_defaults(func=_cmd_solve)

    p = sub.add_parser("validate", help="check a plan against a round; exit 1 if it breaks a rule")
    p.add_argument("round", metavar="ROUND.json")
    p.add_argument("plan", metavar="PLAN.json")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("schema", help="print the JSON Schemas of the round and the plan")
    p.add_argument("which", nargs="?", choices=["round", "plan"], help="only this schema (default: both)")
    p.set_defaults(func=_cmd_schema)

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
        "--busy", type=float, metavar="F", help="share of GPUs already busy (default: 0.6-0.9 from the seed)"
    )
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S", help="policy.time_limit (default 10)")
    p.add_argument("-o", "--output", metavar="ROUND.json", help="write the round here (atomically) instead of stdout")
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser("explain", help="print a human-readable summary of a plan")
    p.add_argument("round", metavar="ROUND.json")
    p.add_argument("plan", metavar="PLAN.json")
    p.set_defaults(func=_cmd_explain)

    _add_simulate(sub)
    _add_capacity(sub)
    _add_k8s(sub)
    _add_serve(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of exiting, so tests can call it directly."""
    try:
        args = build_parser().parse_args(argv)
    except _ArgumentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_INPUT
    except SystemExit as exit_:  # --help and --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except InputError as error:
        for problem in error.problems:
            print(f"error: {problem.path}: {problem.message}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # the contract: one line, no traceback
        print(f"error: {_one_line(error)}", file=sys.stderr)
        return EXIT_FAILURE


# ----------------------------------------------------------------------------- commands


def _cmd_solve(args: argparse.Namespace) -> int:
    rnd = load_round(args.round)
    policy = _policy(rnd, args)
    plan = solve(rnd, policy, solver=args.solver)
    text = plan.model_dump_json(indent=2) + "\n"
    # The summary goes first: if it fails (a bug in explain), no plan has been emitted yet.
    explanation = summary(rnd, plan) if args.explain else None
    _emit(text, args.output)
    if explanation is not None:
        sys.stderr.write(explanation)
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    rnd = load_round(args.round)
    plan = load_plan(args.plan)
    violations = validate(rnd, plan)
    if not violations:
        _emit("plan is valid\n", None)
        return EXIT_OK
    lines = []
    for v in violations:
        where = ", ".join(f"{k} {val}" for k, val in (("gang", v.gang), ("node", v.node)) if val is not None)
        lines.append(f"{v.rule}: {v.message}" + (f" [{where}]" if where else ""))
    lines.append(f"{len(violations)} violation{'s' if len(violations) != 1 else ''}")
    _emit("\n".join(lines) + "\n", None)
    return EXIT_FAILURE


def _cmd_schema(args: argparse.Namespace) -> int:
    schemas = json_schemas()
    document = schemas if args.which is None else schemas[args.which]
    _emit(json.dumps(document, indent=2) + "\n", None)
    return EXIT_OK


def _cmd_generate(args: argparse.Namespace) -> int:
    if args.nodes is not None and args.gangs is None:
        raise InputError([Problem("--gangs", "required with --nodes")], "arguments")
    nodes, gangs = (args.nodes, args.gangs) if args.size is None else SIZES[args.size]
    gangs = args.gangs if args.gangs is not None else gangs
    try:
        spec = Spec(
            nodes=nodes,
            gangs=gangs,
            seed=args.seed,
            contention=args.contention,
            busy=args.busy,
            time_limit=args.time_limit,
            gap_limit=GAP_TARGETS[args.size] if args.size is not None else Spec.gap_limit,
        )
    except ValueError as error:
        flag = "--" + str(error).split(" ", 1)[0].replace("_", "-")
        raise InputError([Problem(flag, str(error))], "arguments") from None
    rnd, info = generate(spec)
    _emit(dump_round(rnd), args.output)
    print(f"generated: {info.line()}", file=sys.stderr)
    return EXIT_OK


def _cmd_explain(args: argparse.Namespace) -> int:
    rnd = load_round(args.round)
    plan = load_plan(args.plan)
    _emit(summary(rnd, plan), None)
    return EXIT_OK


# ----------------------------------------------------------------------------- helpers


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


def _emit(text: str, output: str | None) -> None:
    """Write complete ``text`` to ``output`` atomically (temp file + rename), or to stdout."""
    if output is None or output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomic(text, output)


def _one_line(error: BaseException) -> str:
    """``TypeName: first line of the message`` -- enough to grep for, never a traceback."""
    text = str(error).strip().splitlines()
    if isinstance(error, OSError) and error.strerror:
        name = f" {error.filename}" if error.filename else ""
        return f"{error.strerror}{':' if name else ''}{name}"
    if isinstance(error, NotImplementedError):
        return f"not implemented yet{': ' + text[0] if text else ''}"
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _version() -> str:
    from gangopt import __version__

    return __version__
