"""Three brokers on loopback sharing PostgreSQL and SeaweedFS: one cluster as clients see it."""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, produce_raw, wait_until
from tests.support.kafka_clients import create_topic
from tests.support.kafka_requests import fetch_request, make_batch, produce_request
from tests.support.raw_kafka_client import connect, roundtrip

pytestmark = CLUSTER_TEST_MARKS


def test_every_broker_returns_identical_metadata(healthy_cluster: LocalCluster) -> None:
    topic = f"meta-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 12)
    leaders = placed(healthy_cluster, topic, 12)
    assert {node for node, _ in leaders.values()} == {1, 2, 3}  # spread over every broker
    answers = [healthy_cluster.metadata(n, [topic]) for n in (1, 2, 3)]
    brokers = [sorted((b.node_id, b.host, b.port) for b in a.brokers) for a in answers]
    assert brokers[0] == brokers[1] == brokers[2]
    assert len(brokers[0]) == 3
    assert answers[0].controller_id == answers[1].controller_id == answers[2].controller_id != -1


def test_produce_to_a_non_leader_is_refused_with_not_leader(healthy_cluster: LocalCluster) -> None:
    topic = f"route-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[2].bootstrap, topic, 3)
    leaders = placed(healthy_cluster, topic, 3)
    leader, _ = leaders[0]
    other = next(n for n in (1, 2, 3) if n != leader)
    assert produce_raw(healthy_cluster, other, topic, 0, b"x") == ErrorCode.not_leader_or_follower.value
    assert wait_until(lambda: produce_raw(healthy_cluster, leader, topic, 0, b"y") == 0, timeout=10)


def test_produce_and_fetch_refused_by_a_non_leader_name_the_leader_and_its_endpoint(
    healthy_cluster: LocalCluster,
) -> None:
    """KIP-951: from Produce v10 and Fetch v16 a NOT_LEADER_OR_FOLLOWER names the leader, its epoch
    and where it listens, so a client (librdkafka 2.4+, Kafka's Java client 3.7+) moves there
    without asking Metadata first."""
    topic = f"route-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[2].bootstrap, topic, 3)
    leader, epoch = placed(healthy_cluster, topic, 3)[0]
    other = next(n for n in (1, 2, 3) if n != leader)
    sock = connect(healthy_cluster.brokers[other].bootstrap)
    try:
        answer = roundtrip(sock, produce_request(topic, 0, make_batch([b"x"]), version=10))
    finally:
        sock.close()
    entry = answer.responses[0].partition_responses[0]
    assert entry.error_code is ErrorCode.not_leader_or_follower
    assert (entry.current_leader.leader_id, entry.current_leader.leader_epoch) == (leader, epoch)
    port = int(healthy_cluster.brokers[leader].bootstrap.rsplit(":", 1)[1])
    [endpoint] = answer.node_endpoints
    assert (endpoint.node_id, endpoint.port) == (leader, port)

    topic_id = healthy_cluster.metadata(other, [topic]).topics[0].topic_id
    sock = connect(healthy_cluster.brokers[other].bootstrap)
    try:
        fetched = roundtrip(sock, fetch_request(topic, 0, 0, version=16, topic_id=topic_id))
    finally:
        sock.close()
    part = fetched.responses[0].partitions[0]
    assert part.error_code is ErrorCode.not_leader_or_follower
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (leader, epoch)
    [endpoint] = fetched.node_endpoints
    assert (endpoint.node_id, endpoint.port) == (leader, port)
