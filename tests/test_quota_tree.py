"""Cohort trees whose cohorts hold quota (docs/rules.md, rules 5 and 6): scenarios written from
Kueue's documented hierarchical cohorts, every solver through the door and the validator."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gangopt
from gangopt.objective import lexicographic_key, score
from gangopt.quota_tree import CohortTree, quota_rows, row_bounds
from gangopt.schema import Cohort, Plan, Queue, QueuePreemption, Round, Score, Status
from gangopt.solvers import SOLVERS
from gangopt.validation import _cohort_scopes, _Tree, validate
from tests.builders import cluster, make_plan, make_round, pending, running
from tests.strategies import cohort_rounds, examples

GPU = 1000  # milli-units
KUEUE_RECLAIM = QueuePreemption(reclaim_within_cohort="any", other_queues="never")


def solved(rnd: Round, solver: str) -> Plan:
    plan = gangopt.solve(rnd, solver=solver)
    assert validate(rnd, plan) == [], solver
    return plan


# ----------------------------------------------------------------------------- rule 6 scenarios


def _lent_round(own: dict[str, int]) -> Round:
    """Queue a holds no quota of its own (nominal 0) in cohort team (under root org), which
    holds ``own``; two 8-GPU gangs of a wait on an empty 2-node cluster."""
    return make_round(
        cluster(2),
        queues=[Queue(name="a", cohort="team", nominal={"gpu": 0})],
        cohorts=[Cohort(name="org"), Cohort(name="team", parent="org", nominal=own)],
        pending=[pending("a1", gpu=8, queue="a"), pending("a2", gpu=8, queue="a", submit_time=1.0)],
    )


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_cohorts_own_quota_is_lent_to_its_children(solver: str) -> None:
    """Kueue: a Cohort's resourceGroups quota is available to the ClusterQueues below it. With
    8 GPUs on the cohort, exactly one 8-GPU gang of a queue with nominal 0 starts; without
    it, none (the tree's quota is 0)."""
    with_quota = solved(_lent_round({"gpu": 8}), solver)
    if solver != "fifo_first_fit":
        assert len(with_quota.admitted) == 1
    assert solved(_lent_round({}), solver).admitted == []


def test_the_validator_reads_the_cohorts_quota_at_its_level() -> None:
    rnd = _lent_round({"gpu": 8})
    both = make_plan(rnd, place={"a1": ["n0"], "a2": ["n1"]})
    assert [v.message for v in validate(rnd, both) if v.rule == "quota"] == ["cohort org: gpu 16 > limit 8"]
    assert validate(rnd, make_plan(rnd, place={"a1": ["n0"]})) == []


def _middle_limit_round(limit: dict[str, int]) -> Round:
    """Root org; cohort lend holds queue l (nominal 16, idle); cohort mid (nominal 0 of its own,
    ``limit`` as borrowing limit) holds queue b (nominal 0) with two 8-GPU gangs waiting."""
    return make_round(
        cluster(2),
        queues=[
            Queue(name="l", cohort="lend", nominal={"gpu": 16}),
            Queue(name="b", cohort="mid", nominal={"gpu": 0}),
        ],
        cohorts=[
            Cohort(name="org"),
            Cohort(name="lend", parent="org"),
            Cohort(name="mid", parent="org", nominal={"gpu": 0}, borrowing_limit=limit),
        ],
        pending=[pending("b1", gpu=8, queue="b"), pending("b2", gpu=8, queue="b", submit_time=1.0)],
    )


@pytest.mark.parametrize("solver", [s for s in SOLVERS if s != "fifo_first_fit"])
def test_a_borrowing_limit_at_a_middle_level_stops_a_borrower(solver: str) -> None:
    """Kueue: a Cohort's borrowingLimit caps what its subtree takes from its parent. b may
    borrow l's idle 16 GPUs through the root, but mid lets its subtree borrow only 8."""
    assert len(solved(_middle_limit_round({"gpu": 8}), solver).admitted) == 1
    assert len(solved(_middle_limit_round({}), solver).admitted) == 2


def test_the_validator_names_the_middle_limit() -> None:
    rnd = _middle_limit_round({"gpu": 8})
    both = make_plan(rnd, place={"b1": ["n0"], "b2": ["n1"]})
    messages = [v.message for v in validate(rnd, both) if v.rule == "quota"]
    assert messages == ["cohort mid (quota + borrowing limit): gpu 16 > limit 8"]


def _lending_round(lending: dict[str, int]) -> Round:
    """Root org; cohort keep (``lending`` as lending limit) holds queue k (nominal 8, idle);
    cohort other holds queue o (nominal 0) with an 8-GPU gang waiting."""
    return make_round(
        cluster(2),
        queues=[
            Queue(name="k", cohort="keep", nominal={"gpu": 8}),
            Queue(name="o", cohort="other", nominal={"gpu": 0}),
        ],
        cohorts=[
            Cohort(name="org"),
            Cohort(name="keep", parent="org", nominal={"gpu": 0}, lending_limit=lending),
            Cohort(name="other", parent="org"),
        ],
        pending=[pending("o1", gpu=8, queue="o"), pending("k1", gpu=8, queue="k", submit_time=1.0)],
    )


@pytest.mark.parametrize("solver", [s for s in SOLVERS if s != "fifo_first_fit"])
def test_a_lending_limit_keeps_quota_for_the_subtree(solver: str) -> None:
    """Kueue: lendingLimit is the most of a subtree's quota its parent may lend to others. With
    lending limit 0 the other branch's gang waits while the keeper's own starts; without it
    the tree's 8 GPUs go to one of them (greedy: o1, the older gang; Volcano's queue order
    prefers k, the queue below its deserved share)."""
    kept = solved(_lending_round({"gpu": 0}), solver)
    assert kept.admitted == ["k1"]
    lent = solved(_lending_round({}), solver)
    assert len(lent.admitted) == 1
    if solver == "greedy":
        assert lent.admitted == ["o1"]


def test_lending_limits_make_exact_rows() -> None:
    """The rows of a lending-limited child: the parent's limit over the other queues alone and
    over both with the kept part added back (max(0, U_keep - G) as two linear rows)."""
    rows = [r for r in quota_rows(_lending_round({"gpu": 0})) if r.label == "cohort org"]
    # keep's 8 are all kept back (G = 8): the root holds 0 for others, 8 more when k counts
    assert [(r.queues, r.limit) for r in rows] == [(("k", "o"), 8 * GPU), (("o",), 0)]
    tree = CohortTree(_lending_round({"gpu": 2}))
    quotas = (tree.quota("keep", "gpu"), tree.kept("keep", "gpu"), tree.quota("org", "gpu"))
    assert quotas == (8 * GPU, 6 * GPU, 2 * GPU)
    assert tree.usage("org", "gpu", {"k": {"gpu": 7 * GPU}, "o": {"gpu": GPU}}) == 2 * GPU


# ----------------------------------------------------------------------------- ClusterQueue lendingLimit

NO_LIMIT: dict[str, int] = {}


def _queue_lending_round(lending: dict[str, int]) -> Round:
    """Kueue KEP-1224's story: ClusterQueue a (nominal 16, ``lending`` as its lendingLimit) is
    idle; ClusterQueue b (nominal 0) of the same cohort has three 8-GPU workloads waiting on an
    empty 4-node cluster, so all b runs is borrowed from a."""
    return make_round(
        cluster(4),
        queues=[
            Queue(name="a", cohort="all", nominal={"gpu": 16}, lending_limit=lending),
            Queue(name="b", cohort="all", nominal={"gpu": 0}),
        ],
        pending=[pending(f"b{i}", gpu=8, queue="b", submit_time=float(i)) for i in range(3)],
    )


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize(
    ("lending", "borrowed"),
    [(NO_LIMIT, 2), ({"gpu": 16}, 2), ({"gpu": 8}, 1), ({"gpu": 0}, 0)],
    ids=["unset-lends-all", "equal-to-nominal", "lends-half", "lends-nothing"],
)
def test_a_queue_lends_at_most_its_lending_limit(solver: str, lending: dict[str, int], borrowed: int) -> None:
    """Kueue: a ClusterQueue's lendingLimit is the most of its unused nominal quota the cohort
    may lend; nominal - lendingLimit is kept for its own workloads. b borrows 16, 16, 8 and 0
    GPUs of idle a's (lendingLimit 0: the borrower is blocked)."""
    plan = solved(_queue_lending_round(lending), solver)
    if solver == "fifo_first_fit":
        assert len(plan.admitted) <= borrowed
    else:
        assert len(plan.admitted) == borrowed, plan.waiting
    if borrowed < 2 and solver == "greedy":
        assert all(w.code == "quota" for w in plan.waiting), plan.waiting


def test_the_validator_reads_a_queues_lending_limit() -> None:
    """Rule 6 with a ClusterQueue lendingLimit: the cohort's quota is what its queues lend."""
    rnd = _queue_lending_round({"gpu": 8})
    two = make_plan(rnd, place={"b0": ["n0"], "b1": ["n1"]})
    assert [v.message for v in validate(rnd, two) if v.rule == "quota"] == ["cohort all: gpu 16 > limit 8"]
    assert validate(rnd, make_plan(rnd, place={"b0": ["n0"]})) == []


def test_a_queue_lending_limit_makes_exact_rows() -> None:
    """max(0, u_a - G_a) as two rows: the cohort's limit over b alone (what a lends) and over
    both with a's kept part added back; the two readings agree on quota and usage."""
    rnd = _queue_lending_round({"gpu": 6})
    rows = [(r.queues, r.limit) for r in quota_rows(rnd) if r.label == "cohort all"]
    assert rows == [(("a", "b"), 16 * GPU), (("b",), 6 * GPU)]
    tree, theirs = CohortTree(rnd), _Tree(rnd)
    assert (tree.queue_kept("a", "gpu"), tree.quota("all", "gpu")) == (10 * GPU, 6 * GPU)
    for used_a in (0, 9, 12):
        usage = {"a": {"gpu": used_a * GPU}, "b": {"gpu": 4 * GPU}}
        expected = (max(0, used_a - 10) + 4) * GPU
        assert tree.usage("all", "gpu", usage) == expected
        assert theirs.usage("all", "gpu", {q: u["gpu"] for q, u in usage.items()}) == expected


def _queue_reclaim_round(lending: dict[str, int], policy: QueuePreemption, priority: int = 0) -> Round:
    """a (nominal 16, ``lending``) runs a1 (priority 1, not a2's victim) on n1; b (nominal 0)
    borrows 8 of a's lent quota with b1 (priority 0) on n0; a's a2 (8 GPUs, ``priority``) waits;
    n2 is free, so only quota blocks a2."""
    return make_round(
        cluster(3),
        queues=[
            Queue(name="a", cohort="all", nominal={"gpu": 16}, lending_limit=lending, preemption=policy),
            Queue(name="b", cohort="all", nominal={"gpu": 0}),
        ],
        running=[running("a1", ["n1"], gpu=8, queue="a", priority=1), running("b1", ["n0"], gpu=8, queue="b")],
        pending=[pending("a2", gpu=8, queue="a", priority=priority)],
    )


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize(
    ("lending", "policy", "priority", "reclaimed"),
    [
        ({"gpu": 8}, KUEUE_RECLAIM, 0, True),
        (NO_LIMIT, KUEUE_RECLAIM, 0, True),
        ({"gpu": 8}, QueuePreemption(other_queues="never"), 0, False),
        ({"gpu": 8}, QueuePreemption(other_queues="never"), 1, True),
        ({"gpu": 8}, QueuePreemption(reclaim_within_cohort="never", other_queues="never"), 1, False),
    ],
    ids=["any-equal-priority", "no-limit-any", "lower-priority-equal", "lower-priority-higher", "never"],
)
def test_a_lending_queue_reclaims_what_it_lent(
    solver: str, lending: dict[str, int], policy: QueuePreemption, priority: int, reclaimed: bool
) -> None:
    """Kueue: lending does not give quota away. a (within its nominal 16 once a2 starts) takes
    back the 8 GPUs b borrows, as reclaimWithinCohort says: Any at equal priority,
    LowerPriority only for a higher-priority a2, Never not at all. The peers without cohort
    reclaim (Koordinator refuses cross-quota victims, Volcano and Slurm preempt for capacity
    only, FIFO never) leave b1 alone."""
    plan = solved(_queue_reclaim_round(lending, policy, priority), solver)
    if reclaimed and solver in ("cpsat", "greedy", "kueue_like"):
        assert plan.admitted == ["a2"], plan.waiting
        assert [(p.gang, p.kind, p.for_gangs) for p in plan.preemptions] == [("b1", "evict", ["a2"])]
    if not reclaimed:
        assert plan.admitted == [] and plan.preemptions == []


def _kept_round(lending: dict[str, int], borrowed: int) -> Round:
    """a (nominal 16, ``lending``) is idle; b (nominal 0) runs ``borrowed`` 8-GPU gangs, all a
    lends; a's a1 (8 GPUs, equal priority, so no reclaim under the default policy) waits
    with n2 free."""
    return make_round(
        cluster(3),
        queues=[
            Queue(name="a", cohort="all", nominal={"gpu": 16}, lending_limit=lending),
            Queue(name="b", cohort="all", nominal={"gpu": 0}),
        ],
        running=[running(f"b{i}", [f"n{i}"], gpu=8, queue="b") for i in range(borrowed)],
        pending=[pending("a1", gpu=8, queue="a")],
    )


@pytest.mark.parametrize("solver", [s for s in SOLVERS if s != "fifo_first_fit"])
@pytest.mark.parametrize(
    ("lending", "borrowed", "starts"), [({"gpu": 8}, 1, True), (NO_LIMIT, 2, False)], ids=["kept", "lent"]
)
def test_a_kept_quota_is_the_queues_own(solver: str, lending: dict[str, int], borrowed: int, starts: bool) -> None:
    """What a ClusterQueue keeps back is only for its own workloads: with lendingLimit 8, b
    borrows 8 and a's kept 8 count in no cohort, so a1 starts beside b's borrowed work;
    lending all 16, b borrows 16 and a1 waits for the quota b borrows (no equal-priority
    reclaim)."""
    plan = solved(_kept_round(lending, borrowed), solver)
    assert plan.admitted == (["a1"] if starts else [])
    assert plan.preemptions == []


# ----------------------------------------------------------------------------- rule 5 scenarios


def _subtree_reclaim_round(theirs: dict[str, int]) -> Round:
    """Root org; cohort ta holds 8 GPUs of its own for queue a (nominal 0, reclaims at any
    priority); cohort tb (``theirs`` of its own) holds queue b (nominal 0), which runs two
    8-GPU gangs on the 2-node cluster; a's 8-GPU gang of the same priority waits."""
    return _two_branch_round({"gpu": 8}, theirs, KUEUE_RECLAIM, priority=0)


@pytest.mark.parametrize("solver", ["cpsat", "greedy", "kueue_like"])
def test_a_subtree_within_its_quota_reclaims_from_a_borrowing_subtree(solver: str) -> None:
    """Kueue's hierarchical reclaim: ta is within its own 8 GPUs and tb uses 16 with no quota
    of its own, so a (nominal 0) takes 8 back at equal priority. CP-SAT encodes the licence
    and values ta's guarantee (Weights.guarantee in a tree), so it reclaims too and proves it
    (before: no reclaim, a's nominal 0 carried no guarantee value, and no proof)."""
    rnd = _subtree_reclaim_round({})
    plan = solved(rnd, solver)
    assert plan.admitted == ["a1"]
    assert [(p.kind, p.for_gangs) for p in plan.preemptions] == [("evict", ["a1"])]
    if solver == "cpsat":
        assert plan.status == Status.OPTIMAL and "stricter" not in plan.message
        assert lexicographic_key(score(rnd, plan)) >= lexicographic_key(score(rnd, solved(rnd, "greedy")))


NO_BORROWING = QueuePreemption.model_validate(
    {"reclaim_within_cohort": "any", "other_queues": "never", "borrow_within_cohort": {"policy": "never"}}
)
"""Kueue-like reclaim where a borrowing queue reclaims nothing: only a guarantee licenses."""


def _two_branch_round(
    mine: dict[str, int], theirs: dict[str, int], policy: QueuePreemption | None = None, priority: int = 1
) -> Round:
    """Root org; cohort ta (``mine`` of its own) holds queue a (nominal 0); cohort tb
    (``theirs`` of its own) holds queue b (nominal 0), whose two priority-0 8-GPU gangs fill
    the 2-node cluster; a's 8-GPU gang (``priority``, default 1) waits. Every queue has
    ``policy``, by default :data:`NO_BORROWING`: only a cohort reclaim licenses a victim in the
    other branch, and only while a is within its guarantee."""
    policy = policy or NO_BORROWING
    return make_round(
        cluster(2),
        queues=[
            Queue(name="a", cohort="ta", nominal={"gpu": 0}, preemption=policy),
            Queue(name="b", cohort="tb", nominal={"gpu": 0}, preemption=policy),
        ],
        cohorts=[
            Cohort(name="org"),
            Cohort(name="ta", parent="org", nominal=mine),
            Cohort(name="tb", parent="org", nominal=theirs),
        ],
        running=[running("b1", ["n0"], gpu=8, queue="b"), running("b2", ["n1"], gpu=8, queue="b")],
        pending=[pending("a1", gpu=8, queue="a", priority=priority)],
    )


TREE_RECLAIMS = [
    # (ta's own quota, tb's own quota, whether a1 may take one of b's gangs)
    ({"gpu": 8}, {}, True),  # ta ends within its 8 (a's guarantee); tb holds none: b borrows
    ({"gpu": 8}, {"gpu": 8}, True),  # tb is at 16 > 8 with the victim back: above its quota
    ({"gpu": 8}, {"gpu": 16}, False),  # tb within its own 16: its subtree is guaranteed
    ({"gpu": 4}, {}, False),  # ta would end at 8 > 4: a borrows, and borrowing reclaims nothing
    ({}, {}, False),  # no cohort quota on a's side: a (nominal 0) borrows
]


@pytest.mark.parametrize(("mine", "theirs", "reclaims"), TREE_RECLAIMS)
def test_cpsat_reads_the_cohort_quotas_on_both_paths(
    mine: dict[str, int], theirs: dict[str, int], reclaims: bool
) -> None:
    """Rule 5, clause 3 through quota-holding cohorts, table-driven: the validator accepts the
    reclaim exactly in the rows that say so, and CP-SAT's model, which encodes both tree
    conditions on its own usage, makes the same choice and proves it (before, these licences
    were left out of the model: no reclaim, no proof)."""
    rnd = _two_branch_round(mine, theirs)
    reclaim = make_plan(rnd, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
    assert (validate(rnd, reclaim) == []) is reclaims, validate(rnd, reclaim)
    plan = solved(rnd, "cpsat")
    assert plan.status == Status.OPTIMAL, plan.message
    assert plan.admitted == (["a1"] if reclaims else [])
    assert [p.kind for p in plan.preemptions] == (["evict"] if reclaims else [])
    assert lexicographic_key(score(rnd, plan)) >= lexicographic_key(score(rnd, solved(rnd, "greedy")))


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_cohorts_own_quota_guarantees_its_subtree(solver: str) -> None:
    """tb holds 16 GPUs of its own: b's gangs run within their subtree's guarantee, so no queue
    outside tb reclaims them (though b is above its own nominal of 0)."""
    rnd = _subtree_reclaim_round({"gpu": 16})
    plan = solved(rnd, solver)
    assert plan.admitted == [] and plan.preemptions == []


def test_the_validator_refuses_reclaim_from_a_guaranteed_subtree() -> None:
    for theirs, refused in (({"gpu": 16}, True), ({}, False)):
        rnd = _subtree_reclaim_round(theirs)
        plan = make_plan(rnd, place={"a1": ["n0"]}, evict={"b1": ["a1"]})
        rules = {v.rule for v in validate(rnd, plan)}
        assert ("preemption" in rules) is refused, (theirs, validate(rnd, plan))


# ----------------------------------------------------------------------------- properties


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohort_rounds(cohort_quotas=True))
def test_every_solver_is_valid_and_cpsat_never_worse_on_trees_with_cohort_quotas(rnd: Round) -> None:
    """Trees whose cohorts hold quota, limits and weights at random: every solver's plan
    validates; CP-SAT's is never worse than greedy's; its bounds bound its own plan, and every
    plan's top tier; a plan claimed optimal has no better plan among the others."""
    plan = gangopt.solve(rnd)
    assert validate(rnd, plan) == []
    mine = lexicographic_key(score(rnd, plan))
    assert all(t.value <= t.bound + 1e-9 for t in plan.score.tiers)
    if plan.score.secondary_bound is not None:
        assert plan.score.secondary <= plan.score.secondary_bound + 1e-9
    bound = {t.priority: t.bound for t in plan.score.tiers}
    for name in SOLVERS:
        if name == "cpsat":
            continue
        other_plan = gangopt.solve(rnd, solver=name)
        assert validate(rnd, other_plan) == [], name
        other = score(rnd, other_plan)
        if name == "greedy" or plan.status == Status.OPTIMAL:
            assert mine >= lexicographic_key(other) or _close(mine, other), name
        if other.tiers:
            top = other.tiers[0]
            assert top.value <= bound.get(top.priority, top.value) + 1e-9, name


def _close(mine: tuple[float, ...], other: Score) -> bool:
    """Equal up to float noise (the secondary term is a sum of scaled floats)."""
    theirs = lexicographic_key(other)
    return len(mine) == len(theirs) and all(abs(a - b) <= 1e-6 for a, b in zip(mine, theirs, strict=True))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohort_rounds(cohort_quotas=True))
