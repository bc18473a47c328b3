"""Issue 14: what an attacker or an unlucky operator does to the service, the CLI and the import.

Time-based tests use short limits (a body deadline of 1-2 s, solves of 1-2 s) so the file runs
in about 20 s. The bad-input corpus is in ``test_bad_inputs.py``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from gangopt.cli import main
from gangopt.errors import InputError
from gangopt.k8s import ImportOptions, import_documents, load_documents
from gangopt.parsing import parse_json
from gangopt.schema import Round
from gangopt.service import ServiceSettings
from tests.test_service import _wait_healthy, live_server

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
BAD = ROOT / "tests" / "fixtures" / "bad-inputs"
JSON = {"Content-Type": "application/json"}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# ----------------------------------------------------------------------------- bombs


def test_alias_bomb_is_refused_in_under_a_second_and_50_mb() -> None:
    bomb = (BAD / "k8s" / "alias-bomb.yaml").read_text(encoding="utf-8")
    assert len(bomb) < 600
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(InputError) as caught:
        load_documents(text=bomb)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"\nalias bomb: refused in {seconds * 1000:.1f} ms, peak {peak / 1e6:.2f} MB traced")
    assert "aliases are not allowed" in caught.value.problems[0].message
    assert seconds < 1.0 and peak < 50e6


def test_alias_bomb_over_http_and_the_server_stays_small() -> None:
    bomb = (BAD / "k8s" / "alias-bomb.yaml").read_bytes()
    with live_server() as base, httpx.Client(base_url=base, timeout=10) as http:
        before = _rss_mb()
        start = time.perf_counter()
        response = http.post("/v1/import/k8s", content=bomb, headers={"Content-Type": "application/yaml"})
        seconds = time.perf_counter() - start
        grown = _rss_mb() - before
        assert http.get("/healthz").status_code == 200
    print(f"\nalias bomb over HTTP: {response.status_code} in {seconds * 1000:.0f} ms, server RSS +{grown:.1f} MB")
    assert response.status_code == 422
    assert response.json()["errors"][0]["path"] == "input"
    assert seconds < 1.0 and grown < 50


@pytest.mark.parametrize("levels", [10_000, 100_000])
def test_deep_json_is_refused_quickly(levels: int) -> None:
    text = '{"cluster": ' + "[ " * levels + "]" * levels + "}"
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(InputError) as caught:
        parse_json(Round, text, "round")
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert caught.value.problems[0].path == "$"
    assert seconds < 1.0 and peak < 50e6


def test_a_million_tolerations_never_become_objects() -> None:
    """The issue's 4 MB body that took the server from 145 to 819 MB: refused before parsing."""
    items = ",".join(["{}"] * 1_000_000)
    body = '{"cluster":{"nodes":[]},"pending":[{"name":"g","roles":[{"replicas":1,"requests":{},"tolerations":['
    body += items + "]}]}]}"
    tracemalloc.start()
    with pytest.raises(InputError) as caught:
        parse_json(Round, body.encode(), "round")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"\n1,000,000 tolerations ({len(body) / 1e6:.1f} MB): peak {peak / 1e6:.1f} MB traced beyond the body")
    assert "objects and arrays" in caught.value.problems[0].message
    assert peak < 3 * len(body)  # the body's bytes and text


def test_many_bad_nodes_report_the_first_and_stay_small() -> None:
    node = '{"name":1,"capacity":{"gpu":"x"},"labels":{"a":1}}'
    body = '{"cluster":{"nodes":[' + ",".join([node] * 60_000) + "]}}"
    tracemalloc.start()
    with pytest.raises(InputError) as caught:
        parse_json(Round, body, "round")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert {p.path for p in caught.value.problems} <= {
        "$.cluster.nodes[0].name",
        "$.cluster.nodes[0].capacity.gpu",
        "$.cluster.nodes[0].labels.a",
    }
    assert peak < 20 * len(body)


# ----------------------------------------------------------------------------- slow and gone clients


