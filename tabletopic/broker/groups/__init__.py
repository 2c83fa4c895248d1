"""Kafka consumer groups, classic protocol: a sans-IO membership state machine (``group.py``), its
asyncio driver with durable offsets (``coordinator.py``, ``store.py``). The Kafka APIs that reach it
have their handlers in ``broker/handlers/`` like every other API."""

from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import GroupConfig, GroupState

__all__ = ["GroupConfig", "GroupCoordinator", "GroupState"]
