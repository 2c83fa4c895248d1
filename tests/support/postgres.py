"""A throwaway PostgreSQL server (Debian's ``postgresql`` package) on a random loopback port.

initdb refuses to run as root, so as root the cluster is created and run as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port, wait_for_port
from tests.support.processes import terminate


def postgres_bin_dir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class PostgresServer:
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tabletopic-pg-")))
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def url_for(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _as_postgres(self, args: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *args]
        return args

    def start(self) -> PostgresServer:
        bindir = postgres_bin_dir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (Debian package postgresql)")
        self.port = free_port()
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
            shutil.chown(data, "postgres")
        subprocess.run(
            self._as_postgres([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        log = open(self.directory / "postgres.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            self._as_postgres([
                str(bindir / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.directory),
                "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200",
            ]),
            stdout=log, stderr=subprocess.STDOUT,
        )
        wait_for_port(self.port, 30)
        return self

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_for(name)

    def stop(self) -> None:
        terminate(self.process)
        self.process = None
        shutil.rmtree(self.directory, ignore_errors=True)
