"""Metadata: auto-creation, names, topic ids, the whole-cluster answer."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_calls import call
from tests.support.kafka_requests import request


def _metadata(version: int, names: list[str] | None, auto: bool = True):  # type: ignore[no-untyped-def]
    topics = None if names is None else [{"name": n, "topic_id": None} for n in names]
    return request(
        3,
        version,
        topics=topics,
        allow_auto_topic_creation=auto,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.parametrize("version", range(0, 13))
async def test_metadata_auto_creates_requested_topics_in_every_version(broker_service, version) -> None:
    response = await call(broker_service, _metadata(version, [f"auto{version}"]))
    topic = response.topics[0]
    assert topic.error_code is ErrorCode.none
    assert len(topic.partitions) == 1
    assert topic.partitions[0].leader_id == broker_service.node_id
    assert response.brokers[0].port == 9092


async def test_no_auto_creation_when_the_client_disallows_it(broker_service) -> None:
    response = await call(broker_service, _metadata(12, ["manual"], auto=False))
    assert response.topics[0].error_code is ErrorCode.unknown_topic_or_partition
    assert broker_service.topics.get("manual") is None


async def test_no_auto_creation_when_the_broker_disallows_it(broker_service) -> None:
    await broker_service.set_dynamic_configs({"auto.create.topics.enable": "false"})
    response = await call(broker_service, _metadata(12, ["manual"]))
    assert response.topics[0].error_code is ErrorCode.unknown_topic_or_partition


async def test_illegal_topic_name_is_invalid_topic(broker_service) -> None:
    response = await call(broker_service, _metadata(12, ["bad name!"]))
    assert response.topics[0].error_code is ErrorCode.invalid_topic_exception


async def test_null_topics_lists_every_topic_with_its_id(broker_service) -> None:
    await broker_service.topics.create("a", 2)
    await broker_service.topics.create("b", 3)
    response = await call(broker_service, _metadata(12, None))
    assert [(t.name, len(t.partitions)) for t in response.topics] == [("a", 2), ("b", 3)]
    assert response.topics[0].topic_id == broker_service.topics.get("a").topic_id
    assert response.cluster_id == broker_service.cluster_id


async def test_v0_empty_topic_list_means_all_topics(broker_service) -> None:
    await broker_service.topics.create("a", 1)
    response = await call(broker_service, _metadata(0, []))
    assert [t.name for t in response.topics] == ["a"]
