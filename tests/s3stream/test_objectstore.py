"""Both object stores: the same primitives, multipart uploads, and clear errors for bad settings."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import pickle
import time
from pathlib import Path

import pytest

from tabletopic.config import Config
from tabletopic.s3stream.objectstore import (
    AsyncObjectStore,
    LocalObjectStoreSpec,
    ObjectNotFound,
    ObjectStoreError,
    ObjectStoreSpec,
    S3ObjectStore,
    S3ObjectStoreSpec,
    object_store_spec,
    open_object_store,
    parse_object_store_spec,
)
from tabletopic.s3stream.streams import StorageUnavailable, StreamError
from tests.support.ports import free_port
from tests.support.store_harness import local_object_settings, s3_object_settings


@pytest.fixture(params=["dir", pytest.param("s3", marks=pytest.mark.s3)])
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStoreSpec:
    if request.param == "s3":
        return s3_object_settings(request.getfixturevalue("s3_settings"))
    return local_object_settings(tmp_path)


def test_put_get_range_list_and_delete(store_settings: ObjectStoreSpec) -> None:
    store = open_object_store(store_settings)
    store.put("a/one", b"hello world")
    store.put("a/two", [b"part1-", memoryview(b"part2")])
    assert store.get("a/one") == b"hello world"
    assert store.get("a/two") == b"part1-part2"
    assert store.get_range("a/one", 6, 11) == b"world"
    assert store.list("a/") == [("a/one", 11), ("a/two", 11)]
    store.delete(["a/one", "a/missing"])
    with pytest.raises(ObjectNotFound):
        store.get("a/one")
    assert [k for k, _ in store.list()] == ["a/two"]


def test_large_objects_use_multipart_upload(store_settings: ObjectStoreSpec) -> None:
    settings = store_settings
    if isinstance(settings, S3ObjectStoreSpec):  # a local directory has no parts
        settings = dataclasses.replace(
            settings, multipart_threshold=5 * 1024 * 1024, part_size=5 * 1024 * 1024
        )
    store = open_object_store(settings)
    blob = bytes(range(256)) * (11 * 1024 * 1024 // 256)
    store.put("big", [blob[:1000], blob[1000:]])
    assert (
        store.get_range("big", 5 * 1024 * 1024 - 3, 5 * 1024 * 1024 + 3)
        == blob[5 * 1024 * 1024 - 3 : 5 * 1024 * 1024 + 3]
    )
    assert store.list("big") == [("big", len(blob))]


async def test_async_wrapper_runs_calls_off_the_event_loop(store_settings: ObjectStoreSpec) -> None:
    store = AsyncObjectStore(open_object_store(store_settings), threads=4)
    await asyncio.gather(*(store.put(f"k{i}", b"x" * i) for i in range(20)))
    assert len(await store.list("k")) == 20
    assert await store.get_range("k19", 0, 5) == b"xxxxx"
    store.close()


@pytest.mark.s3
async def test_puts_and_ranged_reads_go_through_obstore_and_boto3_reads_them(
    s3_settings: dict[str, str],
) -> None:
    spec = dataclasses.replace(s3_object_settings(s3_settings), prefix="native/")
    blocking = open_object_store(spec)
    store = AsyncObjectStore(blocking, threads=2)
    try:
        assert store.native_requests == 0
        await store.put("obj", [b"hello ", memoryview(b"world")])
        assert await store.get_range("obj", 6, 11) == b"world"
        assert store.native_requests == 2 and store.native_failures == 0
        assert blocking.get("obj") == b"hello world"  # the prefix applied as boto3 applies it
        assert await store.list("obj") == [("obj", 11)]
        big = bytes(range(256)) * 4096  # 1 MiB in two parts: joined off the event loop
        await store.put("big", [big[:1000], memoryview(big)[1000:]])
        assert blocking.get("big") == big and store.native_requests == 3
        assert await store.get("big") == big and store.native_requests == 4  # compaction's whole GET
    finally:
        store.close()


@pytest.mark.s3
async def test_a_failing_obstore_request_is_retried_through_boto3(
    s3_settings: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    store = AsyncObjectStore(open_object_store(s3_object_settings(s3_settings)), threads=2)
    try:
        # obstore is pointed at a port nobody listens on; boto3 keeps the right endpoint.
        store._native = open_object_store(
            dataclasses.replace(s3_object_settings(s3_settings), endpoint=f"http://127.0.0.1:{free_port()}")
        ).native()  # type: ignore[union-attr]
        await store.put("fallback", b"payload")
        await store.put("fallback2", b"payload")
        assert await store.get_range("fallback", 0, 3) == b"pay"
        assert await store.get("fallback2") == b"payload"
        assert store.native_failures == 4
        warnings = [r for r in caplog.records if "through obstore failed" in r.getMessage()]
        assert len(warnings) == 1  # once a minute, with a count
        with pytest.raises(ObjectNotFound):
            await store.get_range("missing", 0, 3)  # boto3 names a missing key as before
        with pytest.raises(ObjectNotFound):
            await store.get("missing")
    finally:
        store.close()


@pytest.mark.s3
def test_a_blocking_ranged_get_goes_through_obstore_and_falls_back_to_boto3(
    s3_settings: dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The table pipeline's tasks read slices with the blocking store: through obstore (the GIL
    released while it waits), and through boto3 only when that fails."""
    spec = dataclasses.replace(s3_object_settings(s3_settings), prefix="blocking/")
    store = open_object_store(spec)
    assert isinstance(store, S3ObjectStore)
    store.put("obj", b"hello world")
    boto3_reads = 0
    boto3_read = store.get_range_through_boto3

    def counted(key: str, start: int, end: int) -> bytes:
        nonlocal boto3_reads
        boto3_reads += 1
        return boto3_read(key, start, end)

    monkeypatch.setattr(store, "get_range_through_boto3", counted)
    assert store.get_range("obj", 6, 11) == b"world"
    assert (store.native_reads, store.native_failures, boto3_reads) == (1, 0, 0)
    # obstore pointed at a port nobody listens on; boto3 keeps the right endpoint.
    store._native = open_object_store(
        dataclasses.replace(spec, endpoint=f"http://127.0.0.1:{free_port()}")
    ).native()  # type: ignore[union-attr]
    assert store.get_range("obj", 0, 5) == b"hello"
    with pytest.raises(ObjectNotFound):
        store.get_range("missing", 0, 3)  # boto3 names a missing key as before
    assert (store.native_failures, boto3_reads) == (2, 2)
    assert len([r for r in caplog.records if "through obstore failed" in r.getMessage()]) == 1


