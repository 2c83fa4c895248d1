"""Assembles one tabletopic node: every subsystem is a :class:`Component` started in order on one
event loop and stopped in reverse order.

Components find each other through :attr:`Platform.services` (for example the broker registers
itself as ``"broker"`` and the table workers look it up), so no subsystem imports another's
start-up code.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from sqlalchemy.engine import Engine

from tabletopic import database, settings
from tabletopic.config import Config

log = logging.getLogger(__name__)

# Start order matters: storage before the broker, registry and catalog before the table pipeline,
# the admin API last so /health answers only when everything else is up.
COMPONENT_FACTORIES: tuple[str, ...] = (
    "tabletopic.s3stream.component:StorageComponent",
    "tabletopic.broker.component:BrokerComponent",
    "tabletopic.schema_registry.component:RegistryComponent",
    "tabletopic.catalog.component:CatalogComponent",
    "tabletopic.table.component:TableComponent",
    "tabletopic.admin.app:AdminApiComponent",
)


class Component(Protocol):
    name: str

    async def start(self, platform: Platform) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class Platform:
    config: Config
    engine: Engine
    metrics: CollectorRegistry
    services: dict[str, Any] = field(default_factory=dict)
    components: list[Component] = field(default_factory=list)

    @property
    def data_dir(self) -> Path:
        return self.config.data_dir

    @classmethod
    def create(cls, config: Config) -> Platform:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        url = config.get(settings.METADATA_URL) or database.default_url(config.data_dir)
        return cls(config=config, engine=database.create_engine(url), metrics=CollectorRegistry())

    async def start(self, factories: tuple[str, ...] = COMPONENT_FACTORIES) -> None:
        for path in factories:
            module_name, _, class_name = path.partition(":")
            component: Component = getattr(importlib.import_module(module_name), class_name)()
            log.info("starting %s", component.name)
            await component.start(self)
            self.components.append(component)

    async def stop(self) -> None:
        while self.components:
            component = self.components.pop()
            log.info("stopping %s", component.name)
            try:
                await component.stop()
            except Exception:
                log.exception("error while stopping %s", component.name)
        self.engine.dispose()


async def serve(config: Config, started: asyncio.Event | None = None) -> None:
    """Run a node until SIGINT/SIGTERM."""
    platform = Platform.create(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await platform.start()
        log.info("tabletopic is up (data dir %s)", platform.data_dir)
        if started is not None:
            started.set()
        await stop.wait()
        log.info("shutting down")
    finally:
        await platform.stop()
