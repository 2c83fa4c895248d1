"""Kafka consumer groups. Classic protocol: a sans-IO membership state machine (``group.py``), its
asyncio driver with durable offsets (``coordinator.py``, ``store.py``). KIP-848 consumer protocol:
the same shape (``consumer_group.py`` pure, ``consumer_coordinator.py`` its driver, server-side
``assignors.py``), sharing the offsets and slot checks of the classic coordinator. The Kafka APIs
that reach them have their handlers in ``broker/handlers/`` like every other API.

The package re-exports nothing: a name is imported from the module that defines it, so importing
the package's settings module does not pull in the coordinator, its database and Kafka codec."""