def test_a_tree_without_cohort_quotas_reads_as_its_flattened_root(rnd: Round) -> None:
    """Rule 6 without cohort quotas: the tree's rows are the flattened root's (one per root
    and resource over every queue of the tree), whatever the tree's shape."""
    bare = rnd.model_copy(update={"cohorts": [Cohort(name=c.name, parent=c.parent) for c in rnd.cohorts]})
    roots = bare.cohort_roots
    flat = bare.model_copy(
        update={"queues": [q.model_copy(update={"cohort": roots[q.name]}) for q in bare.queues], "cohorts": []}
    )
    assert {(r.queues, r.resource, r.limit) for r in quota_rows(bare)} == {
        (r.queues, r.resource, r.limit) for r in quota_rows(flat)
    }


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohort_rounds(cohort_quotas=True), st.lists(st.integers(0, 24), min_size=3, max_size=3))
def test_the_rows_and_the_validators_tree_agree(rnd: Round, used: list[int]) -> None:
    """The two readings of rule 6 (the optimizer's rows, the validator's recursive maxima) give
    every cohort the same quota and usage, and a usage breaks some row of a cohort exactly when
    it breaks the validator's limit of that cohort (no usage before the round: no tolerance)."""
    usage = {q.name: {"gpu": GPU * n} for q, n in zip(rnd.queues, used, strict=False)}
    tree, theirs = CohortTree(rnd), _Tree(rnd)
    for name in tree.spec:
        assert tree.quota(name, "gpu") == theirs.quota(name, "gpu"), name
        assert tree.usage(name, "gpu", usage) == theirs.usage(name, "gpu", {q: u["gpu"] for q, u in usage.items()})
    broken_rows = {
        row.label
        for row in quota_rows(rnd)
        if row.label.startswith("cohort ") and sum(usage.get(q, {}).get("gpu", 0) for q in row.queues) > row.limit
    }
    broken_scopes = {
        scope.label.split(" (")[0]
        for scope in _cohort_scopes(rnd)
        if scope.measure is not None and scope.measure({q: u["gpu"] for q, u in usage.items()}) > scope.limit
    }
    assert broken_rows == broken_scopes


