"""A table topic's status from the truth, not from process memory.

Rows, commits, the last commit and skipped records come from the Iceberg table's snapshot summaries
(so they survive restarts and are the same on every node); every ingest commit carries running
totals (:data:`COMMITS_PROPERTY` and friends) so they survive snapshot expiry too. Lag comes from the
stream store at the moment it is asked: records behind the real high watermark, and the age of the
oldest record not yet in the table (read from its stored batch header, so it is the record's own
timestamp, not the time since the last commit).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from tabletopic.table.commit import MAX_SNAPSHOT_WALK, OFFSETS_PROPERTY

log = logging.getLogger(__name__)

# Running totals written with every ingest commit (the per-commit figures are ``tabletopic.rows``
# and ``tabletopic.skipped``): the n-th commit says ``commits=n``.
COMMITS_PROPERTY = "tabletopic.commits"
SKIPPED_TOTAL_PROPERTY = "tabletopic.skipped-total"
LOST_TOTAL_PROPERTY = "tabletopic.lost-total"
ROWS_PROPERTY = "tabletopic.rows"
SKIPPED_PROPERTY = "tabletopic.skipped"
# The dead-letter topic's offsets already replayed into the table by ``tables redrive``
# (``{"topic": dlq, "offsets": {partition: next offset}}``); every later commit carries it forward, as
# the main offsets are, so it is always found on the newest ingest snapshot.
DLQ_OFFSETS_PROPERTY = "tabletopic.dlq-offsets"
CARRIED_PROPERTIES = (DLQ_OFFSETS_PROPERTY,)


@dataclass(frozen=True, slots=True)
class TableFacts:
    """What the table itself says about its ingest history."""

    rows: int = 0  # live rows of the current snapshot (records minus position/equality deletes)
    commits: int = 0  # ingest commits (snapshots carrying committed offsets)
    last_commit_time: float | None = None  # wall-clock seconds of the newest ingest commit
    last_commit_snapshot: int | None = None
    records_skipped: int = 0
    records_lost_to_retention: int = 0
    # Properties every ingest commit copies from the previous one (:data:`CARRIED_PROPERTIES`).
    carried: tuple[tuple[str, str], ...] = ()

    def next_commit_properties(self, skipped: int, lost: int, commits: int = 1) -> dict[str, str]:
        """The running totals (and carried properties) the next ingest commit writes."""
        return {
            **dict(self.carried),
            COMMITS_PROPERTY: str(self.commits + commits),
            SKIPPED_TOTAL_PROPERTY: str(self.records_skipped + skipped),
            LOST_TOTAL_PROPERTY: str(self.records_lost_to_retention + lost),
        }


def _props(snapshot: Snapshot) -> dict[str, str]:
    return dict(snapshot.summary.additional_properties) if snapshot.summary else {}


def _int(props: dict[str, str], key: str) -> int:
    try:
        return int(props.get(key, "0"))
    except ValueError:
        return 0


def _ancestors(table: Table) -> Iterator[Snapshot]:
    snapshot = table.metadata.current_snapshot()
    walked = 0
    while snapshot is not None and walked < MAX_SNAPSHOT_WALK:
        yield snapshot
        if snapshot.parent_snapshot_id is None:
            return
        snapshot = table.metadata.snapshot_by_id(snapshot.parent_snapshot_id)
        walked += 1


def live_rows(snapshot: Snapshot | None) -> int:
    """Rows a scan of ``snapshot`` returns, from Iceberg's standard summary totals."""
    if snapshot is None:
        return 0
    props = _props(snapshot)
    deleted = _int(props, "total-position-deletes") + _int(props, "total-equality-deletes")
    return max(_int(props, "total-records") - deleted, 0)


def table_facts(table: Table) -> TableFacts:
    """Read :class:`TableFacts` from the snapshot summaries of ``table``'s main branch.

    The newest ingest snapshot's running totals are used when present; a table written before they
    existed is counted by walking its ancestors (exact unless snapshots were expired).
    """
    rows = live_rows(table.metadata.current_snapshot())
    newest: Snapshot | None = None
    commits = skipped = 0
    for snapshot in _ancestors(table):
        props = _props(snapshot)
        if OFFSETS_PROPERTY not in props:
            continue  # maintenance (compaction, expiry) or a schema change
        if newest is None:
            newest = snapshot
            if COMMITS_PROPERTY in props:
                return TableFacts(
                    rows=rows,
                    commits=_int(props, COMMITS_PROPERTY),
                    last_commit_time=snapshot.timestamp_ms / 1000,
                    last_commit_snapshot=snapshot.snapshot_id,
                    records_skipped=_int(props, SKIPPED_TOTAL_PROPERTY),
                    records_lost_to_retention=_int(props, LOST_TOTAL_PROPERTY),
                    carried=_carried(props),
                )
        commits += 1
        skipped += _int(props, SKIPPED_PROPERTY)
    if newest is None:
        return TableFacts(rows=rows)
    return TableFacts(
        rows=rows,
        commits=commits,
        last_commit_time=newest.timestamp_ms / 1000,
        last_commit_snapshot=newest.snapshot_id,
        records_skipped=skipped,
        carried=_carried(_props(newest)),
    )


def _carried(props: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((key, props[key]) for key in CARRIED_PROPERTIES if key in props)
