"""Discrete-event replay of a workload on a cluster, one scheduling round at a time.

Events are job **arrivals** and **completions**. A round runs at the time of an event, but at
most once per ``interval`` seconds (default 60): an event within ``interval`` of the previous
round waits for ``previous + interval``, and every event up to then is decided together (with
``interval=0`` every distinct event time gets its own round). A round is skipped when no
pending job waits and no running elastic job could grow: no policy can do anything then.

Each round builds a :class:`~gangopt.schema.Round` (the cluster, every running job as a
``RunningGang`` with its pods and time since its last checkpoint, every pending job as a
``PendingGang`` with its original arrival as ``submit_time``), calls the policy
(:data:`gangopt.replay.policies.SchedulingPolicy`), checks the plan with :func:`gangopt.validate`
(any violation raises :class:`SimulationError`; ``SimConfig.validate="untrusted"`` skips
this for plans of :func:`gangopt.solve`, which validated them already) and applies it:

* **admit**: the job starts on the placed pods;
* **evict**: the job returns to pending and resumes later from its last checkpoint;
* **shrink / grow** (elastic): the job checkpoints (no work lost) and continues with the new
  member count.

Modelled
--------
* **Speed-up**: a job with ``m`` of its ``M`` maximum members progresses at
  ``(m / M) ** scaling_exponent`` of full speed; ``duration`` is the run time at ``M``.
  ``scaling_exponent=1`` (default) is linear scaling up to the maximum.
* **Checkpoints** every ``checkpoint_interval`` seconds (default 1800) of productive run time,
  counted from the (re)start or the last resize (a resize is a checkpoint). A preemption loses
  the work since the last checkpoint; ``lost GPU-hours`` = GPUs held x wall time since it.
* **Restart**: after a preemption, the job makes no progress for ``restart_seconds``
  (default 0) when it starts again; the same value is what the policy sees as
  ``RunningGang.restart_seconds`` in its preemption cost.

Left out
--------
Pod start-up latency, image pulls and node failures; job failures or early kills; network
contention between co-located jobs; the time a policy takes does not delay the decision
(solver time is recorded, not simulated); autoscaling. Jobs that can never fit the cluster are refused before the
replay (:func:`simulate`'s ``impossible``); kept anyway, they stay pending and are reported unfinished.

Determinism: the simulator draws no random numbers; with a deterministic policy (greedy,
fifo_first_fit, or CP-SAT with one worker stopped by its deterministic limit) the same
workload, cluster and settings give the same result.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from gangopt.checks import check_round
from gangopt.replay.policies import SchedulingPolicy
from gangopt.replay.workload import DeadlineKind, Job, Workload
from gangopt.schema import (
    DETERMINISTIC_SHARE,
    BoundPod,
    Cluster,
    GangSpec,
    LookAhead,
    PendingGang,
    Plan,
    Policy,
    Queue,
    Round,
    RunningGang,
    Weights,
)
from gangopt.solve import cpu_seconds
from gangopt.validation import validate

JobState = Literal["finished", "running", "pending", "not_arrived"]
GPU = "gpu"
WALL_SLACK = 4.0
"""Wall-clock cap of a replay's CP-SAT round, as a multiple of ``SimConfig.time_limit``. The
work limit takes about 0.6-1 s of wall time per second of budget on this project's machines,
so it, and not the clock, decides, and a replay repeats exactly; the cap only stops a
machine several times slower."""


class SimulationError(RuntimeError):
    """The policy returned a plan that breaks a rule, or the simulator's own invariants broke."""


