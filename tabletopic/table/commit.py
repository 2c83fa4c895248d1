"""Exactly-once commits of Kafka offset ranges into an Iceberg table.

The table is the source of truth: every ingest snapshot carries, in its summary, the next offset of
every partition it has covered so far (:data:`OFFSETS_PROPERTY`), the topic id (a recreated topic
starts over) and the coordinator epoch that wrote it. Recovery reads them back from the table and
needs nothing else.

Commits are *conditional*: a batch planned against snapshot S commits only if the table's main
branch still points at S. pyiceberg would otherwise refresh and re-apply an append on top of
whatever landed meanwhile — harmless for independent writers, but a duplicate when the other commit
was a stale coordinator (or our own earlier attempt whose response was lost) covering the same
offsets. So retries are turned off for our commit, and a conflict raises :class:`StalePlan`: the
caller re-reads the offsets from the table and plans again.

The coordinator's lease (in a cluster: its leadership of partition 0) is checked by a *fence* run
inside the commit, after every file is written and right before the catalog's commit request, so
the only step between that check and the commit is that one request. The check is not part of the
catalog's commit (the catalog may be any Iceberg catalog): a coordinator paused exactly there can
still commit after it was replaced, and then the conditional commit is what keeps the table exact
(see ``docs/cluster.md``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableUpdate, update_table_metadata

from tabletopic.crashpoints import crash_point

log = logging.getLogger(__name__)

OFFSETS_PROPERTY = "tabletopic.offsets"
TOPIC_ID_PROPERTY = "tabletopic.topic-id"
EPOCH_PROPERTY = "tabletopic.coordinator-epoch"
# Who committed (node and, in a cluster, its incarnation): for operators reading the history.
COORDINATOR_PROPERTY = "tabletopic.coordinator"
# How far back through maintenance snapshots (compaction, expiry) to look for our properties.
MAX_SNAPSHOT_WALK = 1000


class StalePlan(Exception):
    """The table moved since the batch was planned; nothing was committed. Re-plan from the table."""


Fence = Callable[[], object]
"""Run right before the catalog's commit request; raises (``lease.LeaseFenced``) to refuse the commit."""


