"""The hand-written Produce encoder writes exactly the bytes kio's generic writer writes, for every
version the broker serves (librdkafka gets an answer per partition and batch, and kio's writer took
six to eight times as long for it)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol import build_response, encode_response
from tabletopic.broker.protocol.produce_encoder import encode_produce_response
from tabletopic.broker.protocol.versions import MAX_VERSIONS

VERSIONS = range(3, MAX_VERSIONS[0] + 1)


def _appended(index: int, offset: int) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": ErrorCode.none,
        "error_message": None,
        "base_offset": offset,
        "log_append_time": -1,
        "log_start_offset": 0,
    }


def _answers() -> list[dict[str, Any]]:
    """One partition acknowledged (librdkafka's usual answer), then everything at once: several
    topics and partitions, a log-append time, record errors, messages, a refusal naming its
    leader and the leaders' endpoints, a throttle."""
    one = {
        "responses": [{"name": "orders", "partition_responses": [_appended(7, 123_456)]}],
        "throttle_time": 0,
    }
    refused = {
        "index": 2,
        "error_code": ErrorCode.not_leader_or_follower,
        "error_message": "not the leader",
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "current_leader": {"leader_id": 3, "leader_epoch": 9},
    }
    invalid = {
        **_appended(1, -1),
        "error_code": ErrorCode.invalid_record,
        "error_message": "2 records refused: Ω",  # non-ASCII: lengths are in bytes
        "record_errors": [
            {"batch_index": 0, "batch_index_error_message": "no schema id"},
            {"batch_index": 4, "batch_index_error_message": None},
        ],
    }
    everything = {
        "responses": [
            {"name": "orders", "partition_responses": [_appended(0, 10), invalid, refused]},
            {
                "name": "clicks-Ω",
                "partition_responses": [
                    {**_appended(5, 99), "log_append_time": 1_733_500_000_123},
                    {
                        **_appended(6, 100),
                        "log_append_time": datetime.datetime.fromtimestamp(1_733_500_000.5, datetime.UTC),
                    },
                    {**_appended(8, 101), "current_leader": {"leader_id": -1, "leader_epoch": -1}},
                ],
            },
        ],
        "throttle_time": 250,
        "node_endpoints": [
            {"node_id": 3, "host": "broker-3.example", "port": 19092, "rack": "c"},
            {"node_id": 4, "host": "127.0.0.1", "port": 9092, "rack": None},
        ],
    }
    return [one, everything, {"responses": [], "throttle_time": datetime.timedelta(milliseconds=40)}]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("answer", range(3))
def test_the_encoder_writes_what_kio_writes(version: int, answer: int) -> None:
    fields = _answers()[answer]
    expected = bytes(encode_response(42, build_response(0, version, fields)))
    wire = b"".join(bytes(piece) for piece in encode_produce_response(42, version, fields))
    assert wire == expected
