"""Issue 13's promises checked wider than the four bench rounds: one table, one row a round,
every registry solver on it in one process (:func:`bench.fragmented_table.measure`).

    nice -n 15 python -m bench.promise_sweep                 # the whole sweep (see CASES)
    nice -n 15 python -m bench.promise_sweep --sizes S       # only some sizes
    nice -n 15 python -m bench.promise_sweep --json /tmp/sweep.jsonl
    python -m bench.promise_sweep --case "frag XL 0.6 pre-off s0 jobs"   # rounds by label

The promises, and how a row checks each (a violation is printed in capitals and counted):

* **never worse than greedy or a peer**: every solver's plan against CP-SAT's,
  lexicographically (tiers, then the secondary terms): ``g= f< k< ...`` (below / equal /
  above CP-SAT; ``ABOVE`` is a violation; ``≈``: same tiers, higher secondary terms, CP-SAT's
  plan proven within ``policy.gap_limit``, noted after the row, :func:`versus_sign`);
* **every plan validates**: ``gangopt.solve`` validates each plan and ``measure`` again; an
  exception is an ``INVALID`` row;
* **the gap is real**: every solver's bounds (all asked for the LP bounds) against every plan:
  a plan whose tiers above tier P are at least a solver's plan's has tier P at most that
  solver's bound of P, and a plan with the same tiers as a solver's plan whose tiers are at
  their bounds has secondary terms at most its secondary bound (``BOUND``); on rounds with a
  reference (``tests/reference.py``, the per-node model, S only) no plan is lexicographically
  above the reference, and CP-SAT's bound of each tier down to the first where its plan
  differs from the reference is at least the reference's (``REF``);
* **the time limit**: CP-SAT's wall seconds at most the round's limit + 10 % (``LIMIT``;
  the round's own limit, 10 s);
* **same input + seed = same plan**: CP-SAT run twice on the rounds of :data:`TWICE`, the plans'
  digests (:func:`bench.fragmented_table.digest`: everything but the timings) equal (``DET``).

Rounds: issue 13's fragmented family (``bench.rounds.fragmented_text``) with both running
mixes (``jobs``: the bench's default; ``tilted``: the seeded tests') and preemption on and
off, and issue 3's bin-packed rounds (``bench.rounds.round_text``, bench/table.py's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import gangopt
from bench.fragmented_table import digest, measure
from bench.rounds import fragmented_text, round_text, without_preemption
from gangopt.objective import SCALE
from gangopt.parsing import parse_json
from gangopt.replay.generate import dump_round
from gangopt.schema import Round

Mix = Literal["jobs", "tilted"]
TOL = 1e-6
LIMIT_SLACK = 1.10
LETTER = {
    "greedy": "g",
    "fifo_first_fit": "f",
    "koordinator_like": "k",
    "volcano_like": "v",
    "kueue_like": "q",
    "slurm_backfill_like": "s",
}


@dataclass(frozen=True)
class Case:
    """One round of the sweep: ``family`` "frag" (issue 13) or "packed" (issue 3)."""

    family: str
    size: str
    busy: float
    preemption: bool
    seed: int
    mix: Mix | None = None
    contention: bool = False

    @property
    def label(self) -> str:
        pre = "on" if self.preemption else "off"
        if self.family == "frag":
            return f"frag {self.size} {self.busy} pre-{pre} s{self.seed} {self.mix}"
        return f"packed {self.size}{' cont' if self.contention else ''} pre-{pre} s{self.seed}"

    def text(self) -> str:
        if self.family == "frag":
            return fragmented_text(self.size, self.busy, self.seed, self.mix, self.preemption)
        text = round_text(self.size, self.seed, self.contention)
        if self.preemption:
            return text
        return dump_round(without_preemption(parse_json(Round, text, "round")))


def parse_label(label: str) -> Case:
    """The :class:`Case` whose :attr:`Case.label` is ``label`` (``--case``): "frag XL 0.9
    pre-off s0 jobs", "packed M cont pre-on s1"; ValueError on any other text."""
    parts = label.split()
    try:
        if parts[0] == "frag" and len(parts) == 6 and parts[5] in ("jobs", "tilted"):
            mix: Mix = "jobs" if parts[5] == "jobs" else "tilted"
            case = Case("frag", parts[1], float(parts[2]), parts[3] == "pre-on", int(parts[4][1:]), mix)
        else:
            contention = len(parts) == 5 and parts[2] == "cont"
            case = Case("packed", parts[1], 0.0, parts[-2] == "pre-on", int(parts[-1][1:]), contention=contention)
    except (IndexError, ValueError):
        raise ValueError(f"not a sweep label: {label!r}") from None
    if case.label != label:
        raise ValueError(f"not a sweep label: {label!r} (read as {case.label!r})")
    return case


