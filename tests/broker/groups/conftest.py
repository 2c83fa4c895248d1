"""Coordinator fixtures: a metadata engine per backend and a started coordinator with fast limits."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import GroupConfig

TOPICS = {"orders": 3, "events": 1}

FAST = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = database.default_url(tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
    engine = database.create_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = database.create_engine(database.default_url(tmp_path))
    yield engine
    engine.dispose()


CoordinatorFactory = Callable[[Engine], GroupCoordinator]


def make_coordinator(engine: Engine, config: GroupConfig = FAST) -> GroupCoordinator:
    return GroupCoordinator(engine, 1, "127.0.0.1", 9092, TOPICS.get, config=config)


@pytest.fixture
async def coordinator(sqlite_engine: Engine) -> AsyncIterator[GroupCoordinator]:
    coordinator = make_coordinator(sqlite_engine)
    await coordinator.start()
    yield coordinator
    await coordinator.stop()
