"""Workloads: the jobs a simulation replays, and loaders from public traces.

A :class:`Job` is what a user submits over time: an arrival time, how long it runs, its gang
shape (roles with per-pod requests, the same :class:`~gangopt.schema.Role` a round uses), a
priority, a queue, an elastic range and an optional deadline. A :class:`Workload` is a list of
jobs plus where they came from: the source, its licence, and every assumption a loader made
(the traces lack priorities, elasticity and deadlines, so those are *assigned*, and said so).

Modelled
--------
* ``duration`` is the run time in seconds **with the job's maximum member count** (for the
  traces: the size it really ran at). How it changes with fewer or more members, and what a
  preemption costs, is the simulator's business (:mod:`gangopt.replay.simulation`).
* ``deadline`` bounds what ``deadline_kind`` says: ``start`` (the default; the meaning of
  ``PendingGang.deadline``) or ``completion`` (the meaning in published traces such as
  ElasticFlow's). The replay turns a completion deadline into the start deadline the round
  needs, ``deadline - duration`` (the latest start that still finishes in time at full
  size), and the metrics count it missed when the job *finishes* after it. Passing a
  completion deadline as a start deadline would silently add the job's duration as slack.

Left out
--------
* Placement constraints beyond what a :class:`~gangopt.schema.Role` says; dependencies between
  jobs; jobs that fail or are killed (the traces say nothing about status); user identities.

Loaders take a path (or a text stream); the library never reads ``../shared`` on its own.
``scripts/convert_workloads.py`` converts trace samples into ``instances/workloads/``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gangopt.checks import check_queues
from gangopt.errors import InputError, Problem
from gangopt.parsing import parse_json
from gangopt.schema import Cluster, GangSpec, Queue, Role, Round

# ----------------------------------------------------------------------------- models


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


DeadlineKind = Literal["start", "completion"]
"""What a job's ``deadline`` bounds: its start (the round's meaning) or its completion."""


class Job(GangSpec):
    """One job of a workload: a gang that arrives, waits, runs for a while and leaves.
    Roles, minimum and maximum follow the same rules as a pending gang (``GangSpec``)."""

    arrival: float = Field(ge=0, description="Submission time, seconds since the workload's start.")
    duration: float = Field(gt=0, description="Run time in seconds with the job's maximum member count.")
    deadline: float | None = Field(
        None,
        description="Deadline, same clock as arrival; whether it bounds the start or the completion is deadline_kind.",
    )
    deadline_kind: DeadlineKind = Field(
        "start",
        description="'start': latest wanted start (as PendingGang.deadline). 'completion': latest wanted finish, "
        "as published traces give it; the replay's rounds see deadline - duration (the latest start that finishes "
        "in time at full size) and the metrics count a miss when the job finishes after the deadline.",
    )
    preemptible: bool = Field(True, description="Whether a higher-priority job may evict or shrink it.")

    @property
    def start_deadline(self) -> float | None:
        """The latest start the round is told (``PendingGang.deadline``): the deadline itself,
        or for a completion deadline ``deadline - duration`` (may be before arrival: a deadline
        no start can meet is still urgent, and counted missed)."""
        if self.deadline is None or self.deadline_kind == "start":
            return self.deadline
        return self.deadline - self.duration

    def gpus(self, resource: str = "gpu") -> float:
        """GPUs (whole units) of all pods at the maximum size."""
        return sum(r.replicas * r.requests.get(resource, 0) for r in self.roles) / 1000.0

    @model_validator(mode="after")
    def _check(self) -> Job:
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate role names in {names}")
        if self.min_members is not None and self.min_members > self.total_replicas:
            raise ValueError(f"min_members {self.min_members} exceeds the {self.total_replicas} pods of the roles")
        if self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} exceeds maximum {self.maximum}")
        if self.deadline is not None and self.deadline < self.arrival:
            raise ValueError(f"deadline {self.deadline} is before arrival {self.arrival}")
        return self


class Workload(_Model):
    """Jobs plus their provenance: what ``gangopt simulate``, ``sweep`` and ``capacity`` replay
    (``gangopt import trace`` writes one from a CSV or a trace). ``assumptions`` lists every
    value that is not data."""

    source: str = Field("", description="Where the jobs came from (trace, file, commit).")
    licence: str = Field("", description="Licence of the underlying data.")
    assumptions: list[str] = Field(
        default_factory=list, description="Every value a converter assigned or assumed rather than read, in words."
    )
    jobs: list[Job] = Field(description="The jobs, in any order (the replay sorts them by arrival).")
    queues: list[Queue] = Field(
        default_factory=list,
        description="Tenant queues (quotas, cohorts, fair-share weights, preemption policies) every round of "
        "the replay declares, as in a round; jobs of queues not listed are unlimited. The replay's report "
        "then shows each queue's share of the GPUs it deserved (gangopt/replay/fairness.py).",
    )

    @model_validator(mode="after")
    def _unique(self) -> Workload:
        seen: dict[str, int] = {}
        for i, job in enumerate(self.jobs):
            if job.name in seen:
                raise ValueError(f"jobs[{i}]: duplicate job name {job.name!r} (first at index {seen[job.name]})")
            seen[job.name] = i
        names: dict[str, int] = {}
        for i, queue in enumerate(self.queues):
            if queue.name in names:
                first = names[queue.name]
                raise ValueError(f"queues[{i}]: duplicate queue name {queue.name!r} (first at index {first})")
            names[queue.name] = i
        return self


def workload_schema() -> dict[str, Any]:
    """The JSON Schema of a workload file, as ``gangopt schema workload`` prints it."""
    return Workload.model_json_schema(mode="validation")


def load_workload(path: str | Path) -> Workload:
    """Read a workload JSON file (gzip-compressed when it ends in ``.gz``: whole trace VCs
    are several MB of JSON); raises :class:`~gangopt.errors.InputError` naming JSON paths."""
    source = Path(path)
    try:
        raw = source.read_bytes()
        text = (gzip.decompress(raw) if source.suffix == ".gz" else raw).decode("utf-8")
    except OSError as error:
        raise InputError([Problem("$", f"cannot read {source}: {error.strerror or error}")], str(source)) from None
    except UnicodeDecodeError as error:
        raise InputError(
            [Problem("$", f"cannot read {source}: not UTF-8 text ({error.reason})")], str(source)
        ) from None
    if _looks_like_csv(text):
        header = text.lstrip().splitlines()[0][:120]
        message = (
            f"this looks like CSV (first line: {header!r}), not a workload (JSON: gangopt schema workload); "
            f"convert it with: gangopt import trace {source} -o WORKLOAD.json"
        )
        raise InputError([Problem("$", message)], str(source))
    workload = parse_json(Workload, text, str(source))
    if workload.queues:
        # the rules a round's queues obey (a lending limit needs a cohort, at most the nominal...)
        tenants = Round.model_construct(cluster=Cluster.model_construct(nodes=[]), queues=workload.queues, cohorts=[])
        problems = [Problem(path, message) for path, message in check_queues(tenants)]
        if problems:
            raise InputError(problems, str(source))
    return workload


def _looks_like_csv(text: str) -> bool:
    """A first line with commas or tabs that does not start a JSON value: a CSV or TSV table."""
    stripped = text.lstrip()
    if not stripped or stripped[0] in "{[":
        return False
    first = stripped.splitlines()[0]
    return "," in first or "\t" in first


def dump_workload(workload: Workload) -> str:
    """Compact, deterministic JSON: one job per line (readable diffs, small files)."""
    data = workload.model_dump(mode="json", exclude_defaults=True)
    jobs = data.pop("jobs")
    head = "".join(f"\n {json.dumps(k)}: {json.dumps(v, indent=1)}," for k, v in data.items())
    lines = [json.dumps(j, separators=(",", ":")) for j in jobs]
    return "{" + head + '\n "jobs": [\n' + ",\n".join(lines) + "\n]}\n"


# ----------------------------------------------------------------------------- seeded assignment


def unit_draw(seed: int, key: str, what: str) -> float:
    """A uniform number in [0, 1) from ``(seed, key, what)``: stable across Python versions and
    independent of row order (unlike ``random.Random`` consumed in sequence)."""
    digest = hashlib.sha256(f"{seed}:{key}:{what}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


PRIORITY_LADDER: tuple[tuple[float, int], ...] = ((0.10, 2), (0.70, 1), (1.00, 0))
"""Cumulative shares -> priority: 10 % high (2), 60 % normal (1), 30 % best effort (0)."""


def assigned_priority(seed: int, key: str) -> int:
    u = unit_draw(seed, key, "priority")
    return next(p for share, p in PRIORITY_LADDER if u < share)


# ----------------------------------------------------------------------------- Philly


PHILLY_SOURCE = (
    "Microsoft Philly trace (Jeon et al., ATC '19), per-job extract philly.csv by the Pollux authors "
    "(petuum/adaptdl@de25dcc, simulator/traces/philly.csv)"
)
PHILLY_LICENCE = "CC BY 4.0 (Philly trace data, msr-fiddle/philly-traces); extract in an Apache-2.0 repository"
GPUS_PER_NODE = 8


def philly_roles(
    gpus: int, cpu_per_gpu: int = 12, memory_gib_per_gpu: int = 64, gpus_per_node: int = GPUS_PER_NODE
) -> list[Role]:
    """The gang for a job of ``gpus`` GPUs on ``gpus_per_node``-GPU servers (8 for Philly).

    ``n = ceil(gpus / gpus_per_node)`` pods. When ``n`` divides ``gpus`` (every size in the
    Philly trace: 1, 2, 4, 8, 12 = 2x6, 16, 24, 32, 64, 128) one role ``worker`` of ``n``
    identical pods of ``gpus / n`` GPUs; otherwise ``worker`` with ``n - 1`` pods of
    ``gpus_per_node`` GPUs and ``tail`` with one pod of the rest. Each pod asks ``cpu_per_gpu``
    CPUs and ``memory_gib_per_gpu`` GiB per GPU (the Helios default node, 8 GPUs / 96 CPUs,
    divided evenly; memory assumed).
    """
    if gpus < 1:
        raise ValueError(f"a Philly job needs at least one GPU, got {gpus}")

    def req(g: int) -> dict[str, Any]:
        return {"gpu": g, "cpu": g * cpu_per_gpu, "memory": f"{g * memory_gib_per_gpu}Gi"}

    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    n = math.ceil(gpus / gpus_per_node)
    if gpus % n == 0:
        return [Role(name="worker", replicas=n, requests=req(gpus // n))]
    return [
        Role(name="worker", replicas=n - 1, requests=req(gpus_per_node)),
        Role(name="tail", replicas=1, requests=req(gpus - gpus_per_node * (n - 1))),
    ]


def philly_jobs(
    rows: Iterable[Mapping[str, str]],
    vc: str | None = None,
    limit: int | None = None,
    seed: int = 0,
    elastic_share: float = 0.5,
    deadline_share: float = 0.1,
    deadline_slack: float = 3600.0,
) -> Workload:
    """Pollux ``philly.csv`` rows (``timestamp,duration,num_gpus,gpu_time,cluster``) -> workload.

    Rows of ``vc`` (all VCs when None) are sorted by submission time (ties: file order) and the
    first ``limit`` kept. Arrival = seconds since the first kept submission; duration = the
    trace's (sum of attempts; at least 1 s); gang from :func:`philly_roles`; queue = the VC.
    Assigned by a seeded hash of the job name (documented in ``assumptions``): priority (10 %
    2, 60 % 1, 30 % 0), elasticity (``elastic_share`` of multi-pod jobs may shrink to half
    their pods, rounded up), deadlines (``deadline_share`` of jobs want to start within
    ``deadline_slack`` seconds of arrival).
    """
    picked: list[tuple[datetime, int, Mapping[str, str]]] = []
    for i, row in enumerate(rows):
        if vc is not None and row["cluster"] != vc:
            continue
        picked.append((datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S"), i, row))
    picked.sort(key=lambda item: (item[0], item[1]))
    if limit is not None:
        picked = picked[:limit]
    jobs: list[Job] = []
    origin = picked[0][0] if picked else None
    width = max(5, len(str(len(picked))))
    for k, (stamp, _, row) in enumerate(picked):
        assert origin is not None
        gpus = int(row["num_gpus"])
        cluster = row["cluster"]
        name = f"philly-{cluster}-{k:0{width}d}"
        roles = philly_roles(gpus)
        pods = sum(r.replicas for r in roles)
        arrival = (stamp - origin).total_seconds()
        min_members = None
        if pods > 1 and unit_draw(seed, name, "elastic") < elastic_share:
            min_members = math.ceil(pods / 2)
        deadline = arrival + deadline_slack if unit_draw(seed, name, "deadline") < deadline_share else None
        jobs.append(
            Job(
                name=name,
                arrival=arrival,
                duration=max(1.0, float(row["duration"])),
                roles=roles,
                priority=assigned_priority(seed, name),
                queue=cluster,
                min_members=min_members,
                deadline=deadline,
            )
        )
    where = f"VC {vc}" if vc is not None else "all VCs"
    first = f", first submission {origin.isoformat(sep=' ')} (arrival 0)" if origin else ""
    assumptions = [
        f"selection: {where}, sorted by submission time, first {len(jobs)} jobs{first}",
        "duration: the trace's run time (sum of attempts, gaps between retries dropped), at least 1 s; "
        "jobs' failures and kills are not known and every job runs to its duration",
        "gang: ceil(GPUs/8) pods; n identical pods of GPUs/n GPUs when n divides GPUs (every size in the trace), "
        "else n-1 pods of 8 GPUs plus a 'tail' pod; per GPU 12 CPUs and 64Gi memory (assumed)",
        "queue: the Philly VC (data)",
        f"priority (assigned, seed {seed}): sha256 draw per job name; 10% priority 2, 60% priority 1, 30% priority 0",
        f"elasticity (assigned, seed {seed}): {elastic_share:.0%} of multi-pod jobs may run with ceil(pods/2) pods; "
        "single-pod jobs are never elastic",
        f"deadlines (assigned, seed {seed}): {deadline_share:.0%} of jobs want to start within "
        f"{deadline_slack:.0f} s of arrival",
        "every job is preemptible (checkpointing is assumed; the simulator states the checkpoint interval)",
    ]
    return Workload(source=PHILLY_SOURCE, licence=PHILLY_LICENCE, assumptions=assumptions, jobs=jobs)


def load_philly(path: str | Path, vc: str | None = None, limit: int | None = None, seed: int = 0) -> Workload:
    """Read the Pollux Philly extract at ``path``; see :func:`philly_jobs` for every choice."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        return philly_jobs(csv.DictReader(f), vc=vc, limit=limit, seed=seed)


