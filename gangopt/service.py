"""``gangopt serve``: gangopt over HTTP, for schedulers written in other languages.

A Go scheduler (Koordinator, Volcano, Kueue, YuniKorn) cannot import the library and should
not fork a CLI per round, so this module puts :func:`gangopt.solve`, :func:`gangopt.validate`
and the Kubernetes importer behind a small FastAPI app:

- ``POST /v1/solve`` (a Round in, the Plan out, byte for byte what ``gangopt solve`` prints
  without indentation), ``POST /v1/validate``, ``POST /v1/import/k8s``;
- ``GET /healthz`` (never needs the token, for probes), ``GET /metrics`` (Prometheus) and
  ``GET /openapi.json`` (with the Round and Plan schemas, so clients can generate code).

Every non-2xx answer has one shape, ``{"errors": [{"path": ..., "message": ...}]}``: input
mistakes (422) name the JSON path exactly as the CLI does (the body goes through the same
parse boundary, :mod:`gangopt.parsing`); other errors (400, 401, 408, 413, 415, 429, 503, 500)
have ``path: null``.

Work runs off the event loop in a pool of ``workers`` threads. That is enough because
``gangopt.solve`` runs CP-SAT in a forked child that is killed at the time limit, so a thread
is only ever busy for about ``max_time_limit`` seconds. Before a request reaches the pool, its
Host and Content-Type are checked and its body is read with a size limit and a deadline
(:mod:`gangopt.http_guard`); only then does it take a slot (:mod:`gangopt.admission`), and a
queued request is cancelled when its client leaves or the server stops.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from types import FrameType
from typing import Annotated, Any, Literal, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint

from gangopt.admission import Admission
from gangopt.errors import InputError, Problem
from gangopt.http_guard import (
    JSON_TYPES,
    YAML_TYPES,
    check_content_type,
    default_allowed_hosts,
    host_allowed,
    read_body,
    wait_for_disconnect,
)
from gangopt.http_guard import Refusal as HTTPError
from gangopt.parsing import check_size, decode, load_json, parse_json, parse_model
from gangopt.schema import MAX_REPLICAS, Plan, Policy, Round
from gangopt.solve import solve
from gangopt.solvers import SolverName
from gangopt.validation import validate

__all__ = ["ServiceSettings", "create_app", "serve"]

LOGGER = logging.getLogger("gangopt.service")
M = TypeVar("M", bound=BaseModel)
LogLevel = Literal["critical", "error", "warning", "info", "debug"]


class ServiceSettings(BaseModel):
    """How the server runs. ``workers`` and ``queue_limit`` bound memory and latency: at most
    ``workers + queue_limit`` requests are held at once, the rest get 429 at once."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    workers: int = Field(2, ge=1, le=256, description="Requests worked on at once (solves, validations, imports).")
    queue_limit: int = Field(16, ge=0, description="Requests that may wait for a worker; beyond that, 429.")
    max_time_limit: float = Field(30.0, gt=0, description="Seconds; a round's policy.time_limit is clamped to it.")
    max_solver_workers: int = Field(
        1,
        ge=1,
        le=64,
        description="A round's policy.workers (CP-SAT search threads) is clamped to it, so that "
        "workers x max_solver_workers threads bound the CPU a server uses; 1 is deterministic.",
    )
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1, description="Larger request bodies get 413.")
    max_pods: int = Field(
        100_000,
        ge=1,
        description="Most pods (replicas of every gang) a round may ask for; more gets 422. The greedy "
        "plan and the expansion of CP-SAT's answer take time per pod in the server process, where no "
        "hard limit can stop them (about 60 µs per pod).",
    )
    token: str | None = Field(
        default_factory=lambda: os.environ.get("GANGOPT_TOKEN") or None,
        repr=False,
        description="Bearer token every endpoint but /healthz requires (default: $GANGOPT_TOKEN).",
    )
    max_yaml_nodes: int = Field(
        500_000,
        ge=1,
        description="Most YAML nodes (scalars, lists, maps) an import body may have; more gets 422. Each "
        "costs about 9 µs and 400 bytes to build whatever its size (4 MB of '- a' lines are a million), "
        "so YAML is capped well below max_body_bytes; large clusters should send JSON.",
    )
    body_timeout: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="Seconds a client has to send its whole body once the headers are in; then 408. "
        "No worker slot is held meanwhile.",
    )
    allowed_hosts: list[str] | None = Field(
        None,
        description="Host header names answered ('*': any); others get 400. Default: loopback names "
        "when host is a loopback address (against DNS rebinding), any otherwise.",
    )
    docs: bool = Field(False, description="Serve Swagger UI at /docs (it loads its script from a CDN).")
    log_level: LogLevel = "info"

    def hosts(self) -> list[str]:
        return self.allowed_hosts if self.allowed_hosts is not None else default_allowed_hosts(self.host)


