"""``tabletopic tables rebuild``: a corrupted table is rebuilt from its topic on a branch and swapped
in atomically while a producer keeps writing and the live pipeline keeps committing; kill -9 of the
rebuild mid-way and just before the swap neither loses nor duplicates a record. ``--adopt`` takes
over an existing Iceberg table from the current offsets on."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from tests.support.table_node import DeliveryLog, TableNode, assert_exactly_once, table_configs
from tests.support.table_ops import corrupt, json_report, tables_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(500)]


class Trickle:
    """A producer writing a record every 50 ms from a thread, recording acknowledgements.

    A rebuild reads up to the high watermarks of its start, so the faster the trickle, the more
    rounds a resumed rebuild runs: at 100 records a second, a CI run on a loaded machine started its
    resumed rebuild so late and ran its rounds so slowly that it took over 240 s."""

    def __init__(self, bootstrap: str, topic: str, log: DeliveryLog) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic, self.log = topic, log
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(
                self.topic, key=f"t{i}", value=f"trickle {i}", on_delivery=self.log.callback()
            )
            i += 1
            self.producer.poll(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(30) == 0


def produce(node: TableNode, topic: str, count: int, log: DeliveryLog) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i), value=f"v{i}", on_delivery=log.callback())
    assert producer.flush(30) == 0


def test_rebuild_repairs_a_corrupted_table_through_kill_9_while_ingest_goes_on(
    inprocess_node: TableNode,
) -> None:
    node, topic = inprocess_node, "rebuilt_orders"
    node.create_topic(topic, table_configs(convert_value_type="string"), partitions=2)
    log = DeliveryLog()
    produce(node, topic, 400, log)
    node.wait_committed(topic, log.end_offsets())
    corrupt(node, topic, duplicate=(1, 42), remove=(0, 17))
    assert tables_cli(node, "verify", topic, "--quiet").returncode == 1

    trickle = Trickle(node.bootstrap, topic, log)
    try:
        crashed = tables_cli(
            node, "rebuild", topic, "--quiet", "--round-records", "100", crash_at="table.rebuild_round:2"
        )
        assert crashed.returncode == -9, crashed.stdout + crashed.stderr
        assert tables_cli(node, "verify", topic, "--quiet").returncode == 1  # main untouched so far
        resumed = tables_cli(node, "rebuild", topic, "--quiet", "--round-records", "500")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "(resumed)" in resumed.stdout, resumed.stdout
        node.wait_committed(topic, log.end_offsets())  # the live pipeline commits on the swapped-in table
        crashed = tables_cli(node, "rebuild", topic, "--quiet", crash_at="table.rebuild_before_swap")
        assert crashed.returncode == -9, crashed.stdout + crashed.stderr
        again = tables_cli(node, "rebuild", topic, "--quiet")
        assert again.returncode == 0 and "(resumed)" in again.stdout, again.stdout + again.stderr
    finally:
        trickle.stop()
    node.wait_committed(topic, log.end_offsets())
    assert_exactly_once(node.rows(topic), log)
    report = json_report(tables_cli(node, "verify", topic, "--json"))
    assert report["ok"], report
    assert "tabletopic-rebuild" not in node.load_table(topic).metadata.refs


def test_adopt_takes_over_an_existing_table_from_the_current_offsets(inprocess_node: TableNode) -> None:
    import pyarrow as pa

    node, topic = inprocess_node, "adopted_events"
    catalog = node.catalog()
    catalog.create_namespace_if_not_exists("default")
    legacy = catalog.create_table("default.legacy_events", schema=pa.schema([("legacy", pa.string())]))
    legacy.append(pa.table({"legacy": ["a", "b", "c"]}))
    node.create_topic(
        topic,
        table_configs(convert_value_type="string", commit_interval_ms="600000", table_name="legacy_events"),
    )
    node.wait_status(topic, lambda s: s["state"] != "STARTING", 60, "first cycle")
    history = DeliveryLog()
    produce(node, topic, 10, history)  # before adoption: not wanted in the table

    adopted = tables_cli(node, "rebuild", topic, "--adopt", "--quiet")
    assert adopted.returncode == 0, adopted.stdout + adopted.stderr
    again = tables_cli(node, "rebuild", topic, "--adopt", "--quiet")
    assert again.returncode == 1 and "already holds offsets" in again.stderr

    fresh = DeliveryLog()
    produce(node, topic, 5, fresh)
    node.trigger_commit(topic)
    node.wait_committed(topic, fresh.end_offsets())
    rows = node.load_table("default.legacy_events").scan().to_arrow().to_pylist()
    assert sorted(r["legacy"] for r in rows if r["legacy"] is not None) == ["a", "b", "c"]
    offsets = sorted(r["_kafka_metadata"]["offset"] for r in rows if r["_kafka_metadata"] is not None)
    assert offsets == [10, 11, 12, 13, 14]


def test_rebuild_of_an_upsert_table_keeps_the_latest_row_of_every_key_across_rounds(
    inprocess_node: TableNode,
) -> None:
    node, topic = inprocess_node, "rebuilt_accounts"
    node.create_topic(
        topic,
        table_configs(convert_value_type="string", upsert_enable="true", id_columns="[_kafka_key]"),
        partitions=2,
    )
    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 5})
    # 30 keys written three times, every third key then deleted, and key "3" written again after
    # its tombstone: with 25-record rounds a key's changes fall into different rounds.
    for round_ in range(3):
        for i in range(30):
            producer.produce(topic, key=str(i), value=f"v{i}-{round_}", partition=i % 2)
    for i in range(0, 30, 3):
        producer.produce(topic, key=str(i), value=None, partition=i % 2)
    producer.produce(topic, key="3", value="back", partition=1)
    assert producer.flush(30) == 0
    node.wait_committed(topic, {0: 50, 1: 51})
    corrupt(node, topic, duplicate=(0, 40), remove=(1, 41))
    assert tables_cli(node, "verify", topic, "--quiet").returncode == 1

    done = tables_cli(node, "rebuild", topic, "--quiet", "--round-records", "25")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json_report(tables_cli(node, "verify", topic, "--json"))
    assert report["ok"], report
    rows = {r["_kafka_key"]: r["_kafka_value"] for r in node.load_table(topic).scan().to_arrow().to_pylist()}
    expected = {str(i): f"v{i}-2" for i in range(30) if i % 3}
    assert rows == {**expected, "3": "back"}
