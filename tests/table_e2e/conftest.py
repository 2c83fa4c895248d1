"""The one shared ``tabletopic serve`` node (Spark runner) of the table end-to-end tests.

Starting a node costs a Spark JVM (~10-15 s, ~500 MB), so every test that only needs *a* node shares
this one and keeps to topic names of its own (:func:`topic_name`). The table-operation tests (rebuild,
redrive, restarts) share one node with the in-process runner. Tests that kill nodes start their own
(see ``test_kill_matrix.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.table_node import INPROCESS_NODE_SETTINGS, SPARK_NODE_SETTINGS, TableNode


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableNode]:
    """A node with the Spark runner shared by the whole test session."""
    table_node = TableNode(Path(tmp_path_factory.mktemp("table-node")), dict(SPARK_NODE_SETTINGS))
    table_node.start(timeout=180)
    yield table_node
    table_node.stop()


@pytest.fixture(scope="session")
def inprocess_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableNode]:
    """A node with the in-process job runner shared by the whole session; a test that stops it
    starts it again, and every test keeps to topics of its own."""
    table_node = TableNode(Path(tmp_path_factory.mktemp("inprocess-node")), dict(INPROCESS_NODE_SETTINGS))
    table_node.start()
    yield table_node
    table_node.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (the shared node outlives every test)."""
    base = request.node.name.removeprefix("test_")[:40]
    cleaned = "".join(c if c.isalnum() else "_" for c in base)
    return f"{cleaned}_{uuid.uuid4().hex[:6]}"