class _StagedMetadataTransaction(Transaction):
    """pyiceberg's transaction, with the staged metadata worked out once per staged change.

    pyiceberg's ``Transaction.table_metadata`` applies the staged updates to the table's metadata
    and deep-copies the result on every read, and one append reads it about twenty times. The copy
    costs what the table's history holds: with 1,000 snapshots (an hour of one-second commits keeps
    3,600) an append took 0.7 s of CPU, nearly all of it copying, and the coordinator's cycle, and
    the broker running it, with it (``bench/table_commit_bench.py``). The metadata is pydantic
    models pyiceberg never changes in place, and both inputs are replaced, not changed, when they
    change, so the result is kept while they are the same objects; with nothing staged it is the
    table's own metadata. What reaches the catalog is the same updates and requirements.
    """

    _staged: tuple[TableMetadata, tuple[TableUpdate, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        if not updates:
            return base
        staged = self._staged
        if staged is None or staged[0] is not base or staged[1] is not updates:
            staged = self._staged = (base, updates, update_table_metadata(base, updates))
        return staged[2]


def new_transaction(table: Table, autocommit: bool = False) -> Transaction:
    """A transaction on ``table`` (see :class:`_StagedMetadataTransaction` for why not pyiceberg's);
    ``autocommit``: each staged change is committed at once, as pyiceberg's maintenance does."""
    return _StagedMetadataTransaction(table, autocommit=autocommit)


def conditional_commit(transaction: Transaction, name: str, fence: Fence | None) -> Table:
    """Check ``fence``, then send the transaction's commit to the catalog (its requirements make it
    conditional on the planned snapshot).

    Raises:
        StalePlan: the catalog refused the commit (the table moved); nothing was committed.
        Whatever ``fence`` raises: nothing was sent.
    """
    if fence is not None:
        fence()
        crash_point("table.fence_checked")
    try:
        return transaction.commit_transaction()
    except CommitFailedException as exc:
        raise StalePlan(f"conditional commit to {name} rejected: {exc}") from exc


@dataclass(frozen=True, slots=True)
class CommittedState:
    """What the table says has been ingested: ``offsets[partition]`` is the next offset to read."""

    snapshot_id: int | None
    offsets: dict[int, int] = field(default_factory=dict)
    topic_id: str | None = None
    epoch: int = 0

    def next_offset(self, partition: int, log_start: int = 0) -> int:
        return max(self.offsets.get(partition, log_start), log_start)


def committed_state(table: Table) -> CommittedState:
    """Read the committed offsets of the table's current state.

    Walks from the current snapshot through its parents because maintenance (compaction, expiry,
    schema-only changes) writes snapshots without our properties; the newest one that has them
    is authoritative. A table never ingested into answers empty offsets.
    """
    current = table.metadata.current_snapshot()
    snapshot = current
    walked = 0
    while snapshot is not None and walked < MAX_SNAPSHOT_WALK:
        props = snapshot.summary.additional_properties if snapshot.summary else {}
        if OFFSETS_PROPERTY in props:
            raw = json.loads(props[OFFSETS_PROPERTY])
            return CommittedState(
                snapshot_id=current.snapshot_id if current else None,
                offsets={int(p): int(o) for p, o in raw.items()},
                topic_id=props.get(TOPIC_ID_PROPERTY),
                epoch=int(props.get(EPOCH_PROPERTY, "0")),
            )
        if snapshot.parent_snapshot_id is None:
            break
        snapshot = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
        walked += 1
    return CommittedState(snapshot_id=current.snapshot_id if current else None)


def encode_offsets(offsets: Mapping[int, int]) -> str:
    return json.dumps({str(p): int(o) for p, o in sorted(offsets.items())}, separators=(",", ":"))


def commit_view(table: Table) -> Table:
    """The same table as the pipeline commits to it, in an in-memory copy of its metadata (nothing
    is written to the table's properties):

    - pyiceberg's automatic rebase-and-retry is off (see the module docstring);
    - appends merge manifests unless the table says otherwise (``commit.manifest-merge.enabled``),
      the default of Iceberg's own writers (Java's, so Spark's and the Kafka Connect sink's), not
      pyiceberg's: a fast append adds one manifest per commit, and every reader opens each one, so
      after an hour of one-second commits a scan planned 3,600 manifests (1,000 took pyiceberg
      1.1 s). Merged, a snapshot keeps about ``commit.manifest.min-count-to-merge`` (100).
    """
    properties = dict(table.metadata.properties)
    properties[TableProperties.COMMIT_NUM_RETRIES] = "0"
    properties.setdefault(TableProperties.MANIFEST_MERGE_ENABLED, "true")
    metadata = table.metadata.model_copy(update={"properties": properties})
    return Table(
        identifier=table.name(),
        metadata=metadata,
        metadata_location=table.metadata_location,
        io=table.io,
        catalog=table.catalog,
    )


def check_planned(table: Table, planned: CommittedState) -> None:
    """Raise :class:`StalePlan` unless the table is still at the snapshot the batch was planned at."""
    current = table.metadata.current_snapshot_id
    if current != planned.snapshot_id:
        raise StalePlan(
            f"table {table.name()} is at snapshot {current}, batch was planned at {planned.snapshot_id}"
        )


def offset_properties(
    planned: CommittedState,
    offsets: Mapping[int, int],
    epoch: int,
    topic_id: str | None,
    extra_properties: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The snapshot-summary properties of a commit advancing ``planned`` to ``offsets``."""
    merged = dict(planned.offsets)
    for partition, offset in offsets.items():
        if offset < merged.get(partition, 0):
            raise ValueError(
                f"offset of partition {partition} would go backwards: {offset} < {merged[partition]}"
            )
        merged[partition] = offset
    properties = {OFFSETS_PROPERTY: encode_offsets(merged), EPOCH_PROPERTY: str(epoch)}
    if topic_id is not None:
        properties[TOPIC_ID_PROPERTY] = topic_id
    properties.update(extra_properties or {})
    return properties


def commit_data_files(
    table: Table,
    data_files: Iterable[DataFile],
    offsets: Mapping[int, int],
    planned: CommittedState,
    epoch: int,
    topic_id: str | None,
    extra_properties: Mapping[str, str] | None = None,
    fence: Fence | None = None,
) -> int:
    """Append ``data_files`` and advance the committed offsets to ``offsets``, atomically, only if
    the table still is at ``planned.snapshot_id``; ``fence`` is checked right before the catalog's
    commit request (after the manifests are written).

    ``offsets`` must hold the next offset of every partition ever committed (the full map, not a
    delta), so that any single snapshot describes the whole ingest position.

    Returns:
        The new snapshot id.

    Raises:
        StalePlan: the table moved since planning (another writer, a stale coordinator, or an
            earlier attempt of ours that did land); nothing was committed.
        Whatever ``fence`` raises: nothing was committed.
    """
    table = commit_view(table)
    check_planned(table, planned)
    properties = offset_properties(planned, offsets, epoch, topic_id, extra_properties)
    transaction = new_transaction(table)
    with transaction.update_snapshot(snapshot_properties=properties).merge_append() as append:
        for data_file in data_files:
            append.append_data_file(data_file)
    committed = conditional_commit(transaction, str(table.name()), fence)
    snapshot = committed.metadata.current_snapshot()
    assert snapshot is not None
    return snapshot.snapshot_id
