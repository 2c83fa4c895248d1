"""Coordinator fixtures of the group tests: a metadata engine per backend (``sqlite_engine``,
``coordinator`` and ``make_coordinator`` live in ``tests/broker/conftest.py``, where the group
handler tests find them too)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from tabletopic import database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = database.default_url(tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
    engine = database.create_engine(url)
    yield engine
    engine.dispose()
