"""CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords, InitProducerId, DescribeCluster."""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic.broker.topic_config_keys import TopicConfigExtension
from tests.support.broker_calls import call
from tests.support.kafka_requests import make_batch, produce_request, request


def _create(version: int, *topics: dict, validate_only: bool = False):  # type: ignore[no-untyped-def]
    return request(
        19,
        version,
        timeout=5000,
        validate_only=validate_only,
        topics=[
            {"num_partitions": -1, "replication_factor": -1, "assignments": [], "configs": [], **t}
            for t in topics
        ],
    )


@pytest.mark.parametrize("version", range(2, 8))
async def test_create_topics_in_every_version(broker_service, version) -> None:
    response = await call(
        broker_service, _create(version, {"name": "x", "num_partitions": 3, "replication_factor": 3})
    )
    assert response.topics[0].error_code is ErrorCode.none
    assert broker_service.topics.get("x").partition_count == 3


async def test_create_topic_reports_effective_configs_and_id(broker_service) -> None:
    response = await call(
        broker_service, _create(7, {"name": "x", "configs": [{"name": "retention.ms", "value": "1000"}]})
    )
    result = response.topics[0]
    assert result.topic_id == broker_service.topics.get("x").topic_id
    configs = {c.name: c.value for c in result.configs}
    assert configs["retention.ms"] == "1000"
    assert configs["cleanup.policy"] == "delete"


async def test_validate_only_creates_nothing(broker_service) -> None:
    response = await call(broker_service, _create(7, {"name": "x"}, validate_only=True))
    assert response.topics[0].error_code is ErrorCode.none
    assert broker_service.topics.get("x") is None


async def test_existing_topic_and_bad_inputs_are_refused(broker_service) -> None:
    await call(broker_service, _create(7, {"name": "x"}))
    response = await call(
        broker_service,
        _create(
            7,
            {"name": "x"},
            {"name": "bad/name"},
            {"name": "y", "num_partitions": 0},
            {"name": "z", "configs": [{"name": "no.such.key", "value": "1"}]},
            {"name": "w", "configs": [{"name": "retention.ms", "value": "soon"}]},
        ),
    )
    codes = [t.error_code for t in response.topics]
    assert codes == [
        ErrorCode.topic_already_exists,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_partitions,
        ErrorCode.invalid_config,
        ErrorCode.invalid_config,
    ]
    assert "no.such.key" in response.topics[3].error_message


async def test_table_topic_keys_go_through_the_validator_hook(broker_service) -> None:
    def validator(configs: dict[str, str]) -> None:
        if configs.get("automq.table.topic.enable") not in ("true", "false"):
            raise ValueError("automq.table.topic.enable must be true or false")

    broker_service.topics.set_config_extensions([TopicConfigExtension("automq.table.topic.", validator)])
    bad = await call(
        broker_service,
        _create(7, {"name": "x", "configs": [{"name": "automq.table.topic.enable", "value": "maybe"}]}),
    )
    good = await call(
        broker_service,
        _create(7, {"name": "y", "configs": [{"name": "automq.table.topic.enable", "value": "true"}]}),
    )
    assert bad.topics[0].error_code is ErrorCode.invalid_config
    assert "must be true or false" in bad.topics[0].error_message
    assert good.topics[0].error_code is ErrorCode.none
    assert broker_service.topics.get("x") is None
    assert broker_service.topic_configs("y")["automq.table.topic.enable"] == "true"


@pytest.mark.parametrize("version", range(1, 7))
async def test_delete_topics_in_every_version(broker_service, version) -> None:
    await broker_service.topics.create("x", 2)
    if version >= 6:
        req = request(
            20,
            version,
            timeout=5000,
            topics=[{"name": "x", "topic_id": None}, {"name": "missing", "topic_id": None}],
        )
    else:
        req = request(20, version, timeout=5000, topic_names=["x", "missing"])
    response = await call(broker_service, req)
    assert [r.error_code for r in response.responses] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
    ]
    assert broker_service.topics.get("x") is None


async def test_create_partitions_only_grows(broker_service) -> None:
    await broker_service.topics.create("x", 2)
    grow = request(
        37, 3, timeout=5000, validate_only=False, topics=[{"name": "x", "count": 5, "assignments": None}]
    )
    shrink = request(
        37, 3, timeout=5000, validate_only=False, topics=[{"name": "x", "count": 1, "assignments": None}]
    )
    assert (await call(broker_service, grow)).results[0].error_code is ErrorCode.none
    assert broker_service.topics.get("x").partition_count == 5
    assert (await call(broker_service, shrink)).results[0].error_code is ErrorCode.invalid_partitions


async def test_create_partitions_among_several_brokers_refuses_an_assignment(
    broker_service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With several brokers the controller places new partitions: an assignment, even of one live
    broker, cannot be promised and is INVALID_REPLICA_ASSIGNMENT (nothing is created)."""
    from tabletopic.broker.leadership import BrokerEndpoint

    three = [BrokerEndpoint(n, "127.0.0.1", 9000 + n) for n in (1, 2, 3)]
    monkeypatch.setattr(broker_service.leadership, "brokers", lambda _listener: three)
    await broker_service.topics.create("c", 1)
    assigned = request(
        37, 3, timeout=5000, validate_only=False,
        topics=[{"name": "c", "count": 2, "assignments": [{"broker_ids": [2]}]}],
    )  # fmt: skip
    answer = (await call(broker_service, assigned)).results[0]
    assert answer.error_code is ErrorCode.invalid_replica_assignment
    assert "AlterPartitionReassignments" in answer.error_message
    assert broker_service.topics.get("c").partition_count == 1


async def test_delete_records_moves_the_log_start(broker_service) -> None:
    await broker_service.topics.create("x", 1)
    for _ in range(3):
        await call(broker_service, produce_request("x", 0, make_batch([b"a", b"b"])))
    req = request(
        21, 2, timeout=5000, topics=[{"name": "x", "partitions": [{"partition_index": 0, "offset": 4}]}]
    )
    result = (await call(broker_service, req)).topics[0].partitions[0]
    assert (result.error_code, result.low_watermark) == (ErrorCode.none, 4)
    assert broker_service.log_start_offset("x", 0) == 4


async def test_init_producer_id_hands_out_distinct_ids_and_bumps_epochs(broker_service) -> None:
    first = await call(
        broker_service,
        request(22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1),
    )
    second = await call(
        broker_service,
        request(22, 4, transactional_id=None, transaction_timeout=60000, producer_id=-1, producer_epoch=-1),
    )
    assert first.producer_id != second.producer_id
    bumped = await call(
        broker_service,
        request(
            22,
            4,
            transactional_id=None,
            transaction_timeout=60000,
            producer_id=first.producer_id,
            producer_epoch=0,
        ),
    )
    assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
    transactional = [
        await call(
            broker_service,
            request(
                22, 4, transactional_id="tx", transaction_timeout=60000, producer_id=-1, producer_epoch=-1
            ),
        )
        for _ in range(2)
    ]
    assert [(t.error_code, t.producer_epoch) for t in transactional] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 1),
    ]
    assert transactional[0].producer_id == transactional[1].producer_id  # the same id, fenced epoch
    too_long = await call(
        broker_service,
        request(22, 4, transactional_id="tx", transaction_timeout=10**9, producer_id=-1, producer_epoch=-1),
    )
    assert too_long.error_code is ErrorCode.invalid_transaction_timeout


async def test_describe_cluster_names_this_node(broker_service) -> None:
    response = await call(
        broker_service, request(60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    )
    assert response.cluster_id == broker_service.cluster_id
    assert response.brokers[0].broker_id == broker_service.node_id
