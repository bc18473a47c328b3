"""``gangopt capacity``: verdicts as they are found, one progress bar over the whole search."""

from __future__ import annotations

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


def test_progress_draws_one_bar_and_verdicts_go_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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
