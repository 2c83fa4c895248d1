"""Object stores: a local directory (the embedded default) and S3, behind one small blocking
interface, plus an asyncio wrapper that runs the blocking calls on a thread pool.

The blocking interface is what a Spark executor uses: it rebuilds a store from the
:data:`ObjectStoreSpec` that :func:`object_store_spec` produces (frozen, picklable, no engine, no
event loop) with :func:`open_object_store`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from tabletopic.config import Config, StartupError
from tabletopic.log_limit import RateLimitedLog
from tabletopic.s3stream import settings as keys
from tabletopic.s3stream.direct_io import BlockWriter, fsync_directory, open_direct, thread_buffer
from tabletopic.s3stream.native_s3 import NativeS3
from tabletopic.s3stream.settings import ObjectStoreKind
from tabletopic.s3stream.streams import StorageUnavailable, StreamError

log = logging.getLogger(__name__)

T = TypeVar("T")
# Bodies of a native PUT up to this size are joined on the event loop (a copy that takes less than
# a hand-off to a thread and back); larger ones on the I/O pool.
JOIN_ON_LOOP_BYTES = 256 * 1024
# The aligned buffer of local puts: one per thread that puts (the store's I/O threads).
PUT_BUFFER_BYTES = 1 << 20


class ObjectStoreError(StreamError):
    """A request the store refused for good (bad credentials, missing bucket, missing key)."""


class ObjectNotFound(ObjectStoreError):
    """The key does not exist."""


class ObjectStore(Protocol):
    """Blocking primitives every backend supplies. Keys are relative to the store's prefix."""

    description: str

    def put(self, key: str, data: bytes | memoryview | list[bytes | memoryview]) -> None:
        """Store an object durably (replacing any object of that key)."""

    def get(self, key: str) -> bytes:
        """The whole object. Raises ObjectNotFound."""

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``. Raises ObjectNotFound."""

    def delete(self, keys: Iterable[str]) -> None:
        """Delete objects; missing keys are not an error."""

    def list(self, prefix: str = "") -> list[tuple[str, int]]:
        """``(key, size)`` of every object under ``prefix``."""


def _as_parts(data: bytes | memoryview | list[bytes | memoryview]) -> list[bytes | memoryview]:
    return list(data) if isinstance(data, list) else [data]


class LocalObjectStore:
    """Objects as files under a root directory. ``put`` writes a temporary file, fsyncs it and
    renames it into place, so an object is either absent or complete after a crash."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.description = f"local directory {self.root}"

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ObjectStoreError(f"object key {key!r} escapes {self.root}")
        return path

    def put(self, key: str, data: bytes | memoryview | list[bytes | memoryview]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
        # Written around the page cache (see direct_io): an object is read back rarely and late,
        # and a buffered write of fresh data costs the kernel more than the broker's protocol path.
        fd = open_direct(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            out = BlockWriter(fd, 0, thread_buffer(PUT_BUFFER_BYTES))
            for part in _as_parts(data):
                out.write(part)
            out.flush()
            size = out.position
            os.ftruncate(fd, size)  # the last block was padded
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_directory(path.parent)

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectNotFound(f"object {key} not found in {self.description}") from None

    def get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            with open(self._path(key), "rb") as handle:
                handle.seek(start)
                return handle.read(max(end - start, 0))
        except FileNotFoundError:
            raise ObjectNotFound(f"object {key} not found in {self.description}") from None

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            try:
                self._path(key).unlink()
            except FileNotFoundError:
                pass

    def list(self, prefix: str = "") -> list[tuple[str, int]]:
        result = []
        for path in self.root.rglob("*"):
            if path.is_file() and not path.name.endswith(".tmp"):
                key = path.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    result.append((key, path.stat().st_size))
        return sorted(result)


# S3 error codes that retrying cannot fix; each gets a message naming bucket and endpoint.
_PERMANENT_CODES = {
    "NoSuchBucket": "bucket does not exist",
    "AccessDenied": "access denied",
    "InvalidAccessKeyId": "unknown access key",
    "SignatureDoesNotMatch": "wrong secret key",
    "InvalidBucketName": "invalid bucket name",
    "AuthorizationHeaderMalformed": "malformed authorization (wrong region?)",
    "403": "access denied",
}


# Codes S3 sends with a 4xx status that are nevertheless worth retrying.
_RETRIABLE_CODES = {"RequestTimeout", "SlowDown", "Throttling", "ThrottlingException", "RequestTimeTooSkewed"}


class S3ObjectStore:
    """Objects in an S3 bucket via boto3. Transient failures (connection errors, timeouts, 5xx,
    throttling) are retried with exponential backoff and jitter up to ``retries`` attempts, then
    raised as :class:`StorageUnavailable`; permanent ones raise :class:`ObjectStoreError` at once."""

    def __init__(
        self,
        bucket: str,
        endpoint: str | None = None,
        region: str = "us-east-1",
        access_key: str | None = None,
        secret_key: str | None = None,
        path_style: bool = False,
        prefix: str = "",
        retries: int = 6,
        multipart_threshold: int = 32 * keys.MiB,
        part_size: int = 16 * keys.MiB,
        max_connections: int = 16,
    ) -> None:
        import boto3
        from botocore.config import Config as BotoConfig

        self.bucket = bucket
        self.endpoint = endpoint or f"AWS S3 ({region})"
        self.prefix = prefix
        self.retries = retries
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.description = f"bucket {bucket!r} at {self.endpoint}"
        self._endpoint, self._region, self._path_style = endpoint, region, path_style
        self._access_key, self._secret_key = access_key, secret_key
        self._native: NativeS3 | None = None
        self._native_opened = False
        self.native_reads = 0  # blocking ranged GETs answered by the native client
        self.native_failures = 0  # native requests (blocking or async) that failed and went to boto3
        self._native_warnings = RateLimitedLog(log, interval_s=60)
        self._client = boto3.client(
            "s3",
            endpoint_url=endpoint or None,
            region_name=region,
            aws_access_key_id=access_key or None,
            aws_secret_access_key=secret_key or None,
            config=BotoConfig(
                s3={"addressing_style": "path" if path_style else "auto"},
                # We retry ourselves so that the policy (and what counts as permanent) is ours.
                retries={"max_attempts": 1, "mode": "standard"},
                max_pool_connections=max_connections,
                connect_timeout=5,
                read_timeout=30,
            ),
        )

    def _call(self, what: str, key: str, fn: Callable[[], T]) -> T:
        from botocore.exceptions import BotoCoreError, ClientError

        delay = 0.05
        for attempt in range(1, self.retries + 1):
            try:
                return fn()
            except ClientError as exc:
                error = exc.response.get("Error", {})
                code = str(error.get("Code", ""))
                status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
                if code in ("NoSuchKey", "404") or (status == 404 and code != "NoSuchBucket"):
                    raise ObjectNotFound(f"object {key} not found in {self.description}") from exc
                if code not in _RETRIABLE_CODES and (code in _PERMANENT_CODES or status in (400, 401, 403)):
                    reason = _PERMANENT_CODES.get(code, error.get("Message", code))
                    raise ObjectStoreError(
                        f"{what} {key!r} failed on {self.description}: {reason} ({code})"
                    ) from exc
                failure: Exception = exc
            except BotoCoreError as exc:  # connection refused, timeouts, broken responses
                failure = exc
            if attempt == self.retries:
                raise StorageUnavailable(
                    f"{what} {key!r} failed on {self.description} after {attempt} attempts: {failure}"
                ) from failure
            log.warning("%s %s on %s failed (attempt %d): %s", what, key, self.description, attempt, failure)
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    def check_bucket(self) -> None:
        """One HEAD of the bucket at start-up, so a missing bucket, an invalid name, refused
        credentials or an unreachable endpoint is one line naming the key to change, before the
        first append fails deep inside the store.

        Raises:
            StartupError: what is wrong, with the ``s3.*`` key that fixes it.
        """
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ParamValidationError

        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if status == 404 or code in ("NoSuchBucket", "404"):
                raise StartupError(
                    f"bucket {self.bucket!r} does not exist at {self.endpoint}: "
                    "create it or change s3.bucket",
                    "s3.bucket",
                ) from exc
            if code == "InvalidBucketName" or (status == 400 and code in ("400", "")):
                raise StartupError(
                    f"{self.bucket!r} is not a valid S3 bucket name (at {self.endpoint}); change s3.bucket",
                    "s3.bucket",
                ) from exc
            if status in (401, 403):
                raise StartupError(
                    f"{self.endpoint} refused the credentials for bucket {self.bucket!r} (HTTP {status} "
                    f"{code}); check s3.access.key and s3.secret.key",
                    "s3.access.key",
                ) from exc
            raise StartupError(
                f"bucket {self.bucket!r} at {self.endpoint}: {code or status}; check the s3.* settings",
                "s3.bucket",
            ) from exc
        except ParamValidationError as exc:
            raise StartupError(
                f"{self.bucket!r} is not a valid S3 bucket name; change s3.bucket", "s3.bucket"
            ) from exc
        except NoCredentialsError as exc:
            raise StartupError(
                f"no credentials for bucket {self.bucket!r} at {self.endpoint}: set s3.access.key and "
                "s3.secret.key (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
                "s3.access.key",
            ) from exc
        except BotoCoreError as exc:
            raise StartupError(
                f"cannot reach the object store at {self.endpoint} ({exc}); change s3.endpoint", "s3.endpoint"
            ) from exc

    def put(self, key: str, data: bytes | memoryview | list[bytes | memoryview]) -> None:
        parts = _as_parts(data)
        total = sum(len(p) for p in parts)
        full = self.prefix + key
        if total >= self.multipart_threshold:
            self._multipart_put(full, parts, total)
            return
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        self._call(
            "PUT", full, lambda: self._client.put_object(Bucket=self.bucket, Key=full, Body=bytes(body))
        )

    def _multipart_put(self, full: str, parts: list[bytes | memoryview], total: int) -> None:
        blob = memoryview(b"".join(parts))
        upload = self._call(
            "CreateMultipartUpload",
            full,
            lambda: self._client.create_multipart_upload(Bucket=self.bucket, Key=full),
        )
        upload_id = upload["UploadId"]
        done: list[dict[str, Any]] = []
        try:
            for number, start in enumerate(range(0, total, self.part_size), 1):
                chunk = bytes(blob[start : start + self.part_size])
                result = self._call(
                    "UploadPart",
                    full,
                    functools.partial(
                        self._client.upload_part,
                        Bucket=self.bucket,
                        Key=full,
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=chunk,
                    ),
                )
                done.append({"PartNumber": number, "ETag": result["ETag"]})
            self._call(
                "CompleteMultipartUpload",
                full,
                lambda: self._client.complete_multipart_upload(
                    Bucket=self.bucket, Key=full, UploadId=upload_id, MultipartUpload={"Parts": done}
                ),
            )
        except BaseException:
            try:
                self._client.abort_multipart_upload(Bucket=self.bucket, Key=full, UploadId=upload_id)
            except Exception:  # the bucket's lifecycle rules clean up what we cannot
                log.warning("could not abort multipart upload of %s", full)
            raise

    def get(self, key: str) -> bytes:
        full = self.prefix + key
        body: bytes = self._call(
            "GET", full, lambda: self._client.get_object(Bucket=self.bucket, Key=full)["Body"].read()
        )
        return body

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """A ranged GET, through :meth:`native` first: the table pipeline's tasks read every slice
        this way, in the broker (the in-process runner), its helper process or a Spark executor;
        any failure there is retried once through boto3, whose retries and error mapping decide."""
        if end <= start:
            return b""
        native = self.native()
        if native is not None:
            try:
                data = native.get_range_blocking(self.prefix + key, start, end)
                self.native_reads += 1
                return data
            except Exception as exc:
                self.native_failed("GET", key, exc)
        return self.get_range_through_boto3(key, start, end)

    def get_range_through_boto3(self, key: str, start: int, end: int) -> bytes:
        """A ranged GET through boto3 alone (what a failed native attempt falls back to)."""
        if end <= start:
            return b""
        full = self.prefix + key
        body: bytes = self._call(
            "GET",
            full,
            lambda: self._client.get_object(Bucket=self.bucket, Key=full, Range=f"bytes={start}-{end - 1}")[
                "Body"
            ].read(),
        )
        return body

    def delete(self, keys: Iterable[str]) -> None:
        pending = [self.prefix + key for key in keys]
        for start in range(0, len(pending), 1000):
            chunk = pending[start : start + 1000]
            result = self._call(
                "DELETE",
                chunk[0],
                functools.partial(
                    self._client.delete_objects,
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                ),
            )
            errors = [e for e in result.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                # Raising keeps the metadata rows, so garbage collection tries again later.
                raise StorageUnavailable(
                    f"DELETE of {len(errors)} objects failed on {self.description}: "
                    f"{errors[0].get('Message')}"
                )

    def list(self, prefix: str = "") -> list[tuple[str, int]]:
        full = self.prefix + prefix
        result: list[tuple[str, int]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full}
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call("LIST", full, functools.partial(self._client.list_objects_v2, **kwargs))
            for item in page.get("Contents", []):
                result.append((item["Key"][len(self.prefix) :], int(item["Size"])))
            if not page.get("IsTruncated"):
                return result
            token = page.get("NextContinuationToken")

    def native_failed(self, what: str, key: str, exc: Exception) -> None:
        """Count a native request that failed and say so at most once a minute for the bucket,
        whichever path made it: boto3 retries the request at once and reports it if it fails too."""
        self.native_failures += 1
        self._native_warnings.warning(
            "native", "%s %s through obstore failed, retrying through boto3: %s", what, key, exc
        )

    def native(self) -> NativeS3 | None:
        """This bucket's client for the hot requests (see native_s3.py), opened on first use and
        shared by every thread, or None where obstore cannot open it."""
        if not self._native_opened:
            self._native_opened = True  # a thread asking meanwhile goes through boto3 once
            try:
                endpoint, region, path_style = self._endpoint, self._region, self._path_style
                self._native = NativeS3(
                    self.bucket, endpoint, region, self._access_key, self._secret_key, path_style
                )
            except Exception as exc:  # not installed, or a configuration obstore reads differently
                log.warning(
                    "S3 requests go through boto3 only: obstore could not open %r: %s", self.bucket, exc
                )
        return self._native

    def check(self) -> None:
        """Fail fast with a clear message when the bucket is missing or the credentials are wrong."""
        self._call("HEAD bucket", self.bucket, lambda: self._client.head_bucket(Bucket=self.bucket))


@dataclass(frozen=True, slots=True)
class LocalObjectStoreSpec:
    """A directory of the local file system holds the objects (the embedded default)."""

    root: str
    kind: Literal["local"] = "local"


@dataclass(frozen=True, slots=True)
class S3ObjectStoreSpec:
    """An S3 bucket (or an S3-compatible server at ``endpoint``) holds the objects under ``prefix``."""

    bucket: str
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)  # never in a log line or a traceback
    path_style: bool = False
    prefix: str = ""
    retries: int = 6
    multipart_threshold: int = 32 * keys.MiB
    part_size: int = 16 * keys.MiB
    kind: Literal["s3"] = "s3"


ObjectStoreSpec = LocalObjectStoreSpec | S3ObjectStoreSpec
"""Where a node's objects live, told apart by ``kind``: what the storage engine, the table
pipeline and its Spark executors (which get it pickled) open their object store from."""


def object_store_spec(config: Config) -> ObjectStoreSpec:
    """The configured store (``s3stream.object.store``, ``s3.*``), for :func:`open_object_store`
    (handed to Spark executors by the table pipeline, see ``StorageComponent.object_store_spec``).

    Raises:
        StreamError: ``s3stream.object.store=s3`` without ``s3.bucket``; the message names both.
    """
    kind = ObjectStoreKind(config.get(keys.OBJECT_STORE))
    if kind is ObjectStoreKind.AUTO:
        kind = ObjectStoreKind.S3 if config.get(keys.S3_BUCKET) else ObjectStoreKind.LOCAL
    if kind is ObjectStoreKind.LOCAL:
        directory = config.get(keys.OBJECT_DIR) or str(config.data_dir / "objects")
        return LocalObjectStoreSpec(root=str(Path(directory).expanduser().resolve()))
    bucket = config.get(keys.S3_BUCKET)
    if not bucket:
        raise StreamError("s3stream.object.store=s3 needs s3.bucket")
    return S3ObjectStoreSpec(
        bucket=bucket,
        endpoint=config.get(keys.S3_ENDPOINT),
        region=config.get(keys.S3_REGION),
        access_key=config.get(keys.S3_ACCESS_KEY),
        secret_key=config.get(keys.S3_SECRET_KEY),
        path_style=config.get(keys.S3_PATH_STYLE),
        prefix=config.get(keys.S3_PREFIX) or "",
        retries=config.get(keys.OBJECT_RETRIES),
        multipart_threshold=config.get(keys.MULTIPART_THRESHOLD),
        part_size=config.get(keys.MULTIPART_PART_SIZE),
    )


def parse_object_store_spec(fields: Mapping[str, Any]) -> ObjectStoreSpec:
    """An :data:`ObjectStoreSpec` from its fields (``dataclasses.asdict``), as a process that got
    them as JSON rebuilds it.

    Raises:
        StreamError: an unknown ``kind``, or fields that kind does not have.
    """
    values = dict(fields)
    kind = values.get("kind")
    spec_type: type[LocalObjectStoreSpec] | type[S3ObjectStoreSpec]
    if kind == ObjectStoreKind.LOCAL:
        spec_type = LocalObjectStoreSpec
    elif kind == ObjectStoreKind.S3:
        spec_type = S3ObjectStoreSpec
    else:
        raise StreamError(f"unknown object store kind {kind!r} (expected local or s3)")
    try:
        return spec_type(**values)
    except TypeError as exc:
        raise StreamError(f"malformed {kind} object store spec: {exc}") from exc


def open_object_store(spec: ObjectStoreSpec) -> LocalObjectStore | S3ObjectStore:
    """Build a blocking store from an :data:`ObjectStoreSpec` (works without a Config)."""
    if isinstance(spec, LocalObjectStoreSpec):
        return LocalObjectStore(spec.root)
    # The store takes every field of the spec but its kind, under the same name.
    settings = asdict(spec)
    del settings["kind"]
    settings["region"] = spec.region or "us-east-1"
    return S3ObjectStore(**settings)


class AsyncObjectStore:
    """Runs a blocking store's calls on its own thread pool so the event loop never waits on I/O.

    An S3 store's PUTs and GETs are first tried through its :meth:`S3ObjectStore.native`
    client (see native_s3.py), which holds no thread; any failure there is retried once through the
    blocking store, whose retries and error mapping then decide.
    """

    def __init__(self, store: ObjectStore, threads: int = 8) -> None:
        self.store = store
        self.description = store.description
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="s3stream-io")
        self._s3 = store if isinstance(store, S3ObjectStore) else None
        self._native = self._s3.native() if self._s3 is not None else None
        self._native_limit = self._s3.multipart_threshold if self._s3 is not None else 0
        self.native_requests = 0  # answered by the native client

    @property
    def native_failures(self) -> int:
        """Native requests that failed and went to boto3 (counted by the S3 store, with its own)."""
        return self._s3.native_failures if self._s3 is not None else 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking call (one of the store's, or a function given ``store``) on the I/O pool."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def put(self, key: str, data: bytes | memoryview | list[bytes | memoryview]) -> None:
        if self._s3 is not None and self._native is not None:
            parts = _as_parts(data)
            size = sum(len(p) for p in parts)
            if size < self._native_limit:
                body = parts[0] if len(parts) == 1 else await self._joined(parts, size)
                try:
                    await self._native.put(self.store_key(key), body)
                    self.native_requests += 1
                    return
                except Exception as exc:
                    self._s3.native_failed("PUT", key, exc)
        await self.run(self.store.put, key, data)

    async def _joined(self, parts: list[bytes | memoryview], size: int) -> bytes:
        """The parts as one body: joined on the loop while small, on the I/O pool when a copy of
        that size would hold the event loop (a local or shared WAL's upload reaches tens of MB; the
        blocking store joined them on its own thread before)."""
        if size <= JOIN_ON_LOOP_BYTES:
            return b"".join(parts)
        return await self.run(b"".join, parts)

    def store_key(self, key: str) -> str:
        """The bucket key of a store key (the S3 store's prefix in front)."""
        return self.store.prefix + key if isinstance(self.store, S3ObjectStore) else key

    async def get(self, key: str) -> bytes:
        if self._s3 is not None and self._native is not None:
            try:
                data = await self._native.get(self.store_key(key))
                self.native_requests += 1
                return data
            except Exception as exc:
                self._s3.native_failed("GET", key, exc)
        return await self.run(self.store.get, key)

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        if self._s3 is not None and self._native is not None and end > start:
            try:
                data = await self._native.get_range(self.store_key(key), start, end)
                self.native_requests += 1
                return data
            except Exception as exc:
                self._s3.native_failed("GET", key, exc)
            return await self.run(self._s3.get_range_through_boto3, key, start, end)
        return await self.run(self.store.get_range, key, start, end)

    async def delete(self, keys: Iterable[str]) -> None:
        await self.run(self.store.delete, list(keys))

    async def list(self, prefix: str = "") -> list[tuple[str, int]]:
        return await self.run(self.store.list, prefix)

    async def check(self) -> None:
        check = getattr(self.store, "check", None)
        if check is not None:
            await self.run(check)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=False)
