"""An idempotent producer on the object WAL when a batch object fails to upload.

The store fails every append behind the failed upload at once and rewinds the stream, but each
appending task learns of it only when it next runs. A batch of the same producer admitted in that
moment must be refused (OUT_OF_ORDER_SEQUENCE_NUMBER, which librdkafka retries behind the failed
one), not written where the failed batch was: librdkafka would take the failed batch, sent earlier,
as delivered once a later one is acknowledged (its "implicit ack"), and it would be lost. A fault
run found six records acknowledged that way and missing from the topic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tabletopic import database
from tabletopic.broker.listeners import Endpoint
from tabletopic.broker.partition_log import AppendResult
from tabletopic.broker.service import BrokerService
from tabletopic.config import Config
from tabletopic.records.header import validate_batches
from tabletopic.s3stream.store import S3StreamStore
from tests.support.broker_calls import call
from tests.support.failing_objects import FailingPuts
from tests.support.kafka_requests import make_batch, produce_request
from tests.support.store_harness import StoreHarness, local_object_settings

PRODUCER = 7


@pytest.fixture
async def object_wal_broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerService, FailingPuts]]:
    url = database.default_url(tmp_path)
    harness = StoreHarness(tmp_path, "object", local_object_settings(tmp_path), url)
    objects = FailingPuts(harness.object_store())
    harness.object_store = lambda: objects  # type: ignore[method-assign]
    store = await harness.open()
    config = Config({"data.dir": str(tmp_path), "log.retention.check.interval.ms": "3600000"})
    engine = database.create_engine(url)
    service = BrokerService(config, engine, store)
    service.advertised = {"PLAINTEXT": Endpoint("PLAINTEXT", "127.0.0.1", 9092)}
    await service.start()
    yield service, objects
    await service.stop()
    await harness.close_all()
    engine.dispose()


def _batch(sequence: int) -> bytes:
    value = f"seq-{sequence}".encode()
    return make_batch([value], producer_id=PRODUCER, producer_epoch=0, base_sequence=sequence)


async def _produce(service: BrokerService, sequence: int) -> ErrorCode:
    answer = await call(service, produce_request("t", 0, _batch(sequence)))
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


async def test_a_batch_admitted_while_the_one_before_it_is_failing_is_refused_not_written_past_it(
    object_wal_broker: tuple[BrokerService, FailingPuts],
) -> None:
    service, objects = object_wal_broker
    await service.topics.create("t", 1)
    assert await _produce(service, 0) is ErrorCode.none
    store = service.store
    assert isinstance(store, S3StreamStore)
    uploader = store.uploader
    fail_block = uploader._fail_block
    following: list[asyncio.Task[AppendResult]] = []

    def fail_block_then_admit_the_next(block: Any, error: Exception) -> None:
        # The next batch's append runs before the failed one's task wakes: its step is queued
        # first, as the append of a request handled earlier in the same loop iteration would be.
        if not following:
            following.append(asyncio.ensure_future(service.partition_log.append("t", 0, _batch(2))))
        fail_block(block, error)

    uploader._fail_block = fail_block_then_admit_the_next  # type: ignore[method-assign]
    objects.fail_next = True
    assert await _produce(service, 1) is ErrorCode.kafka_storage_error
    assert (await following[0]).error_code is ErrorCode.out_of_order_sequence_number
    uploader._fail_block = fail_block  # type: ignore[method-assign]

    # The producer retries both, in order, and the stream holds every sequence once, in order.
    assert await _produce(service, 1) is ErrorCode.none
    assert await _produce(service, 2) is ErrorCode.none
    stream = service.stream_id("t", 0)
    stored = await store.fetch(stream, 0, 1 << 20)
    assert [validate_batches(b.payload)[0].base_sequence for b in stored] == [0, 1, 2]
