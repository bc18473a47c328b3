"""``gangopt import trace``: a CSV of jobs (or a shipped trace format) to a workload for the
replays (see :mod:`gangopt.replay.traces`).

Registered by :mod:`gangopt.cli` under the ``import`` group; same contract as every command:
problems as ``error: WHERE: message`` with exit 2 and nothing written, the workload written
atomically (``-o``) or to stdout, a one-line summary on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gangopt.cli.output import emit
from gangopt.errors import InputError, Problem
from gangopt.replay.traces import (
    CSV_COLUMNS,
    FORMATS,
    REQUIRED,
    CsvOptions,
    assign_deadlines,
    describe,
    limit,
    parse_seconds,
    read_text,
    scale_load,
    trace_workload,
    window,
)
from gangopt.replay.workload import dump_workload


def _epilog() -> str:
    lines = ["CSV columns (headers matched case-insensitively by these names; --column FIELD=HEADER maps others):"]
    for name, (meaning, aliases) in CSV_COLUMNS.items():
        need = "required" if name in REQUIRED else "optional"
        lines.append(f"  {name:<9}{need}: {meaning} [also: {', '.join(aliases[1:]) or '-'}]")
    lines.append("formats:")
    lines += [f"  {name:<9}{text}" for name, text in FORMATS.items()]
    lines.append("Order: --from/--to window, --limit, --scale-load, then --deadlines. docs/capacity-planning.md")
    return "\n".join(lines)


def add_parser(formats: Any) -> None:
    """Register ``trace`` on the ``import`` group's format subparsers."""
    p = formats.add_parser(
        "trace",
        help="a CSV of jobs (submit,duration,gpus[,...]) or a shipped trace to a workload for simulate/capacity",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="CSV (or .csv.gz) with one row per job")
    p.add_argument("-o", "--output", metavar="WORKLOAD.json", help="write the workload here (atomically)")
    p.add_argument(
        "--format",
        dest="trace_format",
        choices=["auto", *FORMATS],
        default="auto",
        help="default auto: philly, openb or pai when the header is theirs, else csv "
        "(PAI's task table as published has no header: --format pai)",
    )
    p.add_argument("--column", action="append", default=[], metavar="FIELD=HEADER", help="e.g. gpus=num_gpu_requested")
    p.add_argument(
        "--skip-zero-gpus",
        action="store_true",
        help="leave out rows of 0 GPUs (CPU-only jobs) instead of refusing the file; counted in the assumptions",
    )
    p.add_argument("--gpus-per-node", type=int, default=8, metavar="N", help="GPUs per pod at most (default 8)")
    p.add_argument("--cpu-per-gpu", type=int, default=12, metavar="N", help="CPUs per GPU of each pod (default 12)")
    p.add_argument("--memory-per-gpu", type=int, default=64, metavar="GIB", help="GiB per GPU of each pod (default 64)")
    p.add_argument(
        "--deadline-kind",
        choices=["completion", "start"],
        default="completion",
        help="what the CSV's deadline column bounds (default completion, as published traces)",
    )
    p.add_argument("--from", dest="start", metavar="T", help="keep jobs submitted at or after T (s, or 2h, 3d) ...")
    p.add_argument("--to", dest="end", metavar="T", help="... and before T, counted from the first submission")
    p.add_argument("--limit", type=int, metavar="N", help="keep the first N jobs (after the window)")
    p.add_argument("--scale-load", type=float, default=1.0, metavar="F", help="compress arrivals F times (F x load)")
    p.add_argument(
        "--deadlines",
        type=float,
        metavar="FRACTION",
        help="give this share of jobs without a deadline a completion deadline (seeded)",
    )
    p.add_argument(
        "--deadline-slack",
        default="0.5:2",
        metavar="LO[:HI]",
        help="assigned deadline = submit + duration x (1 + s), s uniform in [LO, HI] (default 0.5:2)",
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of assigned values (default 0)")
    p.add_argument("--vc", metavar="VC", help="philly: only this virtual cluster")
    p.set_defaults(func=run_import_trace)


def _columns(terms: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    problems = []
    for term in terms:
        name, eq, header = term.partition("=")
        if not eq or not name or not header:
            problems.append(Problem("--column", f"expected FIELD=HEADER, got {term!r}"))
        else:
            out[name.strip()] = header
    if problems:
        raise InputError(problems, "arguments")
    return out


def _seconds(flag: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return parse_seconds(text)
    except ValueError as error:
        raise InputError([Problem(flag, str(error))], "arguments") from None


def _slack(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(":")
    try:
        low = float(lo)
        high = float(hi) if hi else low
    except ValueError:
        raise InputError([Problem("--deadline-slack", f"expected LO[:HI], got {text!r}")], "arguments") from None
    if not 0 <= low <= high:
        raise InputError([Problem("--deadline-slack", f"need 0 <= LO <= HI, got {text!r}")], "arguments")
    return low, high


def run_import_trace(args: argparse.Namespace) -> int:
    checks = [
        ("--gpus-per-node", args.gpus_per_node >= 1),
        ("--cpu-per-gpu", args.cpu_per_gpu >= 0),
        ("--memory-per-gpu", args.memory_per_gpu >= 0),
        ("--scale-load", args.scale_load > 0),
        ("--limit", args.limit is None or args.limit >= 1),
        ("--deadlines", args.deadlines is None or 0 <= args.deadlines <= 1),
    ]
    problems = [Problem(flag, "invalid value") for flag, ok in checks if not ok]
    if problems:
        raise InputError(problems, "arguments")
    start, end = _seconds("--from", args.start), _seconds("--to", args.end)
    slack = _slack(args.deadline_slack)
    options = CsvOptions(
        columns=_columns(args.column),
        gpus_per_node=args.gpus_per_node,
        cpu_per_gpu=args.cpu_per_gpu,
        memory_gib_per_gpu=args.memory_per_gpu,
        deadline_kind=args.deadline_kind,
        skip_zero_gpus=args.skip_zero_gpus,
    )
    text = read_text(args.file)
    workload, fmt = trace_workload(text, args.trace_format, options, source=args.file, vc=args.vc, seed=args.seed)
    workload = window(workload, start, end)
    if args.limit is not None:
        workload = limit(workload, args.limit)
    workload = scale_load(workload, args.scale_load)
    if args.deadlines is not None:
        workload = assign_deadlines(workload, args.deadlines, slack, args.seed)
    if not workload.jobs:
        raise InputError([Problem("$", "no job left to write (check --from/--to, --vc)")], args.file)
    emit(dump_workload(workload), args.output)
    print(f"imported ({fmt}): {describe(workload)}", file=sys.stderr)
    return 0
