"""``gangopt import k8s`` and ``gangopt export k8s``: Kubernetes manifests to a round, and a plan
back to Bindings, Evictions and status patches (see :mod:`gangopt.k8s` and
:mod:`gangopt.k8s.export`).

Registered by :mod:`gangopt.cli`; same contract: warnings on stderr as ``warning: ...``, input
problems as ``error: PATH: message`` with exit 2 and nothing written, output written atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from gangopt.cli.output import emit
from gangopt.errors import InputError, Problem
from gangopt.io import load_plan
from gangopt.k8s import Imported, ImportOptions, export_plan, import_documents, load_documents
from gangopt.replay.generate import dump_round
from gangopt.schema import Policy


def add_parsers(sub: Any) -> Any:
    """Register the ``import`` and ``export`` groups, each with its ``k8s`` format; returns the
    ``import`` group's format subparsers, where :mod:`gangopt.cli.trace` adds ``trace``."""
    p = sub.add_parser(
        "import", help="k8s: a round from kubectl get -o yaml/json; trace: a workload from a CSV of jobs"
    )
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    imports = formats
    k = formats.add_parser("k8s", help="nodes, pods and gang objects (PodGroup, Workload, ...) to a round")
    k.add_argument("files", nargs="+", metavar="FILE", help="YAML or JSON manifests ('-' reads stdin)")
    k.add_argument("-o", "--output", metavar="ROUND.json", help="write the round here (atomically) instead of stdout")
    _add_level_option(k)
    k.add_argument("--time-limit", type=float, metavar="S", help="policy.time_limit of the round")
    k.set_defaults(func=run_import)

    p = sub.add_parser("export", help="turn a plan into other formats (k8s: Bindings, Evictions, status)")
    formats = p.add_subparsers(dest="format", required=True, metavar="FORMAT")
    k = formats.add_parser("k8s", help="the API objects that apply a plan to the imported manifests")
    k.add_argument("plan", metavar="PLAN.json")
    k.add_argument("--manifests", nargs="+", required=True, metavar="FILE", help="the manifests the round came from")
    _add_level_option(k)
    k.add_argument("-o", "--output", metavar="OUT", help="write here (atomically) instead of stdout")
    k.add_argument("--format", dest="output_format", choices=["yaml", "json"], default="yaml", help="default: yaml")
    k.set_defaults(func=run_export)
    return imports


def _add_level_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--level",
        action="append",
        default=[],
        metavar="NAME=LABEL",
        help="a topology level and its node label, coarsest first (repeatable), e.g. rack=example.com/rack",
    )


def _levels(terms: list[str]) -> list[tuple[str, str]]:
    out, problems = [], []
    for term in terms:
        name, eq, label = term.partition("=")
        if not eq or not name or not label or name == "node":
            problems.append(Problem("--level", f"expected NAME=LABEL (NAME not 'node'), got {term!r}"))
        else:
            out.append((name, label))
    if problems:
        raise InputError(problems, "arguments")
    return out


def _import(files: list[str], levels: list[str], policy: Policy | None = None) -> Imported:
    options = ImportOptions(levels=_levels(levels), policy=policy)
    return import_documents(load_documents(list(files)), options)


def _warn(lines: list[str]) -> None:
    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def run_import(args: argparse.Namespace) -> int:
    policy = None
    if args.time_limit is not None:
        if not args.time_limit > 0:
            raise InputError([Problem("--time-limit", "must be > 0")], "arguments")
        policy = Policy(time_limit=args.time_limit)
    imported = _import(args.files, args.level, policy)
    emit(dump_round(imported.round), args.output)
    _warn(imported.warnings)
    return 0


def run_export(args: argparse.Namespace) -> int:
    plan = load_plan(args.plan)
    imported = _import(args.manifests, args.level)
    notes: list[str] = []
    objects = export_plan(plan, imported, notes)
    if args.output_format == "json":
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"
    else:
        text = yaml.safe_dump_all(objects, sort_keys=False) if objects else ""
    emit(text, args.output)
    _warn(imported.warnings + notes)
    return 0
