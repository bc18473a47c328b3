"""The fragmented scaling figure (``bench/fragmented_figure.py``): every registry solver measured
on each size in the same run, CP-SAT below none of them, and the records it saves redraw the
same figure."""

from __future__ import annotations

import json
from pathlib import Path

from bench.fragmented_figure import draw, main, measure
from gangopt.solvers import SOLVERS


def test_every_solver_is_measured_per_size_and_cpsat_is_never_worse_than_greedy(tmp_path: Path) -> None:
    saved = tmp_path / "rows.jsonl"
    records = measure(["24/6", "48/10"], busy=0.75, json_out=saved)
    assert [r["nodes"] for r in records] == [24, 48]
    for record in records:
        rows = {row["solver"]: row for row in record["rows"]}
        assert set(rows) == set(SOLVERS)
        assert rows["greedy"]["versus"] == "equal" and rows["cpsat"]["versus"] in {"equal", "better"}
        assert all(row["cpu"] >= 0 and row["wall"] > 0 for row in rows.values())
    lines = saved.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == json.loads(json.dumps(records))
    figure = tmp_path / "figure.png"
    draw(records, figure)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_figure_redraws_from_saved_records(tmp_path: Path) -> None:
    saved = tmp_path / "rows.jsonl"
    measure(["24/6"], busy=0.6, json_out=saved)
    figure = tmp_path / "again.png"
    main(["--from", str(saved), "-o", str(figure)])
    assert figure.stat().st_size > 10_000
