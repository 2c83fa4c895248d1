"""The asyncio driver of KIP-932 share groups: it keeps the share groups
(:mod:`~tabletopic.broker.groups.share_group`) and the members' share sessions, turns session
timeouts into event-loop timers, and hands the records themselves to the share-partitions this
broker leads (:mod:`~tabletopic.broker.groups.share_partitions`). It decides nothing itself.

Membership and share sessions are not durable: after a restart members rejoin (UNKNOWN_MEMBER_ID)
and reopen their sessions (SHARE_SESSION_NOT_FOUND). In a cluster a group's members live on its
coordinator and its share-partitions on their leaders, so a leader opens a session for any member
id (it cannot see the membership), and a member that vanished frees its records by lock timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tabletopic.broker.groups.assignors import TopicPartition
from tabletopic.broker.groups.consumer_group import HeartbeatResult, SetTimer
from tabletopic.broker.groups.share_group import ShareAction, ShareGroup, ShareHeartbeat
from tabletopic.broker.groups.share_partition import AckType, AcquiredRange
from tabletopic.broker.groups.share_partitions import SharePartitions
from tabletopic.broker.groups.share_settings import ShareSettings
from tabletopic.broker.groups.share_store import ShareKey, ShareStateStore

log = logging.getLogger(__name__)

# A leaving member's client sends its last acknowledgements (ShareAcknowledge, epoch -1) on another
# connection at the same moment as its leave heartbeat: its session and records outlive the leave
# by this long, so those acknowledgements still apply instead of finding no session.
LEAVE_GRACE_S = 2.0

OPEN_SESSION_EPOCH = 0
CLOSE_SESSION_EPOCH = -1


@dataclass(slots=True)
class ShareSession:
    """A member's share session on this broker: the partitions it fetches and the next epoch."""

    epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    used_ms: int = 0


@dataclass(frozen=True, slots=True)
class AckBatch:
    first: int
    last: int
    types: tuple[int, ...]


def _accepted(batch: AckBatch) -> int:
    """How many records an applied acknowledgement batch accepted (one type for the whole batch,
    or one per offset)."""
    if len(batch.types) == 1:
        return batch.last - batch.first + 1 if batch.types[0] == AckType.ACCEPT else 0
    return sum(1 for ack in batch.types if ack == AckType.ACCEPT)


