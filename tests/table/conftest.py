"""The table coordinator's parts (``tests/support/table_coordinator.py``) as a fixture: a fresh
store, catalog and directory for each test of this package that asks for ``node``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.support.table_coordinator import Node, start_coordinator_parts


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    parts = await start_coordinator_parts(tmp_path)
    yield Node(parts.store, parts.catalog, parts.directory, parts.ctx)
    await parts.close()
