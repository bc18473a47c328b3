"""From a user's trace to a workload: the CSV importer behind ``gangopt import trace``.

Most job logs reduce to one row per job with a submission time, a run time and a GPU count;
:func:`csv_workload` reads exactly that (:data:`CSV_COLUMNS`, headers matched by name or a
common alias, any header mapped with ``columns``), and the shipped trace loaders
(:func:`~gangopt.replay.workload.philly_jobs`, :func:`~gangopt.replay.workload.openb_jobs`,
:func:`~gangopt.replay.workload.pai_jobs`) are the named formats :data:`FORMATS`. Then, on any of them: a time window
(:func:`window`), load scaling (:func:`gangopt.replay.sweep.variant`: arrivals compressed by a
factor), and seeded deadline assignment (:func:`assign_deadlines`). Every choice that is not
data is written into the workload's ``assumptions``.

A CSV row becomes one gang: ``ceil(gpus / gpus_per_node)`` pods (n identical pods of
``gpus / n`` GPUs when n divides the count, else full pods plus a ``tail`` pod), each with
``cpu_per_gpu`` CPUs and ``memory_gib_per_gpu`` GiB per GPU: the Philly loader's shape
(:func:`~gangopt.replay.workload.philly_roles`).

Errors name the row and column and say what was expected (a file that is not the chosen
format says which columns that format has), as :class:`~gangopt.errors.InputError`.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gangopt.errors import InputError, Problem
from gangopt.replay.sweep import variant
from gangopt.replay.workload import (
    PAI_COLUMNS,
    DeadlineKind,
    Job,
    Workload,
    openb_jobs,
    pai_jobs,
    philly_jobs,
    philly_roles,
    unit_draw,
)

CSV_COLUMNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "submit": (
        "submission time: seconds on any clock, or a timestamp (2017-10-09 07:01:55, ISO 8601); "
        "arrivals count from the first submission",
        ("submit", "submit_time", "submission_time", "submitted", "arrival", "timestamp"),
    ),
    "duration": (
        "run time in seconds at the job's full size (0 becomes 1 s)",
        ("duration", "runtime", "run_time", "duration_s", "elapsed"),
    ),
    "gpus": (
        "GPUs of the whole job, a whole number >= 1",
        ("gpus", "num_gpus", "num_gpu", "gpu_num", "gpu", "ngpus"),
    ),
    "name": ("job name, unique (default: job-<position by submission>)", ("name", "job", "job_id", "jobid", "id")),
    "deadline": (
        "deadline on the submit clock (seconds or a timestamp); what it bounds is --deadline-kind",
        ("deadline", "deadline_time", "ddl"),
    ),
    "priority": ("integer, higher runs first (default 0)", ("priority", "prio")),
    "queue": ("queue, tenant or virtual cluster (default: 'default')", ("queue", "vc", "tenant", "user_group")),
    "min_gpus": (
        "elastic jobs: fewest GPUs the job can run with (whole pods; default: not elastic)",
        ("min_gpus", "min_gpu"),
    ),
}
"""Field -> (meaning, header names it is found under, case-insensitive; the first is the
documented name). ``submit``, ``duration`` and ``gpus`` are required."""

REQUIRED = ("submit", "duration", "gpus")

FORMATS: dict[str, str] = {
    "csv": f"one row per job: {','.join(REQUIRED)}[,{','.join(c for c in CSV_COLUMNS if c not in REQUIRED)}]",
    "philly": "the Pollux extract of Microsoft's Philly trace: timestamp,duration,num_gpus,gpu_time,cluster",
    "openb": "Alibaba cluster-trace-gpu-v2023 (openb) pod list: name,cpu_milli,memory_mib,num_gpu,gpu_milli,"
    "gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time",
    "pai": "Alibaba cluster-trace-gpu-v2020 (PAI) pai_task_table, as published (no header line) or with this "
    "header: " + ",".join(PAI_COLUMNS),
}
"""The ``--format`` names and the columns each expects. (PAI's node inventory is
:func:`gangopt.replay.clusters.pai2020_cluster`.)"""

_NEEDED = {
    "philly": ("timestamp", "duration", "num_gpus", "cluster"),
    "openb": ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"),
    "pai": ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_gpu"),
}
"""Columns the loaders read without a default."""

_SIGNATURES = {
    "philly": {"timestamp", "num_gpus", "gpu_time", "cluster"},
    "openb": {"cpu_milli", "gpu_milli"},
    "pai": {"inst_num", "plan_gpu"},
}

ZERO_GPUS = (
    "a job without GPUs (got '0'): gangopt replays GPU gangs; leave such rows out with --skip-zero-gpus "
    "(CsvOptions.skip_zero_gpus)"
)
"""The error of a 0-GPU row. Real job logs have CPU-only jobs (the Helios and Philly logs do);
refused like a typo, a newcomer's whole file was rejected with no way out but editing it."""

