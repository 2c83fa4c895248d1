"""One real broker process (``tabletopic serve``) shared by every test of this package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.broker.broker_process import BrokerProcess


@pytest.fixture(scope="session")
def broker_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("broker")).start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def bootstrap(broker_process: BrokerProcess) -> str:
    return broker_process.bootstrap


@pytest.fixture
async def broker_service(tmp_path):  # type: ignore[no-untyped-def]
    """A BrokerService on MemoryStreamStore and a fresh SQLite file: handler tests in milliseconds."""
    from tabletopic import database
    from tabletopic.broker.service import BrokerService, Endpoint
    from tabletopic.config import Config
    from tabletopic.s3stream.memory import MemoryStreamStore

    config = Config({"data.dir": str(tmp_path), "log.retention.check.interval.ms": "3600000"})
    engine = database.create_engine(database.default_url(tmp_path))
    store = MemoryStreamStore()
    service = BrokerService(config, engine, store)
    service.advertised = {"PLAINTEXT": Endpoint("PLAINTEXT", "127.0.0.1", 9092)}
    await service.start()
    yield service
    await service.stop()
    engine.dispose()
