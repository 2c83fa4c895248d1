"""Taking over a shared WAL (``s3stream.wal.mode=shared``): what another broker, or the same broker
restarted, does with the WAL directory of a broker that is gone.

1. Fence the directory (:meth:`~tabletopic.s3stream.wal_fence.WalFence.fence`) before opening any
   segment: from then on the deposed writer acknowledges nothing (it re-reads the fence after every
   fsync), so every acknowledged group is already on stable storage and in the segments read next.
2. Read every segment, read-only (the dead writer's files are not repaired or reused here).
3. For each stream its records name, read the end offset and owner the metadata database records;
   what lies past that end, for a stream still held by the dead broker, is written as objects
   (stream-set and stream objects, as an upload does) and committed by
   :meth:`~tabletopic.s3stream.db.StreamMetadata.commit_recovery`, which checks the end has not
   moved and clears the owner (so the deposed broker's late commits are refused).
4. Streams whose end moved meanwhile (the deposed broker's upload committed first) are read again
   and retried; nothing is committed twice because every commit is conditional on the end read.

Every step can be repeated: a second recoverer, or the next one after a recoverer died midway,
fences again, finds the streams already recovered (owner cleared, or end past the records) and
commits nothing for them. Objects PUT by a recoverer that died before committing stay ``prepared``
and are collected as any abandoned upload.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tabletopic import crashpoints
from tabletopic.s3stream.config import StoreSettings
from tabletopic.s3stream.db import Layouts, NewObject, ObjectKind, StreamMetadata
from tabletopic.s3stream.objects import build_object
from tabletopic.s3stream.objectstore import ObjectStore
from tabletopic.s3stream.settings import WAL_PATH
from tabletopic.s3stream.state import StoreState
from tabletopic.s3stream.streams import StorageUnavailable, StoredBatch
from tabletopic.s3stream.wal import Group, LocalWal, WalCorruption, read_segment, segment_files
from tabletopic.s3stream.wal_fence import Role, TakeoverLost, WalFence, WalToken
from tabletopic.s3stream.wal_format import LEGACY_SUFFIX, WalRecord, scan_legacy

log = logging.getLogger(__name__)

# Rounds of "read the ends, commit what lies past them" before giving up (each round after the
# first only happens when the deposed broker committed to the same streams meanwhile).
MAX_ROUNDS = 8


class WalUnreachable(StorageUnavailable):
    """A dead broker's WAL directory is not reachable from this broker (not mounted, or mounted at
    another path): it must not be taken over from here."""


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What a takeover did: records replayed and committed, streams they belong to, bytes."""

    records: int
    streams: int
    bytes: int


def new_incarnation() -> str:
    """A name for the WAL directory a broker start writes in (sortable, unique per start)."""
    return f"{time.time_ns():020d}-{os.getpid()}"


def incarnations(node_directory: Path) -> list[str]:
    """The WAL directories (incarnations) under a broker's directory, oldest first."""
    if not Path(node_directory).is_dir():
        return []
    return sorted(p.name for p in Path(node_directory).iterdir() if p.is_dir())


def remove_wal(directory: Path) -> None:
    """Delete a recovered WAL directory (segments, spares, fence files, the directory)."""
    directory = Path(directory)
    if directory.is_dir():
        for path in directory.iterdir():
            path.unlink(missing_ok=True)
        try:
            directory.rmdir()
        except OSError:  # something new appeared (a late fencer): left for the next cleanup
            pass


def read_wal(directory: Path) -> list[WalRecord]:
    """Every valid record of a WAL directory, in write order, without writing to it. Only the last
    segment holding frames may end in a torn group (never acknowledged); damage elsewhere raises
    WalCorruption."""
    paths = sorted(segment_files(directory), key=lambda p: int(p.name.split(".", 1)[0]))
    scans = []
    for path in paths:
        index = int(path.name.split(".", 1)[0])
        if path.suffix == LEGACY_SUFFIX:
            records, _ = scan_legacy(path.read_bytes())
            scans.append((path, True, True, records))
        else:
            scan = read_segment(path, index)
            scans.append((path, scan.sealed, bool(scan.records), scan.records))
    last = max((n for n, (_, _, has, _) in enumerate(scans) if has), default=-1)
    result: list[WalRecord] = []
    for position, (path, sealed, _, records) in enumerate(scans):
        if not sealed and position < last:
            raise WalCorruption(
                f"shared WAL segment {path} is damaged and is not the newest segment: acknowledged "
                f"appends would be lost; the takeover stops (move the file away to accept the loss)"
            )
        result.extend(records)
    return result