def _usage_after(rnd: Round, plan: Plan) -> dict[str, dict[str, int]]:
    """Per queue and resource, the requests of kept running pods and new pods."""
    gone = {pod for p in plan.preemptions for pod in p.pods}
    specs = {g.name: g for g in [*rnd.pending, *rnd.running]}
    out: dict[str, dict[str, int]] = {}

    def add(gang: str, role: str) -> None:
        spec = specs[gang]
        used = out.setdefault(spec.queue, {})
        for res, amount in next(r for r in spec.roles if r.name == role).requests.items():
            used[res] = used.get(res, 0) + amount

    for g in rnd.running:
        for pod in g.pods:
            if pod.name not in gone:
                add(g.name, pod.role)
    for p in plan.placements:
        add(p.gang, p.role)
    return out


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohort_rounds(cohort_quotas=True))
def test_a_queue_within_its_nominal_never_loses_work_to_another_queues_reclaim(rnd: Round) -> None:
    """Issue 15's guarantee on trees whose cohorts hold quota: whenever a gang of another queue
    preempts a victim by a cohort reclaim (not by strictly higher priority under
    other_queues lower_priority), the victim's queue is above its nominal with the victim's
    lost pods back, on a resource they request — whatever the solver."""
    queues = {q.name: q for q in rnd.queues}
    specs = {g.name: g for g in [*rnd.pending, *rnd.running]}
    for name in SOLVERS:
        plan = gangopt.solve(rnd, solver=name, annotate=False)
        after = _usage_after(rnd, plan)
        for pre in plan.preemptions:
            victim = specs[pre.gang]
            lost: dict[str, int] = {}
            for pod in victim.pods:  # type: ignore[union-attr]  # a running gang
                if pod.name in pre.pods:
                    for res, a in next(r for r in victim.roles if r.name == pod.role).requests.items():
                        lost[res] = lost.get(res, 0) + a
            theirs = queues[victim.queue]
            for gang in pre.for_gangs:
                mine = specs[gang]
                if mine.queue == victim.queue:
                    continue
                if mine.priority > victim.priority and queues[mine.queue].preemption.other_queues == "lower_priority":
                    continue
                used = after.get(victim.queue, {})
                assert any(used.get(r, 0) + a > theirs.nominal[r] for r, a in lost.items() if r in theirs.nominal), (
                    name,
                    pre,
                    gang,
                )


