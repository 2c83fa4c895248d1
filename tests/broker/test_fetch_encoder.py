"""The zero-copy Fetch encoder writes exactly the bytes kio's generic writer writes, for every
version the broker serves."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol import build_response, encode_response
from tabletopic.broker.protocol.fetch_encoder import FetchedPartition, FetchedTopic, encode_fetch_response
from tabletopic.broker.protocol.responses import NodeEndpoint
from tests.support.kafka_requests import make_batch

TOPIC_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _topics() -> list[FetchedTopic]:
    batch = make_batch([b"hello", b"world"])
    return [
        FetchedTopic(
            "orders",
            TOPIC_ID,
            [
                FetchedPartition(0, 0, 10, 2, [batch[:8], memoryview(batch)[8:]], len(batch)),
                FetchedPartition(1, int(ErrorCode.offset_out_of_range), 5, 5),
            ],
        ),
        FetchedTopic("empty", uuid.UUID(int=7), []),
    ]


def _kio_bytes(
    version: int, topics: list[FetchedTopic], endpoints: list[NodeEndpoint] | None = None
) -> bytes:
    fields: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "session_id": 0,
        "responses": [
            {
                "topic": t.name,
                "topic_id": t.topic_id,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode(p.error_code),
                        "high_watermark": p.high_watermark,
                        "last_stable_offset": p.high_watermark
                        if p.last_stable_offset == -2
                        else p.last_stable_offset,
                        "log_start_offset": p.log_start_offset,
                        "aborted_transactions": [
                            {"producer_id": producer, "first_offset": first} for producer, first in p.aborted
                        ],
                        "preferred_read_replica": p.preferred_read_replica,
                        "records": b"".join(bytes(x) for x in p.pieces),
                    }
                    | _leader_fields(p)
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    }
    if endpoints:
        fields["node_endpoints"] = endpoints
    return encode_response(99, build_response(1, version, fields))


def _leader_fields(partition: FetchedPartition) -> dict[str, Any]:
    if partition.current_leader is None:
        return {}
    leader_id, leader_epoch = partition.current_leader
    return {"current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch}}


@pytest.mark.parametrize("version", range(4, 18))
def test_encoder_matches_kio_byte_for_byte(version: int) -> None:
    topics = _topics()
    ours = b"".join(bytes(piece) for piece in encode_fetch_response(99, version, 0, topics))
    assert ours == _kio_bytes(version, topics)


@pytest.mark.parametrize("version", range(12, 18))
def test_a_refused_partitions_current_leader_and_its_endpoint_match_kio(version: int) -> None:
    """KIP-951: the current leader of a partition refused NOT_LEADER_OR_FOLLOWER (v12 on, a tagged
    field) and the endpoints of the leaders named (v16 on); kio leaves both out of older versions."""
    topics = _topics()
    refused = FetchedPartition(2, int(ErrorCode.not_leader_or_follower), current_leader=(3, 7))
    unknown = FetchedPartition(3, int(ErrorCode.not_leader_or_follower), current_leader=(-1, -1))
    topics[0].partitions = [*topics[0].partitions, refused, unknown]
    endpoints: list[NodeEndpoint] = [{"node_id": 3, "host": "broker-3", "port": 9093, "rack": "az-c"}]
    ours = encode_fetch_response(99, version, 0, topics, endpoints=endpoints)
    assert b"".join(bytes(piece) for piece in ours) == _kio_bytes(version, topics, endpoints)


@pytest.mark.parametrize("version", range(11, 18))
def test_partitions_without_records_match_kio_whatever_they_say(version: int) -> None:
    """Most partitions of an answer have no records (from v12 they are written in one piece): their
    offsets, a last stable offset behind the high watermark, a preferred read replica (KIP-392) and
    aborted transactions must still come out as kio writes them."""
    topics = _topics()
    topics[0].partitions = [
        *topics[0].partitions,
        FetchedPartition(7, 0, 9_000_000_000, 3, last_stable_offset=8_999_999_990, preferred_read_replica=2),
        FetchedPartition(300, 0, 12, 0, aborted=[(41, 5), (42, 8)], last_stable_offset=4),
        FetchedPartition(2**31 - 1, int(ErrorCode.kafka_storage_error)),
    ]
    ours = b"".join(bytes(piece) for piece in encode_fetch_response(99, version, 0, topics))
    assert ours == _kio_bytes(version, topics)


def test_record_data_is_passed_through_not_copied() -> None:
    topics = _topics()
    payload = topics[0].partitions[0].pieces[1]
    buffers = encode_fetch_response(1, 16, 0, topics)
    assert any(piece is payload for piece in buffers)