def _slow_client(port: int, declared: int = 1000) -> socket.socket:
    """A client that sends its headers and one byte of a ``declared``-byte body, then stalls."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        f"POST /v1/solve HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\n\r\n{{"
    )
    sock.sendall(head.encode())
    return sock


def test_twenty_slow_clients_do_not_block_a_normal_request() -> None:
    """Before the fix the slow clients held every admission slot: the normal request got 429
    at once, and only the 5 s body deadline would free them. Now it is answered as fast as
    without them: under 2 s, or 3x the same request alone when the machine is loaded (the
    time is compared with a run measured in the same test, not with an absolute alone)."""
    body = (INSTANCES / "basic.json").read_bytes()
    with live_server(workers=1, queue_limit=2, body_timeout=5.0, max_time_limit=2.0) as base:
        start = time.perf_counter()
        assert httpx.post(f"{base}/v1/solve", content=body, headers=JSON).status_code == 200
        alone = time.perf_counter() - start
        port = int(base.rsplit(":", 1)[1])
        slow = [_slow_client(port) for _ in range(20)]
        try:
            time.sleep(0.2)
            start = time.perf_counter()
            response = httpx.post(f"{base}/v1/solve", content=body, headers=JSON)
            seconds = time.perf_counter() - start
        finally:
            for s in slow:
                s.close()
    print(f"\n20 slow clients: a normal solve answered {response.status_code} in {seconds:.2f} s (alone {alone:.2f} s)")
    assert response.status_code == 200
    assert seconds < max(2.0, 3 * alone) and seconds < 5.0


def test_a_body_that_does_not_arrive_gets_408() -> None:
    with live_server(body_timeout=0.5) as base:
        port = int(base.rsplit(":", 1)[1])
        sock = _slow_client(port)
        sock.settimeout(5)
        start = time.perf_counter()
        answer = sock.recv(4096).decode()
        seconds = time.perf_counter() - start
        sock.close()
    assert answer.startswith("HTTP/1.1 408")
    assert 0.4 < seconds < 2.0


def _busy(time_limit: float) -> bytes:
    """A round whose solve takes its whole time limit: the contended S round under Kueue-like
    reclaim (bench.queue_policies), asked for a proven optimum; CP-SAT needs 3.4 CPU-s to prove
    it, so at 2 s it searches to the limit (1.73 s of wall, three runs out of three). scale-M
    served here before; since the slot placer proves its tiers it answers in 0.06-0.33 s,
    before the clients this file makes hang up had left."""
    from bench.queue_policies import RECLAIM, with_queues
    from bench.rounds import round_text

    rnd = with_queues(Round.model_validate_json(round_text("S", contention=True)), RECLAIM)
    data = json.loads(rnd.model_dump_json())
    data["policy"].update(time_limit=time_limit, gap_limit=0.0)
    return json.dumps(data).encode()


_LEAVERS = """
import socket, sys, threading, time
port, count, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
body = open(path, "rb").read()
head = "POST /v1/solve HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\n"
head += f"Content-Length: {len(body)}\\r\\n\\r\\n"
def leave():
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head.encode() + body)
    time.sleep(0.3)
    sock.close()
