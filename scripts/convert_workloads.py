"""Convert a sample of the Philly trace into a committed workload under instances/workloads/.

Like scripts/convert_traces.py, this is the only place that reads the raw trace; the library
and the tests read the converted file. Re-run it after changing a loader:

    python scripts/convert_workloads.py [--traces ../shared/traces] [--vc VC] [--limit N] [--gzip]
                                        [--out instances/workloads]

The shipped files: the first 8,000 jobs of the busiest VC (``philly-6214e9.json``) and the
whole VC, gzip-compressed (``--limit 0 --gzip``: ``philly-6214e9-full.json.gz``).

Without ``--vc`` the VC with the most jobs is taken. Every assumption is recorded in the
workload's ``assumptions`` list and in instances/workloads/README.md.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

from gangopt.replay.workload import dump_workload, load_philly  # noqa: E402

LIMIT = 2_000_000
"""Bytes per workload file: keep the repository small."""


def busiest_vc(path: Path) -> str:
    with path.open(newline="", encoding="utf-8") as handle:
        counts = Counter(row["cluster"] for row in csv.DictReader(handle))
    return counts.most_common(1)[0][0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--vc", help="Philly VC hash (default: the VC with the most jobs)")
    parser.add_argument(
        "--limit", type=int, default=8000, help="first N jobs by submission time (default 8000; 0: all)"
    )
    parser.add_argument("--gzip", action="store_true", help="write <name>-full.json.gz (or .json.gz), compressed")
    parser.add_argument("--seed", type=int, default=0, help="seed of the assigned priorities etc. (default 0)")
    parser.add_argument("--out", type=Path, default=ROOT / "instances" / "workloads")
    args = parser.parse_args()
    source = args.traces / "microsoft-philly-pollux" / "philly.csv"
    vc = args.vc or busiest_vc(source)
    workload = load_philly(source, vc=vc, limit=args.limit or None, seed=args.seed)
    text = dump_workload(workload)
    data = text.encode("utf-8")
    if args.gzip:
        data = gzip.compress(data, mtime=0)  # mtime 0: re-running gives the same bytes
    size = len(data)
    if size > LIMIT:
        print(f"error: {size} bytes > {LIMIT}; lower --limit", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"philly-{vc}" + ("-full" if not args.limit else "") + ".json" + (".gz" if args.gzip else "")
    target = args.out / name
    target.write_bytes(data)
    span = workload.jobs[-1].arrival / 86400 if workload.jobs else 0.0
    print(f"{target}: {len(workload.jobs)} jobs over {span:.1f} days, {size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
