"""The simulator, the policies it replays and the metrics computed from it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from pathlib import Path

import pytest

import gangopt
from gangopt.cli import main
from gangopt.errors import InputError
from gangopt.replay.clusters import parametric_cluster
from gangopt.replay.metrics import compute_metrics, metrics_rows, write_report
from gangopt.replay.policies import make_policy
from gangopt.replay.simulation import (
    PROGRESS_SMOOTHING,
    WALL_SLACK,
    JobRecord,
    SimConfig,
    SimulationError,
    SimulationResult,
    TimelinePoint,
    _Bar,
    simulate,
)
from gangopt.replay.workload import Job, Workload, dump_workload, load_workload
from gangopt.schema import DETERMINISTIC_SHARE, SAFETY_NET, Plan, Policy, Round
from gangopt.solvers.fifo import fifo_first_fit
from gangopt.validation import validate

ROOT = Path(__file__).resolve().parent.parent.parent


def job(name: str, arrival: float, duration: float, gpus: int = 8, pods: int = 1, **kw: object) -> Job:
    data = {
        "name": name,
        "arrival": arrival,
        "duration": duration,
        "roles": [{"replicas": pods, "requests": {"gpu": gpus, "cpu": 1}}],
        **kw,
    }
    return Job.model_validate(data)


def random_workload(seed: int, n: int = 40) -> Workload:
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        pods = rng.choice([1, 1, 1, 2, 3])
        gpus = 8 if pods > 1 else rng.choice([1, 2, 4, 8])
        kw: dict[str, object] = {"priority": rng.choice([0, 1, 2]), "queue": rng.choice(["a", "b"])}
        if pods > 1 and rng.random() < 0.5:
            kw["min_members"] = 1
        jobs.append(job(f"j{i}", rng.uniform(0, 20_000), rng.uniform(100, 5_000), gpus, pods, **kw))
    return Workload(jobs=jobs)


class Recorder:
    """Wraps a policy and keeps every round and plan, to check invariants afterwards."""

    def __init__(self, name: str) -> None:
        self.inner = make_policy(name)
        self.seen: list[tuple[Round, Plan]] = []

    def __call__(self, rnd: Round) -> Plan:
        plan = self.inner(rnd)
        self.seen.append((rnd, plan))
        return plan


CHECKED = SimConfig(interval=30.0, check_rounds=True, checkpoint_interval=600.0)


@pytest.mark.parametrize("policy", ["greedy", "fifo_first_fit"])
def test_conservation_and_gangs(policy: str) -> None:
    wl = random_workload(1)
    rec = Recorder(policy)
    result = simulate(wl, parametric_cluster(3), rec, CHECKED, name=policy)
    assert len(result.jobs) == len(wl.jobs)
    assert sorted(j.name for j in result.jobs) == sorted(j.name for j in wl.jobs)
    for r in result.jobs:
        assert r.state == "finished", r
        assert r.first_start is not None and r.finish is not None
        assert r.arrival <= r.first_start < r.finish
        assert r.starts == r.preemptions + 1
    assert rec.seen
    for rnd, plan in rec.seen:
        assert validate(rnd, plan) == []
        for gang in rnd.running:  # never a partial gang on the cluster
            assert gang.minimum <= len(gang.pods) <= gang.maximum
        names = [g.name for g in rnd.running] + [g.name for g in rnd.pending]
        assert len(names) == len(set(names))  # a job is either running or pending, once


def test_gangopt_policy_on_a_small_replay() -> None:
    wl = Workload(jobs=random_workload(2, n=12).jobs)
    result = simulate(wl, parametric_cluster(3), make_policy("gangopt"), SimConfig(time_limit=0.5, check_rounds=True))
    assert all(r.state == "finished" for r in result.jobs)


def test_non_elastic_job_runs_exactly_its_duration_without_preemption() -> None:
    wl = Workload(jobs=[job("a", 0, 1000), job("b", 10, 500)])
    result = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0))
    a, b = result.jobs
    assert (a.first_start, a.finish) == (0, 1000)
    assert (b.first_start, b.finish) == (1000, 1500)
    assert b.queueing_delay == 990 and b.jct == 1490


def test_rounds_are_batched_within_the_interval() -> None:
    wl = Workload(jobs=[job("a", 0, 100, gpus=1), job("b", 10, 100, gpus=1), job("c", 50, 100, gpus=1)])
    result = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=60.0))
    starts = [r.first_start for r in result.jobs]
    assert starts == [0, 60, 60]
    assert [r.time for r in result.rounds] == [0, 60]


def test_preemption_loses_work_since_the_last_checkpoint() -> None:
    low = job("low", 0, 10_000, priority=0)
    high = job("high", 2_500, 1_000, priority=5)
    config = SimConfig(interval=0.0, checkpoint_interval=1_000.0)
    result = simulate(Workload(jobs=[low, high]), parametric_cluster(1), make_policy("greedy"), config)
    lo, hi = result.jobs
    assert (hi.first_start, hi.finish) == (2_500, 3_500)
    assert lo.preemptions == 1 and lo.starts == 2
    # checkpoints at 1000 and 2000: 500 s of 8 GPUs lost; resumes at 3500 with 2000 s done
    assert lo.lost_gpu_hours == pytest.approx(8 * 500 / 3600)
    assert lo.finish == pytest.approx(3_500 + 8_000)
    assert lo.waited == pytest.approx(1_000)
    restart = simulate(
        Workload(jobs=[low, high]),
        parametric_cluster(1),
        make_policy("greedy"),
        SimConfig(interval=0.0, checkpoint_interval=1_000.0, restart_seconds=100.0),
    )
    assert restart.jobs[0].finish == pytest.approx(3_500 + 100 + 8_000)
    metrics = compute_metrics(result)
    assert metrics.preemptions == 1 and metrics.lost_gpu_hours == pytest.approx(8 * 500 / 3600)


def test_elastic_job_speeds_up_when_it_grows() -> None:
    blocker = job("a", 0, 500)
    elastic = job("b", 0, 1_000, pods=2, min_members=1)
    result = simulate(Workload(jobs=[blocker, elastic]), parametric_cluster(2), make_policy("greedy"), SimConfig(0.0))
    a, b = result.jobs
    assert a.finish == 500
    # 500 s at half speed (250 s of work), then the remaining 750 s at full speed
    assert b.first_start == 0 and b.finish == pytest.approx(1_250)
    assert b.preemptions == 0


def test_rounds_show_current_pods_and_time_since_checkpoint() -> None:
    # The simulator builds a job's running gang once per placement and copies it every round
    # with the time since its checkpoint: both must follow the job as it runs and grows.
    jobs = [job("a", 0, 500), job("b", 0, 5_000, pods=2, min_members=1)]
    jobs += [job("huge", 300, 10, pods=3), job("late", 510, 10, pods=3)]  # never fit: only add rounds
    recorder = Recorder("greedy")
    simulate(Workload(jobs=jobs), parametric_cluster(2), recorder, SimConfig(interval=0.0), impossible="keep")
    seen = {
        rnd.policy.now: {g.name: (len(g.pods), g.seconds_since_checkpoint) for g in rnd.running}
        for rnd, _ in recorder.seen
    }
    assert seen[300] == {"a": (1, 300), "b": (1, 300)}
    assert seen[500] == {"b": (1, 500)}  # a finished; b grows in this round (a checkpoint)
    assert seen[510]["b"] == (2, 10)
    assert all(g.minimum == 1 and g.maximum == 2 for rnd, _ in recorder.seen for g in rnd.running if g.name == "b")


def test_horizon_reports_unfinished_and_not_arrived() -> None:
    wl = Workload(jobs=[job("a", 0, 1_000), job("b", 10, 1_000), job("c", 5_000, 10)])
    result = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0, horizon=1_500))
    states = {r.name: r.state for r in result.jobs}
    assert states == {"a": "finished", "b": "running", "c": "not_arrived"}
    assert [r.name for r in result.unfinished] == ["b"]
    metrics = compute_metrics(result)
    assert (metrics.finished, metrics.running_at_end, metrics.not_arrived) == (1, 1, 1)
    assert metrics.end_time == 1_500


def test_progress_bar_counts_every_job_with_the_average_rate(capsys: pytest.CaptureFixture[str]) -> None:
    """``simulate --progress``: one bar to N/N jobs; its ETA from the average rate since the
    start (tqdm's default moving average swung by up to 144 % on a bursty replay, see
    PROGRESS_SMOOTHING), so its rate is the jobs over the whole elapsed time."""
    wl = Workload(jobs=[job(f"j{i}", 10.0 * i, 100) for i in range(5)])
    simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0, progress=True), name="g")
    err = capsys.readouterr().err
    assert "simulate g" in err and "5/5" in err
    bar = _Bar(10, "x")
    try:
        bar.update(4)
        assert bar._bar.smoothing == PROGRESS_SMOOTHING == 0
        assert bar._bar.format_dict["rate"] is None  # no moving average: tqdm divides n by the elapsed time
    finally:
        bar.close()


def test_job_that_never_fits_is_refused_dropped_or_kept() -> None:
    """The library's replay runs the CLI's pre-flight check: by default it refuses, naming the
    job at its JSON path and the way out; dropped, the job is listed; kept, it waits to the end."""
    wl = Workload(jobs=[job("huge", 0, 10, pods=3), job("small", 5, 10, gpus=1)])
    config = SimConfig(interval=0.0)
    with pytest.raises(InputError) as refused:
        simulate(wl, parametric_cluster(2), make_policy("greedy"), config)
    first, last = refused.value.problems
    assert first.path == "$.jobs[0]" and "job 'huge' can never start on this cluster" in first.message
    assert 'pass impossible="drop"' in last.message and "--drop-impossible" not in last.message
    dropped = simulate(wl, parametric_cluster(2), make_policy("greedy"), config, impossible="drop")
    assert dropped.dropped == ["huge"] and [(r.name, r.state) for r in dropped.jobs] == [("small", "finished")]
    result = simulate(wl, parametric_cluster(2), make_policy("greedy"), config, impossible="keep")
    huge, small = result.jobs
    assert result.dropped == []
    assert huge.state == "pending" and huge.first_start is None
    assert small.state == "finished"
    assert compute_metrics(result).unstarted == 1


def test_deterministic() -> None:
    wl = random_workload(7)
    runs = [simulate(wl, parametric_cluster(3), make_policy("greedy"), CHECKED) for _ in range(2)]
    first, second = ([dataclasses.astuple(j) for j in r.jobs] for r in runs)
    assert first == second
    assert [dataclasses.astuple(p) for p in runs[0].timeline] == [dataclasses.astuple(p) for p in runs[1].timeline]


def test_gangopt_replays_repeat_exactly() -> None:
    """CP-SAT rounds stop on deterministic work, not the clock: every round gets a work limit
    of 0.3 x the budget and a wall-clock cap of 4 x, and a rerun gives the same jobs."""
    wl = random_workload(7)
    seen: list[Policy] = []

    def recording(rnd: Round) -> Plan:
        seen.append(rnd.policy)
        return gangopt.solve(rnd)

    config = dataclasses.replace(CHECKED, time_limit=0.5)
    runs = [simulate(wl, parametric_cluster(3), recording, config) for _ in range(2)]
    assert seen and all(p.work_limit == DETERMINISTIC_SHARE * 0.5 and p.time_limit == WALL_SLACK * 0.5 for p in seen)
    first, second = ([dataclasses.astuple(j) for j in r.jobs] for r in runs)
    assert first == second


WALL_METRICS = {"wall_seconds", "solver_seconds", "solver_seconds_total", "jobs_per_second", "cpu_seconds"}
"""The metrics that measure the machine, not the replay."""
LOAD = 5.0
"""The disturbed clock runs this many times faster than the real one: what every wall-clock
reading looks like to a process sharing 2 cores with 9 others (load 5 per core)."""


def _replay(wl: Workload, config: SimConfig, clock_factor: float = 1.0) -> tuple[list[str], str, list[str]]:
    """Digest of every round's plan (all but its stats), of the metrics (but the wall ones), and
    every round's message, of ``gangopt`` replaying ``wl`` on 6 nodes; with ``clock_factor``,
    :func:`time.perf_counter` (which every module reads as ``time.perf_counter``) runs that
    many times faster than real time."""
    plans: list[Plan] = []
    inner = make_policy("gangopt")

    def policy(rnd: Round) -> Plan:
        assert rnd.policy.deterministic
        plan = inner(rnd)
        plans.append(plan)
        return plan

    real = time.perf_counter
    origin = real()
    with pytest.MonkeyPatch.context() as mp:
        if clock_factor != 1.0:
            mp.setattr(time, "perf_counter", lambda: origin + clock_factor * (real() - origin))
        result = simulate(wl, parametric_cluster(6), policy, config)
    digests = [hashlib.sha256(p.model_dump_json(exclude={"stats"}).encode()).hexdigest() for p in plans]
    metrics = compute_metrics(result).model_dump_json(exclude=WALL_METRICS)
    return digests, hashlib.sha256(metrics.encode()).hexdigest(), [p.message for p in plans]


def test_gangopt_replays_repeat_whatever_the_load() -> None:
    """The first 150 jobs of the Philly slice on 6 nodes with a 0.1 s budget per round (so that
    the solver's wall-clock shares would bind on a loaded machine), replayed with the real clock
    and with a clock running 5 times faster: the same plan in every round, the same metrics.
    Before ``policy.deterministic`` (the slot placer's and candidates' shares of the limit, the
    placer's passes and the reserves read the clock) the plans differed from round 33 on, the
    loaded replay took 48 rounds instead of 46, and the metrics differed."""
    jobs = sorted(load_workload(ROOT / "instances/workloads/philly-6214e9.json").jobs, key=lambda j: j.arrival)
    wl = Workload(jobs=jobs[:150])
    config = SimConfig(time_limit=0.1)
    quiet = _replay(wl, config)
    loaded = _replay(wl, config, clock_factor=LOAD)
    assert len(quiet[0]) > 40  # a contended replay: many rounds
    assert not any(SAFETY_NET in m for m in quiet[2] + loaded[2])  # decided by work, not the net
    first = next((i for i, (a, b) in enumerate(zip(quiet[0], loaded[0], strict=False)) if a != b), None)
    assert quiet[0] == loaded[0], f"{len(quiet[0])} vs {len(loaded[0])} rounds; plans differ from round {first}"
    assert quiet[1] == loaded[1]


def test_a_rule_breaking_policy_is_caught() -> None:
    def cheat(rnd: Round) -> Plan:
        from gangopt.schema import Placement

        gang = rnd.pending[0]
        node = rnd.cluster.nodes[0].name
        pods = [Placement(gang=gang.name, role="worker", pod=f"{gang.name}-worker-{i}", node=node) for i in range(3)]
        return Plan(status="feasible", admitted=[gang.name], placements=pods)

    wl = Workload(jobs=[job("a", 0, 10, pods=3)])
    with pytest.raises(SimulationError, match="broke"):
        simulate(wl, parametric_cluster(3), cheat, SimConfig())


def test_fifo_first_fit_blocks_behind_the_head() -> None:
    wl = Workload(jobs=[job("run", 0, 1_000, gpus=4), job("big", 10, 100), job("small", 20, 100, gpus=2)])
    fifo = simulate(wl, parametric_cluster(1), fifo_first_fit, SimConfig(interval=0.0))
    greedy = simulate(wl, parametric_cluster(1), make_policy("greedy"), SimConfig(interval=0.0))
    assert [r.first_start for r in fifo.jobs] == [0, 1_000, 1_100]
    assert [r.first_start for r in greedy.jobs] == [0, 1_000, 20]


# ----------------------------------------------------------------------------- metrics


def record(name: str, arrival: float, start: float | None, finish: float | None, **kw: object) -> JobRecord:
    state = "finished" if finish is not None else ("running" if start is not None else "pending")
    base: dict[str, object] = {"priority": 0, "queue": "q", "gpus": 8.0, "duration": 1.0, "deadline": None}
    base.update(kw)
    return JobRecord(name=name, arrival=arrival, first_start=start, finish=finish, state=state, **base)  # type: ignore[arg-type]


def test_metrics_on_a_hand_checked_case() -> None:
    jobs = [
        record("a", 0, 0, 100, priority=1, deadline=10.0),
        record("b", 0, 40, 140, deadline=30.0),
        record("c", 50, None, None, queue="r", deadline=500.0),
        dataclasses.replace(record("d", 300, None, None), state="not_arrived"),
    ]
    timeline = [
        TimelinePoint(time=0, gpus_allocated=8, pending=1, pending_gpus=8, running=1),
        TimelinePoint(time=40, gpus_allocated=16, pending=0, pending_gpus=0, running=2),
        TimelinePoint(time=50, gpus_allocated=16, pending=1, pending_gpus=4, running=2),
        TimelinePoint(time=100, gpus_allocated=8, pending=1, pending_gpus=4, running=1),
        TimelinePoint(time=140, gpus_allocated=0, pending=1, pending_gpus=4, running=0),
    ]
    result = SimulationResult(
        policy="hand",
        config=SimConfig(),
        nodes=2,
        gpus_total=16.0,
        start_time=0.0,
        end_time=200.0,
        wall_seconds=2.0,
        jobs=jobs,
        rounds=[],
        timeline=timeline,
    )
    m = compute_metrics(result)
    # delays: a 0, b 40, c censored at 200 - 50 = 150
    assert m.queueing_delay.count == 3 and m.queueing_delay.mean == pytest.approx(190 / 3)
    assert m.queueing_delay.p50 == 40 and m.queueing_delay.max == 150
    assert m.queueing_delay.p95 == pytest.approx(40 + 0.9 * 110)
    assert m.queueing_delay_by_priority[1].mean == 0 and m.queueing_delay_by_priority[0].mean == 95
    assert set(m.queueing_delay_by_queue) == {"q", "r"}
    assert m.jct.count == 2 and m.jct.mean == 120
    assert m.unstarted == 1 and m.not_arrived == 1 and m.finished == 2 and m.arrived == 3
    # allocation: 8*40 + 16*10 + 16*50 + 8*40 + 0*60 = 1600 GPU-s over 200 s
    assert m.gpus_allocated_mean == pytest.approx(8.0) and m.utilization_mean == pytest.approx(0.5)
    # idle while waiting: [0,40) free 8, need 8 -> 320; [50,100) free 0; [100,140) free 8 need 4 -> 160;
    # [140,200) free 16 need 4 -> 240.  Plain idle while waiting: 320 + 0 + 320 + 960
    assert m.idle_needed_gpu_hours == pytest.approx((320 + 160 + 240) / 3600)
    assert m.idle_while_waiting_gpu_hours == pytest.approx((320 + 320 + 960) / 3600)
    # deadlines: a met, b missed (40 > 30), c not started and the end (200) is before 500: not missed yet
    assert (m.deadlines, m.deadline_misses) == (3, 1)
    assert m.jobs_per_second == pytest.approx(1.5)
    rows = dict(metrics_rows(m))
    assert rows["queueing_delay_by_priority.1.mean"] == 0 and rows["policy"] == "hand"


def test_report_files(tmp_path: Path) -> None:
    wl = random_workload(3, n=8)
    result = simulate(wl, parametric_cluster(2), make_policy("greedy"), impossible="keep")
    paths = write_report(result, compute_metrics(result), tmp_path)
    assert sorted(p.name for p in paths) == ["jobs.csv", "metrics.csv", "metrics.json", "rounds.csv", "timeline.csv"]
    assert json.loads((tmp_path / "metrics.json").read_text())["jobs"] == 8
    assert (tmp_path / "jobs.csv").read_text().splitlines()[0].endswith("queueing_delay,jct")


# ----------------------------------------------------------------------------- CLI


def test_cli_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.json"
    path.write_text(dump_workload(random_workload(4, n=10)))
    out = tmp_path / "report"
    # 3 nodes: the workload has 3-pod jobs of 8 GPUs, which 2 nodes could never start
    assert main(["simulate", str(path), "--nodes", "3", "--policy", "greedy", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "queueing delay" in text and "policy greedy: 3 nodes, 24 GPUs" in text
    # the workload's jobs are in queues a and b: the summary says what each got of its share
    assert "fair share" in text and "queue a" in text and "Jain's index over queues" in text
    assert "CPU-s" in text.splitlines()[0]
    assert (out / "metrics.json").is_file() and (out / "fairness.png").is_file()
    assert main(["simulate", str(path), "--nodes", "3", "--policy", "fifo_first_fit", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "fifo_first_fit"


def test_cli_simulate_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.json"
    path.write_text(dump_workload(random_workload(4, n=3)))
    assert main(["simulate", str(path), "--nodes", "2", "--select", "x=y"]) == 2
    assert "error: --select: no node has label x=y" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": [{"name": "a", "arrival": 0, "duration": 0, "roles": []}]}')
    assert main(["simulate", str(bad), "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "error: $.jobs[0].duration:" in err and "error: $.jobs[0].roles:" in err
    assert main(["simulate", str(path), "--cluster", str(tmp_path / "none.json")]) == 2
    assert main(["simulate", str(path), "--nodes", "2", "--interval", "-1"]) == 2
    assert main(["simulate", str(path), "--nodes", "2", "--policy", "nope"]) == 2


def test_completion_deadline_becomes_the_rounds_start_deadline() -> None:
    """A completion deadline at 1,000 for a 600 s job: every round sees deadline 400 (the
    latest start that finishes in time); the job starts at 500 behind a blocker, finishes at
    1,100 and misses; the start-deadline twin (deadline 1,000 on the start) meets it."""
    wl = Workload(
        jobs=[
            job("blocker", 0, 500),
            job("late", 10, 600, gpus=4, deadline=1_000.0, deadline_kind="completion"),
            job("twin", 10, 600, gpus=4, deadline=1_000.0),
        ]
    )
    seen = Recorder("greedy")
    result = simulate(wl, parametric_cluster(1), seen, SimConfig(interval=0.0))
    deadlines = {g.name: g.deadline for rnd, _ in seen.seen for g in rnd.pending if g.name != "blocker"}
    assert deadlines == {"late": 400.0, "twin": 1_000.0}
    late = next(r for r in result.jobs if r.name == "late")
    assert late.deadline == 1_000.0 and late.deadline_kind == "completion" and late.finish is not None
    assert late.first_start is not None and late.first_start <= 1_000 < late.finish
    metrics = compute_metrics(result)
    twin = next(r for r in result.jobs if r.name == "twin")
    assert twin.first_start is not None and twin.first_start <= 1_000
    assert (metrics.deadlines, metrics.completion_deadlines, metrics.deadline_misses) == (2, 1, 1)


def test_rounds_carry_the_times_the_look_ahead_reads() -> None:
    """started_at, expected_end and evictions of running jobs, and the remaining work of a
    pending one as its expected_duration (the whole duration before it first starts)."""
    low = job("low", 0, 10_000, priority=0)
    high = job("high", 2_500, 1_000, priority=5)
    late = job("late", 2_600, 50, priority=0)  # a round while low waits again
    recorder = Recorder("greedy")
    config = SimConfig(interval=0.0, checkpoint_interval=1_000.0)
    simulate(Workload(jobs=[low, high, late]), parametric_cluster(1), recorder, config)
    rounds = {rnd.policy.now: rnd for rnd, _ in recorder.seen}
    first = rounds[2_500]
    [running] = first.running
    assert (running.name, running.started_at, running.expected_end, running.evictions) == ("low", 0.0, 10_000.0, 0)
    assert {g.name: g.expected_duration for g in first.pending} == {"high": 1_000.0}
    # evicted at 2500 with 2000 s saved (checkpoints every 1000 s): 8000 s of work remain
    again = rounds[2_600]
    assert {g.name: g.expected_duration for g in again.pending} == {"low": 8_000.0, "late": 50.0}
    [busy] = again.running
    assert (busy.name, busy.started_at, busy.expected_end) == ("high", 2_500.0, 3_500.0)


def test_replays_report_their_cpu_seconds() -> None:
    """Machines are shared: every replay reports CPU seconds beside wall time, in the metrics
    and in the comparison table."""
    from gangopt.replay.report import comparison_rows

    result = simulate(random_workload(3, n=12), parametric_cluster(3), make_policy("greedy"), SimConfig())
    m = compute_metrics(result)
    assert result.cpu_seconds > 0 and m.cpu_seconds == result.cpu_seconds
    header, rows = comparison_rows([m])
    assert header[-1] == "CPU s" and rows[0][-1] == f"{m.cpu_seconds:.1f}"
