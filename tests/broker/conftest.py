"""One real broker process (``tabletopic serve``) shared by every test of this package, and the
in-process broker service and group coordinator the handler tests call directly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tests.support.broker_process import BrokerProcess
from tests.support.group_coordinators import make_coordinator


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
    from tabletopic.broker.listeners import Endpoint
    from tabletopic.broker.service import BrokerService
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


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = database.create_engine(database.default_url(tmp_path))
    yield engine
    engine.dispose()


@pytest.fixture
async def coordinator(sqlite_engine: Engine) -> AsyncIterator[GroupCoordinator]:
    """A started coordinator with fast limits over the topics of :data:`TOPICS`."""
    coordinator = make_coordinator(sqlite_engine)
    await coordinator.start()
    yield coordinator
    await coordinator.stop()
