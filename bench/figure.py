"""Draw time to plan against node count (log-log) for gangopt and greedy into docs/scaling.png.

    python bench/figure.py --from results.json [--from more.json] [-o docs/scaling.png]
    python bench/figure.py --sizes S,M,L,XL [--runs 3] [--time-limit S]   # measures via bench/table.py

Reads the raw results ``bench/table.py --json FILE`` writes (median and every run per size).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent


def measure(sizes: str, runs: int, time_limit: float | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        cmd = [sys.executable, str(ROOT / "bench" / "table.py"), "--sizes", sizes, "--runs", str(runs)]
        cmd += ["--json", str(out)] + (["--time-limit", str(time_limit)] if time_limit is not None else [])
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return data


def draw(results: dict[str, Any], output: Path, title: str) -> None:
    rows = sorted(results.values(), key=lambda r: r["nodes"])
    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    for solver, label, marker in (("cpsat", "gangopt (CP-SAT)", "o"), ("greedy", "greedy baseline", "s")):
        nodes = [r["nodes"] for r in rows]
        med = [r[solver]["median"] for r in rows]
        lo = [m - min(r[solver]["times"]) for m, r in zip(med, rows, strict=True)]
        hi = [max(r[solver]["times"]) - m for m, r in zip(med, rows, strict=True)]
        ax.errorbar(nodes, med, yerr=[lo, hi], marker=marker, capsize=3, label=label)
    targets = {128: 0.2, 1024: 0.5, 4096: 1.5, 16384: 5.0}
    ax.plot(list(targets), list(targets.values()), "k--", linewidth=1, label="issue 3 target")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([128, 1024, 4096, 16384], ["128", "1,024", "4,096", "16,384"])
    ax.set_xlim(96, 22000)
    ax.set_xlabel("nodes (8 GPUs each)")
    ax.set_ylabel("time to plan, end to end (s, median; bars: min-max)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    print(f"wrote {output}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description="Draw docs/scaling.png.")
    parser.add_argument("--from", dest="sources", action="append", default=[], metavar="FILE")
    parser.add_argument("--sizes", default="S,M")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--time-limit", type=float)
    parser.add_argument("--title", default="gangopt vs greedy, one round, 2 shared cores")
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "scaling.png"))
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for source in args.sources:
        results.update(json.loads(Path(source).read_text(encoding="utf-8")))
    if not results:
        results = measure(args.sizes, args.runs, args.time_limit)
    draw(results, Path(args.output), args.title)


if __name__ == "__main__":
    main()
