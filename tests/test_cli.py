"""End-to-end tests of the ``gangopt`` CLI, mostly through ``main([...])`` and once as a real process.

The exit-code contract is what wrappers rely on: bad input -> 2, every problem on stderr with
its JSON path, *nothing* on stdout (and no ``-o`` file); other failures -> 1 with one line.
"""

from __future__ import annotations

import copy
import gc
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gangopt
import gangopt.cli.solve as cli
from gangopt.cli import main
from gangopt.schema import Plan, Policy, Round

ROOT = Path(__file__).resolve().parent.parent
Json = dict[str, Any]


def _node(name: str, rack: str) -> Json:
    return {"name": name, "capacity": {"gpu": 8, "cpu": 64, "memory": "512Gi"}, "topology": {"rack": rack}}


def small_round() -> Json:
    """4 nodes x 8 GPUs in 2 racks; one low-priority pod runs on n3. ``train`` fits a rack,
    ``infer`` fits anywhere, ``huge`` (64 GPUs) can never fit, so some gang always waits."""
    return {
        "cluster": {
            "topology_levels": ["rack"],
            "nodes": [_node("n0", "r0"), _node("n1", "r0"), _node("n2", "r1"), _node("n3", "r1")],
        },
        "running": [
            {
                "name": "old",
                "priority": 0,
                "roles": [{"replicas": 1, "requests": {"gpu": 8}}],
                "pods": [{"name": "old-worker-0", "node": "n3"}],
            }
        ],
        "pending": [
            {
                "name": "train",
                "priority": 10,
                "submit_time": 0,
                "roles": [{"replicas": 2, "requests": {"gpu": 8, "cpu": "500m", "memory": "64Gi"}}],
                "topology": {"required": "rack"},
            },
            {"name": "infer", "priority": 5, "submit_time": 60, "roles": [{"replicas": 1, "requests": {"gpu": 4}}]},
            {"name": "huge", "priority": 1, "submit_time": 120, "roles": [{"replicas": 8, "requests": {"gpu": 8}}]},
        ],
        "policy": {"time_limit": 5, "workers": 1, "weights": {"spread": 3.0}},
    }


def hand_plan() -> Json:
    """A valid plan for :func:`small_round`, written by hand so validate/explain tests need no solver."""
    return {
        "status": "feasible",
        "solver": "hand",
        "admitted": ["train", "infer"],
        "placements": [
            {"gang": "train", "role": "worker", "pod": "train-worker-0", "node": "n0"},
            {"gang": "train", "role": "worker", "pod": "train-worker-1", "node": "n1"},
            {"gang": "infer", "role": "worker", "pod": "infer-worker-0", "node": "n2"},
        ],
        "waiting": [{"gang": "huge", "code": "capacity", "reasons": ["needs 64 gpu; the cluster has 32"]}],
    }


def _write(path: Path, data: Json | str) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.fixture
def round_file(tmp_path: Path) -> str:
    return _write(tmp_path / "round.json", small_round())


@pytest.fixture
def plan_file(tmp_path: Path) -> str:
    return _write(tmp_path / "plan.json", hand_plan())


# ----------------------------------------------------------------------------- bad input -> exit 2


def _set(path: str, value: Any) -> Callable[[Json], None]:
    """A mutation of the round at a dotted path (``pending.0.name``)."""

    def mutate(data: Json) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        target: Any = data
        for part in parents:
            target = target[part]
        target[last] = value

    return mutate


