"""Kafka consumer groups. Classic protocol: a sans-IO membership state machine (``group.py``), its
asyncio driver with durable offsets (``coordinator.py``, ``store.py``). KIP-848 consumer protocol:
the same shape (``consumer_group.py`` pure, ``consumer_coordinator.py`` its driver, server-side
``assignors.py``), sharing the offsets and slot checks of the classic coordinator. The Kafka APIs
that reach them have their handlers in ``broker/handlers/`` like every other API."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tabletopic.broker.groups.coordinator import GroupCoordinator
    from tabletopic.broker.groups.model import GroupConfig, GroupState

# Re-exports loaded on first use: importing this package's settings module (every command loads
# every key) must not pull in the coordinator, its database and Kafka codec.
_EXPORTS = {
    "GroupCoordinator": "tabletopic.broker.groups.coordinator",
    "GroupConfig": "tabletopic.broker.groups.model",
    "GroupState": "tabletopic.broker.groups.model",
}

__all__ = ["GroupConfig", "GroupCoordinator", "GroupState"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
