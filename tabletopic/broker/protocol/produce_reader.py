"""Produce request bodies read without copying their records when the frame can lend them.

kio's reader copies each partition's records into a new ``bytes``: at 1 KiB messages that copy,
into freshly allocated (page-faulting) memory, was the largest single cost of the produce path,
more than the CRC checks and the WAL write together. A frame that arrived in a buffer of its own
(the server reads every frame larger than its shared read buffer that way, and never writes that
buffer again) can lend its bytes: the records become read-only views into it, kept by the store as
they are. A frame in the shared, reused read buffer cannot, and its records are copied as kio
would.

Produce v3 to v12 share one layout (v9 on in the flexible encoding): transactional id, acks,
timeout, then topics, each a name and partitions, each an index and records. Anything that does
not parse raises :class:`MalformedFrame`, like the kio path.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from functools import cache
from types import ModuleType
from typing import Any

from kio._kio_native import (
    read_compact_string,
    read_compact_string_nullable,
    read_int16,
    read_int32,
    read_legacy_string,
    read_nullable_legacy_string,
    read_unsigned_varint,
)

from tabletopic.broker.protocol.errors import MalformedFrame

PRODUCE = 0
VERSIONS = range(3, 13)  # v13 names topics by id
FIRST_FLEXIBLE = 9


@cache
def _schema(version: int) -> ModuleType:
    return importlib.import_module(f"kio.schema.produce.v{version}.request")


def read_produce_body(view: memoryview, position: int, version: int, lend: bool) -> Any:
    """The ProduceRequest (kio's class for ``version``) in ``view`` from ``position``; with
    ``lend`` each partition's records are a read-only view into ``view`` (whose buffer must never
    change again), else a copy."""
    try:
        return _read(view, position, version, lend)
    except MalformedFrame:
        raise
    except Exception as exc:  # kio's primitive readers raise BufferUnderflow, UnicodeError, ...
        raise MalformedFrame(f"cannot parse API key 0 v{version}: {type(exc).__name__}: {exc}") from exc


def _read(view: memoryview, position: int, version: int, lend: bool) -> Any:
    schema = _schema(version)
    flexible = version >= FIRST_FLEXIBLE
    end = len(view)

    def string(nullable: bool) -> Any:
        nonlocal position
        if flexible:
            value, size = (read_compact_string_nullable if nullable else read_compact_string)(view, position)
        else:
            value, size = (read_nullable_legacy_string if nullable else read_legacy_string)(view, position)
        position += size
        return value

    def length() -> int:
        """An array count or a records length, -1 for null (compact: stored plus one)."""
        nonlocal position
        if flexible:
            raw, size = read_unsigned_varint(view, position)
            position += size
            return int(raw) - 1
        value, size = read_int32(view, position)
        position += size
        return int(value)

    def count(what: str) -> int:
        """An array's element count; every element takes at least one byte."""
        at = position
        value = length()
        if value < 0:
            raise MalformedFrame(f"null for the non-nullable {what} array at byte {at}")
        if value > end - position:
            raise MalformedFrame(f"{what} count {value} at byte {at} runs past the end of the request")
        return value

    def skip_tagged_fields() -> None:
        nonlocal position
        if not flexible:
            return
        fields, size = read_unsigned_varint(view, position)
        position += size
        for _ in range(fields):
            _tag, size = read_unsigned_varint(view, position)
            position += size
            field_bytes, size = read_unsigned_varint(view, position)
            position += size + field_bytes
            if position > end:
                raise MalformedFrame(f"a tagged field runs past the end of the request at byte {position}")

    def records() -> bytes | memoryview | None:
        nonlocal position
        size = length()
        start = position
        if size < 0:
            return None
        position = start + size
        if position > end:
            raise MalformedFrame(f"records of {size} bytes at byte {start} run past the end of the request")
        data = view[start:position]
        return data.toreadonly() if lend else bytes(data)

    transactional_id = string(nullable=True)
    acks, size = read_int16(view, position)
    position += size
    timeout_ms, size = read_int32(view, position)
    position += size
    topics = []
    for _ in range(count("topic")):
        name = string(nullable=False)
        partitions = []
        for _ in range(count("partition")):
            index, size = read_int32(view, position)
            position += size
            partitions.append(schema.PartitionProduceData(index=index, records=records()))
            skip_tagged_fields()
        topics.append(schema.TopicProduceData(name=name, partition_data=tuple(partitions)))
        skip_tagged_fields()
    skip_tagged_fields()
    if position != end:
        raise MalformedFrame(f"{end - position} bytes left after the produce request")
    return schema.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=timedelta(milliseconds=timeout_ms),
        topic_data=tuple(topics),
    )
