"""The round-level counts of gangopt.arrays that the solve asks for repeatedly: computed once
per round, and again when a copy of the round replaces its running gangs."""

from __future__ import annotations

from gangopt import arrays
from tests.builders import cluster, make_round, pending, running


def test_running_pods_are_counted_and_named_as_the_gangs_list_them() -> None:
    rnd = make_round(
        cluster(4),
        running=[running("a", ["n0", "n1"]), running("b", ["n2"], gpu=2), running("c", ["n3", "n3", "n3"])],
        pending=[pending("p", 2)],
    )
    names = {pod.name for g in rnd.running for pod in g.pods}
    assert arrays.running_pod_count(rnd) == 6 == sum(len(g.pods) for g in rnd.running)
    assert arrays.running_pod_names(rnd) == names
    assert arrays.running_pod_names(rnd) is arrays.running_pod_names(rnd)  # kept on the round


def test_a_copy_with_other_running_gangs_counts_them_not_the_originals() -> None:
    rnd = make_round(cluster(4), running=[running("a", ["n0", "n1"]), running("b", ["n2"])])
    assert arrays.running_pod_count(rnd) == 3
    fewer = rnd.model_copy(update={"running": rnd.running[:1]})
    assert arrays.running_pod_count(fewer) == 2
    assert arrays.running_pod_names(fewer) == {"a-worker-0", "a-worker-1"}
    same = rnd.model_copy(update={"policy": rnd.policy.model_copy(update={"preemption": False})})
    assert arrays.running_pod_count(same) == 3
    none = rnd.model_copy(update={"running": []})
    assert arrays.running_pod_count(none) == 0
    assert arrays.running_pod_names(none) == frozenset()
