"""Exactly-once through faults, as its user checks it: a transactional writer commits (and on
purpose aborts) transactions across partitions, while a read_committed group copies every record to
a second topic, committing its offsets in the same transactions. On the 3-broker cluster the
writer's transaction coordinator is killed with SIGKILL, then the copying group's coordinator, and
in another run every connection to the brokers is reset three times; on a broker of its own, the
metadata database restarts five times under the pipeline.

Then both topics are read back read_committed: every transaction the writer saw committed is there
once and whole, no aborted one shows a record, every input record was copied exactly once, no
transaction is left open (each partition's last stable offset reaches its high watermark), and the
group committed the end of its input. ``bench/txn_fault_run.py`` runs the same pipeline through
random faults for minutes; these are its short, fixed forms.

The restarts guard this: the transaction coordinator changed a transactional id's record before
writing its row, and kept the change when the write failed. AddOffsetsToTxn retried after
PostgreSQL refused its write was then acknowledged from memory while the row lacked the group, and
the group's coordinator, which checks the row, refused the TxnOffsetCommit with INVALID_TXN_STATE:
fatal to librdkafka, so the copying member had to start over with a new producer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cluster import (
    CLUSTER_TEST_MARKS,
    ConnectionResetUnavailable,
    LocalCluster,
    find_coordinator,
    new_topic,
    wait_until,
)
from tests.support.cluster_fixtures import one_broker
from tests.support.exactly_once import ABORTED, COMMITTED, CopyingGroup, TransactionalWriter, Verdict, judge
from tests.support.kafka_clients import create_topic
from tests.support.postgres import PostgresServer
from tests.support.seaweedfs import SeaweedFS, s3_settings_of

pytestmark = CLUSTER_TEST_MARKS

PARTITIONS = 6
GROUP_KEY = 0  # FindCoordinator's key type of a group (1: a transactional id)


def _kill_and_restart(cluster: LocalCluster, node: int) -> None:
    cluster.brokers[node].kill()
    time.sleep(2)  # the subject: the pipeline goes on while the coordinator is gone
    cluster.start(node)
    wait_until(lambda: all(len(cluster.metadata(n).brokers) == 3 for n in cluster.running()), timeout=30)


Fault = Callable[[TransactionalWriter, CopyingGroup], None]


def _pipeline_through(bootstrap: str, source: str, sink: str, faults: list[Fault]) -> Verdict:
    """Run the pipeline through ``faults`` one after another, each once the group copies again,
    then judge it."""
    writer = TransactionalWriter(bootstrap, source, PARTITIONS, rate=20, seed=7)
    group = CopyingGroup(bootstrap, source, sink, PARTITIONS).start()

    def copy_on() -> None:  # three more transactions of the group committed
        copied = group.committed
        wait_until(lambda: group.committed >= copied + 3, timeout=60)

    try:
        copy_on()
        for fault in faults:
            fault(writer, group)
            copy_on()
        last_fault = time.monotonic()
        writer.stop()
    except BaseException:
        writer.stop()
        group.stop()  # judge() stops it otherwise
        raise
    return judge(writer, group, last_fault)


def _assert_exactly_once(verdict: Verdict) -> None:
    assert verdict.clean, "\n".join(verdict.lines())
    assert verdict.outcomes[COMMITTED] and verdict.outcomes[ABORTED], verdict.outcomes


def test_a_copying_pipeline_stays_exactly_once_through_coordinator_kills(
    healthy_cluster: LocalCluster,
) -> None:
    cluster = healthy_cluster
    source, _ = new_topic(cluster, "eos-in", PARTITIONS)
    sink, _ = new_topic(cluster, "eos-out", PARTITIONS)

    def kill_writers_coordinator(writer: TransactionalWriter, _: CopyingGroup) -> None:
        asked = next(iter(cluster.running()))
        _kill_and_restart(cluster, find_coordinator(cluster, asked, writer.transactional_id))

    def kill_groups_coordinator(_: TransactionalWriter, group: CopyingGroup) -> None:
        asked = next(iter(cluster.running()))
        _kill_and_restart(cluster, find_coordinator(cluster, asked, group.group_id, GROUP_KEY))

    faults = [kill_writers_coordinator, kill_groups_coordinator]
    _assert_exactly_once(_pipeline_through(cluster.bootstrap, source, sink, faults))


def test_a_copying_pipeline_stays_exactly_once_while_every_connection_is_reset(
    healthy_cluster: LocalCluster,
) -> None:
    """Three times, every connection to the brokers is reset at once with requests in flight: the
    clients' (the writer's, each copier's producer and consumer) and the brokers' own (transaction
    markers). A request already read runs to its end at the broker, its answer lost; the clients'
    retries on new connections must find what it did, never half of it."""
    cluster = healthy_cluster
    source, _ = new_topic(cluster, "eos-reset-in", PARTITIONS)
    sink, _ = new_topic(cluster, "eos-reset-out", PARTITIONS)

    def reset(*_: object) -> None:
        try:
            assert cluster.reset_connections() > 0
        except ConnectionResetUnavailable as exc:
            pytest.skip(f"cannot reset connections here: {exc}")

    _assert_exactly_once(_pipeline_through(cluster.bootstrap, source, sink, [reset] * 3))


def test_a_copying_pipeline_stays_exactly_once_while_postgresql_restarts(
    tmp_path: Path, own_postgres: PostgresServer, seaweedfs: SeaweedFS
) -> None:
    url = own_postgres.create_database("exactly_once")
    cluster = one_broker(tmp_path / "cluster", url, s3_settings_of(seaweedfs, "eos"), wal="shared")
    try:
        bootstrap = cluster.brokers[1].bootstrap
        for topic in ("eos-in", "eos-out"):
            create_topic(bootstrap, topic, PARTITIONS)
        restarts: list[Fault] = [lambda *_: own_postgres.restart()] * 5
        _assert_exactly_once(_pipeline_through(bootstrap, "eos-in", "eos-out", restarts))
    finally:
        cluster.stop_all()
