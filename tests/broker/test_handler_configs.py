"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics and the broker."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_calls import call
from tests.support.kafka_requests import request

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _describe(version: int, resource_type: int, name: str, keys=None):  # type: ignore[no-untyped-def]
    return request(
        32,
        version,
        include_synonyms=False,
        include_documentation=False,
        resources=[{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
    )


def _incremental(resource_type: int, name: str, *ops):  # type: ignore[no-untyped-def]
    return request(
        44,
        1,
        validate_only=False,
        resources=[
            {
                "resource_type": resource_type,
                "resource_name": name,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops],
            }
        ],
    )


@pytest.mark.parametrize("version", range(1, 5))
async def test_describe_topic_configs_marks_explicit_ones(broker_service, version) -> None:
    await broker_service.topics.create("t", 1, {"retention.ms": "5000"})
    result = (await call(broker_service, _describe(version, TOPIC, "t"))).results[0]
    configs = {c.name: c for c in result.configs}
    assert configs["retention.ms"].value == "5000"
    assert configs["cleanup.policy"].value == "delete"
    if version >= 1:
        assert configs["retention.ms"].config_source == 1
        assert configs["cleanup.policy"].config_source == 5


async def test_describe_selected_keys_and_missing_topic(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    result = (await call(broker_service, _describe(4, TOPIC, "t", ["retention.bytes"]))).results[0]
    assert [c.name for c in result.configs] == ["retention.bytes"]
    missing = (await call(broker_service, _describe(4, TOPIC, "nope"))).results[0]
    assert missing.error_code is ErrorCode.unknown_topic_or_partition


async def test_describe_broker_configs(broker_service) -> None:
    result = (await call(broker_service, _describe(4, BROKER, str(broker_service.node_id)))).results[0]
    configs = {c.name: c.value for c in result.configs}
    assert configs["num.partitions"] == "1"
    assert configs["sasl.plain.users"] is None  # sensitive


@pytest.mark.parametrize("version", range(0, 3))
async def test_alter_configs_replaces_the_explicit_set(broker_service, version) -> None:
    await broker_service.topics.create("t", 1, {"retention.ms": "5000"})
    req = request(
        33,
        version,
        validate_only=False,
        resources=[
            {
                "resource_type": TOPIC,
                "resource_name": "t",
                "configs": [{"name": "retention.bytes", "value": "100"}],
            }
        ],
    )
    assert (await call(broker_service, req)).responses[0].error_code is ErrorCode.none
    assert broker_service.topics.get("t").configs == {"retention.bytes": "100"}


async def test_alter_configs_rejects_unknown_keys(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    req = request(
        33,
        2,
        validate_only=False,
        resources=[
            {"resource_type": TOPIC, "resource_name": "t", "configs": [{"name": "bogus", "value": "1"}]}
        ],
    )
    result = (await call(broker_service, req)).responses[0]
    assert result.error_code is ErrorCode.invalid_config
    assert "bogus" in result.error_message


async def test_incremental_set_delete_append_subtract(broker_service) -> None:
    await broker_service.topics.create("t", 1, {"retention.ms": "5000"})
    response = await call(
        broker_service,
        _incremental(
            TOPIC,
            "t",
            ("retention.ms", DELETE, None),
            ("max.message.bytes", SET, "2000"),
            ("cleanup.policy", APPEND, "compact"),
        ),
    )
    assert response.responses[0].error_code is ErrorCode.none
    assert broker_service.topics.get("t").configs == {
        "max.message.bytes": "2000",
        "cleanup.policy": "delete,compact",
    }
    await call(broker_service, _incremental(TOPIC, "t", ("cleanup.policy", SUBTRACT, "delete")))
    assert broker_service.topics.get("t").configs["cleanup.policy"] == "compact"


async def test_incremental_rejects_bad_values_and_unknown_keys(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    bad = await call(broker_service, _incremental(TOPIC, "t", ("message.timestamp.type", SET, "Sometimes")))
    unknown = await call(broker_service, _incremental(TOPIC, "t", ("nope.key", SET, "1")))
    assert bad.responses[0].error_code is unknown.responses[0].error_code is ErrorCode.invalid_config


async def test_broker_configs_change_at_runtime_and_unknown_keys_are_refused(broker_service) -> None:
    name = str(broker_service.node_id)
    ok = await call(broker_service, _incremental(BROKER, name, ("num.partitions", SET, "4")))
    assert ok.responses[0].error_code is ErrorCode.none
    assert broker_service.broker_config("num.partitions") == 4
    unknown = await call(broker_service, _incremental(BROKER, name, ("no.such.broker.key", SET, "1")))
    assert unknown.responses[0].error_code is ErrorCode.invalid_config
    malformed = await call(broker_service, _incremental(BROKER, name, ("num.partitions", SET, "many")))
    assert malformed.responses[0].error_code is ErrorCode.invalid_config