def recover_wal(
    directory: Path,
    dead_node_id: int,
    recoverer: WalToken,
    meta: StreamMetadata,
    objects: ObjectStore,
    settings: StoreSettings,
    after_fence: Callable[[], None] | None = None,
) -> RecoveryResult:
    """Take over the WAL in ``directory`` of broker ``dead_node_id`` (blocking; see the module
    docstring). ``recoverer`` is the ``fenced`` token written first; ``after_fence`` is called
    right after it (the kill -9 tests put a crash point there).

    Raises:
        WalUnreachable: the directory's parent (the broker's directory) is not there, or the path
            is relative: the shared filesystem is not mounted here as on the dead broker.
        TakeoverLost: another broker fenced the directory after this one (it takes over instead).
        WalCorruption: a segment other than the newest is damaged, or a stream's records do not
            continue its recorded end (the WAL does not match the metadata database).
    """
    assert recoverer.role is Role.FENCED
    directory = Path(directory)
    if not directory.is_absolute() or not directory.parent.is_dir():
        # Not mounted here (or mounted elsewhere): recovering "nothing" would lose what it holds.
        raise WalUnreachable(
            f"cannot reach broker {dead_node_id}'s shared WAL {directory} from here: mount the "
            f"directory s3stream.wal.path names at the same path on every broker"
        )
    WalFence(directory).fence(recoverer)
    fence = WalFence(directory)
    if after_fence is not None:
        after_fence()
    try:
        records = read_wal(directory)
    except FileNotFoundError:
        # A segment went between listing and reading: a later fencer recovered the WAL and is
        # removing it (files first, the directory last). Its fence, or none, says so below.
        latest = fence.read()
        if latest is not None and recoverer.same_holder(latest):
            raise
        raise TakeoverLost(
            f"{directory} was recovered by another broker, which is removing it, while "
            f"{recoverer.describe()} read it"
        ) from None
    latest = fence.read()
    if not directory.exists():
        # Frozen after fencing (a long pause), this recoverer woke to find that a later one had
        # recovered the WAL and removed it: the same outcome as being fenced again.
        raise TakeoverLost(
            f"{directory} was recovered and removed by another broker while {recoverer.describe()} was paused"
        )
    # The last fencer wins: if another recoverer (or the broker itself, restarted) fenced after us,
    # it read at least what we read; we commit nothing.
    if not recoverer.same_holder(latest):
        raise TakeoverLost(f"{directory} was fenced again by another broker after {recoverer.describe()}")
    by_stream: dict[int, list[WalRecord]] = defaultdict(list)
    for record in records:
        by_stream[record.stream_id].append(record)
    pending = set(by_stream)
    committed_records = committed_bytes = 0
    streams_done: set[int] = set()
    for _ in range(MAX_ROUNDS):
        if not pending:
            break
        ends = meta.stream_ends(sorted(pending))
        runs: dict[int, list[StoredBatch]] = {}
        extents: dict[int, tuple[int, int]] = {}
        for sid in sorted(pending):
            found = ends.get(sid)
            if found is None or found[1] != dead_node_id:
                continue  # deleted, held by a new leader, or recovered already (owner cleared)
            end, _ = found
            batches = _past(by_stream[sid], end, sid, directory)
            extents[sid] = (end, batches[-1].next_offset if batches else end)
            if batches:
                runs[sid] = batches
        objects_built = _store(runs, meta, objects, settings)
        moved = meta.commit_recovery(objects_built, extents, dead_node_id) if extents else set()
        for sid in set(extents) - moved:
            if sid in runs:
                streams_done.add(sid)
                committed_records += len(runs[sid])
                committed_bytes += sum(len(b.payload) for b in runs[sid])
        pending = moved
    else:
        if pending:
            raise WalCorruption(
                f"taking over {directory}: the end offsets of streams {sorted(pending)} kept moving "
                f"(is broker {dead_node_id} still writing?)"
            )
    return RecoveryResult(committed_records, len(streams_done), committed_bytes)


