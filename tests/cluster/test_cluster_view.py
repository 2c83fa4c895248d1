"""One view of the whole cluster from any broker's admin API: broker 1 answers broker 2's partitions
with their true leader and high watermark (from the database and the leaders, not its own store),
one controller, every broker's rack; with the object store paused, what the leaders acknowledged."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import httpx
import pytest

from tabletopic.api.console_history import CLUSTER_SERIES_PATH
from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster, placed, produce_raw, wait_until
from tests.support.cluster_fixtures import RACKS
from tests.support.group_member import GroupMember
from tests.support.kafka_clients import create_topic, failover_producer, make_messages, read_values
from tests.support.seaweedfs import SeaweedFS

pytestmark = CLUSTER_TEST_MARKS


def test_any_broker_shows_every_broker_and_other_brokers_partitions_with_their_true_leader_and_high_watermark(
    healthy_cluster: LocalCluster,
) -> None:
    topic = f"view-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 12)
    leaders = placed(healthy_cluster, topic, 12)
    of_broker_2 = sorted(p for p, (node, _) in leaders.items() if node == 2)
    assert of_broker_2, leaders
    written = {}
    for partition in of_broker_2:
        count = partition + 1
        for i in range(count):
            value = b"v%d" % i
            assert wait_until(
                lambda p=partition, v=value: produce_raw(healthy_cluster, 2, topic, p, v) == 0, timeout=20
            )
        written[partition] = count

    admin = httpx.Client(base_url=healthy_cluster.brokers[1].admin_url, timeout=30)

    described = admin.get(f"/v1/topics/{topic}").json()
    rows = {p["partition"]: p for p in described["partitions"]}
    for partition, (node, epoch) in leaders.items():
        assert rows[partition]["leader"] == node and rows[partition]["leader_epoch"] == epoch
        assert rows[partition]["high_watermark"] == written.get(partition, 0), rows[partition]

    body = admin.get("/v1/cluster", params={"partitions": "true"}).json()
    brokers = {b["node_id"]: b for b in body["brokers"]}
    assert {n: b["rack"] for n, b in brokers.items() if n in RACKS} == RACKS
    assert sum(1 for b in brokers.values() if b["is_controller"]) == 1
    assert brokers[body["controller_id"]]["is_controller"]
    assert all(brokers[n]["state"] == "alive" for n in RACKS)
    assert brokers[1]["this_node"] and not brokers[2]["this_node"]
    assert (
        sum(b["group_coordinator_slots"] for b in brokers.values())
        == body["coordinator_slots"]["__consumer_offsets"]
    )
    listed = {t["name"]: t for t in body["topic_list"]}
    assert listed[topic]["records"] == sum(written.values())

    def stored() -> bool:  # bytes in committed objects: once the leader has uploaded (200 ms here)
        topics = admin.get("/v1/cluster").json()["topic_list"]
        return {t["name"]: t["stored_bytes"] for t in topics}[topic] > 0

    assert wait_until(stored, timeout=30)
    assert sorted(listed[topic]["leaders"]) == sorted({n for n, _ in leaders.values()})
    assert body["partition_list"][topic][of_broker_2[0]]["high_watermark"] == written[of_broker_2[0]]
    # The same answer from another broker (the controller id and leaders do not depend on who is asked).
    other = httpx.get(f"{healthy_cluster.brokers[3].admin_url}/v1/cluster", timeout=30).json()
    assert other["controller_id"] == body["controller_id"]
    assert {t["name"]: t["records"] for t in other["topic_list"]}[topic] == sum(written.values())
    assert "moves" in body["balancer"] and isinstance(body["timeline"], list)


def test_any_brokers_console_plots_every_brokers_traffic(healthy_cluster: LocalCluster) -> None:
    """The charts on a cluster: a broker's own counters cover only what it serves, so broker 1
    plots the bytes and records every broker reports (here those of another broker, which leads
    what is written, and those of the group's coordinator, which counts what the group commits),
    per broker, per topic and for the whole cluster, and says which of its charts are its own."""
    topic = f"plotted-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 12)
    leaders = placed(healthy_cluster, topic, 12)
    owner = next(n for _, (n, _) in sorted(leaders.items()) if n != 1)
    written = [p for p, (node, _) in leaders.items() if node == owner]
    admin = httpx.Client(base_url=healthy_cluster.brokers[1].admin_url, timeout=30)
    reader = GroupMember(healthy_cluster.bootstrap, topic, f"plotted-{uuid.uuid4().hex[:8]}")
    reader.start()  # commits what it read every half second

    def latest(series: str) -> float:
        column = admin.get("/console/series", params={"prefix": series}).json().get(series, [])
        return max((v or 0 for v in column), default=0)

    def plotted() -> bool:
        for p in written:
            assert produce_raw(healthy_cluster, owner, topic, p, b"x" * 1000) == 0
        # The shared cluster's other tests write too: the topic's own series tells this one's bytes.
        by_topic = latest(f"topic|{topic}|cluster_bytes_in_per_s")
        records = latest(f"topic|{topic}|cluster_records_in_per_s")
        return (
            by_topic > 0
            and latest(f"cluster|bytes_in_per_s|broker_{owner}") >= by_topic
            and records > 0
            and latest(f"cluster|records_in_per_s|broker_{owner}") >= records
            and latest(f"topic|{topic}|cluster_records_consumed_per_s") > 0
            and latest("cluster|records_per_s|consumed") > 0
        )

    try:
        assert wait_until(plotted, timeout=60, interval=1)  # a sample every 5 s
        page = admin.get("/").text
        assert 'data-prefix="cluster|bytes_in_per_s|"' in page and "Bytes in per broker" in page
        assert 'data-prefix="cluster|records_in_per_s|"' in page and "Records in per broker" in page
        assert 'data-prefix="cluster|records_per_s|"' in page and "Records in and consumed, whole" in page
        assert "Produce on this broker" in page
        assert f'data-prefix="topic|{topic}|cluster_records_in_per_s"' in admin.get("/topics").text
        topic_page = admin.get(f"/topics/{topic}").text
        assert f'data-prefix="topic|{topic}|cluster_bytes_in_per_s"' in topic_page
        assert f'data-prefix="topic|{topic}|cluster_records_"' in topic_page
    finally:
        reader.stop()
        admin.close()


def test_a_restarted_broker_plots_the_cluster_from_before_its_restart(healthy_cluster: LocalCluster) -> None:
    """Each broker keeps its charts in memory: one killed and started again begins the charts of
    the whole cluster with another broker's samples, so its console shows the cluster's last hour
    and not an empty chart; the charts of its own counters start at its start."""
    others = httpx.Client(base_url=healthy_cluster.brokers[1].admin_url, timeout=30)

    def sampled() -> list[float]:
        return list(others.get(CLUSTER_SERIES_PATH).json()["t"])

    assert wait_until(lambda: len(sampled()) >= 2, timeout=30, interval=1)  # a sample every 5 s
    broker = healthy_cluster.brokers[3]
    broker.kill()
    restarted_at = time.time()
    healthy_cluster.start(3)
    restarted = httpx.Client(base_url=broker.admin_url, timeout=30)

    def carried_over() -> dict[str, list[float | None]]:
        return dict(restarted.get(CLUSTER_SERIES_PATH).json())

    try:
        assert wait_until(lambda: any(t < restarted_at for t in carried_over()["t"]), timeout=30)
        series = carried_over()
        before = [i for i, t in enumerate(series["t"]) if t is not None and t < restarted_at]
        plotted = [
            n for n in series if n.startswith("cluster|") and any(series[n][i] is not None for i in before)
        ]
        assert "cluster|records_per_s|in" in plotted, series
        own = restarted.get("/console/series", params={"prefix": "node|"}).json()
        assert all(
            value is None
            for name, column in own.items()
            if name != "t"
            for at, value in zip(own["t"], column, strict=True)
            if at < restarted_at
        )
    finally:
        others.close()
        restarted.close()


def test_a_move_shows_on_every_brokers_timeline_with_its_reason(healthy_cluster: LocalCluster) -> None:
    from tabletopic import database
    from tabletopic.cluster.db import ClusterMetadata

    topic = f"moved-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 2)

    def ask_for_a_move() -> int:
        """Move partition 0 away from the broker leading it now; the broker asked for."""
        source = placed(healthy_cluster, topic, 2)[0][0]
        target = next(n for n in (1, 2, 3) if n != source)
        engine = database.create_engine(healthy_cluster.metadata_url)
        try:
            assert ClusterMetadata(engine).request_moves([(topic, 0, target)]) == []
        finally:
            engine.dispose()
        return target

    def moved(node: int) -> dict[str, object] | None:
        # The asked move's entry: the balancer may move the new topic's partitions too.
        body = httpx.get(f"{healthy_cluster.brokers[node].admin_url}/v1/cluster", timeout=30).json()
        return next(
            (
                e
                for e in body["timeline"]
                if e["topic"] == topic and e["partition"] == 0 and e["kind"] == "reassignment"
            ),
            None,
        )

    target = ask_for_a_move()
    try:
        event = wait_until(lambda: moved(3), timeout=15, interval=0.5)
    except TimeoutError:
        # Count balancing may move the new topic's partition (other tests' topics come and go on
        # this shared cluster) onto the very broker asked for, between the leader read above and
        # the request: the move then had nothing to do and left no entry. Ask again from where the
        # partition is now.
        target = ask_for_a_move()
        event = wait_until(lambda: moved(3), timeout=30, interval=0.5)
    assert event["to_node"] == target and event["from_node"] != target
    assert str(event["reason"]) == f"a move asked for (operator or auto-balancer); broker {target} took it"
    assert event["at"]
    assert moved(1) == event  # the same history from another broker
    # The console's timeline shows decisions: this one moved one partition, with its whole reason.
    body = httpx.get(f"{healthy_cluster.brokers[2].admin_url}/v1/cluster", timeout=30).json()
    assert any(
        d["where"] == f"{topic}-0" and d["kind"] == "reassignment" and d["cause"] == event["reason"]
        for d in body["decisions"]
    )


def test_the_message_browser_and_group_pages_of_one_broker_reach_partitions_and_groups_of_others(
    healthy_cluster: LocalCluster,
) -> None:
    from tests.support.cluster import find_coordinator

    topic = f"browse-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 3)
    leaders = placed(healthy_cluster, topic, 3)
    partition = next((p for p, (n, _) in leaders.items() if n != 1), None)
    if partition is None:
        pytest.skip(f"broker 1 leads every partition: {leaders}")
    owner = leaders[partition][0]
    for i in range(4):
        assert wait_until(
            lambda v=b'{"n": %d}' % i: produce_raw(healthy_cluster, owner, topic, partition, v) == 0,
            timeout=20,
        )
    admin = httpx.Client(base_url=healthy_cluster.brokers[1].admin_url, timeout=60)
    read = admin.get(f"/v1/topics/{topic}/messages", params={"partition": partition, "offset": 1})
    assert read.status_code == 200, read.text
    assert [r["value"]["value"] for r in read.json()["records"]] == [{"n": 1}, {"n": 2}, {"n": 3}]

    group = f"reset-{uuid.uuid4().hex[:6]}"
    reset = admin.post(f"/v1/groups/{group}/offsets", json={"topic": topic, "to": "offset", "value": 1})
    assert reset.status_code == 200, reset.text
    coordinator = find_coordinator(healthy_cluster, 1, group, key_type=0)
    # Every broker's console shows the group, the coordinator's and the two others alike.
    for node in (1, 2, 3):
        url = healthy_cluster.brokers[node].admin_url
        counted = re.search(r'<a href="/groups">(\d+) consumer groups</a>', httpx.get(url, timeout=30).text)
        assert counted is not None and int(counted.group(1)) >= 1, f"broker {node} counts no group"
        page = httpx.get(f"{url}/groups/{group}", timeout=30).text
        row = next(r for r in page.split("<tr>") if r.startswith(f"<td>{topic}</td><td>{partition}</td>"))
        assert "<td>1</td><td>4</td><td>3</td>" in row, (node, coordinator, row)  # committed, HW, lag
        # The lag is sampled, and plotted, by the coordinator: the others link to its page.
        there = f"{healthy_cluster.brokers[coordinator].admin_url}/groups/{group}"
        link = f'<a href="{there}">broker {coordinator}</a>'
        assert (link in page) == (node != coordinator), (node, coordinator)
        assert ('data-match="|lag"' in page) == (node == coordinator), (node, coordinator)
        listing = httpx.get(f"{url}/groups", timeout=30).text
        line = next(r for r in listing.split("<tr>") if f">{group}</a>" in r)
        assert "<td>0</td><td>3</td>" in line, (node, line)  # no members, lag 3


def test_with_the_object_store_paused_the_view_shows_what_the_leaders_acknowledged(
    healthy_cluster: LocalCluster, seaweedfs: SeaweedFS
) -> None:
    """On the shared WAL a produce is acknowledged once the leader's WAL has it, object store or
    not; the view must show those records at once (the database learns of them only on upload),
    and once the store is back every acknowledged record is read exactly once."""
    from confluent_kafka import Producer

    topic = f"paused-store-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 6)
    placed(healthy_cluster, topic, 6)
    messages = make_messages(300, 6, "paused", headers=False)
    assert seaweedfs.process is not None
    os.kill(seaweedfs.process.pid, signal.SIGSTOP)
    try:
        producer = Producer(failover_producer(healthy_cluster.bootstrap))
        acknowledged: list[bytes] = []
        for partition, key, value, _ in messages:
            producer.produce(
                topic,
                value,
                key,
                partition=partition,
                on_delivery=lambda err, m: err is None and acknowledged.append(m.value()),
            )
        assert producer.flush(30) == 0 and len(acknowledged) == len(messages)
        admin = httpx.Client(base_url=healthy_cluster.brokers[1].admin_url, timeout=30)
        shown = admin.get(f"/v1/topics/{topic}").json()["partitions"]
        assert [p["high_watermark"] for p in shown] == [50] * 6, shown
        listed = {t["name"]: t for t in admin.get("/v1/cluster").json()["topic_list"]}
        assert listed[topic]["records"] == 300
        status = subprocess.run(
            [
                sys.executable,
                "-m",
                "tabletopic",
                "cluster",
                "status",
                "--metadata-url",
                healthy_cluster.metadata_url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        rows = [line.split("\t") for line in status.stdout.splitlines() if line.startswith(f"{topic}\t")]
        assert [row[-1] for row in rows] == ["50"] * 6, status.stdout + status.stderr
    finally:
        os.kill(seaweedfs.process.pid, signal.SIGCONT)
    values = read_values(healthy_cluster.bootstrap, topic, 6, len(messages))
    assert sorted(values) == sorted(acknowledged)
