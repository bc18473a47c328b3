"""The bad-input corpus (issue 14): every case in ``tests/fixtures/bad-inputs/`` is refused by
the CLI with exit code 2, a path-named problem on stderr and nothing on stdout, and by the
service with 422 and the same path: never a traceback, an exit code 1 or a 500.

The corpus is written by ``scripts/gen_bad_inputs.py`` (which says what each field means); a
case names the JSON path its first matching problem starts with and a word of its message.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():  # starlette would like httpx2; httpx is what the project has
    warnings.simplefilter("ignore", DeprecationWarning)
    from starlette.testclient import TestClient

from gangopt.cli import main
from gangopt.service import ServiceSettings, create_app

CORPUS = Path(__file__).resolve().parent / "fixtures" / "bad-inputs"
CASES: list[dict[str, Any]] = json.loads((CORPUS / "cases.json").read_text(encoding="utf-8"))
CLI_CASES = [c for c in CASES if c["kind"] in ("round", "k8s")]
ENDPOINTS = {"round": "/v1/solve", "validate": "/v1/validate", "k8s": "/v1/import/k8s"}


def _id(case: dict[str, Any]) -> str:
    return str(case["file"])


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    settings = ServiceSettings(token=None, allowed_hosts=["*"], max_time_limit=1.0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 100
    assert {c["kind"] for c in CASES} == {"round", "validate", "k8s"}


@pytest.mark.parametrize("case", CLI_CASES, ids=_id)
def test_cli_refuses_with_exit_2_and_a_path(case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    file = CORPUS / case["file"]
    argv = ["solve", str(file)] if case["kind"] == "round" else ["import", "k8s", str(file)]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert lines and all(line.startswith(("error: ", "warning: ")) for line in lines), err
    path = case["path"].replace("<source>", str(file))
    errors = [line for line in lines if line.startswith(f"error: {path}")]
    assert errors, f"no problem at {path}:\n{err}"
    assert any(case["word"].lower() in line.lower() for line in errors), err


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_service_refuses_with_422_and_a_path(case: dict[str, Any], http: TestClient) -> None:
    file = CORPUS / case["file"]
    content_type = "application/yaml" if file.suffix == ".yaml" else "application/json"
    response = http.post(ENDPOINTS[case["kind"]], content=file.read_bytes(), headers={"Content-Type": content_type})
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    path = case["path"].replace("<source>", "input")
    matching = [e for e in errors if str(e["path"]).startswith(path)]
    assert matching, f"no problem at {path}: {errors}"
    assert any(case["word"].lower() in e["message"].lower() for e in matching), errors
