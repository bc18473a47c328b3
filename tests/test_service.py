"""The HTTP service (``gangopt serve``), tested against real uvicorn servers on loopback ports.

Every test talks HTTP to a live server (uvicorn in a thread of this process, or once the real
``gangopt serve`` process), so framing, the body limit, admission and the pool are exercised
as a Go scheduler would exercise them. Plans are checked with the independent validator and
against ``gangopt.solve`` on the same round.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given, settings
from prometheus_client.parser import text_string_to_metric_families
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import gangopt
from gangopt import service
from gangopt.cli import main
from gangopt.errors import InputError
from gangopt.parsing import parse_json
from gangopt.schema import Plan, Policy, Round
from gangopt.service import ServiceSettings, create_app, served_policy

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
TOKEN = "test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
Json = dict[str, Any]


# ----------------------------------------------------------------------------- servers


@contextmanager
def live_server(**settings: Any) -> Iterator[str]:
    """A uvicorn server for ``create_app(ServiceSettings(**settings))`` on a free loopback port,
    in a thread; yields its base URL once /healthz answers, stops it afterwards."""
    settings.setdefault("token", None)  # not $GANGOPT_TOKEN from the environment
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(create_app(ServiceSettings(**settings)), log_config=None, access_log=False)
    server = uvicorn.Server(config)  # signal handlers are only installed in the main thread
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        _wait_healthy(base)
        yield base
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _wait_healthy(base: str, timeout: float = 60.0) -> None:
    # Startup is imports, not what the tests measure: on a shared 2-core machine at load 6 a
    # server process took over 20 s to answer its first health check.
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{base} did not become healthy")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The server most tests share: token set, small body limit, short time limit."""
    with live_server(token=TOKEN, max_body_bytes=256 * 1024, max_time_limit=5.0, max_pods=5000) as base:
        yield base


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, headers={**AUTH, **JSON}, timeout=60) as c:
        yield c


def _text(name: str) -> str:
    return (INSTANCES / f"{name}.json").read_text(encoding="utf-8")


