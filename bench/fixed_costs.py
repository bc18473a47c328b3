"""Print the fixed-cost table of docs/benchmarks.md (issue 13): what a fresh ``gangopt`` process
pays before and around the solve. Medians of ``--runs`` fresh processes, CPU seconds (user + sys
of the process, from ``wait4``) and wall, run round-robin so that every row sees the same load:

- ``import gangopt.cli`` (a program importing gangopt's CLI), and ``python -m gangopt solve
  --help``: the command's own start (imports as ``gangopt solve`` makes them, in the command's
  process: :mod:`gangopt.startup`), without reading a round;
- ``python -m gangopt solve ROUND -o PLAN`` end to end (import, parse, solve, write) on the
  fragmented S and M rounds (busy 0.75, preemption on), for cpsat, greedy and every peer
  emulation;
- parsing the XL round (in a fresh process, as ``gangopt solve`` reads it: ``gangopt.io.load_round``
  under the CLI's collector setting, or ``gangopt.cli.solve.read_round`` where the code has it),
  and the M round's.

Bytecode is compiled first and the children run without ``PYTHONDONTWRITEBYTECODE`` (installed
packages have their bytecode; without it every import compiles gangopt from source). With
``--baseline DIR`` (a ``git archive`` copy of another commit) every row is also run on that
code, interleaved (who goes first alternates), through ``PYTHONPATH``, and the median of the
run-by-run differences is printed: at load 5-7 a process's CPU seconds vary by ±20 %, far more
than the change between two commits, and the pairs see the same load::

    python -m bench.fixed_costs                      # S and M, every solver, 7 runs
    python -m bench.fixed_costs --runs 9 --baseline /tmp/main-copy
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.rounds import fragmented_text
from gangopt.solvers import SOLVERS

PARSE = (  # a baseline from before gangopt.gcpause parses under the default collector, as its CLI did
    "import sys, time, contextlib\n"
    "try:\n"
    "    from gangopt.gcpause import fewer_collections\n"
    "except ImportError:\n"
    "    fewer_collections = contextlib.nullcontext\n"
    "from gangopt.io import load_round\n"
    "try:  # how `gangopt solve` reads the round, where it has its own way\n"
    "    from gangopt.cli.solve import read_round\n"
    "    load_round = lambda source: read_round(source, whole_process=True)\n"
    "except ImportError:\n"
    "    pass\n"
    "with fewer_collections():\n"
    "    c, w = time.process_time(), time.perf_counter()\n"
    "    load_round(sys.argv[1])\n"
    "    print(time.process_time() - c, time.perf_counter() - w)\n"
)


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one fresh process."""
    start = time.perf_counter()
    # Not in the repository: a child's sys.path starts with its working directory, whose gangopt
    # would shadow the baseline's on PYTHONPATH (both rows then ran this code).
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True, cwd=tempfile.gettempdir())
    out = child.stdout.read() if child.stdout is not None else ""
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"failed ({child.returncode}): {' '.join(argv)}")
    return usage.ru_utime + usage.ru_stime, wall, out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fixed_costs")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sizes", nargs="+", default=["S", "M"])
    parser.add_argument("--baseline", type=Path, help="a copy of another commit's tree, run the same way")
    parser.add_argument("--no-xl", action="store_true", help="skip parsing the XL round")
    args = parser.parse_args()

    codes = {"this": None} if args.baseline is None else {"this": None, "base": args.baseline}
    for root in [Path(__file__).resolve().parents[1], *(p for p in codes.values() if p is not None)]:
        compileall.compile_dir(root / "gangopt", quiet=1)
    envs = {}
    for code, root in codes.items():
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPATH"] = str(root if root is not None else Path(__file__).resolve().parents[1])
        envs[code] = env

    tmp = Path(tempfile.mkdtemp(prefix="fixed_costs_"))
    rounds = {}
    for size in [*args.sizes, *([] if args.no_xl else ["XL"])]:
        rounds[size] = tmp / f"{size}.json"
        rounds[size].write_text(fragmented_text(size, 0.75), encoding="utf-8")
    rows: dict[tuple[str, str], list[str]] = {
        ("import", "-"): [sys.executable, "-c", "import gangopt.cli"],
        # What the command itself pays before it reads a round (gangopt.startup: its process is
        # not a program importing gangopt): `gangopt solve`'s imports, then argparse's help.
        ("command start", "-"): [sys.executable, "-m", "gangopt", "solve", "--help"],
    }
    for size in args.sizes:
        for solver in SOLVERS:  # cpsat, greedy and every peer emulation (no aliases)
            argv = [sys.executable, "-m", "gangopt", "solve", str(rounds[size]), "--solver", solver]
            rows[(f"{size} solve", solver)] = [*argv, "-o", str(tmp / "plan.json")]
    for size in [*args.sizes[1:2], *([] if args.no_xl else ["XL"])]:
        rows[(f"{size} parse", "-")] = [sys.executable, "-c", PARSE, str(rounds[size])]

    load = os.getloadavg()[0]
    began = time.strftime("%H:%M", time.gmtime())
    cpu: dict[tuple[str, str, str], list[float]] = {}
    wall: dict[tuple[str, str, str], list[float]] = {}
    for run in range(args.runs):
        for (what, solver), argv in rows.items():
            for code, env in sorted(envs.items(), reverse=run % 2 == 1):  # who goes first alternates
                c, w, out = measure(argv, env)
                if what.endswith("parse"):  # the parse alone, as the child timed it
                    c, w = (float(x) for x in out.split())
                cpu.setdefault((what, solver, code), []).append(c)
                wall.setdefault((what, solver, code), []).append(w)
    print(f"{began}-{time.strftime('%H:%M', time.gmtime())} UTC, load {load:.1f}-{os.getloadavg()[0]:.1f}, "
          f"{args.runs} runs, medians [min-max]")
    print("| what | solver | code | CPU s | wall s | CPU s vs base, paired |")
    print("|---|---|---|---:|---:|---:|")
    for key in cpu:
        c, w = cpu[key], wall[key]
        paired = ""
        if key[2] != "base" and (key[0], key[1], "base") in cpu:  # run by run, same load
            diff = [x - y for x, y in zip(c, cpu[(key[0], key[1], "base")], strict=True)]
            paired = f"{statistics.median(diff):+.3f} [{min(diff):+.2f}, {max(diff):+.2f}]"
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {statistics.median(c):.3f} [{min(c):.2f}-{max(c):.2f}] "
            f"| {statistics.median(w):.3f} [{min(w):.2f}-{max(w):.2f}] | {paired} |"
        )


if __name__ == "__main__":
    main()
