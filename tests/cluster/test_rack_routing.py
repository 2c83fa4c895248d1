"""Rack-aware routing with three racks (broker 1 in zone a, 2 in b, 3 in c): a producer naming its
zone in client.id writes only to its zone's broker, which hands data for partitions led elsewhere
to their leaders through object storage; a KIP-392 consumer (client.rack) is sent by the leaders to
its zone's broker, and a consumer naming its zone in client.id is given that broker as every
partition's leader; both read every record exactly once, and no broker counts a byte exchanged with
a client of another zone."""

from __future__ import annotations

import re
from collections import Counter

import httpx
from confluent_kafka import Consumer, Producer

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, new_topic, wait_until
from tests.support.cluster_fixtures import RACKS
from tests.support.kafka_clients import read_values

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 6
MESSAGES = 600


def metric(cluster: LocalCluster, node: int, name: str, label: str) -> float:
    text = httpx.get(f"{cluster.brokers[node].admin_url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf'^{name}_total\{{[^}}]*="{label}"\}} (\S+)$', line)
        if match:
            total += float(match.group(1))
    return total


def test_rack_aware_clients_never_cross_zones(healthy_cluster: LocalCluster) -> None:
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "zones", PARTITIONS)
    assert {n for n, _ in leaders.values()} == {1, 2, 3}
    before = {
        n: metric(cluster, n, "tabletopic_cross_zone_bytes", d) for n in (1, 2, 3) for d in ("in", "out")
    }
    handed = metric(cluster, 1, "tabletopic_zone_routed_bytes", "handoff")
    read_b = metric(cluster, 2, "tabletopic_zone_routed_bytes", "read")
    read_c = metric(cluster, 3, "tabletopic_zone_routed_bytes", "read")

    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "client.id": "orders&automq_az=a",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 10,
        }
    )
    for i in range(MESSAGES):
        producer.produce(
            topic,
            value=f"z-{i}".encode(),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    # Partitions led by brokers 2 and 3 reached them through object storage via broker 1.
    assert metric(cluster, 1, "tabletopic_zone_routed_bytes", "handoff") > handed

    expected = {f"z-{i}".encode() for i in range(MESSAGES)}
    kip392 = read_values(
        cluster.bootstrap, topic, PARTITIONS, MESSAGES, {"fetch.wait.max.ms": 100, "client.rack": "b"}
    )
    assert Counter(kip392) == Counter(expected)
    assert metric(cluster, 2, "tabletopic_zone_routed_bytes", "read") > read_b
    by_client_id = read_values(
        cluster.bootstrap,
        topic,
        PARTITIONS,
        MESSAGES,
        {"fetch.wait.max.ms": 100, "client.id": "reports&automq_az=c"},
    )
    assert Counter(by_client_id) == Counter(expected)
    assert metric(cluster, 3, "tabletopic_zone_routed_bytes", "read") > read_c

    after = {
        n: metric(cluster, n, "tabletopic_cross_zone_bytes", d) for n in (1, 2, 3) for d in ("in", "out")
    }
    assert after == before


def test_a_client_of_another_zone_talking_to_a_leader_is_counted(healthy_cluster: LocalCluster) -> None:
    """The metric's control: a producer that names another zone than its partition's leader (an
    old Fetch/Produce path, here a Produce sent straight to the leader) is served across zones and
    counted. Whichever broker the topic's placement made the leader: balancing by count can give a
    new topic no partition on a given broker of the shared cluster."""
    from tests.support.kafka_requests import make_batch, produce_request
    from tests.support.raw_kafka_client import connect, decode_response, encode_request, read_frame

    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "zones-ctl", 3)
    partition = 0
    leader = leaders[partition][0]  # one of the three racked brokers: the fixture runs only them
    other_zone = next(zone for zone in RACKS.values() if zone != RACKS[leader])
    before = metric(cluster, leader, "tabletopic_cross_zone_bytes", "in")
    sock = connect(cluster.brokers[leader].bootstrap)
    try:
        # The placement is decided before the leader has opened the partition's stream; until it
        # has, the leader answers NOT_LEADER_OR_FOLLOWER (retriable) as Kafka does, so retry.
        codes: list[int] = []

        def answered() -> bool:
            request = produce_request(topic, partition, make_batch([b"x" * 100]))
            sock.sendall(encode_request(request, 1, client_id=f"legacy&automq_az={other_zone}"))
            _, answer = decode_response(read_frame(sock), request.__api_key__, request.__version__)
            codes.append(answer.responses[0].partition_responses[0].error_code.value)
            return codes[-1] != 6  # 6: NOT_LEADER_OR_FOLLOWER

        wait_until(answered, timeout=30, interval=0.2)
        assert codes[-1] == 0, codes
    finally:
        sock.close()
    assert metric(cluster, leader, "tabletopic_cross_zone_bytes", "in") > before


def test_a_kip848_group_gives_each_member_the_partitions_led_in_its_rack(
    healthy_cluster: LocalCluster,
) -> None:
    """Three consumers (``group.protocol=consumer``), one per rack: the server-side assignor gives
    each the partitions whose leader is in its rack, as many as the even shares allow, and together
    they read every record once."""
    cluster = healthy_cluster
    topic, leaders = new_topic(cluster, "racked-group", PARTITIONS)
    group = f"racked-{topic}"
    values = [f"r-{i}".encode() for i in range(60)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    members = {
        node: Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "client.rack": rack,
                "auto.offset.reset": "earliest",
            }
        )
        for node, rack in RACKS.items()
    }
    seen: list[bytes] = []
    try:
        for consumer in members.values():
            consumer.subscribe([topic])

        def settled() -> bool:
            for consumer in members.values():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    seen.append(bytes(message.value() or b""))
            owned = [{tp.partition for tp in c.assignment()} for c in members.values()]
            return sum(map(len, owned)) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS))

        wait_until(settled, timeout=60, interval=0.01)
        wait_until(lambda: settled() and len(seen) >= len(values), timeout=60, interval=0.01)
        led_in_rack = Counter(node for node, _ in leaders.values())
        same_rack = sum(
            leaders[tp.partition][0] == node for node, c in members.items() for tp in c.assignment()
        )
        assert same_rack == sum(min(PARTITIONS // 3, n) for n in led_in_rack.values()), (leaders, same_rack)
    finally:
        for consumer in members.values():
            consumer.close()
    assert sorted(seen) == sorted(values)
