"""A produce racing a partition move in a cluster: the stream closes under the append (leadership
moved away), and the client must hear NOT_LEADER_OR_FOLLOWER, which makes it refresh metadata and
retry on the new leader, not UNKNOWN_TOPIC_OR_PARTITION for a topic that exists."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.s3stream.streams import StreamNotFound
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request


async def test_a_stream_closed_by_a_move_answers_not_leader(broker_service: Any) -> None:
    await broker_service.topics.create("t", 1)
    broker_service.clustered = True

    def closed(*args: Any, **kwargs: Any) -> Any:
        raise StreamNotFound("stream 1 was closed here")

    broker_service.store.start_append = closed
    answer = await call(broker_service, produce_request("t", 0, make_batch([b"v"])))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.not_leader_or_follower


async def test_on_one_node_a_vanished_stream_is_still_an_unknown_partition(broker_service: Any) -> None:
    await broker_service.topics.create("t", 1)

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise StreamNotFound("stream 1 does not exist")

    broker_service.store.start_append = gone
    answer = await call(broker_service, produce_request("t", 0, make_batch([b"v"])))
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.unknown_topic_or_partition
