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