# ----------------------------------------------------------------------------- wire models


class ErrorItem(BaseModel):
    """One problem: ``path`` is the JSON path (``$.cluster.nodes[3].capacity``) for input
    mistakes, ``?name`` for a query parameter, null for errors that are not about the input."""

    path: str | None
    message: str


class ErrorBody(BaseModel):
    """Every non-2xx answer."""

    errors: list[ErrorItem]


class ValidateRequest(BaseModel):
    """A round and a plan for it."""

    model_config = ConfigDict(extra="forbid")

    round: Round
    plan: Plan


class ViolationOut(BaseModel):
    """One broken rule (see docs/plan-semantics.md)."""

    rule: str
    message: str
    gang: str | None = None
    node: str | None = None


class ValidateResponse(BaseModel):
    """``valid`` is true exactly when ``violations`` is empty."""

    valid: bool
    violations: list[ViolationOut]


class ImportResponse(BaseModel):
    """The round built from the Kubernetes objects, and what the import had to guess or skip."""

    round: Round
    warnings: list[str]


class Health(BaseModel):
    """The answer of /healthz: the process serves HTTP (solves run in other threads)."""

    status: Literal["ok"]
    version: str


class _Envelope(BaseModel):
    """The validate body before its parts are parsed one by one (so their paths are right)."""

    model_config = ConfigDict(extra="forbid")

    round: Any
    plan: Any


# ----------------------------------------------------------------------------- metrics


class Metrics:
    """The app's Prometheus series, in a registry of its own (two apps in one process, as in
    the tests, must not share counters)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.solved = Counter(
            "gangopt_rounds_solved",
            "Rounds solved, by plan status and requested solver.",
            ["status", "solver"],
            registry=r,
        )
        self.solve_seconds = Histogram(
            "gangopt_solve_seconds",
            "Wall-clock seconds of gangopt.solve per round.",
            ["solver"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120),
            registry=r,
        )
        self.gap = Histogram(
            "gangopt_plan_gap",
            "Relative optimality gap of returned plans (0 = proven optimal); plans without a bound are not counted.",
            buckets=(0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1),
            registry=r,
        )
        self.fallbacks = Counter(
            "gangopt_fallbacks", "Solves where CP-SAT overran and the greedy plan was returned.", registry=r
        )
        self.rejected = Counter(
            "gangopt_requests_rejected", "Requests refused before any work, by HTTP status.", ["code"], registry=r
        )
        for code in ("400", "401", "408", "413", "415", "429", "503"):
            self.rejected.labels(code=code)  # shown at 0 from the start, so rate() works at once
        self.queue_depth = Gauge("gangopt_queue_depth", "Admitted requests waiting for a worker.", registry=r)
        self.running = Gauge("gangopt_requests_running", "Requests a worker is working on.", registry=r)

    def record_solve(self, plan: Plan, solver: str, seconds: float) -> None:
        self.solved.labels(status=plan.status.value, solver=solver).inc()
        self.solve_seconds.labels(solver=solver).observe(seconds)
        if plan.gap is not None:
            self.gap.observe(plan.gap)
        if plan.status.value == "fallback":
            self.fallbacks.inc()


# ----------------------------------------------------------------------------- errors


def error_response(status: int, problems: list[Problem] | str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error shape: path-named problems, or a single message with ``path: null``."""
    items = (
        [{"path": None, "message": problems}]
        if isinstance(problems, str)
        else [{"path": p.path, "message": p.message} for p in problems]
    )
    return JSONResponse({"errors": items}, status_code=status, headers=headers)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _query_problems(error: RequestValidationError) -> list[Problem]:
    """FastAPI's query-parameter errors, as ``?name`` problems like the CLI's ``--flag`` ones."""
    out = []
    for err in error.errors():
        loc = [str(part) for part in err.get("loc", ()) if part not in ("query", "header")]
        out.append(Problem("?" + ".".join(loc), str(err.get("msg", "invalid"))))
    return out


