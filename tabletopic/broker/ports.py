"""What the broker's lower layers see of the broker: narrow Protocols that
:class:`~tabletopic.broker.service.BrokerService` satisfies without naming them.

The partition log, retention, the log cleaner, the zone router and the transaction coordinator
sit below the service (it builds them), so they must not import it, not even for a type: each
takes the few things it reads through one of these views. Every member is read when it is used,
not copied at construction, because the service swaps some of them after start (in a cluster the
leadership becomes the cluster role).
"""

from __future__ import annotations

from typing import Any, Protocol

from tabletopic.broker.leadership import Leadership
from tabletopic.broker.topics import Topic, TopicRegistry
from tabletopic.s3stream.streams import StreamStore


class TopicConfigs(Protocol):
    """The broker's topics with their effective configs (explicit, else the broker's default)."""

    @property
    def topics(self) -> TopicRegistry: ...

    def topic_config(self, topic: Topic, key: str) -> str:
        """A topic config's effective value."""
        ...

    def broker_config(self, key: str) -> Any:
        """A broker config's value (dynamic, else the node's configuration)."""
        ...


class PartitionHost(TopicConfigs, Protocol):
    """What a task over the partitions this broker leads reads: topics, leadership and storage
    (retention, the log cleaner)."""

    @property
    def leadership(self) -> Leadership: ...

    @property
    def store(self) -> StreamStore: ...


class OpenTransactions(Protocol):
    """The per-partition index of open transactions (the last stable offset stops at them)."""

    def appended(self, stream_id: int, producer_id: int, base_offset: int) -> None:
        """A transactional batch of ``producer_id`` was given ``base_offset``: its transaction is
        open on the stream from there until its marker."""
        ...

    def last_stable_offset(self, stream_id: int, high_watermark: int) -> int:
        """The first offset of the oldest open transaction, else the high watermark."""
        ...
