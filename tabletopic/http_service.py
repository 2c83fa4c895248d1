"""Serving an ASGI app (admin API, schema registry, REST catalog) inside the node's event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

import uvicorn

log = logging.getLogger(__name__)


def parse_listener(url: str) -> tuple[str, int]:
    """``http://127.0.0.1:8080`` -> ``("127.0.0.1", 8080)``."""
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.hostname is None or parsed.port is None:
        raise ValueError(f"listener {url!r} must look like http://HOST:PORT")
    return parsed.hostname, parsed.port


class HttpService:
    """One uvicorn server run as a task on the current loop; ``start`` returns once it listens."""

    def __init__(self, name: str, app: object, listener: str, tls: Mapping[str, Any] | None = None) -> None:
        """``tls``: uvicorn's ``ssl_*`` options for an https listener (none: plain HTTP)."""
        host, port = parse_listener(listener)
        self.name = name
        self.scheme = "https" if tls else "http"
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,  # type: ignore[arg-type]
                host=host,
                port=port,
                log_level="warning",
                access_log=False,
                lifespan="on",
                use_colors=False,
                **dict(tls or {}),
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
        self._task = asyncio.create_task(self._server.serve(), name=f"http-{self.name}")
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
