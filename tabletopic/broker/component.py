"""``tabletopic serve``'s broker: the Kafka listeners on top of the node's stream store. The parts
above it get the started :class:`~tabletopic.broker.service.BrokerService` as
:attr:`BrokerComponent.service`."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.broker.cluster_role import ClusterRole
from tabletopic.broker.context import RequestContext
from tabletopic.broker.groups.cluster import GroupCluster
from tabletopic.broker.groups.coordinator import GroupCoordinator, OffsetToCommit
from tabletopic.broker.groups.settings import consumer_group_settings, group_config
from tabletopic.broker.groups.share_settings import share_group_settings
from tabletopic.broker.listeners import configured_listeners
from tabletopic.broker.metrics import BrokerMetrics
from tabletopic.broker.protocol.messages.convert import read_message
from tabletopic.broker.protocol.messages.find_coordinator import TRANSACTION_KEY, FindCoordinatorRequest
from tabletopic.broker.protocol.messages.offset_commit import OffsetFetchRequest
from tabletopic.broker.protocol.versions import MAX_VERSIONS, advertised_ranges
from tabletopic.broker.record_validation import RecordValidator
from tabletopic.broker.security import guard_rules
from tabletopic.broker.security.acls import AclService
from tabletopic.broker.security.guard import Guard
from tabletopic.broker.security.http_auth import http_authenticator
from tabletopic.broker.security.listener import ListenerSecurity, warn_unused_listener_keys
from tabletopic.broker.security.quota_guard import QuotaGuard
from tabletopic.broker.security.quota_service import QuotaService
from tabletopic.broker.security.shared_cache import SharedCache
from tabletopic.broker.security.store import SecurityStore
from tabletopic.broker.server import Dispatcher, KafkaServer
from tabletopic.broker.service import BrokerService
from tabletopic.broker.topic_config_keys import TopicConfigExtension
from tabletopic.broker.transactions.cluster import TxnCluster
from tabletopic.broker.transactions.model import TxnOffsets
from tabletopic.broker.zone_router import ZoneRouter
from tabletopic.cluster import settings as cluster_settings
from tabletopic.cluster.node import ClusterSettings
from tabletopic.cluster.zones import ZoneMap
from tabletopic.component import Started
from tabletopic.config import Config
from tabletopic.http_auth import HttpAuthenticator
from tabletopic.ids import LeaderEpoch, NodeId
from tabletopic.s3stream.component import StorageComponent
from tabletopic.s3stream.streams import StreamError

log = logging.getLogger(__name__)


@dataclass(eq=False)
class BrokerComponent:
    """The broker over ``storage``'s stream store.

    Args:
        config_extensions: topic config keys other parts of the node own (the table pipeline's
            ``automq.table.topic.*``), each with its validator.
        record_validator: checks record contents on Produce for topics that ask (schema
            validation); None: the broker never looks inside records.
    """

    name = "broker"

    config: Config
    engine: Engine
    metrics: CollectorRegistry
    storage: StorageComponent
    config_extensions: Sequence[TopicConfigExtension] = ()
    clustered: bool = False
    record_validator: RecordValidator | None = None
    _role: ClusterRole | None = field(default=None, init=False)
    _service: BrokerService | None = field(default=None, init=False)
    _server: KafkaServer | None = field(default=None, init=False)
    _groups: GroupCoordinator | None = field(default=None, init=False)
    _background: set[asyncio.Future[None]] = field(default_factory=set, init=False)
    _acls: AclService | None = field(default=None, init=False)
    _quotas: QuotaService | None = field(default=None, init=False)

    service = Started[BrokerService]("broker service")
    groups = Started[GroupCoordinator]("group coordinator")  # the consumer-group coordinator

    async def start(self) -> None:
        service = BrokerService(
            self.config,
            self.engine,
            self.storage.store,
            config_extensions=self.config_extensions,
            clustered=self.clustered,
        )
        service.metrics = BrokerMetrics(self.metrics, service.topics.partition_count)
        service.record_validator = self.record_validator
        await service.start()
        dispatcher = Dispatcher(service)
        security = await self._start_security()
        acls = AclService(self.config, security.store)
        await acls.start()
        self._acls = acls
        quotas = QuotaService(self.config, security.store)
        await quotas.start()
        self._quotas = quotas
        guard, quota_guard = Guard(acls, service, guard_rules.RULES), QuotaGuard(quotas)
        dispatcher.wrap = lambda key, handler: quota_guard.wrap(key, guard.wrap(key, handler))
        dispatcher.add_broker_apis()
        dispatcher.add({17: _unused, 36: _unused}, None, MAX_VERSIONS)  # answered by the connection
        dispatcher.add_security_apis(acls, quotas, security.store)
        server = KafkaServer(service, dispatcher, security)
        self._service, self._server = service, server
        await server.bind()
        await self._start_groups(service, dispatcher)
        if self.clustered:
            await self._join_cluster(service, [acls, quotas])
        service.api_ranges = advertised_ranges(dispatcher.max_versions)
        await server.serve()

    @property
    def role(self) -> ClusterRole | None:
        """This broker's part in the cluster (None on a single node)."""
        return self._role

    async def _join_cluster(self, service: BrokerService, shared: list[SharedCache]) -> None:
        """Register with the cluster; serve partitions and groups as the controller assigns them;
        keep the ``shared`` caches (ACLs, quotas) in step with the other brokers'."""
        groups = self.groups
        role = ClusterRole(
            service,
            self.storage.store,
            self.engine,
            ClusterSettings.from_config(self.config, NodeId(service.node_id)),
            self.config.get(cluster_settings.GROUP_PARTITIONS),
            self.config.get(cluster_settings.TXN_PARTITIONS),
        )
        groups.attach_cluster(GroupCluster(role))
        transactions = service.transactions
        transactions.attach_cluster(TxnCluster(role, role.txn_slots, service.inter_broker_client))

        def gained(slots: dict[int, LeaderEpoch]) -> None:
            task = asyncio.ensure_future(groups.slots_gained(slots))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            task.add_done_callback(_log_failure)

        def txn_gained(slots: Mapping[int, int]) -> None:
            # dict(): the transaction coordinator still takes plain ints (issue 28, item 3 types it).
            task = asyncio.ensure_future(transactions.slots_gained(dict(slots)))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

        role.on_groups_gained.append(gained)
        role.on_groups_lost.append(groups.slots_lost)
        role.on_txn_slots_gained.append(txn_gained)
        role.on_txn_slots_lost.append(transactions.slots_lost)
        for cache in shared:
            cache.on_change.append(role.follow(f"security:{cache.kind}", cache.refresh))
        await role.start()
        service.leadership = role
        service.traffic_counter = role.record_traffic
        self._role = role
        router = ZoneRouter(
            service.partition_log,
            role,
            self.storage.store.state.objects,
            self.engine,
            ZoneMap.parse(self.config.get(cluster_settings.CLIENT_ZONE_CIDRS) or ""),
            self.metrics,
        )
        await router.start()
        service.zone_router = router

    def http_authenticator(self) -> HttpAuthenticator | None:
        """What the node's HTTP services check requests with (``authentication.method``)."""
        return http_authenticator(self.config, self.engine)

    async def _start_security(self) -> ListenerSecurity:
        """The SCRAM credential store and what each listener needs (TLS context, SASL)."""
        store = SecurityStore(self.engine)
        await asyncio.to_thread(store.migrate)
        listeners = configured_listeners(self.config)
        warn_unused_listener_keys(self.config, listeners)
        return ListenerSecurity(self.config, store, listeners)

    async def _start_groups(self, service: BrokerService, dispatcher: Dispatcher) -> None:
        """Serve the consumer-group APIs; a deleted topic's committed offsets go with it."""
        endpoint = service.advertised_for(None)

        def topic_partitions(name: str) -> int | None:
            topic = service.topics.get(name)
            return topic.partition_count if topic is not None else None

        groups = GroupCoordinator(
            self.engine,
            service.node_id,
            endpoint.host,
            endpoint.port,
            topic_partitions,
            config=group_config(self.config),
            clustered=self.clustered,
            consumer_settings=consumer_group_settings(self.config),
            share_settings=share_group_settings(self.config),
        )
        groups.consumer.topics = lambda: {
            t.name: (t.topic_id, t.partition_count) for t in service.topics.all()
        }
        groups.consumer.partition_racks = functools.partial(_leader_racks, service)
        groups.share.topics = lambda: {t.name: t.partition_count for t in service.topics.all()}
        groups.share.end_offset = functools.partial(_end_offset, service)
        service.share_groups = groups.share  # ShareFetch/ShareAcknowledge read the log: broker APIs
        groups.on_consumed = groups.share.on_consumed = service.count_consumed
        await groups.start()
        self._groups = groups

        async def commit_transaction_offsets(group_id: str, offsets: Any) -> None:
            await groups.commit_transactional_offsets(
                group_id,
                [
                    OffsetToCommit(o.topic, o.partition, o.offset, o.leader_epoch, o.metadata)
                    for o in offsets.values()
                ],
            )

        def member_may_commit(commit: TxnOffsets) -> ErrorCode:
            return groups.check_transactional_commit(
                commit.group_id, commit.member_id, commit.group_instance_id, commit.generation_id
            )

        await service.transactions.set_offset_committer(commit_transaction_offsets, member_may_commit)
        service.topic_deleted_hooks.append(groups.delete_topic_offsets)
        service.topic_deleted_hooks.append(groups.share.partitions.delete_topic)

        def adapt(handlers: dict[int, Any]) -> dict[int, Any]:
            if 10 in handlers:
                handlers[10] = _coordinator_on_callers_listener(service, handlers[10])
            if 9 in handlers:
                handlers[9] = _offsets_after_transactions(service, handlers[9])
            return handlers

        dispatcher.add_group_apis(groups, adapt)

    async def stop(self) -> None:
        if self._role is not None:  # controlled shutdown: hand partitions over while still serving
            await self._role.stop(drain=True)
        if self._service is not None and self._service.zone_router is not None:
            await self._service.zone_router.stop()
        if self._server is not None:
            await self._server.stop()
        if self._groups is not None:
            await self._groups.stop()
        if self._acls is not None:
            await self._acls.stop()
        if self._quotas is not None:
            await self._quotas.stop()
        if self._service is not None:
            await self._service.stop()