def cases(sizes: list[str]) -> list[Case]:
    """The brief's sweep: fragmented S and M at busy 0.6 / 0.75 / 0.9, preemption on and off,
    seeds 0-4, both mixes; L at busy 0.6 / 0.9, on and off, seed 0, both mixes; XL busy 0.6 and
    0.9, on, once (0.6: 10.3-11.1 s end to end at a 10 s limit at load 4-5, h37-survey);
    bin-packed S, M, L, seed 0 (S and M seeds 0-1 and contention too), on and off."""
    out: list[Case] = []
    mixes: tuple[Mix, Mix] = ("jobs", "tilted")
    for size in sizes:
        if size in ("S", "M"):
            out += [
                Case("frag", size, busy, pre, seed, mix)
                for mix in mixes
                for busy in (0.6, 0.75, 0.9)
                for pre in (True, False)
                for seed in range(5)
            ]
        elif size == "L":
            out += [
                Case("frag", size, busy, pre, 0, mix) for mix in mixes for busy in (0.6, 0.9) for pre in (True, False)
            ]
        elif size == "XL":  # h37-survey: busy 0.6 with preemption came nearest the limit end to end
            out += [Case("frag", size, busy, True, 0, "jobs") for busy in (0.6, 0.9)]
        elif "/" in size:  # nodes/gangs: a small fragmented family (the tests')
            out += [Case("frag", size, busy, pre, 0, "jobs") for busy in (0.6, 0.9) for pre in (True, False)]
    for size in sizes:
        if size in ("S", "M"):
            out += [
                Case("packed", size, 0.0, pre, seed, contention=cont)
                for cont in (False, True)
                for seed in (0, 1)
                for pre in (True, False)
            ]
        elif size == "L":
            out += [Case("packed", size, 0.0, pre, 0) for pre in (True, False)]
    return out


TWICE = {
    "frag S 0.9 pre-on s1 jobs",
    "frag S 0.6 pre-off s2 tilted",
    "frag M 0.75 pre-on s3 jobs",
    "frag M 0.9 pre-off s0 tilted",
    "frag L 0.9 pre-on s0 jobs",
    "packed M cont pre-on s1",
    "frag 24/6 0.9 pre-on s0 jobs",
}
"""Rounds CP-SAT solves a second time, for the determinism check (a couple a size)."""


def reference(rnd: Round, case: Case) -> tuple[dict[int, int], bool] | None:
    """The per-node reference's tiers (objective units) and whether proven, on small rounds
    (S and nodes/gangs up to 256 nodes); None where it is too large or does not model the round."""
    if len(rnd.cluster.nodes) > 256:
        return None
    from tests.reference import reference_optimum

    try:
        ref = reference_optimum(rnd, seconds_per_tier=30.0, workers=1)
    except ValueError:
        return None
    return ref.tiers, ref.proven


def tiers_of(row: dict[str, Any]) -> list[tuple[int, float, float]]:
    """(priority, value, bound) highest priority first."""
    return [
        (int(p), row["tier_values"][p], row["tier_bounds"][p])
        for p in sorted(row["tier_values"], key=int, reverse=True)
    ]


