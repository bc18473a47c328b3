"""The lexicographic objective in stages (``plan_stages``, ``run_stages``, ``proven_bounds``).

docs/objective.md: priority tiers highest first, then the secondary sum, then FIFO order.
A stage carries adjacent parts while its weighted range stays under ``STAGE_LIMIT``; inside
a stage each part's weight exceeds everything the later parts can add.
"""

from __future__ import annotations

import itertools
import time

import pytest

from gangopt.objective import SCALE
from gangopt.schema import Round
from gangopt.solvers.cpsat import stages as stages_module
from gangopt.solvers.cpsat.encoding import Encoding, Terms
from gangopt.solvers.cpsat.hints import warm_start
from gangopt.solvers.cpsat.stages import STAGE_LIMIT, Part, Stage, plan_stages, proven_bounds, run_stages
from gangopt.solvers.greedy import greedy
from tests.builders import cluster, make_round, pending, running
from tests.solvers.cpsat.probe import busy_round, encoding_of, value


def terms_of(enc: Encoding, part: Part) -> Terms:
    if part == "secondary":
        return enc.secondary
    if part == "fifo":
        return enc.fifo
    assert isinstance(part, int)
    return enc.tiers[part]


def spread(enc: Encoding, part: Part) -> int:
    """How far a part's value can move: Σ |c| · max(|lb|, |ub|) over its terms."""
    return sum(abs(c) * max(abs(enc.lb(v)), abs(enc.ub(v))) for v, c in terms_of(enc, part))


def hand_encoding() -> Encoding:
    """An encoding whose parts are set by hand (the model's own terms replaced):
    tier 5: 7·a, a ∈ {0,1} (range 7); tier 1: 2·n, n ∈ [0,3] (range 6);
    secondary: -3·s, s ∈ [-4, 2] (range 12); fifo: 2·a + 1·b (range 3)."""
    enc = encoding_of(make_round(cluster(1, gpus=8), pending=[pending("g", gpu=1)]))
    a, b = enc.bool_var("a"), enc.bool_var("b")
    n, s = enc.int_var(0, 3, "n"), enc.int_var(-4, 2, "s")
    enc.tiers = {5: [(a, 7)], 1: [(n, 2)], 3: []}  # an empty tier is skipped
    enc.secondary = [(s, -3)]
    enc.fifo = [(a, 2), (b, 1)]
    return enc


def test_weights_of_one_stage_by_hand() -> None:
    """Weights, from the last part up: w = 1 + Σ (later weight x later range).
    fifo 1; secondary 1 + 1·3 = 4; tier 1: 1 + 4·12 + 1·3 = 52; tier 5: 1 + 52·6 + 4·12 + 3 = 364
    (weighted range 364·7 + 52·6 + 4·12 + 3 = 2,911, far under STAGE_LIMIT: one stage)."""
    (stage,) = plan_stages(hand_encoding())
    assert stage.parts == [5, 1, "secondary", "fifo"]
    assert stage.weights == [364, 52, 4, 1]


