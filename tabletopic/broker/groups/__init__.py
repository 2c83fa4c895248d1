"""Kafka consumer groups. Classic protocol: a sans-IO membership state machine (``group.py``), its
asyncio driver with durable offsets (``coordinator.py``, ``store.py``). KIP-848 consumer protocol:
the same shape (``consumer_group.py`` pure, ``consumer_coordinator.py`` its driver, server-side
``assignors.py``), sharing the offsets and slot checks of the classic coordinator. The Kafka APIs
that reach them have their handlers in ``broker/handlers/`` like every other API."""

from typing import TYPE_CHECKING

from tabletopic.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tabletopic.broker.groups.coordinator import GroupCoordinator
    from tabletopic.broker.groups.model import GroupConfig, GroupState

# Re-exports loaded on first use (see tabletopic.lazy_exports): importing this package's settings
# module must not pull in the coordinator, its database and Kafka codec.
_EXPORTS = {
    "GroupCoordinator": "tabletopic.broker.groups.coordinator",
    "GroupConfig": "tabletopic.broker.groups.model",
    "GroupState": "tabletopic.broker.groups.model",
}

__all__ = ["GroupConfig", "GroupCoordinator", "GroupState"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
