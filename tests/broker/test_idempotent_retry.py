"""An idempotent producer whose connection drops while a produce is in flight retries the batch on a
new connection; the broker answers the retry (the original offset when the first attempt was
appended) instead of keeping the sequence reserved forever."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from tests.support.inproc_broker import GatedStore, inproc_broker
from tests.support.waiting import wait_until


@pytest.mark.timeout(60)
async def test_retry_after_dropped_connection_is_answered_once(tmp_path: Path) -> None:
    store = GatedStore()
    async with inproc_broker(tmp_path, store) as (broker, proxy):
        await broker.topics.create("idem", 1, {})
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{proxy.port}",
            enable_idempotence=True,
            request_timeout_ms=3000,
            retry_backoff_ms=50,
        )
        await producer.start()
        try:
            first = await producer.send_and_wait("idem", b"first", partition=0)
            store.hold = True
            pending = asyncio.ensure_future(producer.send_and_wait("idem", b"second", partition=0))
            await asyncio.wait_for(store.entered.wait(), 10)
            proxy.cut()  # the connection dies while the append is in flight
            # The producer retries the batch on a new connection while the first attempt is held.
            await wait_until(lambda: sum(key == 0 for key, _ in proxy.requests) >= 3, message="a retry")
            store.hold = False
            store.gate.set()
            second = await asyncio.wait_for(pending, 20)
        finally:
            await producer.stop()
        assert (first.offset, second.offset) == (0, 1)
        assert broker.high_watermark("idem", 0) == 2  # appended once, not twice
