"""Every check of the validator, one row each, asserting the exact list of violations.

Each scenario is a tiny round and a valid plan for it (checked to validate with ``[]``); each
row breaks that plan (or the round) one way and states, in its id, what it breaks. The row
then lists *every* violation the validator must report, with rule, message, gang and node, so
a check that stops working cannot hide behind a sibling check that reports something similar.
Rows with no violation are the other direction: plans the validator must accept.

The rules are docs/rules.md and docs/plan-semantics.md; ``scripts/mutate.py`` checks that
these rows notice when any line of ``gangopt/validation.py`` is changed (docs/testing.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache, partial
from typing import Any

import pytest

from gangopt.schema import (
    BoundPod,
    Cluster,
    Placement,
    Plan,
    Preemption,
    Queue,
    QueuePreemption,
    Resize,
    Round,
    RunningGang,
    Status,
    Toleration,
    Waiting,
)
from gangopt.validation import Violation, validate
from tests.builders import cluster, make_plan, make_round, node, pending, queue, role, running

Case = tuple[Round, Plan]
"""A round and a plan for it."""


def V(rule: str, message: str, gang: str | None = None, node: str | None = None) -> Violation:
    """A violation, as a row expects it."""
    return Violation(rule=rule, message=message, gang=gang, node=node)


def edit(plan: Plan, **update: object) -> Plan:
    """A copy of ``plan`` with some fields replaced (plans are frozen)."""
    return plan.model_copy(update=update)


def edit_preemption(plan: Plan, index: int = 0, **update: object) -> Plan:
    """A copy of ``plan`` whose ``index``-th preemption has some fields replaced."""
    pres = list(plan.preemptions)
    pres[index] = pres[index].model_copy(update=update)
    return edit(plan, preemptions=pres)


def empty_eviction(gang: str, pods: Sequence[str] = (), for_gangs: Sequence[str] = ("hi",)) -> Preemption:
    """An eviction of ``gang`` (for hi) that lists no pod, or only ``pods``, and no node."""
    return Preemption(
        gang=gang, kind="evict", pods=list(pods), nodes=[], priority=0, cost=0.0, for_gangs=list(for_gangs)
    )


def rename(plan: Plan, old: str, new: str) -> Plan:
    """A copy of ``plan`` whose new pod ``old`` is called ``new``."""
    return edit(plan, placements=[p.model_copy(update={"pod": new}) if p.pod == old else p for p in plan.placements])


# ----------------------------------------------------------------------------- scenarios (valid plans)


@cache
def basic() -> Case:
    """hi (priority 10) evicts low on n0; elastic e grows from n1 onto n2; idle on n3 is left
    alone; wait (2 x 8 GPUs) waits."""
    rnd = make_round(
        cluster(4),
        running=[
            running("low", ["n0"], gpu=8),
            running("e", ["n1"], gpu=8, replicas=2, min_replicas=1),
            running("idle", ["n3"], gpu=8),
        ],
        pending=[pending("hi", 1, gpu=8, priority=10), pending("wait", 2, gpu=8)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"], "e": ["n2"]}, evict={"low": ["hi"]})


@cache
def elastic() -> Case:
    """g: 4 pods of one role, at least 2 in all, at most 3 (starts 2); m: roles a and b of 2 pods,
    at least 1 each (starts 1 + 2)."""
    rnd = make_round(
        cluster(2),
        pending=[
            pending("g", 4, gpu=1, min_replicas=1, min_members=2, max_members=3),
            pending("m", roles=[role("a", 2, gpu=1, min_replicas=1), role("b", 2, gpu=1, min_replicas=1)]),
        ],
    )
    return rnd, make_plan(rnd, place={"g": ["n0", "n0"], "m": {"a": ["n1"], "b": ["n1", "n1"]}})


@cache
def shrinking() -> Case:
    """hi (4 GPUs, priority 10) shrinks elastic e (4 x 2 GPUs on n0, at least 2 in all, 1 per role)."""
    rnd = make_round(
        cluster(1),
        running=[running("e", ["n0"] * 4, gpu=2, min_replicas=1, min_members=2)],
        pending=[pending("hi", 1, gpu=4, priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-2", "e-worker-3"], ["hi"])})


@cache
def two_role_runner() -> Case:
    """Running r: role a (1 pod of 4 GPUs, at least 1) and role b (2 of up to 3 pods of 2 GPUs, at
    least 0), all on n0; hi (4 GPUs, priority 10) takes b's two pods."""
    roles = [role("a", 1, gpu=4, min_replicas=1), role("b", 3, gpu=2, min_replicas=0)]
    rnd = make_round(
        cluster(2),
        running=[running("r", {"a": ["n0"], "b": ["n0", "n0"]}, roles=roles)],
        pending=[pending("hi", 1, gpu=4, priority=10)],
    )
    plan = make_plan(rnd, place={"hi": ["n0"]}, shrink={"r": (["r-b-0", "r-b-1"], ["hi"])})
    return rnd, plan


@cache
def grower() -> Case:
    """Running e (1 of up to 3 pods, at most 2 members) grows by one onto n1."""
    rnd = make_round(cluster(2), running=[running("e", ["n0"], gpu=4, replicas=3, min_replicas=1, max_members=2)])
    return rnd, make_plan(rnd, place={"e": ["n1"]})


@cache
def grouped() -> Case:
    """a and b form group pair; both start."""
    rnd = make_round(cluster(2), pending=[pending("a", 1, gpu=8, group="pair"), pending("b", 1, gpu=8, group="pair")])
    return rnd, make_plan(rnd, place={"a": ["n0"], "b": ["n1"]})


@cache
def packed() -> Case:
    """Running r holds 4 GPUs of n0; p (4 GPUs, 1 cpu, 40Gi) fills n0 exactly."""
    rnd = make_round(
        cluster(1, cpu=1, memory="64Gi"),
        running=[running("r", ["n0"], gpu=4)],
        pending=[pending("p", 1, gpu=4, cpu=1, memory="40Gi"), pending("q", 1, gpu=4, cpu=1, memory="40Gi")],
    )
    return rnd, make_plan(rnd, place={"p": ["n0"]})


@cache
def fenced() -> Case:
    """n0 is cordoned, labelled accel=a100 zone=a and tainted dedicated=infer:NoSchedule; n1 is
    clean and labelled accel=h100 zone=b; p needs accel=h100 and zone NotIn [a]; e grows on n1."""
    rnd = make_round(
        cluster(
            2,
            cordoned=["n0"],
            labels={"n0": {"accel": "a100", "zone": "a"}, "n1": {"accel": "h100", "zone": "b"}},
            taints={"n0": [("dedicated", "infer", "NoSchedule")]},
        ),
        running=[running("e", ["n1"], gpu=1, replicas=2, min_replicas=1)],
        pending=[pending("p", 1, gpu=1, selector={"accel": "h100"}, affinity=[("zone", "NotIn", ["a"])])],
    )
    return rnd, make_plan(rnd, place={"p": ["n1"], "e": ["n1"]})


