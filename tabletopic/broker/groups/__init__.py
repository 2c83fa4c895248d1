"""Kafka consumer groups. Classic protocol: a sans-IO membership state machine (``group.py``), its
asyncio driver with durable offsets (``coordinator.py``, ``store.py``). KIP-848 consumer protocol:
the same shape (``consumer_group.py`` pure, ``consumer_coordinator.py`` its driver, server-side
``assignors.py``), sharing the offsets and slot checks of the classic coordinator. The Kafka APIs
that reach them have their handlers in ``broker/handlers/`` like every other API."""

from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import GroupConfig, GroupState

__all__ = ["GroupConfig", "GroupCoordinator", "GroupState"]
