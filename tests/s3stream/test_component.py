"""The storage component inside a node, and ``tabletopic serve`` starting and stopping cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from tabletopic.config import Config
from tabletopic.platform import Platform
from tabletopic.s3stream import fetch_slice, open_object_store
from tabletopic.s3stream.store import S3StreamStore


@pytest.mark.parametrize("wal_mode", ["local", "object"])
async def test_component_registers_the_store_and_executor_settings(tmp_path: Path, wal_mode: str) -> None:
    config = Config(
        {"data.dir": str(tmp_path), "s3stream.wal.mode": wal_mode, "s3stream.wal.object.batch.ms": "5"}
    )
    platform = Platform.create(config)
    await platform.start(("tabletopic.s3stream.component:StorageComponent",))
    try:
        store = platform.services["streams"]
        assert isinstance(store, S3StreamStore)
        sid = await store.create_stream()
        assert await store.append(sid, b"payload", 4) == 0
        await store.flush()
        [piece] = await store.locate(sid, 0, 4)
        settings = platform.services["object_store_settings"]
        assert settings == {"type": "local", "root": str(tmp_path / "objects"), "retries": 6}
        assert [bytes(b.payload) for b in fetch_slice(open_object_store(settings), piece)] == [b"payload"]
        metrics = generate_latest(platform.metrics).decode()
        assert "s3stream_appends_total 1.0" in metrics
        assert "s3stream_upload_seconds_count" in metrics
    finally:
        await platform.stop()


@pytest.mark.s3
async def test_component_uses_s3_when_a_bucket_is_configured(
    tmp_path: Path, s3_settings: dict[str, str]
) -> None:
    platform = Platform.create(Config({"data.dir": str(tmp_path), **s3_settings}))
    await platform.start(("tabletopic.s3stream.component:StorageComponent",))
    try:
        assert platform.services["object_store_settings"]["type"] == "s3"
        store = platform.services["streams"]
        sid = await store.create_stream()
        await store.append(sid, b"x", 1)
        await store.flush()
        assert await store.locate(sid, 0, 1)
    finally:
        await platform.stop()


@pytest.mark.s3
async def test_wrong_s3_credentials_fail_start_with_a_clear_error(
    tmp_path: Path, s3_settings: dict[str, str]
) -> None:
    platform = Platform.create(Config({"data.dir": str(tmp_path), **s3_settings, "s3.secret.key": "nope"}))
    try:
        with pytest.raises(Exception, match=s3_settings["s3.bucket"]):
            await platform.start(("tabletopic.s3stream.component:StorageComponent",))
    finally:
        await platform.stop()


# `tabletopic serve` with the node reduced to the storage component, so this test depends on no other
# subsystem (the full node is exercised by the platform's own end-to-end tests).
STORAGE_ONLY_SERVE = """
import sys
from tabletopic.platform import Platform
Platform.start.__defaults__ = (("tabletopic.s3stream.component:StorageComponent",),)
from tabletopic.cli import main
sys.argv = ["tabletopic", *sys.argv[1:]]
main()
"""


@pytest.mark.integration
def test_serve_starts_and_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    args = [sys.executable, "-c", STORAGE_ONLY_SERVE, "serve", "--data-dir", str(tmp_path)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = b""
    deadline = time.monotonic() + 60
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    try:
        while b"tabletopic is up" not in output and time.monotonic() < deadline and process.poll() is None:
            output += process.stdout.read() or b""
            time.sleep(0.1)
        assert b"s3stream started" in output and b"tabletopic is up" in output, output.decode(
            errors="replace"
        )
        process.send_signal(signal.SIGINT)
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output += process.stdout.read() or b""
    assert process.returncode == 0, output.decode(errors="replace")
    assert b"Traceback" not in output, output.decode(errors="replace")
