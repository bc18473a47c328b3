"""``gangopt serve``: run the HTTP service of :mod:`gangopt.service`.

Kept apart from :mod:`gangopt.cli` (which only registers it) so the CLI does not import
FastAPI and uvicorn for the round-level commands. Same error contract: a bad flag value is an
:class:`~gangopt.errors.InputError` naming the flag, which the CLI turns into exit code 2.
"""

from __future__ import annotations

import argparse
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gangopt.errors import InputError, Problem
from gangopt.http_guard import is_loopback

if TYPE_CHECKING:
    from gangopt.service import ServiceSettings

# ServiceSettings field -> flag, so that a rejected value is reported at the flag that set it.
_FLAGS = {
    "host": "--host",
    "port": "--port",
    "workers": "--workers",
    "queue_limit": "--queue-limit",
    "max_time_limit": "--max-time-limit",
    "max_solver_workers": "--max-solver-workers",
    "max_body_bytes": "--max-body-mb",
    "max_pods": "--max-pods",
    "token": "--token-file",
    "log_level": "--log-level",
    "body_timeout": "--body-timeout",
    "allowed_hosts": "--allowed-host",
    "docs": "--docs",
}


def add_parser(sub: Any) -> None:
    """Register ``serve`` on the CLI's subparsers."""
    p = sub.add_parser(
        "serve",
        help="serve solve/validate/import over HTTP (POST /v1/solve, /v1/validate, /v1/import/k8s)",
        description="Run gangopt as an HTTP service for schedulers in other languages. "
        "OpenAPI at /openapi.json, Prometheus metrics at /metrics, liveness at /healthz.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--workers", type=int, default=2, metavar="N", help="requests worked on at once (default 2)")
    p.add_argument(
        "--queue-limit", type=int, default=16, metavar="N", help="requests waiting beyond the workers; more get 429"
    )
    p.add_argument(
        "--max-time-limit", type=float, default=30.0, metavar="S", help="clamp policy.time_limit to S (default 30)"
    )
    p.add_argument(
        "--max-solver-workers",
        type=int,
        default=1,
        metavar="N",
        help="clamp policy.workers (CP-SAT threads per solve) to N (default 1)",
    )
    p.add_argument("--max-body-mb", type=float, default=32.0, metavar="MB", help="larger bodies get 413 (default 32)")
    p.add_argument("--max-pods", type=int, default=100_000, metavar="N", help="larger rounds get 422 (default 100000)")
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="require 'Authorization: Bearer <the file's content>' (default: $GANGOPT_TOKEN if set)",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds a client has to send its whole body; then 408 (default 10)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a Host header name to answer, repeatable; '*' for any (default: loopback names on a "
        "loopback address, any otherwise)",
    )
    p.add_argument("--docs", action="store_true", help="serve Swagger UI at /docs (loads its script from a CDN)")
    p.add_argument(
        "--insecure-no-token",
        action="store_true",
        help="allow listening on a non-loopback address without a token (anyone who reaches the port can use it)",
    )
    p.add_argument(
        "--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info", help="default info"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the settings from the flags (bad values -> exit 2), then serve until interrupted."""
    from gangopt.service import serve

    serve(settings_from_args(args))
    return 0


def settings_from_args(args: argparse.Namespace) -> ServiceSettings:
    """The :class:`~gangopt.service.ServiceSettings` the flags describe."""
    from pydantic import ValidationError

    from gangopt.service import ServiceSettings  # FastAPI and uvicorn load only for this command

    values: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "workers": args.workers,
        "queue_limit": args.queue_limit,
        "max_time_limit": args.max_time_limit,
        "max_solver_workers": args.max_solver_workers,
        "max_body_bytes": int(args.max_body_mb * 1024 * 1024),
        "max_pods": args.max_pods,
        "log_level": args.log_level,
        "body_timeout": args.body_timeout,
        "allowed_hosts": args.allowed_host,
        "docs": args.docs,
    }
    if args.token_file is not None:
        values["token"] = _read_token(args.token_file)
    try:
        settings = ServiceSettings(**values)
    except ValidationError as error:
        problems = []
        for err in error.errors(include_url=False):
            field = str(err["loc"][0]) if err["loc"] else ""
            problems.append(Problem(_FLAGS.get(field, field), err["msg"]))
        raise InputError(problems, "arguments") from None
    if settings.token is None and not is_loopback(settings.host) and not args.insecure_no_token:
        message = (
            f"{settings.host} is not a loopback address and no token is set (--token-file or $GANGOPT_TOKEN): "
            "anyone who reaches the port could use the server; pass --insecure-no-token to serve anyway"
        )
        raise InputError([Problem("--host", message)], "arguments")
    return settings


def _read_token(path: str) -> str:
    """The token in ``path``; a file other users may read is warned about (the token is then
    theirs too), not refused: a Kubernetes Secret volume is 0644 unless defaultMode says otherwise."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
        mode = Path(path).stat().st_mode
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise InputError([Problem("--token-file", f"cannot read {path}: {reason}")], "arguments") from None
    if mode & stat.S_IROTH:
        print(f"warning: --token-file {path} is readable by every user (chmod 600 it)", file=sys.stderr)
    if not token:
        raise InputError([Problem("--token-file", f"{path} is empty")], "arguments")
    return token
