"""A broker served on a real socket inside the test's event loop, behind a proxy the test controls.

Real clients (aiokafka in the same loop, kafka-python or confluent-kafka in a thread) talk to it
through :class:`FrameProxy`, which is the advertised address: the test can cut every connection (as
a network fault would) and sees the size of every response frame. The store is a
:class:`GatedStore` over the in-memory engine so a test can hold an append in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from tabletopic import database
from tabletopic.broker.component import BrokerComponent
from tabletopic.broker.service import BrokerService
from tabletopic.config import Config
from tabletopic.s3stream.memory import MemoryStreamStore
from tests.support.ports import free_port


class GatedStore(MemoryStreamStore):
    """The memory store whose appends wait while :attr:`hold` is set (``entered`` tells the test
    an append is waiting), so a produce can be kept in flight on purpose."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def wait_for_room(self) -> None:
        # The produce path's last wait before its batches get offsets.
        if self.hold:
            self.entered.set()
            await self.gate.wait()

    async def append(self, stream_id: int, payload: bytes | memoryview, record_count: int) -> int:
        await self.wait_for_room()
        return await super().append(stream_id, payload, record_count)


class FrameProxy:
    """A TCP forwarder that records the size of every frame the broker sends and can drop every
    connection at once."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.response_sizes: list[int] = []
        self.requests: list[tuple[int, int]] = []  # (api key, frame size) of every request
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [writer, up_writer]
        await asyncio.gather(
            self._pipe(reader, up_writer, None, self.requests),
            self._pipe(up_reader, writer, self.response_sizes),
        )

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        sizes: list[int] | None,
        requests: list[tuple[int, int]] | None = None,
    ) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                (length,) = struct.unpack(">i", head)
                body = await reader.readexactly(length)
                if sizes is not None:
                    sizes.append(length)
                if requests is not None:
                    requests.append((struct.unpack_from(">h", body)[0], length))
                writer.write(head + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def cut(self) -> None:
        """Drop every connection (both sides), as a network fault would."""
        writers, self._writers = self._writers, []
        for writer in writers:
            transport = writer.transport
            transport.abort()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()


class _Storage:
    def __init__(self, store: MemoryStreamStore) -> None:
        self.store = store


@contextlib.asynccontextmanager
async def inproc_broker(
    data_dir: Path, store: MemoryStreamStore | None = None, **overrides: str
) -> AsyncIterator[tuple[BrokerService, FrameProxy]]:
    """A started broker on ``store`` (a fresh :class:`GatedStore` by default) and its proxy; the
    proxy's port is the advertised address, so clients never bypass it."""
    store = store if store is not None else GatedStore()
    broker_port, proxy_port = free_port(), free_port()
    values: dict[str, Any] = {
        "data.dir": str(data_dir),
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}",
        "log.retention.check.interval.ms": "3600000",
        "group.initial.rebalance.delay.ms": "0",
        **overrides,
    }
    engine = database.create_engine(database.default_url(data_dir))
    component = BrokerComponent(Config(values), engine, CollectorRegistry(), _Storage(store))  # type: ignore[arg-type]
    await component.start()
    proxy = FrameProxy(broker_port)
    await proxy.start(proxy_port)
    try:
        yield component.service, proxy
    finally:
        await proxy.stop()
        await component.stop()
        engine.dispose()