BAD_ROUNDS: list[tuple[str, Callable[[Json], None] | str, str, str]] = [
    # (case, mutation or raw text, JSON path, message fragment)
    ("malformed JSON", '{"cluster": {"nodes": [', "$", "malformed JSON"),
    ("unknown field", _set("pending.0.prority", 3), "$.pending[0].prority", "unknown field"),
    ("negative quantity", _set("cluster.nodes.1.capacity.gpu", "-8"), "$.cluster.nodes[1].capacity.gpu", "negative"),
    (
        "unparseable quantity",
        _set("pending.1.roles.0.requests.gpu", "four"),
        "$.pending[1].roles[0].requests.gpu",
        "cannot parse quantity",
    ),
    (
        "quantity too large",
        _set("cluster.nodes.1.capacity.memory", "100Pi"),
        "$.cluster.nodes[1].capacity.memory",
        "too large",
    ),
    (
        "absurd replicas",
        _set("pending.1.roles.0.replicas", 10**9),
        "$.pending[1].roles[0].replicas",
        "less than or equal to 100000",
    ),
    (
        "priority beyond int32",
        _set("running.0.priority", 2**70),
        "$.running[0].priority",
        "less than or equal to 2147483647",
    ),
    ("duplicate node name", _set("cluster.nodes.2.name", "n0"), "$.cluster.nodes[2].name", "duplicate node name"),
    ("duplicate gang name", _set("pending.1.name", "old"), "$.pending[1].name", "duplicate gang name"),
    ("pod on missing node", _set("running.0.pods.0.node", "n9"), "$.running[0].pods[0].node", "does not exist"),
    (
        "running over capacity",
        _set("running.0.roles.0.requests.gpu", 16),
        "$.cluster.nodes[3].capacity.gpu",
        "more than its capacity",
    ),
    ("gang min over replicas", _set("pending.0.min_members", 3), "$.pending[0].min_members", "exceeds"),
    (
        "role min over replicas",
        _set("pending.2.roles.0.min_replicas", 9),
        "$.pending[2].roles[0].min_replicas",
        "exceeds",
    ),
    (
        "unknown required level",
        _set("pending.0.topology.required", "row"),
        "$.pending[0].topology.required",
        "unknown topology level",
    ),
    (
        "unknown node level",
        _set("cluster.nodes.0.topology.row", "x"),
        "$.cluster.nodes[0].topology.row",
        "unknown topology level",
    ),
]


def _bad_round_file(tmp_path: Path, bad: Callable[[Json], None] | str) -> str:
    if isinstance(bad, str):
        return _write(tmp_path / "bad.json", bad)
    data = copy.deepcopy(small_round())
    bad(data)
    return _write(tmp_path / "bad.json", data)


def _assert_input_error(code: int, out: str, err: str, path: str, fragment: str) -> None:
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), err
    assert any(line.startswith(f"error: {path}: ") and fragment in line for line in lines), err


@pytest.mark.parametrize("command", ["solve", "validate", "explain"])
@pytest.mark.parametrize(("case", "bad", "path", "fragment"), BAD_ROUNDS, ids=[c[0] for c in BAD_ROUNDS])
def test_bad_round_exits_2_with_json_path(
    tmp_path: Path,
    plan_file: str,
    capsys: pytest.CaptureFixture[str],
    command: str,
    case: str,
    bad: Callable[[Json], None] | str,
    path: str,
    fragment: str,
) -> None:
    bad_file = _bad_round_file(tmp_path, bad)
    output = tmp_path / "out.json"
    argv = ["solve", bad_file, "-o", str(output)] if command == "solve" else [command, bad_file, plan_file]
    code = main(argv)
    out, err = capsys.readouterr()
    _assert_input_error(code, out, err, path, fragment)
    assert not output.exists()


def test_every_problem_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = small_round()
    data["cluster"]["nodes"][2]["name"] = "n0"
    data["pending"][0]["topology"]["required"] = "row"
    code = main(["solve", _write(tmp_path / "r.json", data)])
    out, err = capsys.readouterr()
    _assert_input_error(code, out, err, "$.cluster.nodes[2].name", "duplicate node name")
    _assert_input_error(code, out, err, "$.pending[0].topology.required", "unknown topology level")


def test_bad_plan_exits_2(tmp_path: Path, round_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    plan = hand_plan()
    plan["placements"][0]["nod"] = "n0"
    plan_file = _write(tmp_path / "p.json", plan)
    for command in ("validate", "explain"):
        code = main([command, round_file, plan_file])
        out, err = capsys.readouterr()
        _assert_input_error(code, out, err, "$.placements[0].nod", "unknown field")


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["solve", str(tmp_path / "nope.json")])
    out, err = capsys.readouterr()
    _assert_input_error(code, out, err, "$", "cannot read")


def test_bad_stdin_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("not json"))
    code = main(["solve", "-"])
    out, err = capsys.readouterr()
    _assert_input_error(code, out, err, "$", "malformed JSON")


@pytest.mark.parametrize(
    ("flags", "path", "fragment"),
    [
        (["--workers", "0"], "$.policy.workers", "--workers"),
        (["--time-limit", "0"], "$.policy.time_limit", "--time-limit"),
        (["--seed", "-1"], "$.policy.seed", "--seed"),
    ],
)
def test_bad_policy_flag_exits_2_at_policy_path(
    round_file: str, capsys: pytest.CaptureFixture[str], flags: list[str], path: str, fragment: str
) -> None:
    code = main(["solve", round_file, *flags])
    out, err = capsys.readouterr()
    _assert_input_error(code, out, err, path, fragment)


