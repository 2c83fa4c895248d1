"""Clients of different brokers creating the same topic at once (producers starting together with
auto-creation on): one creates it, the others are told it exists, and every connection stays open.
The broker that lost the race used to fail on the database's unique key: it logged a traceback and
closed the connection, and its client saw a network error instead of the topic."""

from __future__ import annotations

import socket
import threading
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster
from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, roundtrip

pytestmark = CLUSTER_TEST_MARKS


def _metadata_creating(topic: str) -> Any:
    wanted = [{"name": topic, "topic_id": None}]
    return request(
        3, 12, topics=wanted, allow_auto_topic_creation=True, include_topic_authorized_operations=False
    )


def _race(sockets: dict[int, socket.socket], topic: str) -> dict[int, Any]:
    """Every broker asked at the same moment; each one's answer, or the error its connection gave."""
    start = threading.Barrier(len(sockets))
    answers: dict[int, Any] = {}

    def ask(node_id: int) -> None:
        start.wait()
        try:
            answers[node_id] = roundtrip(sockets[node_id], _metadata_creating(topic))
        except ConnectionError as exc:
            answers[node_id] = exc

    threads = [threading.Thread(target=ask, args=(node_id,)) for node_id in sockets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_brokers_racing_to_auto_create_one_topic_all_answer_with_it(healthy_cluster: LocalCluster) -> None:
    brokers = sorted(healthy_cluster.running().items())
    sockets = {node_id: connect(broker.bootstrap) for node_id, broker in brokers}
    logs = {node_id: broker.log_path.stat().st_size for node_id, broker in brokers}
    try:
        for _ in range(10):
            topic = f"race-{uuid.uuid4().hex[:8]}"
            for node_id, answer in sorted(_race(sockets, topic).items()):
                assert not isinstance(answer, Exception), f"broker {node_id} closed the connection: {answer}"
                (described,) = answer.topics
                assert (described.name, described.error_code) == (topic, ErrorCode.none), (node_id, described)
                assert len(described.partitions) >= 1
    finally:
        for sock in sockets.values():
            sock.close()
    for node_id, broker in brokers:
        written = broker.log_path.read_text(errors="replace")[logs[node_id] :]
        assert "handler failed" not in written, written[-2000:]
