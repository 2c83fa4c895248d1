"""Conditional commits carry the offsets; a stale plan never commits twice."""

from __future__ import annotations

import functools
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.table import Table
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.table.commit import StalePlan, commit_data_files, committed_state
from tabletopic.table.lease import Lease, LeaseFenced, LeaseManager


@pytest.fixture
def table(tmp_path: Path) -> Table:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("ns")
    return catalog.create_table("ns.events", pa.schema([("v", pa.int64())]))


def files_for(table: Table, values: list[int]) -> list:
    df = pa.table({"v": pa.array(values, pa.int64())})
    return list(
        _dataframe_to_data_files(table_metadata=table.metadata, write_uuid=uuid.uuid4(), df=df, io=table.io)
    )


def test_a_fresh_table_has_no_committed_offsets(table: Table) -> None:
    state = committed_state(table)
    assert state.snapshot_id is None and state.offsets == {}
    assert state.next_offset(3, log_start=7) == 7


def test_commit_advances_offsets_in_the_same_snapshot_as_the_data(table: Table) -> None:
    planned = committed_state(table)
    commit_data_files(table, files_for(table, [1, 2]), {0: 2, 1: 5}, planned, epoch=1, topic_id="tid")
    table.refresh()
    state = committed_state(table)
    assert state.offsets == {0: 2, 1: 5} and state.topic_id == "tid" and state.epoch == 1
    assert table.scan().to_arrow().num_rows == 2
    # The next commit keeps partitions it does not touch.
    commit_data_files(table, files_for(table, [3]), {0: 3}, state, epoch=1, topic_id="tid")
    table.refresh()
    assert committed_state(table).offsets == {0: 3, 1: 5}


def test_a_batch_planned_against_an_old_snapshot_is_rejected_not_duplicated(table: Table) -> None:
    planned = committed_state(table)
    stale_copy = table.catalog.load_table(table.name())
    commit_data_files(table, files_for(table, [1]), {0: 1}, planned, epoch=1, topic_id=None)
    # A second coordinator (or a retry of a commit that did land) planned the same range.
    with pytest.raises(StalePlan):
        commit_data_files(stale_copy, files_for(stale_copy, [1]), {0: 1}, planned, epoch=1, topic_id=None)
    stale_copy.refresh()
    with pytest.raises(StalePlan):
        commit_data_files(stale_copy, files_for(stale_copy, [1]), {0: 1}, planned, epoch=1, topic_id=None)
    table.refresh()
    assert table.scan().to_arrow().num_rows == 1


def test_offsets_never_go_backwards(table: Table) -> None:
    commit_data_files(table, files_for(table, [1]), {0: 10}, committed_state(table), epoch=1, topic_id=None)
    table.refresh()
    with pytest.raises(ValueError, match="backwards"):
        commit_data_files(table, [], {0: 5}, committed_state(table), epoch=1, topic_id=None)


def test_offsets_survive_maintenance_snapshots_without_properties(table: Table) -> None:
    commit_data_files(table, files_for(table, [1]), {0: 1}, committed_state(table), epoch=2, topic_id=None)
    table.refresh()
    table.append(pa.table({"v": pa.array([9], pa.int64())}))  # a snapshot with no tabletopic properties
    table.refresh()
    assert committed_state(table).offsets == {0: 1}


def test_lease_is_exclusive_until_it_expires_and_takeover_bumps_the_epoch(tmp_path: Path) -> None:
    engine = database.create_engine(database.default_url(tmp_path))
    node_a = LeaseManager(engine, "a", ttl_seconds=10)
    node_b = LeaseManager(engine, "b", ttl_seconds=10)
    lease_a = node_a.acquire("orders", now=100)
    assert lease_a is not None and lease_a.epoch == 1
    assert node_b.acquire("orders", now=105) is None
    assert node_a.acquire("orders", now=105).epoch == 1  # renewal keeps the epoch
    lease_b = node_b.acquire("orders", now=120)
    assert lease_b is not None and lease_b.epoch == 2
    with pytest.raises(LeaseFenced):
        node_a.confirm(lease_a, now=121)
    node_b.confirm(lease_b, now=121)


