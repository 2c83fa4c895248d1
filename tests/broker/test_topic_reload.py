"""Reloading only the topics another broker changed: a cluster NOTIFY names the topic, and a broker
reading every topic's partitions for each of 100 topics created in a row (10,000 partitions) made
creation quadratic."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from kio.schema.errors import ErrorCode

from tabletopic import database
from tabletopic.broker.topics import TopicError, TopicRegistry
from tabletopic.s3stream.memory import MemoryStreamStore


async def test_reloading_named_topics_reads_those_and_leaves_the_others_as_they_were(tmp_path: Path) -> None:
    engine = database.create_engine(database.default_url(tmp_path))
    store = MemoryStreamStore()
    mine, theirs = TopicRegistry(engine, store), TopicRegistry(engine, store)
    await mine.load()
    await mine.create("gone", 1)
    await mine.create("grown", 2, {"retention.ms": "1000"})
    await theirs.load()
    await mine.create("new", 3)
    await mine.delete("gone")
    await mine.add_partitions("grown", 4)
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))

    await theirs.reload(["new", "gone"])

    assert sorted(t.name for t in theirs.all()) == ["grown", "new"]
    assert theirs.get("new").partition_count == 3  # type: ignore[union-attr]
    assert theirs.by_id(mine.get("new").topic_id) is theirs.get("new")  # type: ignore[union-attr]
    assert theirs.get("grown").partition_count == 2  # type: ignore[union-attr]  # not named: not read
    assert all(" IN (" in s for s in statements if s.lstrip().startswith("SELECT"))
    await theirs.reload(["grown"])
    grown = theirs.get("grown")
    assert grown is not None and grown.partition_count == 4 and grown.configs == {"retention.ms": "1000"}
    await theirs.reload()
    assert sorted(t.name for t in theirs.all()) == ["grown", "new"]
    engine.dispose()


async def test_growing_a_topic_another_broker_grew_a_moment_ago_counts_from_the_database(
    tmp_path: Path,
) -> None:
    """The second broker's copy still says 2 partitions when it is asked for 5: it adds partitions
    3 and 4 after the other broker's 2 and 3 (it once inserted partition 2 again, and the request
    closed the connection), and a count the topic has already reached is INVALID_PARTITIONS."""
    engine = database.create_engine(database.default_url(tmp_path))
    store = MemoryStreamStore()
    mine, theirs = TopicRegistry(engine, store), TopicRegistry(engine, store)
    await mine.load()
    await mine.create("grown", 2)
    await theirs.load()
    await mine.add_partitions("grown", 4)
    grown = await theirs.add_partitions("grown", 5)
    assert grown.partition_count == 5 and len(set(grown.streams)) == 5
    with pytest.raises(TopicError) as refused:
        await theirs.add_partitions("grown", 4)
    assert refused.value.error_code is ErrorCode.invalid_partitions
    await mine.reload(["grown"])
    assert mine.get("grown").streams == grown.streams  # type: ignore[union-attr]
    engine.dispose()
