"""A real ``tabletopic serve`` process on free loopback ports, for tests and the bench: a single
node with a PLAINTEXT and a SASL_PLAINTEXT listener and two PLAIN users."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tabletopic.cluster.local import ServeProcess
from tests.support.ports import free_port


@dataclass
class BrokerProcess(ServeProcess):
    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    kafka_port: int = 0
    admin_port: int = 0
    sasl_port: int = 0
    registry_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    # Settings every node gets under its own overrides. Empty here, so the benches measure the
    # product's defaults; the test suite fills it (tests/conftest.py).
    defaults: ClassVar[dict[str, str]] = {}

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def serve_settings(self) -> dict[str, str]:
        if not self.kafka_port:
            self.kafka_port, self.admin_port, self.sasl_port = free_port(), free_port(), free_port()
            self.registry_port = free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{self.kafka_port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
        return {
            "listeners": listeners,
            "sasl.plain.users": "alice:alice-secret,bob:bob-secret",
            "admin.listener": f"http://127.0.0.1:{self.admin_port}",
            "schema.registry.listener": f"http://127.0.0.1:{self.registry_port}",
            "catalog.listener": f"http://127.0.0.1:{free_port()}",
            "log.level": "INFO",
            **self.defaults,
            **self.overrides,
        }


def start_with_env(
    broker: BrokerProcess, env: Mapping[str, str] | None = None, timeout: float = 90.0
) -> BrokerProcess:
    """Start (or restart) ``broker`` with ``env`` added to its environment for this start only (a
    crash point, ``TABLETOPIC_CRASH_AT``). A crash point of an earlier start never leaks into it."""
    env = env or {}
    saved = {key: os.environ.get(key) for key in ("TABLETOPIC_CRASH_AT", *env)}
    os.environ.pop("TABLETOPIC_CRASH_AT", None)
    os.environ.update(env)
    try:
        return broker.start(timeout)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
