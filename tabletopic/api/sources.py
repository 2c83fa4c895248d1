"""What the console reads, in one place: the node's started parts (each may be absent or not started
yet, and the console must still render) and the node's own Prometheus registry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic.broker.component import BrokerComponent
from tabletopic.component import NotStarted

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from tabletopic.broker.groups.coordinator import GroupCoordinator
    from tabletopic.broker.service import BrokerService
    from tabletopic.catalog.component import CatalogComponent
    from tabletopic.schema_registry.component import RegistryComponent
    from tabletopic.schema_registry.registry import SchemaRegistry
    from tabletopic.table.component import TableComponent
    from tabletopic.table.coordinator import TopicPipeline


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

    def broker_service(self) -> BrokerService | None:
        try:
            return self.broker.service
        except NotStarted:
            return None

    def groups(self) -> GroupCoordinator | None:
        try:
            return self.broker.groups
        except NotStarted:
            return None

    def pipelines(self) -> dict[str, TopicPipeline]:
        if self.tables is None:
            return {}
        try:
            return dict(self.tables.coordinator.pipelines)
        except NotStarted:
            return {}

    def schema_registry(self) -> SchemaRegistry | None:
        if self.registry is None:
            return None
        try:
            return self.registry.registry
        except NotStarted:
            return None

    def iceberg_catalog(self) -> Catalog | None:
        if self.catalog is None:
            return None
        try:
            return self.catalog.catalog
        except NotStarted:
            return None

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample of the node's Prometheus registry (``None`` when not exported)."""
        return self.metrics.get_sample_value(name, labels or {})
