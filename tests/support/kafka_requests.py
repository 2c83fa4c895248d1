"""Record batches and kio requests for handler tests."""

from __future__ import annotations

from typing import Any

from kio.index import load_request_schema

from tabletopic.broker.protocol import build_entity
from tabletopic.records.encoder import Record, build_batch
from tabletopic.records.header import MAGIC_OFFSET


def make_batch(
    values: list[bytes],
    *,
    timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytes:
    """An uncompressed batch of keyless ``values`` stamped ``timestamp``, ``timestamp + 1``, ...

    ``magic`` other than 2 only overwrites the magic byte (it lies outside the CRC): that is all a
    broker reads of an old-format batch before refusing it.
    """
    batch = build_batch(
        [Record(None, value) for value in values],
        timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    if magic == 2:
        return batch
    return batch[:MAGIC_OFFSET] + bytes([magic]) + batch[MAGIC_OFFSET + 1 :]


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request object of one version, from newest-shaped keyword fields."""
    return build_entity(load_request_schema(api_key, version), fields)


def produce_request(topic: str, partition: int, records: bytes, version: int = 9, acks: int = -1) -> Any:
    return request(
        0,
        version,
        transactional_id=None,
        acks=acks,
        timeout=5000,
        topic_data=[{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    )


def fetch_request(
    topic: str,
    partition: int,
    offset: int,
    version: int = 11,
    max_wait: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    topic_id: Any = None,
) -> Any:
    return request(
        1,
        version,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=[
            {
                "topic": topic,
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
    )


def session_fetch_request(
    topic: str,
    offsets: dict[int, int],
    *,
    session: tuple[int, int] = (0, -1),
    max_wait: int = 5000,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    rack_id: str = "",
) -> Any:
    """A Fetch (v11) of ``offsets`` (partition -> offset) of one topic inside a fetch session
    ``(session_id, epoch)``; an empty ``offsets`` is an incremental fetch naming nothing."""
    partitions = [
        {"partition": p, "fetch_offset": o, "partition_max_bytes": 1 << 20} for p, o in offsets.items()
    ]
    return request(
        1,
        11,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session[0],
        session_epoch=session[1],
        forgotten_topics_data=[],
        rack_id=rack_id,
        topics=[{"topic": topic, "partitions": partitions}] if offsets else [],
    )
