"""The size guard: the model's size estimated before it is built, and the build budget.

``estimated_variables`` counts, from the prefilter's fit table, the (role, class) pairs where
a pod fits: the model's pod-count variables ``x``. The stated factor: exact on rounds whose
classes the encoder keeps whole; at most the estimate on rounds with a required level (the
encoder leaves out domains the prefilter ruled out); at most the estimate times the largest
class on rounds whose pattern classes the encoder splits into one-node classes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gangopt.prefilter import prefilter
from gangopt.schema import Round
from gangopt.solvers.cpsat.encoding import MAX_PATTERNS, encode
from gangopt.solvers.cpsat.guard import BUILD_SECONDS_PER_VARIABLE, BUILD_SHARE, build_budget, estimated_variables
from tests.builders import cluster, make_round, pending, running
from tests.solvers.cpsat.probe import busy_round


@pytest.mark.parametrize(("seed", "nodes"), [(3, 16), (5, 32), (7, 64)])
def test_the_estimate_is_the_number_of_pod_count_variables_built(seed: int, nodes: int) -> None:
    """Busy rounds (preemption candidates, growers, some required racks): the estimate is
    len(x) and the pairs outside a gang's feasible domains (no x there: the estimate's only
    overcount, see the next test), and the pod counts are the bulk of the model (at least
    half its variables). Seed 7 has such pairs since the prefilter holds gangs that may
    preempt no one to the free room: fewer racks hold them."""
    pre = prefilter(busy_round(seed, nodes))
    enc = encode(pre)
    outside = 0
    for key, fit in pre.fits.items():
        topo = pre.rnd.pending[key.gang].topology if key.kind == "pending" and key.gang in pre.pending else None
        if topo is not None and topo.required is not None:
            feasible = pre.required_domains.get(key.gang, [])
            outside += sum(
                1 for k in np.flatnonzero(fit > 0).tolist() if pre.classes[k].domains[topo.required] not in feasible
            )
    assert estimated_variables(pre) == len(enc.x) + outside
    assert len(enc.x) >= len(enc.model.proto.variables) / 2


def test_domains_ruled_out_make_the_model_smaller_than_estimated() -> None:
    """Required level: classes outside the gang's feasible domains get no x, so the estimate
    is an upper bound (here 8 pairs, 6 variables)."""
    rnd = make_round(
        cluster(8, gpus=8, racks=4),
        running=[running("fixed", ["n2"], gpu=4, preemptible=False)],
        pending=[pending("g", replicas=2, gpu=8, required="rack"), pending("h", replicas=2, gpu=8, required="rack")],
    )
    pre = prefilter(rnd)
    enc = encode(pre)
    assert pre.required_domains[0] == ["r0", "r2", "r3"]
    assert estimated_variables(pre) == 8
    assert len(enc.x) == 6


def many_shapes_round() -> Round:
    """Seven pod shapes on four 64-GPU nodes: more than MAX_PATTERNS ways to fill a node."""
    return make_round(
        cluster(4, gpus=64), pending=[pending(f"g{s}", replicas=2, gpu=s) for s in (1, 2, 3, 5, 7, 11, 13)]
    )


def test_a_split_pattern_class_grows_the_model_by_at_most_its_size() -> None:
    """Pattern classes split into one-node classes: len(x) ≤ estimate x largest class (here
    one class of four nodes becomes four classes, 7 estimated, 28 built)."""
    pre = prefilter(many_shapes_round())
    enc = encode(pre)
    assert len(pre.classes) == 1 and len(enc.classes) == 4
    assert all(not cm.patterns or len(cm.patterns) <= MAX_PATTERNS for cm in enc.classes)
    largest = max(c.size for c in pre.classes)
    assert estimated_variables(pre) == 7
    assert estimated_variables(pre) <= len(enc.x) <= estimated_variables(pre) * largest
    assert len(enc.x) == 28


def test_the_estimate_counts_only_gangs_the_model_keeps() -> None:
    """Pruned gangs (too big for the cluster) and running gangs that cannot grow count nothing."""
    rnd = make_round(
        cluster(2, gpus=8),
        running=[running("rigid", ["n0"], gpu=2), running("elastic", ["n0"], gpu=2, replicas=3, min_replicas=1)],
        pending=[pending("fits", gpu=4), pending("too-big", replicas=3, gpu=8)],
    )
    pre = prefilter(rnd)
    assert "too-big" in pre.pruned
    enc = encode(pre)
    assert estimated_variables(pre) == len(enc.x) == 2 + 2  # fits and elastic, on n0 and n1


def test_build_budget_is_half_the_time_limit_over_the_cost_per_variable() -> None:
    """build_budget(t) = int(BUILD_SHARE · t / BUILD_SECONDS_PER_VARIABLE): 0.5 · 10 / 3.5e-5 =
    142,857 variables for 10 s (142,857.14), 14,285 for 1 s, 285,714 for 20 s."""
    assert (BUILD_SHARE, BUILD_SECONDS_PER_VARIABLE) == (0.5, 3.5e-5)
    assert build_budget(10.0) == 142_857
    assert build_budget(1.0) == 14_285
    assert build_budget(0.1) == 1_428
    assert build_budget(20.0) == 285_714  # int() of 285,714.28...
