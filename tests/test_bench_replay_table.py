"""Issue 12's replay benchmark (``bench/replay_table.py``): the target evaluation on
constructed tables (one where each target must fail, one where all must pass) and the table
logic on a tiny replay."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.replay_table import HEADLINE, Outcome, Replay, evaluate, load, main, run_policy, table
from gangopt.replay.simulation import SimConfig

GOOD = Outcome(
    mean_wait=100.0,
    p95_wait=500.0,
    p99_wait=900.0,
    mean_jct=3600.0,
    deadline_misses=3,
    preemptions=2,
    p2_p95_wait=60.0,
    largest_p95_wait=1000.0,
    jobs_per_cpu_second=100.0,
)


def _peer(**changes: float) -> Outcome:
    """A peer worse than GOOD on everything, then ``changes``."""
    worse = Outcome(200.0, 800.0, 1500.0, 5000.0, 9, 5, 300.0, 2000.0, 150.0)
    return dataclasses.replace(worse, **changes)  # type: ignore[arg-type]


def _verdicts(outcomes: dict[str, Outcome]) -> list[bool]:
    return [t.passed for t in evaluate(outcomes, interval=60.0)]


def test_every_target_passes_when_gangopt_leads() -> None:
    # koordinator better on exactly one headline metric (p99) still passes target 1
    outcomes = {"gangopt": GOOD, "greedy": _peer(), "koordinator_like": _peer(p99_wait=800.0)}
    targets = evaluate(outcomes, interval=60.0)
    assert [t.passed for t in targets] == [True] * 6, targets
    # the largest class may be 10 % above the best peer's
    outcomes["volcano_like"] = _peer(largest_p95_wait=1000.0 / 1.1)
    assert all(_verdicts(outcomes))


def test_each_target_fails_on_its_own_constructed_table() -> None:
    base = {"gangopt": GOOD, "greedy": _peer()}
    cases = {
        0: {"koordinator_like": _peer(mean_wait=50.0, p95_wait=400.0)},  # a peer better on two
        2: {"greedy": _peer(preemptions=1)},  # more preemptions than greedy
        4: {"volcano_like": _peer(largest_p95_wait=900.0)},  # 1000 > 1.1 x 900
        5: {"greedy": _peer(jobs_per_cpu_second=250.0)},  # under half of greedy's speed
    }
    for index, change in cases.items():
        verdicts = _verdicts({**base, **change})
        assert verdicts[index] is False and verdicts.count(False) == 1, (index, verdicts)
    slow_p2 = _verdicts({**base, "gangopt": dataclasses.replace(GOOD, p2_p95_wait=121.0)})
    assert slow_p2 == [True, True, True, False, True, True]


def test_worst_means_highest_but_not_when_everyone_ties() -> None:
    # gangopt has the worst p99 only (one peer better on one metric each: target 1 passes)
    outcomes = {"gangopt": dataclasses.replace(GOOD, p99_wait=2000.0), "greedy": _peer(), "kueue_like": _peer()}
    targets = evaluate(outcomes, interval=60.0)
    assert targets[0].passed and not targets[1].passed and targets[1].detail == "p99_wait"
    # a tie at the top with a peer is worst too
    outcomes["gangopt"] = dataclasses.replace(GOOD, p99_wait=1500.0)
    outcomes["kueue_like"] = _peer(p99_wait=1000.0)
    assert not evaluate(outcomes, interval=60.0)[1].passed
    # all equal (e.g. no deadline missed anywhere) is nobody's worst
    same = {name: dataclasses.replace(o, deadline_misses=0) for name, o in outcomes.items()}
    same["gangopt"] = dataclasses.replace(GOOD, deadline_misses=0)
    assert evaluate(same, interval=60.0)[1].passed
    assert set(HEADLINE) <= {f.name for f in dataclasses.fields(Outcome)}


def test_no_priority_two_job_passes_that_target() -> None:
    outcomes = {"gangopt": dataclasses.replace(GOOD, p2_p95_wait=None), "greedy": _peer()}
    target = evaluate(outcomes, interval=60.0)[3]
    assert target.passed and target.detail == "no priority-2 job"


def test_table_on_a_tiny_replay() -> None:
    """Two policies on the first 40 jobs of the Philly slice on one node: the table has a row
    per policy with the metrics' numbers, and the policy's CPU is within the replay's."""
    replay = Replay("tiny", "philly-6214e9.json", nodes=1, first=40)
    workload = load(replay, replay.first)
    assert len(workload.jobs) == 40
    runs = [run_policy(workload, 1, name, SimConfig()) for name in ("gangopt", "greedy")]
    for r in runs:
        assert r.metrics.arrived == 40 and r.metrics.policy == r.policy
        assert 0 < r.solver_cpu <= r.replay_cpu + 0.05
        assert r.outcome.mean_wait == r.metrics.queueing_delay.mean
    text = table(runs)
    rows = [line for line in text.splitlines() if line.startswith("| gangopt") or line.startswith("| greedy")]
    assert len(rows) == 2 and f"of {runs[0].metrics.deadlines}" in rows[0]
    targets = evaluate({r.policy: r.outcome for r in runs}, interval=60.0)
    assert len(targets) == 6


def test_main_writes_json_for_restricted_policies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main(["--replay", "philly-6214e9", "--first", "20", "--policy", "greedy", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert list(data) == ["philly-6214e9"] and list(data["philly-6214e9"]["runs"]) == ["greedy"]
    assert data["philly-6214e9"]["targets"] == []  # no gangopt run: nothing to judge
    assert "| greedy |" in capsys.readouterr().out


def test_reuse_takes_the_other_policies_from_an_earlier_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    base = ["--replay", "philly-6214e9", "--first", "20"]
    assert main([*base, "--policy", "greedy", "--policy", "fifo_first_fit", "--json", str(old)]) == 0
    assert main([*base, "--policy", "greedy", "--reuse", str(old), "--json", str(new)]) == 0
    runs = json.loads(new.read_text())["philly-6214e9"]["runs"]
    assert list(runs) == ["greedy", "fifo_first_fit"]
    assert (runs["greedy"]["reused"], runs["fifo_first_fit"]["reused"]) == (False, True)
    before = json.loads(old.read_text())["philly-6214e9"]["runs"]["fifo_first_fit"]["metrics"]
    assert runs["fifo_first_fit"]["metrics"] == before
    assert "| fifo_first_fit (reused) |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--reuse"):
        main(["--replay", "philly-6214e9", "--first", "21", "--policy", "greedy", "--reuse", str(old)])


def test_reprint_replays_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    assert main(["--replay", "philly-6214e9", "--first", "20", "--policy", "greedy", "--json", str(old)]) == 0
    first = capsys.readouterr().out
    assert main(["--first", "20", "--reprint", str(old)]) == 0
    again = capsys.readouterr().out
    assert again == first and "(reused)" not in again  # only the replay the file holds, same table