def labelled(labels: dict[str, str], *, taint: tuple[str, str, str] | None = None, **gang: Any) -> Case:
    """One node n0 with ``labels`` (and ``taint``); gang p (1 GPU, ``gang`` settings) placed on it."""
    taints = {"n0": [taint]} if taint else None
    rnd = make_round(cluster(1, labels={"n0": labels}, taints=taints), pending=[pending("p", 1, gpu=1, **gang)])
    return rnd, make_plan(rnd, place={"p": ["n0"]})


RACKS = {"g": ["n2", "n2"], "s": ["n0", "n0", "n2", "n2"], "nd": ["n0", "n0"], "e": ["n1"], "big": ["n3"]}
"""Where :func:`racks` places its new pods."""


def racks_plan(rnd: Round, **place: list[str]) -> Plan:
    """The :func:`racks` plan, some gangs placed elsewhere."""
    return make_plan(rnd, place={**RACKS, **place}, shrink={"w": (["w-worker-1"], ["big"])})


@cache
def racks() -> Case:
    """4 nodes of 8 GPUs in racks r0 (n0 n1) and r1 (n2 n3). g needs one rack, nd one node; s
    comes in rack slices of 2; running e (on n0, one rack) grows onto n1; running w, spread over
    n1 and n3 although it requires one rack, loses its n3 pod to big (8 GPUs, priority 10)."""
    rnd = make_round(
        cluster(4, racks=2),
        running=[
            running("e", ["n0"], gpu=1, replicas=2, min_replicas=1, required="rack"),
            running("w", ["n1", "n3"], gpu=4, min_replicas=1, required="rack"),
        ],
        pending=[
            pending("g", 2, gpu=1, required="rack"),
            pending("s", 4, gpu=1, slice_level="rack", slice_size=2),
            pending("nd", 2, gpu=1, required="node"),
            pending("big", 1, gpu=8, priority=10),
        ],
    )
    return rnd, racks_plan(rnd)


@cache
def victim() -> Case:
    """low (priority 0, 8 GPUs) holds n0; other (priority 20, not preemptible) holds n1; hi
    (priority 10) evicts low; mid (priority 0) waits, n2 is free."""
    rnd = make_round(
        cluster(3),
        running=[running("low", ["n0"], gpu=8), running("other", ["n1"], gpu=8, priority=20, preemptible=False)],
        pending=[pending("hi", 1, gpu=8, priority=10), pending("mid", 1, gpu=8)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]})


def victim_variant(**low: Any) -> Case:
    """:func:`victim` with other settings of low (or the policy, with ``preemption``)."""
    policy = {"preemption": low.pop("preemption")} if "preemption" in low else {}
    rnd, _ = victim()
    changed = rnd.running[0].model_copy(update=low)
    rnd = make_round(rnd.cluster, running=[changed, rnd.running[1]], pending=rnd.pending, **policy)
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"low": ["hi"]})


@cache
def churn() -> Case:
    """n0: a (priority 0, 4 GPUs); b (priority 1, 6 GPUs) needs a's room; c (priority 0, 2 GPUs) waits."""
    rnd = make_round(
        cluster(1),
        running=[running("a", ["n0"], gpu=4)],
        pending=[pending("b", 1, gpu=6, priority=1), pending("c", 1, gpu=2)],
    )
    return rnd, make_plan(rnd, place={"b": ["n0"]}, evict={"a": ["b"]})