def test_a_higher_claim_takes_the_lease_over_at_once_and_fences_the_holder(tmp_path: Path) -> None:
    """In a cluster the claim is partition 0's leader epoch: its new leader need not wait out the
    lease of a coordinator on a dead broker, and a stale claim never takes it back."""
    engine = database.create_engine(database.default_url(tmp_path))
    node_a = LeaseManager(engine, "a", ttl_seconds=30)
    node_b = LeaseManager(engine, "b", ttl_seconds=30)
    lease_a = node_a.acquire("orders", now=100, claim=3)
    assert lease_a is not None
    assert node_b.acquire("orders", now=101, claim=3) is None
    lease_b = node_b.acquire("orders", now=101, claim=4)
    assert lease_b is not None and lease_b.epoch == lease_a.epoch + 1
    with pytest.raises(LeaseFenced):
        node_a.confirm(lease_a, now=102)
    assert node_a.acquire("orders", now=102, claim=3) is None


def test_an_expired_lease_nobody_took_is_still_confirmed(tmp_path: Path) -> None:
    engine = database.create_engine(database.default_url(tmp_path))
    node_a = LeaseManager(engine, "a", ttl_seconds=10)
    lease = node_a.acquire("orders", now=100)
    assert lease is not None
    renewed = node_a.confirm(lease, now=500)  # a long job outlived the lease; no one took over
    assert renewed.epoch == lease.epoch and renewed.expires_at == 510


def _take_over(engine: Engine, claim: int = 2) -> Lease:
    """Coordinator B, on a newer leader of partition 0, takes the lease of "events" over."""
    lease = LeaseManager(engine, "b", ttl_seconds=30).acquire("events", claim=claim)
    assert lease is not None
    return lease


def _coordinator_a(tmp_path: Path) -> tuple[Engine, LeaseManager, Lease]:
    engine = database.create_engine(database.default_url(tmp_path / "leases"))
    node_a = LeaseManager(engine, "a", ttl_seconds=30)
    lease_a = node_a.acquire("events", claim=1)
    assert lease_a is not None
    return engine, node_a, lease_a


def test_a_deposed_coordinators_commit_is_refused_by_its_fence_even_when_the_table_did_not_move(
    table: Table, tmp_path: Path
) -> None:
    planned = committed_state(table)
    engine, node_a, lease_a = _coordinator_a(tmp_path)
    _take_over(engine)
    fence = functools.partial(node_a.confirm, lease_a)
    with pytest.raises(LeaseFenced):
        commit_data_files(table, files_for(table, [1]), {0: 1}, planned, lease_a.epoch, None, fence=fence)
    table.refresh()
    assert table.metadata.current_snapshot_id is None  # nothing committed


def test_a_coordinator_paused_after_its_fence_is_refused_once_its_successor_committed(
    table: Table, tmp_path: Path
) -> None:
    """The window the fence leaves (the catalog request after it): the conditional commit on the
    planned snapshot is what refuses the deposed coordinator."""
    planned = committed_state(table)
    stale_copy = table.catalog.load_table(table.name())
    engine, node_a, lease_a = _coordinator_a(tmp_path)

    def fence_then_pause() -> None:
        node_a.confirm(lease_a)  # still A's; A is paused right after, B takes over and commits
        lease_b = _take_over(engine)
        commit_data_files(table, files_for(table, [1]), {0: 1}, planned, lease_b.epoch, None)

    with pytest.raises(StalePlan):
        commit_data_files(
            stale_copy,
            files_for(stale_copy, [1]),
            {0: 1},
            planned,
            lease_a.epoch,
            None,
            fence=fence_then_pause,
        )
    table.refresh()
    assert table.scan().to_arrow().num_rows == 1 and committed_state(table).epoch == lease_a.epoch + 1


def test_a_coordinator_paused_after_its_fence_commits_exactly_when_its_successor_has_not_yet(
    table: Table, tmp_path: Path
) -> None:
    """What the fence does not stop, stated as a test: a deposed coordinator paused between its
    fence and the catalog request still commits if nothing was committed since its plan. The table
    stays exact: that commit covers exactly the offsets after the planned snapshot, and the
    successor's commit planned at the same snapshot is refused, so it re-plans from the table."""
    planned = committed_state(table)
    stale_copy = table.catalog.load_table(table.name())
    engine, node_a, lease_a = _coordinator_a(tmp_path)
    taken: list[Lease] = []

    def fence_then_pause() -> None:
        node_a.confirm(lease_a)
        taken.append(_take_over(engine))  # B takes over while A is paused, and plans at `planned`

    commit_data_files(
        stale_copy, files_for(stale_copy, [1]), {0: 1}, planned, lease_a.epoch, None, fence=fence_then_pause
    )
    with pytest.raises(StalePlan):
        commit_data_files(table, files_for(table, [1]), {0: 1}, planned, taken[0].epoch, None)
    table.refresh()
    assert committed_state(table).offsets == {0: 1} and table.scan().to_arrow().num_rows == 1


