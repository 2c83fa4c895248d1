"""One broker's membership in the cluster, on its event loop: registration, the controller role
when this broker holds the lease, and a current :class:`ClusterSnapshot` that the broker reads
(leaders, live brokers) and is told about when it changes. The leases (the broker's and the
controller's) are renewed on threads of their own (:mod:`~tabletopic.cluster.renewal`), so that
neither a busy loop nor a slow database call of the loop's delays a renewal.

Waiting: a LISTEN thread wakes the loop on every NOTIFY (a node joined or left, leaders or topics
changed), so a decision reaches every broker within a round trip; the loop also polls every
``heartbeat / 4`` so that an expired lease, which sends no NOTIFY, is noticed quickly.

Cost of an idle round, whatever the partition count: a poll reads the nodes, the controller row
and the cluster version, and no partition row unless the version moved (then only the rows changed
since). The controller plans a full round (every partition and every topic's partitions read) only
when something it plans from changed: the brokers alive or draining, the cluster version (moves
asked for), topics (NOTIFY), its own previous round (balancing goes on while it moves), a new
controller epoch, or ``FULL_ROUND_S`` passed since the last.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import Engine

from tabletopic import settings as node_keys
from tabletopic.cluster import events
from tabletopic.cluster import settings as keys
from tabletopic.cluster.autobalance import AutoBalancer, AutoBalancerSettings
from tabletopic.cluster.balancer import BalancerSettings
from tabletopic.cluster.controller import PartitionKey, WalRow, guessed_leader
from tabletopic.cluster.db import (
    STOPPED,
    ClusterMetadata,
    ClusterSnapshot,
    NodeFenced,
    NotController,
    Version,
    run_listener,
)
from tabletopic.cluster.renewal import Renewal
from tabletopic.config import Config
from tabletopic.ids import BrokerEpoch, ControllerEpoch, LeaderEpoch, NodeId
from tabletopic.log_limit import RateLimitedLog
from tabletopic.tasks import cancel_and_wait, woken

log = logging.getLogger(__name__)
STUCK_LOG = RateLimitedLog(log)
# The event loop not seen running for this many leases: stuck, and the lease is no longer renewed. A
# fault run at 1,200 partitions on two cores saw a healthy broker's loop take 3.3 s, more than one
# 3 s lease, to come round while it took over a paused broker's partitions.
STUCK_LEASES = 2
T = TypeVar("T")

# A controller plans a full round at least this often even when nothing seems to have changed: what
# its change tests cannot see (load balancing going quiet, which lets count balancing resume) waits
# at most this long.
FULL_ROUND_S = 15.0
# NOTIFY kinds after which the controller plans again: topics changed ("topics", or "topics:<name>":
# their partitions are what it places), a shared WAL was recovered ("wals": its partitions may move
# now), or the listener reconnected (notifications may have been missed).
REPLAN_KINDS = frozenset({"topics", "reconnected", "wals"})


@dataclass(frozen=True)
class ClusterSettings:
    node_id: NodeId
    rack: str | None = None
    heartbeat_ms: int = 1000
    session_timeout_ms: int = 3000
    shutdown_timeout_ms: int = 10_000
    balance_max_moves: int = 8
    auto_balancer: AutoBalancerSettings = field(default_factory=AutoBalancerSettings)
    # ``admin.listener``: registered (see :func:`reachable_admin_url`) so that any broker can
    # answer for the table topics this one coordinates, and consoles link to this one's pages.
    admin_listener: str | None = None
    # ``admin.advertised.uri``: registered as it is, instead of the listener.
    admin_advertised: str | None = None

    @classmethod
    def from_config(cls, config: Config, node_id: NodeId) -> ClusterSettings:
        return cls(
            auto_balancer=AutoBalancerSettings(
                enabled=config.get(keys.AUTO_BALANCER_ENABLE),
                detect_interval_s=config.get(keys.AUTO_BALANCER_DETECT_INTERVAL_MS) / 1000,
                metrics_window_s=config.get(keys.AUTO_BALANCER_METRICS_WINDOW_MS) / 1000,
                planner=BalancerSettings(
                    tolerance=config.get(keys.AUTO_BALANCER_TOLERANCE),
                    max_moves=config.get(keys.AUTO_BALANCER_MAX_MOVES),
                    cooldown_seconds=config.get(keys.AUTO_BALANCER_COOLDOWN_MS) / 1000,
                    min_bytes_per_second=config.get(keys.AUTO_BALANCER_MIN_BYTES_PER_SECOND),
                ),
            ),
            node_id=node_id,
            rack=config.get(keys.RACK) or None,
            heartbeat_ms=config.get(keys.HEARTBEAT_INTERVAL_MS),
            session_timeout_ms=config.get(keys.SESSION_TIMEOUT_MS),
            shutdown_timeout_ms=config.get(keys.CONTROLLED_SHUTDOWN_TIMEOUT_MS),
            balance_max_moves=config.get(keys.BALANCE_MAX_MOVES),
            admin_listener=config.get(node_keys.ADMIN_LISTENER) or None,
            admin_advertised=config.get(node_keys.ADMIN_ADVERTISED_URI) or None,
        )


def reachable_admin_url(
    listener: str | None, endpoints: Mapping[str, tuple[str, int]], advertised: str | None = None
) -> str | None:
    """The admin listener as another broker reaches it: ``advertised`` (``admin.advertised.uri``)
    when set, else the listener with a wildcard host (``0.0.0.0``, ``::``) replaced by the host this
    broker advertises to Kafka clients, which they already reach."""
    if not listener:
        return None
    if advertised:
        return advertised.rstrip("/")
    parts = urlsplit(listener.rstrip("/"))
    if parts.hostname not in ("0.0.0.0", "::", None, ""):
        return urlunsplit(parts)
    host = next(iter(endpoints.values()), ("127.0.0.1", 0))[0]
    netloc = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=f"{netloc}:{parts.port}" if parts.port else netloc))


@dataclass(frozen=True, slots=True)
class Leader:
    """Who leads a partition as clients are told: the placed leader, or the predicted one while the
    controller has not placed it yet (never none while a broker is alive)."""

    node_id: NodeId
    leader_epoch: LeaderEpoch


def reported_leader(snap: ClusterSnapshot, key: PartitionKey) -> Leader | None:
    """The leader Metadata names for a partition, from one broker's snapshot.

    A placed leader whose incarnation is alive is named with its epoch. So is one whose incarnation
    is newer than this snapshot knows: the controller saw it alive and this broker's view of the
    nodes lags. Otherwise (a leader whose lease lapsed or that restarted since, a partition not
    placed yet) the broker names the leader it predicts, :func:`guessed_leader` (the move's target
    or :func:`predicted_leader`), so that clients go there at once.

    A guess is named at the placement's own epoch (0 for a partition not placed yet), never above
    it: clients ignore an epoch older than the one they hold (KIP-320), so a guess at the next
    epoch that did not come true (a leader whose lease only lapsed, on a database that stalled
    for seconds, renews and keeps its partitions) left them sending to the guess for good, while
    every broker named the real leader at the older epoch. At the same epoch the real leader is
    taken back, and a placement, always a newer epoch, is taken over any guess.
    """
    row = snap.partitions.get(key)
    if row is not None and row.leader is not None:
        known = snap.nodes.get(row.leader)
        alive = snap.live.get(row.leader) == row.leader_node_epoch
        if alive or known is None or known.node_epoch < row.leader_node_epoch:
            return Leader(row.leader, row.leader_epoch)
    epoch = LeaderEpoch(row.leader_epoch if row is not None else 0)
    node = guessed_leader(key, row, snap.eligible)
    return None if node is None else Leader(node, epoch)


class ClusterNode:
    """This broker in the cluster. ``wanted`` lists every partition (the broker's topics, read from
    the database; the controller places them); ``load`` reports per-partition bytes in/out with
    each lease renewal, for balancing; the partitions of ``apart`` topics (coordinator slots) are
    evened out among themselves."""

    def __init__(
        self,
        engine: Engine,
        settings: ClusterSettings,
        wanted: Callable[[], list[PartitionKey]],
        load: Callable[[], dict[str, list[float]]] = dict,
        apart: Collection[str] = (),
        wal: str | None = None,
    ) -> None:
        self.meta = ClusterMetadata(engine)
        # The shared WAL directory this incarnation writes (registered with it), if it uses one.
        self.wal = wal
        self.settings = settings
        self.node_id = settings.node_id
        self.node_epoch = BrokerEpoch(0)
        self.controller_epoch: ControllerEpoch | None = None  # set while this broker is the controller
        self.snapshot = ClusterSnapshot({}, None, 0, {})
        # Counts the snapshots that differed from the one before: what :func:`reported_leader`
        # answers changes only with it, so a Metadata answer's partitions can be kept until then.
        self.leaders_version = 0
        self.fenced = False  # out of the cluster for good (see leave): this one leads nothing
        # Set with fenced, for the node to end (a restart joins again as a new incarnation).
        self.left = asyncio.Event()
        self.left_because = ""
        # Set by hand_over: the node ends as on SIGTERM, its partitions handed over first.
        self.handing_over = asyncio.Event()
        self.expired = False  # no renewal within the lease (database unreachable): lead nothing until one
        self.draining = False
        # Called (on the loop) after the snapshot changed, and with NOTIFY kinds of other parts.
        self.on_change: list[Callable[[ClusterSnapshot], None]] = []
        self.on_notify: list[Callable[[str], None]] = []
        self._wanted = wanted
        self._load = load
        self._apart = apart
        # The controller's load balancing (runs only while this broker is the controller).
        self.balancer = AutoBalancer(settings.auto_balancer)
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._executor = ThreadPoolExecutor(max_workers=3, thread_name_prefix="cluster-db")
        self._wake = asyncio.Event()
        self._stop = threading.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._listener: threading.Thread | None = None
        self._last_renewal = 0.0
        self._loop_seen = 0.0  # when the event loop last ran its lease task (see _may_renew)
        self._load_report: dict[str, list[float]] = {}  # what the next renewal reports, made on the loop
        self._renewals: list[Renewal[Any]] = []
        self._read_once = False  # the snapshot came from the database (incremental reads may start)
        # The controller's view when it last planned a full round (see ``_plan_due``).
        self._replan = True
        self._planned: tuple[Version, frozenset[tuple[int, int]], frozenset[int]] | None = None
        self._planned_at = 0.0
        self.full_round_s = FULL_ROUND_S

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    @property
    def _lease_s(self) -> float:
        return self.settings.session_timeout_ms / 1000

    # Life cycle ------------------------------------------------------------------------------

    def hand_over(self, because: str) -> None:
        """End the node as on SIGTERM (every partition handed to the other brokers first, a
        controlled shutdown) and have ``serve`` exit with :data:`~tabletopic.config.EXIT_REJOIN`
        so that its supervisor starts it again: for a broker that can still upload and close what
        it acknowledged but can acknowledge nothing more (its WAL failed a write)."""
        self.left_because = because
        self.handing_over.set()

    def leave(self, because: str) -> None:
        """Out of the cluster for good: lead nothing more, and have the node end (``serve`` exits
        with :data:`~tabletopic.config.EXIT_REJOIN` so that its supervisor starts it again)."""
        self.fenced = True
        self.left_because = because
        self.left.set()

    async def start(self, endpoints: dict[str, tuple[str, int]]) -> None:
        """Register as a new incarnation (new node epoch), start listening and the loop."""
        await self._db(self.meta.migrate)
        loop = asyncio.get_running_loop()

        def notified(kind: str) -> None:
            loop.call_soon_threadsafe(self._notified, kind)

        self._listener = threading.Thread(
            target=run_listener,
            args=(self._dsn, notified, self._stop.is_set),
            name="cluster-listen",
            daemon=True,
        )
        self._listener.start()
        self.node_epoch = await self._db(
            self.meta.register,
            self.node_id,
            self.settings.rack,
            endpoints,
            self._lease_s,
            self.wal,
            reachable_admin_url(self.settings.admin_listener, endpoints, self.settings.admin_advertised),
        )
        self._last_renewal = self._loop_seen = time.monotonic()
        log.info("broker %d joined the cluster with node epoch %d", self.node_id, self.node_epoch)
        interval = self.settings.heartbeat_ms / 1000
        self._renewals = [
            Renewal("cluster-lease", interval, self._renew_node, self._node_renewed, self._may_renew, loop),
            Renewal(
                "controller-lease",
                interval,
                self._renew_controller,
                self._controller_renewed,
                lambda: self.controller_epoch is not None and self._may_renew(),
                loop,
            ),
        ]
        for renewal in self._renewals:
            renewal.start()
        await self._refresh()
        self._tasks = [
            asyncio.create_task(self._lease_loop(), name="cluster-lease"),
            asyncio.create_task(self._main_loop(), name="cluster-main"),
        ]

    async def stop(self) -> None:
        """Leave: the lease ends now, so the controller moves what is left at once."""
        await cancel_and_wait(self._tasks)
        self._tasks = []
        for renewal in self._renewals:
            await renewal.stop(self._lease_s)
        if not self.fenced:
            try:
                await self._db(self.meta.set_state, self.node_id, self.node_epoch, STOPPED, True)
            except Exception:
                log.exception("could not deregister broker %d", self.node_id)
        self._stop.set()
        self._executor.shutdown(wait=False)

    async def drain(self, leads_nothing: Callable[[], bool]) -> bool:
        """Controlled shutdown: ask the controller to move every partition away and wait (bounded by
        ``controlled.shutdown.timeout.ms``) until ``leads_nothing()``. Returns whether it did."""
        self.draining = True
        await self._db(self.meta.set_state, self.node_id, self.node_epoch, "draining")
        deadline = time.monotonic() + self.settings.shutdown_timeout_ms / 1000
        while time.monotonic() < deadline:
            others = [
                n
                for n in self.snapshot.nodes.values()
                if n.alive and n.state == "alive" and n.node_id != self.node_id
            ]
            if not others:  # nobody to hand partitions to (the last broker, or all stopping at once)
                return leads_nothing()
            if leads_nothing() and not any(
                a.leader == self.node_id for a in self.snapshot.partitions.values()
            ):
                return True
            self._wake.set()
            await asyncio.sleep(0.05)
        return leads_nothing()

    # Reads -----------------------------------------------------------------------------------

    def leader(self, key: PartitionKey) -> Leader | None:
        """The leader to report for a partition (a few dict lookups: Metadata asks this for every
        partition, so what depends only on the snapshot is computed once per snapshot)."""
        return reported_leader(self.snapshot, key)

    def my_assignments(self) -> dict[PartitionKey, LeaderEpoch]:
        """``{partition: leader epoch}`` the controller gave this incarnation."""
        if self.fenced or self.expired:
            return {}
        return {
            key: row.leader_epoch
            for key, row in self.snapshot.partitions.items()
            if row.leader == self.node_id and row.leader_node_epoch == self.node_epoch
        }

    def my_wal_takeovers(self) -> list[WalRow]:
        """Shared WALs of gone incarnations the controller told this broker to take over."""
        if self.fenced or self.expired:
            return []
        snap = self.snapshot
        return [
            w for w in snap.wals if w.recoverer == self.node_id and snap.live.get(w.node_id) != w.node_epoch
        ]

    # Loops -----------------------------------------------------------------------------------

    def _notified(self, kind: str) -> None:
        if kind in REPLAN_KINDS or kind.startswith("topics:"):
            self._replan = True
        self._wake.set()
        for callback in self.on_notify:
            try:
                callback(kind)
            except Exception:
                log.exception("cluster notification handler failed")

    # Leases: renewed on threads of their own (see ``renewal.py``), judged here on the loop.

    def _may_renew(self) -> bool:
        """Asked on the renewal threads: not once the incarnation is over, nor while the event loop
        has not run for :data:`STUCK_LEASES` leases. A broker whose loop is stuck answers nobody,
        and must let its lease lapse so that its partitions move; one whose loop is only slow (a
        backlog of seconds while it takes partitions over) must not."""
        if self.fenced:
            return False
        stuck = time.monotonic() - self._loop_seen
        if stuck <= STUCK_LEASES * self._lease_s:
            return True
        STUCK_LOG.warning(
            "stuck", "the event loop has not run for %.1f s: broker %d no longer renews its lease", stuck,
            self.node_id,
        )  # fmt: skip
        return False

    def _renew_node(self) -> float:
        """Renew; returns when the renewal began (the database extended the lease after that)."""
        began = time.monotonic()
        self.meta.renew(self.node_id, self.node_epoch, self._lease_s, self._load_report)
        return began

    def _node_renewed(self, outcome: float | Exception) -> None:
        if self.fenced:
            return
        if isinstance(outcome, NodeFenced):
            log.error("%s: this broker stops leading anything", outcome)
            self.leave(str(outcome))
            self._wake.set()
        elif isinstance(outcome, Exception):
            log.warning("lease renewal failed: %s", outcome)
            self._check_lease()
        else:
            self._last_renewal = max(self._last_renewal, outcome)
            if self.expired:
                log.info("lease renewed again: broker %d leads what the controller gives it", self.node_id)
                self.expired = False
                self._wake.set()

    def _check_lease(self) -> None:
        """Stop leading once no renewal succeeded for a whole lease: others may lead our partitions
        now. Stream fencing already refuses our commits; reads stop too until a renewal succeeds."""
        if not self.expired and not self.fenced and time.monotonic() - self._last_renewal > self._lease_s:
            log.error("lease expired without renewal: this broker stops leading anything")
            self.expired = True
            self._wake.set()

    def _renew_controller(self) -> tuple[ControllerEpoch, bool] | None:
        """Renew the controller lease; returns the epoch renewed and whether it is still held (a
        failed renewal counts as lost, as a controller unsure of its lease must not plan)."""
        epoch = self.controller_epoch
        if epoch is None:
            return None
        try:
            return epoch, self.meta.renew_controller(self.node_id, epoch, self._lease_s)
        except Exception as exc:
            log.warning("controller lease renewal failed: %s", exc)
            return epoch, False

    def _controller_renewed(self, outcome: tuple[ControllerEpoch, bool] | Exception | None) -> None:
        if isinstance(outcome, tuple) and not outcome[1] and outcome[0] == self.controller_epoch:
            log.warning("broker %d lost the controller lease", self.node_id)
            self.controller_epoch = None

    async def _lease_loop(self) -> None:
        """On the loop, every heartbeat: show the renewal threads that the loop runs, hand them the
        load to report, and notice a lease that lapsed without a failed renewal (one that hangs)."""
        while True:
            self._loop_seen = time.monotonic()
            self._load_report = self._load()
            self._check_lease()
            await asyncio.sleep(self.settings.heartbeat_ms / 1000)

    async def _main_loop(self) -> None:
        poll = self.settings.heartbeat_ms / 4000
        while True:
            await woken(self._wake, poll)
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("cluster round failed: %s", exc)
                await asyncio.sleep(poll)

    async def _round(self) -> None:
        if self.fenced:
            self._publish(self.snapshot)
            return
        await self._refresh()
        if self.controller_epoch is None and self.snapshot.controller_id is None and not self.draining:
            epoch = await self._db(self.meta.acquire_controller, self.node_id, self.node_epoch, self._lease_s)
            if epoch is not None:
                self.controller_epoch = epoch
                self._replan = True
                log.info("broker %d is the controller (controller epoch %d)", self.node_id, epoch)
        if self.controller_epoch is not None:
            try:
                if self._plan_due(time.monotonic()):
                    await self._plan()
                await self._auto_balance()
            except NotController as exc:
                log.warning("%s", exc)
                self.controller_epoch = None

    def _membership(self) -> tuple[frozenset[tuple[int, int]], frozenset[int]]:
        """What the controller plans from besides partitions and topics: live brokers with their
        node epochs, and the draining ones."""
        snap = self.snapshot
        draining = frozenset(n.node_id for n in snap.nodes.values() if n.alive and n.state == "draining")
        return frozenset(snap.live.items()), draining

    def _plan_due(self, now: float) -> bool:
        """Whether the controller must plan a full round now (see the module docstring)."""
        if self._replan or self._planned is None or now - self._planned_at >= self.full_round_s:
            return True
        version, live, draining = self._planned
        return (self.snapshot.version, live, draining) != (version, *self._membership())

    async def _plan(self) -> None:
        """A full controller round: read every partition there is and place, move and balance."""
        assert self.controller_epoch is not None
        # Cleared before reading: a topic NOTIFY arriving meanwhile asks for one more round.
        self._replan = False
        membership = self._membership()
        before = self.snapshot
        started = time.monotonic()
        try:
            wanted = await self._db(self._wanted)
            # Partition counts are evened out only while load balancing is not in charge.
            busy = self.balancer.busy(self.snapshot)
            moves, version = await self._db(
                self.meta.reconcile,
                self.node_id,
                self.controller_epoch,
                wanted,
                0 if busy else self.settings.balance_max_moves,
                self._apart,
            )
        except BaseException:
            self._replan = True
            raise
        self._planned = (version, *membership)
        self._planned_at = started
        if moves:
            log.info("controller moved %d partitions: %s", len(moves), _describe(moves))
            await self._record(
                events.classify(
                    moves,
                    {
                        key: events.PriorRow(row.leader, row.leader_node_epoch, row.target)
                        for key in moves
                        if (row := before.partitions.get(key)) is not None
                    },
                    {int(node): int(epoch) for node, epoch in before.live.items()},
                    membership[1],
                )
            )
            # Balancing moves at most max_moves a round: plan again until a round moves nothing.
            self._replan = True
            await self._refresh()

    async def _auto_balance(self) -> None:
        """A balancing round when one is due: its moves go the way reassignments go (a target the
        next controller decision applies), unpinned so later rounds may move them again."""
        plan = self.balancer.round(self.snapshot, time.monotonic())
        if plan is None or not plan.moves:
            return
        for move in plan.moves:
            log.info("auto-balancer: %s", move.reason)
        await self._record(
            [
                events.ClusterEvent("auto-balance", m.reason, m.topic, m.partition, m.source, m.target)
                for m in plan.moves
            ]
        )
        await self._db(self.meta.request_moves, [(m.topic, m.partition, m.target) for m in plan.moves], False)
        self._wake.set()

    async def _record(self, decided: list[events.ClusterEvent]) -> None:
        """Add the round's decisions to the cluster's timeline (best effort: see
        :mod:`tabletopic.cluster.events`)."""
        try:
            await self._db(events.record, self.meta.engine, decided, self.controller_epoch)
        except Exception as exc:
            log.warning("could not add %d events to the cluster timeline: %s", len(decided), exc)

    async def _refresh(self) -> None:
        """Read what changed since the current snapshot (everything the first time) and tell the
        broker when anything did."""
        snap = await self._db(self.meta.snapshot, self.snapshot if self._read_once else None)
        self._read_once = True
        changed = not snap.same_as(self.snapshot)
        self.snapshot = snap  # also when unchanged: the loads the brokers reported are new
        if changed:
            self.leaders_version += 1
            self._publish(snap)

    def _publish(self, snap: ClusterSnapshot) -> None:
        for callback in self.on_change:
            try:
                callback(snap)
            except Exception:
                log.exception("cluster change handler failed")

    async def request_moves(self, moves: list[tuple[str, int, int | None]]) -> list[PartitionKey]:
        return await self._db(self.meta.request_moves, moves)

    async def unregister(self, node_id: NodeId, by: str) -> None:
        await self._db(self.meta.unregister, node_id, by)

    async def notify(self, kind: str) -> None:
        await self._db(self.meta.notify, kind)


def _describe(moves: Mapping[PartitionKey, int]) -> str:
    shown = [f"{t}-{p}->{n}" for (t, p), n in sorted(moves.items())[:10]]
    return ", ".join(shown) + (" …" if len(moves) > 10 else "")
