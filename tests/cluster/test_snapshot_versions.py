"""Incremental cluster snapshots against a real PostgreSQL: every broker polls the cluster a few
times a second, so an idle poll must read no partition row (10,000 of them made the brokers' idle
CPU grow with the partition count), and a poll after a change must read only the rows changed, yet
see exactly what a full read sees."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.cluster.controller import predicted_leader
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.ids import NodeId

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

ENDPOINTS = {"PLAINTEXT": ("127.0.0.1", 9092)}


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = database.create_engine(postgres_url)
    yield engine
    engine.dispose()


@pytest.fixture
def controller(engine: Engine) -> tuple[ClusterMetadata, int]:
    """Broker 1 registered and holding the controller lease: ``(metadata, controller epoch)``."""
    meta = ClusterMetadata(engine)
    meta.migrate()
    node_epoch = meta.register(1, None, ENDPOINTS, lease_s=30)
    epoch = meta.acquire_controller(1, node_epoch, lease_s=30)
    assert epoch is not None
    return meta, epoch


class PartitionReads:
    """Counts the rows of ``cluster_partitions`` the statements executed on ``engine`` returned."""

    def __init__(self, engine: Engine) -> None:
        self.rows = 0
        self.statements: list[str] = []
        sa.event.listen(engine, "after_cursor_execute", self._after)

    def _after(self, conn: object, cursor: object, statement: str, *args: object) -> None:
        if "FROM cluster_partitions" in statement and statement.lstrip().upper().startswith("SELECT"):
            self.statements.append(statement)
            self.rows += max(getattr(cursor, "rowcount", 0), 0)


def _keys(topic: str, count: int) -> list[tuple[str, int]]:
    return [(topic, p) for p in range(count)]


def test_an_idle_poll_reads_no_partition_row_and_keeps_the_same_partitions(
    engine: Engine, controller: tuple[ClusterMetadata, int]
) -> None:
    meta, epoch = controller
    meta.reconcile(1, epoch, _keys("orders", 500), max_moves=8)
    first = meta.snapshot()
    assert len(first.partitions) == 500
    reads = PartitionReads(engine)

    again = meta.snapshot(first)

    assert reads.statements == []
    assert again.partitions is first.partitions
    assert again.version == first.version
    assert again.same_as(first)


def test_a_poll_after_moves_reads_only_the_rows_changed_and_matches_a_full_read(
    engine: Engine, controller: tuple[ClusterMetadata, int]
) -> None:
    meta, epoch = controller
    meta.register(2, None, ENDPOINTS, lease_s=30)
    meta.reconcile(1, epoch, _keys("orders", 200), max_moves=0)
    before = meta.snapshot()
    leader = before.partitions[("orders", 7)].leader
    target = 2 if leader == 1 else 1
    assert meta.request_moves([("orders", 7, target), ("orders", 8, None)]) == []
    reads = PartitionReads(engine)

    after = meta.snapshot(before)

    assert reads.rows == 2  # the two rows request_moves changed, not 200
    assert after.version.version == before.version.version + 1
    assert after.partitions[("orders", 7)].target == target
    assert not after.same_as(before)
    assert after.partitions == meta.snapshot().partitions
    moves, version = meta.reconcile(1, epoch, _keys("orders", 200), max_moves=0)
    assert moves == {("orders", 7): target}
    placed = meta.snapshot(after)
    assert placed.version == version
    assert placed.partitions[("orders", 7)].leader == target
    assert placed.partitions == meta.snapshot().partitions


def test_a_round_that_changes_nothing_leaves_the_version_where_it_was(
    controller: tuple[ClusterMetadata, int],
) -> None:
    meta, epoch = controller
    moves, version = meta.reconcile(1, epoch, _keys("orders", 50), max_moves=8)
    assert len(moves) == 50
    again, unchanged = meta.reconcile(1, epoch, _keys("orders", 50), max_moves=8)
    assert again == {}
    assert unchanged == version == meta.snapshot().version


def test_deleted_partitions_disappear_from_an_incremental_poll(
    controller: tuple[ClusterMetadata, int],
) -> None:
    meta, epoch = controller
    meta.reconcile(1, epoch, [*_keys("orders", 10), *_keys("gone", 5)], max_moves=8)
    before = meta.snapshot()
    assert ("gone", 0) in before.partitions

    meta.reconcile(1, epoch, _keys("orders", 10), max_moves=8)
    after = meta.snapshot(before)

    assert after.version.purges == before.version.purges + 1
    assert set(after.partitions) == set(_keys("orders", 10))


def test_new_partitions_are_placed_at_epoch_one_wherever_metadata_guessed(
    engine: Engine, controller: tuple[ClusterMetadata, int]
) -> None:
    """Broker 1 holds every partition of a first topic; broker 2 joins; the next topic's partitions
    all go to broker 2 (the least loaded), those Metadata guessed for broker 1 too, at epoch 1: the
    guesses named epoch 0, so a client that took one takes the placement."""
    meta, epoch = controller
    meta.reconcile(1, epoch, _keys("first", 40), max_moves=0)
    meta.register(2, None, ENDPOINTS, lease_s=30)
    meta.reconcile(1, epoch, _keys("first", 40) + _keys("second", 20), max_moves=0)
    rows = meta.snapshot().partitions
    guessed = {predicted_leader(key, [NodeId(1), NodeId(2)]) for key in _keys("second", 20)}
    assert guessed == {1, 2}  # some were guessed elsewhere than where they went
    assert {(rows[k].leader, rows[k].leader_epoch) for k in _keys("second", 20)} == {(2, 1)}