threads = [threading.Thread(target=leave) for _ in range(count)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


def _post_and_hang_up(port: int, body: bytes, count: int, tmp_path: Path) -> None:
    """``count`` clients that send a solve and hang up 0.3 s later, in a process of their own:
    sockets of this process would be inherited by the CP-SAT child the server forks (it runs in
    this process here), and a socket still open in a child sends no FIN when closed here."""
    file = tmp_path / "round.json"
    file.write_bytes(body)
    subprocess.run([sys.executable, "-c", _LEAVERS, str(port), str(count), str(file)], check=True, timeout=60)


def _metric(base: str, name: str) -> float:
    text = httpx.get(f"{base}/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_queued_work_of_clients_that_left_is_cancelled(tmp_path: Path) -> None:
    """One worker busy for about 2 s, six clients queue a solve each and hang up after 0.3 s:
    their solves never run, so a request after them is answered as soon as the worker is free
    (without cancellation: six more solves, about 12 s)."""
    body = _busy(2.0)
    with live_server(workers=1, queue_limit=8, max_time_limit=2.0) as base:
        port = int(base.rsplit(":", 1)[1])
        busy = threading.Thread(target=lambda: httpx.post(f"{base}/v1/solve", content=body, headers=JSON, timeout=30))
        busy.start()
        deadline = time.monotonic() + 10
        while _metric(base, "gangopt_requests_running") < 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # the busy solve holds the worker before anyone queues
        before = _metric(base, "gangopt_rounds_solved_total")
        _post_and_hang_up(port, body, 6, tmp_path)
        start = time.perf_counter()
        response = httpx.post(
            f"{base}/v1/solve", content=(INSTANCES / "basic.json").read_bytes(), headers=JSON, timeout=30
        )
        seconds = time.perf_counter() - start
        busy.join()
        solved = _metric(base, "gangopt_rounds_solved_total")
    print(f"\n6 clients gone: the next solve answered in {seconds:.2f} s; {solved:.0f} solves ran")
    assert response.status_code == 200
    assert solved - before == 2
    assert seconds < 5.0


def test_sigterm_cancels_the_queue_and_drains_within_the_time_limit(tmp_path: Path) -> None:
    """``gangopt serve`` with one worker: one solve runs, four wait; on SIGTERM the four get 503
    with Retry-After at once, the running one finishes, and the process is gone within
    max_time_limit + 5 s."""
    limit = 2.0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "GANGOPT_TOKEN": ""}
    command = [sys.executable, "-m", "gangopt", "serve", "--port", str(port), "--workers", "1"]
    command += ["--queue-limit", "8", "--max-time-limit", str(limit), "--log-level", "warning"]
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    responses: list[httpx.Response] = []
    try:
        _wait_healthy(base)
        body = _busy(limit)

        def post() -> None:
            responses.append(httpx.post(f"{base}/v1/solve", content=body, headers=JSON, timeout=30))

        clients = [threading.Thread(target=post) for _ in range(5)]
        for t in clients:
            t.start()
        deadline = time.monotonic() + 20
        while _metric(base, "gangopt_queue_depth") < 4 and time.monotonic() < deadline:
            time.sleep(0.05)  # one solve running, four queued
        proc.send_signal(signal.SIGTERM)
        stopped = time.perf_counter()
        for t in clients:
            t.join(30)
        proc.wait(timeout=limit + 10)
        seconds = time.perf_counter() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
    codes = sorted(r.status_code for r in responses)
    print(f"\nSIGTERM with 1 running and 4 queued: {codes}, process gone {seconds:.2f} s after the signal")
    assert codes == [200, 503, 503, 503, 503]
    assert all(int(r.headers["retry-after"]) >= 1 for r in responses if r.status_code == 503)
    assert seconds <= limit + 5


# ----------------------------------------------------------------------------- exposure


def test_content_type_host_and_docs() -> None:
    text = (INSTANCES / "basic.json").read_bytes()
    with live_server() as base, httpx.Client(base_url=base, timeout=30) as http:
        plain = http.post("/v1/solve", content=text, headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415 and plain.json()["errors"][0]["path"] is None
        assert http.post("/v1/solve", content=text).status_code == 415
        rebound = http.post("/v1/solve", content=text, headers={**JSON, "Host": "evil.example:8080"})
        assert rebound.status_code == 400
        assert http.get("/healthz", headers={"Host": "localhost:1"}).status_code == 200
        assert http.get("/docs").status_code == 404
        assert http.get("/openapi.json").status_code == 200
    with live_server(docs=True, allowed_hosts=["gangopt.example"]) as base, httpx.Client(base_url=base) as http:
        assert http.get("/docs", headers={"Host": "gangopt.example"}).status_code == 200
        assert http.get("/docs").status_code == 400  # 127.0.0.1 is not in this list


def test_serve_refuses_a_public_address_without_a_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gangopt.cli import build_parser
    from gangopt.cli.serve import settings_from_args

    monkeypatch.setenv("GANGOPT_TOKEN", "")
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    assert "error: --host:" in capsys.readouterr().err
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--insecure-no-token"])
    assert settings_from_args(args).hosts() == ["*"]
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o644)
    args = build_parser().parse_args(["serve", "--host", "0.0.0.0", "--token-file", str(token)])
    assert isinstance(settings_from_args(args), ServiceSettings)
    assert "readable by every user" in capsys.readouterr().err
    token.chmod(0o600)
    settings_from_args(args)
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- files and the importer


def test_output_files_honour_the_umask(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    old = os.umask(0o027)
    try:
        assert main(["solve", str(INSTANCES / "basic.json"), "--solver", "greedy", "-o", str(out)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"nvidia.com/gpu": "8"}},
}


def _pod(name: str, gated: bool = False, **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/quota"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "d", "labels": labels},
        "spec": spec,
    }


def test_import_without_levels_prints_valid_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"kind": "List", "apiVersion": "v1", "items": [NODE, _pod("p")]}))
    assert main(["import", "k8s", str(manifest)]) == 0
    rnd = json.loads(capsys.readouterr().out)
    assert rnd["cluster"]["nodes"][0]["name"] == "n1" and "topology_levels" not in rnd["cluster"]
    from gangopt.replay.clusters import dump_cluster

    assert json.loads(dump_cluster(Round.model_validate(rnd).cluster))["nodes"][0]["name"] == "n1"