@dataclass(frozen=True)
class SimConfig:
    """Simulation settings; every modelling constant is here and in the module docstring."""

    interval: float = 60.0
    """Rounds run at most once per this many seconds; events in between are batched."""
    checkpoint_interval: float = 1800.0
    """Seconds of productive run time between checkpoints."""
    restart_seconds: float = 0.0
    """No-progress time when a preempted job starts again."""
    scaling_exponent: float = 1.0
    """Speed with m of M members = (m/M) ** exponent of full speed."""
    horizon: float | None = None
    """Stop at this time (seconds since the workload's start); None = until every job is done
    or nothing can change."""
    time_limit: float = 1.0
    """CP-SAT's budget per round, in seconds of this project's reference machine: every round
    gets ``policy.work_limit = DETERMINISTIC_SHARE * time_limit`` (deterministic work units) and
    a wall-clock cap of ``WALL_SLACK * time_limit``, and ``policy.deterministic``: every gate of
    the solve counts work, not the clock, so a replay repeats exactly, on a loaded machine too
    (a wall-clock gate would make reruns differ; the cap only stops a round far past its
    budget, and that round's plan message says so)."""
    seed: int = 0
    """``policy.seed`` of every round."""
    preemption: bool = True
    """``policy.preemption`` of every round."""
    workers: int = 1
    weights: Weights | None = None
    lookahead: LookAhead | None = None
    """``policy.lookahead`` of every round (None: the schema's defaults); only the cpsat solver
    reads it (see :mod:`gangopt.lookahead`)."""
    queues: tuple[Queue, ...] = ()
    """Tenant queues (quotas) of every round; jobs of unlisted queues are unlimited. Empty: the
    workload's own (:attr:`~gangopt.replay.workload.Workload.queues`)."""
    check_rounds: bool = False
    """Also run the round's cross-field checks on every round built (slower; tests use it)."""
    progress: bool = False
    """Show a progress bar on stderr."""
    validate: Literal["always", "untrusted"] = "always"
    """``always``: every plan goes through :func:`gangopt.validate` here. ``untrusted``: skip
    plans of :class:`~gangopt.replay.policies.RegistryPolicy` policies, which the door
    (:func:`gangopt.solve.run`) already validated (it raises or falls back rather than return
    a plan that breaks a rule); every other policy is checked."""

    def __post_init__(self) -> None:
        if self.validate not in ("always", "untrusted"):
            raise ValueError(f"validate must be 'always' or 'untrusted', got {self.validate!r}")
        if self.interval < 0:
            raise ValueError(f"interval must be >= 0, got {self.interval}")
        if not self.checkpoint_interval > 0:
            raise ValueError(f"checkpoint_interval must be > 0, got {self.checkpoint_interval}")
        if self.restart_seconds < 0:
            raise ValueError(f"restart_seconds must be >= 0, got {self.restart_seconds}")
        if self.scaling_exponent < 0:
            raise ValueError(f"scaling_exponent must be >= 0, got {self.scaling_exponent}")


# ----------------------------------------------------------------------------- records


@dataclass
class JobRecord:
    """What happened to one job. Times are seconds since the workload's start."""

    name: str
    arrival: float
    priority: int
    queue: str
    gpus: float
    """GPUs at the job's maximum size."""
    duration: float
    deadline: float | None
    deadline_kind: DeadlineKind = "start"
    """What ``deadline`` bounds: ``start`` or ``completion`` (:attr:`Job.deadline_kind`)."""
    state: JobState = "not_arrived"
    first_start: float | None = None
    finish: float | None = None
    starts: int = 0
    preemptions: int = 0
    lost_gpu_hours: float = 0.0
    waited: float = 0.0
    """Total time pending (all waits, also after preemptions), up to the end for unstarted jobs."""

    @property
    def queueing_delay(self) -> float | None:
        """First start minus arrival; None if the job never started."""
        return None if self.first_start is None else self.first_start - self.arrival

    @property
    def jct(self) -> float | None:
        """Finish minus arrival; None if unfinished."""
        return None if self.finish is None else self.finish - self.arrival


@dataclass
class RoundRecord:
    """One round: what the policy saw, how long it took, what it did."""

    time: float
    pending: int
    running: int
    solver_seconds: float
    status: str
    admitted: int
    evicted: int
    shrunk: int
    grown: int
    gpus_allocated: float
    """After the plan."""
    gpus_free: float
    """After the plan, on schedulable nodes."""
    pending_after: int
    pending_gpus_after: float
    """GPUs the jobs still waiting after the plan need at their minimum size."""


@dataclass
class TimelinePoint:
    """State from ``time`` until the next point (a step function)."""

    time: float
    gpus_allocated: float
    pending: int
    pending_gpus: float
    running: int


@dataclass
class QueuePoint:
    """Per queue, from ``time`` until the next point: GPUs its running jobs hold and GPUs its
    waiting jobs need at their minimum size (recorded only when the workload has several
    queues; :mod:`gangopt.replay.fairness` reads it)."""

    time: float
    allocated: dict[str, float]
    pending: dict[str, float]


