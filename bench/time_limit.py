"""Print the time-limit table of docs/benchmarks.md: ``gangopt solve`` end to end (a fresh
process: import, parse, solve, write) on fragmented rounds (busy 0.75, preemption on), with the
wall and CPU seconds of the whole process, the solve's own ``total_seconds`` against its
``--time-limit``, the parse time the CLI reports, the status and how many waiting gangs the time
limit left with unchecked reasons.

    python -m bench.time_limit                    # S M L XL, limits 10 and 2, cpsat and greedy
    python -m bench.time_limit M L --limits 5     # some sizes, other limits
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.rounds import fragmented_text
from gangopt.reasons import UNCHECKED


def run(path: Path, solver: str, limit: float, out: Path) -> tuple[float, float, dict[str, object]]:
    """(wall, CPU seconds of the process, the plan) of one ``gangopt solve`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    argv = [sys.executable, "-m", "gangopt", "solve", str(path), "--solver", solver, "--time-limit", str(limit)]
    subprocess.run([*argv, "-o", str(out)], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    plan: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return wall, cpu, plan


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.time_limit")
    parser.add_argument("sizes", nargs="*", default=["S", "M", "L", "XL"])
    parser.add_argument("--limits", type=float, nargs="+", default=[10.0, 2.0])
    parser.add_argument("--solvers", nargs="+", default=["cpsat", "greedy"])
    args = parser.parse_args()
    print("| size | solver | limit s | process wall s | process CPU s | parse s | solve total s | total / limit |"
          " status | unchecked reasons |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"{size}.json"
            path.write_text(fragmented_text(size, 0.75), encoding="utf-8")
            for limit in args.limits:
                for solver in args.solvers:
                    wall, cpu, plan = run(path, solver, limit, Path(tmp) / "plan.json")
                    stats = plan["stats"]
                    assert isinstance(stats, dict)
                    waiting = plan["waiting"]
                    assert isinstance(waiting, list)
                    unchecked = sum(1 for w in waiting if w["reasons"][-1] == UNCHECKED)
                    total, parse = float(stats["total_seconds"]), float(stats["parse_seconds"])
                    print(
                        f"| {size} | {solver} | {limit:g} | {wall:.2f} | {cpu:.2f} | {parse:.2f} | {total:.2f} "
                        f"| {total / limit:.2f} | {plan['status']} | {unchecked} of {len(waiting)} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