def above(a: float, b: float) -> bool:
    """``a`` above ``b`` beyond float noise."""
    return a > b + TOL * max(1.0, abs(b))


def bound_violations(rows: list[dict[str, Any]]) -> list[str]:
    """Every solver's bounds against every plan (see the module docstring)."""
    out = []
    for a in rows:
        mine = tiers_of(a)
        at_bounds = all(not above(bound, value) for _, value, bound in mine)
        for b in rows:
            theirs = dict((p, v) for p, v, _ in tiers_of(b))
            for i, (p, _, bound) in enumerate(mine):
                if all(not above(value, theirs.get(q, 0.0)) for q, value, _ in mine[:i]) and above(
                    theirs.get(p, 0.0), bound
                ):
                    out.append(f"{b['solver']} p{p} {theirs.get(p, 0.0):.3f} > {a['solver']}'s bound {bound:.3f}")
                    break
            same = all(not above(v, theirs.get(p, 0.0)) and not above(theirs.get(p, 0.0), v) for p, v, _ in mine)
            sec = a["secondary_bound"]
            if at_bounds and same and sec is not None and above(b["key"][-1], sec):
                out.append(f"{b['solver']} secondary {b['key'][-1]:.3f} > {a['solver']}'s bound {sec:.3f}")
    return out


def reference_violations(rows: list[dict[str, Any]], optimum: dict[int, int], proven: bool) -> tuple[list[str], float]:
    """No plan above the reference lexicographically; when the reference is proven, CP-SAT's
    bounds at least the reference's down to the first tier where its plan differs (an unproven
    reference's tiers are its own bounds, not the optimum). Also the smallest bound margin over
    those tiers (bound - reference, GPU-eq)."""
    out = []
    for row in rows:
        tiers = tiers_of(row)
        ref = tuple(optimum.get(p, 0) / SCALE for p, _, _ in tiers)
        if tuple(v for _, v, _ in tiers) > ref and any(above(v, r) for (_, v, _), r in zip(tiers, ref, strict=True)):
            out.append(f"{row['solver']} above the reference {ref}")
    margin = float("inf")
    cpsat = next(r for r in rows if r["solver"] == "cpsat")
    for p, value, bound in tiers_of(cpsat):
        best = optimum.get(p, 0) / SCALE
        margin = min(margin, bound - best)
        if proven and above(best, bound):
            out.append(f"cpsat bound p{p} {bound:.3f} < reference {best:.3f}")
        if above(best, value) or above(value, best):
            break
    return out, margin


def twice_deterministic(rnd: Round) -> str:
    """CP-SAT twice under ``policy.deterministic`` (work, not the clock, gates every step; the
    time limit 4x as a safety net, as the replays set it): "same", "DIFFERENT", or "net" when
    a run's safety net fired (then the promise does not apply: the message says so). By
    default the steps around the search are gated by the wall clock (docs/design.md,
    "Determinism"), so two default runs on a loaded machine may differ: fragmented M busy
    0.75 seed 3 at load 5 gave two plans (the candidates cut at 10.8 s and at 6.6 s)."""
    policy = rnd.policy.model_copy(update={"deterministic": True, "time_limit": 4 * rnd.policy.time_limit})
    plans = [gangopt.solve(rnd, policy, solver="cpsat", lp_bounds=True) for _ in range(2)]
    if any("safety net" in p.message for p in plans):
        return "net"
    return "same" if digest(plans[0]) == digest(plans[1]) else "DIFFERENT"