MAX_PROBLEMS = 20
"""Bad rows reported one by one before the rest are counted."""


@dataclass(frozen=True)
class CsvOptions:
    """How CSV rows become jobs."""

    columns: Mapping[str, str] = field(default_factory=dict)
    """Field -> header, overriding the names of :data:`CSV_COLUMNS`."""
    gpus_per_node: int = 8
    cpu_per_gpu: int = 12
    memory_gib_per_gpu: int = 64
    deadline_kind: DeadlineKind = "completion"
    """What the ``deadline`` column bounds (published traces give completion deadlines)."""
    skip_zero_gpus: bool = False
    """Leave out rows of 0 GPUs (CPU-only jobs, common in real job logs) instead of refusing the
    file; the count goes into the workload's assumptions."""


def read_text(path: str | Path) -> str:
    """The file at ``path`` as text (gunzipped when it ends in ``.gz``); InputError if unreadable."""
    source = Path(path)
    try:
        raw = source.read_bytes()
        return (gzip.decompress(raw) if source.suffix == ".gz" else raw).decode("utf-8-sig")
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise InputError([Problem("$", f"cannot read {source}: {reason}")], str(source)) from None
    except UnicodeDecodeError as error:
        problem = Problem("$", f"cannot read {source}: not UTF-8 text ({error.reason})")
        raise InputError([problem], str(source)) from None


def detect_format(header: Sequence[str]) -> str:
    """``philly``, ``openb`` or ``pai`` when the header has that trace's columns, else ``csv``
    (PAI's task table as published has no header: name it with ``--format pai``)."""
    names = {h.strip().lower() for h in header}
    for name, needed in _SIGNATURES.items():
        if needed <= names:
            return name
    return "csv"


def _header_map(header: Sequence[str], options: CsvOptions, source: str) -> dict[str, str]:
    """Field -> the header it is read from."""
    by_lower = {h.strip().lower(): h for h in header}
    problems = []
    for name in options.columns:
        if name not in CSV_COLUMNS:
            problems.append(Problem("--column", f"unknown field {name!r} (fields: {', '.join(CSV_COLUMNS)})"))
    out: dict[str, str] = {}
    for name, (_, aliases) in CSV_COLUMNS.items():
        if name in options.columns:
            wanted = options.columns[name]
            if wanted.strip().lower() not in by_lower:
                problems.append(Problem("--column", f"{name}={wanted}: the header has no column {wanted!r}"))
                continue
            out[name] = by_lower[wanted.strip().lower()]
            continue
        found = next((by_lower[a] for a in aliases if a in by_lower), None)
        if found is not None:
            out[name] = found
        elif name in REQUIRED:
            problems.append(
                Problem(
                    "$",
                    f"the CSV has no column for {name!r} ({CSV_COLUMNS[name][0]}); looked for "
                    f"{', '.join(aliases)}; map yours with --column {name}=HEADER. Header: {', '.join(header)}",
                )
            )
    if problems:
        raise InputError(problems, source)
    return out