class ShareGroups:
    """The share groups of this broker, their share-partitions and sessions.

    Args:
        settings: the ``group.share.*`` settings.
        store: where share-partition state is kept.
        other_type: whether a group id is taken by a classic or consumer group (one id, one type).
        topics: partition counts of the cluster's topics now.
        clock: epoch milliseconds (tests move it instead of sleeping).
    """

    def __init__(
        self,
        settings: ShareSettings,
        store: ShareStateStore,
        other_type: Callable[[str], bool] = lambda group_id: False,
        topics: Callable[[], Mapping[str, int]] = dict,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.settings = settings
        self.other_type = other_type
        self.topics = topics
        # A partition's log end offset (None if unknown here), for the lag of DescribeShareGroupOffsets.
        self.end_offset: Callable[[str, int], int | None] = lambda topic, partition: None
        # Told how many records of a partition a member accepted (a share group's consumption, as
        # a consumer group's commits are): in a cluster, reported with the lease for the console.
        self.on_consumed: Callable[[str, int, int], None] | None = None
        self._store = store
        self._clock = clock
        self._groups: dict[str, ShareGroup] = {}
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._available = asyncio.Event()
        self.partitions = SharePartitions(settings, store, self._wake, clock)
        # Whether membership is known here (a single node); in a cluster it is on the coordinator.
        self.members_known_here = True

    def availability(self) -> asyncio.Event:
        """Set when records become available again (released, timed out): long polls wait on it."""
        return self._available

    def _wake(self) -> None:
        self._available.set()
        self._available = asyncio.Event()

    async def start(self) -> None:
        await asyncio.to_thread(self._store.migrate)

    def stop(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self.partitions.stop()

    def unload(self, accept: Callable[[str], bool]) -> None:
        """Forget the membership of the groups ``accept`` selects (another broker coordinates them)."""
        for group_id in [g for g in self._groups if accept(g)]:
            del self._groups[group_id]
            for key in [k for k in self._timers if k[0] == group_id]:
                self._timers.pop(key).cancel()

    # -- membership -----------------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        return self._groups.get(group_id)

    def groups(self) -> list[ShareGroup]:
        return list(self._groups.values())

    def heartbeat(self, group_id: str, request: ShareHeartbeat) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult(
                ErrorCode.invalid_group_id, request.member_id, request.member_epoch, message="empty group id"
            )
        group = self._groups.get(group_id)
        if group is None:
            if self.other_type(group_id):
                message = f"group {group_id} is not a share group"
                return HeartbeatResult(
                    ErrorCode.group_id_not_found, request.member_id, request.member_epoch, message=message
                )
            if request.member_epoch != 0:
                return HeartbeatResult(ErrorCode.unknown_member_id, request.member_id, request.member_epoch)
            group = self._groups[group_id] = ShareGroup(
                group_id, self.settings.session_timeout_ms, self.settings.max_size
            )
        before = group.group_epoch
        result, actions = group.heartbeat(request, self.topics())
        self._apply(group_id, actions)
        if group.group_epoch != before:
            log.info("share group %s: epoch %d, %d members", group_id, group.group_epoch, len(group.members))
        return result

    def _apply(self, group_id: str, actions: list[ShareAction]) -> None:
        loop = asyncio.get_running_loop()
        for action in actions:
            key = (group_id, action.member_id)
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            if isinstance(action, SetTimer):
                self._timers[key] = loop.call_later(action.delay_ms / 1000, self._session_expired, key)
            else:
                loop.call_later(LEAVE_GRACE_S, self._member_gone, group_id, action.member_id)

    def _session_expired(self, key: tuple[str, str]) -> None:
        self._timers.pop(key, None)
        group_id, member_id = key
        group = self._groups.get(group_id)
        if group is not None:
            log.info("share group %s: member %s fenced (session timeout)", group_id, member_id)
            self._apply(group_id, group.remove(member_id))

    def _member_gone(self, group_id: str, member_id: str) -> None:
        """A member left: its share session closes and what it held is available again."""
        if self.is_member(group_id, member_id):
            return  # it joined again meanwhile
        self._sessions.pop((group_id, member_id), None)
        self._release(group_id, member_id)

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and member_id in group.members

    # -- share sessions -------------------------------------------------------------------------

    def session(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicPartition] = (),
        forgotten: Iterable[TopicPartition] = (),
    ) -> tuple[ErrorCode, ShareSession | None]:
        """Open, continue or close (epoch -1) a member's share session (KIP-932's rules: 0 opens
        one, each request after carries the next epoch)."""
        key = (group_id, member_id)
        session = self._sessions.get(key)
        if epoch == OPEN_SESSION_EPOCH:
            if self.members_known_here and not self.is_member(group_id, member_id):
                return ErrorCode.unknown_member_id, None
            if session is not None:
                self._release(group_id, member_id)
            self._evict_idle_sessions()
            session = self._sessions[key] = ShareSession(1)
        elif session is None:
            return ErrorCode.share_session_not_found, None
        elif epoch == CLOSE_SESSION_EPOCH:
            del self._sessions[key]
            return ErrorCode.none, session
        elif epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        else:
            session.epoch += 1
        session.used_ms = self._clock()
        session.partitions.update(added)
        session.partitions.difference_update(forgotten)
        return ErrorCode.none, session

    def _evict_idle_sessions(self) -> None:
        """Forget sessions unused for a session timeout, releasing what their members hold. A live
        member fetches far more often; in a cluster a leader learns of no departure otherwise."""
        idle_since = self._clock() - self.settings.session_timeout_ms
        for group_id, member_id in [k for k, v in self._sessions.items() if v.used_ms < idle_since]:
            del self._sessions[(group_id, member_id)]
            self._release(group_id, member_id)

    def close_session(self, group_id: str, member_id: str) -> None:
        """After the closing request's acknowledgements: release what the member still holds."""
        self._release(group_id, member_id)

    # -- records --------------------------------------------------------------------------------

    def acquire(
        self, key: ShareKey, member_id: str, first: int, end: int, max_records: int
    ) -> list[AcquiredRange]:
        partition = self.partitions.get(key)
        if partition is None:
            return []
        acquired = partition.acquire(member_id, first, end, max_records, self._clock())
        if acquired:
            self.partitions.changed(key)
        return acquired

    def acknowledge(self, key: ShareKey, member_id: str, batches: Iterable[AckBatch]) -> ErrorCode:
        partition = self.partitions.get(key)
        if partition is None:
            return ErrorCode.invalid_record_state
        error = ErrorCode.none
        accepted = 0
        for batch in batches:
            result = partition.acknowledge(member_id, batch.first, batch.last, batch.types)
            if result is not ErrorCode.none:
                error = result
            else:
                accepted += _accepted(batch)
        self.partitions.changed(key, released=True)
        if accepted and self.on_consumed is not None:
            self.on_consumed(key[1], key[2], accepted)
        return error

    def _release(self, group_id: str, member_id: str) -> None:
        for key, partition in self.partitions.items():
            if key[0] == group_id and partition.release_member(member_id):
                self.partitions.changed(key, released=True)

    # -- administration (Describe/Alter/DeleteShareGroupOffsets, DeleteGroups) -------------------

    async def exists(self, group_id: str) -> bool:
        """A share group with members, or with share-partition state (membership is not durable)."""
        return group_id in self._groups or bool(await self.partitions.stored(group_id))

    async def delete_group(self, group_id: str) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is not None and group.members:
            return ErrorCode.non_empty_group
        self._groups.pop(group_id, None)
        for key in await self.partitions.stored(group_id):
            await self.partitions.reset(key, None)
        return ErrorCode.none