REPAIRED = (
    "left waiting so that a running gang",
    "searched again after the repair",
    "lost a cohort reclaim's licence in its repair",
)
"""The notes of CP-SAT's known blind spot (rule 5's quota form, repaired after the search; a
repair that voids a cohort reclaim returns the warm start, which CP-SAT's bounds then bound)."""


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cohort_rounds(cohort_quotas=True))
def test_cpsat_proves_its_plan_on_trees_with_cohort_quotas(rnd: Round) -> None:
    """Cohort reclaims through quota-holding cohorts are encoded exactly: CP-SAT's plan is
    valid, never worse than greedy's tier by tier, within its bounds, and proven optimal unless
    its answer was repaired (rule 5's quota form). Measured on 150 seeded rounds: 89 optimal
    with the tree licences left out of the model, 104 with them encoded, 150 once rule 6's
    rows under lending limits read the tolerance at the cohort (``quota_tree.row_bounds``)."""
    plan = gangopt.solve(rnd)
    assert validate(rnd, plan) == []
    mine = score(rnd, plan)
    assert all(t.value <= t.bound + 1e-9 for t in plan.score.tiers)
    if plan.score.secondary_bound is not None:
        assert plan.score.secondary <= plan.score.secondary_bound + 1e-9
    greedy = score(rnd, solved(rnd, "greedy"))
    assert lexicographic_key(mine) >= lexicographic_key(greedy) or _close(lexicographic_key(mine), greedy)
    if plan.status != Status.OPTIMAL:
        assert any(note in plan.message for note in REPAIRED), (plan.status, plan.message)