def _time(text: str) -> float:
    """Seconds from a number or a timestamp (naive timestamps are read as UTC)."""
    try:
        return float(text)
    except ValueError:
        pass
    stamp = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if stamp.tzinfo is None:
        return (stamp - datetime(1970, 1, 1)).total_seconds()
    return stamp.timestamp()


def csv_workload(text: str, options: CsvOptions | None = None, source: str = "trace.csv") -> Workload:
    """CSV text (one row per job, :data:`CSV_COLUMNS`) -> workload; see the module docstring."""
    options = options or CsvOptions()
    reader = csv.DictReader(io.StringIO(text))
    header = list(reader.fieldnames or [])
    if not header:
        raise InputError([Problem("$", "empty file: expected a CSV header line " + FORMATS["csv"])], source)
    cols = _header_map(header, options, source)
    problems: list[Problem] = []
    bad_rows = 0
    parsed: list[tuple[float, int, dict[str, Any]]] = []
    skipped = 0
    for line, row in enumerate(reader, start=2):
        values, errors = _row(row, cols, line)
        if not errors and values["gpus"] == 0:
            if options.skip_zero_gpus:
                skipped += 1
                continue
            errors = [Problem(f"line {line}, column {cols['gpus']!r}", ZERO_GPUS)]
        if errors:
            bad_rows += 1
            problems += errors
            continue
        parsed.append((values["submit"], line, values))
    if problems:
        shown = problems[:MAX_PROBLEMS]
        if len(problems) > MAX_PROBLEMS:
            shown.append(Problem("$", f"{len(problems) - MAX_PROBLEMS} more problems in {bad_rows} bad rows"))
        raise InputError(shown, source)
    parsed.sort(key=lambda item: (item[0], item[1]))
    origin = parsed[0][0] if parsed else 0.0
    width = max(5, len(str(len(parsed))))
    jobs: list[Job] = []
    names: dict[str, int] = {}
    for k, (submit, line, v) in enumerate(parsed):
        name = v.get("name") or f"job-{k:0{width}d}"
        if name in names:
            problems.append(Problem(f"line {line}, column {cols['name']!r}", f"duplicate job name {name!r}"))
            continue
        names[name] = line
        roles = philly_roles(v["gpus"], options.cpu_per_gpu, options.memory_gib_per_gpu, options.gpus_per_node)
        pods = sum(r.replicas for r in roles)
        min_members = None
        if v.get("min_gpus") is not None and pods > 1:
            min_members = max(1, min(pods, math.ceil(v["min_gpus"] / options.gpus_per_node)))
        arrival = submit - origin
        deadline = v["deadline"] - origin if v.get("deadline") is not None else None
        if deadline is not None and deadline < arrival:
            problems.append(
                Problem(f"line {line}, column {cols['deadline']!r}", "deadline is before the submission time")
            )
            continue
        jobs.append(
            Job(
                name=name,
                arrival=arrival,
                duration=v["duration"],
                roles=roles,
                priority=v.get("priority", 0),
                queue=v.get("queue") or "default",
                min_members=min_members if min_members is not None and min_members < pods else None,
                deadline=deadline,
                deadline_kind=options.deadline_kind if deadline is not None else "start",
            )
        )
    if problems:
        raise InputError(problems[:MAX_PROBLEMS], source)
    mapping = ", ".join(f"{f}<-{h!r}" for f, h in cols.items())
    assumptions = [
        f"columns: {mapping}; arrival 0 = the first submission; sorted by submission (ties: file order)",
        f"gang: ceil(GPUs/{options.gpus_per_node}) pods, identical when the pod count divides the GPUs, else a "
        f"'tail' pod; per GPU {options.cpu_per_gpu} CPUs and {options.memory_gib_per_gpu}Gi memory (assumed)",
        "duration: the CSV's, at least 1 s; every job runs to its duration (no failures) and is preemptible",
    ]
    if "deadline" in cols:
        assumptions.append(f"deadline column read as a {options.deadline_kind} deadline (--deadline-kind)")
    if "priority" not in cols:
        assumptions.append("priority: 0 for every job (no priority column)")
    if skipped:
        assumptions.append(f"left out {skipped} rows of 0 GPUs (CPU-only jobs; --skip-zero-gpus)")
    return Workload(source=f"CSV {source}", assumptions=assumptions, jobs=jobs)


