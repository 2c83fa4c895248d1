"""kill -9 of the broker in the middle of a transaction: after the restart the transaction is
aborted (left open) or completed (its markers were being written), never half visible."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from tabletopic.crashpoints import ENV
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_clients import create_topic, read_isolated, started_transactional_producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def crash_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "txn-crash", {"admin.listener": ""})
    yield process
    process.stop()


def test_open_transaction_is_aborted_after_sigkill(crash_broker: BrokerProcess) -> None:
    crash_broker.start()
    topic = f"txcrash-{uuid.uuid4().hex[:8]}"
    create_topic(crash_broker.bootstrap, topic, 2)
    producer = started_transactional_producer(crash_broker.bootstrap, "crash-open")
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"open-{i}".encode(), partition=i % 2)
    producer.flush(30)
    crash_broker.kill()
    crash_broker.start()
    plain = Producer({"bootstrap.servers": crash_broker.bootstrap})
    plain.produce(topic, b"after-restart", partition=0)
    plain.flush(30)
    # Aborted, and no longer holding back the last stable offset.
    assert read_isolated(crash_broker.bootstrap, topic, 2, "read_committed", 1) == [b"after-restart"]
    assert len(read_isolated(crash_broker.bootstrap, topic, 2, "read_uncommitted", 7)) == 7


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_transaction_ended_but_interrupted_while_writing_markers_is_finished_after_restart(
    crash_broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch, commit: bool
) -> None:
    # EndTxn is answered once the Prepare state is durable and the markers follow: the broker dies
    # right after the first marker, before or after the client got its answer.
    monkeypatch.setenv(ENV, "transaction.marker")
    crash_broker.start()
    topic = f"txmark-{uuid.uuid4().hex[:8]}"
    create_topic(crash_broker.bootstrap, topic, 2)
    producer = Producer(
        {
            "bootstrap.servers": crash_broker.bootstrap,
            "transactional.id": f"crash-{'commit' if commit else 'abort'}",
            "transaction.timeout.ms": 60_000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"ended-{i}".encode(), partition=i % 2)
    producer.flush(30)
    with contextlib.suppress(KafkaException):
        if commit:
            producer.commit_transaction(5)
        else:
            producer.abort_transaction(5)
    assert crash_broker.process is not None
    assert crash_broker.process.wait(30) != 0
    crash_broker.process = None
    monkeypatch.delenv(ENV)
    crash_broker.start()
    if commit:
        values = read_isolated(crash_broker.bootstrap, topic, 2, "read_committed", 6)
        assert sorted(values) == sorted(f"ended-{i}".encode() for i in range(6))
    else:
        plain = Producer({"bootstrap.servers": crash_broker.bootstrap})
        plain.produce(topic, b"after-restart", partition=1)
        plain.flush(30)
        assert read_isolated(crash_broker.bootstrap, topic, 2, "read_committed", 1) == [b"after-restart"]
