"""S3Stream-style storage on object storage: WAL, log cache, block cache, stream-set and stream
objects, compaction. Knows nothing of Kafka; see :mod:`tabletopic.s3stream.streams` for the contract.

Readers outside the broker (Spark tasks) need only :func:`open_object_store` and :func:`fetch_slice`
/ :func:`read_slice`."""

from typing import TYPE_CHECKING

from tabletopic.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tabletopic.s3stream.objects import fetch_slice, read_slice
    from tabletopic.s3stream.objectstore import open_object_store

# Re-exports loaded on first use (see tabletopic.lazy_exports).
_EXPORTS = {
    "fetch_slice": "tabletopic.s3stream.objects",
    "read_slice": "tabletopic.s3stream.objects",
    "open_object_store": "tabletopic.s3stream.objectstore",
}

__all__ = ["fetch_slice", "open_object_store", "read_slice"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
