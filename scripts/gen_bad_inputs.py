#!/usr/bin/env python3
"""Write the bad-input corpus ``tests/fixtures/bad-inputs/`` (issue 14).

Each case is one file and one entry of ``cases.json``: what it is (``round``: given to
``gangopt solve`` and ``POST /v1/solve``; ``validate``: ``POST /v1/validate``; ``k8s``: given to
``gangopt import k8s`` and ``POST /v1/import/k8s``), the JSON path the first matching problem
must start with, and a word its message must contain. ``tests/test_bad_inputs.py`` checks that
every case gets exit code 2 (nothing on stdout) and HTTP 422 (never a 500), with that path.

The files are committed; rerun this script after changing a case (``python
scripts/gen_bad_inputs.py``). ``<source>`` in a path stands for the file name (CLI) or
``input`` (HTTP), which is how the importer names document-level problems.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "bad-inputs"

BASE: dict[str, Any] = {
    "api_version": "gangopt/v1",
    "cluster": {
        "topology_levels": ["rack"],
        "nodes": [
            {
                "name": "n0",
                "capacity": {"gpu": 8, "cpu": 96, "memory": "1Ti"},
                "labels": {"gpu.model": "h100"},
                "topology": {"rack": "r0"},
            },
            {"name": "n1", "capacity": {"gpu": 8, "cpu": 96, "memory": "1Ti"}, "topology": {"rack": "r0"}},
        ],
    },
    "queues": [{"name": "team-a", "nominal": {"gpu": 16}}],
    "running": [
        {
            "name": "serve",
            "queue": "team-a",
            "priority": 50,
            "roles": [{"name": "worker", "replicas": 1, "requests": {"gpu": 4}}],
            "pods": [{"name": "serve-0", "role": "worker", "node": "n1"}],
        }
    ],
    "pending": [
        {
            "name": "train",
            "queue": "team-a",
            "roles": [{"name": "worker", "replicas": 2, "requests": {"gpu": 4}}],
            "submit_time": 0,
        }
    ],
    "policy": {"time_limit": 1},
}

Cases = list[dict[str, Any]]


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation setting ``path`` (``cluster.nodes.0.name``) to ``value``."""

    def apply(data: dict[str, Any]) -> None:
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return apply


