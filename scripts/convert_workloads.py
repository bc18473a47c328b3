"""Convert trace samples into committed workloads under instances/workloads/.

Like scripts/convert_traces.py, this is the only place that reads the raw traces; the library
and the tests read the converted files. Re-run it after changing a loader:

    python scripts/convert_workloads.py [--traces ../shared/traces] [--vc VC] [--skip K] [--limit N]
                                        [--gzip] [--out instances/workloads]
    python scripts/convert_workloads.py --openb [--traces ...] [--out ...]
    python scripts/convert_workloads.py --all    # every shipped file, byte for byte

The shipped files:

* ``philly-6214e9.json``: the first 8,000 jobs of the busiest VC (the defaults);
* ``philly-6214e9-full.json.gz``: the whole VC, gzip-compressed (``--limit 0 --gzip``);
* ``philly-b436b2-06000.json``: jobs 6,000 ... 7,422 of VC b436b2 (``--vc b436b2 --skip 6000
  --limit 0``), a contended window with multi-node gangs (issue 12);
* ``openb-11M-12M.json``: the Alibaba openb pods created in [11,000,000, 12,000,000) s, 20 %
  of the GPU pods with a start deadline (``--openb``; issue 12).
* ``philly-all-52000.json``: jobs 52,000 ... 53,499 of all VCs together (``--vc all --skip 52000
  --limit 1500``), each VC a tenant queue weighted by its size in ``philly_vc.csv`` (issue 15:
  per-queue fairness in replays).

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

from gangopt.replay.clusters import parametric_cluster  # noqa: E402
from gangopt.replay.workload import Workload, dump_workload, load_openb, load_philly, unit_draw  # noqa: E402
from gangopt.schema import Queue  # noqa: E402

LIMIT = 2_000_000
"""Bytes per workload file: keep the repository small."""

OPENB_WINDOW = (11_000_000.0, 12_000_000.0)
"""Creation times (s) of the openb pods kept: the window issue 12 replays, where queues form."""
OPENB_DEADLINE_SHARE = 0.2
"""Share of the window's GPU pods given a start deadline (seeded hash of the pod name)."""
OPENB_DEADLINE_SLACK = (60.0, 0.5)
"""Deadline = arrival + max(60 s, 0.5 x duration)."""
OPENB_NODES = 2
"""Nodes of ``gangopt simulate --nodes`` the window is meant for (8 GPUs, 96 CPUs, 1Ti each)."""


def busiest_vc(path: Path) -> str:
    with path.open(newline="", encoding="utf-8") as handle:
        counts = Counter(row["cluster"] for row in csv.DictReader(handle))
    return counts.most_common(1)[0][0]


def gpu_load(workload: Workload, gpus: float) -> float:
    """Offered GPU load of ``workload`` on ``gpus`` GPUs: GPU-seconds of every job clipped to
    [first arrival, last arrival], divided by ``gpus`` x that span (issue 12's "77 % of GPU
    demand" for the openb window on 2 nodes)."""
    if len(workload.jobs) < 2:
        return 0.0
    start = min(j.arrival for j in workload.jobs)
    end = max(j.arrival for j in workload.jobs)
    used = sum(j.gpus() * max(0.0, min(end, j.arrival + j.duration) - j.arrival) for j in workload.jobs)
    return used / (gpus * (end - start)) if end > start else 0.0


