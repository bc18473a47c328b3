"""Draw issue 13's scaling figure into docs/fragmented-scaling.png: on fragmented rounds
(preemption on), every registry solver's CPU seconds and proven gap against node count, all
solvers measured in the same run per size (bench/fragmented_table.py's rows).

    python -m bench.fragmented_figure --sizes S,M,L,XL [--busy 0.75] [--json out.jsonl]
    python -m bench.fragmented_figure --from out.jsonl [-o docs/fragmented-scaling.png]

The CPU seconds are the solve's (``plan.stats.cpu_seconds``: this process and the CP-SAT
child), not the command line's import and parse (bench/fixed_costs.py and bench/time_limit.py
measure those); the dashed line is issue 13's end-to-end target, which includes them.

The right panel is the gap each plan's own bounds prove (``lp_bounds`` for every solver), issue
13's "gap reported". It is not a ranking: a peer that starts less top-tier work gets looser
lower-tier bounds and can report a smaller gap on a worse plan. The ranking is lexicographic
over the tiers (docs/objective.md), and each solver's legend entry says on how many of the
rounds its plan's tiers are below, equal to or above CP-SAT's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = {128: 0.5, 1024: 1.0, 4096: 3.0, 16384: 10.0}  # issue 13, end to end
TARGET_GAP = {128: 0.0, 1024: 1.0, 4096: 1.0, 16384: 2.0}  # issue 13, reported gap (%)
STYLE = {"cpsat": ("gangopt (CP-SAT)", "o", 2.2), "greedy": ("greedy baseline", "s", 1.6)}


def measure(sizes: list[str], busy: float, json_out: Path | None) -> list[dict[str, Any]]:
    """One record a size: every solver on the fragmented round of that size, in this process."""
    from bench.fragmented_table import measure as measure_round
    from bench.fragmented_table import round_text
    from gangopt.parsing import parse_json
    from gangopt.schema import Round

    records = []
    for size in sizes:
        print(f"measuring {size} (busy {busy}) ...", file=sys.stderr, flush=True)
        rnd = parse_json(Round, round_text(size, busy), "round")
        rows = measure_round(rnd)
        record = {"size": size, "busy": busy, "nodes": len(rnd.cluster.nodes), "gangs": len(rnd.pending), "rows": rows}
        records.append(record)
        if json_out is not None:
            with json_out.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")
    return records


def tier_key(row: dict[str, Any]) -> tuple[float, ...]:
    """The plan's tier values, highest priority first: the lexicographic order of the tiers."""
    return tuple(row["tier_values"][p] for p in sorted(row["tier_values"], key=int, reverse=True))


def versus_cpsat(records: list[dict[str, Any]], solver: str) -> str:
    """On how many rounds ``solver``'s tiers are below / equal to / above CP-SAT's."""
    counts = {"below": 0, "equal": 0, "above": 0}
    for record in records:
        rows = {row["solver"]: row for row in record["rows"]}
        mine, theirs = tier_key(rows[solver]), tier_key(rows["cpsat"])
        counts["below" if mine < theirs else "equal" if mine == theirs else "above"] += 1
    return ", ".join(f"{k} cpsat {v}/{len(records)}" for k, v in counts.items() if v)


def draw(records: list[dict[str, Any]], output: Path) -> None:
    records = sorted(records, key=lambda r: r["nodes"])
    solvers = [row["solver"] for row in records[0]["rows"]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.4), dpi=120)
    for solver in solvers:
        label, marker, width = STYLE.get(solver, (solver, ".", 1.0))
        points = [(r["nodes"], row) for r in records for row in r["rows"] if row["solver"] == solver]
        nodes = [n for n, _ in points]
        left.plot(nodes, [max(row["cpu"], 1e-3) for _, row in points], marker=marker, linewidth=width, label=label)
        gaps = [100 * row["gap"] if row["gap"] is not None else float("nan") for _, row in points]
        if solver != "cpsat":
            label += f" ({versus_cpsat(records, solver)})"
        right.plot(nodes, gaps, marker=marker, linewidth=width, label=label)
    target = "issue 13 target (end to end)"
    left.plot(list(TARGET_SECONDS), list(TARGET_SECONDS.values()), "k--", linewidth=1, label=target)
    right.plot(list(TARGET_GAP), list(TARGET_GAP.values()), "k--", linewidth=1, label="issue 13 target")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks([128, 1024, 4096, 16384], ["128", "1,024", "4,096", "16,384"])
        ax.set_xlim(96, 22000)
        ax.set_xlabel("nodes (8 GPUs each)")
        ax.grid(True, which="both", alpha=0.3)
    left.set_yscale("log")
    left.set_ylabel("solve CPU s (this process + CP-SAT child)")
    right.set_ylabel("proven gap, % (each plan's own bounds)")
    busy = sorted({r["busy"] for r in records})
    title = f"Fragmented rounds, preemption on, busy {', '.join(map(str, busy))}: every solver in the same run"
    fig.suptitle(title, fontsize=10)
    right.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    print(f"wrote {output}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="S,M,L,XL")
    parser.add_argument("--busy", type=float, default=0.75)
    parser.add_argument("--from", dest="sources", action="append", type=Path, help="records written by --json")
    parser.add_argument("--json", type=Path, help="also append the measured records here (JSON lines)")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "fragmented-scaling.png")
    args = parser.parse_args(argv)
    if args.sources:
        lines = [line for path in args.sources for line in path.read_text(encoding="utf-8").splitlines()]
        records = [json.loads(line) for line in lines if line.strip()]
    else:
        records = measure(args.sizes.split(","), args.busy, args.json)
    draw(records, args.output)


if __name__ == "__main__":
    main()