@cache
def two_victims() -> Case:
    """v1 and v2 (4 GPUs each) share n0; hi (4 GPUs, priority 10) needs one of them gone."""
    rnd = make_round(
        cluster(1),
        running=[running("v1", ["n0"], gpu=4), running("v2", ["n0"], gpu=4)],
        pending=[pending("hi", 1, gpu=4, priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, evict={"v1": ["hi"]})


def policy_case(
    policy: dict[str, Any],
    victim_queue: str = "b",
    nom_a: int = 8,
    nom_b: int = 0,
    cohort_b: str | None = "c",
    p: int = 0,
    v: int = 0,
    cpu: int | None = None,
) -> Case:
    """Queue policies (rule 5): v (8 GPUs, and ``cpu`` CPUs, which no queue limits; queue
    ``victim_queue``) fills n0 and is evicted for p (8 GPUs, queue a, whose preemption policy is
    ``policy``); a is in cohort c."""
    rnd = make_round(
        cluster(1, cpu=64),
        queues=[
            Queue(name="a", cohort="c", nominal={"gpu": nom_a}, preemption=QueuePreemption.model_validate(policy)),
            Queue(name="b", cohort=cohort_b, nominal={"gpu": nom_b}),
        ],
        running=[running("v", ["n0"], gpu=8, cpu=cpu, queue=victim_queue, priority=v)],
        pending=[pending("p", 1, gpu=8, queue="a", priority=p)],
    )
    return rnd, make_plan(rnd, place={"p": ["n0"]}, evict={"v": ["p"]})


@cache
def over_reclaim() -> Case:
    """b (nominal 8) runs b1 on n0 and b2 on n1, borrowing 8; a (nominal 16, reclaims at any
    priority) takes both back for a1 and a2, leaving b below its nominal."""
    rnd = make_round(
        cluster(2),
        queues=[
            Queue(
                name="a",
                cohort="c",
                nominal={"gpu": 16},
                preemption=QueuePreemption(reclaim_within_cohort="any", other_queues="never"),
            ),
            Queue(name="b", cohort="c", nominal={"gpu": 8}),
        ],
        running=[running("b1", ["n0"], gpu=8, queue="b"), running("b2", ["n1"], gpu=8, queue="b")],
        pending=[pending("a1", 1, gpu=8, queue="a"), pending("a2", 1, gpu=8, queue="a")],
    )
    return rnd, make_plan(rnd, place={"a1": ["n0"], "a2": ["n1"]}, evict={"b1": ["a1"], "b2": ["a2"]})


@cache
def sliced_victim() -> Case:
    """e: 6 x 1 GPU on n0 in node slices of 2, at least 2; hi (3 GPUs) needs one slice of it."""
    rnd = make_round(
        cluster(1),
        running=[running("e", ["n0"] * 6, gpu=1, min_replicas=2, slice_level="node", slice_size=2)],
        pending=[pending("hi", 1, gpu=3, priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-4", "e-worker-5"], ["hi"])})


def many_slices(extra: int) -> Case:
    """Running e (1-GPU pods in node slices of 2) loses every pod on nodes a..f: a..e (62, 14, 6,
    2, 2 pods: 1999 pairs, the slices tried back one at a time) and ``extra`` more 2-pod nodes
    are refilled by hi, but f stays empty: its pair, the 2000th (+ ``extra``) tried, fits back.
    At most MAX_SLICE_REPRIEVES = 2000 pairs are tried (docs/rules.md, rule 5)."""
    full = {"a": 62, "b": 14, "c": 6, "d": 2, "e": 2, **{f"x{i}": 2 for i in range(extra)}}
    sizes = {**full, "f": 2, "g": 2}
    rnd = make_round(
        Cluster(nodes=[node(name, n) for name, n in sizes.items()]),
        running=[
            running(
                "e",
                [name for name, n in sizes.items() for _ in range(n)],
                gpu=1,
                min_replicas=2,
                slice_level="node",
                slice_size=2,
            )
        ],
        pending=[pending("hi", sum(full.values()) // 2, gpu=2, priority=10)],
    )
    lost = [p.name for p in rnd.running[0].pods if p.node != "g"]
    hi = [name for name, n in full.items() for _ in range(n // 2)]
    return rnd, make_plan(rnd, place={"hi": hi}, shrink={"e": (lost, ["hi"])})


@cache
def rack_slices() -> Case:
    """e: 6 x 1 GPU alternating on n0 and n1 (rack r0), in rack slices of 2, at least 2; hi
    (6 GPUs) needs one slice of it: e-worker-0 (n0) and e-worker-1 (n1)."""
    rnd = make_round(
        cluster(2, racks=1),
        running=[running("e", ["n0", "n1"] * 3, gpu=1, min_replicas=2, slice_level="rack", slice_size=2)],
        pending=[pending("hi", 1, gpu=6, priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-worker-0", "e-worker-1"], ["hi"])})


@cache
def single_slices() -> Case:
    """e: role big (6 GPUs on n0, at least 0) and role small (1 GPU on n1, n0, n1, at least 1) in
    node slices of 1; hi (7 GPUs) needs n0 and takes e-big-0."""
    roles = [role("big", 1, gpu=6, min_replicas=0), role("small", 3, gpu=1, min_replicas=1)]
    rnd = make_round(
        cluster(2),
        running=[
            running("e", {"big": ["n0"], "small": ["n1", "n0", "n1"]}, roles=roles, slice_level="node", slice_size=1)
        ],
        pending=[pending("hi", 1, gpu=7, priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"]}, shrink={"e": (["e-big-0"], ["hi"])})


@cache
def quota_victim() -> Case:
    """Queue q may use 8 GPUs: low (8, on n1) must go for hi (8, priority 10), which lands on n1."""
    rnd = make_round(
        cluster(2, gpus=16),
        queues=[queue("q", gpu=8)],
        running=[running("low", ["n1"], gpu=8, queue="q")],
        pending=[pending("hi", 1, gpu=8, queue="q", priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n1"]}, evict={"low": ["hi"]})


@cache
def two_queues() -> Case:
    """low (queue qa, no quota) holds n0; hi (qa, priority 10) lands on free n1; gb (queue qb,
    1 GPU allowed) waits."""
    rnd = make_round(
        cluster(3),
        queues=[queue("qa"), queue("qb", gpu=1)],
        running=[running("low", ["n0"], gpu=8, queue="qa")],
        pending=[pending("hi", 1, gpu=8, queue="qa", priority=10), pending("gb", 1, gpu=2, queue="qb")],
    )
    return rnd, make_plan(rnd, place={"hi": ["n1"]})


@cache
def quota_churn() -> Case:
    """Queue q may use 12 GPUs; v runs 4 on n0; h (priority 1) needs 4 and lands beside v; l (8) waits."""
    rnd = make_round(
        cluster(2),
        queues=[queue("q", gpu=12)],
        running=[running("v", ["n0"], gpu=4, queue="q")],
        pending=[pending("h", 1, gpu=4, priority=1, queue="q"), pending("l", 1, gpu=8, queue="q")],
    )
    return rnd, make_plan(rnd, place={"h": ["n0"]})


@cache
def quotas() -> Case:
    """Queue solo (8 GPUs, no cohort, 4 of them used by r); cohort c of a (8 GPUs, borrows at most
    4 more), b (8 GPUs, borrowing unlimited) and z (lists cpu only). Every limit is exactly met:
    solo 8 of 8, a 12 of 8 + 4, cohort 16 of 16 (z's 16 GPUs are not limited); s2, more wait."""
    rnd = make_round(
        cluster(6, gpus=16, cpu=64),
        queues=[
            queue("solo", gpu=8),
            queue("a", cohort="c", gpu=8, borrowing_limit={"gpu": 4}),
            queue("b", cohort="c", gpu=8),
            queue("z", cohort="c", nominal={"cpu": 64}),
        ],
        running=[running("r", ["n5"], gpu=4, queue="solo")],
        pending=[
            pending("s", 1, gpu=4, queue="solo"),
            pending("s2", 1, gpu=1, queue="solo"),
            pending("ga", 4, gpu=4, queue="a", min_replicas=1),
            pending("gb", 1, gpu=4, queue="b"),
            pending("gz", 1, gpu=16, queue="z"),
            pending("more", 1, gpu=8, queue="b"),
        ],
    )
    return rnd, make_plan(rnd, place={"s": ["n0"], "ga": ["n1", "n1", "n2"], "gb": ["n2"], "gz": ["n3"]})


@cache
def over_quota() -> Case:
    """Queue q may use 4 GPUs but r and e already run 9 (the quota was lowered): nothing is added."""
    rnd = make_round(
        cluster(2),
        queues=[queue("q", gpu=4)],
        running=[
            running("r", ["n0"], gpu=8, queue="q"),
            running("e", ["n1"], gpu=1, queue="q", replicas=2, min_replicas=1),
        ],
        pending=[pending("g", 1, gpu=1, queue="q")],
    )
    return rnd, make_plan(rnd)


@cache
def mover() -> Case:
    """hi (4 GPUs, priority 10) shrinks role a of r (2 x 4 GPUs on n0) while role b grows on n1."""
    roles = [role("a", 2, gpu=4, min_replicas=1), role("b", 2, gpu=4, min_replicas=1)]
    rnd = make_round(
        cluster(2),
        running=[running("r", {"a": ["n0", "n0"], "b": ["n1"]}, roles=roles)],
        pending=[pending("hi", 1, gpu=4, priority=10)],
    )
    return rnd, make_plan(rnd, place={"hi": ["n0"], "r": {"b": ["n1"]}}, shrink={"r": (["r-a-1"], ["hi"])})


@cache
def look_alikes() -> Case:
    """Gang x-y (role worker) and gang x (role y-worker): both name their first pod x-y-worker-0."""
    rnd = make_round(cluster(1), pending=[pending("x-y", 1, gpu=1), pending("x", roles=[role("y-worker", 1, gpu=1)])])
    return rnd, make_plan(rnd, place={"x-y": ["n0"]})


@cache
def gap() -> Case:
    """Running e's only pod is called e-worker-1: its new pod takes the free index 0."""
    rnd = make_round(cluster(1), running=[running("e", ["n0"], gpu=1, replicas=2, min_replicas=1)])
    pods = [rnd.running[0].pods[0].model_copy(update={"name": "e-worker-1"})]
    rnd = make_round(rnd.cluster, running=[rnd.running[0].model_copy(update={"pods": pods})])
    plan = make_plan(rnd, place={"e": ["n0"]})
    assert [p.pod for p in plan.placements] == ["e-worker-0"]
    return rnd, plan


@cache
def untouched() -> Case:
    """Running gangs whose input placement breaks their own topology, which the plan leaves alone:
    r spans two racks although it requires one; s has one pod per node in node slices of 2."""
    rnd = make_round(
        cluster(4, racks=2),
        running=[
            running("r", ["n0", "n2"], gpu=1, required="rack"),
            running("s", ["n1", "n3"], gpu=1, slice_level="node", slice_size=2),
        ],
    )
    return rnd, make_plan(rnd)


def stray_role() -> Case:
    """A round built without checks (as replays may): running r has a pod of a role it does not
    have, r-other-0 on n1; queue q allows 1 GPU, which r's worker pod uses. Nothing is done."""
    gang = running("r", ["n0", "n1"], queue="q")
    stray = BoundPod(name="r-other-0", role="other", node="n1")
    unchecked = RunningGang.model_construct(**{**dict(gang), "pods": [gang.pods[0], stray]})
    rnd = make_round(cluster(2), queues=[queue("q", gpu=1)]).model_copy(update={"running": [unchecked]})
    return rnd, Plan(status=Status.FEASIBLE)


SCENARIOS: dict[str, Callable[[], Case]] = {
    f.__name__: f
    for f in (
        basic,
        elastic,
        shrinking,
        two_role_runner,
        grower,
        grouped,
        packed,
        fenced,
        racks,
        victim,
        churn,
        two_victims,
        sliced_victim,
        rack_slices,
        single_slices,
        quota_victim,
        quota_churn,
        two_queues,
        quotas,
        over_quota,
        mover,
        look_alikes,
        gap,
        untouched,
    )
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_starts_from_a_valid_plan(name: str) -> None:
    rnd, plan = SCENARIOS[name]()
    assert validate(rnd, plan) == []


# ----------------------------------------------------------------------------- the rows

Row = Callable[[], Case]


def on(scenario: Callable[[], Case], change: Callable[[Plan], Plan]) -> Row:
    """The scenario's round, with its plan changed one way."""

    def build() -> Case:
        rnd, plan = scenario()
        return rnd, change(plan)

    return build


def placed(scenario: Callable[[], Case], **place: object) -> Row:
    """The scenario's round with the plan :func:`make_plan` builds from these arguments."""

    def build() -> Case:
        rnd, _ = scenario()
        return rnd, make_plan(rnd, **place)  # type: ignore[arg-type]

    return build


def case(what: str, build: Row, *expected: Violation) -> object:
    """One row: what it breaks (the test id), how to build it, and every violation expected."""
    return pytest.param(build, list(expected), id=what)


ALL_OR_NOTHING = [
    case(
        "admitted gang below its gang minimum, roles within theirs",
        placed(elastic, place={"g": ["n0"], "m": {"a": ["n1"], "b": ["n1"]}}),
        V("all_or_nothing", "admitted gang g: 1 pods < minimum 2", "g"),
    ),
    case(
        "admitted gang above its gang maximum, role within its replicas",
        placed(elastic, place={"g": ["n0"] * 4, "m": {"a": ["n1"], "b": ["n1"]}}),
        V("all_or_nothing", "admitted gang g: 4 pods > maximum 3", "g"),
    ),
    case(
        "a role below its role minimum while the gang total is within bounds",
        placed(elastic, place={"g": ["n0", "n0"], "m": {"a": ["n1", "n1"]}}),
        V("all_or_nothing", "admitted gang m: role b has 0 pods < role minimum 1", "m"),
    ),
    case(
        "a role above its own replicas while the gang total is within bounds",
        placed(elastic, place={"g": ["n0", "n0"], "m": {"a": ["n1"] * 3, "b": ["n1"]}}),
        V("all_or_nothing", "admitted gang m: role a has 3 pods > replicas 2", "m"),
    ),
    case(
        "admitted gang with no pod at all",
        placed(elastic, place={"m": {"a": ["n1"], "b": ["n1"]}}, admitted=["g", "m"]),
        V("all_or_nothing", "admitted gang g: 0 pods < minimum 2", "g"),
        V("all_or_nothing", "admitted gang g: role worker has 0 pods < role minimum 1", "g"),
    ),
    case(
        "gang that is not admitted has pods",
        placed(elastic, place={"g": ["n0", "n0"], "m": {"a": ["n1"], "b": ["n1"]}}, admitted=["m"]),
        V("all_or_nothing", "gang g: not admitted but has 2 new pods", "g"),
    ),
    case(
        "one gang of a group admitted without the other",
        placed(grouped, place={"a": ["n0"]}),
        V("all_or_nothing", "group pair: a admitted but b not"),
    ),
    case("no gang of a group admitted", placed(grouped)),
    case(
        "running gang shrunk below its gang minimum, its role within its own",
        placed(shrinking, place={"hi": ["n0"]}, shrink={"e": (["e-worker-1", "e-worker-2", "e-worker-3"], ["hi"])}),
        V("all_or_nothing", "running gang e after the plan: 1 pods < minimum 2", "e"),
        V("preemption", "gang e: shrunk, but pod e-worker-1 fits back on n0 within capacity and quota", "e", "n0"),
    ),
    case(
        "running role shrunk below its role minimum while the gang total is within bounds",
        placed(two_role_runner, place={"hi": ["n0"]}, shrink={"r": (["r-a-0"], ["hi"])}),
        V("all_or_nothing", "running gang r after the plan: role a has 0 pods < role minimum 1", "r"),
    ),
    case(
        "running role grown above its replicas while the gang total is within bounds",
        on(
            two_role_runner,
            lambda plan: edit(
                plan,
                placements=[*plan.placements, Placement(gang="r", role="a", pod="r-a-1", node="n1")],
                resizes=[Resize(gang="r", from_members=3, to_members=2)],
            ),
        ),
        V("all_or_nothing", "running gang r after the plan: role a has 2 pods > replicas 1", "r"),
    ),
    case(
        "running gang grown above its gang maximum, its role within its replicas",
        placed(grower, place={"e": ["n1", "n1"]}),
        V("all_or_nothing", "running gang e after the plan: 3 pods > maximum 2", "e"),
    ),
    case(
        "evicted running gang gets a new pod",
        placed(basic, place={"hi": ["n0"], "low": ["n2"]}, evict={"low": ["hi"]}),
        V("all_or_nothing", "running gang low: evicted but gets 1 new pods", "low"),
    ),
]

CAPACITY = [
    case(
        "new pods over a node's capacity, beside kept pods",
        placed(packed, place={"p": ["n0"], "q": ["n0"]}),
        V("capacity", "node n0: cpu 2 > capacity 1 (kept 0, new 2)", node="n0"),
        V("capacity", "node n0: gpu 12 > capacity 8 (kept 4, new 8)", node="n0"),
        V("capacity", "node n0: memory 80Gi > capacity 64Gi (kept 0, new 80Gi)", node="n0"),
    ),
    case(
        "1 milli of a resource the node does not list",
        lambda: labelled({}, rdma="1m"),
        V("capacity", "node n0: rdma 1m > capacity 0 (kept 0, new 1m)", node="n0"),
    ),
    case(
        "placements of a gang that is not admitted still take capacity",
        placed(packed, place={"p": ["n0"], "q": ["n0"]}, admitted=["p"]),
        V("all_or_nothing", "gang q: not admitted but has 1 new pods", "q"),
        V("capacity", "node n0: cpu 2 > capacity 1 (kept 0, new 2)", node="n0"),
        V("capacity", "node n0: gpu 12 > capacity 8 (kept 4, new 8)", node="n0"),
        V("capacity", "node n0: memory 80Gi > capacity 64Gi (kept 0, new 80Gi)", node="n0"),
    ),
]

ELIGIBILITY = [
    case(
        "new pod on a cordoned, mislabelled, tainted node: every reason",
        placed(fenced, place={"p": ["n0"], "e": ["n1"]}),
        *(
            V("eligibility", f"pod p-worker-0 of gang p on node n0: {reason}", "p", "n0")
            for reason in (
                "node is cordoned (schedulable=false)",
                "node_selector accel=h100 but node has accel=a100",
                "node_affinity zone NotIn [a] does not hold (node zone=a)",
                "taint dedicated=infer:NoSchedule is not tolerated",
            )
        ),
    ),
    case(
        "growing running gang on a cordoned, tainted node",
        placed(fenced, place={"p": ["n1"], "e": ["n0"]}),
        *(
            V("eligibility", f"pod e-worker-1 of gang e on node n0: {reason}", "e", "n0")
            for reason in ("node is cordoned (schedulable=false)", "taint dedicated=infer:NoSchedule is not tolerated")
        ),
    ),
    case(
        "node without the selector's label",
        lambda: labelled({}, selector={"accel": "h100"}),
        V(
            "eligibility",
            "pod p-worker-0 of gang p on node n0: node_selector accel=h100 but node has no label accel",
            "p",
            "n0",
        ),
    ),
    case(
        "node_affinity In, node has another value",
        lambda: labelled({"zone": "b"}, affinity=[("zone", "In", ["a"])]),
        V(
            "eligibility",
            "pod p-worker-0 of gang p on node n0: node_affinity zone In [a] does not hold (node zone=b)",
            "p",
            "n0",
        ),
    ),
    case(
        "node_affinity Exists, label absent",
        lambda: labelled({}, affinity=[("zone", "Exists", [])]),
        V(
            "eligibility",
            "pod p-worker-0 of gang p on node n0: node_affinity zone Exists does not hold (node zone=None)",
            "p",
            "n0",
        ),
    ),
    case(
        "NoExecute taint, toleration of another value",
        lambda: labelled({}, taint=("gpu", "x", "NoExecute"), tolerations=[Toleration(key="gpu", value="y")]),
        V("eligibility", "pod p-worker-0 of gang p on node n0: taint gpu=x:NoExecute is not tolerated", "p", "n0"),
    ),
    case(
        "selector and affinity that match",
        lambda: labelled({"accel": "h100", "zone": "a"}, selector={"accel": "h100"}, affinity=[("zone", "In", ["a"])]),
    ),
    case("PreferNoSchedule taint never blocks", lambda: labelled({}, taint=("spot", "", "PreferNoSchedule"))),
    case(
        "tolerated NoSchedule taint",
        lambda: labelled({}, taint=("gpu", "x", "NoSchedule"), tolerations=[Toleration(key="gpu", value="x")]),
    ),
]

TOPOLOGY = [
    case(
        "admitted gang spread over two domains of its required level",
        lambda: (racks()[0], racks_plan(racks()[0], g=["n1", "n2"])),
        V("topology", "gang g: required rack but pods span 2 domains (r0: 1 pods on n1; r1: 1 pods on n2)", "g"),
    ),
    case(
        "required level node: two nodes are two domains",
        lambda: (racks()[0], racks_plan(racks()[0], nd=["n0", "n1"])),
        V("topology", "gang nd: required node but pods span 2 domains (n0: 1 pods on n0; n1: 1 pods on n1)", "nd"),
    ),
    case(
        "running gang grown out of its required domain",
        lambda: (racks()[0], racks_plan(racks()[0], e=["n2"])),
        V("topology", "gang e: required rack but pods span 2 domains (r0: 1 pods on n0; r1: 1 pods on n2)", "e"),
    ),
    case(
        "admitted gang's slices not whole in two domains",
        lambda: (racks()[0], racks_plan(racks()[0], s=["n0", "n0", "n1", "n2"])),
        V("topology", "gang s: 3 pods in rack r0, not a multiple of slice size 2", "s"),
        V("topology", "gang s: 1 pods in rack r1, not a multiple of slice size 2", "s"),
    ),
    case(
        "running gang shrunk by half a slice",
        placed(sliced_victim, place={"hi": ["n0"]}, shrink={"e": (["e-worker-5"], ["hi"])}),
        V("topology", "gang e: 5 pods in node n0, not a multiple of slice size 2", "e"),
    ),
    case("untouched running gangs are not blamed for their input topology", untouched),
    case(
        "a running pod of a role its gang lacks (unchecked round) requests nothing",
        stray_role,
        V("all_or_nothing", "running gang r after the plan: role worker has 1 pods < role minimum 2", "r"),
    ),
]

PREEMPTION = [
    case(
        "preemption while policy.preemption is false",
        lambda: victim_variant(preemption=False),
        V("preemption", "gang low: loses 1 pods but policy.preemption is false", "low"),
    ),
    case(
        "victim that is not preemptible",
        lambda: victim_variant(preemptible=False),
        V("preemption", "gang low: loses 1 pods but is not preemptible", "low"),
    ),
    *(
        case(
            f"victim of priority {p}, preemptor of priority 10",
            partial(victim_variant, priority=p),
            V(
                "preemption",
                f"gang low (priority {p}) preempted for gang hi of priority 10, not strictly higher",
                "low",
            ),
            V(
                "preemption",
                f"node n0 loses pods of gang low (priority {p}) but receives new pods of gang hi (priority 10), "
                "not strictly higher",
                "low",
                "n0",
            ),
            V(
                "preemption",
                f"gang low: evicted, but all 1 pods fit back on n0 within capacity and quota beside the new pods "
                f"of priority above {p} (the rest went to gangs of its priority or lower)",
                "low",
            ),
        )
        for p in (10, 11)
    ),
    case("victim of priority 9, preemptor of priority 10", lambda: victim_variant(priority=9)),
    case(
        "a for_gangs entry that does not outrank the victim (and lands elsewhere)",
        placed(victim, place={"hi": ["n0"], "mid": ["n2"]}, evict={"low": ["hi", "mid"]}),
        V("preemption", "gang low (priority 0) preempted for gang mid of priority 0, not strictly higher", "low"),
    ),
    case(
        "for_gangs empty",
        placed(victim, place={"hi": ["n0"]}, evict={"low": []}),
        V("preemption", "gang low: preempted for no gang (for_gangs is empty)", "low"),
    ),
    case(
        "a for_gangs entry that starts no pod",
        placed(victim, place={"hi": ["n0"]}, evict={"low": ["hi", "other"]}),
        V("preemption", "gang low: preempted for gang other, which gets no new pods", "low"),
    ),
    case(
        "a for_gangs entry that names no gang: consistency only",
        placed(victim, place={"hi": ["n0"]}, evict={"low": ["hi", "ghost"]}),
        V("consistency", "preemption of gang low is for unknown gang ghost", "low"),
    ),
    case(
        "no beneficiary on the victim's node, which quota made necessary",
        placed(quota_victim, place={"hi": ["n0"]}, evict={"low": ["hi"]}),
        V("preemption", "gang low: none of hi has a new pod on its nodes n1", "low"),
    ),
    case(
        "no beneficiary on the victim's node, which fits back",
        placed(victim, place={"hi": ["n2"]}, evict={"low": ["hi"]}),
        V("preemption", "gang low: none of hi has a new pod on its nodes n0", "low"),
        V("preemption", "gang low: evicted, but all 1 pods fit back on n0 within capacity and quota", "low"),
    ),
    case(
        "a needless eviction is reported although another queue is over its quota",
        placed(two_queues, place={"hi": ["n1"], "gb": ["n2"]}, evict={"low": ["hi"]}),
        V("preemption", "gang low: none of hi has a new pod on its nodes n0", "low"),
        V("preemption", "gang low: evicted, but all 1 pods fit back on n0 within capacity and quota", "low"),
        V("quota", "queue qb: gpu 2 > limit 1"),
    ),
    case(
        "freed node also receives a gang of the victim's priority",
        placed(churn, place={"b": ["n0"], "c": ["n0"]}, evict={"a": ["b"]}),
        V(
            "preemption",
            "node n0 loses pods of gang a (priority 0) but receives new pods of gang c (priority 0), "
            "not strictly higher",
            "a",
            "n0",
        ),
    ),
    case(
        "two victims evicted where one suffices",
        placed(two_victims, place={"hi": ["n0"]}, evict={"v1": ["hi"], "v2": ["hi"]}),
        V("preemption", "gang v1: evicted, but all 1 pods fit back on n0 within capacity and quota", "v1"),
        V("preemption", "gang v2: evicted, but all 1 pods fit back on n0 within capacity and quota", "v2"),
    ),
    case(
        "victim's quota share goes to a gang of its own priority",
        placed(quota_churn, place={"h": ["n0"], "l": ["n1"]}, evict={"v": ["h"]}),
        V(
            "preemption",
            "gang v: evicted, but all 1 pods fit back on n0 within capacity and quota beside the new pods "
            "of priority above 0 (the rest went to gangs of its priority or lower)",
            "v",
        ),
    ),
    case(
        "sliced shrink of two slices where one suffices",
        placed(
            sliced_victim,
            place={"hi": ["n0"]},
            shrink={"e": (["e-worker-2", "e-worker-3", "e-worker-4", "e-worker-5"], ["hi"])},
        ),
        V(
            "preemption",
            "gang e: shrunk, but pod e-worker-2, e-worker-3 fits back on n0 within capacity and quota",
            "e",
            "n0",
        ),
    ),
    case(
        "sliced shrink of two slices where one suffices, a slice spanning two nodes",
        placed(
            rack_slices,
            place={"hi": ["n0"]},
            shrink={"e": (["e-worker-0", "e-worker-1", "e-worker-2", "e-worker-3"], ["hi"])},
        ),
        V(
            "preemption",
            "gang e: shrunk, but pod e-worker-0, e-worker-1 fits back on n0, n1 within capacity and quota",
            "e",
            "n0",
        ),
    ),
    case(
        "slices of 1 pod are given back one by one, in the gang's pod order",
        placed(single_slices, place={"hi": ["n0"]}, shrink={"e": (["e-big-0", "e-small-0", "e-small-1"], ["hi"])}),
        V("preemption", "gang e: shrunk, but pod e-small-0 fits back on n1 within capacity and quota", "e", "n1"),
    ),
    case(
        "a slice that fits back, the 2000th tried",
        partial(many_slices, 0),
        V(
            "preemption",
            "gang e: shrunk, but pod e-worker-86, e-worker-87 fits back on f within capacity and quota",
            "e",
            "f",
        ),
    ),
    case("a slice that fits back, the 2001st tried (past the limit)", partial(many_slices, 1)),
    case(
        "eviction entry that lists none of the victim's pods: bookkeeping only",
        lambda: (victim()[0], edit(make_plan(victim()[0]), preemptions=[empty_eviction("low")])),
        V("consistency", "eviction of gang low lists 0 of its 1 pods, not all", "low"),
    ),
    case("zero-cost eviction", on(victim, lambda plan: edit_preemption(plan, cost=0.0))),
]

QUOTA = [
    case(
        "queue without cohort over its nominal",
        placed(quotas, place={"s": ["n0"], "s2": ["n0"], "ga": ["n1", "n1", "n2"], "gb": ["n2"], "gz": ["n3"]}),
        V("quota", "queue solo: gpu 9 > limit 8"),
    ),
    case(
        "queue over nominal + borrowing limit, cohort within",
        placed(quotas, place={"s": ["n0"], "ga": ["n1", "n1", "n2", "n2"], "gz": ["n3"]}),
        V("quota", "queue a (nominal + borrowing limit): gpu 16 > limit 12"),
    ),
    case(
        "cohort over the sum of its nominal quotas",
        placed(quotas, place={"s": ["n0"], "ga": ["n1", "n1", "n2"], "gb": ["n2"], "more": ["n4"], "gz": ["n3"]}),
        V("quota", "cohort c: gpu 24 > limit 16"),
    ),
    case(
        "queue without borrowing limit borrows beyond its nominal within the cohort",
        placed(quotas, place={"s": ["n0"], "ga": ["n1"], "gb": ["n2"], "more": ["n4"], "gz": ["n3"]}),
    ),
    case(
        "quota already met before the round, exceeded by the plan",
        placed(quota_victim, place={"hi": ["n0"]}),
        V("quota", "queue q: gpu 16 > limit 8"),
    ),
    case(
        "quota already exceeded before the round, raised by the plan",
        placed(over_quota, place={"g": ["n1"]}),
        V("quota", "queue q: gpu 10 > limit 4, above 9 before the round"),
    ),
]

STABILITY = [
    case(
        "a role that loses a pod and gains one (a move)",
        placed(mover, place={"hi": ["n0"], "r": {"a": ["n1"]}}, shrink={"r": (["r-a-1"], ["hi"])}),
        V("stability", "running gang r: role a loses 1 pods and gains 1 new ones (moves pods)", "r"),
    ),
    case(
        "a kept pod placed again",
        on(mover, lambda plan: rename(plan, "r-b-1", "r-b-0")),
        V(
            "stability",
            "pod r-b-0 of running gang r stays on node n1, but the plan places it again on node n1",
            "r",
            "n1",
        ),
        V("consistency", "gang r role b: new pods named r-b-0, expected r-b-1", "r"),
    ),
]


def _append(field: str, item: object) -> Callable[[Plan], Plan]:
    """A change that appends ``item`` to the plan's list ``field``."""
    return lambda plan: edit(plan, **{field: [*getattr(plan, field), item]})


def _ghost(pod: str = "ghost-worker-0", node: str = "n3", gang: str = "ghost", role: str = "worker") -> Placement:
    return Placement(gang=gang, role=role, pod=pod, node=node)


CONSISTENCY = [
    case(
        "placement of an unknown gang",
        on(basic, _append("placements", _ghost())),
        V("consistency", "pod ghost-worker-0: unknown gang ghost", "ghost"),
    ),
    case(
        "placement of an unknown role",
        on(basic, _append("placements", _ghost("wait-boss-0", gang="wait", role="boss"))),
        V("consistency", "pod wait-boss-0: gang wait has no role boss (roles: worker)", "wait"),
    ),
    case(
        "placement on an unknown node",
        on(basic, _append("placements", _ghost("hi-worker-1", "n9", gang="hi"))),
        V("consistency", "pod hi-worker-1 of gang hi: unknown node n9", "hi", "n9"),
    ),
    case(
        "placement of an unknown gang on an unknown node",
        on(basic, _append("placements", _ghost(node="n9"))),
        V("consistency", "pod ghost-worker-0: unknown gang ghost", "ghost"),
        V("consistency", "pod ghost-worker-0 of gang ghost: unknown node n9", "ghost", "n9"),
    ),
    case(
        "two gangs place pods of one name",
        placed(look_alikes, place={"x-y": ["n0"], "x": {"y-worker": ["n0"]}}),
        V("consistency", "pod name x-y-worker-0 is placed 2 times"),
    ),
    case(
        "new pod named like a preempted pod",
        on(basic, lambda plan: rename(plan, "hi-worker-0", "low-worker-0")),
        V("consistency", "new pod low-worker-0 of gang hi reuses the name of a preempted pod of gang low", "hi", "n0"),
        V("consistency", "gang hi role worker: new pods named low-worker-0, expected hi-worker-0", "hi"),
    ),
    case(
        "new pod not named by the lowest free index",
        on(gap, lambda plan: rename(plan, "e-worker-0", "e-worker-2")),
        V("consistency", "gang e role worker: new pods named e-worker-2, expected e-worker-0", "e"),
    ),
    case(
        "admitted lists a running and an unknown gang",
        on(basic, lambda plan: edit(plan, admitted=[*plan.admitted, "ghost", "e"])),
        V("consistency", "admitted lists a running gang e", "e"),
        V("consistency", "admitted lists an unknown gang ghost", "ghost"),
    ),
    case(
        "a gang listed twice in admitted",
        on(basic, lambda plan: edit(plan, admitted=["hi", "hi"])),
        V("consistency", "admitted lists gang hi 2 times", "hi"),
    ),
    case(
        "a gang listed twice in waiting",
        on(basic, lambda plan: edit(plan, waiting=plan.waiting * 2)),
        V("consistency", "waiting lists gang wait 2 times", "wait"),
    ),
    case(
        "waiting lists a running gang",
        on(basic, _append("waiting", Waiting(gang="idle", code="capacity", reasons=["full"]))),
        V("consistency", "waiting lists a running gang idle", "idle"),
    ),
    case(
        "a gang both admitted and waiting",
        on(basic, _append("waiting", Waiting(gang="hi", code="capacity", reasons=["full"]))),
        V("consistency", "gang hi is both admitted and waiting", "hi"),
    ),
    case(
        "a pending gang neither admitted nor waiting",
        on(basic, lambda plan: edit(plan, waiting=[])),
        V("consistency", "pending gang wait is neither admitted nor waiting", "wait"),
    ),
    *(
        case(
            f"waiting gang with reasons {reasons!r}",
            on(basic, partial(edit, waiting=[Waiting(gang="wait", code="quota", reasons=reasons)])),
            V("consistency", "waiting gang wait (quota) gives no reason", "wait"),
        )
        for reasons in ([], ["  "])
    ),
    case(
        "a victim listed twice in preemptions",
        on(basic, lambda plan: edit(plan, preemptions=plan.preemptions * 2)),
        V("consistency", "preemptions list gang low 2 times", "low"),
    ),
    case(
        "preemption of a pending gang",
        on(basic, _append("preemptions", empty_eviction("wait"))),
        V("consistency", "preemption of pending gang wait", "wait"),
    ),
    case(
        "preemption of an unknown gang",
        on(basic, _append("preemptions", empty_eviction("ghost"))),
        V("consistency", "preemption of unknown gang ghost", "ghost"),
    ),
    case(
        "an eviction entry that lists only another gang's pod removes nothing",
        on(untouched, lambda plan: edit(plan, preemptions=[empty_eviction("r", pods=["s-worker-0"], for_gangs=[])])),
        V("consistency", "preemption of gang r lists pod s-worker-0, which is not one of its pods", "r"),
        V("consistency", "eviction of gang r lists 0 of its 2 pods, not all", "r"),
    ),
    case(
        "a new pod named like a kept pod that a preemption of another gang lists",
        on(
            basic,
            lambda plan: edit_preemption(
                rename(plan, "hi-worker-0", "idle-worker-0"), pods=["low-worker-0", "idle-worker-0"]
            ),
        ),
        V(
            "stability",
            "pod idle-worker-0 of running gang idle stays on node n3, but the plan places it again on node n0",
            "idle",
            "n0",
        ),
        V("consistency", "gang hi role worker: new pods named idle-worker-0, expected hi-worker-0", "hi"),
        V("consistency", "preemption of gang low lists pod idle-worker-0, which is not one of its pods", "low"),
    ),
    case(
        "preemption lists another gang's pod",
        on(basic, lambda plan: edit_preemption(plan, pods=["low-worker-0", "e-worker-0"])),
        V("consistency", "preemption of gang low lists pod e-worker-0, which is not one of its pods", "low"),
    ),
    case(
        "a pod listed twice in one preemption",
        on(basic, lambda plan: edit_preemption(plan, pods=["low-worker-0", "low-worker-0"])),
        V("consistency", "preemption of gang low lists pod low-worker-0 2 times", "low"),
    ),
    case(
        "preemption names a node none of its pods is on",
        on(basic, lambda plan: edit_preemption(plan, nodes=["n0", "n3"])),
        V("consistency", "preemption of gang low lists nodes n0, n3, but its listed pods are on n0", "low"),
    ),
    case("preemption repeats a node", on(basic, lambda plan: edit_preemption(plan, nodes=["n0", "n0"]))),
    case(
        "shrink that removes every pod",
        on(basic, lambda plan: edit_preemption(plan, kind="shrink")),
        V("consistency", "shrink of gang low removes all 1 pods (that is an evict)", "low"),
    ),
    case(
        "evict that removes some pods",
        on(shrinking, lambda plan: edit_preemption(plan, kind="evict")),
        V("consistency", "eviction of gang e lists 2 of its 4 pods, not all", "e"),
    ),
    case(
        "preemption states another priority",
        on(basic, lambda plan: edit_preemption(plan, priority=5)),
        V("consistency", "preemption of gang low says priority 5, gang has 0", "low"),
    ),
    *(
        case(
            f"preemption cost {cost}",
            on(basic, partial(edit_preemption, cost=cost)),
            V("consistency", f"preemption of gang low has cost {cost}, not a non-negative number", "low"),
        )
        for cost in (-1.0, -1e-9, float("nan"), float("-inf"))
    ),
    case(
        "resize of a pending gang",
        on(basic, _append("resizes", Resize(gang="wait", from_members=0, to_members=2))),
        V("consistency", "resize of pending gang wait", "wait"),
    ),
    case(
        "resize of an unknown gang",
        on(basic, _append("resizes", Resize(gang="ghost", from_members=1, to_members=2))),
        V("consistency", "resize of unknown gang ghost", "ghost"),
    ),
    case(
        "a gang resized twice",
        on(basic, lambda plan: edit(plan, resizes=plan.resizes * 2)),
        V("consistency", "resizes list gang e 2 times", "e"),
    ),
    *(
        case(
            f"resize that says {old} -> {new}",
            on(basic, partial(edit, resizes=[Resize(gang="e", from_members=old, to_members=new)])),
            V("consistency", f"resize of gang e says {old} -> {new}, the plan does 1 -> 2", "e"),
        )
        for old, new in ((1, 3), (2, 2), (0, 2))
    ),
    case(
        "resize of an untouched gang that changes nothing",
        on(basic, _append("resizes", Resize(gang="idle", from_members=1, to_members=1))),
        V("consistency", "resize of gang idle does not change its 1 members", "idle"),
    ),
    case(
        "grown gang without a resize",
        on(basic, lambda plan: edit(plan, resizes=[])),
        V("consistency", "gang e goes from 1 to 2 members without a resize entry", "e"),
    ),
    case(
        "shrunk gang without a resize",
        on(shrinking, lambda plan: edit(plan, resizes=[])),
        V("consistency", "gang e goes from 4 to 2 members without a resize entry", "e"),
    ),
    case(
        "evicted gang with a resize to 0",
        on(basic, _append("resizes", Resize(gang="low", from_members=1, to_members=0))),
    ),
    case(
        "evicted gang with a resize to 1",
        on(basic, _append("resizes", Resize(gang="low", from_members=1, to_members=1))),
        V("consistency", "resize of gang low says 1 -> 1, the plan does 1 -> 0", "low"),
    ),
]


REPRIEVED_BESIDE = (
    " within capacity and quota beside the new pods of the gangs that may preempt it (the rest went to gangs "
    "that may not)"
)
NOT_BORROWING = (
    " (policy other_queues never), but queue b is no cohort peer above its nominal with the victim's pods back"
)
RECLAIM_ANY = {"reclaim_within_cohort": "any", "other_queues": "never"}


def refused(tail: str, p: int = 0, v: int = 0, plain: bool = False) -> list[Violation]:
    """What a refused licence of gang p (priority ``p``) over v (priority ``v``) of
    :func:`policy_case` reports: the preemption, the freed node, and the reprieve beside the
    gangs that may preempt v (worded by priority when every policy is the default, ``plain``);
    ``tail`` is the reason after the gang."""
    beside = f" within capacity and quota beside the new pods of priority above {v} (the rest went to gangs of its "
    beside += "priority or lower)"
    node = f"node n0 loses pods of gang v (priority {v}) but receives new pods of gang p (priority {p}){tail}"
    return [
        V("preemption", f"gang v (priority {v}) preempted for gang p of priority {p}{tail}", "v"),
        V("preemption", node, "v", "n0"),
        V(
            "preemption",
            "gang v: evicted, but all 1 pods fit back on n0" + (beside if plain else REPRIEVED_BESIDE),
            "v",
        ),
    ]


def policy_row(what: str, policy: dict[str, Any], tail: str | None = None, **settings: Any) -> object:
    """A :func:`policy_case` row: allowed without ``tail``, else refused for that reason."""
    p, v = settings.get("p", 0), settings.get("v", 0)
    expected = refused(tail, p, v, plain=not policy) if tail else []
    return case(what, lambda: policy_case(policy, **settings), *expected)


QUEUE_POLICIES = [
    policy_row("lender reclaims at equal priority", RECLAIM_ANY),
    policy_row("lender reclaims a higher priority", RECLAIM_ANY, v=7),
    policy_row("lender reclaims a gang that also asks for an unlimited resource", RECLAIM_ANY, cpu=4),
    policy_row(
        "reclaim lower_priority at equal priority",
        {"other_queues": "never"},
        " reclaiming for queue a under reclaim_within_cohort lower_priority",
    ),
    policy_row(
        "reclaim never, other_queues never",
        {"reclaim_within_cohort": "never", "other_queues": "never"},
        " reclaiming for queue a under reclaim_within_cohort never",
        p=5,
    ),
    policy_row("victim queue within nominal", RECLAIM_ANY, " of queue a" + NOT_BORROWING, nom_b=8, cpu=4),
    policy_row(
        "other_queues never, victim queue within nominal, higher",
        {"other_queues": "never"},
        " of queue a" + NOT_BORROWING,
        nom_b=8,
        p=5,
    ),
    policy_row("victim queue in no cohort", RECLAIM_ANY, " of queue a" + NOT_BORROWING, cohort_b=None),
    policy_row("other queue at lower priority by default", {}, nom_b=8, p=5),
    policy_row("other queue at equal priority by default", {}, ", not strictly higher", nom_b=8),
    policy_row("other queue in no cohort at equal priority by default", {}, ", not strictly higher", cohort_b=None),
    policy_row("borrowing cohort peer at lower priority by default", {}, p=5),
    policy_row(
        "within_queue never",
        {"within_queue": "never"},
        " of its own queue a, whose policy within_queue is never",
        victim_queue="a",
        p=5,
    ),
    policy_row(
        "same queue equal priority with reclaim any",
        {"reclaim_within_cohort": "any"},
        ", not strictly higher",
        victim_queue="a",
    ),
    policy_row(
        "borrowing preemptor, equal priority",
        RECLAIM_ANY,
        " of queue a, which ends above its nominal gpu (it borrows), under borrow_within_cohort lower_priority",
        nom_a=0,
    ),
    policy_row(
        "borrowing preemptor, borrow never",
        {"other_queues": "never", "borrow_within_cohort": {"policy": "never"}},
        " of queue a, which ends above its nominal gpu (it borrows), under borrow_within_cohort never",
        nom_a=0,
        p=5,
    ),
    policy_row(
        "borrowing preemptor above threshold",
        {"other_queues": "never", "borrow_within_cohort": {"max_priority_threshold": 2}},
        " of queue a, which ends above its nominal gpu (it borrows), under borrow_within_cohort lower_priority "
        "with max_priority_threshold 2",
        nom_a=0,
        p=5,
        v=3,
    ),
    policy_row(
        "borrowing preemptor at threshold",
        {"other_queues": "never", "borrow_within_cohort": {"max_priority_threshold": 3}},
        nom_a=0,
        p=5,
        v=3,
    ),
    case(
        "reclaim of both gangs of a queue that borrows one",
        over_reclaim,
        *(
            v
            for g, a, n in (("b1", "a1", "n0"), ("b2", "a2", "n1"))
            for v in (
                V(
                    "preemption",
                    f"gang {g} (priority 0) preempted for gang {a} of priority 0 of queue a" + NOT_BORROWING,
                    g,
                ),
                V(
                    "preemption",
                    f"node {n} loses pods of gang {g} (priority 0) but receives new pods of gang {a} (priority 0) of "
                    "queue a" + NOT_BORROWING,
                    g,
                    n,
                ),
                V(
                    "preemption",
                    f"gang {g}: evicted, but all 1 pods fit back on {n} within capacity and quota beside the new pods "
                    "of the gangs that may preempt it (the rest went to gangs that may not)",
                    g,
                ),
            )
        ),
    ),
    case(
        "reclaim of one gang of a queue that borrows one",
        on(over_reclaim, lambda plan: make_plan(over_reclaim()[0], place={"a1": ["n0"]}, evict={"b1": ["a1"]})),
    ),
]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        *ALL_OR_NOTHING,
        *CAPACITY,
        *ELIGIBILITY,
        *TOPOLOGY,
        *PREEMPTION,
        *QUEUE_POLICIES,
        *QUOTA,
        *STABILITY,
        *CONSISTENCY,
    ],
)
def test_the_validator_reports_exactly(build: Row, expected: list[Violation]) -> None:
    rnd, plan = build()
    assert validate(rnd, plan) == expected
