"""The broker's state and services in one object: what request handlers work on, and what the rest
of the node uses through its assembly (topic list and configs, partition -> stream id, high
watermarks, creating and altering topics programmatically).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker import settings
from tabletopic.broker.context import SecurityProtocol
from tabletopic.broker.fetch_sessions import FetchSessionCache
from tabletopic.broker.groups.share_coordinator import ShareGroups
from tabletopic.broker.leadership import BrokerEndpoint, Leadership, SingleNode
from tabletopic.broker.listeners import Endpoint
from tabletopic.broker.log_cleaner import LogCleaner
from tabletopic.broker.metrics import BrokerMetrics
from tabletopic.broker.partition_log import PartitionLog
from tabletopic.broker.producers import ProducerStates
from tabletopic.broker.record_validation import RecordValidator
from tabletopic.broker.retention import RetentionTask
from tabletopic.broker.security.inter_broker import InterBrokerClient
from tabletopic.broker.topic_config_keys import TOPIC_CONFIG_KEYS, TopicConfigExtension
from tabletopic.broker.topics import Topic, TopicError, TopicRegistry
from tabletopic.broker.transactions.coordinator import TransactionCoordinator
from tabletopic.broker.zone_router import ZoneRouter
from tabletopic.cluster.settings import RACK
from tabletopic.config import Config
from tabletopic.log_limit import RateLimitedLog
from tabletopic.s3stream.streams import StreamError, StreamStore
from tabletopic.tasks import cancel_and_wait

log = logging.getLogger(__name__)
# A snapshot fails every interval while its cause lasts (a full disk under the metadata database):
# one traceback a minute, not one every few seconds.
SNAPSHOT_LOG = RateLimitedLog(log, interval_s=60.0)

PRODUCER_ID_BLOCK = 1000


class BrokerService:
    """Topics, producer state and the stream store of one broker node."""

    def __init__(
        self,
        config: Config,
        engine: Engine,
        store: StreamStore,
        metrics: BrokerMetrics | None = None,
        config_extensions: Sequence[TopicConfigExtension] = (),
        clustered: bool = False,
    ) -> None:
        self.config = config
        # Cluster mode: partitions are served only once leadership opened them (ClusterRole).
        self.clustered = clustered
        self.store = store
        self.node_id: int = config.get(settings.BROKER_ID)
        self.topics = TopicRegistry(engine, store, config_extensions)
        self.producers = ProducerStates(engine, store)
        self.metrics = metrics
        self.cluster_id = ""
        # Where clients are told to connect, by listener name; set once the server is bound.
        self.advertised: dict[str, Endpoint] = {}
        # The listener the node's own clients use (``inter.broker.listener.name``); set with it.
        self.inter_broker_listener = str(SecurityProtocol.PLAINTEXT)
        # How the broker itself connects and logs in there (TLS, SASL credentials); set with it.
        self.inter_broker_client = InterBrokerClient(self.inter_broker_listener, self.inter_broker_listener)
        # (api_key, min, max) served, for ApiVersions; set by the server.
        self.api_ranges: list[tuple[int, int, int]] = []
        self.dynamic_configs: dict[str, str] = {}
        self._next_producer_id = 0
        self._producer_id_limit = 0
        self._producer_id_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self.transactions = TransactionCoordinator(self, engine)
        # Appends to the partitions (Produce, produce handed over by the zone router).
        self.partition_log = PartitionLog(self)
        self.retention = RetentionTask(self)
        self.log_cleaner = LogCleaner(self, self.transactions.partitions)
        self.fetch_sessions = FetchSessionCache(config.get(settings.FETCH_SESSION_SLOTS))
        # Called with the topic name after a topic is deleted (the group coordinator forgets the
        # topic's committed offsets there).
        self.topic_deleted_hooks: list[Callable[[str], Awaitable[None]]] = []
        # Who leads what; replaced by the cluster role in cluster mode.
        self.leadership: Leadership = SingleNode(self.node_id, self.endpoint_on)
        # Per-partition traffic for balancing and the console's cluster charts (set in cluster mode):
        # (topic, partition, bytes in, bytes out, records in, records consumed as groups commit).
        self.traffic_counter: Callable[[str, int, int, int, int, int], None] | None = None
        # Rack-aware routing (cluster mode): zones of clients, same-zone brokers, hand-overs.
        self.zone_router: ZoneRouter | None = None
        # Record contents checked on Produce for topics that ask (schema validation), if the node has one.
        self.record_validator: RecordValidator | None = None
        # KIP-932 share groups (the group coordinator's), for ShareFetch/ShareAcknowledge; set at start.
        self.share_groups: ShareGroups | None = None

    # --- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        await self.topics.load()
        configured = self.config.get(settings.CLUSTER_ID)
        stored = await self.topics.state_value("cluster.id", configured or _new_cluster_id())
        self.cluster_id = configured or stored or _new_cluster_id()
        for name, value in (await self.topics.state_items("config.")).items():
            self.dynamic_configs[name] = value
        if not self.clustered:  # a cluster broker recovers the partitions it comes to lead
            streams = [s for topic in self.topics.all() for s in topic.streams]
            await self.producers.recover(streams)
        await self.transactions.start()  # finishes transactions a crash interrupted, before serving
        self._tasks = [
            asyncio.create_task(self._snapshot_loop(), name="broker-producer-snapshots"),
            asyncio.create_task(self.retention.run(), name="broker-retention"),
            asyncio.create_task(self.log_cleaner.run(), name="broker-log-cleaner"),
        ]

    async def stop(self) -> None:
        await self.transactions.stop()
        await cancel_and_wait(self._tasks)
        self._tasks = []
        try:
            await self.producers.snapshot()
        except Exception:
            log.exception("final producer state snapshot failed")
        self.inter_broker_client.close()

    async def _snapshot_loop(self) -> None:
        interval = self.config.get(settings.PRODUCER_STATE_SNAPSHOT_INTERVAL_MS) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.producers.expire(self.broker_config(settings.PRODUCER_ID_EXPIRATION_MS.name) / 1000)
                await self.producers.snapshot()
            except Exception:
                SNAPSHOT_LOG.error(
                    "snapshot", "producer state snapshot failed; retrying every interval", exc_info=True
                )

    # What moved on each partition, for the cluster role's lease report (a no-op on a single node):
    # appended by Produce, read by Fetch, committed past by the groups this broker coordinates.
    def count_append(self, topic: str, partition: int, size: int, records: int) -> None:
        if self.traffic_counter is not None:
            self.traffic_counter(topic, partition, size, 0, records, 0)

    def count_read(self, topic: str, partition: int, size: int) -> None:
        if self.traffic_counter is not None:
            self.traffic_counter(topic, partition, 0, size, 0, 0)

    def count_consumed(self, topic: str, partition: int, records: int) -> None:
        if self.traffic_counter is not None:
            self.traffic_counter(topic, partition, 0, 0, 0, records)

    # --- configuration ------------------------------------------------------------------------
    def broker_config(self, key: str) -> Any:
        if key in self.dynamic_configs:
            return Config.lookup(key).parse(self.dynamic_configs[key])  # type: ignore[union-attr]
        return self.config.get(key)

    def is_static_broker_config(self, key: str) -> bool:
        """Whether the node's configuration (file, environment, flags) sets ``key`` explicitly."""
        return key in getattr(self.config, "_values", {})

    async def set_dynamic_configs(self, values: Mapping[str, str | None], replace: bool = False) -> None:
        """Set broker configs at runtime (persisted; None removes a key). ``replace`` drops every
        dynamic key not given (AlterConfigs semantics)."""
        updated = {} if replace else dict(self.dynamic_configs)
        for key, value in values.items():
            if value is None:
                updated.pop(key, None)
            else:
                updated[key] = value
        await self.topics.replace_state_items("config.", updated)
        self.dynamic_configs = updated

    def endpoint_on(self, listener: str) -> BrokerEndpoint:
        """This broker's advertised endpoint on ``listener`` (a listener name), as Metadata lists
        brokers."""
        endpoint = self.advertised.get(listener) or self.advertised_for(None)
        return BrokerEndpoint(self.node_id, endpoint.host, endpoint.port, self.config.get(RACK) or None)

    def advertised_for(self, ctx: Any) -> Endpoint:
        """The advertised endpoint of the listener ``ctx`` came in on; without a request context,
        that of the inter-broker listener (what the node's own clients connect to)."""
        listener = getattr(ctx, "listener", None) or self.inter_broker_listener
        endpoint = self.advertised.get(listener) or self.advertised.get(self.inter_broker_listener)
        endpoint = endpoint or next(iter(self.advertised.values()), None)
        return endpoint or Endpoint(SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)

    def own_client_config(self) -> dict[str, str]:
        """librdkafka settings of a client that logs in to this broker's inter-broker listener as
        the broker (the table workers, the console's browser and views): routed like any client."""
        endpoint = self.advertised_for(None)
        return {
            "bootstrap.servers": endpoint.address,
            **self.inter_broker_client.librdkafka(),
        }

    def topic_config(self, topic: Topic, key: str) -> str:
        """A topic config's effective value: explicit, else the broker default, else Kafka's."""
        if key in topic.configs:
            return topic.configs[key]
        definition = TOPIC_CONFIG_KEYS.get(key)
        if definition is None:
            return ""
        if definition.broker_default is not None:
            value = self.broker_config(definition.broker_default)
            if isinstance(value, list):
                return ",".join(str(v) for v in value)
            if isinstance(value, bool):
                return str(value).lower()
            return definition.default if value is None else str(value)
        return definition.default

    def effective_topic_configs(self, topic: Topic) -> dict[str, str]:
        result = {key: self.topic_config(topic, key) for key in TOPIC_CONFIG_KEYS}
        result.update(topic.configs)
        return result

    # --- producer ids ---------------------------------------------------------------------------
    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, from blocks reserved in the metadata DB."""
        async with self._producer_id_lock:
            if self._next_producer_id >= self._producer_id_limit:
                first = await self.topics.allocate_block("next.producer.id", PRODUCER_ID_BLOCK)
                self._next_producer_id, self._producer_id_limit = first, first + PRODUCER_ID_BLOCK
            producer_id = self._next_producer_id
            self._next_producer_id += 1
            return producer_id

    # --- what other subsystems use --------------------------------------------------------------
    def list_topics(self) -> list[str]:
        return sorted(t.name for t in self.topics.all())

    def topic_configs(self, name: str) -> dict[str, str]:
        topic = self._topic(name)
        return self.effective_topic_configs(topic)

    def stream_id(self, name: str, partition: int) -> int:
        topic = self._topic(name)
        if not 0 <= partition < topic.partition_count:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"{name} has no partition {partition}")
        return topic.streams[partition]

    def high_watermark(self, name: str, partition: int) -> int:
        return self.store.stream_info(self.stream_id(name, partition)).end_offset

    def log_start_offset(self, name: str, partition: int) -> int:
        return self.store.stream_info(self.stream_id(name, partition)).start_offset

    async def create_topic(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None
    ) -> Topic:
        count = partitions if partitions and partitions > 0 else self.broker_config("num.partitions")
        return await self.topics.create(name, count, configs)

    async def delete_topic(self, name: str) -> None:
        topic = await self.topics.delete(name)
        for stream_id in topic.streams:
            self.producers.forget_stream(stream_id)
        for hook in self.topic_deleted_hooks:
            try:
                await hook(name)
            except Exception:
                log.exception("cleaning up after the deletion of topic %s failed", name)

    async def alter_topic_configs(
        self, name: str, set_configs: Mapping[str, str], delete: tuple[str, ...] = ()
    ) -> Topic:
        """Set and remove explicit configs of a topic (others stay as they are)."""
        topic = self._topic(name)
        merged = {k: v for k, v in topic.configs.items() if k not in delete}
        merged.update(set_configs)
        return await self.topics.replace_configs(name, merged)

    def _topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name} does not exist")
        return topic

    def partition_offsets(self, topic: Topic) -> list[tuple[int, int]]:
        """``(log start, high watermark)`` of each partition."""
        result = []
        for stream_id in topic.streams:
            try:
                info = self.store.stream_info(stream_id)
                result.append((info.start_offset, info.end_offset))
            except StreamError:
                result.append((0, 0))
        return result


def _new_cluster_id() -> str:
    return uuid.uuid4().hex[:22]


def now_ms() -> int:
    return int(time.time() * 1000)
