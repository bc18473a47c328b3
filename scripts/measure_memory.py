#!/usr/bin/env python3
"""Peak memory growth of one service request per byte of its body (docs/limits.md).

Each case runs in a fresh process (``ru_maxrss`` only grows), through the service's worker
exactly as ``POST /v1/solve`` or ``POST /v1/import/k8s`` runs it, without HTTP::

    python scripts/measure_memory.py            # every case
    python scripts/measure_memory.py nodes      # one case
"""

from __future__ import annotations

import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("tolerations-flood", "bad-nodes", "nodes", "scale-M", "k8s-json", "k8s-yaml", "yaml-flood")
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "d"},
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


def body(case: str) -> bytes:
    if case == "tolerations-flood":
        items = ",".join(["{}"] * 1_000_000)
        role = '{"replicas":1,"requests":{},"tolerations":[' + items + "]}"
        return ('{"cluster":{"nodes":[]},"pending":[{"name":"g","roles":[' + role + "]}]}").encode()
    if case == "bad-nodes":
        node = '{"name":1,"capacity":{"gpu":"x"},"labels":{"a":1}}'
        return ('{"cluster":{"nodes":[' + ",".join([node] * 60_000) + "]}}").encode()
    if case == "nodes":
        nodes = [{"name": f"n{i}", "capacity": {"gpu": 8}} for i in range(100_000)]
        return json.dumps({"cluster": {"nodes": nodes}}, separators=(",", ":")).encode()
    if case == "scale-M":
        return (ROOT / "instances" / "scale-M.json").read_bytes()
    pods = [dict(POD, metadata={"name": f"p{i}", "namespace": "d"}) for i in range(20_000)]
    if case == "k8s-json":
        return json.dumps({"kind": "List", "items": pods}).encode()
    if case == "k8s-yaml":
        import yaml

        return yaml.safe_dump_all(pods[:5000]).encode()
    return ("- a\n" * 1_000_000).encode()  # yaml-flood


def measure(case: str) -> str:
    sys.path.insert(0, str(ROOT))
    from gangopt.errors import InputError
    from gangopt.service import Metrics, ServiceSettings, Worker

    data = body(case)
    worker = Worker(ServiceSettings(token=None), Metrics())
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    try:
        if case.startswith(("k8s", "yaml")):
            answer = str(worker.import_k8s(data, [], {}).status_code)
        else:
            answer = str(worker.solve(data, "greedy", {}).status_code)
    except InputError as error:
        answer = f"422 {error.problems[0].path}"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    size = len(data) / 1e6
    seconds = time.perf_counter() - start
    return f"{case:18} body {size:5.2f} MB  peak +{grown:6.0f} MB = {grown / size:6.1f}x  {seconds:5.2f} s  {answer}"


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(measure(sys.argv[2]))
        return
    for case in sys.argv[1:] or CASES:
        subprocess.run([sys.executable, __file__, "--one", case], check=True)


if __name__ == "__main__":
    main()