def test_stages_split_where_the_weighted_range_would_pass_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split by hand: with a limit of 1,000, tiers 5 and 1 and the secondary weigh
    1 + 13·6 + 12 = 91, 1 + 12 = 13, 1 (weighted range 91·7 + 13·6 + 12 = 727 ≤ 1,000; adding
    FIFO would give 2,911); with 100, [5, 1] (7·7 + 6 = 55) then [secondary, fifo] (4·12 + 3 = 51)."""
    monkeypatch.setattr(stages_module, "STAGE_LIMIT", 1_000)
    split = plan_stages(hand_encoding())
    assert [(s.parts, s.weights) for s in split] == [([5, 1, "secondary"], [91, 13, 1]), (["fifo"], [1])]
    monkeypatch.setattr(stages_module, "STAGE_LIMIT", 100)
    split = plan_stages(hand_encoding())
    assert [(s.parts, s.weights) for s in split] == [([5, 1], [7, 1]), (["secondary", "fifo"], [4, 1])]


def many_tiers_round() -> Round:
    """24 elastic gangs over four priorities on 16 nodes: ranges large enough for several stages."""
    return make_round(
        cluster(16, gpus=8),
        pending=[pending(f"g{i}", replicas=4, gpu=2, priority=i % 4, min_replicas=1) for i in range(24)],
    )


def test_every_stage_is_lexicographic_and_within_the_limit() -> None:
    """On a real encoding: parts in order (tiers highest first, secondary, fifo), each weight
    larger than all later parts of its stage can add, each stage of several parts within
    STAGE_LIMIT, and no two neighbouring stages could have been one."""
    enc = encoding_of(many_tiers_round())
    staged = plan_stages(enc)
    assert len(staged) >= 2
    parts = [p for s in staged for p in s.parts]
    assert parts == [*sorted((p for p in enc.tiers if enc.tiers[p]), reverse=True), "secondary", "fifo"]
    for stage in staged:
        ranges = [spread(enc, p) for p in stage.parts]
        assert stage.weights[-1] == 1
        for i, weight in enumerate(stage.weights):
            below = sum(w * r for w, r in zip(stage.weights[i + 1 :], ranges[i + 1 :], strict=True))
            assert weight == below + 1  # each part outweighs everything after it, by one
        weighted = sum(w * r for w, r in zip(stage.weights, ranges, strict=True))
        assert len(stage.parts) == 1 or weighted <= STAGE_LIMIT
    for first, second in itertools.pairwise(staged):
        merged = [spread(enc, p) for p in [*first.parts, second.parts[0]]]
        total = 0
        for r in reversed(merged):
            total += (total + 1) * r
        assert total > STAGE_LIMIT


def part_values(enc: Encoding, staged: list[Stage], solution: list[int]) -> list[int]:
    return [value(terms_of(enc, p), solution) for s in staged for p in s.parts]


@pytest.mark.parametrize(
    ("seed", "nodes", "work_limit", "stopped"), [(1, 16, 3.0, False), (2, 16, 3.0, False), (3, 32, 0.0005, True)]
)
def test_run_stages_from_a_warm_start_is_never_worse_than_it(
    seed: int, nodes: int, work_limit: float, stopped: bool
) -> None:
    """run_stages: the answer's part values, in stage order, are lexicographically at least
    the warm start's — with room to search (the rounds here improve on greedy), and when the
    work limit stops the stages before they prove anything."""
    rnd = busy_round(seed, nodes, work_limit)
    enc = encoding_of(rnd)
    staged = plan_stages(enc)
    start = warm_start(enc, greedy(rnd), 1.0)
    assert start is not None
    before = part_values(enc, staged, start)
    values, _, _ = run_stages(enc, staged, time.perf_counter() + 10.0, start)
    assert values is not None
    assert any(not s.optimal for s in staged) is stopped
    after = [v for s in staged for v in s.part_values]
    assert len(after) == len(before)
    assert after >= before
    if not stopped:
        assert after > before


def test_proven_bounds_of_an_optimal_run_are_the_parts_values() -> None:
    """proven_bounds: every stage proved optimal bounds each tier at (its value + constant) /
    SCALE and the secondary terms at (value + constant) / SCALE."""
    rnd = make_round(
        cluster(3, gpus=8),
        running=[
            running("low", ["n0", "n0"], gpu=4, priority=0),
            running("fixed", ["n1"], gpu=4, priority=7, preemptible=False),
        ],
        pending=[pending("high", replicas=2, gpu=4, priority=5), pending("el", replicas=4, gpu=2, min_replicas=1)],
    )
    enc = encoding_of(rnd)
    staged = plan_stages(enc)
    values, _, _ = run_stages(enc, staged, time.perf_counter() + 10.0, warm_start(enc, greedy(rnd), 1.0))
    assert values is not None
    assert all(s.optimal for s in staged)
    bounds = proven_bounds(enc, staged)
    expected = {
        p: (v + enc.tier_constant.get(p, 0)) / SCALE
        for s in staged
        for p, v in zip(s.parts, s.part_values, strict=True)
        if isinstance(p, int)
    }
    assert bounds.tiers == pytest.approx(expected)
    assert set(expected) == {p for p in enc.tiers if enc.tiers[p]}
    secondary = next(v for s in staged for p, v in zip(s.parts, s.part_values, strict=True) if p == "secondary")
    assert bounds.secondary == pytest.approx((secondary + enc.secondary_constant) / SCALE)


def test_a_stage_the_warm_start_already_tops_is_closed_without_a_solve() -> None:
    """Closed stages: when every gang of the tiers starts in the warm start, the stage's value is
    its ceiling and it is optimal."""
    rnd = make_round(cluster(2, gpus=8), pending=[pending("a", gpu=8, priority=2), pending("b", gpu=8, priority=1)])
    enc = encoding_of(rnd)
    staged = plan_stages(enc)
    start = warm_start(enc, greedy(rnd), 1.0)
    assert start is not None and all(start[v.index] == 1 for v in enc.y.values())
    run_stages(enc, staged, time.perf_counter() + 10.0, start)
    first = staged[0]
    assert first.optimal and first.value == first.bound
    assert first.part_values == [value(terms_of(enc, p), start) for p in first.parts]
