"""Write gangopt/data/philly_sizes.json: the gang-size mix of the Microsoft Philly trace.

Reads ``../shared/traces/microsoft-philly-pollux/philly.csv`` once (82,247 jobs, 2017; the
Pollux authors' extract of msr-fiddle/philly-traces, see that folder's SOURCE.md) and writes,
per GPU count, the number of jobs and their GPU-hours. ``gangopt.replay.generate`` reads only the
committed table, never the trace. Run from the repository root::

    python scripts/size_mix.py [--trace PATH] [-o gangopt/data/philly_sizes.json]

Data licence: Philly traces, CC BY 4.0 (Jeon et al., ATC '19); extract from petuum/adaptdl
(Apache-2.0; Qiao et al., OSDI '21).
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "microsoft-philly-pollux" / "philly.csv"
DEFAULT_OUT = ROOT / "gangopt" / "data" / "philly_sizes.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(DEFAULT_TRACE))
    parser.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    jobs: Counter[int] = Counter()
    gpu_seconds: dict[int, float] = {}
    with open(args.trace, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            gpus = int(row["num_gpus"])
            jobs[gpus] += 1
            gpu_seconds[gpus] = gpu_seconds.get(gpus, 0.0) + float(row["gpu_time"])
    table = {
        "source": "Microsoft Philly trace (Jeon et al., ATC '19), per-job extract philly.csv by the Pollux "
        "authors (petuum/adaptdl, branch osdi21-artifact, commit de25dcc90c350b8ade3a710e437a651a8d2efae6)",
        "licence": "CC BY 4.0 (Philly traces); extract in an Apache-2.0 repository",
        "made_by": "scripts/size_mix.py",
        "jobs_total": sum(jobs.values()),
        "sizes": [
            {"gpus": g, "jobs": jobs[g], "gpu_hours": round(gpu_seconds[g] / 3600, 1)} for g in sorted(jobs)
        ],
    }
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(jobs)} sizes, {sum(jobs.values())} jobs")


if __name__ == "__main__":
    main()
