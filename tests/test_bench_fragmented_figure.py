"""The fragmented scaling figure (``bench/fragmented_figure.py``): every registry solver measured
on each size in the same run, CP-SAT below none of them, and the records it saves redraw the
same figure."""

from __future__ import annotations

import json
from pathlib import Path

from bench.fragmented_figure import draw, main, measure, versus_cpsat
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
        for row in rows.values():  # every tier's value under the plan's bound of it
            assert all(row["tier_values"][p] <= row["tier_bounds"][p] + 1e-6 for p in row["tier_values"])
    assert "above" not in versus_cpsat(records, "greedy")
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


def test_the_legend_ranks_plans_by_their_tiers_highest_priority_first() -> None:
    def row(solver: str, p10: float, p0: float) -> dict[str, object]:
        return {"solver": solver, "tier_values": {"10": p10, "0": p0}}

    records = [
        {"rows": [row("cpsat", 100.0, 40.0), row("peer", 90.0, 80.0)]},  # more p0, less p10: below
        {"rows": [row("cpsat", 100.0, 40.0), row("peer", 100.0, 40.0)]},
        {"rows": [row("cpsat", 100.0, 40.0), row("peer", 100.0, 41.0)]},
    ]
    assert versus_cpsat(records, "peer") == "below cpsat 1/3, equal cpsat 1/3, above cpsat 1/3"
    assert versus_cpsat(records[:1], "peer") == "below cpsat 1/1"