def _over_before_round(extra_node: bool) -> Round:
    """k (nominal 8) runs 16 GPUs in cohort keep, which lends nothing (lending limit 0): the
    root org counts 16 - 8 = 8 of it against a limit of 0, over before the round. o (nominal
    0) has o1 (8 GPUs) waiting; with ``extra_node`` a free node, else only k's."""
    return make_round(
        cluster(3 if extra_node else 2),
        queues=[
            Queue(name="k", cohort="keep", nominal={"gpu": 8}),
            Queue(name="o", cohort="other", nominal={"gpu": 0}),
        ],
        cohorts=[
            Cohort(name="org"),
            Cohort(name="keep", parent="org", nominal={"gpu": 0}, lending_limit={"gpu": 0}),
            Cohort(name="other", parent="org"),
        ],
        running=[running("k1", ["n0"], gpu=8, queue="k"), running("k2", ["n1"], gpu=8, queue="k")],
        pending=[pending("o1", gpu=8, queue="o")],
    )


def test_row_bounds_read_the_tolerance_at_the_node() -> None:
    """Rule 6 tolerates org's usage up to its 8 before the round however it is made up; the
    rows (o alone <= 0, k and o <= 8) each get org's excess of 8, so o alone may reach 8 only
    if k's 16 drop by 8. Before, each row tolerated its own sum (o alone: 0), stricter than
    the rule, and CP-SAT claimed no proof."""
    rnd = _over_before_round(extra_node=True)
    rows = [r for r in quota_rows(rnd) if r.label == "cohort org"]
    assert [(r.queues, r.limit) for r in rows] == [(("k", "o"), 8 * GPU), (("o",), 0)]
    before = [16 * GPU, 0]
    nodes = [(row.label, row.resource) for row in rows]
    assert row_bounds([row.limit for row in rows], nodes, before) == [16 * GPU, 8 * GPU]
    assert row_bounds([5, 3], ["a", "b"], [7, 1]) == [7, 3]  # one row per node: max(limit, before)
    plan = solved(rnd, "cpsat")
    assert plan.status == Status.OPTIMAL and plan.admitted == []
    # o1 on the free node raises org to 16: refused by rule and rows alike
    assert {v.rule for v in validate(rnd, make_plan(rnd, place={"o1": ["n2"]}))} == {"quota"}


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_a_preemption_the_tolerance_does_not_need_is_not_made(solver: str) -> None:
    """With k's over-use tolerated at org, o1 (priority 1, may preempt k's priority-0 work by
    other_queues) starting on k1's node needs k1 gone for capacity only: org's usage stays at
    its 8 before the round (k keeps 8 of its own, o adds 8), which every solver reads as the
    validator does.
    Each-row tolerance made greedy and kueue_like also count quota that was not needed and
    fail validation on such rounds (the nightly tree property)."""
    rnd = _over_before_round(extra_node=False).model_copy(
        update={"pending": [pending("o1", gpu=8, queue="o", priority=1)]}
    )
    plan = solved(rnd, solver)
    if solver not in ("fifo_first_fit", "slurm_backfill_like", "volcano_like", "koordinator_like"):
        assert plan.admitted == ["o1"] and len(plan.preemptions) == 1
