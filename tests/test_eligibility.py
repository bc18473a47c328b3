"""One reading of eligibility (issue 11): the solvers, the prefilter and the reasons read
cordons, selectors, affinity, taints and tolerations through ``arrays.Eligibility``; the
validator keeps its own reading on purpose, and the two must agree."""

from __future__ import annotations

import itertools

import pytest

import gangopt
from gangopt import arrays, validation
from gangopt.errors import InputError
from gangopt.parsing import parse_model
from gangopt.schema import Round, Status, Taint, Toleration

KEYS = [None, "dedicated", "gpu"]
VALUES = ["", "infra"]
EFFECTS = [None, "NoSchedule", "PreferNoSchedule", "NoExecute"]


def tolerations() -> list[Toleration]:
    out = []
    for key, operator, value, effect in itertools.product(KEYS, ["Equal", "Exists"], VALUES, EFFECTS):
        if key is None and operator == "Equal":
            continue  # rejected by the schema (below)
        out.append(Toleration(key=key, operator=operator, value=value, effect=effect))  # type: ignore[arg-type]
    return out


TAINTS = [
    Taint(key=k, value=v, effect=e)  # type: ignore[arg-type]
    for k, v, e in itertools.product(["dedicated", "gpu"], VALUES, ["NoSchedule", "PreferNoSchedule", "NoExecute"])
]


@pytest.mark.parametrize("taint", TAINTS, ids=lambda t: f"{t.key}={t.value}:{t.effect}")
def test_the_solvers_and_the_validators_readings_of_tolerations_agree(taint: Taint) -> None:
    for toleration in tolerations():
        assert arrays.tolerates(toleration, taint) == validation.tolerates(toleration, taint), toleration


def keyless_round(operator: str | None) -> dict[str, object]:
    """Issue 11's reproduction: two nodes, one tainted with an empty value; a gang of two 8-GPU
    pods whose only toleration has no key."""
    toleration: dict[str, str] = {"effect": "NoSchedule"}
    if operator is not None:
        toleration["operator"] = operator
    return {
        "cluster": {
            "nodes": [
                {"name": "n0", "capacity": {"gpu": 8}, "taints": [{"key": "dedicated", "effect": "NoSchedule"}]},
                {"name": "n1", "capacity": {"gpu": 8}},
            ]
        },
        "pending": [{"name": "a", "roles": [{"replicas": 2, "requests": {"gpu": 8}, "tolerations": [toleration]}]}],
    }


@pytest.mark.parametrize("operator", [None, "Equal"])
def test_a_keyless_toleration_with_operator_equal_is_rejected_with_its_path(operator: str | None) -> None:
    with pytest.raises(InputError) as caught:
        parse_model(Round, keyless_round(operator), "round")
    [problem] = caught.value.problems
    assert problem.path == "$.pending[0].roles[0].tolerations[0]"
    assert "without key must use operator Exists" in problem.message


def test_a_keyless_exists_toleration_tolerates_every_taint_for_every_reader() -> None:
    rnd = parse_model(Round, keyless_round("Exists"), "round")
    for solver in ("cpsat", "greedy", "koordinator_like"):
        plan = gangopt.solve(rnd, solver=solver)
        assert gangopt.validate(rnd, plan) == []
        assert plan.admitted == ["a"], solver
    plan = gangopt.solve(rnd)
    assert plan.status == Status.OPTIMAL and plan.gap == 0.0
