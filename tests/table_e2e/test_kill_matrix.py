"""kill -9 at every crash point of the table pipeline, and at random moments: after a restart the
table holds every record of the log exactly once (every acknowledged one among them).

One separate node (not the shared one) is restarted per crash point. The coordinator's crash points
run with the in-process runner, since a Spark JVM start per restart would dominate the suite's time;
``table.task_write`` (inside a Spark task) runs with the Spark runner.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.table_node import (
    INPROCESS_NODE_SETTINGS,
    SPARK_NODE_SETTINGS,
    DeliveryLog,
    TableNode,
    table_configs,
    table_positions,
)
from tests.support.table_producers import SteadyProducer

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]


# The producers write through the node's restarts: records wait (up to 3 min) until it is back.
RESTARTS = {"message.timeout.ms": 180_000, "reconnect.backoff.max.ms": 500}


@pytest.fixture(scope="module")
def crash_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableNode]:
    """One node restarted per crash point (same data dir and ports each time)."""
    node = TableNode(Path(tmp_path_factory.mktemp("crash-node")), dict(INPROCESS_NODE_SETTINGS))
    yield node
    node.kill()


def assert_log_in_table_exactly_once(node: TableNode, topic: str, log: DeliveryLog) -> None:
    """Wait until the table caught up with the log, then compare row positions with the log."""
    status = node.wait_committed(topic, log.end_offsets(), timeout=240)
    status = node.wait_status(
        topic,
        lambda s: s["high_watermarks"] and s["committed_offsets"] == s["high_watermarks"],
        120,
        "committed offsets equal to the high watermarks",
    )
    rows = node.rows(topic)
    positions = table_positions(rows)
    duplicates = [p for p, n in Counter(positions).items() if n > 1]
    assert not duplicates, f"duplicated rows at {duplicates[:10]}"
    in_log = {(int(p), o) for p, hw in status["high_watermarks"].items() for o in range(hw)}
    assert set(positions) == in_log, (
        f"missing {sorted(in_log - set(positions))[:10]}, unexpected {sorted(set(positions) - in_log)[:10]}"
    )
    assert log.acked <= in_log, f"acknowledged but not in the log: {sorted(log.acked - in_log)[:10]}"
    values = dict(zip(positions, (r["_kafka_value"] for r in rows), strict=True))
    for position, value in log.values.items():
        assert values[position] == f"record {value}"


def run_crash_point(
    node: TableNode, topic: str, point: str, partitions: int = 2, keys: int | None = None
) -> DeliveryLog:
    if node.alive:
        node.stop()
    node.start(env={"TABLETOPIC_CRASH_AT": point})
    upsert = {} if keys is None else {"upsert_enable": "true", "id_columns": "[_kafka_key]"}
    node.create_topic(topic, table_configs(convert_value_type="string", **upsert), partitions=partitions)
    producer = SteadyProducer(
        node.bootstrap, topic, partitions, rate=200, keys=keys, overrides=RESTARTS
    ).start()
    try:
        died = node.wait_dead(120)
        assert died, f"the node never reached crash point {point}:\n{node.log_tail()}"
    finally:
        producer.stop()
    node.start()  # no crash variable this time
    log = producer.finish()
    assert log.acked, "nothing was acknowledged"
    if keys is None:
        assert_log_in_table_exactly_once(node, topic, log)
    return log


@pytest.mark.parametrize(
    "point", ["table.planned", "table.before_commit:2", "table.after_commit", "table.after_commit:3"]
)
def test_kill_at_coordinator_crash_point_then_restart_commits_everything_once(
    crash_node: TableNode, point: str
) -> None:
    topic = f"crash_{point.replace('.', '_').replace(':', '_')}"
    run_crash_point(crash_node, topic, point)


@pytest.mark.parametrize("point", ["table.upsert_files_written:2", "table.after_commit:2"])
def test_kill_during_an_upsert_commit_then_restart_keeps_the_latest_row_per_key(
    crash_node: TableNode, point: str
) -> None:
    """An upsert table (50 keys, each always in the same partition): killed with the commit's files
    written but not committed, or right after a commit, the restarted node ends with exactly the
    newest record of every key and offsets equal to the high watermarks."""
    topic = f"crash_upsert_{point.replace('.', '_').replace(':', '_')}"
    log = run_crash_point(crash_node, topic, point, keys=50)
    crash_node.wait_committed(topic, log.end_offsets(), timeout=240)
    crash_node.wait_status(
        topic,
        lambda s: s["high_watermarks"] and s["committed_offsets"] == s["high_watermarks"],
        120,
        "committed offsets equal to the high watermarks",
    )
    rows = crash_node.rows(topic)
    keys = [r["_kafka_key"] for r in rows]
    assert len(keys) == len(set(keys)), "two rows for one key"
    newest: dict[str, int] = {}
    for sent in log.values.values():
        newest[str(sent % 50)] = max(newest.get(str(sent % 50), -1), sent)
    assert {r["_kafka_key"]: r["_kafka_value"] for r in rows} == {k: f"record {n}" for k, n in newest.items()}


def test_random_sigkills_during_steady_produce_and_ingest(crash_node: TableNode) -> None:
    topic = "crash_random"
    if crash_node.alive:
        crash_node.stop()
    crash_node.start()
    crash_node.create_topic(topic, table_configs(convert_value_type="string"), partitions=3)
    producer = SteadyProducer(crash_node.bootstrap, topic, 3, rate=200, overrides=RESTARTS).start()
    rng = random.Random()
    try:
        for _ in range(2):
            time.sleep(rng.uniform(2.0, 6.0))  # the subject: kills at random moments of steady work
            crash_node.kill()
            time.sleep(rng.uniform(0.0, 1.0))  # the subject: and a random time down
            crash_node.start()
        time.sleep(2)  # the subject: steady work goes on against the restarted node
    finally:
        producer.stop()
    log = producer.finish()
    assert_log_in_table_exactly_once(crash_node, topic, log)


@pytest.mark.spark
def test_a_spark_task_killed_while_writing_commits_nothing_and_the_next_job_commits_everything_once(
    tmp_path: Path,
) -> None:
    """``table.task_write`` SIGKILLs a Spark Python worker while it writes data files (one worker:
    ``TABLETOPIC_CRASH_ONCE``): the job fails and nothing is committed for it; the next job, on the
    same node, commits every record once."""
    # Every job on Spark (none in the small-job helper process), so the kill lands in a Spark worker.
    node = TableNode(tmp_path / "spark-crash", {**SPARK_NODE_SETTINGS, "table.job.local.max.bytes": "0"})
    topic, marker = "crash_task_write", tmp_path / "worker-killed"
    try:
        env = {"TABLETOPIC_CRASH_AT": "table.task_write", "TABLETOPIC_CRASH_ONCE": str(marker)}
        node.start(env=env, timeout=180)
        node.create_topic(topic, table_configs(convert_value_type="string"), partitions=2)
        producer = SteadyProducer(node.bootstrap, topic, 2, rate=200, overrides=RESTARTS).start()
        try:
            failed = node.wait_status(topic, lambda s: bool(s["last_error"]), 240, "a failed ingest job")
            assert failed["commits"] == 0
            assert marker.exists()  # the kill was a Spark worker's, not the node's
        finally:
            producer.stop()
        log = producer.finish()
        assert_log_in_table_exactly_once(node, topic, log)
    finally:
        node.kill()