# ----------------------------------------------------------------------------- Alibaba openb


OPENB_SOURCE = (
    "Alibaba cluster-trace-gpu-v2023 (openb; Weng et al., ATC '23), alibaba/clusterdata@7a6c496 "
    "cluster-trace-gpu-v2023/csv"
)
OPENB_LICENCE = "no licence file; research or study use with attribution (repository README); not re-licensed"
QOS_PRIORITY: dict[str, int] = {"Guaranteed": 2, "LS": 2, "Burstable": 1, "BE": 0}
"""openb QoS class -> priority (the natural ladder Guaranteed/LS > Burstable > BE)."""


def openb_jobs(rows: Iterable[Mapping[str, str]], limit: int | None = None) -> Workload:
    """openb pod list rows -> one single-pod job per pod (the trace has no gangs).

    Requests: ``cpu_milli`` -> cpu (milli), ``memory_mib`` -> memory (Mi), GPUs =
    ``num_gpu * gpu_milli / 1000`` (a shared GPU becomes a fractional ``gpu`` request);
    ``gpu_spec`` -> required node affinity on ``gpu.model``. Priority from QoS
    (:data:`QOS_PRIORITY`). Arrival = ``creation_time``; duration = ``deletion_time`` minus
    ``scheduled_time`` (``creation_time`` for never-scheduled pods), at least 1 s. The trace's
    timeline describes an almost idle cluster: use these jobs for their **shapes**, not to size
    a cluster (SOURCE.md).
    """
    jobs: list[Job] = []
    for k, row in enumerate(rows):
        if limit is not None and k >= limit:
            break
        gpu_milli = int(row["num_gpu"]) * int(row["gpu_milli"] or 0)
        requests: dict[str, Any] = {"cpu": f"{int(row['cpu_milli'])}m", "memory": f"{int(row['memory_mib'])}Mi"}
        if gpu_milli > 0:
            requests["gpu"] = f"{gpu_milli}m"
        affinity = []
        spec = (row.get("gpu_spec") or "").strip()
        if spec:
            affinity.append({"key": "gpu.model", "operator": "In", "values": spec.split("|")})
        role = Role.model_validate({"name": "worker", "replicas": 1, "requests": requests, "node_affinity": affinity})
        created = float(row.get("creation_time") or 0)
        began = float(row.get("scheduled_time") or created)
        ended = float(row.get("deletion_time") or began + 1)
        jobs.append(
            Job(
                name=row["name"],
                arrival=created,
                duration=max(1.0, ended - began),
                roles=[role],
                priority=QOS_PRIORITY.get(row.get("qos") or "", 0),
                queue="default",
            )
        )
    jobs.sort(key=lambda j: (j.arrival, j.name))
    assumptions = [
        "one single-pod job per pod row (the trace has no gangs); file order kept, then sorted by arrival",
        "priority from QoS: Guaranteed/LS 2, Burstable 1, BE 0 (unknown: 0)",
        "gpu request = num_gpu * gpu_milli / 1000 GPUs; gpu_spec becomes a required affinity on gpu.model",
        "arrival = creation_time; duration = deletion_time - scheduled_time (creation_time if never scheduled), "
        ">= 1 s; the timeline is a near-idle cluster's: use the shapes, not the timing, to size a cluster",
        "no elasticity, no deadlines; every pod preemptible",
    ]
    return Workload(source=OPENB_SOURCE, licence=OPENB_LICENCE, assumptions=assumptions, jobs=jobs)


