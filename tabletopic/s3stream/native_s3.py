"""The hot S3 requests through obstore (Rust's ``object_store``) instead of boto3.

In ``s3stream.wal.mode=object`` every acknowledgement waits for a batch object's PUT, and a
consumer catching up (or a broker reading the tails of partitions it took over) waits for index
and block reads. boto3 spends about 1.5 ms of Python CPU on each request (request building,
signing, its event hooks) and holds an I/O thread for the whole round trip, competing with the event
loop for the GIL: measured against SeaweedFS on loopback, a 20 KB PUT took 3.4–4.4 ms through boto3
and 1.6–1.9 ms through obstore, whose requests cost the calling process 0.2–0.4 ms of CPU and run on
obstore's own (Rust) runtime.

Only the requests on those paths go this way (and whole GETs: compaction reads every object it
merges, dozens a pass on a controller of many quiet partitions; ranged GETs also from a blocking
:class:`~tabletopic.s3stream.objectstore.S3ObjectStore`, with which the table pipeline's tasks read
their slices), and only as a first attempt: both fall back to boto3 on any failure, which keeps one
retry policy and one mapping of S3 errors to ours (a missing key, refused credentials, a throttled
bucket) for every request. A PUT of a reserved key is idempotent, so the second attempt is safe.
obstore's own retries are off for the same reason.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from obstore.store import S3Store


class NativeS3:
    """PUT, GET and ranged GET of whole keys (the store's prefix already applied) on one bucket."""

    def __init__(
        self,
        bucket: str,
        endpoint: str | None,
        region: str,
        access_key: str | None,
        secret_key: str | None,
        path_style: bool,
    ) -> None:
        from obstore.store import S3Store

        options: dict[str, object] = {"region": region}
        if endpoint:
            options["endpoint"] = endpoint
        if access_key and secret_key:
            options["access_key_id"] = access_key
            options["secret_access_key"] = secret_key
        # boto3's "auto" addressing is path style against a custom endpoint, virtual-hosted on AWS.
        options["virtual_hosted_style_request"] = not path_style and not endpoint
        self._store: S3Store = S3Store(
            bucket,
            client_options={
                "allow_http": bool(endpoint and endpoint.startswith("http://")),
                "connect_timeout": timedelta(seconds=5),
                "timeout": timedelta(seconds=30),
            },
            retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=30)},
            **options,  # type: ignore[arg-type]
        )

    async def put(self, key: str, body: bytes | memoryview) -> None:
        import obstore

        await obstore.put_async(self._store, key, body, use_multipart=False)

    async def get(self, key: str) -> bytes:
        """A whole object (compaction reads every object it merges this way)."""
        import obstore

        result = await obstore.get_async(self._store, key)
        return bytes(await result.bytes_async())

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        import obstore

        return bytes(await obstore.get_range_async(self._store, key, start=start, end=end))

    def get_range_blocking(self, key: str, start: int, end: int) -> bytes:
        """The same GET for a caller on its own thread (an ingest task): obstore waits for it on
        its runtime with the GIL released, where boto3 holds it for ~1.5 ms of every request."""
        import obstore

        return bytes(obstore.get_range(self._store, key, start=start, end=end))