def test_gated_pods_leave_the_quorum_and_the_bindings() -> None:
    group = {"scheduling.x-k8s.io/pod-group": "pg"}
    pod_group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": "d"},
        "spec": {"minMember": 3},
    }
    pods = [_pod("p0", **group), _pod("p1", **group), _pod("p2", gated=True, **group)]
    imported = import_documents([NODE, pod_group, *pods], ImportOptions())
    assert imported.round.pending == []  # 2 schedulable pods, minimum 3: waits for the gate
    assert any("schedulingGates" in w for w in imported.warnings)
    pod_group["spec"] = {"minMember": 2}
    imported = import_documents([NODE, pod_group, *pods], ImportOptions())
    assert imported.round.pending[0].total_replicas == 2
    refs = [r.name for role in imported.pending_pods["d/pg"].values() for r in role]
    assert refs == ["p0", "p1"]


def test_elastic_quota_of_scheduler_plugins_and_volcano_hierarchy_are_warnings() -> None:
    quota = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "d"},
        "spec": {"min": {"cpu": "1"}},
    }
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "child", "annotations": {"volcano.sh/hierarchy": "root/child"}},
        "spec": {"capability": {"nvidia.com/gpu": "8"}},
    }
    imported = import_documents([NODE, quota, queue, _pod("p")], ImportOptions())
    assert any("ElasticQuota" in w and "not mapped" in w for w in imported.warnings)
    assert any("volcano.sh/hierarchy" in w for w in imported.warnings)


# ----------------------------------------------------------------------------- schemathesis, negative


@pytest.fixture(scope="module")
def negative_schema() -> Iterator[Any]:
    with live_server(max_time_limit=0.3, max_pods=2000) as base:
        yield schemathesis.openapi.from_url(f"{base}/openapi.json")


@pytest.mark.parametrize("path", ["/v1/solve", "/v1/validate", "/v1/import/k8s"])
def test_invalid_requests_never_get_a_server_error(negative_schema: Any, path: str) -> None:
    """schemathesis' negative mode: bodies and parameters that break the schema on purpose."""

    @given(case=negative_schema[path]["POST"].as_strategy(generation_mode=GenerationMode.NEGATIVE))
    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: Any) -> None:
        response = case.call(timeout=30)
        assert response.status_code < 500, response.text
        case.validate_response(response, checks=[not_a_server_error])

    check()
