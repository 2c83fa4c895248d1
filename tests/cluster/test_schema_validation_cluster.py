"""Broker-side schema validation in cluster mode: every broker validates by itself, reading the
schemas another node's registry wrote to the shared metadata database."""

from __future__ import annotations

import json
import struct
import uuid

from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, produce_raw

pytestmark = CLUSTER_TEST_MARKS

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
INVALID_RECORD = 87


def test_every_leader_validates_against_the_shared_registry(healthy_cluster: LocalCluster) -> None:
    topic = f"validated-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": healthy_cluster.brokers[1].bootstrap})
    config = {"confluent.value.schema.validation": "true"}
    admin.create_topics([NewTopic(topic, 3, 1, config=config)])[topic].result(30)
    leaders = placed(healthy_cluster, topic, 3)
    # Registered through node 1's registry only.
    client = SchemaRegistryClient({"url": healthy_cluster.registry_url(1)})
    good = AvroSerializer(client, json.dumps(USER))(
        {"name": "ada"}, SerializationContext(topic, MessageField.VALUE)
    )
    unknown = b"\x00" + struct.pack(">I", 999_999) + good[5:]
    for partition, (leader, _epoch) in leaders.items():
        assert produce_raw(healthy_cluster, leader, topic, partition, good) == 0
        assert produce_raw(healthy_cluster, leader, topic, partition, unknown) == INVALID_RECORD