def _leader_racks(service: BrokerService, topics: Mapping[str, int]) -> dict[tuple[str, int], str]:
    """The rack of each partition of ``topics``: its leader's ``broker.rack`` (none where unset)."""
    leadership = service.leadership
    racks = {b.node_id: b.rack for b in leadership.brokers(service.inter_broker_listener) if b.rack}
    if not racks:
        return {}
    found = {}
    for topic, count in topics.items():
        for partition in range(count):
            rack = racks.get(leadership.leader(topic, partition)[0])
            if rack is not None:
                found[(topic, partition)] = rack
    return found


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("loading group slots failed (taken again shortly): %s", task.exception())


def _offsets_after_transactions(service: BrokerService, offset_fetch: Any) -> Any:
    """OffsetFetch reads a group's offsets once the transactions that ended with offsets of the
    group have committed them (EndTxn is answered before that: a producer reading its group's
    offsets right after committing must still see them)."""

    async def handle(coordinator: Any, ctx: RequestContext, request: object) -> Any:
        asked = read_message(OffsetFetchRequest, request)
        await service.transactions.offsets_settled(asked.group_ids(), asked.require_stable)
        return await offset_fetch(coordinator, ctx, request)

    return handle


def _coordinator_on_callers_listener(service: BrokerService, find_coordinator: Any) -> Any:
    """FindCoordinator answers with the broker coordinating the key (in a cluster, groups are spread
    over brokers) at its endpoint on the listener the client came in on (a SASL client must not be
    sent to the PLAINTEXT port); the group coordinator itself only knows this broker's address."""

    async def handle(coordinator: Any, ctx: RequestContext, request: object) -> Any:
        fields = await find_coordinator(coordinator, ctx, request)
        if not isinstance(fields, dict):
            return fields
        leadership = service.leadership
        brokers = {b.node_id: b for b in leadership.brokers(ctx.listener)}
        asked = read_message(FindCoordinatorRequest, request)
        entries = fields.get("coordinators") or [{**fields, "key": asked.key}]
        transactional = asked.key_type == TRANSACTION_KEY
        for entry in entries:
            if entry.get("error_code") != ErrorCode.none:
                continue
            key = str(entry.get("key") or "")
            node = (
                leadership.transaction_coordinator(key)
                if transactional
                else leadership.group_coordinator(key)
            )
            found = brokers.get(node)
            if found is None:
                entry.update(error_code=ErrorCode.coordinator_not_available, node_id=-1, host="", port=-1)
            else:
                entry.update(node_id=found.node_id, host=found.host, port=found.port)
        if "coordinators" not in fields:
            for name in ("error_code", "node_id", "host", "port"):
                fields[name] = entries[0][name]
        return fields

    return handle


async def _unused(
    target: Any, ctx: RequestContext, request: object
) -> None:  # pragma: no cover - never routed
    return None


def _end_offset(service: BrokerService, topic_name: str, partition: int) -> int | None:
    """A partition's log end offset if this broker has its stream open, else None."""
    topic = service.topics.get(topic_name)
    if topic is None or not 0 <= partition < topic.partition_count:
        return None
    try:
        return service.store.stream_info(topic.streams[partition]).end_offset
    except StreamError:
        return None
