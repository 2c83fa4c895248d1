"""The metadata commit of an upload, all or nothing, on both databases: PostgreSQL commits it in one
statement (the object WAL's acknowledgement waits for it), SQLite in a transaction of several. A
moved fence or an object no longer prepared must leave every row as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.s3stream.db import (
    CommitConflict,
    NewObject,
    ObjectKind,
    StreamMetadata,
    objects_table,
    ranges_table,
)
from tabletopic.s3stream.objects import StreamRange
from tabletopic.s3stream.streams import StreamFenced


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def meta(request: pytest.FixtureRequest, tmp_path: Path) -> StreamMetadata:
    postgres = request.param == "postgres"
    url = request.getfixturevalue("postgres_url") if postgres else database.default_url(tmp_path)
    metadata = StreamMetadata(database.create_engine(url))
    metadata.migrate()
    return metadata


def _upload(meta: StreamMetadata, sids: list[int], records: int) -> NewObject:
    """A prepared object holding ``records`` records of each stream, after its current end."""
    ((oid, _key),) = meta.prepare_objects([ObjectKind.STREAM_SET])
    ranges = []
    for i, sid in enumerate(sids):
        end, _owner = meta.stream_ends([sid])[sid]
        ranges.append(StreamRange(sid, end, end + records, i * 100, 100))
    return NewObject(oid, 100 * len(sids), ranges)


def _state(meta: StreamMetadata, sids: list[int]) -> tuple[dict[int, int], int, list[str]]:
    """The streams' ends, the number of ranges, and the objects' states."""
    with meta.engine.connect() as conn:
        ranges = conn.execute(sa.select(sa.func.count()).select_from(ranges_table)).scalar_one()
        states = [
            str(s) for s in conn.execute(sa.select(objects_table.c.state).order_by("object_id")).scalars()
        ]
    return {sid: meta.stream_ends([sid])[sid][0] for sid in sids}, int(ranges), states


def test_a_commit_registers_the_object_its_ranges_and_the_new_ends(meta: StreamMetadata) -> None:
    sids = meta.create_streams(3)
    for sid in sids:
        meta.open_stream(sid, 1, 7)
    obj = _upload(meta, sids, 5)

    meta.commit_upload([obj], {sid: 5 for sid in sids}, {sid: (1, 7) for sid in sids})

    assert _state(meta, sids) == ({sid: 5 for sid in sids}, 3, ["committed"])
    assert [r.stream_id for r in meta.ranges_of([obj.object_id])[obj.object_id]] == sids


def test_a_moved_fence_commits_nothing_and_names_the_stream(meta: StreamMetadata) -> None:
    sids = meta.create_streams(3)
    for sid in sids:
        meta.open_stream(sid, 1, 7)
    obj = _upload(meta, sids, 5)
    meta.open_stream(sids[1], 2, 8)  # another broker took the middle stream over

    with pytest.raises(StreamFenced) as raised:
        meta.commit_upload([obj], {sid: 5 for sid in sids}, {sid: (1, 7) for sid in sids})

    assert raised.value.stream_ids == (sids[1],)
    assert "(2, 8)" in str(raised.value)
    assert _state(meta, sids) == ({sid: 0 for sid in sids}, 0, ["prepared"])


def test_a_fence_moved_on_many_streams_names_them_all_but_says_only_a_few(meta: StreamMetadata) -> None:
    """A broker deposed from a thousand partitions logs this error (and may answer a client with
    it): one line a reader can take in, not one entry per stream."""
    sids = meta.create_streams(40)
    for sid in sids:
        meta.open_stream(sid, 1, 7)
    obj = _upload(meta, sids, 5)
    for sid in sids:
        meta.open_stream(sid, 2, 8)

    with pytest.raises(StreamFenced) as raised:
        meta.commit_upload([obj], {sid: 5 for sid in sids}, {sid: (1, 7) for sid in sids})

    assert raised.value.stream_ids == tuple(sids)
    assert str(raised.value).endswith("and 35 more")
    assert len(str(raised.value)) < 300


def test_an_object_no_longer_prepared_commits_nothing(meta: StreamMetadata) -> None:
    sids = meta.create_streams(2)
    for sid in sids:
        meta.open_stream(sid, 1, 7)
    kept = _upload(meta, sids, 5)
    collected = _upload(meta, sids, 5)
    meta.abandon_prepared([collected.object_id])  # garbage collection took the reservation

    with pytest.raises(CommitConflict):
        meta.commit_upload([kept, collected], {sid: 5 for sid in sids}, {sid: (1, 7) for sid in sids})

    ends, ranges, states = _state(meta, sids)
    assert (ends, ranges, states[0]) == ({sid: 0 for sid in sids}, 0, "prepared")


def test_an_end_never_moves_backwards(meta: StreamMetadata) -> None:
    (sid,) = meta.create_streams(1)
    meta.open_stream(sid, 1, 7)
    meta.commit_upload([_upload(meta, [sid], 9)], {sid: 9}, {sid: (1, 7)})

    meta.commit_upload([_upload(meta, [sid], 0)], {sid: 4}, {sid: (1, 7)})

    assert meta.stream_ends([sid])[sid][0] == 9
