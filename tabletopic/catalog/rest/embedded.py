"""The REST catalog on a background thread, for processes that are not a node: ``tabletopic sql``
when no node is running, benches and tests.

uvicorn runs its own event loop in the thread; the main thread (Spark, a test) keeps its own.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import uvicorn


class EmbeddedRestCatalog:
    """Serve ``app`` (the catalog's FastAPI app, or that app behind the HTTP authentication
    middleware) on ``host:port`` (port 0 picks a free one) until :meth:`stop`.

    Use as a context manager or call :meth:`start`/:meth:`stop`; :attr:`uri` is set once listening.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="off")
        )
        self._thread: threading.Thread | None = None
        self.port = port

    @property
    def uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> EmbeddedRestCatalog:
        self._thread = threading.Thread(target=self._server.run, name="rest-catalog", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"REST catalog could not listen on {self.host}:{self.port}")
            if time.monotonic() > deadline:
                raise TimeoutError("REST catalog did not start")
            time.sleep(0.01)
        for server in self._server.servers:
            for sock in server.sockets:
                self.port = int(sock.getsockname()[1])
                return self
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(15)
        self._thread = None

    def __enter__(self) -> EmbeddedRestCatalog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
