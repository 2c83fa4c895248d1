"""Serving an ASGI app (admin API, schema registry, REST catalog) inside the node's event loop."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import uvicorn

from tabletopic.config import StartupError

log = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_S = 2

# In the ``tls`` options of an HttpService: (lowest, highest) TLS version (``ssl.enabled.protocols``).
# uvicorn has no option for them, so they are set on the context it builds, before it serves.
TLS_VERSIONS = "tls_versions"


def parse_listener(url: str) -> tuple[str, int]:
    """``http://127.0.0.1:8080`` -> ``("127.0.0.1", 8080)``."""
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.hostname is None or parsed.port is None:
        raise ValueError(f"listener {url!r} must look like http://HOST:PORT")
    return parsed.hostname, parsed.port


def bind_socket(name: str, host: str, port: int, key: str | None) -> socket.socket:
    """A listening socket, or a :class:`StartupError` naming the service and the key to change.

    Bound here rather than by uvicorn, which logs a bind error and calls ``sys.exit`` (a
    ``SystemExit`` out of the event loop with a long traceback).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # The protocol must be named: asyncio turns Nagle's algorithm off on accepted connections only
    # when the socket says IPPROTO_TCP (proto 0 does not count), and with Nagle on, a response
    # written as headers then body waits for the client's delayed ACK — 40 ms per request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        change = f"change {key}" if key else "change its listener setting"
        reason = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise StartupError(f"{name} cannot listen on {host}:{port}: {reason}; {change}", key) from exc
    sock.setblocking(False)
    return sock


class HttpService:
    """One uvicorn server run as a task on the current loop; ``start`` returns once it listens.

    Args:
        key: the configuration key of the listener, named in the error when the port is busy.
        tls: uvicorn's ``ssl_*`` options for an https listener (none: plain HTTP).
    """

    def __init__(
        self,
        name: str,
        app: object,
        listener: str,
        key: str | None = None,
        tls: Mapping[str, Any] | None = None,
    ) -> None:
        host, port = parse_listener(listener)
        self.name = name
        self.key = key
        self.scheme = "https" if tls else "http"
        options = dict(tls or {})
        self._tls_versions: tuple[ssl.TLSVersion, ssl.TLSVersion] | None = options.pop(TLS_VERSIONS, None)
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,  # type: ignore[arg-type]
                host=host,
                port=port,
                log_level="warning",
                access_log=False,
                lifespan="on",
                use_colors=False,
                # On stop, requests still running get this long; then their connections are
                # closed. Without it a client's idle keep-alive TLS connection held a node's stop
                # for the full 10 s below.
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                **options,
            )
        )
        # Signals stay the node's: it stops its services on SIGINT/SIGTERM through the loop's own
        # handlers. uvicorn (>= 0.29) has no hook to opt out of its signal capture: while serving on
        # the main thread it also sets Python-level SIGINT/SIGTERM handlers that begin its own exit,
        # and re-raises a caught signal after it stops. The loop still sees every signal (through its
        # wakeup fd), so the node's shutdown runs either way.
        self._task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        servers = getattr(self._server, "servers", [])
        for server in servers:
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return self._server.config.port

    async def start(self) -> None:
        config = self._server.config
        if self._tls_versions is not None:
            config.load()  # builds the TLS context (serve() does not load a loaded config again)
            assert config.ssl is not None
            config.ssl.minimum_version, config.ssl.maximum_version = self._tls_versions
        sock = bind_socket(self.name, config.host, config.port, self.key)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name=f"http-{self.name}")
        while not self._server.started:
            if self._task.done():
                self._task.result()  # re-raise bind errors with uvicorn's message
                raise RuntimeError(f"{self.name} HTTP server exited during start-up")
            await asyncio.sleep(0.02)
        log.info("%s listening on %s://%s:%d", self.name, self.scheme, self._server.config.host, self.port)

    async def stop(self) -> None:
        if self._task is None:
            return
        self._server.should_exit = True
        try:
            await asyncio.wait_for(self._task, timeout=10)
        except TimeoutError:
            self._task.cancel()
        self._task = None