def _past(records: list[WalRecord], end: int, stream_id: int, directory: Path) -> list[StoredBatch]:
    """The stream's records past ``end`` (what the database lacks), which must continue it."""
    batches = [
        StoredBatch(r.base_offset, r.record_count, r.payload)
        for r in records
        if r.base_offset + r.record_count > end
    ]
    if batches and batches[0].base_offset != end:
        raise WalCorruption(
            f"shared WAL {directory}: stream {stream_id} continues at offset {batches[0].base_offset} "
            f"but the metadata database says it ends at {end}"
        )
    return batches


def _store(
    runs: dict[int, list[StoredBatch]], meta: StreamMetadata, objects: ObjectStore, settings: StoreSettings
) -> list[NewObject]:
    """Lay the runs out as the uploader does (big runs get stream objects), reserve and PUT them."""
    if not runs:
        return []
    sizes = {sid: sum(len(b.payload) for b in batches) for sid, batches in runs.items()}
    big = [(sid, b) for sid, b in runs.items() if sizes[sid] >= settings.split_bytes]
    small = [(sid, b) for sid, b in runs.items() if sizes[sid] < settings.split_bytes]
    layouts: Layouts[StoredBatch] = [(ObjectKind.STREAM_SET, small)] if small else []
    layouts += [(ObjectKind.STREAM_OBJECT, [item]) for item in big]
    reserved = meta.prepare_objects([kind for kind, _ in layouts])
    result = []
    for (object_id, key), (_, group) in zip(reserved, layouts, strict=True):
        built = build_object(group, settings.block_bytes)
        objects.put(key, built.parts)
        result.append(NewObject(object_id, built.size, built.ranges))
    return result


def take_back(
    node_directory: Path,
    node_id: int,
    incarnation: str,
    meta: StreamMetadata,
    objects: ObjectStore,
    settings: StoreSettings,
) -> list[str]:
    """At a broker's start (blocking): take over the WAL directories its earlier incarnations left
    under ``node_directory``, as any recoverer would, and delete them. Returns the paths of those
    recovered here; one that another broker fenced later is left to that broker."""
    recovered = []
    for name in incarnations(node_directory):
        if name == incarnation:
            continue
        directory = Path(node_directory) / name
        token = WalToken.here(Role.FENCED, node_id, incarnation)
        try:
            result = recover_wal(
                directory,
                node_id,
                token,
                meta,
                objects,
                settings,
                lambda: crashpoints.crash_point("wal_take_back.after_fence"),
            )
        except TakeoverLost as exc:
            log.info("shared WAL %s: %s", directory, exc)
            continue
        log.info(
            "took back the shared WAL %s of an earlier start: %d records of %d streams committed",
            directory,
            result.records,
            result.streams,
        )
        remove_wal(directory)
        recovered.append(str(directory))
    return recovered


@dataclass(frozen=True, slots=True)
class SharedWalStart:
    """What a broker's start did with its shared WAL: the directory it writes now (its name and its
    path, recorded in the cluster) and the paths of earlier ones it took back."""

    incarnation: str
    directory: str
    recovered: list[str]


async def open_shared_wal(state: StoreState, on_commit: Callable[[Group], None]) -> SharedWalStart:
    """Cluster mode, shared WAL, at the store's start: take back what earlier starts of this broker
    left (committed under their streams, as a takeover by another broker would), then open a new
    WAL directory, claimed with this start's token, whose fence is checked after every fsync."""
    settings = state.settings
    node_directory = settings.wal_dir
    if LocalWal.holds_data(node_directory):  # written by this broker as a single node
        raise StorageUnavailable(
            f"{node_directory} holds the WAL of a single node (cluster.enable=false): start it so "
            f"once more to upload it, or change s3stream.wal.path"
        )
    incarnation = new_incarnation()
    objects = state.objects.store
    recovered = await asyncio.to_thread(
        take_back, node_directory, settings.node_id, incarnation, state.meta, objects, settings
    )
    writer = WalToken.here(Role.WRITER, settings.node_id, incarnation)
    node_directory.mkdir(parents=True, exist_ok=True)
    fence = WalFence(node_directory / incarnation)
    await asyncio.to_thread(fence.claim, writer)
    state.wal = LocalWal(
        fence.directory,
        settings.wal_segment_bytes,
        on_commit,
        state.metrics.wal_fsync_seconds.observe,
        after_sync=lambda: fence.check(writer),
    )
    await state.wal.start(WAL_PATH.name)
    return SharedWalStart(incarnation, str(fence.directory), recovered)