# ----------------------------------------------------------------------------- the work


def _json_response(text: str) -> Response:
    return Response(content=text, media_type="application/json")


class Worker:
    """What the endpoints run in the pool: parse, decide, serialize (all CPU-bound)."""

    def __init__(self, settings: ServiceSettings, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics

    def solve(self, body: bytes, solver: SolverName, info: dict[str, Any]) -> Response:
        limit = self.settings.max_body_bytes
        began = time.perf_counter()
        rnd = parse_json(Round, body, "round", limit, lambda data: self._check_pods(data, "$"))  # as load_round
        parsed = time.perf_counter() - began
        # The limit covers the parse too, as on the command line (Policy.after).
        policy = served_policy(rnd.policy, self.settings).after(time.perf_counter() - began)
        info.update(nodes=len(rnd.cluster.nodes), running=len(rnd.running), pending=len(rnd.pending))
        info.update(solver=solver, time_limit=policy.time_limit)
        start = time.perf_counter()
        plan = solve(rnd, policy, solver=solver)
        plan = plan.model_copy(update={"stats": plan.stats.model_copy(update={"parse_seconds": parsed})})
        seconds = time.perf_counter() - start
        self.metrics.record_solve(plan, solver, seconds)
        info.update(plan_status=plan.status.value, gap=plan.gap, solve_seconds=round(seconds, 4))
        return _json_response(plan.model_dump_json())

    def validate(self, body: bytes, info: dict[str, Any]) -> Response:
        data = self._load(body, "request")
        self._check_pods(data.get("round") if isinstance(data, dict) else None, "$.round")
        envelope = parse_model(_Envelope, data, "request")
        problems: list[Problem] = []
        rnd = _parse_part(Round, envelope.round, "round", problems)
        plan = _parse_part(Plan, envelope.plan, "plan", problems)
        if rnd is None or plan is None:
            raise InputError(problems, "request")
        violations = validate(rnd, plan)
        info.update(nodes=len(rnd.cluster.nodes), pending=len(rnd.pending), violations=len(violations))
        out = ValidateResponse(
            valid=not violations,
            violations=[ViolationOut(rule=v.rule, message=v.message, gang=v.gang, node=v.node) for v in violations],
        )
        return _json_response(out.model_dump_json())

    def import_k8s(self, body: bytes, levels: list[tuple[str, str]], info: dict[str, Any]) -> Response:
        from gangopt import k8s  # written alongside; imported here so solve never needs it

        limit, nodes = self.settings.max_body_bytes, self.settings.max_yaml_nodes
        objects = _unwrap(k8s.load_documents(text=body, limit=limit, max_yaml_nodes=nodes))
        imported = k8s.import_documents(objects, k8s.ImportOptions(levels=levels))
        pods = sum(g.total_replicas for g in [*imported.round.running, *imported.round.pending])
        self._refuse_pods(pods, "$.round")
        info.update(objects=len(objects), warnings=len(imported.warnings))
        out = ImportResponse.model_construct(round=imported.round, warnings=list(imported.warnings))
        return _json_response(out.model_dump_json())

    def _load(self, body: bytes, source: str) -> Any:
        """Strict JSON of a body already within max_body_bytes, refused before parsing when it
        is denser in objects than real input (see gangopt.parsing.check_size)."""
        text = decode(body, source)
        check_size(text, self.settings.max_body_bytes, source)
        return load_json(text, source)

    def _check_pods(self, data: Any, path: str) -> None:
        """Refuse rounds the library would spend unbounded time on in this process, counted on
        the parsed JSON before any model is built (a round of 10^6 pods costs about 1 GB as
        models). Malformed parts count as nothing: validation names them afterwards."""
        pods = 0
        if isinstance(data, dict):
            for kind in ("running", "pending"):
                gangs = data.get(kind)
                for gang in gangs if isinstance(gangs, list) else []:
                    roles = gang.get("roles") if isinstance(gang, dict) else None
                    for role in roles if isinstance(roles, list) else []:
                        replicas = role.get("replicas") if isinstance(role, dict) else None
                        if isinstance(replicas, bool) or not isinstance(replicas, int):
                            continue
                        if 0 < replicas <= MAX_REPLICAS:  # larger ones fail validation, at their path
                            pods += replicas
        self._refuse_pods(pods, path)

    def _refuse_pods(self, pods: int, path: str) -> None:
        if pods > self.settings.max_pods:
            limit = self.settings.max_pods
            message = f"the round has {pods} pods (replicas of every gang); this server takes at most {limit}"
            raise InputError([Problem(path, message)], "round")


def served_policy(policy: Policy, settings: ServiceSettings) -> Policy:
    """The policy a round is solved with here: its time limit and CP-SAT threads clamped to the
    server's, and ``hard_limit`` forced on (in-process CP-SAT could hold a worker thread past
    any limit)."""
    return policy.model_copy(
        update={
            "time_limit": min(policy.time_limit, settings.max_time_limit),
            "workers": min(policy.workers, settings.max_solver_workers),
            "hard_limit": True,
        }
    )


def _unwrap(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A kind-less ``{"items": [...]}`` (what a client builds by hand) is a List too."""
    return [
        item
        for obj in objects
        for item in (obj["items"] if "kind" not in obj and isinstance(obj.get("items"), list) else [obj])
    ]


def _parse_part(model: type[M], data: Any, name: str, problems: list[Problem]) -> M | None:
    """Parse ``data`` as ``model`` with paths under ``$.name``; collect problems, don't raise."""
    try:
        return parse_model(model, data, name)
    except InputError as error:
        problems += [Problem(f"$.{name}{p.path.removeprefix('$')}", p.message) for p in error.problems]
        return None


# ----------------------------------------------------------------------------- the app


_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in {
        400: "The Host header is not in the server's allow-list.",
        401: "Missing or wrong bearer token.",
        408: "The body did not arrive within the server's body_timeout.",
        413: "The body is larger than the server's max_body_bytes.",
        415: "The Content-Type is not one the endpoint reads.",
        422: "The input is unusable; every problem is named by its JSON path.",
        429: "Every worker and queue slot is taken; retry after the Retry-After header's seconds.",
        503: "The server is shutting down; retry after the Retry-After header's seconds (at another replica).",
        500: "Unexpected failure, as one line.",
    }.items()
}


def create_app(settings: ServiceSettings) -> FastAPI:
    """The app: routes, the pool and its admission, metrics, auth, request logs."""
    metrics = Metrics()
    admission = Admission(settings.workers, settings.queue_limit, metrics.queue_depth, metrics.running)
    pool = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="gangopt-worker")
    worker = Worker(settings, metrics)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        admission.drain()
        pool.shutdown(wait=False, cancel_futures=True)

    from gangopt import __version__

    app = FastAPI(
        title="gangopt",
        version=__version__,
        description="Optimal gang placement for GPU clusters: one scheduling round in, a plan out.",
        lifespan=lifespan,
        docs_url="/docs" if settings.docs else None,
        redoc_url=None,
    )
    app.state.admission = admission  # serve() drains it on SIGTERM

    def stopping() -> HTTPError:
        retry = str(max(1, round(settings.max_time_limit)))
        return HTTPError(503, "the server is shutting down; retry at another replica", {"Retry-After": retry})

    async def run(
        request: Request, job: Callable[[bytes, dict[str, Any]], Response], types: tuple[str, ...] = JSON_TYPES
    ) -> Response:
        """Check the content type, read the body (bounded in size and time), take a slot, run
        ``job`` in the pool and answer its response; a queued job is cancelled when its client
        leaves (nobody reads the answer) or the server drains (503)."""
        if admission.draining:
            raise stopping()
        check_content_type(request, types)
        body = await read_body(request, settings.max_body_bytes, settings.body_timeout)
        if not admission.try_acquire():
            if admission.draining:
                raise stopping()
            retry = str(admission.retry_after())
            raise HTTPError(429, "server busy: every worker and queue slot is taken", {"Retry-After": retry})
        info: dict[str, Any] = request.state.log
        started: list[float] = []

        def work() -> Response:
            started.append(time.perf_counter())
            admission.started()
            try:
                return job(body, info)
            except InputError as error:
                info["problems"] = len(error.problems)
                return error_response(422, error.problems)

        future: Future[Response] = pool.submit(work)
        admission.track(future, lambda: started[0] if started else None)  # type: ignore[arg-type]
        answer = asyncio.wrap_future(future)
        gone = asyncio.ensure_future(wait_for_disconnect(request))
        try:
            waited: set[asyncio.Future[Any]] = {answer, gone}
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if not answer.done():  # the client left: drop the job if it has not started
            info["disconnected"] = True
            if future.cancel():
                info["cancelled"] = True
            answer.cancel()
            return error_response(499, "client closed the request")
        try:
            return answer.result()
        except (CancelledError, asyncio.CancelledError):
            info["cancelled"] = True
            raise stopping() from None

    @app.post(
        "/v1/solve",
        response_model=Plan,
        responses=_ERRORS,
        openapi_extra=_body("Round"),
        summary="Decide one round",
    )
    async def solve_round(request: Request, solver: SolverName = "cpsat") -> Response:
        """The plan for the round in the body, as ``gangopt.solve`` returns it. The round's
        ``policy.time_limit`` is clamped to the server's ``max_time_limit``."""
        return await run(request, lambda body, info: worker.solve(body, solver, info))

    @app.post(
        "/v1/validate",
        response_model=ValidateResponse,
        responses=_ERRORS,
        openapi_extra=_body("ValidateRequest"),
        summary="Check a plan against a round",
    )
    async def validate_plan(request: Request) -> Response:
        """Every rule the plan breaks (docs/plan-semantics.md); problem paths start at
        ``$.round`` or ``$.plan``."""
        return await run(request, worker.validate)

    @app.post(
        "/v1/import/k8s",
        response_model=ImportResponse,
        responses=_ERRORS,
        openapi_extra=_K8S_BODY,
        summary="Build a round from Kubernetes objects",
    )
    async def import_k8s(
        request: Request,
        level: Annotated[list[str], Query(description="A topology level as NAME=LABEL, repeatable.")] = [],  # noqa: B006
    ) -> Response:
        """Nodes, pods, PodGroups and queues (JSON: a v1 List or ``{"items": [...]}``; or YAML
        with ``Content-Type: application/yaml``) to a round, with the import's warnings."""
        levels = _levels(level)
        return await run(request, lambda body, info: worker.import_k8s(body, levels, info), JSON_TYPES + YAML_TYPES)

    @app.get("/healthz", response_model=Health, summary="Liveness probe (no token needed)")
    async def healthz() -> Health:
        return Health(status="ok", version=__version__)

    @app.get(
        "/metrics",
        response_class=Response,
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, 401: _ERRORS[401]},
        summary="Prometheus metrics",
    )
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(RequestValidationError)
    async def on_bad_query(_: Request, error: RequestValidationError) -> JSONResponse:
        return error_response(422, _query_problems(error))

    @app.exception_handler(InputError)
    async def on_bad_input(_: Request, error: InputError) -> JSONResponse:
        return error_response(422, error.problems)

    @app.exception_handler(HTTPError)
    async def on_refusal(_: Request, error: HTTPError) -> JSONResponse:
        metrics.rejected.labels(code=str(error.status)).inc()
        return error_response(error.status, error.message, error.headers)

    app.add_middleware(BaseHTTPMiddleware, dispatch=_frame(settings, metrics))
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


