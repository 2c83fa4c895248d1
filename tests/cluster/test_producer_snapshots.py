"""Producer-state snapshots written by two brokers at once, on PostgreSQL: a partition's old leader
snapshots what it held as it hands the partition over while the new leader snapshots it too.

A fault run at 1,200 partitions failed hand-overs this way: each snapshot read the stored row,
deleted it and inserted its own, so two writers of one stream could both delete nothing and both
insert, and the second failed on the primary key ("closing 4 partitions failed", retried for as
long as the race lasted)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.broker.producers import ProducerStates
from tabletopic.broker.topics import MIGRATIONS, producer_snapshots_table
from tabletopic.s3stream.memory import MemoryStreamStore

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _states_covering(engine: sa.Engine, stream_id: int, end_offset: int) -> ProducerStates:
    """Producer state of ``stream_id`` covering it up to ``end_offset``, not snapshotted yet."""
    states = ProducerStates(engine, MemoryStreamStore())
    states._streams[stream_id] = {}
    states._covered[stream_id] = end_offset
    states._dirty.add(stream_id)
    return states


async def test_two_snapshots_of_one_stream_at_once_keep_the_one_covering_more(postgres_url: str) -> None:
    engine = database.create_engine(postgres_url)
    database.migrate(engine, "broker", MIGRATIONS)
    stream_id = uuid.uuid4().int % (1 << 40)
    table = producer_snapshots_table
    with engine.connect() as deposed:
        deposed.begin()  # the old leader's snapshot, written but not committed yet
        deposed.execute(sa.insert(table).values(stream_id=stream_id, end_offset=5, state="{}"))
        successor = asyncio.create_task(_states_covering(engine, stream_id, 9).snapshot())
        await asyncio.sleep(0.5)  # the subject: the successor's write meets the uncommitted row
        deposed.commit()
    await asyncio.wait_for(successor, 30)  # raised IntegrityError (duplicate key) before
    late = _states_covering(engine, stream_id, 7)  # another late write, covering less
    await late.snapshot()
    assert late._read_snapshots()[stream_id][0] == 9
    engine.dispose()
