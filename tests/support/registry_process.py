"""A schema registry in its own process (``python -m tabletopic.schema_registry``) on a free port:
real HTTP, restartable over the same data dir, for client and restart tests."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.ports import free_port, wait_for_port
from tests.support.processes import terminate


@dataclass
class RegistryProcess:
    data_dir: Path
    overrides: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> RegistryProcess:
        self.port = free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        args = [
            sys.executable,
            "-m",
            "tabletopic.schema_registry",
            "--data-dir",
            str(self.data_dir),
            "-o",
            f"schema.registry.listener=http://127.0.0.1:{self.port}",
            "-o",
            "log.level=WARNING",
        ]
        for key, value in self.overrides.items():
            args += ["-o", f"{key}={value}"]
        log = open(self.data_dir / "registry.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        try:
            wait_for_port(self.port, timeout)
            httpx.get(self.url + "/", timeout=5).raise_for_status()
        except Exception:
            self.stop()
            tail = (self.data_dir / "registry.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"schema registry did not start:\n{tail}") from None
        return self

    def stop(self) -> None:
        terminate(self.process)
        self.process = None