@pytest.mark.parametrize(
    "argv",
    [[], ["solve"], ["solve", "r.json", "--seed", "x"], ["solve", "r.json", "--solver", "magic"], ["frobnicate"]],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("error: ") and "Traceback" not in err


# ----------------------------------------------------------------------------- solve plumbing (no real solver)


def _fake_solve(seen: dict[str, Any]) -> Callable[..., Plan]:
    def fake(rnd: Round, policy: Policy | None = None, *, solver: str = "cpsat", lp_bounds: bool | None = None) -> Plan:
        seen.update(rnd=rnd, policy=policy, solver=solver, lp_bounds=lp_bounds)
        return Plan.model_validate(hand_plan())

    return fake


def test_policy_flags_override_the_rounds_policy(
    round_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(cli, "solve", _fake_solve(seen))
    argv = ["solve", round_file, "--solver", "greedy", "--time-limit", "2.5", "--seed", "7", "--workers", "2"]
    code = main([*argv, "--no-preemption"])
    out, err = capsys.readouterr()
    assert code == 0, err
    policy = seen["policy"]
    assert isinstance(policy, Policy)
    assert (policy.seed, policy.workers, policy.preemption) == (7, 2, False)
    # The flag's limit, less the time spent reading the round (tests/cli/test_solve.py); the work
    # limit is the whole limit's.
    assert 0.25 <= policy.time_limit <= 2.5 and policy.work == pytest.approx(0.3 * 2.5)
    assert policy.weights.spread == 3.0  # untouched fields come from the round's policy
    assert seen["solver"] == "greedy"
    printed, hand = Plan.model_validate_json(out), Plan.model_validate(hand_plan())
    assert printed.stats.parse_seconds > 0  # the command line times reading the round
    assert printed.model_copy(update={"stats": hand.stats}) == hand


def test_no_flags_keep_the_rounds_policy(
    round_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(cli, "solve", _fake_solve(seen))
    assert main(["solve", round_file]) == 0
    own = Round.model_validate(small_round()).policy
    passed = seen["policy"]
    assert passed.time_limit <= own.time_limit  # less the time spent reading it (tests/cli/test_solve.py)
    assert passed.model_copy(update={"time_limit": own.time_limit, "work_limit": own.work_limit}) == own
    assert passed.work == pytest.approx(own.work)
    assert seen["solver"] == "cpsat"
    capsys.readouterr()


def test_solver_failure_exits_1_with_one_line_and_no_output(
    tmp_path: Path, round_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Plan:
        raise RuntimeError("model too large\nsecond line of detail")

    monkeypatch.setattr(cli, "solve", broken)
    output = tmp_path / "plan.json"
    output.write_text("previous plan", encoding="utf-8")
    code = main(["solve", round_file, "-o", str(output)])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert err == "error: RuntimeError: model too large\n"
    assert output.read_text(encoding="utf-8") == "previous plan"  # never half-overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "round.json"]  # no temp file left


def test_output_file_is_written_atomically(
    tmp_path: Path, round_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "solve", _fake_solve({}))
    output = tmp_path / "plan.json"
    output.write_text("previous plan", encoding="utf-8")
    assert main(["solve", round_file, "-o", str(output)]) == 0
    out, _ = capsys.readouterr()
    assert out == ""
    assert Plan.model_validate_json(output.read_text(encoding="utf-8")).solver == "hand"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "round.json"]


def test_unwritable_output_exits_1(
    tmp_path: Path, round_file: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "solve", _fake_solve({}))
    target = tmp_path / "missing-dir" / "plan.json"
    code = main(["solve", round_file, "-o", str(target)])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert len(err.splitlines()) == 1 and str(target) in err


# ----------------------------------------------------------------------------- schema, validate, explain


def test_schema_prints_both_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert set(schemas) == {"round", "plan"}
    assert schemas["round"]["title"] == "Round" and schemas["plan"]["title"] == "Plan"


@pytest.mark.parametrize("which", ["round", "plan"])
def test_schema_prints_one_schema(which: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", which]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == which.capitalize()


def test_validate_accepts_a_valid_plan(round_file: str, plan_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", round_file, plan_file])
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, "plan is valid\n", "")


def test_validate_rejects_a_broken_plan_and_names_the_rule(
    tmp_path: Path, round_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = hand_plan()
    plan["placements"][2]["node"] = "n0"  # 8 + 4 GPUs on an 8-GPU node
    code = main(["validate", round_file, _write(tmp_path / "broken.json", plan)])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert any(line.startswith("capacity: ") for line in out.splitlines()), out
    assert "n0" in out


def test_explain_names_every_pending_gang(tmp_path: Path, round_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    plan = hand_plan()
    plan["waiting"] = []  # even a gang the plan forgets to mention is shown
    code = main(["explain", round_file, _write(tmp_path / "p.json", plan)])
    out, err = capsys.readouterr()
    assert code == 0, err
    for gang in ("train", "infer", "huge"):
        assert gang in out
    assert "status:  feasible" in out
    assert "not mentioned by the plan" in out


def test_explain_shows_preemptions_resizes_and_timing() -> None:
    from gangopt.explain import summary

    plan = Plan.model_validate(
        {
            **hand_plan(),
            "gap": 0.125,
            "preemptions": [
                {
                    "gang": "old",
                    "kind": "evict",
                    "pods": ["old-worker-0"],
                    "nodes": ["n3"],
                    "priority": 0,
                    "cost": 0.5,
                    "for_gangs": ["train"],
                }
            ],
            "resizes": [{"gang": "old", "from_members": 1, "to_members": 0}],
            "stats": {"nodes": 4, "total_seconds": 1.23456, "parse_seconds": 0.0421},
        }
    )
    text = summary(Round.model_validate(small_round()), plan)
    assert any(line.split()[:2] == ["parse", "0.042"] for line in text.splitlines())
    assert "gap:     12.50%" in text
    assert "Preemptions (1)" in text and "for train" in text
    assert "Resizes (1)" in text
    assert "1.235" in text
    lines = text.splitlines()
    header = next(line for line in lines if line.strip().startswith("gang") and "members" in line)
    row = next(line for line in lines if line.strip().startswith("train"))
    assert row.index("n0,n1") == header.rindex("nodes")  # columns line up


# ----------------------------------------------------------------------------- with the real solver


def _check_plan(text: str, round_data: Json) -> Plan:
    plan = Plan.model_validate_json(text)
    rnd = Round.model_validate(round_data)
    assert gangopt.validate(rnd, plan) == []
    pending = {g.name for g in rnd.pending}
    assert sorted([*plan.admitted, *(w.gang for w in plan.waiting)]) == sorted(pending)
    assert "huge" not in plan.admitted
    return plan


@pytest.mark.parametrize("solver", ["cpsat", "greedy"])
def test_solve_prints_a_valid_plan(round_file: str, solver: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["solve", round_file, "--solver", solver])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = _check_plan(out, small_round())
    if solver == "cpsat":
        assert "train" in plan.admitted  # the top-priority gang fits in rack r0


def test_solve_explain_and_output_file(tmp_path: Path, round_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "plan.json"
    code = main(["solve", round_file, "--explain", "-o", str(output)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == ""
    _check_plan(output.read_text(encoding="utf-8"), small_round())
    for gang in ("train", "infer", "huge"):
        assert gang in err
    assert main(["explain", round_file, str(output)]) == 0
    explained = capsys.readouterr().out
    for gang in ("train", "infer", "huge"):
        assert gang in explained
    assert main(["validate", round_file, str(output)]) == 0
    assert capsys.readouterr().out == "plan is valid\n"


def test_solve_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(small_round())))
    code = main(["solve", "-", "--no-preemption"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert _check_plan(out, small_round()).preemptions == []


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gangopt`` as a real process, importable from this checkout even without an install."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run(
        [sys.executable, "-m", "gangopt", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_python_m_gangopt_bad_input(tmp_path: Path) -> None:
    bad = small_round()
    bad["running"][0]["pods"][0]["node"] = "n9"
    result = _run("solve", _write(tmp_path / "bad.json", bad))
    _assert_input_error(result.returncode, result.stdout, result.stderr, "$.running[0].pods[0].node", "does not exist")


def test_python_m_gangopt_solve(round_file: str) -> None:
    result = _run("solve", round_file, "--time-limit", "5")
    assert result.returncode == 0, result.stderr
    _check_plan(result.stdout, small_round())


def test_python_m_gangopt_writes_plan_and_summary_before_its_fast_exit(round_file: str) -> None:
    """``run`` ends the process with ``os._exit`` (no interpreter teardown): stdout and stderr
    are flushed first, so a pipe gets the whole plan and the summary."""
    result = _run("solve", round_file, "--explain")
    assert result.returncode == 0, result.stderr
    _check_plan(result.stdout, small_round())
    assert "status:" in result.stderr


def test_main_restores_the_collectors_thresholds(round_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert main(["solve", round_file]) == 0
    assert gc.get_threshold() == before
    assert main(["solve", "missing.json"]) == 2
    assert gc.get_threshold() == before