def _row(row: Mapping[str, str | None], cols: Mapping[str, str], line: int) -> tuple[dict[str, Any], list[Problem]]:
    values: dict[str, Any] = {}
    problems: list[Problem] = []

    def cell(name: str) -> str:
        return (row.get(cols[name]) or "").strip()

    def bad(name: str, message: str) -> None:
        problems.append(Problem(f"line {line}, column {cols[name]!r}", f"{message}, got {cell(name)!r}"))

    for name in cols:
        text = cell(name)
        if not text:
            if name in REQUIRED:
                bad(name, f"expected {CSV_COLUMNS[name][0]}")
            continue
        try:
            if name in ("submit", "deadline"):
                values[name] = _time(text)
            elif name == "duration":
                values[name] = max(1.0, float(text))
                if not math.isfinite(values[name]):
                    raise ValueError
            elif name in ("gpus", "min_gpus"):
                number = float(text)
                if number != int(number) or number < (0 if name == "gpus" else 1):  # 0 GPUs: ZERO_GPUS
                    raise ValueError
                values[name] = int(number)
            elif name == "priority":
                values[name] = int(text)
            else:
                values[name] = text
        except (ValueError, OverflowError):
            bad(name, f"expected {CSV_COLUMNS[name][0]}")
    return values, problems


