"""``gangopt import trace`` and the format errors a newcomer meets first (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangopt.cli import main
from gangopt.replay.workload import load_workload

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "trace" / "jobs.csv"


def test_import_writes_a_workload_the_replays_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "imported (csv): 12 jobs arriving over 1.0 h, 84 GPU-hours at full size, largest 16 GPUs; deadlines: none\n"
    )
    wl = load_workload(out)
    assert len(wl.jobs) == 12 and wl.jobs[2].gpus() == 16 and wl.jobs[2].arrival == 120.0
    assert main(["simulate", str(out), "--nodes", "2", "--policy", "greedy", "--json"]) == 0


def test_window_scale_and_deadlines_compose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "w.json"
    argv = ["import", "trace", str(FIXTURE), "-o", str(out), "--from", "10m", "--to", "1h", "--scale-load", "2"]
    assert main([*argv, "--deadlines", "1", "--deadline-slack", "1", "--seed", "4"]) == 0
    wl = load_workload(out)
    # submitted at 600 ... 3000 s: re-based to 0 ... 2400, then compressed 2x
    assert [j.arrival for j in wl.jobs] == [0.0, 150.0, 300.0, 450.0, 600.0, 900.0, 1200.0]
    assert all(j.deadline == j.arrival + 2 * j.duration and j.deadline_kind == "completion" for j in wl.jobs)
    assert "deadlines: 7 completion" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--column", "gpus"], "error: --column: expected FIELD=HEADER, got 'gpus'"),
        (["--column", "cards=gpus"], "error: --column: unknown field 'cards'"),
        (["--from", "soon"], "error: --from: expected seconds or a duration like 30m"),
        (["--scale-load", "0"], "error: --scale-load: invalid value"),
        (["--deadline-slack", "2:1"], "error: --deadline-slack: need 0 <= LO <= HI"),
        (["--format", "openb"], "error: $: not in the openb format (no column name, cpu_milli, memory_mib, num_gpu,"),
        (["--from", "2h"], "error: $: no job left to write"),
    ],
)
def test_bad_flags_exit_2_and_write_nothing(
    tmp_path: Path, extra: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "w.json"
    assert main(["import", "trace", str(FIXTURE), "-o", str(out), *extra]) == 2
    assert error in capsys.readouterr().err
    assert not out.exists()


def test_a_csv_given_to_simulate_says_how_to_convert_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(FIXTURE), "--nodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "this looks like CSV (first line: 'submit,duration,gpus')" in err
    assert f"convert it with: gangopt import trace {FIXTURE} -o WORKLOAD.json" in err
    assert "malformed JSON" not in err