def philly_window(workload: Workload, skip: int) -> Workload:
    """Jobs ``skip`` ... of a Philly VC workload, arrivals re-based to the first kept job.

    Job names, priorities, elasticity and deadlines are the whole VC's (drawn per job name), so
    a window holds exactly the jobs of the VC's file at the same positions."""
    if skip <= 0:
        return workload
    jobs = workload.jobs[skip:]
    if not jobs:
        raise SystemExit(f"error: --skip {skip} leaves no job")
    origin = jobs[0].arrival
    moved = [
        j.model_copy(
            update={"arrival": j.arrival - origin, "deadline": None if j.deadline is None else j.deadline - origin}
        )
        for j in jobs
    ]
    selection = (
        f"selection: jobs {skip} ... {skip + len(jobs) - 1} of the VC sorted by submission time "
        f"({len(jobs)} jobs; names keep the VC-wide index), arrival 0 = job {skip}'s submission, "
        f"{origin:.0f} s after the VC's first"
    )
    assumptions = [selection, *(a for a in workload.assumptions if not a.startswith("selection:"))]
    return workload.model_copy(update={"jobs": moved, "assumptions": assumptions})


def openb_window(workload: Workload, seed: int = 0) -> Workload:
    """The openb pods created in :data:`OPENB_WINDOW`, re-based to its start, that fit on a
    ``parametric_cluster`` node, with start deadlines on :data:`OPENB_DEADLINE_SHARE` of the
    GPU pods."""
    start, end = OPENB_WINDOW
    node = parametric_cluster(1).nodes[0].capacity
    kept, dropped = [], []
    for job in workload.jobs:
        if not start <= job.arrival < end:
            continue
        if any(r.requests.get(k, 0) > node.get(k, 0) for r in job.roles for k in r.requests):
            dropped.append(job.name)
            continue
        arrival = job.arrival - start
        deadline = None
        if job.gpus() > 0 and unit_draw(seed, job.name, "deadline") < OPENB_DEADLINE_SHARE:
            lo, share = OPENB_DEADLINE_SLACK
            deadline = arrival + max(lo, share * job.duration)
        kept.append(job.model_copy(update={"arrival": arrival, "deadline": deadline}))
    lo, share = OPENB_DEADLINE_SLACK
    assumptions = [
        *(a for a in workload.assumptions if not a.startswith("no elasticity")),
        f"selection: pods with creation_time in [{start:.0f}, {end:.0f}) s of openb_pod_list_default.csv; "
        f"arrival 0 = {start:.0f} s",
        f"left out: {len(dropped)} pod(s) asking more than one {OPENB_NODES}-node replay node offers "
        f"(8 GPUs, 96 CPUs, 1Ti): {', '.join(dropped) or 'none'}",
        f"deadlines (assigned, seed {seed}): {OPENB_DEADLINE_SHARE:.0%} of GPU pods (sha256 draw per pod name) "
        f"want to start by arrival + max({lo:.0f} s, {share} x duration); CPU-only pods have none",
        "no elasticity; every pod preemptible",
        f"meant for --nodes {OPENB_NODES}: GPU demand in the window is "
        f"{gpu_load(Workload(jobs=kept), 8.0 * OPENB_NODES):.0%} of their 16 GPUs",
    ]
    return workload.model_copy(update={"jobs": kept, "assumptions": assumptions})


