"""``gangopt capacity``: verdicts as they are found, one progress bar over the whole search."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from gangopt.cli import main
from gangopt.cli.capacity import SearchBar

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "jobs.csv"


@dataclass
class Verdict:
    nodes: int
    meets: bool


def test_search_bar_estimates_the_sizes_left() -> None:
    bar = SearchBar(1, 64, per_step=1)
    try:
        bar.update([Verdict(8, False)])  # next: probe 16, then bisect 8..16 (3 sizes)
        assert (bar.bar.n, bar.bar.total) == (1, 1 + 4)
        bar.update([Verdict(16, True)])
        assert bar.remaining() == 3
        bar.update([Verdict(12, True)])
        bar.update([Verdict(10, False)])
        assert bar.remaining() == 1
        bar.update([Verdict(11, True)])
        assert bar.remaining() == 0 and bar.bar.n == bar.bar.total == 5
        wide = SearchBar(1, 64, per_step=2)
        wide.update([Verdict(8, False), Verdict(16, True)])
        assert wide.remaining() == 4  # ceil(log3(8)) = 2 steps of 2 sizes
        wide.close()
    finally:
        bar.close()


def test_progress_draws_one_bar_and_verdicts_go_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workload = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(workload)]) == 0
    capsys.readouterr()
    argv = ["capacity", str(workload), "--slo", "p95_wait<=30m", "--policy", "greedy", "--workers", "1"]
    assert main([*argv, "--compaction", "none", "--inflation", "none", "--progress"]) == 0
    captured = capsys.readouterr()
    searching = [line for line in captured.out.splitlines() if line.startswith("searching: ")]
    assert len(searching) == 4 and searching[0].startswith("searching: 11 nodes meet: p95_wait 0s (1/1 seeds)")
    assert "answer: 6 nodes" in captured.out
    assert captured.err.count("capacity search") >= 1 and "simulations:" not in captured.err
    assert "4/4" in captured.err


def test_inflation_tries_join_the_bar_and_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With the default --inflation replay, the bar covers the search and then each factor
    tried (its total re-estimated), and each try's verdict is printed as it is found."""
    workload = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(workload)]) == 0
    capsys.readouterr()
    argv = ["capacity", str(workload), "--slo", "p95_wait<=30m", "--policy", "greedy", "--workers", "1"]
    assert main([*argv, "--compaction", "none", "--progress"]) == 0
    captured = capsys.readouterr()
    tries = [line for line in captured.out.splitlines() if line.startswith("inflation: ")]
    assert tries and tries[0].startswith("inflation: 6 nodes, arrivals x1 meet: p95_wait")
    summary = next(line for line in captured.out.splitlines() if line.startswith("inflation (replay)"))
    factor = float(summary.split(" x")[1].split()[0])
    met = [float(t.split(" x")[1].split()[0]) for t in tries if " meet: " in t]
    assert max(met) == pytest.approx(factor, abs=0.005)  # the answer is the largest factor that met
    final = captured.err.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith("capacity: inflation: 100%") and f"{4 + len(tries)}/{4 + len(tries)}" in final


def test_search_bar_estimates_the_inflation_tries_left() -> None:
    bar = SearchBar(1, 64, per_step=1, inflation=(8.0, 0.05))
    try:
        assert bar.bar.total == bar.remaining() + 2 + 4  # counted from the first total
        assert bar.inflation_remaining() == 2 + 4  # 1.0 and 2.0, then 4 halvings of ln 2 down to ln 1.05
        bar.inflation_try(1.0, True)
        assert bar.inflation_remaining() == 1 + 4
        bar.inflation_try(2.0, False)
        assert bar.inflation_remaining() == 4
        bar.inflation_try(2**0.5, True)
        assert bar.inflation_remaining() == 3
        bar.inflation_try(2**0.75, False)  # 1.68: bracket 1.41..1.68, ln 1.19 / ln 1.05 = 3.6: 2 halvings
        assert bar.inflation_remaining() == 2
        bar.inflation_try(2**0.625, True)  # 1.54..1.68: ratio 1.09, one more
        assert bar.inflation_remaining() == 1
        bar.inflation_try(2**0.6875, False)  # 1.54..1.61: within 5 %, done
        assert bar.inflation_remaining() == 0 and bar.bar.n == bar.bar.total == 6
    finally:
        bar.close()


