"""Reading manifests: JSON, YAML or multi-document YAML, with ``List`` kinds flattened."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from gangopt.errors import InputError, Problem
from gangopt.k8s.context import Obj


def load_documents(sources: list[str | Path] | None = None, text: str | None = None) -> list[dict[str, Any]]:
    """Read Kubernetes objects from files (``-`` is stdin) and/or ``text``: JSON, YAML or
    multi-document YAML; ``List`` kinds (what ``kubectl get -o yaml`` prints) are flattened
    so that ``items[i]`` in error paths counts objects in the order read."""
    texts = [(str(s), _read(s)) for s in sources or []]
    if text is not None:
        texts.append(("input", text))
    out: list[Obj] = []
    for name, content in texts:
        for document in _parse_text(name, content):
            out += _flatten(name, document)
    return out


def _read(source: str | Path) -> str:
    if str(source) == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise InputError([Problem(str(source), f"cannot read: {error.strerror}")], str(source)) from None


def _parse_text(name: str, content: str) -> list[Any]:
    """JSON first (fast, exact), then YAML (a superset, and multi-document)."""
    stripped = content.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(content)]
        except json.JSONDecodeError:
            pass
    try:
        return [d for d in yaml.safe_load_all(content) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError([Problem(name, f"malformed YAML/JSON: {problem}{where}")], name) from None


def _flatten(name: str, document: Any) -> list[Obj]:
    """``{"kind": "List", "items": [...]}`` (and ``PodList`` etc.) -> its items; a bare JSON
    array -> its elements."""
    if isinstance(document, list):
        return [o for d in document for o in _flatten(name, d)]
    if not isinstance(document, dict):
        raise InputError([Problem(name, f"expected a Kubernetes object, got {type(document).__name__}")], name)
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        return [o for d in document["items"] for o in _flatten(name, d)]
    return [document]