@dataclass
class SimulationResult:
    """Everything a simulation produced; :mod:`gangopt.replay.metrics` summarizes it."""

    policy: str
    config: SimConfig
    nodes: int
    gpus_total: float
    start_time: float
    end_time: float
    wall_seconds: float
    jobs: list[JobRecord]
    rounds: list[RoundRecord]
    timeline: list[TimelinePoint]
    dropped: list[str] = field(default_factory=list)
    """Names of the jobs the pre-flight check left out (``simulate(..., impossible="drop")``)."""
    queue_timeline: list[QueuePoint] = field(default_factory=list)
    cpu_seconds: float = 0.0
    """CPU seconds of the replay: this process and its finished children (CP-SAT's search
    child); machines are shared, so this, not ``wall_seconds``, compares policies."""
    """Per-queue allocation and waiting demand over time; empty when every job is in one queue."""

    @property
    def unfinished(self) -> list[JobRecord]:
        """Jobs that arrived but did not finish by the end (running or pending)."""
        return [j for j in self.jobs if j.state in ("running", "pending")]


# ----------------------------------------------------------------------------- live state


@dataclass
class _Live:
    job: Job
    record: JobRecord
    gpu_per_role: dict[str, float]
    pending_gang: PendingGang
    pods: list[BoundPod] = field(default_factory=list)
    saved_work: float = 0.0
    """Seconds of full-speed work saved by the last checkpoint (kept across preemptions)."""
    work0: float = 0.0
    seg_start: float = 0.0
    prod_start: float = 0.0
    rate: float = 0.0
    pending_since: float = 0.0
    run_start: float = 0.0
    """When the current run started (the last start or restart; a resize is not a restart)."""
    version: int = 0
    min_gpus: float = 0.0
    """GPUs of the job's cheapest ``minimum`` pods (what it needs, at least, to start)."""
    running_gang: RunningGang | None = None
    """The job as a running gang on ``running_pods`` (``seconds_since_checkpoint`` 0): built
    once per placement, copied with the time since the checkpoint in every round."""
    running_pods: list[BoundPod] | None = None
    """The ``pods`` list ``running_gang`` was built from (the simulator replaces, never
    modifies, a job's pod list, so identity tells whether the placement changed)."""

    @property
    def gpus_now(self) -> float:
        return sum(self.gpu_per_role[p.role] for p in self.pods)

    def work(self, t: float) -> float:
        return self.work0 + self.rate * max(0.0, t - self.prod_start)

    def checkpoint(self, t: float, interval: float) -> tuple[float, float]:
        """(time, work) of the last checkpoint at or before ``t`` in the current run segment."""
        if t < self.prod_start + interval:
            return self.seg_start, self.work0
        k = math.floor((t - self.prod_start) / interval)
        return self.prod_start + k * interval, self.work0 + self.rate * k * interval

    def finish_time(self) -> float:
        if self.rate <= 0:
            return math.inf
        return self.prod_start + max(0.0, self.job.duration - self.work0) / self.rate


def _gang_fields(job: Job) -> dict[str, Any]:
    """The fields a job shares with every gang (a Job is a GangSpec)."""
    return {name: getattr(job, name) for name in GangSpec.model_fields}


def _pending_gang(job: Job, remaining: float | None = None) -> PendingGang:
    """The job as a pending gang; ``expected_duration`` is its remaining run time at full size
    (the whole duration before its first start)."""
    left = job.duration if remaining is None else remaining
    return PendingGang(
        **_gang_fields(job), submit_time=job.arrival, deadline=job.start_deadline, expected_duration=max(0.0, left)
    )


# ----------------------------------------------------------------------------- simulator


