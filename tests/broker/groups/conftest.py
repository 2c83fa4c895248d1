"""Coordinator fixtures of the group tests: a metadata engine per backend (``sqlite_engine``,
``coordinator`` and ``make_coordinator`` live in ``tests/broker/conftest.py``, where the group
handler tests find them too), and ``node``: one real broker for a module of client tests, started
with the module's ``NODE_OVERRIDES``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from tabletopic import database
from tests.support.broker_process import BrokerProcess


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = database.default_url(tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
    engine = database.create_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module, with its ``NODE_OVERRIDES`` (short heartbeats, sessions and
    locks, so that rebalances and redeliveries take seconds)."""
    overrides = dict(getattr(request.module, "NODE_OVERRIDES", {}))
    process = BrokerProcess(tmp_path_factory.mktemp("groups-node"), overrides=overrides).start()
    yield process
    process.stop()
