"""Print the time-limit table of docs/benchmarks.md: ``gangopt solve`` end to end (a fresh
process: import, parse, solve, write) on fragmented rounds (busy 0.75, preemption on), with the
wall and CPU seconds of the whole process, the solve's own ``total_seconds`` against its
``--time-limit``, the parse time the CLI reports, the status and how many waiting gangs the time
limit left with unchecked reasons.

    python -m bench.time_limit                    # S M L XL, limits 10 and 2, cpsat and greedy
    python -m bench.time_limit M L --limits 5     # some sizes, other limits
    python -m bench.time_limit XL --solvers koordinator_like --rounds /tmp/r   # /tmp/r/XL.json if there
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.rounds import fragmented_text
from gangopt.reasons import UNCHECKED
from gangopt.solvers.greedy.engine import NOT_CONSIDERED


def run(
    path: Path, solver: str, limit: float, out: Path, lp_bounds: bool = False
) -> tuple[float, float, float, dict[str, object]]:
    """(wall, CPU seconds, peak RSS in GB of the process, the plan) of one ``gangopt solve`` in a
    fresh process (its own resource usage, :func:`os.wait4`: CP-SAT's search child included)."""
    start = time.perf_counter()
    argv = [sys.executable, "-m", "gangopt", "solve", str(path), "--solver", solver, "--time-limit", str(limit)]
    child = subprocess.Popen([*argv, "-o", str(out), *(["--lp-bounds"] if lp_bounds else [])])
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({status})")
    cpu = usage.ru_utime + usage.ru_stime
    plan: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return wall, cpu, usage.ru_maxrss / 1e6, plan


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.time_limit")
    parser.add_argument("sizes", nargs="*", default=["S", "M", "L", "XL"])
    parser.add_argument("--limits", type=float, nargs="+", default=[10.0, 2.0])
    parser.add_argument("--solvers", nargs="+", default=["cpsat", "greedy"])
    parser.add_argument("--lp-bounds", action="store_true", help="gangopt solve --lp-bounds")
    parser.add_argument("--rounds", type=Path, help="read SIZE.json here when it exists (else generate it)")
    args = parser.parse_args()
    print("| size | solver | limit s | process wall s | process CPU s | RSS GB | parse s | solve total s |"
          " total / limit | status | unchecked reasons | not considered |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"{size}.json"
            given = None if args.rounds is None else args.rounds / f"{size}.json"
            if given is not None and given.exists():
                path = given
            else:
                path.write_text(fragmented_text(size, 0.75), encoding="utf-8")
            for limit in args.limits:
                for solver in args.solvers:
                    wall, cpu, rss, plan = run(path, solver, limit, Path(tmp) / "plan.json", args.lp_bounds)
                    stats = plan["stats"]
                    assert isinstance(stats, dict)
                    waiting = plan["waiting"]
                    assert isinstance(waiting, list)
                    unchecked = sum(1 for w in waiting if w["reasons"][-1] == UNCHECKED)
                    unreached = sum(1 for w in waiting if NOT_CONSIDERED in w["reasons"])
                    total, parse = float(stats["total_seconds"]), float(stats["parse_seconds"])
                    print(
                        f"| {size} | {solver} | {limit:g} | {wall:.2f} | {cpu:.2f} | {rss:.2f} | {parse:.2f} "
                        f"| {total:.2f} | {total / limit:.2f} | {plan['status']} | {unchecked} of {len(waiting)} "
                        f"| {unreached} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