def _bar_states(err: str, prefix: str) -> list[str]:
    """The states a tqdm bar drew on stderr (each redraw starts with a carriage return)."""
    lines = err.replace("\x1b[A", "").replace("\r", "\n").splitlines()
    return [line.strip() for line in lines if line.strip().startswith(prefix)]


def test_sweep_prints_each_replay_as_it_is_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``sweep``: one line per replay on stdout as it finishes (counted k/N over the whole
    sweep), each agreeing with the JSON rows; one bar over all N = policies x sizes x seeds
    replays, with its ETA. ``--json`` keeps stdout to the JSON."""
    workload = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(workload)]) == 0
    argv = ["sweep", str(workload), "--nodes", "5", "7", "--policy", "greedy", "--policy", "fifo_first_fit"]
    argv += ["--slo", "p95_wait<=30m", "--workers", "1"]
    capsys.readouterr()
    assert main([*argv, "--progress"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.startswith("done: ")]
    assert [line.split(" [")[1].split(",")[0] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]
    assert main([*argv, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for row in rows:
        head = f"done: {row['policy']}, {row['nodes']} nodes, seed {row['seed']}: "
        (line,) = [x for x in lines if x.startswith(head)]
        assert f"unstarted {row['unstarted']}" in line and f"util {row['utilization_window']:.1%}" in line
        assert ("p95_wait" in line) and (" ok [" in line) == row["p95_wait ok"]
    bar = _bar_states(captured.err, "simulations:")
    assert " 0/4 [" in bar[0] and " 4/4 [" in bar[-1] and "<" in bar[-1].split("[")[1]


def test_brute_force_prints_each_size_and_one_bar_for_inflation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``capacity --brute-force``: each size's verdict on stdout as soon as it is replayed,
    matching the final table; with --progress, one bar over all sizes, then one over the
    inflation tries (before: a '0/1' bar per try)."""
    workload = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(workload)]) == 0
    capsys.readouterr()
    argv = ["capacity", str(workload), "--slo", "p95_wait<=30m", "--policy", "greedy", "--workers", "1"]
    argv += ["--brute-force", "--min-nodes", "4", "--max-nodes", "7", "--compaction", "none", "--progress"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    sizes = [line for line in out.splitlines() if line.startswith("brute force: ")]
    assert [line.split()[2] for line in sizes] == ["4", "5", "6", "7"]
    table = {line.split()[0]: line.split()[-1] for line in out.splitlines() if line[:1].isdigit()}
    for line in sizes:
        assert table[line.split()[2]] == ("meets" if " meet: " in line else "fails")
    assert " 4/4 [" in _bar_states(captured.err, "simulations:")[-1]
    tries = [line for line in out.splitlines() if line.startswith("inflation: ")]
    final = _bar_states(captured.err, "capacity: inflation")[-1]
    assert tries and f" {len(tries)}/{len(tries)} [" in final
    assert " 0/1 [" not in captured.err


def test_json_has_the_replay_at_the_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``capacity --json`` carries the answer's replay with every metric of ``simulate --json``
    (the per-priority and per-size waits, utilisation over the trace's span); its p95 wait is
    the value the text's table shows for the answer."""
    from gangopt.replay.report import hours

    workload = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(workload)]) == 0
    argv = ["capacity", str(workload), "--slo", "p95_wait<=30m", "--policy", "greedy", "--workers", "1"]
    argv += ["--compaction", "none", "--inflation", "none"]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    text = capsys.readouterr().out
    (run,) = data["at_answer"]
    assert run["seed"] == 0 and run["policy"] == "greedy" and run["nodes"] == data["nodes"]
    assert set(run["queueing_delay_by_priority"]) == {"0"} and len(run["queueing_delay_by_size"]) > 1
    assert 0 < run["utilization_window"] <= 1 and run["gpu_hours_delivered"] > 0
    row = next(line for line in text.splitlines() if line.split()[:1] == [str(data["nodes"])])
    assert row.split()[1] == hours(run["queueing_delay"]["p95"])
