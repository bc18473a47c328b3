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
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from gangopt.cli.output import EXIT_FAILURE, EXIT_INPUT, EXIT_OK, one_line
from gangopt.errors import InputError
from gangopt.gcpause import fewer_collections


class _ArgumentError(Exception):
    """argparse's usage errors, raised instead of exiting so ``main`` keeps control of the exit."""



class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _ArgumentError(f"{self.prog}: {message}")



ROUND_COMMANDS = frozenset({"solve", "validate", "schema", "generate", "explain"})
"""The one-round commands (:mod:`gangopt.cli.solve`): run alone, they import none of the
replay, Kubernetes, trace or service modules (0.2-0.3 s of imports they never use)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; separate from :func:`main` so docs and tests can inspect it.

    With ``command`` one of :data:`ROUND_COMMANDS` only those commands are registered (what
    ``main`` does for them: their modules are imported only when they run; ``generate`` only
    when it is the command); otherwise all are."""
    from gangopt.cli.solve import add_parsers as add_round_parsers

    parser = _Parser(prog="gangopt", description="Optimal gang placement for GPU clusters, one round at a time.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    alone = command in ROUND_COMMANDS
    add_round_parsers(sub, command if alone else None)
    if alone:
        return parser
    from gangopt.cli.capacity import add_parsers as add_capacity
    from gangopt.cli.k8s import add_parsers as add_k8s
    from gangopt.cli.serve import add_parser as add_serve
    from gangopt.cli.simulate import add_parser as add_simulate
    from gangopt.cli.trace import add_parser as add_trace

    add_simulate(sub)
    add_capacity(sub)
    add_trace(add_k8s(sub))
    add_serve(sub)
    return parser


def main(argv: list[str] | None = None, began: float | None = None, whole_process: bool = False) -> int:
    """Run the CLI; returns the exit code instead of exiting, so tests can call it directly.

    ``began`` (a ``time.perf_counter`` time, default: now) is when the command's clock started:
    ``solve``'s time limit counts from there (:func:`run` passes the process start, so the
    import counts too). ``whole_process`` (:func:`run`): the process ends with the command, so
    the one-round commands may keep what they parse out of the collector's sight
    (:func:`gangopt.cli.solve.read_round`).

    The garbage collector runs less often meanwhile (:mod:`gangopt.gcpause`: parsing the XL
    round builds millions of objects, none of them garbage; 0.3 of its 1.4 CPU-s went to the
    collector), and its thresholds are restored on return."""
    began = time.perf_counter() if began is None else began
    with fewer_collections():
        code = _main(argv, began, whole_process)
        if whole_process:  # what the command built dies with the process: no collection walks it
            gc.freeze()
        return code


def process_age() -> float:
    """Seconds since this process started (Linux ``/proc/self/stat``, to the clock tick), or 0
    where that cannot be read: interpreter start-up and imports, 0.2-0.4 s of a ``gangopt solve``."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def run() -> NoReturn:
    """The ``gangopt`` script and ``python -m gangopt``: :func:`main`, then exit without
    tearing the interpreter down.

    Freeing every module and object one by one at exit is 4 % of a whole ``gangopt solve`` of
    the fragmented S round (86 M of 1,949 M instructions, valgrind; issue 13) and changes
    nothing the caller sees: the output is written (``-o`` renamed into place) or flushed
    here first. Only the one-round commands do this, and only with no other thread or child
    process alive; the replays, the importers and the service (worker pools, their atexit
    handlers) exit the ordinary way."""
    code = main(began=time.perf_counter() - process_age(), whole_process=True)
    one_round = not sys.argv[1:] or sys.argv[1] in ROUND_COMMANDS
    if not (one_round and _alone()):
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: let the ordinary exit report it
        sys.exit(code)
    os._exit(code)


def _alone() -> bool:
    """Whether this process runs no other thread and has no live child process."""
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return False
    multiprocessing = sys.modules.get("multiprocessing")
    return multiprocessing is None or not multiprocessing.active_children()


def _main(argv: list[str] | None, began: float, whole_process: bool = False) -> int:
    try:
        given = sys.argv[1:] if argv is None else argv
        args = build_parser(given[0] if given else None).parse_args(given)
        args.began = began
        args.whole_process = whole_process
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
        print(f"error: {one_line(error)}", file=sys.stderr)
        return EXIT_FAILURE



def _version() -> str:
    from gangopt import __version__

    return __version__



__all__ = ["build_parser", "main", "process_age", "run"]