def _metric(client: httpx.Client, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    response = client.get("/metrics")
    assert response.status_code == 200
    total = 0.0
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def _comparable(plan: Plan) -> Json:
    """A plan without its timings, which differ from run to run."""
    data = plan.model_dump(mode="json")
    data["stats"] = {k: v for k, v in data["stats"].items() if not k.endswith("_seconds")}
    return data


def _served_policy(rnd: Round, max_time_limit: float) -> Round:
    """The round as the server solves it (see test_served_policy_clamps_time_and_threads)."""
    settings = ServiceSettings(max_time_limit=max_time_limit)
    return rnd.model_copy(update={"policy": served_policy(rnd.policy, settings)})


def test_served_policy_clamps_time_and_threads() -> None:
    """A client cannot make one solve take more CPU or time than the operator allows."""
    settings = ServiceSettings(max_time_limit=2.0, max_solver_workers=2)
    policy = Policy(time_limit=60.0, workers=16, hard_limit=False, seed=7)
    served = served_policy(policy, settings)
    assert (served.time_limit, served.workers, served.hard_limit, served.seed) == (2.0, 2, True, 7)
    modest = served_policy(Policy(time_limit=0.5, workers=1), settings)
    assert (modest.time_limit, modest.workers) == (0.5, 1)


# ----------------------------------------------------------------------------- solve


def test_the_parse_counts_in_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on the command line, the solve gets the time limit less the parse (Policy.after): a
    parse made 0.3 s slower leaves at most 4.7 of the 5 s, with the 5 s limit's work limit."""
    seen: list[Policy] = []
    real_parse, real_solve = service.parse_json, service.solve

    def slow_parse(*args: Any) -> Any:
        time.sleep(0.3)
        return real_parse(*args)

    def spy(rnd: Round, policy: Policy, **kwargs: Any) -> Plan:
        seen.append(policy)
        return real_solve(rnd, policy, **kwargs)

    monkeypatch.setattr(service, "parse_json", slow_parse)
    monkeypatch.setattr(service, "solve", spy)
    worker = service.Worker(ServiceSettings(token=None, max_time_limit=5.0), service.Metrics())
    response = worker.solve(_text("basic").encode(), "greedy", {})
    assert response.status_code == 200
    (policy,) = seen
    assert policy.time_limit <= 4.7
    assert policy.work_limit == pytest.approx(1.5)
    assert Plan.model_validate_json(response.body).stats.parse_seconds >= 0.3



@pytest.mark.parametrize(
    ("name", "solver"),
    [
        ("basic", "cpsat"),
        ("preemption", "cpsat"),
        ("elastic", "cpsat"),
        ("quotas", "greedy"),
        ("topology", "volcano_like"),
    ],
)
def test_solve_returns_what_the_library_returns(client: httpx.Client, name: str, solver: str) -> None:
    response = client.post("/v1/solve", params={"solver": solver}, content=_text(name))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    plan = Plan.model_validate_json(response.text)
    rnd = _served_policy(gangopt.load_round(INSTANCES / f"{name}.json"), 5.0)
    assert gangopt.validate(rnd, plan) == []
    assert _comparable(plan) == _comparable(gangopt.solve(rnd, solver=solver))  # type: ignore[arg-type]


def test_time_limit_is_clamped() -> None:
    """A round asking for an hour of search is answered within the server's 1 s limit."""
    data = json.loads(_text("scale-M"))
    data["policy"].update(time_limit=3600, work_limit=3600, gap_limit=0.0)
    with live_server(max_time_limit=1.0) as base:
        start = time.perf_counter()
        response = httpx.post(f"{base}/v1/solve", json=data, timeout=60)
        seconds = time.perf_counter() - start
    assert response.status_code == 200
    assert seconds < 1.0 * 1.05 + 0.25 + 1.5  # the hard limit's grace, plus parsing and the answer
    plan = Plan.model_validate_json(response.text)
    assert plan.status in ("feasible", "fallback")
    assert gangopt.validate(Round.model_validate(data), plan) == []


def test_validate_endpoint(client: httpx.Client) -> None:
    rnd = json.loads(_text("basic"))
    plan = client.post("/v1/solve", json=rnd).json()
    response = client.post("/v1/validate", json={"round": rnd, "plan": plan})
    assert response.status_code == 200
    assert response.json() == {"valid": True, "violations": []}

    # Two pods of one gang on a node that does not exist: the validator names it.
    broken = {**plan, "placements": [{**p, "node": "nowhere"} for p in plan["placements"]]}
    response = client.post("/v1/validate", json={"round": rnd, "plan": broken})
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False
    assert body["violations"]
    assert all(set(v) == {"rule", "message", "gang", "node"} for v in body["violations"])
    assert any("nowhere" in v["message"] for v in body["violations"])


# ----------------------------------------------------------------------------- Kubernetes import

K8S = ROOT / "tests" / "fixtures" / "k8s"
LEVEL_PAIRS = [("zone", "topology.kubernetes.io/zone"), ("rack", "cloud.provider.com/topology-rack")]


def test_import_k8s_yaml_and_json(client: httpx.Client) -> None:
    from gangopt.k8s import ImportOptions, import_documents, load_documents

    files = [K8S / "cluster.yaml", K8S / "volcano.yaml"]
    expected = import_documents(load_documents(files), ImportOptions(levels=LEVEL_PAIRS))
    params = [("level", f"{name}={label}") for name, label in LEVEL_PAIRS]
    yaml_text = "\n---\n".join(f.read_text(encoding="utf-8") for f in files)
    as_yaml = client.post(
        "/v1/import/k8s", params=params, content=yaml_text, headers={"Content-Type": "application/yaml"}
    )
    as_json = client.post("/v1/import/k8s", params=params, json={"items": load_documents(files)})
    for response in (as_yaml, as_json):
        assert response.status_code == 200, response.text
        body = response.json()
        assert Round.model_validate(body["round"]) == expected.round
        assert body["warnings"] == expected.warnings
    assert expected.round.pending and expected.round.cluster.topology_levels == ["zone", "rack"]

    # The imported round goes straight into /v1/solve.
    plan = client.post("/v1/solve", json=as_json.json()["round"])
    assert plan.status_code == 200
    assert gangopt.validate(expected.round, Plan.model_validate_json(plan.text)) == []


def test_import_k8s_errors_are_422(client: httpx.Client) -> None:
    response = client.post("/v1/import/k8s", content=(K8S / "bad-quantity.yaml").read_text(encoding="utf-8"))
    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["path"] == "items[0] (Pod default/trainer-0).spec.containers[0].resources.requests.cpu"
    assert "2 cores" in error["message"]
    response = client.post("/v1/import/k8s", params={"level": "rack"}, json={"items": []})
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "?level[0]"
    assert client.post("/v1/import/k8s", content="items: [unclosed").status_code == 422


# ----------------------------------------------------------------------------- bad input


def _cli_problems(text: str) -> list[Json]:
    """The problems the CLI prints for this round text (same parser as gangopt.io)."""
    with pytest.raises(InputError) as error:
        parse_json(Round, text, "round")
    return [{"path": p.path, "message": p.message} for p in error.value.problems]


def test_bad_round_is_422_with_the_cli_paths(client: httpx.Client) -> None:
    data = json.loads(_text("basic"))
    data["cluster"]["nodes"][3]["capacity"] = {"gpu": "eight"}
    data["pending"][1]["roles"][0]["colour"] = "blue"
    text = json.dumps(data)
    response = client.post("/v1/solve", content=text)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert errors == _cli_problems(text)
    paths = {e["path"] for e in errors}
    assert "$.cluster.nodes[3].capacity.gpu" in paths
    assert "$.pending[1].roles[0].colour" in paths


def test_cross_field_problems_and_malformed_json_are_422(client: httpx.Client) -> None:
    data = json.loads(_text("basic"))
    data["running"][0]["pods"][0]["node"] = "ghost"
    response = client.post("/v1/solve", json=data)
    assert response.status_code == 422
    assert response.json()["errors"] == _cli_problems(json.dumps(data))
    assert response.json()["errors"][0]["path"].startswith("$.running[0].pods[0]")

    response = client.post("/v1/solve", content=b'{"cluster": ')
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "$"
    assert "malformed JSON" in response.json()["errors"][0]["message"]

    response = client.post("/v1/solve", content=b"\xff\xfe")
    assert response.status_code == 422


def test_validate_paths_name_the_part(client: httpx.Client) -> None:
    rnd = json.loads(_text("basic"))
    rnd["pending"][0]["roles"][0]["replicas"] = 0
    response = client.post("/v1/validate", json={"round": rnd, "plan": {"status": "nope"}})
    assert response.status_code == 422
    paths = [e["path"] for e in response.json()["errors"]]
    assert "$.round.pending[0].roles[0].replicas" in paths
    assert "$.plan.status" in paths
    response = client.post("/v1/validate", json={"round": rnd})
    assert [e["path"] for e in response.json()["errors"]] == ["$.plan"]


def test_bad_query_and_oversized_round_are_422(client: httpx.Client) -> None:
    response = client.post("/v1/solve", params={"solver": "fastest"}, content=_text("basic"))
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "?solver"

    data = json.loads(_text("basic"))
    data["pending"][0]["roles"][0]["replicas"] = 10**9  # the schema's per-role limit
    response = client.post("/v1/solve", json=data)
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "$.pending[0].roles[0].replicas"

    data = json.loads(_text("basic"))
    data["pending"][0]["roles"][0]["replicas"] = 6000  # valid, but above this server's max_pods
    response = client.post("/v1/solve", json=data)
    assert response.status_code == 422
    assert "at most 5000" in response.json()["errors"][0]["message"]

    data = json.loads(_text("basic"))
    data["cluster"]["nodes"][1]["capacity"]["memory"] = "100Pi"  # overflows the solver's int64 arrays
    response = client.post("/v1/solve", json=data)
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "$.cluster.nodes[1].capacity.memory"


def test_unexpected_error_is_one_line_500(client: httpx.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*args: Any, **kwargs: Any) -> Plan:
        raise RuntimeError("solver exploded\n  with a second line")

    monkeypatch.setattr(service, "solve", explode)
    response = client.post("/v1/solve", content=_text("basic"))
    assert response.status_code == 500
    assert response.json() == {
        "errors": [{"path": None, "message": "internal error: solver exploded with a second line"}]
    }
    assert "Traceback" not in response.text


# ----------------------------------------------------------------------------- limits


def test_token_is_required_except_for_healthz(server: str) -> None:
    with httpx.Client(base_url=server, headers=JSON, timeout=30) as anonymous:
        assert anonymous.get("/healthz").status_code == 200
        for method, path in [
            ("POST", "/v1/solve"),
            ("POST", "/v1/validate"),
            ("GET", "/metrics"),
            ("GET", "/openapi.json"),
        ]:
            response = anonymous.request(method, path, content=_text("basic") if method == "POST" else None)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["errors"][0]["path"] is None
        wrong = {"Authorization": "Bearer not-the-token"}
        assert anonymous.post("/v1/solve", headers=wrong, content=_text("basic")).status_code == 401
        assert anonymous.post("/v1/solve", headers={"Authorization": TOKEN}, content=_text("basic")).status_code == 401
        assert anonymous.post("/v1/solve", headers=AUTH, content=_text("basic")).status_code == 200


def test_large_body_is_413(client: httpx.Client) -> None:
    before = _metric(client, "gangopt_requests_rejected_total", code="413")
    big = b" " * (300 * 1024) + _text("basic").encode()
    response = client.post("/v1/solve", content=big)  # Content-Length says it at once
    assert response.status_code == 413
    assert "at most 262144" in response.json()["errors"][0]["message"]

    def chunks() -> Iterator[bytes]:  # chunked: no Content-Length, caught while streaming
        for _ in range(3):
            yield b" " * (100 * 1024)

    response = client.post("/v1/solve", content=chunks())
    assert response.status_code == 413
    assert _metric(client, "gangopt_requests_rejected_total", code="413") == before + 2
    assert client.post("/v1/solve", content=_text("basic")).status_code == 200  # the server is fine


# ----------------------------------------------------------------------------- observability


def test_metrics_count_rounds(client: httpx.Client) -> None:
    before = _metric(client, "gangopt_rounds_solved_total")
    greedy_before = _metric(client, "gangopt_rounds_solved_total", solver="greedy")
    for _ in range(3):
        assert client.post("/v1/solve", content=_text("priorities")).status_code == 200
    assert client.post("/v1/solve", params={"solver": "greedy"}, content=_text("priorities")).status_code == 200
    assert _metric(client, "gangopt_rounds_solved_total") == before + 4
    assert _metric(client, "gangopt_rounds_solved_total", solver="greedy") == greedy_before + 1
    assert _metric(client, "gangopt_solve_seconds_count") >= before + 4
    assert _metric(client, "gangopt_queue_depth") == 0


def test_request_id_and_json_log_line(client: httpx.Client, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="gangopt.service"):
        response = client.post("/v1/solve", headers={"X-Request-ID": "round-42"}, content=_text("basic"))
        generated = client.get("/healthz").headers["x-request-id"]
        time.sleep(0.1)  # the line is written after the response is handed over
    assert response.headers["x-request-id"] == "round-42"
    assert len(generated) == 32
    records = [r for r in caplog.records if getattr(r, "request_id", None) == "round-42"]
    assert len(records) == 1
    line = records[0].__dict__
    assert (line["method"], line["path"], line["status"]) == ("POST", "/v1/solve", 200)
    assert line["nodes"] == 4 and line["pending"] == 3 and line["solver"] == "cpsat"
    assert line["plan_status"] == "optimal" and line["gap"] == 0.0 and line["duration_ms"] > 0


def test_openapi_document(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert {"/v1/solve", "/v1/validate", "/v1/import/k8s", "/healthz", "/metrics"} <= set(doc["paths"])
    solve = doc["paths"]["/v1/solve"]["post"]
    assert solve["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Round"}
    assert solve["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Plan"}
    assert {"Round", "Plan", "ValidateRequest", "ErrorBody", "Node", "PendingGang"} <= set(doc["components"]["schemas"])
    refs = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            refs.update(v for k, v in node.items() if k == "$ref")
            for v in node.values():
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)

    collect(doc)
    assert {r.rsplit("/", 1)[1] for r in refs} <= set(doc["components"]["schemas"])  # no dangling $ref


# ----------------------------------------------------------------------------- load


async def _fire(base: str, body: str, total: int, concurrency: int) -> list[httpx.Response]:
    """``total`` solve requests, ``concurrency`` in flight at a time."""
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, headers=JSON, timeout=120, limits=limits) as http:

        async def one() -> httpx.Response:
            async with gate:
                return await http.post("/v1/solve", content=body)

        return await asyncio.gather(*(one() for _ in range(total)))


