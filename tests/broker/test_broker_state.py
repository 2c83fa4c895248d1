"""The broker's own state rows: brokers starting together agree on the first value written."""

from __future__ import annotations

import asyncio
import uuid
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


def test_a_topic_created_while_the_topics_are_read_is_not_half_seen(postgres_url: str) -> None:
    """Another broker creates a topic between this one's read of the topics and of their
    partitions: the reload sees the topic whole or not at all (it raised KeyError, and the cluster
    logged "reloading topics failed")."""
    from tabletopic.broker.topics import partitions_table, topic_configs_table, topics_table

    engine = sa.create_engine(postgres_url)
    other = sa.create_engine(postgres_url)
    registry = TopicRegistry(engine, store=cast(Any, None))  # reading never touches the store
    asyncio.run(registry.load())
    raced: list[bool] = []

    def created_meanwhile(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("SELECT") and "FROM broker_partitions" in statement and not raced:
            raced.append(True)
            with other.begin() as theirs:
                theirs.execute(sa.insert(topics_table).values(name="late", topic_id=str(uuid.uuid4())))
                theirs.execute(sa.insert(partitions_table).values(topic="late", partition=0, stream_id=7))
                theirs.execute(sa.insert(topic_configs_table).values(topic="late", key="k", value="v"))

    sa.event.listen(engine, "before_cursor_execute", created_meanwhile)
    try:
        asyncio.run(registry.reload())
        assert raced
        assert registry.get("late") is None  # not in the snapshot: the next reload has it
        asyncio.run(registry.reload())
        late = registry.get("late")
        assert late is not None and late.streams == [7] and late.configs == {"k": "v"}
    finally:
        engine.dispose()
        other.dispose()
