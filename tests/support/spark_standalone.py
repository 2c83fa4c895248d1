"""A Spark standalone cluster on loopback: one master and two workers started with pyspark's bundled
``spark-class`` (no download), for the test that runs the table pipeline on a Spark cluster.

Executors start the Python workers of ``mapInArrow`` with the driver's interpreter; they import
tabletopic from ``PYTHONPATH`` (this checkout first), set in the workers' environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port, wait_for_port
from tests.support.processes import terminate
from tests.support.waiting import wait_until_sync

REPO = Path(__file__).resolve().parents[2]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkStandalone:
    root: Path
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    port: int = 0
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        return dict(
            os.environ,
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_NO_DAEMONIZE="1",
            PYSPARK_PYTHON=sys.executable,
            PYTHONPATH=path,
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_WORKER_DIR=str(self.root / "work"),
            # Executors' scratch (each one's copy of the jars, 230 MB) under the root, not in /tmp:
            # an executor stopped with its worker's kill never removes its own.
            SPARK_LOCAL_DIRS=str(self.root / "local"),
        )

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        command = [str(spark_home() / "bin" / "spark-class"), *args]
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self._env())
        self.processes.append(process)
        return process

    def start(self, timeout: float = 60) -> SparkStandalone:
        self.port = free_port()
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(free_port()),
            ],
        )
        wait_for_port(self.port, timeout)
        for index in range(self.workers):
            work = self.root / f"worker-{index}"
            work.mkdir(parents=True, exist_ok=True)
            self._spawn(
                f"worker-{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    self.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores_per_worker),
                    "--memory",
                    self.memory_per_worker,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    str(work),
                ],
            )
        self._wait_registered(timeout)
        return self

    def _wait_registered(self, timeout: float) -> None:
        log = self.root / "master.log"

        def registered() -> bool:
            text = log.read_text(errors="replace") if log.exists() else ""
            return text.count("Registering worker") >= self.workers

        try:
            wait_until_sync(registered, timeout=timeout, interval=0.2)
            return
        except TimeoutError:
            pass
        raise TimeoutError(f"Spark workers did not register:\n{self.log_tail('master')}")

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def executor_logs(self) -> str:
        """Every executor's stderr (what ran on the workers)."""
        return "\n".join(p.read_text(errors="replace") for p in self.root.glob("worker-*/**/stderr"))

    def stop(self) -> None:
        for process in reversed(self.processes):
            terminate(process, 10)
        self.processes.clear()

    def __enter__(self) -> SparkStandalone:
        try:
            return self.start()
        except BaseException:
            self.stop()  # a master that came up while its workers did not
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