def _frame(
    settings: ServiceSettings, metrics: Metrics
) -> Callable[[Request, RequestResponseEndpoint], Awaitable[Response]]:
    """The middleware around every request: request id, Host allow-list, bearer token, the 500
    safety net and the one JSON log line."""
    token = settings.token.encode() if settings.token else None
    hosts = settings.hosts()

    async def frame(request: Request, call_next: RequestResponseEndpoint) -> Response:
        start = time.perf_counter()
        given = request.headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        request.state.log = {}
        response: Response
        if request.url.path != "/healthz" and not host_allowed(request.headers.get("host"), hosts):  # probes
            metrics.rejected.labels(code="400").inc()
            response = error_response(400, "this Host is not served here (see --allowed-host)")
        elif token is not None and request.url.path != "/healthz" and not _authorized(request, token):
            metrics.rejected.labels(code="401").inc()
            response = error_response(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        else:
            try:
                response = await call_next(request)
            except Exception as error:  # the contract: one line in the body, the traceback in the log
                LOGGER.exception("unhandled error", extra={"request_id": request_id})
                response = error_response(500, f"internal error: {_one_line(error)}")
        response.headers["X-Request-ID"] = request_id
        LOGGER.info(
            "request",
            extra={
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - start) * 1000, 2),
                "request_id": request_id,
                **request.state.log,
            },
        )
        return response

    return frame


