"""Where the slot placer's pass without preferred levels matters: on fragmented rounds, greedy's
slot choice placed both ways (:class:`gangopt.solvers.cpsat.placer.SlotPlacer`, ``spread`` on
and off), printed for every round where the first falls short of the model's value or the two
differ on the chosen tier (docs/benchmarks.md, "M end to end and the secondary gap").

    python -m bench.placer_passes                 # 64, 128 and 256 nodes, busy 0.6 and 0.75, seeds 0-7
    python -m bench.placer_passes --consolidate   # placed() with and without the consolidating orders

With ``--consolidate``: :func:`gangopt.solvers.cpsat.placer.placed` with
:data:`~gangopt.solvers.cpsat.placer.CONSOLIDATE` on and off on 64-, 128- and 256-node rounds
(busy 0.6, 0.75, 0.9; seeds 0-4; both running mixes), every round where the two differ
(docs/benchmarks.md, "h31-plan").
"""

from __future__ import annotations

import sys
import time

from bench.rounds import fragmented_spec
from gangopt.annotate import cheap_bounds_for
from gangopt.objective import SCALE, lexicographic_key, score
from gangopt.prefilter import prefilter
from gangopt.replay.generate import generate
from gangopt.schema import Score
from gangopt.slots import allow_large, slot_choice
from gangopt.solvers.cpsat import placer
from gangopt.solvers.cpsat.placer import SlotPlacer
from gangopt.solvers.greedy import greedy


def main(sizes: tuple[tuple[int, int], ...] = ((64, 25), (128, 50), (256, 100)), seeds: int = 8) -> None:
    print("| nodes / gangs | busy | seed | model value | first pass | without preferred levels | taken |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for nodes, gangs in sizes:
        for busy in (0.6, 0.75):
            for seed in range(seeds):
                rnd = generate(fragmented_spec(nodes, gangs, busy, seed))[0]
                pre = prefilter(rnd)
                plan_score = score(rnd, greedy(rnd))
                cheap_bounds_for(pre, plan_score)  # solves the slot models the choice is read from
                choice = slot_choice(pre, {t.priority: round(t.value * SCALE) for t in plan_score.tiers})
                if choice is None:
                    continue
                first = score(rnd, SlotPlacer(rnd, choice).run())
                plain = score(rnd, SlotPlacer(rnd, choice, spread=False).run())

                def value(s: Score, prio: int = choice.priority) -> float:
                    return next(t.value for t in s.tiers if t.priority == prio)

                if value(first) != value(plain) or value(first) * SCALE < choice.value:
                    taken = "yes" if lexicographic_key(plain) > lexicographic_key(first) else "no"
                    print(
                        f"| {nodes} / {gangs} | {busy} | {seed} | {choice.value / SCALE:,.1f} | {value(first):,.1f} "
                        f"| {value(plain):,.1f} | {taken} |"
                    )


def consolidating(sizes: tuple[tuple[int, int], ...] = ((64, 25), (128, 50), (256, 100)), seeds: int = 5) -> None:
    """The rounds where the consolidating orders change :func:`placed`'s plan (lexicographic
    keys and CPU-s with them off / on), and how many rounds had a choice."""
    from gangopt.validation import validate

    print("| nodes / gangs | busy | mix | seed | priority | off: key, CPU s | on: key, CPU s | on is |")
    print("|---|---:|---|---:|---:|---|---|---|")
    rounds = 0
    for nodes, gangs in sizes:
        for busy in (0.6, 0.75, 0.9):
            for mix in ("jobs", "tilted"):
                for seed in range(seeds):
                    rnd = generate(fragmented_spec(nodes, gangs, busy, seed, mix))[0]
                    pre = prefilter(rnd)
                    allow_large(pre, True)
                    plan_score = score(rnd, greedy(rnd))
                    cheap_bounds_for(pre, plan_score)
                    choice = slot_choice(pre, {t.priority: round(t.value * SCALE) for t in plan_score.tiers})
                    if choice is None:
                        continue
                    rounds += 1
                    out = []
                    for on in (False, True):
                        placer.CONSOLIDATE = on
                        began = time.process_time()
                        plan, s = placer.placed(rnd, choice)
                        assert validate(rnd, plan) == []
                        out.append((lexicographic_key(s), time.process_time() - began))
                    placer.CONSOLIDATE = True
                    (off, off_s), (on_key, on_s) = out
                    if off != on_key:
                        sign = "higher" if on_key > off else "LOWER"
                        print(
                            f"| {nodes} / {gangs} | {busy} | {mix} | {seed} | {choice.priority} | {off}, {off_s:.2f} "
                            f"| {on_key}, {on_s:.2f} | {sign} |"
                        )
    print(f"\n{rounds} rounds with a choice")


if __name__ == "__main__":
    consolidating() if "--consolidate" in sys.argv[1:] else main()
