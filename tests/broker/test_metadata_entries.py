"""Metadata keeps a topic's partition entries while the leaders they name stand: during a failover
every client asks for a topic of maybe thousands of partitions several times a second, from the
brokers that are rebuilding the moved partitions' state."""

from __future__ import annotations

import uuid

from tabletopic.broker.handlers.metadata import PartitionEntries, found_topic_entry
from tabletopic.broker.protocol.metadata_encoder import SharedPartitions
from tabletopic.broker.topics import Topic
from tabletopic.broker.zone_router import ZoneRouter


class _Leaders:
    """Leads partition p on broker p % 3 at epoch ``epoch``; counts what it was asked."""

    def __init__(self) -> None:
        self.version: int | None = 1
        self.epoch = 4
        self.asked = 0

    def leader(self, topic: str, partition: int) -> tuple[int, int]:
        self.asked += 1
        return partition % 3, self.epoch

    def leaders_version(self) -> int | None:
        return self.version


TOPIC = Topic("t", uuid.uuid4(), list(range(1200)))


def test_entries_are_built_once_while_the_leaders_stand() -> None:
    leaders, kept = _Leaders(), PartitionEntries()
    first = kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    second = kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    assert leaders.asked == 1200
    assert first is second  # one shared, unchangeable tuple: SharedPartitions
    assert isinstance(first, SharedPartitions)
    assert [(e["leader_id"], e["leader_epoch"]) for e in first[:4]] == [(0, 4), (1, 4), (2, 4), (0, 4)]


def test_a_change_of_leaders_builds_them_again() -> None:
    leaders, kept = _Leaders(), PartitionEntries()
    kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    leaders.version, leaders.epoch = 2, 5
    assert {e["leader_epoch"] for e in kept.entries(leaders, TOPIC)} == {5}  # type: ignore[arg-type]
    assert leaders.asked == 2400


def test_without_a_version_nothing_is_kept() -> None:
    leaders, kept = _Leaders(), PartitionEntries()
    leaders.version = None
    kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    assert leaders.asked == 2400


def test_a_topic_grown_by_create_partitions_gets_its_new_partitions() -> None:
    leaders, kept = _Leaders(), PartitionEntries()
    small = Topic("t", TOPIC.topic_id, [1, 2])
    assert len(kept.entries(leaders, small)) == 2  # type: ignore[arg-type]
    assert len(kept.entries(leaders, Topic("t", TOPIC.topic_id, [1, 2, 3]))) == 3  # type: ignore[arg-type]


def test_the_zone_router_names_its_brokers_without_changing_the_kept_entries() -> None:
    """A client of a zone is told a broker of its zone: in a new entry, not in the one kept for
    every other client's answer."""
    router = ZoneRouter.__new__(ZoneRouter)
    router.zone_of = lambda ctx: "b"  # type: ignore[method-assign]
    router.route = lambda zone, leader, partition: 1  # type: ignore[method-assign]
    leaders, kept = _Leaders(), PartitionEntries()
    answer = found_topic_entry(TOPIC, kept.entries(leaders, TOPIC))  # type: ignore[arg-type]
    router.route_metadata(None, [answer])  # type: ignore[arg-type]
    assert {e["leader_id"] for e in answer["partitions"]} == {1}
    again = kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    assert [e["leader_id"] for e in again[:3]] == [0, 1, 2]
    assert [e["replica_nodes"] for e in again[:3]] == [[0], [1], [2]]


def test_answers_share_the_wire_form_of_the_kept_entries() -> None:
    """Packing 1,000 partitions took about a millisecond of the event loop per answer, 70 answers a
    second per broker while a killed broker's partitions moved: each version's bytes are packed
    once for as long as the entries are kept."""
    leaders, kept = _Leaders(), PartitionEntries()
    entries = kept.entries(leaders, TOPIC)  # type: ignore[arg-type]
    assert isinstance(entries, SharedPartitions)
    assert entries.wire(12) is kept.entries(leaders, TOPIC).wire(12)  # type: ignore[arg-type, attr-defined]
    leaders.version = 2
    assert kept.entries(leaders, TOPIC).wire(12) is not entries.wire(12)  # type: ignore[arg-type, attr-defined]
