"""Rack-aware routing in a cluster: clients are served by a broker in their own zone, so no record
byte crosses a zone between a client and a broker or between two brokers.

- A client's zone comes from Fetch's KIP-392 ``rack_id``, ``automq_az=<zone>`` in its
  ``client.id`` or the ``broker.client.zone.cidrs`` map (:mod:`tabletopic.cluster.zones`).
- Metadata answers a client whose zone it knows (client.id, CIDR) with a broker of that zone as
  the leader of every partition, so its producer and consumer talk only to that broker.
- Fetch: any broker serves any partition's committed data from object storage to clients of its
  own zone (``S3StreamStore.read_snapshot``); the leader answers a KIP-392 consumer of another zone
  with ``preferred_read_replica`` naming a broker of the consumer's zone.
- Produce to a broker that does not lead the partition, from a client of that broker's zone, is
  handed over to the leader through object storage (:mod:`tabletopic.cluster.handoff`).
- ``tabletopic_cross_zone_bytes_total`` counts record bytes this broker received from or sent to
  clients of another zone; with rack-aware clients it stays 0 (brokers never exchange record bytes
  over sockets at all: hand-overs go through object storage).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.engine import Engine

from tabletopic.broker.context import RequestContext
from tabletopic.broker.leadership import ClusterMember
from tabletopic.broker.partition_log import AppendResult, PartitionLog
from tabletopic.broker.protocol.responses import MetadataResponsePartition, MetadataResponseTopic
from tabletopic.cluster.controller import PartitionKey
from tabletopic.cluster.handoff import Handoffs, listen
from tabletopic.cluster.zones import ZoneMap, client_zone, pick_broker_in_zone
from tabletopic.s3stream.objectstore import AsyncObjectStore
from tabletopic.tasks import cancel_and_wait, woken

log = logging.getLogger(__name__)
T = TypeVar("T")

HANDOFF_TIMEOUT_S = 30.0


class ZoneRouter:
    """Routing of one cluster broker.

    Args:
        log: where handed-over data is appended (the leader side of a hand-over).
        role: this broker's place in the cluster.
        objects: the object store hand-over data travels through.
    """

    def __init__(
        self,
        log: PartitionLog,
        role: ClusterMember,
        objects: AsyncObjectStore,
        engine: Engine,
        zone_map: ZoneMap,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        self.partition_log = log
        self.role = role
        self.objects = objects
        self.zone_map = zone_map
        self.handoffs = Handoffs(engine)
        self.cross_zone_bytes = Counter(
            "tabletopic_cross_zone_bytes",
            "Record bytes this broker received from (in) or sent to (out) clients of another zone",
            ["direction"],
            registry=metrics,
        )
        self.routed_bytes = Counter(
            "tabletopic_zone_routed_bytes",
            "Record bytes served for clients of this broker's zone for partitions led elsewhere: "
            "produce handed over through object storage (handoff), fetches read from it (read)",
            ["path"],
            registry=metrics,
        )
        self._dsn = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="zone-router")
        self._locks: dict[PartitionKey, asyncio.Lock] = {}
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}  # stored answers
        self._submitted = asyncio.Event()
        self._done = asyncio.Event()
        self._stop = threading.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # Life cycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._db(self.handoffs.migrate)
        loop = asyncio.get_running_loop()

        def notified(kind: str) -> None:
            loop.call_soon_threadsafe(self._notified, kind)

        threading.Thread(
            target=listen, args=(self._dsn, notified, self._stop.is_set), name="handoff-listen", daemon=True
        ).start()
        self._tasks = [
            asyncio.create_task(self._serve_loop(), name="handoff-serve"),
            asyncio.create_task(self._collect_loop(), name="handoff-collect"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._stop.set()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("broker stopping"))
        self._executor.shutdown(wait=False)

    def _notified(self, kind: str) -> None:
        if kind in ("submitted", "reconnected"):
            self._submitted.set()
        if kind in ("done", "reconnected"):
            self._done.set()

    # Routing decisions -----------------------------------------------------------------------

    @property
    def rack(self) -> str | None:
        return self.role.node.settings.rack

    def zone_of(self, ctx: RequestContext, rack_id: str | None = None) -> str | None:
        return client_zone(
            rack_id=rack_id, client_id=ctx.client_id, address=ctx.client_host, zone_map=self.zone_map
        )

    def _racks(self) -> list[tuple[int, str | None]]:
        nodes = self.role.node.snapshot.nodes.values()
        return [(n.node_id, n.rack) for n in nodes if n.alive and n.state == "alive"]

    def route(self, zone: str | None, leader: int, partition: int) -> int:
        """The broker a client of ``zone`` should use for a partition led by ``leader``."""
        return pick_broker_in_zone(zone, leader, self._racks(), key=partition)

    def serves_here(self, zone: str | None) -> bool:
        """Whether this broker serves a client of ``zone`` partitions it does not lead."""
        return zone is not None and zone == self.rack

    def count(self, zone: str | None, nbytes: int, direction: str) -> None:
        if nbytes and zone is not None and self.rack is not None and zone != self.rack:
            self.cross_zone_bytes.labels(direction).inc(nbytes)

    def route_metadata(self, ctx: RequestContext, topics: Sequence[MetadataResponseTopic]) -> None:
        """Name a broker of the client's zone as every partition's leader (client.id or CIDR zone;
        Metadata requests carry no rack)."""
        zone = self.zone_of(ctx)
        if zone is None:
            return
        for topic in topics:
            topic["partitions"] = [self._routed(zone, entry) for entry in topic.get("partitions") or []]

    def _routed(self, zone: str, entry: MetadataResponsePartition) -> MetadataResponsePartition:
        """The entry naming the broker of ``zone``: a new one, never a change to ``entry``, which
        Metadata shares between answers."""
        node = self.route(zone, entry["leader_id"], entry["partition_index"])
        if node == entry["leader_id"]:
            return entry
        return {**entry, "leader_id": node, "replica_nodes": [node], "isr_nodes": [node]}

    # Produce hand-over: proxy side -----------------------------------------------------------

    async def handoff(self, topic: str, partition: int, records: bytes) -> AppendResult:
        """Hand one partition's Produce data to its leader through object storage and return the
        leader's append result."""
        key = f"handoff/{self.role.node.node_id}/{uuid.uuid4().hex}"
        lock = self._locks.setdefault((topic, partition), asyncio.Lock())
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        try:
            async with lock:  # one at a time per partition: the leader sees them in order
                await self.objects.put(key, records)
                handoff_id = await self._db(self.handoffs.submit, topic, partition, key, len(records))
                self._waiting[handoff_id] = future
            try:
                answer = await asyncio.wait_for(asyncio.shield(future), HANDOFF_TIMEOUT_S)
            except TimeoutError:
                await self._db(self.handoffs.abandon, handoff_id)
                return AppendResult.failed(
                    ErrorCode.request_timed_out, "the leader did not take the data in time"
                )
            finally:
                self._waiting.pop(handoff_id, None)
        except Exception as exc:
            log.warning("hand-over of %s-%d failed: %s", topic, partition, exc)
            return AppendResult.failed(ErrorCode.kafka_storage_error, f"hand-over failed: {exc}")
        finally:
            try:
                await self.objects.delete([key])
            except Exception:
                log.debug("could not delete hand-over object %s", key, exc_info=True)
        result = AppendResult.from_response(answer)
        if result.error_code is ErrorCode.none:
            self.routed_bytes.labels("handoff").inc(len(records))
        return result

    async def _collect_loop(self) -> None:
        while True:
            await woken(self._done, 0.2)
            if not self._waiting:
                continue
            try:
                results = await self._db(self.handoffs.results, list(self._waiting))
            except Exception as exc:
                log.warning("reading hand-over results failed: %s", exc)
                continue
            for handoff_id, answer in results.items():
                future = self._waiting.get(handoff_id)
                if future is not None and not future.done():
                    future.set_result(answer)

    # Produce hand-over: leader side ----------------------------------------------------------

    async def _serve_loop(self) -> None:
        node_id = self.role.node.node_id
        while True:
            await woken(self._submitted, 0.5)
            try:
                claimed = await self._db(self.handoffs.claim, node_id, self.role.leads)
            except Exception as exc:
                log.warning("claiming hand-overs failed: %s", exc)
                continue
            for item in claimed:
                try:
                    data = await self.objects.get(item.object_key)
                    result = await self.partition_log.append(item.topic, item.partition, data)
                except Exception as exc:
                    log.warning(
                        "hand-over %d to %s-%d failed: %s", item.handoff_id, item.topic, item.partition, exc
                    )
                    result = AppendResult.failed(ErrorCode.kafka_storage_error, str(exc))
                # Stored as JSON, the shape a Produce partition response has (the code as a number).
                answer = {**result.response(item.partition), "error_code": int(result.error_code)}
                try:
                    await self._db(self.handoffs.complete, item.handoff_id, answer)
                except Exception as exc:
                    log.warning("recording hand-over %d failed: %s", item.handoff_id, exc)