def _levels(items: list[str]) -> list[tuple[str, str]]:
    """``?level=zone=topology.kubernetes.io/zone`` -> ``("zone", "topology.kubernetes.io/zone")``.

    Checked here rather than by a Query pattern: FastAPI applies a pattern on a list parameter
    to the list itself and fails with a 500.
    """
    levels, problems = [], []
    for i, item in enumerate(items):
        name, _, label = item.partition("=")
        if name and label:
            levels.append((name, label))
        else:
            problems.append(Problem(f"?level[{i}]", f"{item!r} is not NAME=LABEL"))
    if problems:
        raise InputError(problems, "query")
    return levels


def _authorized(request: Request, token: bytes) -> bool:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token)


def _body(schema: str) -> dict[str, Any]:
    """An OpenAPI request body of a component schema. The endpoints read the raw body
    themselves (so the size limit and the CLI's error paths apply); this documents it."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
        }
    }


_K8S_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "A v1 List (or any object with items) of Nodes, Pods, PodGroups, queues.",
                    "properties": {"items": {"type": "array", "items": {"type": "object"}}},
                    "required": ["items"],
                }
            },
            "application/yaml": {"schema": {"type": "string", "description": "One or more YAML documents."}},
        },
    }
}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the request-body schemas it cannot see (the bodies are read
    raw), generated by pydantic like the rest and keeping FastAPI's names where both exist."""
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        _, defs = models_json_schema(
            [(Round, "validation"), (ValidateRequest, "validation")], ref_template="#/components/schemas/{model}"
        )
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for name, schema in defs.get("$defs", {}).items():
            schemas.setdefault(name, schema)
        app.openapi_schema = document
    return app.openapi_schema


