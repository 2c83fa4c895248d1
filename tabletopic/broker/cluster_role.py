"""The broker's part in a cluster: it leads the partitions the controller gives this incarnation.

Gaining a partition means opening its stream with the leader epoch (which fences the previous
leader in the metadata database) and rebuilding its idempotent-producer state from the snapshot and
the stream; only then does the broker serve it. Losing one means no longer serving it, uploading
what it has pending and closing the stream. Everything else a handler needs (leaders with epochs,
live brokers, the controller, group coordinators) is read from the cluster's current snapshot; see
``docs/cluster.md``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine

from tabletopic.broker.leadership import (
    GROUP_SLOTS_TOPIC,
    SLOT_TOPICS,
    TXN_SLOTS_TOPIC,
    BrokerEndpoint,
    group_slot,
)
from tabletopic.broker.wal_takeover import WalTakeovers
from tabletopic.cluster.controller import PartitionKey
from tabletopic.cluster.load import LoadMeter
from tabletopic.cluster.node import ClusterNode, ClusterSettings
from tabletopic.ids import LeaderEpoch, NodeId, StreamId
from tabletopic.log_limit import RateLimitedLog, few_of
from tabletopic.s3stream.shared import SharedStreamStore
from tabletopic.s3stream.streams import StreamError, StreamFenced
from tabletopic.tasks import cancel_and_wait

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)
RECONCILE_LOG = RateLimitedLog(log, interval_s=30.0)

RANGES = "ranges"  # NOTIFY kind: "ranges:<stream ids>" moved to new objects by compaction
TOPICS = "topics"  # NOTIFY kind: "topics:<name>" changed (created, deleted, altered); "topics": any


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s failed: %s", task.get_name(), task.exception())


class ClusterRole:
    """Implements :class:`~tabletopic.broker.leadership.Leadership` for a broker in a cluster."""

    def __init__(
        self,
        service: BrokerService,
        store: SharedStreamStore,
        engine: Engine,
        settings: ClusterSettings,
        group_slots: int,
        txn_slots: int = 50,
    ) -> None:
        self.service = service
        self.store = store
        self.group_slots = group_slots
        self.txn_slots = txn_slots
        self._meter: LoadMeter[PartitionKey] = LoadMeter(settings.auto_balancer.metrics_window_s)
        self.node = ClusterNode(
            engine, settings, self._wanted, self._load, SLOT_TOPICS, wal=store.wal_directory
        )
        self.takeovers = WalTakeovers(self.node, store)
        self.opened: dict[PartitionKey, LeaderEpoch] = {}  # what this broker serves, with its leader epoch
        # Per partition, since this broker started: bytes in, bytes out and records in (appended
        # here as its leader) and records consumed (committed by the groups this broker
        # coordinates, of any partition); reported as rates with each lease renewal, and
        # forgotten once a whole metrics window passes without a change.
        self.traffic: dict[PartitionKey, list[int]] = {}
        self._report_names: dict[PartitionKey, str] = {}  # "topic/partition", made once
        # Called with the group slots gained, with their leader epochs (the group coordinator
        # reloads those groups and fences its writes with the epoch) and lost (it forgets them).
        self.on_groups_gained: list[Callable[[dict[int, LeaderEpoch]], None]] = []
        self.on_groups_lost: list[Callable[[set[int]], None]] = []
        # The same for transaction coordinator slots, gained with their leader epochs.
        self.on_txn_slots_gained: list[Callable[[dict[int, LeaderEpoch]], None]] = []
        self.on_txn_slots_lost: list[Callable[[set[int]], None]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._topics_task: asyncio.Task[None] | None = None
        self._topics_again = False
        # What the next reload reads: the topics named since the last one, or all (None).
        self._topics_named: set[str] | None = set()
        self._background: set[asyncio.Task[None]] = set()
        # Broker-local copies of shared state, by the NOTIFY kind that says another broker changed
        # it, with what re-reads it (see ``follow``).
        self._followed: dict[str, Callable[[], Coroutine[Any, Any, None]]] = {}
        # Partition hand-overs still uploading and closing their streams: a controlled shutdown
        # waits for them (cancelling one would leave acknowledged appends to nobody's upload).
        self._releasing = 0

    # Life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        node = self.node
        node.on_change.append(lambda _snapshot: self._wake.set())
        node.on_notify.append(self._notified)
        self.service.topics.on_change.append(self._topics_changed)
        endpoints = {str(proto): (ep.host, ep.port) for proto, ep in self.service.advertised.items()}
        await node.start(endpoints)
        await self.takeovers.start()
        # Stream-set object compaction reads every stream's start from the database: one compactor
        # for the cluster, its controller.
        self.store.compactor.active = lambda: self.node.controller_epoch is not None
        self.store.compactor.on_swapped = self._objects_swapped
        self._task = asyncio.create_task(self._reconcile_loop(), name="broker-leadership")

    async def stop(self, drain: bool = True) -> None:
        """Controlled shutdown (``drain``): hand every partition to other brokers first, then leave."""
        if drain and self._task is not None and not self.node.fenced:
            moved = await self.node.drain(lambda: not self._serving_partitions())
            log.info(
                "controlled shutdown: %s", "partitions moved" if moved else "timed out moving partitions"
            )
        tasks = [t for t in (self._task, self._topics_task) if t is not None]
        await cancel_and_wait([*tasks, *self._background])
        await self.takeovers.stop()
        if self.opened:
            await self._release(list(self.opened))
        await self.node.stop()

    def _serving_partitions(self) -> bool:
        """Whether a partition is still served here or still being handed over."""
        return self._releasing > 0 or any(topic not in SLOT_TOPICS for topic, _ in self.opened)

    # Leadership (what handlers ask) ------------------------------------------------------------

    def leads(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.opened

    def serving_epoch(self, topic: str, partition: int) -> int | None:
        return self.opened.get((topic, partition))

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        found = self.node.leader((topic, partition))
        if found is None:
            return self.node.node_id, self.opened.get((topic, partition), 0)
        return found.node_id, found.leader_epoch

    def leaders_version(self) -> int | None:
        # With no broker eligible to lead, :meth:`leader` falls back on what this broker opened.
        return self.node.leaders_version if self.node.snapshot.eligible else None

    def brokers(self, listener: str) -> list[BrokerEndpoint]:
        result = []
        for info in sorted(self.node.snapshot.nodes.values(), key=lambda n: n.node_id):
            if not info.alive:
                continue
            host_port = info.endpoints.get(listener) or next(iter(info.endpoints.values()), None)
            if host_port is not None:
                result.append(BrokerEndpoint(info.node_id, host_port[0], host_port[1], info.rack))
        return result

    def controller_id(self) -> int:
        controller = self.node.snapshot.controller_id
        return -1 if controller is None else controller

    def group_coordinator(self, group_id: str) -> int:
        return self.leader(GROUP_SLOTS_TOPIC, group_slot(group_id, self.group_slots))[0]

    def transaction_coordinator(self, transactional_id: str) -> int:
        return self.leader(TXN_SLOTS_TOPIC, group_slot(transactional_id, self.txn_slots))[0]

    def give_up(self, key: PartitionKey) -> None:
        """A coordinator slot's write was refused by the database (another broker leads it, or this
        broker's lease ran out): stop leading it now. The next reconcile takes it again, and its
        coordinator loads it again, if the controller's placement still names this incarnation."""
        if key[0] in SLOT_TOPICS and key in self.opened:
            self._release_slot(key)
            self._retry_soon()

    def reassignments(self) -> dict[PartitionKey, tuple[int, int]]:
        result: dict[PartitionKey, tuple[int, int]] = {}
        for key, row in self.node.snapshot.partitions.items():
            if row.target is not None and row.target != row.leader and key[0] not in SLOT_TOPICS:
                result[key] = (-1 if row.leader is None else row.leader, row.target)
        return result

    async def reassign(self, moves: list[tuple[str, int, int | None]]) -> list[PartitionKey]:
        return await self.node.request_moves(moves)

    async def unregister(self, node_id: int, by: str) -> None:
        await self.node.unregister(NodeId(node_id), by)

    def record_traffic(
        self,
        topic: str,
        partition: int,
        bytes_in: int = 0,
        bytes_out: int = 0,
        records_in: int = 0,
        records_consumed: int = 0,
    ) -> None:
        counts = self.traffic.get((topic, partition))
        if counts is None:
            counts = self.traffic[(topic, partition)] = [0, 0, 0, 0]
        counts[0] += bytes_in
        counts[1] += bytes_out
        counts[2] += records_in
        counts[3] += records_consumed

    # Internals -------------------------------------------------------------------------------

    def _wanted(self) -> list[PartitionKey]:
        """Blocking (controller thread): every partition and group slot there is."""
        keys = self.service.topics.read_partition_keys()
        return (
            keys
            + [(GROUP_SLOTS_TOPIC, i) for i in range(self.group_slots)]
            + [(TXN_SLOTS_TOPIC, i) for i in range(self.txn_slots)]
        )

    def _load(self) -> dict[str, list[float]]:
        """Per second over the balancer's metrics window (reported with each lease renewal): bytes
        in and out and records in of every partition this broker leads, and records consumed of
        any partition (as the groups it coordinates commit; 0 bytes where another broker leads).
        Idle partitions are left out (the balancer reads a missing one as idle): with 10,000 of
        them the report would otherwise be a 100 kB JSON document written with every renewal."""
        rates = self._meter.rates(self.traffic, time.monotonic())
        report = {}
        names, opened = self._report_names, self.opened
        for key, (bytes_in, bytes_out, records_in, records_consumed) in rates.items():
            if key[0] in SLOT_TOPICS:
                continue
            if key not in opened:  # led elsewhere now: its bytes are that leader's to report
                bytes_in = bytes_out = records_in = 0.0
            # Records to a tenth: a topic written a record every few seconds is not 0 records/s.
            figures = [round(bytes_in), round(bytes_out), round(records_in, 1), round(records_consumed, 1)]
            if any(figures):
                name = names.get(key)
                if name is None:
                    name = names[key] = f"{key[0]}/{key[1]}"
                report[name] = figures
        for key in self._meter.forget_idle(self.traffic):
            names.pop(key, None)
        return report

    def _objects_swapped(self, stream_ids: set[int]) -> None:
        """The controller's compaction moved these streams' data: tell the brokers holding them."""
        listed = ",".join(str(s) for s in sorted(stream_ids))
        kind = f"{RANGES}:{listed}" if len(listed) < 7000 else RANGES  # NOTIFY payloads are < 8000 B
        self._spawn(self.node.notify(kind), "cluster-ranges-notify")

    def _ranges_moved(self, kind: str) -> None:
        held = self.store.known_streams()
        _, _, listed = kind.partition(":")
        wanted = {int(s) for s in listed.split(",") if s} & held if listed else held
        if wanted:
            self._spawn(self.store.reload_ranges(sorted(wanted)), "cluster-ranges-reload")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_log_failure)

    def follow(
        self, kind: str, reload: Callable[[], Coroutine[Any, Any, None]]
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        """Keep a broker-local copy of shared state (ACLs, client quotas) current: ``reload`` runs
        whenever a broker announces ``kind``, and after the LISTEN connection was re-established (a
        NOTIFY may have been missed). Returns the announcement to await after a change made here."""
        self._followed[kind] = reload
        return lambda: self.node.notify(kind)

    def _notified(self, kind: str) -> None:
        for followed, reload in self._followed.items():
            if kind in (followed, "reconnected"):
                self._spawn(reload(), f"cluster-{followed}-reload")
        if kind.startswith(RANGES):
            self._ranges_moved(kind)
            return
        if kind in (TOPICS, "reconnected"):
            self._topics_named = None  # any topic may have changed (or a NOTIFY was missed)
        elif kind.startswith(f"{TOPICS}:"):
            if self._topics_named is not None:
                self._topics_named.add(kind.partition(":")[2])
        else:
            return
        # A change notified while a reload runs may not be in it (topics created together each
        # notify): reload once more after it.
        self._topics_again = True
        if self._topics_task is None or self._topics_task.done():
            self._topics_task = asyncio.create_task(self._reload_topics(), name="broker-topics-reload")

    async def _reload_topics(self) -> None:
        while self._topics_again:
            self._topics_again = False
            names, self._topics_named = self._topics_named, set()
            try:
                await self.service.topics.reload(names)
            except Exception:
                log.exception("reloading topics failed")
                self._topics_named = None  # the next change reloads everything
            self._wake.set()

    async def _topics_changed(self, name: str) -> None:
        await self.node.notify(f"{TOPICS}:{name}")

    async def _reconcile_loop(self) -> None:
        """Apply leadership changes whenever woken; a failure is retried with back-off (0.2 s
        doubling to 5 s) and logged with its traceback once, then at most every 30 s while it
        keeps failing (a partition whose replay cannot read its stream must not flood the log)."""
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if failures == 1:
                    log.exception("applying leadership changes failed; retrying")
                else:
                    message = "applying leadership changes still fails (%d attempts): %s"
                    RECONCILE_LOG.warning("reconcile", message, failures, exc)
                await asyncio.sleep(min(0.2 * 2 ** (failures - 1), 5.0))
                self._wake.set()
            else:
                if failures > 1:
                    log.info("leadership changes applied after %d failed attempts", failures)
                failures = 0

    async def _reconcile(self) -> None:
        # Here, not in a task of its own: it must not run while streams are being opened.
        await self.takeovers.release_earlier_streams()
        desired = self.node.my_assignments()
        lost = [k for k, epoch in self.opened.items() if desired.get(k) != epoch]
        if lost:
            await self._release(lost)
        gained = {k: e for k, e in desired.items() if k not in self.opened}
        if not gained:
            return
        slots = {p: e for (t, p), e in gained.items() if t == GROUP_SLOTS_TOPIC}
        txn_slots = {p: e for (t, p), e in gained.items() if t == TXN_SLOTS_TOPIC}
        partitions = {k: e for k, e in gained.items() if k[0] not in SLOT_TOPICS}
        started = time.monotonic()
        if any(self.service.topics.get(t) is None for t, _ in partitions):
            await self.service.topics.reload()
        opened = await self._open(partitions)
        streams = [sid for sid in opened if sid is not None]
        opened_at = time.monotonic()
        if streams:
            await self.service.producers.recover(streams)
            replayed_at = time.monotonic()
            # Open and aborted transactions of these partitions, before they are served.
            await self.service.transactions.partitions_gained(streams)
        for (key, epoch), sid in zip(partitions.items(), opened, strict=True):
            if sid is not None:
                self.opened[key] = epoch
        if streams:
            log.info(
                "now leading %d more partitions (%d in all): streams opened in %.2f s, producer state "
                "rebuilt in %.2f s, transaction state in %.2f s",
                len(streams),
                len(self.opened),
                opened_at - started,
                replayed_at - opened_at,
                time.monotonic() - replayed_at,
            )
        if slots:
            for callback in self.on_groups_gained:
                callback(slots)
            for slot, epoch in slots.items():
                self.opened[(GROUP_SLOTS_TOPIC, slot)] = epoch
        if txn_slots:
            for slot, epoch in txn_slots.items():
                self.opened[(TXN_SLOTS_TOPIC, slot)] = epoch
            for gain in self.on_txn_slots_gained:
                gain(txn_slots)

    async def _open(self, partitions: dict[PartitionKey, LeaderEpoch]) -> list[int | None]:
        """Open the streams of the partitions gained, with their leader epochs, all in one metadata
        transaction (a broker taking over a dead one's thousands of partitions must not pay a round
        trip each). Returns each partition's stream id, in order, or None where it cannot be led
        now: a topic not loaded yet or a store error is retried soon; a stream already held at a
        higher epoch means a newer decision exists, which the next snapshot brings."""
        if not partitions:
            return []
        wanted = {key: sid for key in partitions if (sid := self._stream_of(key)) is not None}
        # A shared-WAL broker still owning a stream hands it over by closing it (or its WAL is taken
        # over): opening before that would miss what it acknowledged.
        waiting = await self.takeovers.held_elsewhere(wanted.values())
        wanted = {key: sid for key, sid in wanted.items() if sid not in waiting}
        if len(wanted) < len(partitions):
            self._retry_soon()
        node_id = self.node.node_id
        try:
            results = await self.store.open_streams(
                [(sid, partitions[k], node_id) for k, sid in wanted.items()]
            )
        except StreamError as exc:
            log.warning("opening %d partitions failed: %s", len(wanted), exc)
            self._retry_soon()
            return [None] * len(partitions)
        fenced: list[str] = []
        failed: list[str] = []
        for key, sid in wanted.items():
            result = results.get(sid)
            if isinstance(result, StreamFenced):
                fenced.append(f"{key[0]}-{key[1]} ({result})")
            elif isinstance(result, StreamError) or result is None:
                failed.append(f"{key[0]}-{key[1]} ({result})")
            else:
                self.service.producers.forget_stream(sid)
        if fenced:
            log.warning("cannot lead %d partitions at the epochs given: %s", len(fenced), few_of(fenced))
        if failed:
            log.warning("opening %d partitions failed, retrying: %s", len(failed), few_of(failed))
            self._retry_soon()
        ok = {sid for sid, result in results.items() if not isinstance(result, StreamError)}
        return [wanted[key] if wanted.get(key) in ok else None for key in partitions]

    def _stream_of(self, key: PartitionKey) -> StreamId | None:
        """The stream of a partition as the loaded topics know it; None for one not loaded (yet)."""
        topic = self.service.topics.get(key[0])
        if topic is None or key[1] >= topic.partition_count:
            return None
        return StreamId(topic.streams[key[1]])  # topics keep plain ints; typed from here on

    def _release_slot(self, key: PartitionKey) -> None:
        """Stop coordinating a group or transaction slot (nothing to close: its state is rows)."""
        self.opened.pop(key, None)
        self._slots_lost([key])

    def _slots_lost(self, keys: list[PartitionKey]) -> None:
        """Tell the coordinators which of their slots among ``keys`` this broker no longer leads."""
        group_slots = {p for t, p in keys if t == GROUP_SLOTS_TOPIC}
        txn_slots = {p for t, p in keys if t == TXN_SLOTS_TOPIC}
        if group_slots:
            for callback in self.on_groups_lost:
                callback(group_slots)
        if txn_slots:
            for callback in self.on_txn_slots_lost:
                callback(txn_slots)

    async def _release(self, keys: list[PartitionKey]) -> None:
        """Stop serving these partitions and slots: the coordinators forget the slots' groups and
        transactions; the partitions' streams upload what they hold and close, all together (one
        upload wait and one fence check, however many a drain hands over)."""
        self._releasing += 1
        try:
            await self._hand_over(keys)
        finally:
            self._releasing -= 1

    async def _hand_over(self, keys: list[PartitionKey]) -> None:
        streams: dict[int, PartitionKey] = {}
        for key in keys:
            self.opened.pop(key, None)
            stream_id = None if key[0] in SLOT_TOPICS else self._stream_of(key)
            if stream_id is not None:
                streams[stream_id] = key
        self._slots_lost(keys)
        if not streams:
            return
        try:
            failed = await self.store.close_streams(list(streams))
            await self.service.producers.snapshot()
        except Exception:
            log.exception("closing %d partitions failed", len(streams))
            failed = {}
        if failed:
            given_up = [f"{streams[sid][0]}-{streams[sid][1]}" for sid in failed]
            log.info("gave up %d partitions already taken over: %s (%s)", len(failed), few_of(given_up),
                     next(iter(failed.values())))  # fmt: skip
        for sid in streams:
            self.service.producers.forget_stream(sid)

    def _retry_soon(self) -> None:
        asyncio.get_running_loop().call_later(0.2, self._wake.set)