class Simulator:
    """One replay of ``workload`` on ``cluster`` under ``policy``. Use :func:`simulate`."""

    def __init__(
        self,
        workload: Workload,
        cluster: Cluster,
        policy: SchedulingPolicy,
        config: SimConfig,
        name: str,
        on_finished: Callable[[int], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.on_finished = on_finished
        self.policy = policy
        self.config = config
        self.name = name
        self.gpus_total = sum(n.capacity.get(GPU, 0) for n in cluster.nodes if n.schedulable) / 1000.0
        order = sorted(range(len(workload.jobs)), key=lambda i: (workload.jobs[i].arrival, i))
        self.live: list[_Live] = []
        for i in order:
            job = workload.jobs[i]
            record = JobRecord(
                name=job.name,
                arrival=job.arrival,
                priority=job.priority,
                queue=job.queue,
                gpus=job.gpus(),
                duration=job.duration,
                deadline=job.deadline,
                deadline_kind=job.deadline_kind,
            )
            per_role = {r.name: r.requests.get(GPU, 0) / 1000.0 for r in job.roles}
            per_pod = sorted(per_role[r.name] for r in job.roles for _ in range(r.replicas))
            lv = _Live(job, record, per_role, _pending_gang(job), min_gpus=sum(per_pod[: job.minimum]))
            self.live.append(lv)
        self.by_name = {lv.job.name: lv for lv in self.live}
        self.next_arrival = 0
        self.completions: list[tuple[float, int, int]] = []  # (time, live index, version)
        self.index = {lv.job.name: k for k, lv in enumerate(self.live)}
        self.pending: dict[str, _Live] = {}  # insertion order = arrival order (re-queued at the end)
        self.running: dict[str, _Live] = {}
        self.pending_gpus = 0.0
        self.gpus_allocated = 0.0
        self.multi_queue = len({lv.job.queue for lv in self.live}) > 1
        self.pending_by_queue: dict[str, float] = defaultdict(float)
        self.queue_timeline: list[QueuePoint] = []
        self.rounds: list[RoundRecord] = []
        self.timeline: list[TimelinePoint] = []
        self.now = self.live[0].job.arrival if self.live else 0.0

    # ------------------------------------------------------------------ main loop

    def run(self) -> SimulationResult:
        started = time.perf_counter()
        cpu = cpu_seconds()
        bar = _progress(len(self.live), self.config.progress, self.name)
        horizon = self.config.horizon
        next_allowed = -math.inf
        start_time = self.now
        try:
            while True:
                event = self._next_event()
                if event is None:
                    break
                at = max(event, next_allowed)
                if horizon is not None and at > horizon:
                    break
                done = self._process_events(at)
                if bar is not None and done:
                    bar.update(done)
                if self.on_finished is not None and done:
                    self.on_finished(done)
                self.now = at
                if self._round_needed():
                    self._round(at)
                    next_allowed = at + self.config.interval
        finally:
            if bar is not None:
                bar.close()
        end = horizon if horizon is not None else max(self.now, start_time)
        if horizon is not None:
            self._process_events(horizon)  # completions up to the horizon still count
            end = horizon
        self._close(end)
        return SimulationResult(
            policy=self.name,
            config=self.config,
            nodes=len(self.cluster.nodes),
            gpus_total=self.gpus_total,
            start_time=start_time,
            end_time=end,
            wall_seconds=time.perf_counter() - started,
            cpu_seconds=cpu_seconds() - cpu,
            jobs=[lv.record for lv in self.live],
            rounds=self.rounds,
            timeline=self.timeline,
            queue_timeline=self.queue_timeline,
        )

    def _next_event(self) -> float | None:
        self._drop_stale()
        times = []
        if self.next_arrival < len(self.live):
            times.append(self.live[self.next_arrival].job.arrival)
        if self.completions:
            times.append(self.completions[0][0])
        return min(times) if times else None

    def _drop_stale(self) -> None:
        while self.completions:
            _, k, version = self.completions[0]
            lv = self.live[k]
            if lv.record.state == "running" and lv.version == version:
                return
            heapq.heappop(self.completions)

    def _process_events(self, until: float) -> int:
        """Apply every completion and arrival at or before ``until``, in time order
        (completions first on ties); returns the number of completions."""
        finished = 0
        while True:
            self._drop_stale()
            t_done = self.completions[0][0] if self.completions else math.inf
            t_arrive = self.live[self.next_arrival].job.arrival if self.next_arrival < len(self.live) else math.inf
            if min(t_done, t_arrive) > until:
                return finished
            if t_done <= t_arrive:
                t, k, _ = heapq.heappop(self.completions)
                self._complete(self.live[k], t)
                finished += 1
            else:
                lv = self.live[self.next_arrival]
                self.next_arrival += 1
                lv.record.state = "pending"
                lv.pending_since = t_arrive
                self.pending[lv.job.name] = lv
                self.pending_gpus += lv.min_gpus
                self.pending_by_queue[lv.job.queue] += lv.min_gpus
                self._mark(t_arrive)

    def _complete(self, lv: _Live, t: float) -> None:
        lv.record.state = "finished"
        lv.record.finish = t
        self.gpus_allocated -= lv.gpus_now
        lv.pods = []
        lv.version += 1
        del self.running[lv.job.name]
        self._mark(t)

    def _round_needed(self) -> bool:
        if self.pending:
            return True
        return any(lv.job.elastic and len(lv.pods) < lv.job.maximum for lv in self.running.values())

    # ------------------------------------------------------------------ one round

    def build_round(self, t: float) -> Round:
        """The round the policy sees at time ``t``."""
        running = [self._running_gang(lv, t) for lv in self.running.values()]
        pending = [lv.pending_gang for lv in self.pending.values()]
        cfg = self.config
        policy_fields: dict[str, object] = {
            "time_limit": cfg.time_limit * WALL_SLACK,
            "work_limit": DETERMINISTIC_SHARE * cfg.time_limit,
            "deterministic": True,  # every gate counts work; the wall cap is only the safety net
            "seed": cfg.seed,
            "workers": cfg.workers,
            "preemption": cfg.preemption,
            "now": t,
            # Thousands of short rounds: forking a killable child per round costs more than it
            # protects, and the secondary terms need not be proven to the last percent.
            "hard_limit": False,
            "gap_limit": 0.01,
        }
        if cfg.weights is not None:
            policy_fields["weights"] = cfg.weights
        if cfg.lookahead is not None:
            policy_fields["lookahead"] = cfg.lookahead
        policy = Policy.model_validate(policy_fields)
        rnd = Round.model_construct(
            cluster=self.cluster, queues=list(cfg.queues), running=running, pending=pending, policy=policy
        )
        if cfg.check_rounds:
            problems = check_round(rnd)
            if problems:
                listing = "; ".join(f"{p}: {m}" for p, m in problems[:5])
                raise SimulationError(f"internal: round at t={t} is invalid: {listing}")
        return rnd

    def _running_gang(self, lv: _Live, t: float) -> RunningGang:
        """The job as the round sees it: pods, time since its checkpoint, and its times (the
        simulator knows the exact expected end, as a user's exact time limit would)."""
        since, _ = lv.checkpoint(t, self.config.checkpoint_interval)
        end = lv.finish_time()
        return self._placed_gang(lv).model_copy(
            update={
                "seconds_since_checkpoint": max(0.0, t - since),
                "started_at": lv.run_start,
                "expected_end": end if math.isfinite(end) else None,
                "evictions": lv.record.preemptions,
            }
        )

    def _placed_gang(self, lv: _Live) -> RunningGang:
        """``lv.running_gang``, rebuilt when the job's pods changed. Its cached totals
        (minimum, maximum) are computed here, so that every round's copy inherits them; the
        copies are shallow, so rounds share its pods list (a copy of the job's, which no one
        modifies)."""
        if lv.running_gang is None or lv.running_pods is not lv.pods:
            job = lv.job
            gang = RunningGang.model_construct(
                **_gang_fields(job),
                pods=list(lv.pods),
                preemptible=job.preemptible,
                preemption_cost=None,
                seconds_since_checkpoint=0.0,
                restart_seconds=self.config.restart_seconds,
                submit_time=job.arrival,  # within_queue lower_or_newer_equal_priority compares it
            )
            _ = gang.elastic  # computes the cached totals on this gang, once
            lv.running_gang, lv.running_pods = gang, lv.pods
        return lv.running_gang

    def _round(self, t: float) -> None:
        rnd = self.build_round(t)
        clock = time.perf_counter()
        plan = self.policy(rnd)
        elapsed = time.perf_counter() - clock
        trusted = self.config.validate == "untrusted" and getattr(self.policy, "validated", False)
        violations = [] if trusted else validate(rnd, plan)
        if violations:
            details = "; ".join(f"{v.rule}: {v.message}" for v in violations[:5])
            raise SimulationError(f"policy {self.name!r} broke {len(violations)} rule(s) at t={t}: {details}")
        n_pending, n_running = len(rnd.pending), len(rnd.running)
        evicted, shrunk, grown = self._apply(plan, t)
        pending_gpus = self._pending_gpus()
        self.rounds.append(
            RoundRecord(
                time=t,
                pending=n_pending,
                running=n_running,
                solver_seconds=elapsed,
                status=str(plan.status),
                admitted=len(plan.admitted),
                evicted=evicted,
                shrunk=shrunk,
                grown=grown,
                gpus_allocated=self.gpus_allocated,
                gpus_free=self.gpus_total - self.gpus_allocated,
                pending_after=len(self.pending),
                pending_gpus_after=pending_gpus,
            )
        )
        self._mark(t)

    def _apply(self, plan: Plan, t: float) -> tuple[int, int, int]:
        evicted = shrunk = grown = 0
        resized: set[str] = set()
        for pre in plan.preemptions:
            lv = self.running[pre.gang]
            if pre.kind == "evict":
                self._evict(lv, t)
                evicted += 1
            else:
                gone = set(pre.pods)
                self._checkpoint_now(lv, t)
                self.gpus_allocated -= sum(lv.gpu_per_role[p.role] for p in lv.pods if p.name in gone)
                lv.pods = [p for p in lv.pods if p.name not in gone]
                resized.add(lv.job.name)
                shrunk += 1
        new_pods: dict[str, list[BoundPod]] = {}
        for pl in plan.placements:
            new_pods.setdefault(pl.gang, []).append(BoundPod(name=pl.pod, role=pl.role, node=pl.node))
        admitted = set(plan.admitted)
        for name in plan.admitted:
            self._start(self.pending.pop(name), new_pods.get(name, []), t)
        for name, pods in new_pods.items():
            if name in admitted:
                continue
            lv = self.running[name]
            if name not in resized:
                self._checkpoint_now(lv, t)
            lv.pods = lv.pods + pods
            self.gpus_allocated += sum(lv.gpu_per_role[p.role] for p in pods)
            resized.add(name)
            grown += 1
        for name in resized:
            self._new_segment(self.running[name], t, stall=0.0)
        for lv in self.running.values():
            n = len(lv.pods)
            if not lv.job.minimum <= n <= lv.job.maximum:
                raise SimulationError(
                    f"internal: job {lv.job.name} runs {n} pods, outside [{lv.job.minimum}, {lv.job.maximum}]"
                )
        return evicted, shrunk, grown

    def _checkpoint_now(self, lv: _Live, t: float) -> None:
        """A resize checkpoints first: the work done so far is kept."""
        lv.saved_work = lv.work(t)

    def _new_segment(self, lv: _Live, t: float, stall: float) -> None:
        members = len(lv.pods)
        lv.work0 = lv.saved_work
        lv.seg_start = t
        lv.prod_start = t + stall
        lv.rate = (members / lv.job.maximum) ** self.config.scaling_exponent if members else 0.0
        lv.version += 1
        heapq.heappush(self.completions, (lv.finish_time(), self.index[lv.job.name], lv.version))

    def _start(self, lv: _Live, pods: list[BoundPod], t: float) -> None:
        rec = lv.record
        self.pending_gpus -= lv.min_gpus
        self.pending_by_queue[lv.job.queue] -= lv.min_gpus
        restarting = rec.starts > 0
        rec.state = "running"
        rec.starts += 1
        if rec.first_start is None:
            rec.first_start = t
        rec.waited += t - lv.pending_since
        lv.run_start = t
        lv.pods = pods
        self.gpus_allocated += lv.gpus_now
        self.running[lv.job.name] = lv
        self._new_segment(lv, t, stall=self.config.restart_seconds if restarting else 0.0)

    def _evict(self, lv: _Live, t: float) -> None:
        since, saved = lv.checkpoint(t, self.config.checkpoint_interval)
        rec = lv.record
        rec.preemptions += 1
        rec.lost_gpu_hours += lv.gpus_now * (t - since) / 3600.0
        rec.state = "pending"
        lv.saved_work = saved
        self.gpus_allocated -= lv.gpus_now
        lv.pods = []
        lv.rate = 0.0
        lv.version += 1
        lv.pending_since = t
        lv.pending_gang = _pending_gang(lv.job, remaining=lv.job.duration - saved + self.config.restart_seconds)
        del self.running[lv.job.name]
        self.pending[lv.job.name] = lv
        self.pending_gpus += lv.min_gpus
        self.pending_by_queue[lv.job.queue] += lv.min_gpus

    def _pending_gpus(self) -> float:
        return self.pending_gpus if self.pending else 0.0

    def _mark(self, t: float) -> None:
        point = TimelinePoint(
            time=t,
            gpus_allocated=self.gpus_allocated,
            pending=len(self.pending),
            pending_gpus=self._pending_gpus(),
            running=len(self.running),
        )
        if self.timeline and self.timeline[-1].time == t:
            self.timeline[-1] = point
        else:
            self.timeline.append(point)
        if self.multi_queue:
            self._mark_queues(t)

    def _mark_queues(self, t: float) -> None:
        """Per-queue point of :attr:`SimulationResult.queue_timeline` (running jobs summed here:
        they are at most what the cluster holds; waiting demand is kept as jobs come and go)."""
        allocated: dict[str, float] = defaultdict(float)
        for lv in self.running.values():
            allocated[lv.job.queue] += lv.gpus_now
        pending = {q: max(0.0, g) for q, g in self.pending_by_queue.items() if g > 1e-9}
        point = QueuePoint(time=t, allocated=dict(allocated), pending=pending)
        if self.queue_timeline and self.queue_timeline[-1].time == t:
            self.queue_timeline[-1] = point
        else:
            self.queue_timeline.append(point)

    def _close(self, end: float) -> None:
        for lv in self.pending.values():
            lv.record.waited += max(0.0, end - lv.pending_since)


PROGRESS_SMOOTHING = 0.0
"""tqdm's ``smoothing`` for ``simulate --progress``: 0, the ETA from the average rate since the
start. A replay's work comes in bursts (a contended stretch of the trace takes most of the
solver time), and tqdm's default (0.3, a moving average of recent rates) swung with them.
Replaying the first 2,000 Philly jobs on 6 nodes with gangopt (``python -m
bench.progress_eta``, 2 shared cores), the worst error of the predicted total after the first
10 % of the run was 144 % and 69 % with the moving average, 37 % and 38 % with the average
rate (two runs, 118 s and 199 s); the bar ``simulate --progress`` printed was off by up to
178 % before this change and 22 % after it (86 s and 144 s runs)."""


def job_bar(total: int, desc: str) -> Any:
    """A tqdm bar over ``total`` jobs on stderr, ETA from the average rate (every replay bar)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="job", desc=desc, file=sys.stderr, mininterval=0.5, smoothing=PROGRESS_SMOOTHING)


class _Bar:
    def __init__(self, total: int, name: str) -> None:
        self._bar = job_bar(total, f"simulate {name}")

    def update(self, n: int) -> None:
        self._bar.update(n)

    def close(self) -> None:
        self._bar.close()


def _progress(total: int, enabled: bool, name: str) -> _Bar | None:
    return _Bar(total, name) if enabled else None


def simulate(
    workload: Workload,
    cluster: Cluster,
    policy: SchedulingPolicy,
    config: SimConfig | None = None,
    *,
    name: str | None = None,
    impossible: Literal["refuse", "drop", "keep"] = "refuse",
    on_finished: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Replay ``workload`` on ``cluster``, deciding every round with ``policy``.

    First the pre-flight check of every replay (:mod:`gangopt.replay.preflight`), as in the
    CLI: jobs that can never start on ``cluster`` raise :class:`~gangopt.errors.InputError`
    naming each at its JSON path (``impossible="refuse"``, the default), are left out and
    listed in ``result.dropped`` (``"drop"``), or are replayed as they are, waiting to the end
    (``"keep"``: for callers that checked already, and for the sizing search, where a cluster
    too small for a job is a failing size, not a bad input). Unchecked, a library replay
    reported such a job's wait as 0 s when it was alone, and FIFO blocked behind it (issue 16).

    ``on_finished(n)`` hears each batch of ``n`` jobs finishing as the replay goes (what its
    own ``--progress`` bar counts): ``simulate`` with several ``--policy`` feeds one bar over
    all of them with it.

    Raises :class:`SimulationError` if a plan breaks a rule of :func:`gangopt.validate`.
    """
    label = name or str(getattr(policy, "__name__", type(policy).__name__))
    if impossible not in ("refuse", "drop", "keep"):
        raise ValueError(f"impossible must be 'refuse', 'drop' or 'keep', got {impossible!r}")
    config = config or SimConfig()
    if not config.queues and workload.queues:
        config = dataclasses.replace(config, queues=tuple(workload.queues))
    dropped: list[str] = []
    if impossible != "keep":
        from gangopt.replay.preflight import preflight

        workload, found = preflight(
            workload, cluster, drop=impossible == "drop", queues=config.queues, way_out='pass impossible="drop"'
        )
        dropped = [x.name for x in found]
    result = Simulator(workload, cluster, policy, config, label, on_finished).run()
    result.dropped = dropped
    return result
