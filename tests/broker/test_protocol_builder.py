"""build_response fits one newest-shaped dict to every version of a response schema."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol import build_response, encode_response
from tabletopic.broker.protocol.builder import UnknownFieldError
from tabletopic.broker.protocol.versions import kio_max_version, min_version


@pytest.mark.parametrize("version", range(min_version(10), kio_max_version(10) + 1))
def test_find_coordinator_response_builds_for_every_version(version: int) -> None:
    fields = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "node_id": 1,
        "host": "127.0.0.1",
        "port": 9092,
        "coordinators": [{"key": "g", "node_id": 1, "host": "127.0.0.1", "port": 9092}],
    }
    response = build_response(10, version, fields)
    assert type(response).__version__ == version
    if version >= 4:
        assert response.coordinators[0].key == "g"
        assert response.coordinators[0].error_code is ErrorCode.none
    else:
        assert response.node_id == 1
    assert encode_response(3, response)[4:8] == b"\0\0\0\3"


def test_missing_fields_get_neutral_values_and_ints_become_timedelta_and_error_codes() -> None:
    response = build_response(12, 4, {"error_code": 27, "throttle_time": 5})
    assert response.error_code is ErrorCode.rebalance_in_progress
    assert response.throttle_time == datetime.timedelta(milliseconds=5)
    partial = build_response(15, 5, {"groups": [{"group_id": "g"}]})
    assert partial.groups[0].members == ()
    assert partial.groups[0].error_code is ErrorCode.none


def test_unknown_keys_are_dropped_for_old_versions() -> None:
    response = build_response(3, 0, {"cluster_id": "c", "topics": [{"name": "t", "topic_id": None}]})
    assert response.topics[0].name == "t"
    assert not hasattr(response, "cluster_id")


def test_a_key_that_no_version_has_is_an_error_at_every_depth() -> None:
    with pytest.raises(UnknownFieldError, match="MetadataResponse has no field cluster_idd"):
        build_response(3, 12, {"cluster_idd": "c"})
    with pytest.raises(UnknownFieldError, match="MetadataResponseTopic has no field nmae"):
        build_response(3, 12, {"topics": [{"nmae": "t"}]})
    # Still an error in a version that lacks the key's neighbours: the check spans all versions.
    with pytest.raises(UnknownFieldError, match="error_mesage"):
        build_response(10, 0, {"error_mesage": None})


def test_a_field_of_a_newer_version_is_still_dropped_for_an_older_one() -> None:
    # FindCoordinator v0 has no error_message and no coordinators[], both fields of newer versions.
    response = build_response(10, 0, {"error_message": "x", "coordinators": [{"key": "g"}], "node_id": 1})
    assert response.node_id == 1
    assert not hasattr(response, "coordinators")


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_records_left_out_are_empty_never_null(version: int) -> None:
    """A null record set breaks librdkafka's parse of the whole Fetch response; Kafka sends empty."""
    partition = {"partition_index": 0, "error_code": 29}
    response = build_response(1, version, {"responses": [{"topic": "t", "partitions": [partition]}]})
    assert response.responses[0].partitions[0].records == b""
