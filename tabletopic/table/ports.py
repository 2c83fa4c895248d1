"""What the table pipeline needs from the broker, in the pipeline's own terms.

The table package owns this port and the broker knows nothing of it: the node's assembly
(:mod:`tabletopic.platform`) adapts the broker's topic registry to :class:`TopicDirectory`, so the
broker never imports the table pipeline and the pipeline can be driven by a fake in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What the pipeline needs to know of one partition the local broker leads."""

    partition: int
    stream_id: int


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: str
    configs: Mapping[str, str]
    partitions: tuple[PartitionView, ...]
    # In a cluster, the leader epoch of partition 0 (whose leader runs the topic's coordinator):
    # the claim on the coordinator lease. Always 0 on a single node.
    coordinator_claim: int = 0


class TopicDirectory(Protocol):
    """The broker as seen by the table pipeline (adapted from the broker at assembly)."""

    def table_topics(self) -> list[TopicView]:
        """Topics with ``automq.table.topic.enable=true`` whose partitions this broker leads."""

    def topic(self, name: str) -> TopicView | None: ...


@runtime_checkable
class TransactionView(Protocol):
    """The broker's transactions as the pipeline needs them: ingest only committed data, for every
    partition of a topic wherever it is led (in a cluster the coordinator runs on the leader of
    partition 0 and the other partitions' open transactions are known only to their leaders)."""

    async def last_stable_offsets(
        self, topic: TopicView, high_watermarks: Mapping[int, int]
    ) -> dict[int, int]:
        """Each partition's last stable offset (the first offset of its oldest open transaction,
        else its high watermark), at most ``high_watermarks[partition]``. A partition left out has
        no known last stable offset this time (its leader could not be asked): it is not ingested.
        """

    async def aborted_transactions(
        self, topic: TopicView, ranges: Mapping[int, tuple[int, int]]
    ) -> dict[int, list[tuple[int, int, int]]]:
        """For each partition's ``[start, end)``: ``(producer id, first offset, marker offset)`` of
        the aborted transactions overlapping it; the marker may lie past ``end`` (in a later
        slice)."""

    async def upload_on_leaders(self, topic: TopicView) -> None:
        """Ask the leaders of the partitions led elsewhere to upload what they acknowledged, and
        wait (bounded) for them: on a shared WAL it stays on the leader's disk until its next
        upload, and a reader on another broker sees only what was uploaded."""


class LocalBroker(TopicDirectory, Protocol):
    """The node's own broker, as the table component needs it beyond the topic directory."""

    @property
    def node_id(self) -> int: ...

    def client_config(self) -> dict[str, str]:
        """librdkafka settings of the node's own clients (the dead-letter producer): its
        inter-broker listener's address, security protocol and credentials."""


# A Spark session for jobs and maintenance, started on first call (the runner's session).
SparkProvider = Callable[[], Any]
