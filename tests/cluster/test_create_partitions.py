"""CreatePartitions in a cluster: the answering broker shows the new count at once, every partition
reports its leader as its only replica and ISR member, and an explicit assignment (which the
controller could not honour) is refused with INVALID_REPLICA_ASSIGNMENT."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed
from tests.support.kafka_clients import create_topic
from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, roundtrip

pytestmark = CLUSTER_TEST_MARKS


def _grow(
    cluster: LocalCluster, node: int, topic: str, count: int, assignments: list[list[int]] | None
) -> object:
    assigned = None if assignments is None else [{"broker_ids": a} for a in assignments]
    wanted = {"name": topic, "count": count, "assignments": assigned}
    sock = connect(cluster.brokers[node].bootstrap)
    try:
        answer = roundtrip(sock, request(37, 3, timeout=10_000, validate_only=False, topics=[wanted]))
    finally:
        sock.close()
    return answer.results[0]


def test_create_partitions_is_visible_on_the_answering_broker_and_refuses_assignments(
    healthy_cluster: LocalCluster,
) -> None:
    topic = f"grow-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 1)
    placed(healthy_cluster, topic, 1)
    refused = _grow(healthy_cluster, 2, topic, 2, [[3]])
    assert refused.error_code is ErrorCode.invalid_replica_assignment  # type: ignore[attr-defined]
    for node in (1, 2, 3):
        answer = _grow(healthy_cluster, node, topic, 2 + node, None)
        assert answer.error_code is ErrorCode.none  # type: ignore[attr-defined]
        shown = healthy_cluster.metadata(node, [topic]).topics[0].partitions
        assert len(shown) == 2 + node, f"broker {node} answered CreatePartitions but shows {len(shown)}"
        assert all(list(p.replica_nodes) == list(p.isr_nodes) == [p.leader_id] for p in shown)
