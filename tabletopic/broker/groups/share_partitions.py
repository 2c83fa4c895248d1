"""The share-partitions a partition leader serves (KIP-932), kept durable in the metadata database:
loading, fenced writes, and acquisition-lock timers. The decisions are
:class:`~tabletopic.broker.groups.share_partition.SharePartition`'s; this module only decides when
state is read and written.

* **Loading.** A share-partition is read from its row the first time this broker serves it at a
  leader epoch (a restart, or leadership moving here), and the row is claimed at once with that
  epoch, so the previous leader's later writes are refused (:mod:`share_store`). Records acquired
  before are available again, their delivery counts kept.
* **Writing.** An acknowledgement is answered after a snapshot holding it was written; writes of
  one share-partition are coalesced (a waiter whose change is in a snapshot being written waits
  for that one, later changes share the next write). Acquisitions are written in the background.
* **Fencing.** A refused write means another leader or an administrator changed the row: the copy
  here is dropped, and the next request reads the row again (or is told NOT_LEADER_OR_FOLLOWER).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from tabletopic.broker.groups.share_partition import RecordState, SharePartition, Snapshot
from tabletopic.broker.groups.share_settings import ShareSettings
from tabletopic.broker.groups.share_store import ShareKey, ShareStateStore

log = logging.getLogger(__name__)

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class ShareFenced(Exception):
    """This broker's copy of a share-partition was superseded (leadership moved on)."""