def write(workload: Workload, target: Path, compress: bool) -> int:
    data = dump_workload(workload).encode("utf-8")
    if compress:
        data = gzip.compress(data, mtime=0)  # mtime 0: re-running gives the same bytes
    size = len(data)
    if size > LIMIT:
        print(f"error: {target.name}: {size} bytes > {LIMIT}; lower --limit", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    span = (workload.jobs[-1].arrival - workload.jobs[0].arrival) / 86400 if workload.jobs else 0.0
    print(f"{target}: {len(workload.jobs)} jobs over {span:.1f} days, {size} bytes")
    return 0


VC_COHORT = "philly"
UNLISTED_VC_NODES = 8
"""Weight of a VC that ``philly_vc.csv`` does not list (the smallest listed size)."""


def vc_queues(traces: Path, workload: Workload) -> tuple[list[Queue], list[str]]:
    """One tenant queue per VC of ``workload``, all in one cohort, weighted by the VC's size in
    nodes (``philly_vc.csv``, the sizes the Helios authors simulated Philly with); no nominal
    quota (Philly's VC quotas were on a cluster other than the replay's). Also the VCs the file
    does not list (weighted :data:`UNLISTED_VC_NODES`)."""
    with (traces / "microsoft-philly-pollux" / "philly_vc.csv").open(newline="", encoding="utf-8") as handle:
        nodes = {row["vc"]: float(row["node num"]) for row in csv.DictReader(handle)}
    names = sorted({j.queue for j in workload.jobs})
    queues = [Queue(name=vc, cohort=VC_COHORT, weight=nodes.get(vc, UNLISTED_VC_NODES)) for vc in names]
    return queues, [vc for vc in names if vc not in nodes]


def convert_philly(traces: Path, out: Path, vc: str | None, skip: int, limit: int, compress: bool, seed: int) -> int:
    source = traces / "microsoft-philly-pollux" / "philly.csv"
    every = vc == "all"
    vc = None if every else vc or busiest_vc(source)
    whole = skip + limit if limit else None
    workload = philly_window(load_philly(source, vc=vc, limit=whole, seed=seed), skip)
    if every:
        queues, unlisted = vc_queues(traces, workload)
        missing = f"; not listed there, weight {UNLISTED_VC_NODES}: {', '.join(unlisted)}" if unlisted else ""
        note = (
            f"tenants: one queue per VC ({len(queues)}) in cohort {VC_COHORT!r}, weight = the VC's nodes in "
            f"philly_vc.csv (HeliosArtifact, MIT){missing}; no nominal quota"
        )
        notes = [
            a.replace("of the VC", "of all VCs").replace("the VC's first", "the trace's first")
            for a in workload.assumptions
        ]
        workload = workload.model_copy(update={"queues": queues, "assumptions": [*notes, note]})
    name = f"philly-{vc or 'all'}" + (f"-{skip:05d}" if skip else "-full" if not limit else "")
    return write(workload, out / (name + ".json" + (".gz" if compress else "")), compress)


def convert_openb(traces: Path, out: Path, seed: int) -> int:
    source = traces / "alibaba-gpu-v2023-openb" / "openb_pod_list_default.csv"
    workload = openb_window(load_openb(source), seed=seed)
    start, end = OPENB_WINDOW
    return write(workload, out / f"openb-{start / 1e6:.0f}M-{end / 1e6:.0f}M.json", compress=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument(
        "--vc", help="Philly VC hash (default: the VC with the most jobs); 'all': every VC, one tenant queue each"
    )
    parser.add_argument("--skip", type=int, default=0, help="leave out the VC's first K jobs (default 0)")
    parser.add_argument(
        "--limit", type=int, default=8000, help="N jobs by submission time after --skip (default 8000; 0: all)"
    )
    parser.add_argument("--gzip", action="store_true", help="write <name>-full.json.gz (or .json.gz), compressed")
    parser.add_argument("--seed", type=int, default=0, help="seed of the assigned priorities etc. (default 0)")
    parser.add_argument("--openb", action="store_true", help="write the openb window of issue 12 instead")
    parser.add_argument("--all", action="store_true", help="write every shipped workload")
    parser.add_argument("--out", type=Path, default=ROOT / "instances" / "workloads")
    args = parser.parse_args()
    if args.skip < 0 or args.limit < 0:
        parser.error("--skip and --limit must be >= 0")
    if args.all:
        return (
            convert_philly(args.traces, args.out, "6214e9", 0, 8000, False, args.seed)
            or convert_philly(args.traces, args.out, "6214e9", 0, 0, True, args.seed)
            or convert_philly(args.traces, args.out, "b436b2", 6000, 0, False, args.seed)
            or convert_openb(args.traces, args.out, args.seed)
            or convert_philly(args.traces, args.out, "all", 52000, 1500, False, args.seed)
        )
    if args.openb:
        return convert_openb(args.traces, args.out, args.seed)
    return convert_philly(args.traces, args.out, args.vc, args.skip, args.limit, args.gzip, args.seed)


if __name__ == "__main__":
    sys.exit(main())
