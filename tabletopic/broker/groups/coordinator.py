"""The asyncio driver around the sans-IO :class:`~tabletopic.broker.groups.group.Group`.

It owns the groups of this broker, turns the actions a group returns into event-loop timers,
database writes and completed futures, and keeps committed offsets (in memory for OffsetFetch,
durably in the metadata database before an OffsetCommit is answered). Everything that decides
*what* happens lives in ``group.py``; this module only decides *when*.

Ordering guarantees:

* Timer and response actions are applied synchronously, in the order the group emitted them, so a
  later re-arm can never be overtaken by an earlier one.
* Database writes of one group (membership snapshots, offset commits, deletion) run one at a time
  in submission order, each queued behind the group's last (:mod:`.write_queue`); a response that
  follows a ``Persist`` in the same batch is released only after that write finished.
* Offset commits that arrive while a write of their group runs join one queued write, the last
  in the group's queue, and are answered together when it commits: a group whose members commit
  faster than the database writes (auto-commit every half second over hundreds of partitions, on a
  saturated machine) waits for at most two writes, not a queue that grows without end.

Cluster mode (:meth:`GroupCoordinator.attach_cluster`): the broker coordinates only the groups of
the coordinator slots the controller gave it, loads them when it gains a slot (never at start) and
forgets them when it loses one. Every write is fenced by the slot's leader epoch it loaded the slot
with, checked in the write's own database transaction (as transaction state is): a broker deposed
meanwhile, or whose lease ran out, writes nothing, answers NOT_COORDINATOR and drops the slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.groups import subscription
from tabletopic.broker.groups.cluster import GroupSlots, SlotFence
from tabletopic.broker.groups.consumer_coordinator import ClassicHandover, ConsumerGroups
from tabletopic.broker.groups.consumer_group import ConsumerMember
from tabletopic.broker.groups.consumer_records import group_record
from tabletopic.broker.groups.group import Group, MemberIdFactory, check_join, random_member_id
from tabletopic.broker.groups.model import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    Action,
    CancelTimer,
    GroupConfig,
    GroupDescription,
    GroupState,
    JoinRequest,
    JoinResult,
    MemberIdentity,
    Persist,
    Respond,
    SetTimer,
    SyncRequest,
    SyncResult,
    TimerKey,
)
from tabletopic.broker.groups.retention import expired_offsets
from tabletopic.broker.groups.settings import GroupSettings
from tabletopic.broker.groups.share_coordinator import ShareGroups
from tabletopic.broker.groups.share_settings import ShareSettings
from tabletopic.broker.groups.share_store import ShareStateStore
from tabletopic.broker.groups.store import CommittedOffset, Fence, GroupFenced, GroupStore, TopicPartition
from tabletopic.broker.groups.write_queue import GroupWriteQueue
from tabletopic.ids import LeaderEpoch
from tabletopic.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
# A deposed coordinator may see many refused writes (every member's timer, every commit) at once.
FENCED_LOG = RateLimitedLog(log, interval_s=10.0)

# Safety net on top of the group's own rebalance/session timers: a held-back JoinGroup/SyncGroup is
# answered at the latest this long after the member's own timeouts, whatever happens.
_WAIT_GRACE_S = 30.0
# The longest group id served (UTF-8 bytes): it leads the stored offsets' key, and PostgreSQL indexes
# no key much over 2.7 kB. Kafka sets no limit; no client comes near this one.
MAX_GROUP_ID_BYTES = 1024


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: GroupState


@dataclass(slots=True)
class _QueuedCommit:
    """The offsets one queued database write of a group commits: open to later commits until the
    write starts (see :meth:`GroupCoordinator._commit_offsets`)."""

    fence: Fence | None
    offsets: dict[TopicPartition, CommittedOffset]
    write: asyncio.Task[None]


class GroupCoordinator:
    """Coordinator for every classic group of this broker (single-node: it owns all of them).

    Args:
        engine: the metadata database engine.
        node_id, host, port: this broker, the answer to FindCoordinator.
        topic_partitions: partition count of a topic, ``None`` if it does not exist.
        config: group limits; Kafka's defaults when omitted.
        new_member_id: member id factory (tests pass a deterministic one).
        clock: the wall clock in epoch seconds, for commit times and offset retention (tests pass
            one they move forward instead of sleeping).
        clustered: one broker of a cluster: nothing is loaded at start and no group is coordinated
            until :meth:`attach_cluster` and :meth:`slots_gained` say so.
    """

    def __init__(
        self,
        engine: Engine,
        node_id: int,
        host: str,
        port: int,
        topic_partitions: Callable[[str], int | None],
        *,
        config: GroupConfig | None = None,
        new_member_id: MemberIdFactory = random_member_id,
        clock: Callable[[], float] = time.time,
        clustered: bool = False,
        consumer_settings: GroupSettings | None = None,
        share_settings: ShareSettings | None = None,
    ) -> None:
        self.engine = engine
        self.node_id = node_id
        self.host = host
        self.port = port
        self.topic_partitions = topic_partitions
        self.config = config or GroupConfig()
        self._new_member_id = new_member_id
        self._clock = clock
        self._store = GroupStore(engine, clock)
        self._groups: dict[str, Group] = {}
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # Told how far each commit moved a group on a partition (records consumed, as committed):
        # in a cluster the brokers report it with their leases for the console's cluster charts.
        self.on_consumed: Callable[[str, int, int], None] | None = None
        self._timers: dict[tuple[str, TimerKey], asyncio.TimerHandle] = {}
        self._tickets: dict[int, asyncio.Future[JoinResult | SyncResult | None]] = {}
        self._ticket_groups: dict[int, str] = {}  # whose request each ticket holds back
        self._ticket_ids = itertools.count(1)
        self._writes = GroupWriteQueue(self._fence, self._fenced)
        # Each group's queued commit that has not started, which later commits join.
        self._queued_commits: dict[str, _QueuedCommit] = {}
        # Each KIP-848 group's queued state write that has not started (it writes the state as it
        # is when it starts, so later changes join it).
        self._queued_records: dict[str, asyncio.Task[None]] = {}
        self._seen: dict[str, tuple[GroupState, int]] = {}
        # When each group entered its current state (epoch ms), for offset retention.
        self._state_since: dict[str, int] = {}
        self._expiry: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = False
        # Cluster mode: the slots this broker coordinates, with the leader epoch it loaded them at.
        self._clustered = clustered
        self._cluster: GroupSlots | None = None
        self._slots: dict[int, LeaderEpoch] = {}
        # KIP-848 groups: their own driver; offsets and the slot checks are shared with this one.
        self.consumer = ConsumerGroups(
            consumer_settings or GroupSettings(), self._refusal, self._hand_over_for_upgrade
        )
        self._loading: set[int] = set()
        # KIP-932 share groups: one id is one group type, so each driver refuses the other's ids.
        self.share = ShareGroups(
            share_settings or ShareSettings(),
            ShareStateStore(engine),
            lambda group_id: group_id in self._groups or self.consumer.group(group_id) is not None,
        )
        self.consumer.is_share_group = lambda group_id: self.share.group(group_id) is not None
        self.consumer.persist = self._save_consumer_group
        self.share.members_known_here = not clustered

    # ---------------------------------------------------------------------------------------------
    # Lifecycle

    async def start(self) -> None:
        """Create the tables if needed, load persisted groups and offsets and start the session
        timers of restored members (they must heartbeat again within their session timeout). In a
        cluster nothing is loaded here: each slot's groups are loaded by the broker that gains the
        slot (a broker arming timers for every group would expire members that heartbeat to their
        real coordinator and write that over its state)."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._store.migrate)
        await self.share.start()
        if self._clustered:
            self._ready = True
            self._expiry = asyncio.ensure_future(self._expire_periodically())
            return
        await self._take_over(lambda group_id: True)
        self._ready = True
        self._expiry = asyncio.ensure_future(self._expire_periodically())
        log.info("group coordinator loaded %d groups", len(self._groups))

    # ---------------------------------------------------------------------------------------------
    # Cluster mode

    def attach_cluster(self, cluster: GroupSlots) -> None:
        """Coordinate only the slots gained from now on, each write fenced through ``cluster``."""
        self._cluster = cluster

    def owns(self, group_id: str) -> bool:
        """Whether this broker coordinates ``group_id`` (always, on a single node)."""
        if not self._clustered:
            return True
        cluster = self._cluster
        return cluster is not None and cluster.slot(group_id) in self._slots

    def _refusal(self, group_id: str) -> ErrorCode | None:
        """The error a request about ``group_id`` gets before anything else, or None to serve it."""
        if len(group_id.encode()) > MAX_GROUP_ID_BYTES:
            return ErrorCode.invalid_group_id
        if not self._ready:
            return ErrorCode.coordinator_load_in_progress
        cluster = self._cluster
        if cluster is not None and cluster.slot(group_id) in self._loading:
            return ErrorCode.coordinator_load_in_progress
        if not self.owns(group_id):
            return ErrorCode.not_coordinator
        return None

    async def slots_gained(self, slots: dict[int, LeaderEpoch]) -> None:
        """Take over coordinator slots (``{slot: leader epoch}``): load their groups and offsets as
        the previous coordinator wrote them; requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS.
        A slot lost (or gained again at another epoch) while loading keeps what that change made."""
        cluster = self._cluster
        assert cluster is not None, "attach_cluster first"
        self._slots.update(slots)
        self._loading.update(slots)

        def current(group_id: str) -> bool:
            slot = cluster.slot(group_id)
            return slot in slots and self._slots.get(slot) == slots[slot]

        try:
            await self.reload(current)
        except Exception:
            for slot, epoch in slots.items():
                if self._slots.get(slot) == epoch:
                    del self._slots[slot]
                    cluster.give_up(slot)  # taken again (and loaded again) by the next reconcile
            raise
        finally:
            self._loading.difference_update(slots)

    def slots_lost(self, slots: set[int]) -> None:
        """Another broker coordinates these slots now: forget their groups (their timers must not
        fire here)."""
        cluster = self._cluster
        if cluster is None:
            return
        for slot in slots:
            self._slots.pop(slot, None)
            self._loading.discard(slot)
        self.unload(lambda group_id: cluster.slot(group_id) in slots)

    def _fence(self, group_id: str) -> Fence | None:
        """The fence of a write of ``group_id`` decided now (None on a single node)."""
        cluster = self._cluster
        if not self._clustered:
            return None
        if cluster is None:
            return lambda _conn: False
        slot = cluster.slot(group_id)
        return SlotFence(cluster, slot, self._slots.get(slot))

    def _fenced(self, group_id: str, fence: Fence | None) -> None:
        """A write of ``group_id`` was refused: drop the slot's groups, unless the slot was already
        taken again at a newer epoch than the refused write's (that load is current)."""
        if not isinstance(fence, SlotFence) or fence.epoch is None:
            return  # nothing was held: the write was simply refused
        held = self._slots.get(fence.slot)
        if held is not None and held != fence.epoch:
            return
        message = "group %s: write refused, slot %d is no longer led here at epoch %s; dropping it"
        FENCED_LOG.warning(f"slot-{fence.slot}", message, group_id, fence.slot, fence.epoch)
        self.slots_lost({fence.slot})
        fence.cluster.give_up(fence.slot)

    async def reload(self, accept: Callable[[str], bool]) -> None:
        """Take over the groups ``accept`` selects from the database (this broker became their
        coordinator): their in-memory state is replaced by what the previous coordinator wrote."""
        taken = await self._take_over(accept)
        log.info("group coordinator took over %d groups", taken)

    async def _take_over(self, accept: Callable[[str], bool]) -> int:
        """Load the stored groups ``accept`` selects (classic and KIP-848, with their offsets) over
        whatever this coordinator held of them; returns how many groups it restored."""
        stored = await asyncio.to_thread(self._store.load)
        taken = 0
        for snapshot in stored.groups:
            if not accept(snapshot.group_id):
                continue
            self._cancel_timers(snapshot.group_id)
            group, actions = Group.restore(snapshot, self.config, self._new_member_id)
            self._groups[group.group_id] = group
            self._apply(group, actions)
            taken += 1
        for group_id, committed in stored.offsets.items():
            if accept(group_id):
                self._offsets[group_id] = committed
                if group_id not in self._groups:
                    self._groups[group_id] = self._new_group(group_id)
        for group_id, record in stored.consumer_records.items():
            if accept(group_id):
                self.consumer.restore(group_id, record)
                taken += 1
        return taken

    def unload(self, accept: Callable[[str], bool]) -> int:
        """Forget the groups ``accept`` selects (another broker coordinates them now): their timers
        must not fire here and write a stale state over the new coordinator's. Returns how many."""
        dropped = [group_id for group_id in self._groups if accept(group_id)]
        # Requests held back for these groups are answered NOT_COORDINATOR at once.
        for ticket, group_id in list(self._ticket_groups.items()):
            if accept(group_id):
                self._resolve(ticket, None)
        for group_id in dropped:
            self._cancel_timers(group_id)
            del self._groups[group_id]
            self._offsets.pop(group_id, None)
            self._seen.pop(group_id, None)
            self._state_since.pop(group_id, None)
        self.consumer.unload(accept)
        self.share.unload(accept)
        return len(dropped)

    async def stop(self) -> None:
        """Cancel timers, answer every held-back request with NOT_COORDINATOR (clients look the
        coordinator up again) and wait for in-flight database writes."""
        self._ready = False
        self.consumer.stop()
        self.share.stop()
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for future in self._tickets.values():
            if not future.done():
                future.set_result(None)
        await self._writes.drain()

    @property
    def ready(self) -> bool:
        return self._ready

    def _hand_over_for_upgrade(self, group_id: str) -> ClassicHandover:
        """Give a classic group with members to the consumer protocol (Kafka 4's online upgrade,
        as a member with ``group.protocol=consumer`` joins): its generation and its members with
        their subscriptions and assigned partitions. It must be Stable, so every member holds the
        assignment of the current generation. What stays here is an Empty classic group holding the
        offsets, written so, so that a restart does not bring the old members back."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return None
        if group.state is not GroupState.STABLE:
            return f"cannot be upgraded while it is {group.state.value}: join again once it is Stable"
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return f"cannot be upgraded: its protocol type is {group.protocol_type!r}, not 'consumer'"
        members = []
        for member in group.members.values():
            metadata = dict(member.protocols).get(group.protocol_name or "", b"")
            topics = subscription.topics(metadata)
            assigned = subscription.assigned_partitions(member.assignment)
            if topics is None or assigned is None:
                return f"cannot be upgraded: member {member.member_id} has no consumer subscription"
            members.append(
                ConsumerMember(
                    member.member_id,
                    instance_id=member.group_instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    subscribed_topic_names=tuple(sorted(topics)),
                    assigned=assigned,
                    session_timeout_ms=member.session_timeout_ms,
                    classic_protocol=group.protocol_name,
                )
            )
        self._cancel_timers(group_id)
        empty = self._groups[group_id] = self._new_group(group_id)
        self._apply(empty, [Persist(group_id, empty.snapshot())])
        return group.generation_id, members

    def group(self, group_id: str) -> Group | None:
        """The live state machine of a group (for tests and the admin API; do not mutate)."""
        return self._groups.get(group_id)

    # ---------------------------------------------------------------------------------------------
    # Membership

    async def join_group(self, request: JoinRequest) -> JoinResult:
        if (refused := self._refusal(request.group_id)) is not None:
            return JoinResult(refused, request.member_id)
        error = check_join(request, self.config)
        if error is not None:
            return JoinResult(error, request.member_id)
        if self.consumer.serves_classic(request.group_id):  # a classic member of a KIP-848 group
            return self.consumer.classic_join(request, self._new_member_id)
        group = self._groups.get(request.group_id)
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                return JoinResult(ErrorCode.unknown_member_id, request.member_id)
            group = self._groups[request.group_id] = self._new_group(request.group_id)
        bound = max(request.rebalance_timeout_ms, request.session_timeout_ms) / 1000 + _WAIT_GRACE_S
        result = await self._hold(
            lambda ticket: group.join(request, ticket),
            group,
            bound,
            timed_out=JoinResult(ErrorCode.rebalance_in_progress, request.member_id),
            stopped=JoinResult(ErrorCode.not_coordinator, request.member_id),
        )
        assert isinstance(result, JoinResult)
        return result

    async def sync_group(self, request: SyncRequest) -> SyncResult:
        if (refused := self._refusal(request.group_id)) is not None:
            return SyncResult(refused)
        if self.consumer.serves_classic(request.group_id):
            return self.consumer.classic_sync(request)
        group = self._groups.get(request.group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        member = group.members.get(request.member_id)
        timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms) if member else (0,)
        bound = max(timeouts) / 1000 + _WAIT_GRACE_S
        result = await self._hold(
            lambda ticket: group.sync(request, ticket),
            group,
            bound,
            timed_out=SyncResult(ErrorCode.rebalance_in_progress),
            stopped=SyncResult(ErrorCode.not_coordinator),
        )
        assert isinstance(result, SyncResult)
        return result

    async def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        if (refused := self._refusal(group_id)) is not None:
            return refused
        if self.consumer.serves_classic(group_id):
            return self.consumer.classic_heartbeat(group_id, member_id, generation_id)
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error, actions = group.heartbeat(member_id, group_instance_id, generation_id)
        self._apply(group, actions)
        return error

    async def leave_group(self, group_id: str, identities: Sequence[MemberIdentity]) -> list[ErrorCode]:
        if (refused := self._refusal(group_id)) is not None:
            return [refused for _ in identities]
        if self.consumer.serves_classic(group_id):
            return self.consumer.classic_leave(group_id, identities)
        group = self._groups.get(group_id)
        if group is None:
            return [ErrorCode.unknown_member_id for _ in identities]
        errors, actions = group.leave(identities)
        self._apply(group, actions)
        return errors

    # ---------------------------------------------------------------------------------------------
    # Offsets

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Sequence[OffsetToCommit],
    ) -> dict[TopicPartition, ErrorCode]:
        """Validate and durably store offsets; the answer comes after the transaction committed."""
        keys = [(o.topic, o.partition) for o in offsets]
        if (refused := self._refusal(group_id)) is not None:
            return dict.fromkeys(keys, refused)
        if not group_id:
            return dict.fromkeys(keys, ErrorCode.invalid_group_id)
        group = self._groups.get(group_id)
        if (consumer := self.consumer.group(group_id)) is not None and consumer.members:
            error = consumer.check_offset_commit(member_id, generation_id)  # a member epoch
        else:
            if group is None:
                if generation_id >= 0:
                    # A member of a generation this coordinator never saw (or a deleted group).
                    return dict.fromkeys(keys, ErrorCode.illegal_generation)
                group = self._groups[group_id] = self._new_group(group_id)
            error = group.check_offset_commit(member_id, group_instance_id, generation_id)
        if error is not ErrorCode.none:
            return dict.fromkeys(keys, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, CommittedOffset] = {}
        now = self._now_ms()
        for o in offsets:
            count = self.topic_partitions(o.topic)
            if count is None or not 0 <= o.partition < count:
                results[(o.topic, o.partition)] = ErrorCode.unknown_topic_or_partition
            elif o.metadata is not None and len(o.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(o.topic, o.partition)] = ErrorCode.offset_metadata_too_large
            else:
                valid[(o.topic, o.partition)] = CommittedOffset(o.offset, o.leader_epoch, o.metadata, now)
        if valid:
            try:
                await self._commit_offsets(group_id, valid)
            except GroupFenced:
                error = ErrorCode.not_coordinator  # the client looks the coordinator up again
            except Exception:
                log.exception("committing offsets of group %s failed", group_id)
                error = ErrorCode.coordinator_not_available  # retriable: the client tries again
            for key in valid:
                results[key] = error
        return results

    def check_transactional_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """May this member send offsets with its transaction now (TxnOffsetCommit, KIP-447)? A
        member the group no longer has, or of an older generation (member epoch), may not: its
        partitions may belong to another member already, which reads from the committed offsets
        and copies the same records again."""
        if (refused := self._refusal(group_id)) is not None:
            return refused
        if generation_id < 0 and member_id == UNKNOWN_MEMBER_ID and group_instance_id is None:
            return ErrorCode.none  # a producer from before KIP-447 names no member
        if (consumer := self.consumer.group(group_id)) is not None and consumer.members:
            error = consumer.check_offset_commit(member_id, generation_id)
            # Kafka answers a transactional commit's stale epoch ILLEGAL_GENERATION, which
            # producers abort on (STALE_MEMBER_EPOCH is for the consumer's own commits).
            return ErrorCode.illegal_generation if error is ErrorCode.stale_member_epoch else error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id  # Kafka makes the group, empty: no such member
        return group.check_transactional_commit(member_id, group_instance_id, generation_id)

    async def commit_transactional_offsets(self, group_id: str, offsets: Sequence[OffsetToCommit]) -> None:
        """Store offsets a transaction committed (TxnOffsetCommit, then EndTxn COMMIT). The member
        and generation are not checked here: they were when the offsets were sent
        (:meth:`check_transactional_commit`), and a committed transaction's offsets must not be lost
        to a rebalance that happened since.

        Raises:
            GroupFenced: this broker does not coordinate the group (any more); the transaction's
                coordinator asks the group's current coordinator again (also while the group's
                slot is still being loaded: what the load reads must include these offsets).
        """
        if (refused := self._refusal(group_id)) is not None:
            raise GroupFenced(f"offsets of group {group_id} not committed here: {refused.name}")
        now = self._now_ms()
        valid = {
            (o.topic, o.partition): CommittedOffset(o.offset, o.leader_epoch, o.metadata, now)
            for o in offsets
        }
        await self._commit_offsets(group_id, valid)

    def fetch_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, CommittedOffset | None]]]]]:
        """Committed offsets of the requested partitions (``None`` for never committed), or of every
        partition the group committed when ``topics`` is ``None``."""
        if (refused := self._refusal(group_id)) is not None:
            return refused, []
        committed = self._offsets.get(group_id, {})
        if topics is None:
            by_topic: dict[str, list[tuple[int, CommittedOffset | None]]] = {}
            for (topic, partition), value in sorted(committed.items()):
                by_topic.setdefault(topic, []).append((partition, value))
            return ErrorCode.none, list(by_topic.items())
        return ErrorCode.none, [
            (topic, [(p, committed.get((topic, p))) for p in partitions]) for topic, partitions in topics
        ]

    async def delete_offsets(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]]
    ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
        """OffsetDelete: allowed for an Empty group, and for an active ``consumer`` group only on
        topics no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC otherwise)."""
        if (refused := self._refusal(group_id)) is not None:
            return refused, []
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found, []
        if group.state is not GroupState.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return ErrorCode.non_empty_group, []
        results: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
        doomed: list[TopicPartition] = []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                error = ErrorCode.group_subscribed_to_topic
            elif self.topic_partitions(topic) is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                error = ErrorCode.none
                doomed.extend((topic, p) for p in partitions)
            results.append((topic, [(p, error) for p in partitions]))
        if doomed:
            try:
                await self._delete_offsets(group_id, doomed)
            except GroupFenced:
                return ErrorCode.not_coordinator, []
            except Exception:
                log.exception("deleting offsets of group %s failed", group_id)
                return ErrorCode.coordinator_not_available, []
        return ErrorCode.none, results

    async def delete_topic_offsets(self, topic: str) -> None:
        """Forget every group's offsets of a deleted topic (Kafka does the same), so a topic
        re-created under the same name starts from the consumers' reset policy."""
        for group_id, committed in list(self._offsets.items()):
            doomed = [key for key in committed if key[0] == topic]
            if doomed:
                # Fenced: the slot moved meanwhile, the offsets stay in the database. The group's
                # new coordinator drops them if it learns of the deletion after loading the group;
                # otherwise they stay until offset retention expires them.
                with contextlib.suppress(GroupFenced):
                    await self._delete_offsets(group_id, doomed)

    async def expire_offsets(self) -> int:
        """Forget offsets past ``offsets.retention.minutes`` (see :mod:`.retention`) and drop Empty
        groups left without offsets. Returns how many offsets went."""
        now = self._now_ms()
        removed = 0
        for group_id, group in list(self._groups.items()):
            if not self.owns(group_id):
                continue
            if (consumer := self.consumer.group(group_id)) is not None and consumer.members:
                self._state_since[group_id] = now  # an active consumer group keeps its offsets
                continue
            committed = self._offsets.get(group_id, {})
            since = self._state_since.setdefault(group_id, now)
            doomed = expired_offsets(group, committed, since, now, self.config.offsets_retention_ms)
            if doomed:
                try:
                    await self._delete_offsets(group_id, doomed)
                except GroupFenced:
                    continue
                removed += len(doomed)
                log.info("group %s: %d offset(s) expired", group_id, len(doomed))
            if (
                group.state is GroupState.EMPTY
                and not group.pending_members
                and not self._offsets.get(group_id)
            ):
                await self.delete_groups([group_id])
        return removed

    async def _expire_periodically(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except Exception:
                log.exception("offset expiry failed; retrying in %.0f s", interval)

    # ---------------------------------------------------------------------------------------------
    # Administration

    def describe_group(self, group_id: str) -> GroupDescription | None:
        group = self._groups.get(group_id)
        return None if group is None else group.describe()

    def list_groups(self) -> list[ListedGroup]:
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state)
            for g in self._groups.values()
            if g.state is not GroupState.DEAD and self.owns(g.group_id)
        ]

    def group_ids(self) -> list[str]:
        """Every group this broker coordinates that commits offsets: classic and KIP-848 consumer
        groups (a share group's progress is its share state, not committed offsets)."""
        classic = [g.group_id for g in self.list_groups()]
        consumer = [g.group_id for g in self.consumer.groups() if self.owns(g.group_id)]
        return sorted(set(classic) | set(consumer))

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: only Empty groups (NON_EMPTY_GROUP while members are active); offsets go
        with the group."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            if (refused := self._refusal(group_id)) is not None:
                results[group_id] = refused
                continue
            group = self._groups.get(group_id)
            if group is None:
                results[group_id] = ErrorCode.group_id_not_found
                continue
            error = group.check_deletable()
            if error is not ErrorCode.none:
                results[group_id] = error
                continue
            snapshot = group.snapshot()
            self._apply(group, group.mark_dead())

            async def write(fence: Fence | None, group_id: str = group_id) -> None:
                await asyncio.to_thread(self._store.delete_group, group_id, fence)

            try:
                await self._writes.write(group_id, write)
            except GroupFenced:
                results[group_id] = ErrorCode.not_coordinator
                continue
            except Exception:
                log.exception("deleting group %s failed", group_id)
                restored, actions = Group.restore(snapshot, self.config, self._new_member_id)
                self._groups[group_id] = restored
                self._apply(restored, actions)
                results[group_id] = ErrorCode.coordinator_not_available
                continue
            self._cancel_timers(group_id)
            self._seen.pop(group_id, None)
            self._state_since.pop(group_id, None)
            self._groups.pop(group_id, None)
            self._offsets.pop(group_id, None)
            results[group_id] = ErrorCode.none
        return results

    # ---------------------------------------------------------------------------------------------
    # Driving the state machine

    def _new_group(self, group_id: str) -> Group:
        return Group(group_id, self.config, self._new_member_id)

    async def _hold(
        self,
        call: Callable[[int], list[Action]],
        group: Group,
        bound_s: float,
        *,
        timed_out: JoinResult | SyncResult,
        stopped: JoinResult | SyncResult,
    ) -> JoinResult | SyncResult:
        """Run a request whose answer may be held back and wait (bounded) for its ticket; answer
        ``timed_out`` past the bound (a safety net: the group's timers answer long before) and
        ``stopped`` when the coordinator shuts down meanwhile."""
        assert self._loop is not None
        ticket = next(self._ticket_ids)
        future: asyncio.Future[JoinResult | SyncResult | None] = self._loop.create_future()
        self._tickets[ticket] = future
        self._ticket_groups[ticket] = group.group_id
        try:
            self._apply(group, call(ticket))
            result = await asyncio.wait_for(future, bound_s)
            return stopped if result is None else result
        except TimeoutError:
            log.warning("group %s: request held longer than %.0f s, answering it", group.group_id, bound_s)
            return timed_out
        finally:
            self._tickets.pop(ticket, None)
            self._ticket_groups.pop(ticket, None)

    def _apply(self, group: Group, actions: list[Action]) -> None:
        self._log_progress(group)
        barrier: asyncio.Task[None] | None = None
        for action in actions:
            if isinstance(action, SetTimer):
                self._set_timer(group.group_id, action.key, action.delay_ms)
            elif isinstance(action, CancelTimer):
                handle = self._timers.pop((group.group_id, action.key), None)
                if handle is not None:
                    handle.cancel()
            elif isinstance(action, Persist):
                fence = self._fence(action.group_id)
                barrier = self._writes.enqueue(
                    action.group_id, functools.partial(self._persist, action, fence)
                )
            elif isinstance(action, Respond):
                if barrier is None:
                    self._resolve(action.ticket, action.result)
                else:
                    barrier.add_done_callback(
                        functools.partial(self._resolve_after, group, action.ticket, action.result)
                    )

    def _log_progress(self, group: Group) -> None:
        """One INFO line per state or generation change, the trail an operator follows."""
        seen = (group.state, group.generation_id)
        if self._seen.get(group.group_id) == seen:
            return
        if self._seen.get(group.group_id, (None,))[0] is not group.state:
            self._state_since[group.group_id] = self._now_ms()
        self._seen[group.group_id] = seen
        log.info(
            "group %s: %s, generation %d, %d member(s), protocol %s, leader %s",
            group.group_id,
            group.state.value,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )

    def _resolve(self, ticket: int, result: JoinResult | SyncResult | None) -> None:
        future = self._tickets.get(ticket)
        if future is not None and not future.done():
            future.set_result(result)

    def _resolve_after(self, group: Group, ticket: int, result: JoinResult | SyncResult, _: object) -> None:
        """Answer once the write before the answer finished; a group dropped meanwhile (its write
        was fenced) answers NOT_COORDINATOR instead."""
        self._resolve(ticket, result if self._groups.get(group.group_id) is group else None)

    def _set_timer(self, group_id: str, key: TimerKey, delay_ms: int) -> None:
        assert self._loop is not None
        old = self._timers.pop((group_id, key), None)
        if old is not None:
            old.cancel()
        self._timers[(group_id, key)] = self._loop.call_later(
            max(delay_ms, 0) / 1000, self._on_timer, group_id, key
        )

    def _on_timer(self, group_id: str, key: TimerKey) -> None:
        self._timers.pop((group_id, key), None)
        group = self._groups.get(group_id)
        if group is None or not self._ready or not self.owns(group_id):
            return
        self._apply(group, group.on_timer(key))

    def _cancel_timers(self, group_id: str) -> None:
        for key in [k for k in self._timers if k[0] == group_id]:
            self._timers.pop(key).cancel()

    async def _persist(self, action: Persist, fence: Fence | None) -> None:
        try:
            if action.snapshot is None:
                await asyncio.to_thread(self._store.delete_group, action.group_id, fence)
            else:
                await asyncio.to_thread(self._store.save_group, action.snapshot, fence)
        except GroupFenced:
            self._fenced(action.group_id, fence)
        except Exception:
            # Membership is re-established by the clients anyway; offsets are what must not be
            # lost, and those are written (and their errors reported) by commit_offsets.
            log.exception("persisting group %s failed", action.group_id)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def _commit_offsets(self, group_id: str, valid: dict[TopicPartition, CommittedOffset]) -> None:
        """Write offsets to the database, then to the cache (a queued write: :mod:`.write_queue`).

        The offsets join the group's queued commit when that has not started, is the last write in
        the group's queue (nothing queued after it is overtaken) and has the same fence; a later
        offset of a partition replaces an earlier one, as one write after the other would.
        """
        fence = self._fence(group_id)
        queued = self._queued_commits.get(group_id)
        if queued is None or queued.fence != fence or not self._writes.is_last(group_id, queued.write):
            queued = self._queue_commit(group_id, fence)
        queued.offsets.update(valid)
        await self._writes.wait(group_id, fence, queued.write)

    def _save_consumer_group(self, group_id: str) -> None:
        """Queue a write of a KIP-848 group's state, behind the group's earlier writes; a write
        already queued and not started takes this change too. Nobody waits for it: a refusal drops
        the slot and a failure is logged (:meth:`.GroupWriteQueue.in_background`), and a member
        whose state was not written rejoins after a failover, as without any record."""
        if group_id in self._queued_records:
            return
        fence = self._fence(group_id)

        async def write() -> None:
            del self._queued_records[group_id]  # started: later changes queue a write of their own
            group = self.consumer.group(group_id)
            if group is None:
                return  # another broker coordinates it now, or it was deleted
            record = group_record(group) if group.members else None
            await asyncio.to_thread(self._store.save_consumer_group, group_id, record, fence)

        task = self._writes.enqueue(group_id, write)
        self._queued_records[group_id] = task
        self._writes.in_background(group_id, fence, task)

    def _queue_commit(self, group_id: str, fence: Fence | None) -> _QueuedCommit:
        """A commit write of ``group_id`` at the end of its queue, open to later offsets until it
        starts."""

        async def write() -> None:
            if self._queued_commits.get(group_id) is queued:
                del self._queued_commits[group_id]  # started: what it writes is fixed from here
            await asyncio.to_thread(self._store.commit_offsets, group_id, queued.offsets, fence)
            cache = self._offsets.setdefault(group_id, {})
            if self.on_consumed is not None:
                self._count_consumed(cache, queued.offsets, self.on_consumed)
            cache.update(queued.offsets)

        queued = _QueuedCommit(fence, {}, self._writes.enqueue(group_id, write))
        self._queued_commits[group_id] = queued
        return queued

    @staticmethod
    def _count_consumed(
        before: dict[TopicPartition, CommittedOffset],
        committed: dict[TopicPartition, CommittedOffset],
        tell: Callable[[str, int, int], None],
    ) -> None:
        """Tell how far each committed offset moved past the group's last one. A partition the
        group commits for the first time counts nothing: its offset says where the group started
        (the whole log for a new group reading from the start), not what it read since the last
        commit; an offset moved back (a reset) counts nothing either."""
        for (topic, partition), offset in committed.items():
            last = before.get((topic, partition))
            if last is not None and offset.offset > last.offset:
                tell(topic, partition, offset.offset - last.offset)

    async def _delete_offsets(self, group_id: str, doomed: list[TopicPartition]) -> None:
        """Delete some of a group's offsets: from the database, then from the cache (a queued
        write: :mod:`.write_queue`)."""

        async def write(fence: Fence | None) -> None:
            await asyncio.to_thread(self._store.delete_offsets, group_id, doomed, fence)
            cache = self._offsets.get(group_id, {})
            for key in doomed:
                cache.pop(key, None)

        await self._writes.write(group_id, write)