def trace_workload(
    text: str,
    fmt: str = "auto",
    options: CsvOptions | None = None,
    *,
    source: str = "trace",
    vc: str | None = None,
    seed: int = 0,
) -> tuple[Workload, str]:
    """Parse ``text`` in format ``fmt`` (``auto``: by the header); returns the workload and the
    format used. Errors say which columns the format expects."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if fmt == "auto":
        if first.startswith("{"):
            problem = Problem("$", "this is JSON, not a CSV: a workload already? (see gangopt schema workload)")
            raise InputError([problem], source)
        fmt = detect_format(next(csv.reader([first]), []))
    if fmt == "csv":
        return csv_workload(text, options, source), fmt
    if fmt not in FORMATS:
        raise InputError([Problem("--format", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")], source)
    header = [h.strip() for h in next(csv.reader([first]), [])]
    if fmt == "pai" and "job_name" not in header and len(header) == len(PAI_COLUMNS):
        # the task table as published: no header line, the documented column order
        text, header = ",".join(PAI_COLUMNS) + "\n" + text, list(PAI_COLUMNS)
    missing = [c for c in _NEEDED[fmt] if c not in header]
    if missing:
        problem = Problem(
            "$", f"not in the {fmt} format (no column {', '.join(missing)}); expected {FORMATS[fmt]}; header: {first}"
        )
        raise InputError([problem], source)
    rows = list(csv.DictReader(io.StringIO(text)))
    try:
        if fmt == "philly":
            wl = philly_jobs(rows, vc=vc, seed=seed)
        elif fmt == "openb":
            wl = openb_jobs(rows)
        elif fmt == "pai":
            wl = pai_jobs(rows)
        else:
            raise InputError([Problem("--format", f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")], source)
    except (KeyError, ValueError, TypeError) as error:
        if isinstance(error, InputError):
            raise
        problem = Problem("$", f"not in the {fmt} format ({type(error).__name__}: {error}); expected {FORMATS[fmt]}")
        raise InputError([problem], source) from None
    return wl, fmt


def window(workload: Workload, start: float | None = None, end: float | None = None) -> Workload:
    """The jobs arriving in ``[start, end)`` (seconds on the workload's clock), re-based so the
    window starts at 0 (deadlines move with their arrivals)."""
    if start is None and end is None:
        return workload
    lo = start if start is not None else -math.inf
    hi = end if end is not None else math.inf
    shift = start if start is not None else 0.0
    jobs = []
    for job in workload.jobs:
        if lo <= job.arrival < hi:
            update: dict[str, Any] = {"arrival": job.arrival - shift}
            if job.deadline is not None:
                update["deadline"] = job.deadline - shift
            jobs.append(job.model_copy(update=update))
    note = f"window: jobs arriving in [{_span(start)}, {_span(end)}) of the trace, re-based to start at 0"
    return workload.model_copy(update={"jobs": jobs, "assumptions": [*workload.assumptions, note]})


def _span(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:g} s"


def scale_load(workload: Workload, factor: float) -> Workload:
    """Arrivals compressed by ``factor`` (``2``: the same jobs in half the time, twice the load)."""
    if factor == 1.0:
        return workload
    return variant(workload, scale=factor)


def assign_deadlines(workload: Workload, share: float, slack: tuple[float, float], seed: int = 0) -> Workload:
    """Give ``share`` of the jobs without a deadline a **completion** deadline
    ``arrival + duration x (1 + s)``, ``s`` uniform in ``slack``; which jobs and ``s`` are
    sha256 draws per job name and seed (:func:`~gangopt.replay.workload.unit_draw`), so the
    choice does not depend on row order."""
    lo, hi = slack
    if not 0 <= share <= 1 or lo < 0 or hi < lo:
        raise ValueError(f"need 0 <= share <= 1 and 0 <= slack low <= high, got {share}, {slack}")
    jobs = []
    count = 0
    for job in workload.jobs:
        if job.deadline is None and unit_draw(seed, job.name, "deadline") < share:
            s = lo + (hi - lo) * unit_draw(seed, job.name, "slack")
            deadline = job.arrival + job.duration * (1 + s)
            job = job.model_copy(update={"deadline": deadline, "deadline_kind": "completion"})
            count += 1
        jobs.append(job)
    note = (
        f"deadlines (assigned, seed {seed}): {count} jobs ({share:.0%} of those without one) must complete by "
        f"arrival + duration x (1 + s), s uniform in [{lo:g}, {hi:g}]"
    )
    return workload.model_copy(update={"jobs": jobs, "assumptions": [*workload.assumptions, note]})


def parse_seconds(text: str) -> float:
    """``"90"``, ``"30m"``, ``"2h"``, ``"1.5d"`` -> seconds; ValueError otherwise."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|m|min|h|d)?\s*", text)
    if not match:
        raise ValueError(f"expected seconds or a duration like 30m, 2h, 1.5d, got {text!r}")
    unit = {"s": 1, None: 1, "m": 60, "min": 60, "h": 3600, "d": 86400}[match.group(2)]
    return float(match.group(1)) * unit


def describe(workload: Workload) -> str:
    """One line: jobs, span, GPU-hours at full size, deadlines."""
    jobs = workload.jobs
    if not jobs:
        return "0 jobs"
    arrivals = [j.arrival for j in jobs]
    span = (max(arrivals) - min(arrivals)) / 3600
    gpu_hours = sum(j.gpus() * j.duration for j in jobs) / 3600
    kinds: dict[str, int] = {}
    for j in jobs:
        if j.deadline is not None:
            kinds[j.deadline_kind] = kinds.get(j.deadline_kind, 0) + 1
    deadlines = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "none"
    return (
        f"{len(jobs)} jobs arriving over {span:.1f} h, {gpu_hours:,.0f} GPU-hours at full size, "
        f"largest {max(j.gpus() for j in jobs):g} GPUs; deadlines: {deadlines}"
    )


def limit(workload: Workload, count: int) -> Workload:
    """The first ``count`` jobs by arrival."""
    order = sorted(range(len(workload.jobs)), key=lambda i: (workload.jobs[i].arrival, i))[:count]
    jobs = [workload.jobs[i] for i in sorted(order)]
    note = f"limit: the first {len(jobs)} jobs by arrival"
    return workload.model_copy(update={"jobs": jobs, "assumptions": [*workload.assumptions, note]})
