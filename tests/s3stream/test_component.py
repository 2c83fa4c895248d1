"""The storage component inside a node, and ``tabletopic serve`` starting and stopping cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tabletopic import database
from tabletopic.component import NotStarted
from tabletopic.config import Config
from tabletopic.s3stream import fetch_slice, open_object_store
from tabletopic.s3stream.component import StorageComponent
from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, S3ObjectStoreSpec
from tabletopic.s3stream.store import S3StreamStore
from tests.support.waiting import wait_until_sync


def _storage(config: Config) -> StorageComponent:
    engine = database.create_engine(database.default_url(config.data_dir))
    return StorageComponent(config, engine, CollectorRegistry())


@pytest.mark.parametrize("wal_mode", ["local", "object"])
async def test_component_offers_the_store_and_executor_settings(tmp_path: Path, wal_mode: str) -> None:
    config = Config(
        {"data.dir": str(tmp_path), "s3stream.wal.mode": wal_mode, "s3stream.wal.object.batch.ms": "5"}
    )
    metrics = CollectorRegistry()
    storage = StorageComponent(config, database.create_engine(database.default_url(tmp_path)), metrics)
    with pytest.raises(NotStarted, match="storage"):
        _ = storage.store
    await storage.start()
    try:
        store = storage.store
        assert isinstance(store, S3StreamStore)
        sid = await store.create_stream()
        assert await store.append(sid, b"payload", 4) == 0
        await store.flush()
        [piece] = await store.locate(sid, 0, 4)
        spec = storage.object_store_spec
        assert spec == LocalObjectStoreSpec(root=str(tmp_path / "objects"))
        assert [bytes(b.payload) for b in fetch_slice(open_object_store(spec), piece)] == [b"payload"]
        exposed = generate_latest(metrics).decode()
        assert "tabletopic_s3stream_appends_total 1.0" in exposed
        assert "tabletopic_s3stream_upload_seconds_count" in exposed
    finally:
        await storage.stop()


@pytest.mark.s3
async def test_component_uses_s3_when_a_bucket_is_configured(
    tmp_path: Path, s3_settings: dict[str, str]
) -> None:
    storage = _storage(Config({"data.dir": str(tmp_path), **s3_settings}))
    await storage.start()
    try:
        assert isinstance(storage.object_store_spec, S3ObjectStoreSpec)
        store = storage.store
        sid = await store.create_stream()
        await store.append(sid, b"x", 1)
        await store.flush()
        assert await store.locate(sid, 0, 1)
    finally:
        await storage.stop()


@pytest.mark.s3
async def test_wrong_s3_credentials_fail_start_with_a_clear_error(
    tmp_path: Path, s3_settings: dict[str, str]
) -> None:
    storage = _storage(Config({"data.dir": str(tmp_path), **s3_settings, "s3.secret.key": "nope"}))
    try:
        with pytest.raises(Exception, match=s3_settings["s3.bucket"]):
            await storage.start()
    finally:
        await storage.stop()


# `tabletopic serve` with the node reduced to the storage component, so this test depends on no other
# subsystem (the full node is exercised by the platform's own end-to-end tests).
STORAGE_ONLY_SERVE = """
import sys
from tabletopic.platform import Node
Node.in_start_order = lambda node: (node.storage,)
from tabletopic.cli import main
sys.argv = ["tabletopic", *sys.argv[1:]]
main()
"""


@pytest.mark.integration
def test_serve_starts_and_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    args = [sys.executable, "-c", STORAGE_ONLY_SERVE, "serve", "--data-dir", str(tmp_path)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = b""
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)

    def up_or_gone() -> bool:
        nonlocal output
        assert process.stdout is not None
        output += process.stdout.read() or b""
        return b"tabletopic is up" in output or process.poll() is not None

    try:
        wait_until_sync(up_or_gone, timeout=60)
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
