"""Three brokers on loopback sharing PostgreSQL and SeaweedFS: one cluster as clients see it."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, produce_raw, wait_until
from tests.support.kafka_clients import create_topic
from tests.support.kafka_requests import fetch_request, make_batch, produce_request, request
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


def _ask(cluster: LocalCluster, node: int, kafka_request: Any) -> Any:
    """One request straight to ``node`` (no client in between to follow a leader); its answer."""
    sock = connect(cluster.brokers[node].bootstrap, timeout=10)
    try:
        return roundtrip(sock, kafka_request)
    finally:
        sock.close()


def _assert_names_the_leader(
    cluster: LocalCluster, refused: Any, endpoints: Any, leader: int, epoch: int
) -> None:
    """``refused`` (a partition of an answer) is NOT_LEADER_OR_FOLLOWER naming ``leader`` at
    ``epoch``, and the answer's ``endpoints`` say where that leader listens."""
    assert refused.error_code is ErrorCode.not_leader_or_follower
    assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (leader, epoch)
    port = int(cluster.brokers[leader].bootstrap.rsplit(":", 1)[1])
    [endpoint] = endpoints
    assert (endpoint.node_id, endpoint.port) == (leader, port)


def test_produce_and_fetch_refused_by_a_non_leader_name_the_leader_and_its_endpoint(
    healthy_cluster: LocalCluster,
) -> None:
    """KIP-951: from Produce v10 and Fetch v16 (not before) a NOT_LEADER_OR_FOLLOWER names the
    leader, its epoch and where it listens, so a client (librdkafka 2.4+, Kafka's Java client 3.7+)
    moves there without asking Metadata first."""
    cluster = healthy_cluster
    topic = f"route-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[2].bootstrap, topic, 3)
    leader, epoch = placed(cluster, topic, 3)[0]
    other = next(n for n in (1, 2, 3) if n != leader)
    answer = _ask(cluster, other, produce_request(topic, 0, make_batch([b"x"]), version=10))
    entry = answer.responses[0].partition_responses[0]
    _assert_names_the_leader(cluster, entry, answer.node_endpoints, leader, epoch)

    topic_id = cluster.metadata(other, [topic]).topics[0].topic_id
    fetched = _ask(cluster, other, fetch_request(topic, 0, 0, version=16, topic_id=topic_id))
    _assert_names_the_leader(
        cluster, fetched.responses[0].partitions[0], fetched.node_endpoints, leader, epoch
    )
    # Before v16 no endpoint could go with the name, so none is named (as in Kafka): a name alone
    # sent kafka-python to a broker it might have no address for.
    older = _ask(cluster, other, fetch_request(topic, 0, 0, version=15, topic_id=topic_id))
    refused = older.responses[0].partitions[0]
    assert refused.error_code is ErrorCode.not_leader_or_follower
    assert refused.current_leader.leader_id == -1


def test_a_share_fetch_refused_by_a_non_leader_names_the_leader_at_once(
    healthy_cluster: LocalCluster,
) -> None:
    """KIP-932's ShareFetch carries KIP-951's fields too: a partition refused NOT_LEADER_OR_FOLLOWER
    names its leader, epoch and endpoint, and the answer comes at once rather than after the
    request's long poll (30 s here, longer than the socket waits)."""
    cluster = healthy_cluster
    topic = f"share-route-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.brokers[1].bootstrap, topic, 1)
    leader, epoch = placed(cluster, topic, 1)[0]
    other = next(n for n in (1, 2, 3) if n != leader)
    topic_id = cluster.metadata(other, [topic]).topics[0].topic_id
    partition = {"partition_index": 0, "acknowledgement_batches": []}
    share_fetch = request(
        78,
        1,
        group_id=f"share-{uuid.uuid4().hex[:6]}",
        member_id=uuid.uuid4().hex,
        share_session_epoch=0,
        max_wait=datetime.timedelta(seconds=30),
        min_bytes=1,
        max_records=10,
        batch_size=10,
        topics=[{"topic_id": topic_id, "partitions": [partition]}],
        forgotten_topics_data=[],
    )
    answer = _ask(cluster, other, share_fetch)
    assert answer.error_code is ErrorCode.none
    _assert_names_the_leader(cluster, answer.responses[0].partitions[0], answer.node_endpoints, leader, epoch)