def versus_sign(row: dict[str, Any], cpsat: dict[str, Any], gap_limit: float) -> str:
    """``row``'s plan against CP-SAT's, lexicographically: "<", "=", ">" (a broken promise), or
    "≈": the same tiers, higher secondary terms, CP-SAT's plan proven within ``gap_limit``
    (``policy.gap_limit`` stops the search on the secondary terms there, by design: a greedy
    plan the cheap bounds prove within it is returned without the peers; bin-packed M seed 1:
    fifo_first_fit 564.2 against 561.5 GPU-eq, cpsat proven within 0.05 % of a 0.5 % limit)."""
    mine, theirs = tuple(row["key"]), tuple(cpsat["key"])
    if mine <= theirs:
        return "<" if mine < theirs else "="
    within = cpsat["gap"] is not None and cpsat["gap"] <= gap_limit
    return "≈" if mine[:-1] == theirs[:-1] and within else ">"


def check(case: Case, twice: bool, with_reference: bool) -> dict[str, Any]:
    """One round: every solver, the checks, a record for the table."""
    rnd = parse_json(Round, case.text(), "round")
    record: dict[str, Any] = {"round": case.label, "violations": []}
    ref = reference(rnd, case) if with_reference else None
    try:
        rows = measure(rnd, None if ref is None else ref[0])
    except Exception as exc:  # an invalid plan or a crash: the round's finding
        record["violations"].append(f"INVALID {type(exc).__name__}: {str(exc)[:200]}")
        return record
    by = {r["solver"]: r for r in rows}
    cpsat = by["cpsat"]
    versus = []
    for r in rows:
        if r["solver"] == "cpsat":
            continue
        sign = versus_sign(r, cpsat, rnd.policy.gap_limit)
        versus.append(f"{LETTER.get(str(r['solver']), r['solver'])}{sign}")
        if sign == ">":
            record["violations"].append(f"ABOVE {r['solver']} {r['key']} > cpsat {cpsat['key']}")
        elif sign == "≈":
            record.setdefault("notes", []).append(f"{r['solver']} secondary {r['key'][-1]} > {cpsat['key'][-1]}")
    record["violations"] += [f"BOUND {v}" for v in bound_violations(rows)]
    if ref is not None:
        found, margin = reference_violations(rows, *ref)
        record["violations"] += [f"REF {v}" for v in found]
        true_gap = record["true_gap"] = 100 * float(cpsat["true_gap"])
        record["reference"] = f"{true_gap:.2f} % / {margin:+.2f}" + ("" if ref[1] else " (not proven)")
    limit = rnd.policy.time_limit
    if cpsat["wall"] > LIMIT_SLACK * limit:
        record["violations"].append(f"LIMIT cpsat {cpsat['wall']:.2f} s > {limit} s + 10 %")
    if twice:
        record["det"] = twice_deterministic(rnd)
        if record["det"] == "DIFFERENT":
            record["violations"].append("DET two deterministic cpsat runs differ")
    record.update(
        status=cpsat["status"],
        gap=cpsat["gap"],
        cpu=cpsat["cpu"],
        wall=cpsat["wall"],
        limit=limit,
        versus=" ".join(versus),
        greedy=(by["greedy"]["cpu"], by["greedy"]["wall"]),
        peers=sum(float(r["cpu"]) for r in rows if r["solver"] not in ("cpsat", "greedy")),
        solvers=[{k: r[k] for k in ("solver", "status", "wall", "cpu", "gap", "victims", "tiers")} for r in rows],
    )
    return record


def line(r: dict[str, Any]) -> str:
    if "status" not in r:
        return f"| {r['round']} | — | — | — | — | — | — | — | {'; '.join(r['violations'])} |"
    gap = "—" if r["gap"] is None else f"{100 * r['gap']:.2f} %"
    return (
        f"| {r['round']} | {r['status']} | {gap} | {r['cpu']:.2f} / {r['wall']:.2f} ({r['wall'] / r['limit']:.2f}) "
        f"| {r['greedy'][0]:.2f} / {r['greedy'][1]:.2f} | {r['peers']:.2f} | {r['versus']} "
        f"| {r.get('reference', '—')} | {r.get('det', '—')} | {'; '.join(r['violations']) or 'ok'} |"
        + (f" {'; '.join(r['notes'])} |" if r.get("notes") else "")
    )


