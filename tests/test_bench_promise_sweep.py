"""The promise sweep (``bench/promise_sweep.py``): issue 13's promises on small fragmented rounds
(every solver, the bounds against every plan and the reference, determinism), and the checks
themselves catch what they are meant to catch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.promise_sweep import Case, bound_violations, cases, reference_violations, summary, sweep
from bench.rounds import fragmented_text
from gangopt.objective import SCALE


def test_the_sweep_checks_small_rounds_and_finds_no_broken_promise(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    chosen = cases(["24/6"])
    assert len(chosen) == 4  # busy 0.6 / 0.9, preemption on / off
    bad = sweep(chosen, str(tmp_path / "rows.jsonl"))
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| frag 24/6 ")]
    assert len(rows) == 4
    assert all(row.endswith("| ok |") for row in rows), rows
    assert "| same |" in out  # the determinism check ran on the round of TWICE
    assert bad == 0
    assert out.rstrip().endswith("rounds breaking a promise: 0 of 4")
    records = [json.loads(x) for x in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all("true_gap" in r for r in records)  # 24 nodes: the reference ran
    summary(records)
    table = capsys.readouterr().out.splitlines()
    expected = [["| frag 24/6 pre-on", "2", "0"], ["| frag 24/6 pre-off", "2", "0"]]
    assert [line.split(" | ")[:3] for line in table[2:]] == expected


def test_the_brief_sweep_covers_busy_levels_preemption_seeds_mixes_and_bin_packed_rounds() -> None:
    chosen = cases(["S", "M", "L", "XL"])
    frag_s = [c for c in chosen if c.family == "frag" and c.size == "S"]
    assert {(c.busy, c.preemption, c.seed, c.mix) for c in frag_s} == {
        (b, p, s, m) for b in (0.6, 0.75, 0.9) for p in (True, False) for s in range(5) for m in ("jobs", "tilted")
    }
    assert [c for c in chosen if c.size == "XL"] == [Case("frag", "XL", b, True, 0, "jobs") for b in (0.6, 0.9)]
    assert {(c.size, c.preemption) for c in chosen if c.family == "packed"} == {
        (s, p) for s in ("S", "M", "L") for p in (True, False)
    }


def test_preemption_off_rounds_differ_from_the_default_only_in_the_policy() -> None:
    on = json.loads(fragmented_text("24/6", 0.9))
    off = json.loads(fragmented_text("24/6", 0.9, preemption=False))
    assert on["policy"].get("preemption", True) is True
    assert off["policy"]["preemption"] is False
    assert {k: v for k, v in on.items() if k != "policy"} == {k: v for k, v in off.items() if k != "policy"}
    assert fragmented_text("24/6", 0.9, running_mix="tilted") != fragmented_text("24/6", 0.9)


def row(solver: str, tiers: dict[str, tuple[float, float]], secondary: float, bound: float | None) -> dict[str, object]:
    return {
        "solver": solver,
        "tier_values": {p: v for p, (v, _) in tiers.items()},
        "tier_bounds": {p: b for p, (_, b) in tiers.items()},
        "key": (*(v for _, (v, _) in sorted(tiers.items(), key=lambda x: -int(x[0]))), secondary),
        "secondary_bound": bound,
    }


def test_a_plan_above_a_bound_is_found_only_where_the_bound_applies() -> None:
    cpsat = row("cpsat", {"10": (5.0, 5.0), "0": (3.0, 4.0)}, 1.0, 2.0)
    # Higher tier equal, lower tier above cpsat's bound of it: a wrong bound.
    assert bound_violations([cpsat, row("peer", {"10": (5.0, 5.0), "0": (4.5, 4.5)}, 0.0, None)])
    # Lower tier above the bound but the higher tier below cpsat's: the bound says nothing.
    assert not bound_violations([cpsat, row("peer", {"10": (4.0, 5.0), "0": (9.0, 9.0)}, 0.0, None)])
    # Same tiers, at their bounds, secondary terms above the secondary bound: a wrong bound.
    tight = row("cpsat", {"10": (5.0, 5.0), "0": (3.0, 3.0)}, 1.0, 2.0)
    assert bound_violations([tight, row("peer", {"10": (5.0, 5.0), "0": (3.0, 3.0)}, 2.5, None)])
    assert not bound_violations([tight, row("peer", {"10": (5.0, 5.0), "0": (3.0, 3.0)}, 1.5, None)])


def test_a_bound_below_a_proven_reference_and_a_plan_above_any_reference_are_found() -> None:
    cpsat = row("cpsat", {"10": (5.0, 5.0), "0": (3.0, 3.5)}, 0.0, None)
    optimum = {10: int(5 * SCALE), 0: int(4 * SCALE)}
    found, margin = reference_violations([cpsat], optimum, proven=True)
    assert found and margin == pytest.approx(-0.5)
    assert not reference_violations([cpsat], optimum, proven=False)[0]  # an unproven reference is a bound
    over = row("peer", {"10": (5.0, 5.0), "0": (4.5, 4.5)}, 0.0, None)
    assert reference_violations([cpsat, over], optimum, proven=False)[0]


def test_a_peer_above_cpsat_is_a_broken_promise_unless_only_its_secondary_terms_within_the_gap_limit() -> None:
    from bench.promise_sweep import versus_sign

    cpsat = {"key": (5.0, 3.0, 10.0), "gap": 0.001}
    assert versus_sign({"key": (5.0, 2.0, 99.0)}, cpsat, 0.005) == "<"
    assert versus_sign({"key": (5.0, 3.0, 10.0)}, cpsat, 0.005) == "="
    assert versus_sign({"key": (5.0, 3.0, 10.5)}, cpsat, 0.005) == "≈"
    assert versus_sign({"key": (5.0, 3.0, 10.5)}, cpsat, 0.0) == ">"  # not within the limit
    assert versus_sign({"key": (5.0, 3.5, 0.0)}, cpsat, 0.005) == ">"  # a tier above: always


def test_a_label_reads_back_as_its_case_and_other_text_is_refused() -> None:
    from bench.promise_sweep import parse_label

    chosen = cases(["S", "M", "L", "XL", "24/6"])
    assert all(parse_label(c.label) == c for c in chosen)
    assert parse_label("frag XL 0.6 pre-off s3 tilted") == Case("frag", "XL", 0.6, False, 3, "tilted")
    for bad in ("frag XL 0.6 off s0 jobs", "frag XL 0.6 pre-on 0 jobs", "frag XL pre-on s0 jobs", "XL"):
        with pytest.raises(ValueError, match="not a sweep label"):
            parse_label(bad)


def test_the_cli_generates_the_bench_family_round_with_preemption_off(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``gangopt generate --fragmented --no-preemption --gap-limit 0.005`` writes the very round
    the sweep measures (``fragmented_text(..., preemption=False)``): a survey row can be redone
    from the command line."""
    from gangopt.cli import main

    out = tmp_path / "off.json"
    argv = ["generate", "--nodes", "24", "--gangs", "6", "--fragmented", "--busy", "0.9", "--seed", "1"]
    assert main([*argv, "--no-preemption", "--gap-limit", "0.005", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == fragmented_text("24/6", 0.9, 1, preemption=False)
    assert main([*argv, "--gap-limit", "0.02"]) == 0
    on = json.loads(capsys.readouterr().out)
    assert on["policy"].get("preemption", True) is True and on["policy"]["gap_limit"] == 0.02


def test_the_table_reads_seed_and_preemption_as_the_sweep_does() -> None:
    """``python -m bench.fragmented_table SIZE BUSY --seed K --no-preemption`` measures the round
    the sweep's label names (``fragmented_text``), and a seed in the name wins."""
    from bench.fragmented_table import round_text

    off = round_text("24/6", 0.9, seed=1, preemption=False)
    assert off == fragmented_text("24/6", 0.9, 1, preemption=False)
    assert off != round_text("24/6", 0.9, seed=1) != round_text("24/6", 0.9)
    assert round_text("24/6/1", 0.9, seed=4) == fragmented_text("24/6", 0.9, 1)
