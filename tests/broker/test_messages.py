"""Version-free request types: every kio class the broker serves maps onto them, and fields an old
version lacks take the type's default."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest

from tabletopic.broker.protocol.messages.convert import read_message
from tabletopic.broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest
from tabletopic.broker.protocol.messages.produce import SERVED_VERSIONS as PRODUCE_VERSIONS
from tabletopic.broker.protocol.sentinels import LATEST, READ_COMMITTED, READ_UNCOMMITTED
from tabletopic.broker.protocol.versions import MAX_VERSIONS, min_version


def _list_offsets(version: int) -> object:
    schema = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    fields = {"partition_index": 2, "timestamp": LATEST}
    if version >= 4:
        fields["current_leader_epoch"] = 7
    partition = schema.ListOffsetsPartition(**fields)
    topic = schema.ListOffsetsTopic(name="t", partitions=(partition,))
    request = {"replica_id": -1, "topics": (topic,)}
    if version >= 2:
        request["isolation_level"] = READ_COMMITTED
    if version >= 10:
        request["timeout"] = timedelta(seconds=1)
    return schema.ListOffsetsRequest(**request)


@pytest.mark.parametrize("version", range(min_version(2), MAX_VERSIONS[2] + 1))
def test_every_served_list_offsets_version_reads_into_the_version_free_request(version: int) -> None:
    request = read_message(ListOffsetsRequest, _list_offsets(version))
    [topic] = request.topics
    assert topic.name == "t"
    epoch = 7 if version >= 4 else -1  # before v4 a client names no leader epoch
    assert topic.partitions == (
        ListOffsetsPartition(partition_index=2, timestamp=LATEST, current_leader_epoch=epoch),
    )
    assert request.isolation_level == (READ_COMMITTED if version >= 2 else READ_UNCOMMITTED)


def test_the_produce_protocol_covers_exactly_the_versions_served() -> None:
    """The Produce request type is checked (by mypy) against kio's class of each version it lists;
    serving another version means listing it there."""
    assert range(min_version(0), MAX_VERSIONS[0] + 1) == PRODUCE_VERSIONS
