"""``gangopt solve``'s clock: the time limit covers the command, reading and parsing the round
included; the solve gets the rest (Policy.after), and a deterministic solve its own limit."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gangopt.cli import main, process_age
from gangopt.schema import Plan, Policy, Round

INSTANCES = Path(__file__).resolve().parents[2] / "instances"


def _passed_down(monkeypatch: pytest.MonkeyPatch, argv: list[str], began: float) -> Policy:
    """The policy ``gangopt solve`` hands the solver, for a command whose clock began at ``began``."""
    seen: list[Policy] = []
    from gangopt.cli import solve as command

    real = command.solve

    def spy(rnd: Round, policy: Policy, **kwargs: Any) -> Plan:
        seen.append(policy)
        return real(rnd, policy, **kwargs)

    monkeypatch.setattr(command, "solve", spy)
    assert main(["solve", *argv, "--solver", "greedy"], began=began) == 0
    (policy,) = seen
    return policy


def test_the_time_already_spent_is_taken_off_the_limit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command whose clock began 4 s ago (a slow import and parse, as at XL) leaves the solve
    at most 6 of its 10 s, with the work limit the 10 s limit would have had."""
    began = time.perf_counter() - 4.0
    policy = _passed_down(monkeypatch, [str(INSTANCES / "basic.json"), "--time-limit", "10"], began)
    assert 5.0 < policy.time_limit <= 6.0
    assert policy.work_limit == pytest.approx(3.0)  # DETERMINISTIC_SHARE x 10: the plan does not move
    plan = Plan.model_validate_json(capsys.readouterr().out)
    assert plan.stats.parse_seconds > 0


def test_the_solve_keeps_a_tenth_of_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _passed_down(monkeypatch, [str(INSTANCES / "basic.json"), "--time-limit", "2"], time.perf_counter() - 60)
    assert policy.time_limit == pytest.approx(0.2)


def test_a_deterministic_solve_keeps_its_limit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Under policy.deterministic the limit is a safety net: the plan must not depend on how long
    the parse took, so nothing is taken off."""
    data = json.loads((INSTANCES / "basic.json").read_text(encoding="utf-8"))
    data.setdefault("policy", {})["deterministic"] = True
    path = tmp_path / "round.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    policy = _passed_down(monkeypatch, [str(path), "--time-limit", "10"], time.perf_counter() - 4.0)
    assert (policy.time_limit, policy.work_limit) == (10.0, None)


def test_the_process_age_is_read() -> None:
    """The ``gangopt`` script counts from the process start: this test process is older than
    the time since it imported this module, and not older than the machine."""
    age = process_age()
    assert 0 < age < time.clock_gettime(time.CLOCK_BOOTTIME)


def test_a_whole_process_solves_without_the_collector(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``gangopt solve`` in a whole process solves with the collector off and turns it back on;
    in-process (a test, a library caller) and with the caller's collector off, untouched."""
    import gc

    from gangopt.cli import solve as command

    seen: list[bool] = []

    def solve(*args: Any, **kwargs: Any) -> Plan:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    real = command.solve
    monkeypatch.setattr(command, "solve", solve)
    argv = ["solve", str(INSTANCES / "basic.json"), "-o", str(tmp_path / "plan.json")]
    assert gc.isenabled()
    assert main(argv) == 0
    assert main(argv, whole_process=False) == 0
    with command._collector_off(whole_process=True):
        seen.append(gc.isenabled())
    assert gc.isenabled()
    gc.disable()
    try:
        with command._collector_off(whole_process=True):
            seen.append(gc.isenabled())
        assert not gc.isenabled()  # the caller's choice stands
    finally:
        gc.enable()
    assert seen == [True, True, False, False]
    import subprocess
    import sys

    code = (  # as the script runs: a fresh process (it freezes what it parsed)
        "import gc, json, sys\n"
        "from gangopt.cli import main, solve as command\n"
        "seen = []\n"
        "real = command.solve\n"
        "def solve(*args, **kwargs):\n"
        "    seen.append(gc.isenabled())\n"
        "    return real(*args, **kwargs)\n"
        "command.solve = solve\n"
        "code = main(['solve', sys.argv[1], '-o', sys.argv[2]], whole_process=True)\n"
        "print(json.dumps([code, seen, gc.isenabled()]))\n"
    )
    argv = [sys.executable, "-c", code, str(INSTANCES / "basic.json"), str(tmp_path / "whole.json")]
    out = subprocess.run(argv, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [0, [False], True]


def test_a_whole_process_parses_without_the_collector_and_freezes_the_round() -> None:
    """``gangopt`` (a process that ends with the command) reads the round with the collector off
    and freezes it afterwards; called in-process (``main`` without ``whole_process``: a test, a
    library caller) nothing changes. In a fresh process, as the script runs."""
    import subprocess
    import sys

    code = (
        "import gc, json, sys\n"
        "from gangopt.cli import solve as command\n"
        "from gangopt.io import load_round\n"
        "seen = []\n"
        "def load(source):\n"
        "    seen.append(gc.isenabled())\n"
        "    return load_round(source)\n"
        "command.load_round = load\n"
        "path = sys.argv[1]\n"
        "plain = command.read_round(path)\n"
        "frozen_before = gc.get_freeze_count()\n"
        "whole = command.read_round(path, whole_process=True)\n"
        "print(json.dumps([seen, frozen_before, gc.get_freeze_count() > 0, gc.isenabled(), whole == plain]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    argv = [sys.executable, "-c", code, str(INSTANCES / "basic.json")]
    out = subprocess.run(argv, cwd=root, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[True, False], 0, True, True, True]
