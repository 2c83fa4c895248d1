"""The broker's own state rows: brokers starting together agree on the first value written."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import sqlalchemy as sa

from tabletopic.broker.topics import TopicRegistry, broker_state_table

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_the_broker_losing_the_race_to_create_a_state_value_reads_the_winners(postgres_url: str) -> None:
    engine = sa.create_engine(postgres_url)
    other = sa.create_engine(postgres_url)
    registry = TopicRegistry(engine, store=cast(Any, None))  # state rows never touch the store
    asyncio.run(registry.load())

    raced: list[bool] = []

    def winner_first(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        """Another broker inserts between this one's read and its insert."""
        if statement.startswith("INSERT INTO broker_state") and not raced:
            raced.append(True)
            with other.begin() as theirs:
                theirs.execute(sa.insert(broker_state_table).values(key="cluster.id", value="theirs"))

    sa.event.listen(engine, "before_cursor_execute", winner_first)
    try:
        assert asyncio.run(registry.state_value("cluster.id", "mine")) == "theirs"
        assert asyncio.run(registry.state_value("cluster.id", "again")) == "theirs"
        assert raced
    finally:
        engine.dispose()
        other.dispose()