# ----------------------------------------------------------------------------- Alibaba PAI 2020


PAI_SOURCE = (
    "Alibaba cluster-trace-gpu-v2020 (PAI; Weng et al., NSDI '22) pai_task_table, schema of "
    "alibaba/clusterdata@7a6c496 cluster-trace-gpu-v2020/README.md"
)
PAI_LICENCE = "CC BY 4.0 (alibaba/clusterdata cluster-trace-gpu-v2020/LICENSE); cite Weng et al., NSDI '22"
PAI_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
"""The task table's columns in the published order (its CSV has no header line)."""
PAI_GPU_MODELS = ("P100", "T4", "V100", "V100M32")
"""``gpu_type`` values that become a required ``gpu.model`` affinity (``MISC`` is undisclosed,
``CPU`` and empty ask for none)."""


def pai_jobs(rows: Iterable[Mapping[str, str]], limit: int | None = None) -> Workload:
    """PAI 2020 ``pai_task_table`` rows -> one job per ``job_name``, one role per task.

    A task is a gang of ``inst_num`` instances (the trace's unit of gang scheduling: a PS task
    and a worker task of one job start together), so the job's roles are its tasks, all or
    nothing. Per instance: ``plan_gpu`` percent of a GPU (50 = half: a fractional ``gpu``
    request), ``plan_cpu`` percent of a core, ``plan_mem`` GB; ``gpu_type`` in
    :data:`PAI_GPU_MODELS` becomes a required affinity on ``gpu.model``. Arrival = the earliest
    task start, duration = the latest task end minus it (at least 1 s). Tasks without a start
    or an end (still running when the trace was cut), with no instances, or of a status other
    than Terminated / Failed are left out; so is a job none of whose tasks remains.
    """
    tasks: dict[str, list[Mapping[str, str]]] = {}
    for row in rows:
        status = (row.get("status") or "").strip()
        times = (row.get("start_time") or "").strip(), (row.get("end_time") or "").strip()
        if status not in ("Terminated", "Failed") or not all(times) or int(float(row["inst_num"] or 0)) <= 0:
            continue
        tasks.setdefault(row["job_name"], []).append(row)
    jobs: list[Job] = []
    for name, rows_ in tasks.items():
        if limit is not None and len(jobs) >= limit:
            break
        roles: list[Role] = []
        for k, row in enumerate(sorted(rows_, key=lambda r: r["task_name"])):
            requests: dict[str, Any] = {
                "cpu": f"{round(float(row['plan_cpu'] or 0) * 10)}m",
                "memory": f"{round(float(row['plan_mem'] or 0) * 1024)}Mi",
            }
            gpu = round(float(row["plan_gpu"] or 0) * 10)
            if gpu > 0:
                requests["gpu"] = f"{gpu}m"
            model = (row.get("gpu_type") or "").strip()
            affinity = [{"key": "gpu.model", "operator": "In", "values": [model]}] if model in PAI_GPU_MODELS else []
            task = (row["task_name"] or "").strip() or f"task{k}"
            roles.append(
                Role.model_validate(
                    {
                        "name": task if task not in {r.name for r in roles} else f"{task}-{k}",
                        "replicas": int(float(row["inst_num"])),
                        "requests": requests,
                        "node_affinity": affinity,
                    }
                )
            )
        began = min(float(r["start_time"]) for r in rows_)
        ended = max(float(r["end_time"]) for r in rows_)
        jobs.append(Job(name=name, arrival=began, duration=max(1.0, ended - began), roles=roles, queue="default"))
    if jobs:
        first = min(j.arrival for j in jobs)
        jobs = [j.model_copy(update={"arrival": j.arrival - first}) for j in jobs]
    jobs.sort(key=lambda j: (j.arrival, j.name))
    assumptions = [
        "one job per job_name, one role per task (task_name) with inst_num pods: the job's tasks start together",
        "per pod: plan_gpu/100 GPUs (fractional when shared), plan_cpu/100 cores, plan_mem GB; gpu_type "
        f"{'/'.join(PAI_GPU_MODELS)} becomes a required affinity on gpu.model (MISC, CPU: none)",
        "arrival = earliest task start_time (shifted so the first job arrives at 0); duration = latest end_time "
        "minus it, >= 1 s; only Terminated and Failed tasks with both times",
        "priority 0, queue default, no elasticity, no deadlines; every job preemptible",
    ]
    return Workload(source=PAI_SOURCE, licence=PAI_LICENCE, assumptions=assumptions, jobs=jobs)


def load_openb(path: str | Path, limit: int | None = None) -> Workload:
    """Read an openb pod list CSV at ``path``; see :func:`openb_jobs`."""
    with Path(path).open(newline="", encoding="utf-8") as f:
        return openb_jobs(csv.DictReader(f), limit=limit)