def test_load_200_requests_16_at_a_time() -> None:
    with live_server(workers=2, queue_limit=32) as base:
        start = time.perf_counter()
        responses = asyncio.run(_fire(base, _text("basic"), total=200, concurrency=16))
        seconds = time.perf_counter() - start
        with httpx.Client(base_url=base) as http:
            solved = _metric(http, "gangopt_rounds_solved_total")
            rejected = _metric(http, "gangopt_requests_rejected_total")
    print(f"\nload: 200 requests, 16 concurrent, workers=2: {seconds:.2f} s")
    assert [r.status_code for r in responses] == [200] * 200
    assert solved == 200 and rejected == 0
    rnd = _served_policy(gangopt.load_round(INSTANCES / "basic.json"), 30.0)
    expected = _comparable(gangopt.solve(rnd))
    plans = [Plan.model_validate_json(r.text) for r in responses]
    assert all(_comparable(plan) == expected for plan in plans)
    assert gangopt.validate(rnd, plans[0]) == []


def test_overload_is_429_and_nothing_is_lost() -> None:
    """One worker, one queue slot, ~0.3 s solves, 12 at once: two are served, the rest are
    refused at once with Retry-After, every request gets an answer."""
    body = _text("scale-S")
    rnd = _served_policy(gangopt.load_round(INSTANCES / "scale-S.json"), 0.3)
    with live_server(workers=1, queue_limit=1, max_time_limit=0.3) as base:
        start = time.perf_counter()
        responses = asyncio.run(_fire(base, body, total=24, concurrency=12))
        seconds = time.perf_counter() - start
        with httpx.Client(base_url=base) as http:
            counted = _metric(http, "gangopt_requests_rejected_total", code="429")
            solved = _metric(http, "gangopt_rounds_solved_total")
            depth = _metric(http, "gangopt_queue_depth")
    codes = [r.status_code for r in responses]
    ok, busy = codes.count(200), codes.count(429)
    print(f"\noverload: 24 requests, 12 concurrent, workers=1 queue=1: {ok} x 200, {busy} x 429 in {seconds:.2f} s")
    assert ok + busy == len(responses) == 24
    assert ok >= 2 and busy >= 1
    assert counted == busy and solved == ok and depth == 0
    for r in responses:
        if r.status_code == 429:
            assert int(r.headers["retry-after"]) >= 1
            assert r.json()["errors"][0]["path"] is None
        else:
            assert gangopt.validate(rnd, Plan.model_validate_json(r.text)) == []