# ----------------------------------------------------------------------------- running it


def log_config(level: LogLevel) -> dict[str, Any]:
    """``logging.config`` for JSON lines on stderr, for our logger and uvicorn's (whose access
    log is off: the request line above carries more)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    logger = {"handlers": ["stderr"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
                "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            }
        },
        "handlers": {"stderr": handler},
        "loggers": {"gangopt": logger, "uvicorn": logger, "uvicorn.error": logger},
    }


def serve(settings: ServiceSettings) -> None:
    """Run the server until SIGINT/SIGTERM, then drain: queued requests are answered 503 at
    once, running ones finish (each within about ``max_time_limit``), and uvicorn is told to
    give up on connections after ``max_time_limit + DRAIN_SLACK`` seconds whatever happens."""
    import uvicorn

    app = create_app(settings)
    admission: Admission = app.state.admission

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            cancelled = admission.drain()
            LOGGER.info("draining", extra={"signal": sig, "cancelled": cancelled})
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=log_config(settings.log_level),
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(settings.max_time_limit + DRAIN_SLACK),
    )
    _Server(config).run()


DRAIN_SLACK = 5.0
"""Seconds a stop may take beyond ``max_time_limit``: the greedy plan and the expansion of
CP-SAT's answer after the hard limit, and the answers' writing (measured: under 1 s for
scale-M)."""
