"""Round loading: every rule that rejects a round names the JSON path of the offending field.

One table row per rule of :mod:`gangopt.checks` (cross-field rules) and per schema-level rule
(pydantic field constraints), each applied to one small valid round and loaded through the
public entry point, :func:`gangopt.load_round` on a file. Each row states the exact list of
problems expected: the path, and the message as a regex.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gangopt
from gangopt.checks import check_round
from gangopt.errors import InputError
from gangopt.parsing import parse_json, parse_model
from gangopt.quantities import human
from gangopt.schema import MAX_REPLICAS, Round

Json = dict[str, Any]


def base() -> Json:
    """A valid round that touches every checked field: two levels, a queue in a cohort, a
    running elastic gang and a pending gang with a topology request."""
    return {
        "cluster": {
            "topology_levels": ["block", "rack"],
            "nodes": [
                {"name": "n0", "capacity": {"gpu": 8, "cpu": 32}, "topology": {"block": "b0", "rack": "r0"}},
                {"name": "n1", "capacity": {"gpu": 8, "cpu": 32}, "topology": {"block": "b0", "rack": "r1"}},
                {"name": "n2", "capacity": {"gpu": 8, "cpu": 32}, "topology": {"block": "b1", "rack": "r2"}},
            ],
        },
        "queues": [{"name": "team", "cohort": "all", "nominal": {"gpu": 16}}, {"name": "solo"}],
        "running": [
            {
                "name": "run",
                "queue": "team",
                "roles": [{"name": "worker", "replicas": 3, "min_replicas": 1, "requests": {"gpu": 4}}],
                "pods": [{"name": "run-0", "role": "worker", "node": "n0"}],
            }
        ],
        "pending": [
            {
                "name": "job",
                "queue": "solo",
                "roles": [
                    {"name": "launcher", "replicas": 1, "requests": {"cpu": 1}},
                    {"name": "worker", "replicas": 4, "requests": {"gpu": 2}},
                ],
                "topology": {"required": "block"},
            }
        ],
    }


def load(tmp_path: Path, data: Json) -> Round:
    path = tmp_path / "round.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return gangopt.load_round(path)


def problems_of(tmp_path: Path, data: Json) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as caught:
        load(tmp_path, data)
    return [(p.path, p.message) for p in caught.value.problems]


Edit = Callable[[Json], None]


def setter(path: str, value: Any) -> Edit:
    """An edit that sets ``path`` (dots and [i] as in the error paths, without ``$.``)."""
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]

    def edit(data: Json) -> None:
        target: Any = data
        for part in parts[:-1]:
            target = target[part]
        target[parts[-1]] = value

    return edit


def deleter(path: str) -> Edit:
    parts = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]

    def edit(data: Json) -> None:
        target: Any = data
        for part in parts[:-1]:
            target = target[part]
        del target[parts[-1]]

    return edit


def edits(*steps: Edit) -> Edit:
    def edit(data: Json) -> None:
        for step in steps:
            step(data)

    return edit


def add_pod(name: str, node: str, role: str = "worker", gang: int = 0) -> Edit:
    def edit(data: Json) -> None:
        data["running"][gang]["pods"].append({"name": name, "role": role, "node": node})

    return edit


def pending_topology(**topology: Any) -> Edit:
    return setter("pending[0].topology", topology)


# (id, edit, [(path, message regex), ...]): the exact problems, in the order they are reported.
CHECK_RULES: list[tuple[str, Edit, list[tuple[str, str]]]] = [
    # -- cluster
    (
        "node level listed",
        edits(
            setter("cluster.topology_levels", ["block", "rack", "node"]),
            *(setter(f"cluster.nodes[{i}].topology.node", f"n{i}") for i in range(3)),
        ),
        [("$.cluster.topology_levels[2]", r"^'node' is implicit; do not list it$")],
    ),
    (
        "level listed twice",
        setter("cluster.topology_levels", ["block", "rack", "rack"]),
        [
            ("$.cluster.topology_levels", r"^level 'rack' listed 2 times$"),
            # a node's rack is then at depths 1 and 2, under two different paths: the tree rule fires too
            *(
                (
                    f"$.cluster.nodes[{i}].topology.rack",
                    rf"^domain 'r{i}' at level 'rack' sits under \('b{i // 2}',\) and",
                )
                for i in range(3)
            ),
        ],
    ),
    (
        "duplicate node name",
        setter("cluster.nodes[2].name", "n1"),
        [("$.cluster.nodes[2].name", r"^duplicate node name 'n1' \(first at index 1\)$")],
    ),
    (
        "unknown level on a node",
        setter("cluster.nodes[1].topology.zone", "z0"),
        [
            (
                "$.cluster.nodes[1].topology.zone",
                r"^unknown topology level 'zone' \(levels: \['block', 'rack'\]\)$",
            )
        ],
    ),
    (
        "node without a domain at a level",
        deleter("cluster.nodes[2].topology.rack"),
        [("$.cluster.nodes[2].topology", r"^node 'n2' has no domain at level 'rack'$")],
    ),
    (
        "domain under two parents",
        setter("cluster.nodes[2].topology.rack", "r1"),
        [
            (
                "$.cluster.nodes[2].topology.rack",
                r"^domain 'r1' at level 'rack' sits under \('b0',\) and \('b1',\)$",
            )
        ],
    ),
    # -- cohort trees
    (
        "cohort with an undeclared parent",
        setter("cohorts", [{"name": "gpu", "parent": "org"}]),
        [("$.cohorts[0].parent", r"^unknown cohort 'org' \(declare it in cohorts\)$")],
    ),
    (
        "cohort cycle",
        setter("cohorts", [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]),
        [("$.cohorts[0].parent", r"^cohort 'a' is its own ancestor \(a cycle\)$")],
    ),
    (
        "duplicate cohort name",
        setter("cohorts", [{"name": "a"}, {"name": "a"}]),
        [("$.cohorts[1].name", r"^duplicate cohort name 'a' \(first at index 0\)$")],
    ),
    (
        "borrowing limit on a root cohort",
        setter("cohorts", [{"name": "org", "nominal": {"gpu": 4}, "borrowing_limit": {"gpu": 2}}]),
        [("$.cohorts[0].borrowing_limit", r"^cohort 'org' has no parent to borrow from or lend to$")],
    ),
    (
        "lending limit of a resource the cohort does not list",
        setter("cohorts", [{"name": "org"}, {"name": "gpu", "parent": "org", "lending_limit": {"gpu": 2}}]),
        [("$.cohorts[1].lending_limit.gpu", r"^'gpu' is not in the cohort's nominal \(list it there; 0 holds")],
    ),
    (
        "more lending limits than the rows allow",
        setter(
            "cohorts",
            [{"name": "org"}]
            + [
                {"name": f"c{i}", "parent": "org", "nominal": {"gpu": 0}, "lending_limit": {"gpu": 0}}
                for i in range(9)
            ],
        ),
        [("$.cohorts[9].lending_limit", r"^at most 8 queues and cohorts may set a lending limit$")],
    ),
    (
        "queue lending limits count toward the same bound",
        lambda data: (
            data["queues"].extend(
                {"name": f"q{i}", "cohort": "all", "nominal": {"gpu": 1}, "lending_limit": {"gpu": 0}} for i in range(8)
            ),
            data["queues"][0].update(lending_limit={"gpu": 8}),
        ),
        [("$.queues[9].lending_limit", r"^at most 8 queues and cohorts may set a lending limit$")],
    ),
    (
        "queue lending limit above its nominal (Kueue: lendingLimit <= nominalQuota)",
        setter("queues[0].lending_limit", {"gpu": "16001m"}),
        [("$.queues[0].lending_limit.gpu", r"^16001m is more than the nominal 16 \(a queue lends at most its nominal")],
    ),
    (
        "queue lending limit of a resource it does not list",
        setter("queues[0].lending_limit", {"cpu": 1}),
        [("$.queues[0].lending_limit.cpu", r"^'cpu' is not in the queue's nominal \(a queue lends only its nominal")],
    ),
    (
        "queue lending limit without a cohort",
        setter("queues[1].lending_limit", {"gpu": 0}),
        [("$.queues[1].lending_limit", r"^queue 'solo' has no cohort to lend to$")],
    ),
    # -- names
    (
        "duplicate queue name",
        lambda data: data["queues"].append({"name": "team"}),
        [("$.queues[2].name", r"^duplicate queue name 'team' \(first at index 0\)$")],
    ),
    (
        "pending gang named like a running gang",
        setter("pending[0].name", "run"),
        [("$.pending[0].name", r"^duplicate gang name 'run' \(also \$\.running\[0\]\)$")],
    ),
    (
        "duplicate pod name",
        add_pod("run-0", "n1"),
        [("$.running[0].pods[1].name", r"^duplicate pod name 'run-0' \(also \$\.running\[0\]\.pods\[0\]\)$")],
    ),
    # -- gangs
    (
        "unknown queue",
        setter("pending[0].queue", "nobody"),
        [("$.pending[0].queue", r"^unknown queue 'nobody' \(queues: \['solo', 'team'\]\)$")],
    ),
    (
        "min_replicas above replicas",
        setter("running[0].roles[0].min_replicas", 4),
        [
            ("$.running[0].roles[0].min_replicas", r"^min_replicas 4 exceeds replicas 3$"),
            # the one running pod is now below the gang minimum of 4, reported too
            ("$.running[0].pods", r"^1 pods running, fewer than the gang minimum 4$"),
        ],
    ),
    (
        "duplicate role name",
        setter("pending[0].roles[1].name", "launcher"),
        [("$.pending[0].roles[1].name", r"^duplicate role name 'launcher' \(first at index 0\)$")],
    ),
    (
        "gang may run with 0 pods",
        edits(
            setter("pending[0].roles[0].min_replicas", 0),
            setter("pending[0].roles[1].min_replicas", 0),
        ),
        [("$.pending[0].min_members", r"^the gang may run with 0 pods: set min_members or a role's min_replicas")],
    ),
    (
        "min_members above replicas",
        setter("pending[0].min_members", 6),
        [("$.pending[0].min_members", r"^min_members 6 exceeds the 5 replicas of its roles$")],
    ),
    (
        "max_members below minimum",
        setter("pending[0].max_members", 4),
        [("$.pending[0].max_members", r"^max_members 4 is below the minimum 5$")],
    ),
    # -- topology requests
    *(
        (
            f"unknown {field} level",
            pending_topology(**{field: "zone"}, **({"slice_size": 1} if field == "slice_level" else {})),
            [
                (
                    f"$.pending[0].topology.{field}",
                    r"^unknown topology level 'zone' \(levels: \['block', 'rack', 'node'\]\)$",
                )
            ],
        )
        for field in ("required", "preferred", "slice_level")
    ),
    (
        "slice level without size",
        pending_topology(slice_level="rack"),
        [("$.pending[0].topology", r"^slice_level and slice_size go together$")],
    ),
    (
        "slice size without level",
        pending_topology(slice_size=2),
        [("$.pending[0].topology", r"^slice_level and slice_size go together$")],
    ),
    (
        "slice level broader than required",
        pending_topology(required="rack", slice_level="block", slice_size=1),
        [("$.pending[0].topology.slice_level", r"^slice level 'block' is broader than required level 'rack'$")],
    ),
    (
        "slice level broader than preferred",
        pending_topology(preferred="node", slice_level="rack", slice_size=1),
        [("$.pending[0].topology.slice_level", r"^slice level 'rack' is broader than preferred level 'node'$")],
    ),
    (
        "no member count is a multiple of the slice size",
        # members: exactly 5 (1 launcher + 4 workers); no multiple of 3 in [5, 5]
        pending_topology(slice_level="rack", slice_size=3),
        [("$.pending[0].topology.slice_size", r"^no member count between 5 and 5 is a multiple of 3$")],
    ),
    (
        "gang of 0 pods with a slice size no count meets",
        edits(
            setter("pending[0].roles[0].min_replicas", 0),
            setter("pending[0].roles[1].min_replicas", 0),
            pending_topology(slice_level="rack", slice_size=7),
        ),
        [
            ("$.pending[0].min_members", r"^the gang may run with 0 pods"),
            # 0 members is no answer: the counts searched start at 1
            ("$.pending[0].topology.slice_size", r"^no member count between 0 and 5 is a multiple of 7$"),
        ],
    ),
    (
        "running gang with an unknown required level",
        setter("running[0].topology", {"required": "row"}),
        [("$.running[0].topology.required", r"^unknown topology level 'row'")],
    ),
    # -- running pods
    (
        "pod on a missing node",
        setter("running[0].pods[0].node", "gone"),
        [("$.running[0].pods[0].node", r"^pod 'run-0' is bound to node 'gone', which does not exist$")],
    ),
    (
        "pod of an unknown role",
        setter("running[0].pods[0].role", "chief"),
        [("$.running[0].pods[0].role", r"^unknown role 'chief' \(roles: \['worker'\]\)$")],
    ),
    (
        "more pods than replicas",
        edits(add_pod("run-1", "n1"), add_pod("run-2", "n2"), add_pod("run-3", "n2")),
        [("$.running[0].roles[0].replicas", r"^4 pods running, more than replicas 3$")],
    ),
    (
        "more pods than the gang maximum",
        edits(add_pod("run-1", "n1"), setter("running[0].max_members", 1)),
        [("$.running[0].max_members", r"^2 pods running, more than the gang maximum 1$")],
    ),
    (
        "a role below its own minimum while the gang total is met",
        edits(
            setter("running[0].min_members", 1),
            setter(
                "running[0].roles",
                [
                    {"name": "worker", "replicas": 3, "min_replicas": 1, "requests": {"gpu": 4}},
                    {"name": "ps", "replicas": 2, "min_replicas": 2, "requests": {"cpu": 1}},
                ],
            ),
            add_pod("run-1", "n1"),
            add_pod("run-2", "n2"),
            add_pod("run-ps", "n1", role="ps"),
        ),
        [("$.running[0].roles[1].min_replicas", r"^1 pods of role 'ps' running, fewer than its minimum 2$")],
    ),
    (
        "fewer pods than the gang minimum",
        setter("running[0].roles[0].min_replicas", 2),
        [("$.running[0].pods", r"^1 pods running, fewer than the gang minimum 2$")],
    ),
    (
        "running pods above node capacity",
        # two 4-GPU pods already fill n1; a third on it asks 12 of 8 GPUs
        edits(
            add_pod("run-1", "n1"),
            add_pod("run-2", "n1"),
            add_pod("run-3", "n1"),
            setter("running[0].roles[0].replicas", 4),
        ),
        [
            (
                "$.cluster.nodes[1].capacity.gpu",
                r"^running pods on node 'n1' request 12 gpu, more than its capacity 8 gpu$",
            )
        ],
    ),
    (
        "a thousandth of a resource the node lacks",
        setter("running[0].roles[0].requests", {"gpu": 4, "rdma": "1m"}),
        [
            (
                "$.cluster.nodes[0].capacity.rdma",
                r"^running pods on node 'n0' request 0\.001 rdma, more than its capacity 0 rdma$",
            )
        ],
    ),
    (
        "running pods ask for a resource the node lacks",
        setter("running[0].roles[0].requests", {"gpu": 4, "memory": "1Gi"}),
        [
            (
                "$.cluster.nodes[0].capacity.memory",
                r"^running pods on node 'n0' request 1Gi memory, more than its capacity 0Gi memory$",
            )
        ],
    ),
]

SCHEMA_RULES: list[tuple[str, Edit, list[tuple[str, str]]]] = [
    (
        "unknown field",
        setter("pending[0].roles[0].replica", 2),
        [("$.pending[0].roles[0].replica", r"^unknown field$")],
    ),
    ("wrong api version", setter("api_version", "gangopt/v2"), [("$.api_version", r"^Input should be 'gangopt/v1'$")]),
    ("missing cluster", deleter("cluster"), [("$.cluster", r"^Field required$")]),
    ("no roles", setter("pending[0].roles", []), [("$.pending[0].roles", r"at least 1 item")]),
    ("no pods", setter("running[0].pods", []), [("$.running[0].pods", r"at least 1 item")]),
    ("empty name", setter("cluster.nodes[0].name", ""), [("$.cluster.nodes[0].name", r"at least 1 character")]),
    (
        "zero replicas",
        setter("pending[0].roles[1].replicas", 0),
        [("$.pending[0].roles[1].replicas", r">= 1|greater than or equal to 1")],
    ),
    (
        "too many replicas",
        setter("pending[0].roles[1].replicas", MAX_REPLICAS + 1),
        [("$.pending[0].roles[1].replicas", rf"less than or equal to {MAX_REPLICAS}")],
    ),
    (
        "negative min_replicas",
        setter("running[0].roles[0].min_replicas", -1),
        [("$.running[0].roles[0].min_replicas", r"greater than or equal to 0")],
    ),
    (
        "zero min_members",
        setter("pending[0].min_members", 0),
        [("$.pending[0].min_members", r"greater than or equal to 1")],
    ),
    (
        "priority above int32",
        setter("pending[0].priority", 2**31),
        [("$.pending[0].priority", r"less than or equal to 2147483647")],
    ),
    (
        "priority below int32",
        setter("pending[0].priority", -(2**31) - 1),
        [("$.pending[0].priority", r"greater than or equal to -2147483648")],
    ),
    (
        "bad quantity",
        setter("cluster.nodes[1].capacity.gpu", "8x"),
        [("$.cluster.nodes[1].capacity.gpu", r"^cannot parse quantity '8x'")],
    ),
    (
        "negative quantity",
        setter("pending[0].roles[1].requests.gpu", -1),
        [("$.pending[0].roles[1].requests.gpu", r"^quantity must not be negative, got -1$")],
    ),
    (
        "sub-milli quantity",
        setter("pending[0].roles[0].requests.cpu", "0.0001"),
        [("$.pending[0].roles[0].requests.cpu", r"finer than one milli-unit")],
    ),
    (
        "boolean quantity",
        setter("cluster.nodes[0].capacity.gpu", True),
        [("$.cluster.nodes[0].capacity.gpu", r"^expected a quantity, got True$")],
    ),
    (
        "taint effect",
        setter("cluster.nodes[0].taints", [{"key": "k", "effect": "Evict"}]),
        [("$.cluster.nodes[0].taints[0].effect", r"NoSchedule")],
    ),
    (
        "toleration operator",
        setter("pending[0].roles[0].tolerations", [{"key": "k", "operator": "In"}]),
        [("$.pending[0].roles[0].tolerations[0].operator", r"'Equal' or 'Exists'")],
    ),
    (
        "affinity operator",
        setter("pending[0].roles[0].node_affinity", [{"key": "k", "operator": "Gt"}]),
        [("$.pending[0].roles[0].node_affinity[0].operator", r"'In', 'NotIn', 'Exists' or 'DoesNotExist'")],
    ),
    (
        "zero slice size",
        pending_topology(slice_level="rack", slice_size=0),
        [("$.pending[0].topology.slice_size", r"greater than or equal to 1")],
    ),
    (
        "negative cohort quota",
        setter("cohorts", [{"name": "org", "nominal": {"gpu": -4}}]),
        [("$.cohorts[0].nominal.gpu", r"^quantity must not be negative, got -4$")],
    ),
    (
        "cohort weight above the cap",
        setter("cohorts", [{"name": "org", "weight": 1e9}]),
        [("$.cohorts[0].weight", r"less than or equal to 1000")],
    ),
    (
        "negative preemption cost",
        setter("running[0].preemption_cost", -1),
        [("$.running[0].preemption_cost", r"greater than or equal to 0")],
    ),
    ("zero time limit", setter("policy", {"time_limit": 0}), [("$.policy.time_limit", r"greater than 0")]),
    ("too many workers", setter("policy", {"workers": 65}), [("$.policy.workers", r"less than or equal to 64")]),
    ("gap limit above 1", setter("policy", {"gap_limit": 1.5}), [("$.policy.gap_limit", r"less than or equal to 1")]),
    (
        "negative weight",
        setter("policy", {"weights": {"spread": -1}}),
        [("$.policy.weights.spread", r"greater than or equal to 0")],
    ),
]


def _assert_problems(found: list[tuple[str, str]], expected: list[tuple[str, str]]) -> None:
    assert [p for p, _ in found] == [p for p, _ in expected], found
    for (path, message), (_, pattern) in zip(found, expected, strict=True):
        assert re.search(pattern, message), (path, message, pattern)


@pytest.mark.parametrize(("edit", "expected"), [pytest.param(e, x, id=i) for i, e, x in CHECK_RULES])
def test_cross_field_rule(tmp_path: Path, edit: Edit, expected: list[tuple[str, str]]) -> None:
    data = base()
    edit(data)
    _assert_problems(problems_of(tmp_path, data), expected)


@pytest.mark.parametrize(("edit", "expected"), [pytest.param(e, x, id=i) for i, e, x in SCHEMA_RULES])
def test_schema_rule(tmp_path: Path, edit: Edit, expected: list[tuple[str, str]]) -> None:
    data = base()
    edit(data)
    _assert_problems(problems_of(tmp_path, data), expected)


def test_every_check_function_has_a_row() -> None:
    """Each ``_check_*`` helper of checks.py is triggered by some row above (a new rule needs one)."""
    import gangopt.checks as checks

    helpers = {name for name in dir(checks) if name.startswith("_check_")}
    assert helpers == {
        "_check_cluster",
        "_check_tree",
        "_check_names",
        "_check_gangs",
        "_check_topology_request",
        "_check_running_pods",
        "_check_cohorts",
        "_check_queue_lending",
    }
    assert len(CHECK_RULES) >= 35


def test_the_base_round_is_valid(tmp_path: Path) -> None:
    rnd = load(tmp_path, base())
    assert check_round(rnd) == []
    assert [g.name for g in rnd.pending] == ["job"] and rnd.running[0].pods[0].node == "n0"
    # the pending gang's minimum is every replica: 1 launcher + 4 workers
    assert rnd.pending[0].minimum == 5 and rnd.running[0].minimum == 1


def test_a_running_gang_exactly_at_capacity_is_valid(tmp_path: Path) -> None:
    data = base()
    add_pod("run-1", "n0")(data)  # two 4-GPU pods: exactly the 8 GPUs of n0
    assert load(tmp_path, data).running[0].pods[1].node == "n0"


def test_slice_sizes_that_some_member_count_meets_are_valid(tmp_path: Path) -> None:
    data = base()
    # elastic: 1..5 members; 4 is a multiple of 2 and 4, 3 of 3
    data["pending"][0]["min_members"] = 1
    for size in (1, 2, 3, 4, 5):
        data["pending"][0]["topology"] = {"slice_level": "rack", "slice_size": size, "required": "block"}
        assert load(tmp_path, data).pending[0].topology is not None
    data["pending"][0]["topology"] = {"slice_level": "rack", "slice_size": 6}
    assert problems_of(tmp_path, data) == [
        ("$.pending[0].topology.slice_size", "no member count between 1 and 5 is a multiple of 6")
    ]


def test_queues_are_optional_and_then_any_queue_name_goes(tmp_path: Path) -> None:
    data = base()
    del data["queues"]
    data["pending"][0]["queue"] = "whatever"
    assert load(tmp_path, data).pending[0].queue == "whatever"


def test_every_problem_is_reported_in_input_order(tmp_path: Path) -> None:
    data = base()
    setter("cluster.nodes[2].name", "n1")(data)
    setter("pending[0].queue", "nobody")(data)
    setter("running[0].pods[0].node", "gone")(data)
    paths = [p for p, _ in problems_of(tmp_path, data)]
    assert paths == ["$.cluster.nodes[2].name", "$.pending[0].queue", "$.running[0].pods[0].node"]


def test_several_field_errors_come_back_together(tmp_path: Path) -> None:
    data = base()
    setter("cluster.nodes[0].capacity.gpu", "lots")(data)
    setter("pending[0].roles[0].extra", 1)(data)
    paths = sorted(p for p, _ in problems_of(tmp_path, data))
    assert paths == ["$.cluster.nodes[0].capacity.gpu", "$.pending[0].roles[0].extra"]


def test_malformed_json_is_a_problem_at_the_root(tmp_path: Path) -> None:
    path = tmp_path / "round.json"
    path.write_text('{"cluster": ', encoding="utf-8")
    with pytest.raises(InputError) as caught:
        gangopt.load_round(path)
    [problem] = caught.value.problems
    assert problem.path == "$"
    assert re.match(r"^malformed JSON: Expecting value at line 1 column 13$", problem.message)
    assert caught.value.source == str(path)


def test_a_missing_file_is_a_problem_at_the_root(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(InputError) as caught:
        gangopt.load_round(path)
    [problem] = caught.value.problems
    assert (problem.path, problem.message) == ("$", f"cannot read {path}: No such file or directory")
    assert str(caught.value).startswith(f"invalid {path}:\n  $: cannot read")


def test_the_other_entry_points_report_the_same_problems(tmp_path: Path) -> None:
    data = base()
    setter("pending[0].max_members", 4)(data)
    from_file = problems_of(tmp_path, data)
    with pytest.raises(InputError) as text:
        parse_json(Round, json.dumps(data))
    with pytest.raises(InputError) as parsed:
        parse_model(Round, copy.deepcopy(data))
    assert [(p.path, p.message) for p in text.value.problems] == from_file
    assert [(p.path, p.message) for p in parsed.value.problems] == from_file
    assert str(parsed.value).splitlines()[1] == "  $.pending[0].max_members: max_members 4 is below the minimum 5"


def test_limits_that_are_met_exactly_are_valid(tmp_path: Path) -> None:
    """Every "exceeds" / "below" rule is strict: a minimum equal to its maximum is fine."""
    data = base()
    job = data["pending"][0]
    job["roles"][1]["min_replicas"] = 4  # == replicas
    job["min_members"] = 5  # == the 1 + 4 replicas of its roles
    job["max_members"] = 5  # == the minimum
    run = data["running"][0]
    run["roles"][0]["replicas"] = 1  # == the one pod running
    run["roles"][0]["min_replicas"] = 1  # == replicas, == the pods running
    rnd = load(tmp_path, data)
    assert (rnd.pending[0].minimum, rnd.pending[0].maximum) == (5, 5)
    assert (rnd.running[0].minimum, rnd.running[0].maximum) == (1, 1)


def test_slices_at_the_required_level_and_of_one_pod_are_valid(tmp_path: Path) -> None:
    data = base()
    data["pending"][0]["topology"] = {"required": "rack", "preferred": "rack", "slice_level": "rack", "slice_size": 5}
    assert load(tmp_path, data).pending[0].topology is not None
    data = base()
    data["pending"][0]["roles"] = [{"name": "solo", "replicas": 1, "requests": {"gpu": 1}}]
    data["pending"][0]["topology"] = {"slice_level": "node", "slice_size": 1}  # one member, a multiple of 1
    assert load(tmp_path, data).pending[0].maximum == 1


def test_asking_none_of_a_resource_the_node_lacks_is_valid(tmp_path: Path) -> None:
    data = base()
    data["running"][0]["roles"][0]["requests"] = {"gpu": 4, "rdma": 0}
    assert load(tmp_path, data).running[0].roles[0].requests == {"gpu": 4000, "rdma": 0}


def test_a_queue_reads_the_root_of_its_cohort_tree(tmp_path: Path) -> None:
    """Round.cohorts: a queue keeps the cohort it names (a node of a tree, so that quotas can
    be read at every level) and ``Round.cohort_roots`` gives its tree's root (on loaded and on
    built rounds alike); a cohort the tree does not declare stands alone, and a round without
    cohorts keeps its queues' cohorts as written (backward compatible). A dumped round loads
    back to the same tree."""
    data = base()
    data["queues"] = [
        {"name": "a", "cohort": "vision"},
        {"name": "b", "cohort": "research"},
        {"name": "c", "cohort": "elsewhere"},
    ]
    data["pending"][0]["queue"] = "a"
    data["running"][0]["queue"] = "b"
    plain = parse_model(Round, data, "round")
    assert [q.cohort for q in plain.queues] == ["vision", "research", "elsewhere"]
    assert plain.cohort_roots == {"a": "vision", "b": "research", "c": "elsewhere"}
    data["cohorts"] = [{"name": "org"}, {"name": "research", "parent": "org"}, {"name": "vision", "parent": "research"}]
    path = tmp_path / "round.json"
    path.write_text(json.dumps(data))
    loaded = gangopt.load_round(path)
    assert [q.cohort for q in loaded.queues] == ["vision", "research", "elsewhere"]
    assert loaded.cohort_roots == {"a": "org", "b": "org", "c": "elsewhere"}
    built = Round(cluster=loaded.cluster, queues=plain.queues, cohorts=loaded.cohorts)
    assert built.cohort_roots == {"a": "org", "b": "org", "c": "elsewhere"}
    again = Round.model_validate(loaded.model_dump())
    assert again == loaded and again.cohort_roots == loaded.cohort_roots


def test_capacity_sums_the_pods_of_whole_checked_and_pod_by_pod_gangs(tmp_path: Path) -> None:
    """A node's usage adds the pods of one-role gangs checked as a whole (numpy) and of gangs
    checked pod by pod (two roles, or a count outside the plain bounds): 3 + 3 + 4 GPUs on n0."""
    data = base()
    data["running"][0]["pods"] = [{"name": "run-0", "role": "worker", "node": "n0"}]  # 4 GPUs, elastic
    data["running"].append(
        {"name": "one", "roles": [{"replicas": 1, "requests": {"gpu": 3}}], "pods": [{"name": "one-0", "node": "n0"}]}
    )
    data["running"].append(
        {
            "name": "two",
            "roles": [
                {"name": "a", "replicas": 1, "requests": {"gpu": 3}},
                {"name": "b", "replicas": 1, "requests": {"cpu": 1}},
            ],
            "pods": [{"name": "two-a", "role": "a", "node": "n0"}, {"name": "two-b", "role": "b", "node": "n1"}],
        }
    )
    data["queues"] = []
    data["running"][0].pop("queue")
    data["pending"][0].pop("queue")
    assert problems_of(tmp_path, data) == [
        ("$.cluster.nodes[0].capacity.gpu", "running pods on node 'n0' request 10 gpu, more than its capacity 8 gpu")
    ]
    data["running"][2]["pods"][0]["node"] = "n2"
    assert len(load(tmp_path, data).running) == 3


def test_capacity_beyond_int64_is_summed_exactly(tmp_path: Path) -> None:
    """Two pods of 6 Pi memory (6.9e18 milli-units each) overflow int64 together: the sum is
    then taken with Python integers, and the message names the true total."""
    data = base()
    data["cluster"]["nodes"][0]["capacity"]["memory"] = "8Pi"
    data["running"] = [
        {
            "name": f"big{k}",
            "roles": [{"replicas": 1, "requests": {"memory": "6Pi"}}],
            "pods": [{"name": f"big{k}-0", "node": "n0"}],
        }
        for k in range(2)
    ]
    data["queues"] = []
    data["pending"][0].pop("queue")
    pi = 2**50 * 1000  # milli-units
    used, capacity = human(12 * pi, "memory"), human(8 * pi, "memory")
    message = f"running pods on node 'n0' request {used}, more than its capacity {capacity}"
    assert problems_of(tmp_path, data) == [("$.cluster.nodes[0].capacity.memory", message)]
