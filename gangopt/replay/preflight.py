"""Pre-flight check of a replay: the jobs of a workload that can never start on a cluster.

A job that fits no node (a 16-GPU pod on 8-GPU nodes, a ``"gpus": 1`` typo read as 1 milli-GPU
the other way round, a selector no node matches) never starts. Replayed anyway, it stays
pending for the whole run: alone in a workload its wait was reported as 0 s, in openb one
120-CPU pod set every policy's maximum wait, and under ``fifo_first_fit`` it blocked the queue
for good (1,713 later pods never started) while the replay exited 0 (issue 16). So every
replay command checks first (:func:`impossible_jobs`) and refuses to run (exit 2, naming each
job's JSON path) unless told to drop them (:func:`drop_impossible`).

The verdict is the solver's own: one round with every job shape pending on the *empty*
cluster (no running gangs, the replay's queues) goes through :func:`gangopt.prefilter.prefilter`,
which prunes a gang exactly when no plan of any solver can admit it, whatever runs (its
minimum pods cannot fit even on idle nodes, not within one domain of its required topology
level, or not within its queue's hard limit). Jobs of one shape (roles, sizes, topology,
queue) are checked once: the 41,226 jobs of the full Philly VC have 14 shapes.

The error names the most precise path it can: for a pod that fits no node, the request that
no eligible node has room for (``$.jobs[12].roles[0].requests.gpu``) or the selector, affinity
or tolerations that leave no node (``...roles[0].node_selector``), with the amounts, found with
the eligibility masks and fit counts of :mod:`gangopt.arrays` (the prefilter's own); for a gang
whose pods fit one by one but not all together, ``$.jobs[12]`` (or ``.topology.required``,
``.queue``) with the prefilter's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gangopt import arrays
from gangopt.errors import InputError, Problem
from gangopt.prefilter import prefilter
from gangopt.quantities import human
from gangopt.replay.workload import Job, Workload
from gangopt.schema import Cluster, GangSpec, PendingGang, Policy, Queue, Role, Round

SHOWN = 5
"""Impossible jobs named one by one in an error; the rest are counted."""


@dataclass(frozen=True)
class Impossible:
    """A job that can never start on the cluster, and why."""

    index: int
    """Position in ``workload.jobs`` (``path`` names the job's index in the file)."""
    name: str
    path: str
    """JSON path in the workload file of what makes it impossible."""
    reason: str


def _shape_key(job: Job) -> str:
    return job.model_dump_json(include={"queue", "roles", "min_members", "max_members", "topology"})


def impossible_jobs(
    workload: Workload,
    cluster: Cluster,
    queues: tuple[Queue, ...] = (),
    positions: Sequence[int] | None = None,
) -> list[Impossible]:
    """Every job of ``workload`` that no plan could ever start on ``cluster`` (see the module
    docstring), in workload order. ``positions`` gives each job's index in the file the paths
    should name (default: its index in ``workload``; a replay of ``--first N`` jobs is a subset)."""
    shapes: dict[str, list[int]] = {}
    for i, job in enumerate(workload.jobs):
        shapes.setdefault(_shape_key(job), []).append(i)
    if not shapes:
        return []
    pending = []
    for k, members in enumerate(shapes.values()):
        job = workload.jobs[members[0]]
        fields = {name: getattr(job, name) for name in GangSpec.model_fields}
        pending.append(PendingGang(**{**fields, "name": f"shape-{k}"}))
    rnd = Round.model_construct(cluster=cluster, queues=list(queues), running=[], pending=pending, policy=Policy())
    pruned = prefilter(rnd).pruned
    if not pruned:
        return []
    resources = arrays.resource_names(rnd)
    capacity = arrays.cluster_capacity(rnd, resources)
    eligibility = arrays.Eligibility(rnd)
    out: list[Impossible] = []
    for k, members in enumerate(shapes.values()):
        verdict = pruned.get(f"shape-{k}")
        if verdict is None:
            continue
        job = workload.jobs[members[0]]
        where, reason = _diagnose(job, eligibility, capacity, resources)
        if where is None:
            where = {"topology": ".topology.required", "quota": ".queue"}.get(verdict.code, "")
            reason = verdict.reason
        for i in members:
            at = positions[i] if positions is not None else i
            out.append(Impossible(i, workload.jobs[i].name, f"$.jobs[{at}]{where}", reason))
    return sorted(out, key=lambda x: x.index)


def _diagnose(
    job: Job, eligibility: arrays.Eligibility, capacity: arrays.IntArray, resources: list[str]
) -> tuple[str | None, str]:
    """The role (and request or constraint) of ``job`` whose single pod fits no node, if any."""
    for r, role in enumerate(job.roles):
        if job.role_minimum(role) == 0:
            continue  # a role the gang may run without does not make it impossible by itself
        rows = eligibility.indices(role)
        if rows.size == 0:
            why = eligibility.explain(role)
            return f".roles[{r}]{_constraint(role, why)}", f"role {role.name!r}: {why}"
        request = arrays.request_vector(role.requests, resources)
        if int(arrays.fit_counts(capacity, request, rows=rows).max()) > 0:
            continue
        for j in sorted(np.flatnonzero(request > 0).tolist(), key=lambda j: resources[j] != "gpu"):  # GPUs first
            largest = int(capacity[rows, j].max())
            if largest < int(request[j]):
                name = resources[j]
                return (
                    f".roles[{r}].requests.{name}",
                    f"role {role.name!r}: one pod asks {human(int(request[j]), name)}; the largest "
                    f"{'eligible ' if _constrained(role) else ''}node has {human(largest, name)}",
                )
    return None, ""


def _constrained(role: Role) -> bool:
    return bool(role.node_selector or role.node_affinity or role.tolerations)


def _constraint(role: Role, why: str) -> str:
    """The field of ``role`` that :meth:`arrays.Eligibility.explain`'s answer points at."""
    if "label" in why and role.node_selector:
        return ".node_selector"
    if "affinity" in why:
        return ".node_affinity"
    if "taint" in why:
        return ".tolerations"
    return ""  # every node cordoned: nothing of the role to point at


def problems(found: list[Impossible], jobs: int, way_out: str = "rerun with --drop-impossible") -> list[Problem]:
    """The error lines for ``found``: the first :data:`SHOWN` jobs, then a count and the way out
    (the CLI's flag, or :func:`gangopt.replay.simulation.simulate`'s argument)."""
    lines = [Problem(x.path, f"job {x.name!r} can never start on this cluster: {x.reason}") for x in found[:SHOWN]]
    more = f" ({len(found) - SHOWN} more not shown)" if len(found) > SHOWN else ""
    lines.append(
        Problem(
            "$.jobs",
            f"{len(found)} of {jobs} jobs can never start on this cluster{more}; the replay would report them "
            "as waiting forever (and block FIFO queues behind them). Fix the workload or the cluster, or "
            f"{way_out} to replay without them",
        )
    )
    return lines


IMPORTED_GANG = "gang: ceil(GPUs/"
"""How the assumptions of a workload written by ``gangopt import trace`` start their gang line."""


def import_hint(workload: Workload, found: Sequence[Impossible]) -> str | None:
    """The way out when pods that fit no node were cut by ``gangopt import trace``: its
    defaults (8 GPUs, 12 CPUs and 64Gi per GPU a pod) are one node shape, and sizing for
    ``--node-shape gpu=4,...`` with them failed every job of more than 4 GPUs (110 of a 300-job
    walk-through's jobs) with no word on the import flags that would fix it (issue 16)."""
    if not any(".requests." in x.path for x in found):
        return None
    gang = next((a for a in workload.assumptions if a.startswith(IMPORTED_GANG)), None)
    if gang is None:
        return None
    return (
        f"the import assumed '{gang}': pods larger than the cluster's nodes come from 'gangopt import "
        "trace' --gpus-per-node, --cpu-per-gpu or --memory-per-gpu; re-import to fit the node shape "
        "(e.g. --gpus-per-node 4 for 4-GPU nodes)"
    )


def drop_impossible(workload: Workload, found: list[Impossible]) -> Workload:
    """``workload`` without the jobs of ``found``; the drop is recorded in its assumptions."""
    if not found:
        return workload
    gone = {x.index for x in found}
    jobs = [job for i, job in enumerate(workload.jobs) if i not in gone]
    names = ", ".join(x.name for x in found[:SHOWN]) + (f" and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
    note = f"dropped before the replay (--drop-impossible): {len(found)} jobs that can never start: {names}"
    return workload.model_copy(update={"jobs": jobs, "assumptions": [*workload.assumptions, note]})


def preflight(
    workload: Workload,
    cluster: Cluster,
    *,
    drop: bool = False,
    queues: tuple[Queue, ...] = (),
    source: str = "workload",
    positions: Sequence[int] | None = None,
    way_out: str = "rerun with --drop-impossible",
) -> tuple[Workload, list[Impossible]]:
    """Check ``workload`` against ``cluster`` before a replay. Without ``drop``, raise
    :class:`~gangopt.errors.InputError` (exit 2) naming the impossible jobs; with it, return
    the workload without them and the list of what was dropped."""
    found = impossible_jobs(workload, cluster, queues, positions)
    if found and not drop:
        lines = problems(found, len(workload.jobs), way_out)
        hint = import_hint(workload, found)
        if hint:
            lines.append(Problem("$.assumptions", hint))
        raise InputError(lines, source)
    return drop_impossible(workload, found), found
