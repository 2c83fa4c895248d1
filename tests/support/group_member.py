"""A confluent-kafka member of a consumer group in a thread of its own, as the cluster tests and the
benches run one through faults, and the group's committed offsets as a probe reads them.

A member counts each value it read (a value read twice is a duplicate the caller can count), the
partitions taken from it (revoked or lost: a rebalance the caller may not want), and whether it
holds any. librdkafka's handle is one thread's: only the member's own thread calls it, so
:attr:`GroupMember.holds` is set there, not asked from outside (an ``assignment()`` from the
test's thread while the member polled has hung a test).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.support.kafka_clients import leave_and_drain

# Each group protocol's client settings as the benches run them: a classic group rebalances
# cooperatively, as a KIP-848 group (the consumer protocol) always does.
PROTOCOL_SETTINGS: dict[str, dict[str, object]] = {
    "classic": {"partition.assignment.strategy": "cooperative-sticky"},
    "consumer": {"group.protocol": "consumer"},
}


class GroupMember(threading.Thread):
    """One member: subscribes on creation, consumes with auto-commit once started, closes on
    :meth:`stop`. ``settings`` are librdkafka's, over the defaults here."""

    def __init__(
        self, bootstrap: str, topic: str, group_id: str, settings: Mapping[str, object] | None = None
    ) -> None:
        super().__init__(daemon=True, name=f"member-{group_id}")
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 500,
                "log_level": 2,
                **(settings or {}),
            }
        )
        self.consumer.subscribe([topic], on_revoke=self._taken, on_lost=self._taken)
        self._seen: Counter[bytes] = Counter()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.taken = 0  # partitions revoked or lost
        self.holds = False  # whether it holds partitions, as of its last poll
        self.read_at: list[float] = []  # when a poll returned records (time.monotonic())

    def _taken(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self.taken += len(partitions)

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                read = [bytes(m.value() or b"") for m in self.consumer.consume(500, 0.5) if m.error() is None]
                with self._lock:
                    self._seen.update(read)
                if read:
                    self.read_at.append(time.monotonic())
                self.holds = bool(self.consumer.assignment())
        finally:
            leave_and_drain(self.consumer)  # a close that finds a rebalance unserved can hang
            self.consumer.close()

    def seen(self) -> Counter[bytes]:
        """Each value read so far, with how many times."""
        with self._lock:
            return Counter(self._seen)

    def stop(self, timeout: float = 30) -> None:
        """Close the consumer (leaving the group) and wait up to ``timeout`` for the thread."""
        self._stopping.set()
        self.join(timeout)


def read_by(members: Iterable[GroupMember]) -> Counter[bytes]:
    """Each value the members read, with how many times in all."""
    total: Counter[bytes] = Counter()
    for member in members:
        total.update(member.seen())
    return total


def committed_offsets(
    bootstrap: str, group_id: str, topic: str, partitions: Iterable[int], **settings: object
) -> dict[int, int]:
    """The group's committed offset of each partition (negative where it committed none), read
    with one OffsetFetch by a probe that joins nothing."""
    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False, **settings}
    )
    try:
        asked = [TopicPartition(topic, p) for p in partitions]
        return {tp.partition: tp.offset for tp in probe.committed(asked, timeout=10)}
    finally:
        probe.close()
