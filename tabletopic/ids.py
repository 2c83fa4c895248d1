"""Distinct types for the integers that identify and order ownership, so mypy refuses one where
another is meant.

Several calls take three or four of these side by side (a leadership check takes a node id, that
node's broker epoch and the partition's leader epoch; a stream is opened with its id, an epoch and
an owner node id): as bare ints a swapped pair type-checks and fails only as a wrong fencing
decision at run time. ``NewType`` costs nothing at run time; wrap a value once where it enters
(configuration, a database row, a request), never to silence a mismatch.
"""

from __future__ import annotations

from typing import NewType

StreamId = NewType("StreamId", int)
"""An s3stream stream (one per partition, Kafka's internal topics included)."""

NodeId = NewType("NodeId", int)
"""A broker, Kafka's ``node.id`` / ``broker.id``."""

BrokerEpoch = NewType("BrokerEpoch", int)
"""One incarnation of a broker id's registration: a restarted broker registers with a higher one,
which fences its earlier incarnation (Kafka's broker epoch, KIP-380)."""

LeaderEpoch = NewType("LeaderEpoch", int)
"""A partition's leadership generation: raised at every leader change; the stream is opened with it
so a deposed leader's appends are fenced (KIP-101/KIP-320)."""

ControllerEpoch = NewType("ControllerEpoch", int)
"""The controller lease's generation: a controller's decisions are applied only under its epoch."""

ProducerEpoch = NewType("ProducerEpoch", int)
"""A transactional or idempotent producer id's generation (InitProducerId bumps it), which fences
zombie producers of the same id (KIP-98)."""
