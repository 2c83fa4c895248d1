"""A real ``tabletopic serve`` process on free loopback ports, for tests and the bench."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port, wait_for_port
from tests.support.processes import terminate


@dataclass
class BrokerProcess:
    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    kafka_port: int = 0
    admin_port: int = 0
    sasl_port: int = 0
    registry_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    _log_start: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "broker.log"

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.kafka_port:
            self.kafka_port, self.admin_port, self.sasl_port = free_port(), free_port(), free_port()
            self.registry_port = free_port()
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.kafka_port},SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
            "sasl.plain.users": "alice:alice-secret,bob:bob-secret",
            "admin.listener": f"http://127.0.0.1:{self.admin_port}",
            "schema.registry.listener": f"http://127.0.0.1:{self.registry_port or free_port()}",
            "catalog.listener": f"http://127.0.0.1:{free_port()}",
            "log.level": "INFO",
            **self.overrides,
        }
        args = [sys.executable, "-m", "tabletopic", "serve", "--data-dir", str(self.data_dir)]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            self._wait_until_up(timeout)
            wait_for_port(self.kafka_port, timeout)
        except Exception:
            self.kill()
            raise RuntimeError(f"broker did not start:\n{self.log_tail()}") from None
        return self

    def _wait_until_up(self, timeout: float) -> None:
        """Every component has started once the platform logs "tabletopic is up"."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError("broker exited")
            if "tabletopic is up" in self.log_path.read_text(errors="replace")[self._log_start :]:
                return
            time.sleep(0.1)
        raise TimeoutError("broker did not report it is up")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks run."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def stop(self) -> None:
        terminate(self.process, 20)
        self.process = None
