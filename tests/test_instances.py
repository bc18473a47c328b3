"""The hand-written example rounds in instances/: each parses, and each shows what its README
entry says it shows once solved (the second group needs the CP-SAT solver)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import gangopt
from gangopt.schema import Plan, Round

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
FILES = sorted(INSTANCES.glob("*.json"))
EXPECTED = {
    "basic",
    "priorities",
    "preemption",
    "elastic",
    "topology",
    "quotas",
    "gang-group",
    "deadlines",
    "fragmentation",
}


def test_every_feature_has_an_instance() -> None:
    assert {p.stem for p in FILES} >= EXPECTED


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_instance_parses_as_round(path: Path) -> None:
    rnd = gangopt.load_round(path)
    assert isinstance(rnd, Round)
    assert rnd.pending, "an example round should have something to decide"
    # pretty-printed, stable: re-reading the text gives the same round
    assert path.read_text(encoding="utf-8").startswith("{\n")
    assert Round.model_validate(json.loads(path.read_text(encoding="utf-8"))) == rnd


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_instance_is_documented(path: Path) -> None:
    assert f"`{path.name}`" in (INSTANCES / "README.md").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- what each one shows


def solved(name: str) -> tuple[Round, Plan]:
    rnd = gangopt.load_round(INSTANCES / f"{name}.json")
    plan = gangopt.solve(rnd)
    assert gangopt.validate(rnd, plan) == []
    return rnd, plan


def nodes_of(plan: Plan, gang: str) -> list[str]:
    return [p.node for p in plan.placements if p.gang == gang]


def domains(rnd: Round, plan: Plan, gang: str, level: str) -> Counter[str]:
    where = {n.name: n.topology[level] for n in rnd.cluster.nodes}
    return Counter(where[n] for n in nodes_of(plan, gang))


def test_basic_all_start_and_pretrain_shares_a_rack() -> None:
    rnd, plan = solved("basic")
    assert sorted(plan.admitted) == ["finetune", "notebook", "pretrain"]
    assert len(domains(rnd, plan, "pretrain", "rack")) == 1, "preferred rack is achievable here"


def test_priorities_higher_tier_first_then_fill() -> None:
    _, plan = solved("priorities")
    assert sorted(plan.admitted) == ["batch", "prod"]
    assert [w.gang for w in plan.waiting] == ["research"]


def test_preemption_evicts_the_cheaper_victim_only() -> None:
    _, plan = solved("preemption")
    assert plan.admitted == ["urgent-eval"]
    assert [(p.gang, p.kind) for p in plan.preemptions] == [("sweep-b", "evict")]


def test_elastic_running_shrinks_pending_grows() -> None:
    rnd, plan = solved("elastic")
    assert sorted(plan.admitted) == ["hpo-sweep", "inference"]
    assert len(domains(rnd, plan, "inference", "rack")) == 1
    (resize,) = plan.resizes
    assert resize.gang == "elastic-train" and 4 <= resize.to_members < 16
    assert all(p.kind == "shrink" for p in plan.preemptions)
    assert len(nodes_of(plan, "hpo-sweep")) == 8, "the idle node lets the pending elastic gang run at its maximum"


def test_topology_required_preferred_and_slices() -> None:
    rnd, plan = solved("topology")
    assert sorted(plan.admitted) == ["allreduce", "moe", "tp-pairs"]
    assert len(domains(rnd, plan, "allreduce", "rack")) == 1
    assert all(c % 4 == 0 for c in domains(rnd, plan, "moe", "rack").values())
    assert len(domains(rnd, plan, "moe", "block")) == 1
    assert set(Counter(nodes_of(plan, "tp-pairs")).values()) == {2}


def test_quotas_cohort_borrowing() -> None:
    _, plan = solved("quotas")
    assert sorted(plan.admitted) == ["a-big", "b-next", "c-fits"]
    (wait,) = plan.waiting
    assert (wait.gang, wait.code) == ("c-over", "quota")


def test_gang_group_all_or_none() -> None:
    _, plan = solved("gang-group")
    assert sorted(plan.admitted) == ["rl-actor", "rl-learner", "solo"]
    assert nodes_of(plan, "eval-small") == [], "eval-small would fit alone but its group cannot start"


def test_deadlines_urgent_first() -> None:
    _, plan = solved("deadlines")
    assert sorted(plan.admitted) == ["paper-figures", "weekly-report"]


def test_fragmentation_round_wide_plan_keeps_a_block_free() -> None:
    rnd, plan = solved("fragmentation")
    assert "big" in plan.admitted and len(plan.admitted) == 5
    assert len(domains(rnd, plan, "big", "block")) == 1


def test_fragmentation_greedy_strands_the_big_gang() -> None:
    """The greedy baseline (one gang at a time in submit order, first fit) spills the third
    8-GPU pod into block 1 and strands `big`; the round-wide plan starts all five."""
    rnd = gangopt.load_round(INSTANCES / "fragmentation.json")
    base = gangopt.solve(rnd, solver="greedy")
    assert gangopt.validate(rnd, base) == []
    assert "big" not in base.admitted and len(base.admitted) == 4


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_without_queue_weights_fair_share_changes_no_plan(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15: no shipped instance sets a queue weight, and there the fair-share tie-break is
    FIFO itself: greedy's plan is the one it makes with fair share switched off, and the
    CP-SAT tie-break weights are n for the oldest pending gang down to 1 (submit time, name)."""
    from gangopt.objective import ObjectiveTerms
    from gangopt.prefilter import prefilter
    from gangopt.solvers.cpsat.encoding import encode
    from gangopt.solvers.greedy.engine import GreedyEngine, greedy

    rnd = gangopt.load_round(path)
    assert all(q.weight is None for q in rnd.queues)
    assert ObjectiveTerms.of(rnd).fair_shares == {}
    plan = greedy(rnd)
    monkeypatch.setattr(GreedyEngine, "fair_share", False)
    assert greedy(rnd) == plan
    if len(rnd.cluster.nodes) <= 1024:
        enc = encode(prefilter(rnd))
        fifo = sorted(enc.y, key=lambda gi: (rnd.pending[gi].submit_time, rnd.pending[gi].name))
        assert enc.fifo == [(enc.y[gi], len(fifo) - rank) for rank, gi in enumerate(fifo)]