@pytest.mark.s3
def test_wrong_secret_key_fails_at_once_naming_bucket_and_endpoint(s3_settings: dict[str, str]) -> None:
    store = open_object_store(
        dataclasses.replace(s3_object_settings(s3_settings), secret_key="wrong", retries=5)
    )
    started = time.monotonic()
    with pytest.raises(ObjectStoreError) as info:
        store.put("x", b"y")
    assert time.monotonic() - started < 5
    assert s3_settings["s3.bucket"] in str(info.value) and s3_settings["s3.endpoint"] in str(info.value)


@pytest.mark.s3
def test_missing_bucket_fails_with_a_clear_error(s3_settings: dict[str, str]) -> None:
    store = open_object_store(
        dataclasses.replace(s3_object_settings(s3_settings), bucket="no-such-bucket-here")
    )
    with pytest.raises(ObjectStoreError, match="no-such-bucket-here"):
        store.check()


def test_unreachable_endpoint_is_retried_then_reported_unavailable() -> None:
    port = free_port()
    store = open_object_store(
        S3ObjectStoreSpec(
            bucket="b",
            endpoint=f"http://127.0.0.1:{port}",
            access_key="a",
            secret_key="s",
            path_style=True,
            retries=3,
        )
    )
    with pytest.raises(StorageUnavailable, match="after 3 attempts"):
        store.put("x", b"y")


def test_config_selects_the_backend(tmp_path: Path) -> None:
    local = object_store_spec(Config({"data.dir": str(tmp_path)}))
    assert local == LocalObjectStoreSpec(root=str(tmp_path / "objects"))
    s3 = object_store_spec(Config({"data.dir": str(tmp_path), "s3.bucket": "b", "s3.endpoint": "http://h:1"}))
    assert isinstance(s3, S3ObjectStoreSpec) and s3.bucket == "b" and s3.endpoint == "http://h:1"


def test_an_object_store_spec_survives_json_and_pickle_and_hides_the_secret(tmp_path: Path) -> None:
    spec = S3ObjectStoreSpec(bucket="b", access_key="a", secret_key="hush", prefix="p/")
    assert parse_object_store_spec(json.loads(json.dumps(dataclasses.asdict(spec)))) == spec
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert "hush" not in repr(spec)
    local = local_object_settings(tmp_path)
    assert parse_object_store_spec(dataclasses.asdict(local)) == local
    with pytest.raises(StreamError, match="unknown object store kind"):
        parse_object_store_spec({"kind": "ftp", "root": "/"})


def test_local_keys_cannot_escape_the_root(tmp_path: Path) -> None:
    store = open_object_store(local_object_settings(tmp_path))
    with pytest.raises(ObjectStoreError):
        store.put("../outside", b"x")