def _round_with(mutate: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(BASE)
    mutate(data)
    text = json.dumps(data, indent=1, ensure_ascii=False)
    return text if len(text) < 4000 else json.dumps(data, ensure_ascii=False)  # long lists on one line


def _raw(old: str, new: str) -> str:
    """The base round's text with ``old`` (which must occur) replaced once by ``new``."""
    text = json.dumps(BASE, indent=1)
    assert old in text, old
    return text.replace(old, new, 1)


def _deep(levels: int) -> str:
    """Arrays nested ``levels`` deep, padded so that the density check lets them through to the
    parser (whose nesting limit they are meant to meet)."""
    return "[       " * levels + "]" * levels


def round_cases() -> list[tuple[str, str | bytes, str, str]]:
    """(name, content, path, word)."""
    q = "cluster.nodes.0.capacity.gpu"
    qp = "$.cluster.nodes[0].capacity.gpu"
    set_cases: list[tuple[str, str, Any, str, str]] = [
        ("quantity-nan-string", q, "NaN", qp, "quantity"),
        ("quantity-inf-string", q, "inf", qp, "quantity"),
        ("quantity-huge-exponent", q, "1e999999999", qp, "quantity"),
        ("quantity-underscore", q, "1_0", qp, "quantity"),
        ("quantity-fullwidth-digits", q, "\uff11\uff10", qp, "quantity"),
        ("quantity-negative", q, "-1", qp, "negative"),
        ("quantity-bool", q, True, qp, "quantity"),
        ("quantity-empty", q, "", qp, "quantity"),
        ("quantity-space-suffix", q, "8 Gi", qp, "quantity"),
        ("quantity-too-fine", q, "1n", qp, "milli"),
        ("quantity-float-huge", q, 1e308, qp, "too large"),
        ("quantity-too-large", q, "100Ei", qp, "too large"),
        ("quantity-object", q, {"value": 8}, qp, "quantity"),
        ("quantity-list", q, [8], qp, "quantity"),
        ("quantity-unknown-suffix", q, "8Xi", qp, "quantity"),
        ("priority-string", "pending.0.priority", "5", "$.pending[0].priority", "integer"),
        ("priority-float", "pending.0.priority", 5.0, "$.pending[0].priority", "integer"),
        ("priority-over-int32", "pending.0.priority", 2**31, "$.pending[0].priority", "less than"),
        ("replicas-bool", "pending.0.roles.0.replicas", True, "$.pending[0].roles[0].replicas", "integer"),
        ("replicas-string", "pending.0.roles.0.replicas", "2", "$.pending[0].roles[0].replicas", "integer"),
        ("replicas-zero", "pending.0.roles.0.replicas", 0, "$.pending[0].roles[0].replicas", "greater"),
        ("replicas-billion", "pending.0.roles.0.replicas", 10**9, "$.pending[0].roles[0].replicas", "less"),
        ("min-replicas-huge", "pending.0.roles.0.min_replicas", 10**12, "$.pending[0].roles[0].min_replicas", "less"),
        ("min-members-huge", "pending.0.min_members", 10**12, "$.pending[0].min_members", "less"),
        ("queue-lending-without-cohort", "queues.0.lending_limit", {"gpu": 4}, "$.queues[0].lending_limit", "cohort"),
        (
            "weight-fragmentation-1e308",
            "policy.weights",
            {"fragmentation": 1e308},
            "$.policy.weights.fragmentation",
            "less",
        ),
        ("weight-growth-string", "policy.weights", {"growth": "1"}, "$.policy.weights.growth", "number"),
        (
            "weight-aging-negative",
            "policy.weights",
            {"aging_per_hour": -1},
            "$.policy.weights.aging_per_hour",
            "greater",
        ),
        ("time-limit-1e300", "policy.time_limit", 1e300, "$.policy.time_limit", "less"),
        ("time-limit-zero", "policy.time_limit", 0, "$.policy.time_limit", "greater"),
        ("time-limit-string", "policy.time_limit", "10", "$.policy.time_limit", "number"),
        ("work-limit-huge", "policy.work_limit", 1e300, "$.policy.work_limit", "less"),
        ("seed-huge", "policy.seed", 2**40, "$.policy.seed", "less"),
        ("seed-negative", "policy.seed", -1, "$.policy.seed", "greater"),
        ("workers-zero", "policy.workers", 0, "$.policy.workers", "greater"),
        ("workers-bool", "policy.workers", True, "$.policy.workers", "integer"),
        ("preemption-string", "policy.preemption", "true", "$.policy.preemption", "boolean"),
        ("hard-limit-int", "policy.hard_limit", 1, "$.policy.hard_limit", "boolean"),
        ("gap-limit-two", "policy.gap_limit", 2, "$.policy.gap_limit", "less"),
        ("now-huge", "policy.now", -1e300, "$.policy.now", "greater"),
        ("submit-time-huge", "pending.0.submit_time", 1e12, "$.pending[0].submit_time", "less"),
        ("submit-time-string", "pending.0.submit_time", "0", "$.pending[0].submit_time", "number"),
        ("deadline-bool", "pending.0.deadline", True, "$.pending[0].deadline", "number"),
        ("deadline-nan-string", "pending.0.deadline", "NaN", "$.pending[0].deadline", "number"),
        (
            "checkpoint-huge",
            "running.0.seconds_since_checkpoint",
            1e200,
            "$.running[0].seconds_since_checkpoint",
            "less",
        ),
        ("preemption-cost-huge", "running.0.preemption_cost", 1e100, "$.running[0].preemption_cost", "less"),
        ("preemptible-string", "running.0.preemptible", "no", "$.running[0].preemptible", "boolean"),
        ("schedulable-int", "cluster.nodes.0.schedulable", 0, "$.cluster.nodes[0].schedulable", "boolean"),
        (
            "slice-size-zero",
            "pending.0.topology",
            {"slice_level": "rack", "slice_size": 0},
            "$.pending[0].topology.slice_size",
            "greater",
        ),
        ("node-name-nul", "cluster.nodes.0.name", "n\u00000", "$.cluster.nodes[0].name", "node name"),
        ("node-name-254", "cluster.nodes.0.name", "n" * 254, "$.cluster.nodes[0].name", "253"),
        ("node-name-uppercase", "cluster.nodes.0.name", "Node-0", "$.cluster.nodes[0].name", "node name"),
        ("node-name-underscore", "cluster.nodes.0.name", "node_0", "$.cluster.nodes[0].name", "node name"),
        ("node-name-empty", "cluster.nodes.0.name", "", "$.cluster.nodes[0].name", "at least"),
        ("node-name-number", "cluster.nodes.0.name", 7, "$.cluster.nodes[0].name", "string"),
        ("gang-name-bidi", "pending.0.name", "train\u202egnp.exe", "$.pending[0].name", "U+202E"),
        ("gang-name-zero-width", "pending.0.name", "tra\u200bin", "$.pending[0].name", "U+200B"),
        ("gang-name-newline", "pending.0.name", "train\nFAKE LOG LINE", "$.pending[0].name", "U+000A"),
        ("gang-name-escape", "pending.0.name", "train\u001b[31m", "$.pending[0].name", "U+001B"),
        ("queue-name-nul", "queues.0.name", "team\u0000a", "$.queues[0].name", "U+0000"),
        (
            "label-value-newline",
            "cluster.nodes.0.labels",
            {"gpu.model": "h100\nx"},
            "$.cluster.nodes[0].labels.gpu.model",
            "U+000A",
        ),
        (
            "label-value-long",
            "cluster.nodes.0.labels",
            {"gpu.model": "x" * 2000},
            "$.cluster.nodes[0].labels.gpu.model",
            "at most",
        ),
        (
            "label-value-number",
            "cluster.nodes.0.labels",
            {"gpu.model": 100},
            "$.cluster.nodes[0].labels.gpu.model",
            "string",
        ),
        (
            "resource-name-control",
            "cluster.nodes.0.capacity",
            {"gpu\u0007": 8},
            "$.cluster.nodes[0].capacity",
            "U+0007",
        ),
        (
            "taint-value-bidi",
            "cluster.nodes.0.taints",
            [{"key": "k", "value": "\u2066x"}],
            "$.cluster.nodes[0].taints[0].value",
            "U+2066",
        ),
        (
            "taints-300",
            "cluster.nodes.0.taints",
            [{"key": f"k{i}"} for i in range(300)],
            "$.cluster.nodes[0].taints",
            "at most",
        ),
        (
            "tolerations-1000",
            "pending.0.roles.0.tolerations",
            [{"operator": "Exists"}] * 1000,
            "$.pending[0].roles[0].tolerations",
            "at most",
        ),
        (
            "affinity-values-1000",
            "pending.0.roles.0.node_affinity",
            [{"key": "k", "operator": "In", "values": [str(i) for i in range(1000)]}],
            "$.pending[0].roles[0].node_affinity[0].values",
            "at most",
        ),
        (
            "labels-300",
            "cluster.nodes.0.labels",
            {f"k{i}": "v" for i in range(300)},
            "$.cluster.nodes[0].labels",
            "at most",
        ),
        ("levels-20", "cluster.topology_levels", [f"l{i}" for i in range(20)], "$.cluster.topology_levels", "at most"),
        (
            "roles-70",
            "pending.0.roles",
            [{"name": f"r{i}", "replicas": 1, "requests": {"gpu": 1}} for i in range(70)],
            "$.pending[0].roles",
            "at most",
        ),
        ("roles-empty", "pending.0.roles", [], "$.pending[0].roles", "at least"),
        ("unknown-field", "pending.0.colour", "blue", "$.pending[0].colour", "unknown"),
        ("api-version-wrong", "api_version", "gangopt/v2", "$.api_version", "gangopt/v1"),
        ("pods-empty", "running.0.pods", [], "$.running[0].pods", "at least"),
        ("pod-unknown-node", "running.0.pods.0.node", "ghost", "$.running[0].pods[0].node", "does not exist"),
        ("cluster-null", "cluster", None, "$.cluster", "object"),
        ("nodes-object", "cluster.nodes", {"n0": {}}, "$.cluster.nodes", "array"),
        (
            "topology-domain-nul",
            "cluster.nodes.0.topology",
            {"rack": "r\u00000"},
            "$.cluster.nodes[0].topology.rack",
            "U+0000",
        ),
    ]
    out: list[tuple[str, str | bytes, str, str]] = [
        (name, _round_with(_set(path, value)), where, word) for name, path, value, where, word in set_cases
    ]
    deep = '{"cluster": {"nodes": [], "topology_levels": ' + _deep(10_000) + "}}"
    out += [
        ("json-nan", _raw('"gpu": 8', '"gpu": NaN'), "$", "NaN"),
        ("json-infinity-time", _raw('"submit_time": 0', '"submit_time": Infinity'), "$", "Infinity"),
        ("json-minus-infinity-limit", _raw('"time_limit": 1', '"time_limit": -Infinity'), "$", "-Infinity"),
        ("json-1e999", _raw('"time_limit": 1', '"time_limit": 1e999'), "$", "finite"),
        ("json-weight-nan", _raw('"time_limit": 1', '"time_limit": 1, "weights": {"spread": NaN}'), "$", "NaN"),
        ("json-long-integer", _raw('"priority": 50', '"priority": ' + "9" * 5000), "$", "digits"),
        (
            "json-duplicate-key-node",
            _raw('"name": "n0"', '"name": "n0", "name": "n9"'),
            "$.cluster.nodes[0].name",
            "duplicate",
        ),
        (
            "json-duplicate-key-top",
            _raw('"api_version": "gangopt/v1"', '"api_version": "gangopt/v1", "api_version": "gangopt/v1"'),
            "$.api_version",
            "duplicate",
        ),
        (
            "json-duplicate-key-policy",
            _raw('"time_limit": 1', '"time_limit": 1, "time_limit": 1000'),
            "$.policy.time_limit",
            "duplicate",
        ),
        ("json-nested-10000", deep, "$", "nested"),
        ("json-nested-2000-labels", '{"x": ' + _deep(2000) + "}", "$", "nested"),
        ("json-trailing-garbage", json.dumps(BASE) + " x", "$", "malformed"),
        ("json-single-quotes", "{'cluster': {}}", "$", "malformed"),
        ("json-comment", "// a round\n" + json.dumps(BASE), "$", "malformed"),
        ("json-truncated", json.dumps(BASE)[:100], "$", "malformed"),
        ("json-empty", "", "$", "malformed"),
        ("json-array", "[]", "$", "object"),
        ("json-string", '"round"', "$", "object"),
        ("json-null", "null", "$", "object"),
        ("json-empty-object", "{}", "$.cluster", "required"),
        ("json-dense-objects", '{"x": [' + ",".join(["{}"] * 20_000) + "]}", "$", "objects and arrays"),
        ("json-control-in-string", _raw('"n0"', '"n\t0"').replace("\\t", "\t"), "$", "malformed"),
        ("bytes-latin1", _round_with(_set("pending.0.name", "tr\u00e4in")).encode("latin-1"), "$", "UTF-8"),
        ("bytes-utf16", json.dumps(BASE).encode("utf-16"), "$", "UTF-8"),
        ("bytes-binary", bytes(range(256)), "$", "UTF-8"),
        (
            "bytes-lone-surrogate",
            _round_with(_set("pending.0.name", "x")).replace('"x"', '"\\ud800"').encode(),
            "$",
            "JSON",
        ),
    ]
    return out


def validate_cases() -> list[tuple[str, str, str, str]]:
    plan = {"status": "optimal", "admitted": [], "placements": []}
    env = {"round": BASE, "plan": plan}
    text = json.dumps(env)
    return [
        ("plan-status-unknown", json.dumps({"round": BASE, "plan": {"status": "nope"}}), "$.plan.status", "optimal"),
        ("round-missing", json.dumps({"plan": plan}), "$.round", "required"),
        ("extra-part", json.dumps({**env, "notes": 1}), "$.notes", "unknown"),
        ("duplicate-part", text.replace('"plan":', '"round": {}, "plan":', 1), "$.round", "duplicate"),
        ("plan-gap-nan", text.replace('"placements": []', '"placements": [], "gap": NaN'), "$", "NaN"),
        (
            "round-priority-string",
            json.dumps({"round": {**BASE, "pending": [{**BASE["pending"][0], "priority": "1"}]}, "plan": plan}),
            "$.round.pending[0].priority",
            "integer",
        ),
    ]


BOMB = (
    "kind: List\napiVersion: v1\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 9))
    + "items: *l8\n"
)

NODE = """apiVersion: v1
kind: Node
metadata:
  name: {name}
status:
  allocatable: {{cpu: "{cpu}", memory: 64Gi, nvidia.com/gpu: "8"}}
"""
POD = """apiVersion: v1
kind: Pod
metadata:
  name: trainer-0
  namespace: default
spec:
  {extra}
  containers:
  - name: c
    resources:
      requests: {{cpu: "{cpu}"}}
"""


def k8s_cases() -> list[tuple[str, str | bytes, str, str]]:
    node = NODE.format(name="n1", cpu="8")
    pod_path = "items[1] (Pod default/trainer-0)"
    n1 = "items[0] (Node n1)"

    def with_pod(cpu: str = "1", extra: str = "restartPolicy: Never") -> str:
        return node + "---\n" + POD.format(cpu=cpu, extra=extra)

    deep_yaml = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: " + "[" * 200 + "]" * 200 + "\n"
    long_name = "n" * 300
    return [
        ("alias-bomb", BOMB, "<source>", "aliases"),
        (
            "alias-one",
            node + "---\napiVersion: v1\nkind: Pod\nmetadata: &m {name: p, namespace: default}\n"
            "spec: {containers: []}\n---\napiVersion: v1\nkind: Pod\nmetadata: *m\nspec: {}\n",
            "<source>",
            "aliases",
        ),
        ("alias-merge-key", "base: &b {apiVersion: v1}\n---\n<<: *b\nkind: Node\n", "<source>", "aliases"),
        ("yaml-duplicate-key", node.replace("kind: Node\n", "kind: Node\nkind: Pod\n"), "<source>", "duplicate"),
        ("yaml-allocatable-nan", node.replace('cpu: "8"', "cpu: .nan"), "<source>", "finite"),
        ("yaml-allocatable-inf", node.replace('cpu: "8"', "cpu: .inf"), "<source>", "finite"),
        ("yaml-allocatable-minus-inf", node.replace('cpu: "8"', "cpu: -.Inf"), "<source>", "finite"),
        ("yaml-long-integer", node.replace('cpu: "8"', "cpu: " + "9" * 60), "<source>", "integer"),
        ("yaml-nested-200", deep_yaml, "<source>", "nested"),
        ("yaml-syntax", "items: [unclosed\n", "<source>", "malformed"),
        ("yaml-tab-indent", "apiVersion: v1\n\tkind: Node\n", "<source>", "malformed"),
        ("yaml-python-tag", "!!python/object/apply:os.system ['true']\n", "<source>", "malformed"),
        ("yaml-scalar-document", "hello\n", "<source>", "Kubernetes object"),
        (
            "json-nan-allocatable",
            json.dumps(
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": 8}}}
            ).replace("8", "NaN"),
            "<source>: $",
            "NaN",
        ),
        (
            "json-duplicate-name",
            '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "name": "n2"}}',
            "<source>: $.metadata.name",
            "duplicate",
        ),
        ("json-nested-10000", '{"kind": "List", "items": ' + _deep(10_000) + "}", "<source>", "nested"),
        ("json-lists-nested", '{"kind": "List", "items": ' + "[" * 20 + "]" * 20 + "}", "<source>", "Lists"),
        ("bytes-latin1", node.replace("n1", "n\u00e4").encode("latin-1"), "<source>", "UTF-8"),
        ("bytes-utf16", node.encode("utf-16"), "<source>", "UTF-8"),
        (
            "cluster-queue-lending-above-nominal",
            node
            + "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: cq}\nspec:\n"
            "  cohort: all\n  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n"
            "    - name: h100\n      resources: [{name: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 9}]\n",
            "items[1] (ClusterQueue cq).spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            "nominalQuota",
        ),
        ("node-name-300", NODE.format(name=long_name, cpu="8"), f"items[0] (Node {long_name}).metadata.name", "253"),
        ("node-name-uppercase", NODE.format(name="Node1", cpu="8"), "items[0] (Node Node1).metadata.name", "node name"),
        ("node-name-space", NODE.format(name='"n 1"', cpu="8"), "items[0] (Node n 1).metadata.name", "node name"),
        ("node-name-nul", NODE.format(name='"n\\0"', cpu="8"), "items[0] (Node n\x00).metadata.name", "node name"),
        ("node-allocatable-nan-string", NODE.format(name="n1", cpu="NaN"), f"{n1}.status.allocatable.cpu", "quantity"),
        (
            "node-allocatable-huge-exponent",
            NODE.format(name="n1", cpu="1e999999999"),
            f"{n1}.status.allocatable.cpu",
            "quantity",
        ),
        ("node-allocatable-underscore", NODE.format(name="n1", cpu="1_0"), f"{n1}.status.allocatable.cpu", "quantity"),
        (
            "node-taint-bad-effect",
            node + "spec:\n  taints: [{key: k, effect: Sometimes}]\n",
            f"{n1}.spec.taints[0]",
            "effect",
        ),
        (
            "pod-request-underscore",
            with_pod(cpu="1_0"),
            f"{pod_path}.spec.containers[0].resources.requests.cpu",
            "quantity",
        ),
        (
            "pod-request-words",
            with_pod(cpu="2 cores"),
            f"{pod_path}.spec.containers[0].resources.requests.cpu",
            "quantity",
        ),
        ("pod-priority-string", with_pod(extra='priority: "5"'), f"{pod_path}.spec.priority", "integer"),
        ("pod-unknown-node", with_pod(extra="nodeName: ghost"), f"{pod_path}.spec.nodeName", "not in the input"),
        (
            "pod-toleration-operator",
            with_pod(extra="tolerations: [{key: k, operator: Maybe}]"),
            f"{pod_path}.spec.tolerations[0]",
            "operator",
        ),
        (
            "pod-containers-object",
            with_pod().replace("  containers:\n  - name: c", "  containers:\n    name: c"),
            f"{pod_path}.spec.containers",
            "list",
        ),
        (
            "pod-bad-timestamp",
            with_pod().replace("  namespace: default\n", "  namespace: default\n  creationTimestamp: yesterday\n"),
            f"{pod_path}.metadata.creationTimestamp",
            "RFC 3339",
        ),
        (
            "node-taint-key-300",
            node + "spec:\n  taints: [{key: " + "k" * 300 + ", effect: NoSchedule}]\n",
            f"{n1}.spec.taints[0].key",
            "253",
        ),
        (
            "node-label-bidi",
            node.replace("  name: n1\n", '  name: n1\n  labels: {a: "x\\u202ey"}\n'),
            f"{n1}.metadata.labels.a",
            "U+202E",
        ),
        (
            "pod-selector-nul",
            with_pod(extra='nodeSelector: {disk: "s\\0"}'),
            f"{pod_path}.spec.nodeSelector.disk",
            "U+0000",
        ),
        (
            "pod-toleration-value-long",
            with_pod(extra="tolerations: [{key: k, value: " + "v" * 2000 + "}]"),
            f"{pod_path}.spec.tolerations[0].value",
            "at most",
        ),
        ("object-without-kind", "apiVersion: v1\nmetadata: {name: x}\n", "items[0]", "kind"),
        (
            "object-without-name",
            "apiVersion: v1\nkind: Node\nmetadata: {}\n",
            "items[0] (Node ).metadata.name",
            "missing",
        ),
        (
            "podgroup-unknown-group",
            "apiVersion: example.com/v1\nkind: PodGroup\nmetadata: {name: g, namespace: d}\n",
            "items[0] (PodGroup d/g).apiVersion",
            "unsupported",
        ),
        (
            "podgroup-min-member-string",
            node + "---\napiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
            "metadata: {name: g, namespace: default}\nspec: {minMember: many}\n",
            "items[1] (PodGroup default/g).spec.minMember",
            "integer",
        ),
        (
            "priorityclass-value-string",
            'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: "1000"\n',
            "items[0] (PriorityClass high).value",
            "integer",
        ),
    ]


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    index: Cases = []
    for kind, cases, ext in (
        ("round", round_cases(), "json"),
        ("validate", validate_cases(), "json"),
        ("k8s", k8s_cases(), "yaml"),
    ):
        folder = OUT / kind
        folder.mkdir(parents=True)
        for name, content, path, word in cases:
            suffix = "json" if kind == "k8s" and name.startswith("json-") else ext
            file = folder / f"{name}.{suffix}"
            file.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
            index.append({"file": f"{kind}/{file.name}", "kind": kind, "path": path, "word": word})
    (OUT / "cases.json").write_text(json.dumps(index, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(index)} cases to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