# ----------------------------------------------------------------------------- the CLI


def test_token_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GANGOPT_TOKEN", "from-env")
    assert ServiceSettings().token == "from-env"
    assert "from-env" not in repr(ServiceSettings())
    monkeypatch.setenv("GANGOPT_TOKEN", "")
    assert ServiceSettings().token is None


def test_serve_flags_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["serve", "--workers", "0", "--port", "70000", "--max-solver-workers", "0"]) == 2
    err = capsys.readouterr().err
    assert "error: --workers:" in err and "error: --port:" in err and "error: --max-solver-workers:" in err
    assert main(["serve", "--token-file", str(tmp_path / "missing")]) == 2
    assert "error: --token-file: cannot read" in capsys.readouterr().err


def test_gangopt_serve_process(tmp_path: Path) -> None:
    """The real command: JSON log lines on stderr, token from a file, graceful stop on SIGTERM."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "GANGOPT_TOKEN": ""}
    command = [sys.executable, "-m", "gangopt", "serve", "--port", str(port), "--token-file", str(token_file)]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(base)
        response = httpx.post(f"{base}/v1/solve", headers={**AUTH, **JSON}, content=_text("basic"), timeout=60)
        assert response.status_code == 200
        assert Plan.model_validate_json(response.text).status == "optimal"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(line["message"].startswith("Finished server process") for line in lines)  # graceful
    solves = [line for line in lines if line.get("path") == "/v1/solve"]
    assert len(solves) == 1
    assert solves[0]["status"] == 200 and solves[0]["plan_status"] == "optimal" and solves[0]["level"] == "INFO"


# ----------------------------------------------------------------------------- schemathesis


OPERATIONS = [
    ("POST", "/v1/solve"),
    ("POST", "/v1/validate"),
    ("POST", "/v1/import/k8s"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
]


@pytest.fixture(scope="module")
def api_schema() -> Iterator[Any]:
    """The live server's own OpenAPI document; tiny time limit so generated rounds stay cheap."""
    with live_server(max_time_limit=0.5, max_pods=2000) as base:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json")


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_api_conforms_to_its_openapi(api_schema: Any, method: str, path: str) -> None:
    """Generated requests (schemathesis, from the server's own document) never get a 5xx, and
    every answer has a documented status, content type and schema."""
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

    @given(case=api_schema[path][method].as_strategy())
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: Any) -> None:
        case.call_and_validate(checks=checks, timeout=30)

    check()
