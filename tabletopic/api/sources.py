"""What the console reads, in one place: the node's started parts (each may be absent or not started
yet, and the console must still render) and the node's own Prometheus registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.broker.component import BrokerComponent
from tabletopic.component import NotStarted

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from tabletopic.api.cluster_tables import TablePeers
    from tabletopic.broker.groups.coordinator import GroupCoordinator
    from tabletopic.broker.service import BrokerService
    from tabletopic.catalog.component import CatalogComponent
    from tabletopic.cluster.db import ClusterSnapshot
    from tabletopic.schema_registry.component import RegistryComponent
    from tabletopic.schema_registry.registry import SchemaRegistry
    from tabletopic.table.component import TableComponent
    from tabletopic.table.coordinator import TopicPipeline


T = TypeVar("T")


def _if_started(read: Callable[[], T], missing: T) -> T:
    """What ``read`` answers, or ``missing`` while the part it reads is not started: the console
    renders during start-up and shutdown too."""
    try:
        return read()
    except NotStarted:
        return missing


@dataclass
class ConsoleSources:
    """The parts of a node the console shows. Every accessor answers ``None`` (or empty) for a part
    that is missing or not started, so a page renders during start-up and shutdown too."""

    metrics: CollectorRegistry
    broker: BrokerComponent
    engine: Engine | None = None
    tables: TableComponent | None = None
    registry: RegistryComponent | None = None
    catalog: CatalogComponent | None = None
    # The other brokers' table coordinators (a cluster's table topics run on several brokers).
    peers: TablePeers | None = None

    def broker_service(self) -> BrokerService | None:
        return _if_started(lambda: self.broker.service, None)

    def cluster_snapshot(self) -> ClusterSnapshot | None:
        """What this broker last read of the cluster (kept in memory, refreshed as the database
        changes); None on a single node."""
        role = self.broker.role
        return None if role is None else role.node.snapshot

    def groups(self) -> GroupCoordinator | None:
        return _if_started(lambda: self.broker.groups, None)

    def pipelines(self) -> dict[str, TopicPipeline]:
        tables = self.tables
        return {} if tables is None else _if_started(lambda: dict(tables.coordinator.pipelines), {})

    def schema_registry(self) -> SchemaRegistry | None:
        registry = self.registry
        return None if registry is None else _if_started(lambda: registry.registry, None)

    def iceberg_catalog(self) -> Catalog | None:
        catalog = self.catalog
        return None if catalog is None else _if_started(lambda: catalog.catalog, None)

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample of the node's Prometheus registry (``None`` when not exported)."""
        return self.metrics.get_sample_value(name, labels or {})
