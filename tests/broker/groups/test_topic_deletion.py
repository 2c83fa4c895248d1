"""Committed offsets belong to a topic: deleting the topic deletes them, so a recreated topic of the
same name does not resume from the old topic's positions."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.integration


def _create(admin: AdminClient, topic: str) -> None:
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


def test_deleting_a_topic_forgets_its_committed_offsets(bootstrap: str) -> None:
    topic, group = f"deleted-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 42
        for future in admin.delete_topics([topic]).values():
            future.result(30)
        # Creation right after deletion may briefly see the old topic.
        wait_until_sync(lambda: _create(admin, topic) or True, timeout=20, interval=0.2)
        assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset < 0
    finally:
        consumer.close()