def test_a_commit_works_the_staged_metadata_out_once_not_at_every_read(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Working the staged metadata out deep-copies the table's whole history (a second of CPU per
    commit past a few thousand snapshots): pyiceberg's own transaction did it about twenty times per
    append; the pipeline's does it once per staged change (and the catalog once more)."""
    calls = count_metadata_work(monkeypatch)
    for offset in (1, 2):
        calls.clear()
        commit_data_files(table, files_for(table, [offset]), {0: offset}, committed_state(table), 1, None)
        table.refresh()
        assert len(calls) <= 2, len(calls)
    assert table.scan().to_arrow().num_rows == 2 and committed_state(table).offsets == {0: 2}


def count_metadata_work(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, a 1 in the list returned for every time pyiceberg (its transaction, its
    catalogs) or the pipeline works a table's staged metadata out: a copy of its whole history."""
    import pyiceberg.catalog
    import pyiceberg.table

    from tabletopic.table import commit

    calls: list[int] = []
    for module in (pyiceberg.table, pyiceberg.catalog, commit):
        counted = functools.partial(_counting, module.update_table_metadata, calls)
        monkeypatch.setattr(module, "update_table_metadata", counted)
    return calls


def _counting(wrapped, calls: list[int], *args, **kwargs):  # type: ignore[no-untyped-def]
    calls.append(1)
    return wrapped(*args, **kwargs)


@pytest.mark.parametrize("merge", [None, "false"])
def test_appends_merge_manifests_as_icebergs_own_writers_do_unless_the_table_says_not(
    table: Table, merge: str | None
) -> None:
    """A fast append (pyiceberg's default) adds a manifest per commit, and every reader opens each:
    the pipeline's appends merge them (Iceberg's Java default), unless the table turns it off."""
    with table.transaction() as setting:
        setting.set_properties({"commit.manifest.min-count-to-merge": "3"})
        if merge is not None:
            setting.set_properties({"commit.manifest-merge.enabled": merge})
    for offset in range(1, 7):
        commit_data_files(table, files_for(table, [offset]), {0: offset}, committed_state(table), 1, None)
        table.refresh()
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = len(snapshot.manifests(table.io))
    assert manifests == 6 if merge == "false" else manifests < 6
    assert sorted(table.scan().to_arrow()["v"].to_pylist()) == [1, 2, 3, 4, 5, 6]
    assert committed_state(table).offsets == {0: 6}
    # Merging is the commit's own setting: nothing is written to the table's properties.
    assert "commit.manifest-merge.enabled" not in table.properties or merge is not None


def test_a_jobs_tasks_get_the_tables_schema_and_layout_without_its_history(table: Table) -> None:
    """Tasks write data files against the table's schema, spec and properties; its history grows
    with every snapshot kept and would be parsed again by every task."""
    from pyiceberg.table.metadata import TableMetadataUtil

    from tabletopic.table.job import task_metadata_json

    for offset in (1, 2, 3):
        commit_data_files(table, files_for(table, [offset]), {0: offset}, committed_state(table), 1, None)
        table.refresh()
    shipped = TableMetadataUtil.parse_raw(task_metadata_json(table.metadata))
    assert shipped.snapshots == [] and shipped.current_snapshot() is None
    assert shipped.schema() == table.schema() and shipped.spec() == table.spec()
    assert shipped.location == table.location() and shipped.properties == table.properties
    assert len(table.metadata.snapshots) == 3  # the table's own metadata is untouched


def test_expiry_keeps_the_offsets_and_rows_and_copies_the_history_once_not_twice_a_snapshot(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Maintenance expires old snapshots every minute; pyiceberg's own expiry worked the staged
    metadata out (a copy of the whole history) twice for every snapshot it expired."""
    from tabletopic.table.maintenance import expire_snapshots
    from tabletopic.table.table_config import TableTopicConfig

    for offset in range(1, 7):
        commit_data_files(table, files_for(table, [offset]), {0: offset}, committed_state(table), 1, None)
        table.refresh()
    calls = count_metadata_work(monkeypatch)
    config = TableTopicConfig.from_topic_configs({"automq.table.topic.expire.snapshot.retain.last": "2"})
    assert expire_snapshots(table, config, now=time.time() + 2 * 3600) == 4
    assert len(calls) <= 2, len(calls)
    table.refresh()
    assert len(table.metadata.snapshots) == 2
    assert committed_state(table).offsets == {0: 6}
    assert sorted(table.scan().to_arrow()["v"].to_pylist()) == [1, 2, 3, 4, 5, 6]
