"""gangopt.parsing's fast path: the strict parse's dicts validated in Python mode (and, on
printable-ASCII input, without the per-string character checks) accept exactly what validating
the text accepts and build the same round; a refused input gets the reference path's errors
word for word."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import gangopt
from gangopt.errors import InputError
from gangopt.parsing import guarded, load_json, parse_json, plain_ascii, validate_parsed
from gangopt.replay.workload import Workload
from gangopt.schema import Plan, Round
from tests.builders import fragmented_round
from tests.test_checks import base

INSTANCES = Path(__file__).resolve().parents[1] / "instances"
CORPUS = Path(__file__).resolve().parent / "fixtures" / "bad-inputs"
VALUES: list[Any] = [None, True, False, 0, 1, -1, 2.5, 1e300, "", "x", "8", "n1", "\u202e", "a\\b"]
VALUES += [[], {}, [1], {"x": 1}]
"""What each field is replaced with: every JSON type, numbers of each kind, names that exist,
a bidi override and a backslash."""


def _reference(text: str, model: type[BaseModel] = Round) -> Any:
    """The model validated from the text itself, as before the fast path, or its problems."""
    try:
        with guarded("input"):
            return model.model_validate_json(text)
    except InputError as error:
        return error.problems


def _fast(text: str, model: type[BaseModel] = Round) -> Any:
    return validate_parsed(model, load_json(text, "input"), plain_ascii(text))


def _mutants(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    """(path, value) for every place of ``data`` and every replacement, each key dropped
    (value ``...``) and an unknown key added to every object."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    if isinstance(data, dict):
        out.append(((*path, "unknown_field"), 1))
        items: list[tuple[Any, Any]] = list(data.items())
    elif isinstance(data, list):
        items = list(enumerate(data))
    else:
        return out
    for key, value in items:
        out += [((*path, key), v) for v in VALUES] + [((*path, key), ...)]
        out += _mutants(value, (*path, key))
    return out


def _mutated(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(data)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


def _alike(data: Any, model: type[BaseModel]) -> int:
    """Check every mutant of ``data``: the fast path refuses (None) exactly what the reference
    path refuses, and builds what both accept alike; returns how many were accepted."""
    accepted = 0
    for path, value in _mutants(data):
        text = json.dumps(_mutated(data, path, value))
        reference, fast = _reference(text, model), _fast(text, model)
        if isinstance(reference, list):
            assert fast is None, (path, value, reference)
        else:
            assert fast == reference, (path, value)
            accepted += 1
    return accepted


def test_every_mutant_of_a_round_is_accepted_alike_and_built_alike() -> None:
    """Each field of a round that touches every checked field, replaced by every JSON type or
    dropped, plus an unknown key in every object: the fast path refuses (None) exactly what the
    reference path refuses, and what both accept is the same round."""
    data = base()
    mutants = len(_mutants(data))
    assert mutants > 1000
    assert 100 < _alike(data, Round) < mutants - 100  # both outcomes are exercised


def test_every_mutant_of_a_plan_is_accepted_alike_and_built_alike() -> None:
    """The same for a plan (``gangopt validate`` and ``explain`` read one): its fields are not
    strict, so this is where Python-mode and JSON-mode validation could differ."""
    rnd = gangopt.load_round(INSTANCES / "preemption.json")
    data = json.loads(gangopt.solve(rnd, solver="greedy").model_dump_json())
    assert _alike(data, Plan) > 100


def test_every_mutant_of_a_workload_is_accepted_alike_and_built_alike() -> None:
    """And for a workload (``gangopt simulate`` reads one): its models are not strict either."""
    whole = json.loads((INSTANCES / "workloads" / "philly-6214e9.json").read_text(encoding="utf-8"))
    data = {**whole, "jobs": whole["jobs"][:2], "queues": [{"name": "6214e9", "nominal": {"gpu": 8}}]}
    data["jobs"][1].update(deadline=90000.0, min_members=1, max_members=1)
    assert _alike(data, Workload) > 100


@pytest.mark.parametrize("name", sorted(p.stem for p in INSTANCES.glob("*.json")))
def test_the_instances_are_built_alike(name: str) -> None:
    text = (INSTANCES / f"{name}.json").read_text(encoding="utf-8")
    fast = _fast(text)
    assert fast is not None
    assert fast == _reference(text)


def test_a_fragmented_round_is_built_alike() -> None:
    """Thousands of running gangs through the fast path, including their cached totals."""
    text = fragmented_round(128, 50, seed=3, running_mix="jobs").model_dump_json()
    fast, reference = _fast(text), _reference(text)
    assert isinstance(reference, Round) and fast == reference
    assert [g.minimum for g in fast.running] == [g.minimum for g in reference.running]


@pytest.mark.parametrize("name", ["\u202ebad", "tab\there", "del\x7f", "zero\u200bwidth"])
def test_an_invisible_character_is_refused_however_it_is_written(name: str) -> None:
    """The character checks are left out only for printable ASCII without escapes: written raw
    or as an escape, an invisible character in a name is refused with the same problem."""
    data = base()
    data["running"][0]["name"] = name
    for text in (json.dumps(data, ensure_ascii=False), json.dumps(data, ensure_ascii=True)):
        assert not plain_ascii(text)
        assert _fast(text) is None
        reference = _reference(text)
        assert isinstance(reference, list)
        with pytest.raises(InputError) as raised:
            parse_json(Round, text)
        assert raised.value.problems == reference
        assert reference[0].path == "$.running[0].name"


def test_the_plain_validators_are_plain_in_a_fresh_process() -> None:
    """In a fresh process, as on the command line, the plain validators skip the character
    checks: they let an invisible character through (which is why only printable-ASCII text
    reaches them). In a long-lived process that has built a nested model's own validator,
    pydantic-core reuses that one, checks included: slower, never less strict."""
    code = (
        "import gangopt.cli.solve\n"  # what gangopt solve imports before it reads the round
        "from tests.test_checks import base\n"
        "from gangopt.parsing import validate_parsed\n"
        "from gangopt.schema import Round\n"
        "data = base()\n"
        "data['running'][0]['name'] = '\\u202ebad'\n"
        "print(validate_parsed(Round, data, plain=True) is not None)\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]


@pytest.mark.parametrize(
    "case",
    [c for c in json.loads((CORPUS / "cases.json").read_text(encoding="utf-8")) if c["kind"] == "round"],
    ids=lambda c: str(c["file"]),
)
def test_the_bad_input_corpus_gets_the_reference_errors(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bad round of the corpus is refused with the very problems the text's own validation
    (the path without the fast one) gives."""
    text = (CORPUS / case["file"]).read_bytes()
    with pytest.raises(InputError) as fast:
        parse_json(Round, text)
    monkeypatch.setattr("gangopt.parsing.validate_parsed", lambda *_: None)
    with pytest.raises(InputError) as reference:
        parse_json(Round, text)
    assert fast.value.problems == reference.value.problems