class SharePartitions:
    """Share-partitions served by this broker, keyed by (group id, topic, partition).

    Args:
        settings: lock duration, delivery limit and in-flight limit of new share-partitions.
        store: where their state is kept.
        on_available: called when records become available again (long polls wake up).
        clock: epoch milliseconds.
    """

    def __init__(
        self,
        settings: ShareSettings,
        store: ShareStateStore,
        on_available: Callable[[], None],
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._settings = settings
        self._store = store
        self._on_available = on_available
        self._clock = clock
        self._partitions: dict[ShareKey, SharePartition] = {}
        self._leader_epochs: dict[ShareKey, int] = {}
        self._lock_timers: dict[ShareKey, asyncio.TimerHandle] = {}
        self._versions: dict[ShareKey, int] = {}
        self._written: dict[ShareKey, int] = {}
        self._write_locks: dict[ShareKey, asyncio.Lock] = {}
        self._load_locks: dict[ShareKey, asyncio.Lock] = {}
        self._background: set[asyncio.Task[None]] = set()

    def get(self, key: ShareKey) -> SharePartition | None:
        """The copy in memory, if this broker serves the share-partition."""
        return self._partitions.get(key)

    def items(self) -> list[tuple[ShareKey, SharePartition]]:
        return list(self._partitions.items())

    async def open(
        self, key: ShareKey, leader_epoch: int, start_offset: Callable[[], Awaitable[int]] | None = None
    ) -> SharePartition | None:
        """The share-partition as served at ``leader_epoch``, read from the database when this
        broker did not serve it at that epoch yet. Never initialized: with ``start_offset`` (where
        ``share.auto.offset.reset`` says it starts) it is initialized there, else None. Raises
        :class:`ShareFenced` when a newer leader already claimed it. One load or initialization at
        a time per share-partition: two first fetches racing must not each make their own."""
        current = self._partitions.get(key)
        if current is not None and self._leader_epochs.get(key) == leader_epoch:
            return current
        async with self._load_locks.setdefault(key, asyncio.Lock()):
            current = self._partitions.get(key)
            if current is not None and self._leader_epochs.get(key) == leader_epoch:
                return current
            self.forget(key)
            stored = await asyncio.to_thread(self._store.load_one, key)
            # Offsets deleted (start_offset -1): start again by share.auto.offset.reset.
            if stored is None or stored[0].start_offset < 0:
                if start_offset is None:
                    return None
                state_epoch = 0 if stored is None else stored[0].state_epoch
                return self._initialize(key, await start_offset(), leader_epoch, state_epoch)
            self._partitions[key] = SharePartition.restore(stored[0], *self._limits())
            self._leader_epochs[key] = leader_epoch
            self._versions[key] = self._versions.get(key, 0) + 1
            await self.flush([key])  # the claim: older leaders' writes are refused from now on
            if key not in self._partitions:
                raise ShareFenced(key)
            return self._partitions[key]

    def _initialize(
        self, key: ShareKey, start_offset: int, leader_epoch: int, state_epoch: int
    ) -> SharePartition:
        partition = SharePartition(start_offset, *self._limits())
        partition.state_epoch = state_epoch
        self._partitions[key], self._leader_epochs[key] = partition, leader_epoch
        self.changed(key)
        return partition

    def _limits(self) -> tuple[int, int, int]:
        s = self._settings
        return s.delivery_count_limit, s.record_lock_duration_ms, s.partition_max_record_locks

    def forget(self, key: ShareKey) -> None:
        """Drop the copy here (another leader serves it, or its row was reset)."""
        self._partitions.pop(key, None)
        self._leader_epochs.pop(key, None)
        if (timer := self._lock_timers.pop(key, None)) is not None:
            timer.cancel()

    def stop(self) -> None:
        for timer in self._lock_timers.values():
            timer.cancel()
        self._lock_timers.clear()

    # -- changes --------------------------------------------------------------------------------

    def changed(self, key: ShareKey, released: bool = False) -> None:
        """Note a change of ``key``: write it in the background and re-arm its lock timer."""
        self._versions[key] = self._versions.get(key, 0) + 1
        task = asyncio.ensure_future(self.flush([key]))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)
        self._arm_lock_timer(key)
        if released:
            self._on_available()

    def _arm_lock_timer(self, key: ShareKey) -> None:
        old = self._lock_timers.pop(key, None)
        if old is not None:
            old.cancel()
        partition = self._partitions.get(key)
        deadline = partition.next_deadline() if partition is not None else None
        if deadline is not None:
            delay = max(deadline - self._clock(), 0) / 1000
            self._lock_timers[key] = asyncio.get_running_loop().call_later(delay, self._locks_expired, key)

    def _locks_expired(self, key: ShareKey) -> None:
        self._lock_timers.pop(key, None)
        partition = self._partitions.get(key)
        if partition is not None and partition.expire(self._clock()):
            self.changed(key, released=True)
        else:
            self._arm_lock_timer(key)

    async def flush(self, keys: Iterable[ShareKey]) -> None:
        """Return once the state of ``keys`` as of now is in the database (or was fenced)."""
        for key in keys:
            wanted = self._versions.get(key, 0)
            async with self._write_locks.setdefault(key, asyncio.Lock()):
                partition = self._partitions.get(key)
                if self._written.get(key, 0) >= wanted or partition is None:
                    continue
                version, snapshot, epoch = self._versions[key], partition.snapshot(), self._leader_epochs[key]
                if not await asyncio.to_thread(self._store.save, key, snapshot, epoch):
                    log.info("share-partition %s: superseded (leader epoch %d); reloading", key, epoch)
                    if self._partitions.get(key) is partition:
                        self.forget(key)
                    continue
                self._written[key] = version

    # -- administration -------------------------------------------------------------------------

    async def stored(self, group_id: str) -> dict[ShareKey, Snapshot]:
        """A group's share-partitions: the database's rows, the copies served here over them."""
        rows = await asyncio.to_thread(self._store.load, group_id)
        found = {key: snapshot for key, snapshot in rows.items() if snapshot.start_offset >= 0}
        found.update({key: p.snapshot() for key, p in self._partitions.items() if key[0] == group_id})
        return found

    async def delete_topic(self, topic: str) -> None:
        """A deleted topic's share-partitions go with it (a topic created again under its name
        starts afresh)."""
        for key in [k for k in self._partitions if k[1] == topic]:
            self.forget(key)
        await asyncio.to_thread(self._store.delete_topic, topic)

    async def reset(self, key: ShareKey, start_offset: int | None) -> None:
        """AlterShareGroupOffsets (an offset) or DeleteShareGroupOffsets (None) of an empty group;
        the leader's copy, here or elsewhere, is superseded by the row's new state epoch."""
        self.forget(key)
        await asyncio.to_thread(self._store.replace_by_admin, key, start_offset)


def lag(snapshot: Snapshot, end_offset: int | None) -> int:
    """Records from the share-partition start offset to ``end_offset`` still to be delivered."""
    if end_offset is None:
        return -1
    done = sum(r.last - r.first + 1 for r in snapshot.ranges if r.state in _DONE)
    return max(end_offset - snapshot.start_offset - done, 0)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("share-partition state write failed", exc_info=task.exception())
