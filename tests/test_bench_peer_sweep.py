"""The peer sweep (``bench/peer_sweep.py``): every solver on small fragmented rounds of the
benchmark family, one row per round, and CP-SAT below none of them."""

from __future__ import annotations

import pytest

from bench.peer_sweep import BUSY, sweep


def test_the_sweep_prints_a_row_per_round_and_finds_cpsat_below_no_solver(capsys: pytest.CaptureFixture[str]) -> None:
    below = sweep(["24/6"], seeds=1)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| 24/6 ")]
    assert len(rows) == len(BUSY)
    assert all(row.endswith("| none |") for row in rows), rows
    assert below == 0
    assert out.rstrip().endswith("rounds where a solver beat cpsat: 0")
