"""gangopt.startup: only the ``gangopt`` command's own process gets one OpenBLAS thread and its
imports frozen; a program importing gangopt keeps its environment and its collector."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gangopt import startup

ROOT = Path(__file__).resolve().parents[1]

PROBE = (
    "import gc, json, os, sys\n"
    "frozen = gc.get_freeze_count()\n"
    "import gangopt\n"
    f"gangopt.load_round({str(ROOT / 'instances' / 'basic.json')!r})\n"  # pydantic's validators built and used
    "print(json.dumps([os.environ.get('OPENBLAS_NUM_THREADS'), frozen, gc.get_freeze_count() > 0,\n"
    "    os.environ.get('PYDANTIC_DISABLE_PLUGINS'), 'importlib.metadata' in sys.modules]))\n"
)


@pytest.mark.parametrize(
    ("argv", "orig_argv", "expected"),
    [
        (["/venv/bin/gangopt", "solve", "r.json"], ["/venv/bin/python", "/venv/bin/gangopt", "solve"], True),
        (["-m", "solve"], ["python", "-X", "importtime", "-m", "gangopt", "solve"], True),
        (["-m"], ["python", "-mgangopt"], True),
        (["-m", "x"], ["python", "-m", "gangopt.cli", "x"], False),  # not the command's entry
        (["-m"], ["python", "-m", "pytest", "-m", "gangopt"], False),  # the first -m names the package
        (["-c"], ["python", "-c", "import gangopt"], False),
        (["/home/me/gangopt_runner.py"], ["python", "/home/me/gangopt_runner.py"], False),
        ([], ["python"], False),
    ],
)
def test_the_command_is_told_from_a_program_importing_gangopt(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], orig_argv: list[str], expected: bool
) -> None:
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert startup.started_as_command() is expected


def _probe(argv0: str | None, **env: str) -> list[object]:
    """What a fresh interpreter's import of gangopt (and a round's parse) did: [OPENBLAS_NUM_THREADS,
    freeze count before the import, frozen after, PYDANTIC_DISABLE_PLUGINS, importlib.metadata
    imported]; ``argv0``: what ``sys.argv[0]`` says when gangopt is imported (the script's path
    for the ``gangopt`` command)."""
    code = PROBE if argv0 is None else f"import sys\nsys.argv[0] = {argv0!r}\n" + PROBE
    mine = {"OPENBLAS_NUM_THREADS", "PYDANTIC_DISABLE_PLUGINS"}
    environ = {k: v for k, v in os.environ.items() if k not in mine} | env
    argv = [sys.executable, "-c", code]
    out = subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_a_program_importing_gangopt_keeps_its_environment_collector_and_plugins() -> None:
    assert _probe(None) == [None, 0, False, None, True]


def test_the_command_gets_one_blas_thread_frozen_imports_and_no_plugin_search() -> None:
    """Also: the installed pydantic asks the plugin loader for nothing but ``get_plugins`` (else
    the stand-in would have imported the real loader, and importlib.metadata with it)."""
    assert _probe("/venv/bin/gangopt") == ["1", 0, True, startup.PLUGINS_OFF, False]


def test_the_callers_choices_are_kept() -> None:
    """A number of BLAS threads, and plugins (an empty PYDANTIC_DISABLE_PLUGINS: none disabled)."""
    probe = _probe("/venv/bin/gangopt", OPENBLAS_NUM_THREADS="3", PYDANTIC_DISABLE_PLUGINS="")
    assert probe == ["3", 0, True, "", True]


def test_the_stand_in_loader_says_no_plugins_and_passes_the_rest_on() -> None:
    module = startup.plugins_off()
    assert list(module.get_plugins()) == []
    assert not hasattr(module, "__path__")  # a module, not a package, to the import system
    assert module.PYDANTIC_ENTRY_POINT_GROUP == "pydantic"  # the real module's, loaded on demand
    with pytest.raises(AttributeError):
        _ = module.no_such_name


SITE = (
    "import atexit, gc, json, os, sys\n"
    "def report():\n"
    "    tasks = len(os.listdir('/proc/self/task')) if os.path.isdir('/proc/self/task') else 1\n"
    "    sys.stderr.write(json.dumps([os.environ.get('OPENBLAS_NUM_THREADS'), gc.get_freeze_count() > 0, tasks]))\n"
    "atexit.register(report)\n"
)


@pytest.mark.parametrize("command", [["-m", "gangopt"], ["-c", "import sys; from gangopt.cli import run; run()"]])
def test_python_dash_m_gangopt_is_the_command(tmp_path: Path, command: list[str]) -> None:
    """``python -m gangopt`` as a user runs it (``--version``: a command that exits the ordinary
    way, so a ``sitecustomize`` can report at exit): one BLAS thread, so no OpenBLAS thread
    beside the main one, and the imports frozen. The same CLI run from a program is not the
    command: its BLAS threads are its own; only ``run``'s end freezes (``cli.main`` with
    ``whole_process``: the process ends with the command)."""
    (tmp_path / "sitecustomize.py").write_text(SITE, encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    argv = [sys.executable, *command, "--version"]
    out = subprocess.run(argv, cwd=tmp_path, env=environ, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("gangopt ")
    blas, frozen, tasks = json.loads(out.stderr.strip().splitlines()[-1])
    if command[0] == "-m":
        assert (blas, frozen, tasks) == ("1", True, 1)
    else:  # frozen at the end: run() says the process ends with the command (cli.main)
        assert (blas, frozen) == (None, True)
