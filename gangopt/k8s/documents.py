"""Reading manifests: JSON, YAML or multi-document YAML, with ``List`` kinds flattened.

Through the parse boundary (:mod:`gangopt.parsing`): strict JSON, and YAML without aliases,
duplicate keys or non-finite numbers (:mod:`gangopt.safe_yaml`), so a 508-byte alias bomb is
refused in milliseconds instead of growing the process without end.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gangopt import safe_yaml
from gangopt.errors import InputError, Problem
from gangopt.io import read_input
from gangopt.k8s.context import Obj
from gangopt.parsing import MAX_INPUT_BYTES, check_size, decode, guarded
from gangopt.strict_json import JSONProblem, loads


def load_documents(
    sources: list[str | Path] | None = None,
    text: str | bytes | None = None,
    limit: int = MAX_INPUT_BYTES,
    max_yaml_nodes: int = safe_yaml.MAX_NODES,
) -> list[dict[str, Any]]:
    """Read Kubernetes objects from files (``-`` is stdin) and/or ``text``: JSON, YAML or
    multi-document YAML; ``List`` kinds (what ``kubectl get -o yaml`` prints) are flattened
    so that ``items[i]`` in error paths counts objects in the order read. Problems with a whole
    document are named by its file, ``input`` for ``text`` (bytes: decoded as UTF-8 here)."""
    texts = [(str(s), _read(s, limit)) for s in sources or []]
    if text is not None:
        texts.append(("input", _renamed("input", lambda: decode(text, "input"))))
    out: list[Obj] = []
    for name, content in texts:
        with guarded(name):
            check_size(content, limit, name)
            for document in _parse_text(name, content, max_yaml_nodes):
                out += _flatten(name, document)
    return out


def _read(source: str | Path, limit: int) -> str:
    return _renamed(str(source), lambda: read_input(source, limit))


def _renamed(name: str, read: Callable[[], str]) -> str:
    """``read()``, its problems named by the document (as the others here) rather than ``$``."""
    try:
        return read()
    except InputError as error:
        raise InputError([Problem(name, p.message) for p in error.problems], name) from None


def _parse_text(name: str, content: str, max_yaml_nodes: int) -> list[Any]:
    """JSON first (fast, exact), then YAML (a superset, and multi-document)."""
    stripped = content.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [loads(content)]
        except JSONProblem as error:
            raise InputError([Problem(f"{name}: {error.path}", error.message)], name) from None
        except (json.JSONDecodeError, RecursionError):
            pass  # YAML's flow style starts so too; its parser reports what is wrong
    try:
        return [d for d in safe_yaml.load_all(content, max_yaml_nodes) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError([Problem(name, f"malformed YAML/JSON: {problem}{where}")], name) from None


def _flatten(name: str, document: Any, depth: int = 0) -> list[Obj]:
    """``{"kind": "List", "items": [...]}`` (and ``PodList`` etc.) -> its items; a bare JSON
    array -> its elements (Lists of Lists nest at most 8 deep)."""
    if depth > 8:
        raise InputError([Problem(name, "Lists nested more than 8 deep")], name)
    if isinstance(document, list):
        return [o for d in document for o in _flatten(name, d, depth + 1)]
    if not isinstance(document, dict):
        raise InputError([Problem(name, f"expected a Kubernetes object, got {type(document).__name__}")], name)
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(document.get("items"), list):
        return [o for d in document["items"] for o in _flatten(name, d, depth + 1)]
    return [document]
