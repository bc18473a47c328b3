"""What the service checks about a request before it reads or parses anything of it.

- **Host**: a token-less server on loopback could be driven by any web page through DNS
  rebinding (a page of ``evil.example`` whose name then resolves to 127.0.0.1 reads the
  answers); only the names in the allow-list are answered (loopback names by default when
  listening on loopback).
- **Content-Type**: a browser sends a cross-site ``text/plain`` POST without asking first (a
  CORS "simple request"), and the server used to execute it; ``application/json`` (or YAML
  for the import) needs a preflight that this server never grants.
- **The body**: read with a size limit (413) and a deadline (408), before a worker slot is
  taken, so slow uploads hold a connection and nothing else.
"""

from __future__ import annotations

import asyncio
import ipaddress

from starlette.requests import Request

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")

JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")


class Refusal(Exception):
    """A request refused before its content is looked at (400, 408, 413, 415)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def default_allowed_hosts(bind: str) -> list[str]:
    """Loopback names when listening on loopback; any name otherwise (a token guards those)."""
    return list(LOOPBACK_HOSTS) if is_loopback(bind) else ["*"]


def host_allowed(header: str | None, allowed: list[str]) -> bool:
    """``Host: 127.0.0.1:8080`` against ``["127.0.0.1", ...]`` (port ignored; ``*`` allows any)."""
    if "*" in allowed:
        return True
    if not header:
        return False
    name = header.strip().lower()
    if name.startswith("["):  # [::1]:8080
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    return name in {a.lower().strip("[]") for a in allowed}


def check_content_type(request: Request, accepted: tuple[str, ...]) -> None:
    """415 unless the request says its body is one of ``accepted`` (parameters ignored)."""
    given = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if given not in accepted:
        shown = given or "none"
        raise Refusal(415, f"Content-Type {shown} is not accepted here; send {' or '.join(accepted)}")


async def read_body(request: Request, limit: int, deadline: float) -> bytes:
    """The body, refused with 413 as soon as it is known to exceed ``limit`` bytes (from
    Content-Length before reading anything, else while streaming) and with 408 when it has
    not fully arrived ``deadline`` seconds after the headers."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refusal(413, f"the body has {int(declared)} bytes; this server takes at most {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(deadline):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise Refusal(413, f"the body exceeds {limit} bytes, the most this server takes")
                chunks.append(chunk)
    except TimeoutError:
        raise Refusal(408, f"the body did not arrive within {deadline:g} s", {"Connection": "close"}) from None
    return b"".join(chunks)


async def wait_for_disconnect(request: Request) -> None:
    """Return once the client has gone (its body already read: the next message is the
    disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