HEADER = (
    "| round | cpsat status | gap | cpsat CPU s / wall s (wall/limit) | greedy CPU s / wall s | 5 peers CPU s "
    "| vs cpsat (g f k v q s) | reference: cpsat true gap / bound − reference (GPU-eq) "
    "| twice (deterministic) | promises |\n"
    "|---|---|---:|---:|---:|---:|---|---:|---|---|"
)


def sweep(chosen: list[Case], json_out: str | None = None) -> int:
    """Print the table; return how many rounds break a promise."""
    began = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    print(f"# {began} UTC, load {os.getloadavg()[0]:.1f}, {len(chosen)} rounds")
    print(HEADER, flush=True)
    bad = 0
    for case in chosen:
        record = check(case, case.label in TWICE, case.size == "S" or "/" in case.size)
        bad += bool(record["violations"])
        print(line(record), flush=True)
        if json_out:
            with open(json_out, "a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")
    print(f"# end {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")
    print(f"rounds breaking a promise: {bad} of {len(chosen)}")
    return bad


def summary(records: list[dict[str, Any]]) -> None:
    """One line per family, size and preemption setting of recorded rows (``--json`` files):
    rounds, rounds with a broken promise, each solver's below / equal / above-within-the-gap-
    limit / above counts against CP-SAT, CP-SAT's largest gap and wall / limit, its largest
    true gap against a proven reference (S)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        parts = r["round"].split()
        key = " ".join([parts[0], parts[1], next(p for p in parts if p.startswith("pre-"))])
        groups.setdefault(key, []).append(r)
    print("| rounds | n | broken | vs cpsat (<, =, ≈, >) per solver | cpsat gap max | wall/limit max | true gap max |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for key, rows in groups.items():
        done = [r for r in rows if "status" in r]
        counts = []
        for letter in LETTER.values():
            signs = [s for r in done for s in r["versus"].split() if s[0] == letter]
            counts.append(f"{letter} " + "/".join(str(sum(x[1:] == c for x in signs)) for c in "<=≈>"))
        gap = max((100 * (r["gap"] or 0.0) for r in done), default=0.0)
        ratio = max((r["wall"] / r["limit"] for r in done), default=0.0)
        # against proven references only (an unproven one's tiers are bounds, not the optimum)
        proven = [r for r in done if "%" in r.get("reference", "") and "not proven" not in r["reference"]]
        true = [float(r["reference"].split(" %")[0]) for r in proven]
        print(
            f"| {key} | {len(rows)} | {sum(bool(r['violations']) for r in rows)} | {' · '.join(counts)} "
            f"| {gap:.2f} % | {ratio:.2f} | {f'{max(true):.2f} %' if true else '—'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="S,M,L,XL", help="S, M, L, XL or nodes/gangs, comma-separated")
    parser.add_argument("--family", choices=["frag", "packed"], help="only this family")
    parser.add_argument(
        "--case",
        action="append",
        metavar="LABEL",
        help='a round by its label ("frag L 0.9 pre-off s0 jobs"); repeatable',
    )
    parser.add_argument("--json", help="append one JSON record a round to this file")
    parser.add_argument("--summary", nargs="+", metavar="FILE", help="summarize --json files instead")
    args = parser.parse_args()
    if args.summary:
        lines = [x for f in args.summary for x in Path(f).read_text(encoding="utf-8").splitlines() if x.strip()]
        summary([json.loads(x) for x in lines])
        return
    if args.case:
        chosen = [parse_label(label) for label in args.case]
    else:
        chosen = [c for c in cases(args.sizes.split(",")) if args.family in (None, c.family)]
    sys.exit(1 if sweep(chosen, args.json) else 0)


if __name__ == "__main__":
    main()
