"""The hand-written Metadata encoder writes exactly the bytes kio's generic writer writes, for
every version the broker serves (it replaced kio on the Metadata path: 10,000 partitions took kio
250-300 ms)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol import WireResponse, build_response, encode_response
from tabletopic.broker.protocol.metadata_encoder import SharedPartitions, encode_metadata_response
from tabletopic.broker.security.quota_guard import with_throttle


def _partition(index: int, leader: int, epoch: int = 3, error: ErrorCode = ErrorCode.none) -> dict[str, Any]:
    return {
        "error_code": error,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": epoch,
        "replica_nodes": [leader],
        "isr_nodes": [leader],
        "offline_replicas": [],
    }


def _fields() -> dict[str, Any]:
    return {
        "throttle_time": 17,
        "brokers": [
            {"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": "a"},
            {"node_id": 2, "host": "broker-two.example", "port": 19092, "rack": None},
        ],
        "cluster_id": "cluster-Ω",  # non-ASCII: lengths are in bytes
        "controller_id": 2,
        "topics": [
            {
                "error_code": ErrorCode.none,
                "name": "orders",
                "topic_id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
                "is_internal": False,
                "partitions": [_partition(i, 1 + i % 2, epoch=i) for i in range(200)]
                + [{**_partition(200, 2), "replica_nodes": [2, 1], "offline_replicas": [1]}],
                "topic_authorized_operations": -2147483648,
            },
            {
                "error_code": ErrorCode.unknown_topic_or_partition,
                "name": "missing",
                "topic_id": uuid.UUID(int=0),
                "partitions": [],
            },
        ],
        "cluster_authorized_operations": -2147483648,
    }


@pytest.mark.parametrize("version", range(0, 14))
def test_the_encoder_writes_what_kio_writes(version: int) -> None:
    fields = _fields()
    expected = encode_response(42, build_response(3, version, fields))
    wire = b"".join(bytes(piece) for piece in encode_metadata_response(42, version, fields))
    assert wire == bytes(expected)


@pytest.mark.parametrize("version", [1, 2, 3, 8, 9, 12, 13])
def test_a_quota_throttle_is_patched_into_the_encoded_answer_where_the_version_has_the_field(
    version: int,
) -> None:
    fields = {**_fields(), "throttle_time": 0}
    encoded = WireResponse(encode_metadata_response(7, version, fields))
    ctx = RequestContext(3, version, 7, "test", "127.0.0.1", 1)
    throttled = with_throttle(encoded, 250, ctx)
    assert isinstance(throttled, WireResponse)
    wire = b"".join(bytes(piece) for piece in throttled.buffers)
    expected = {**fields, "throttle_time": 250} if version >= 3 else fields
    assert wire == bytes(encode_response(7, build_response(3, version, expected)))


@pytest.mark.parametrize("version", range(14))
def test_shared_partitions_encode_as_a_list_of_the_same_entries_does(version: int) -> None:
    """The wire form a :class:`SharedPartitions` keeps is the bytes the entries make as a list,
    the first time and every time after."""
    listed = _fields()
    shared = _fields()
    for topic in shared["topics"]:
        topic["partitions"] = SharedPartitions(topic["partitions"])
    expected = b"".join(bytes(piece) for piece in encode_metadata_response(5, version, listed))
    for _ in range(2):
        assert b"".join(bytes(piece) for piece in encode_metadata_response(5, version, shared)) == expected
