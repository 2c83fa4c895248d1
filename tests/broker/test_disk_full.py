"""A single node whose disk fills up under an acks=all producer, as an outsider meets it: the node
stays up and says why in one line, not hundreds, ``/health`` answers 503 with the reason (what a
liveness probe restarts on), and once there is space a restart holds every acknowledged record
exactly once and takes writes again.

The disk is a small tmpfs mounted for the test (tests/support/small_disk.py); the node's log is
kept off it, as an operator's would be.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess
from tests.support.small_disk import mount_tmpfs, unmount
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 3
DISK_MB = 40


@dataclass
class LoggedElsewhere(BrokerProcess):
    """A node whose log is written beside its data directory, not inside it (on the full disk)."""

    log_file: Path = Path()

    @property
    def log_path(self) -> Path:
        return self.log_file


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    refused = mount_tmpfs(disk, f"{DISK_MB}m")
    if refused is not None:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root and CAP_SYS_ADMIN): {refused}")
    try:
        yield disk
    finally:
        unmount(disk)


def test_a_full_disk_refuses_writes_says_so_once_and_loses_nothing_acknowledged(
    small_disk: Path, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    node = LoggedElsewhere(
        small_disk / "node", {"s3stream.wal.segment.bytes": str(4 << 20)}, log_file=tmp_path / "node.log"
    ).start()
    try:
        topic = f"full-{uuid.uuid4().hex[:8]}"
        clients.create_topic(node.bootstrap, topic, PARTITIONS)
        acknowledged: list[bytes] = []
        failed: Counter[str] = Counter()
        lock = threading.Lock()
        producer = Producer(
            {
                "bootstrap.servers": node.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 5000,
            }
        )

        def on_delivery(err: object, message: object) -> None:
            with lock:
                if err:
                    failed[str(err.name())] += 1  # type: ignore[attr-defined]
                else:
                    acknowledged.append(message.value())  # type: ignore[attr-defined]

        padding = b"x" * 1000
        sent = 0

        def disk_full() -> bool:
            nonlocal sent
            for _ in range(500):
                try:
                    producer.produce(
                        topic, b"%010d" % sent + padding, partition=sent % PARTITIONS, on_delivery=on_delivery
                    )
                    sent += 1
                except BufferError:
                    break
            producer.poll(0.01)
            return bool(failed)

        # 40 MB of disk against 1 kB records: the node meets the end of it within seconds.
        wait_until_sync(disk_full, timeout=90, interval=0)
        producer.flush(30)
        assert acknowledged, node.log_tail()
        health = wait_until_sync(lambda: _health(node, 503), timeout=30)
        assert "No space left on device" in health["reason"], health
        # Still up, and still answering: Metadata and reads of what it holds.
        assert node.process is not None and node.process.poll() is None
        log = node.log_path.read_text(errors="replace")
        # Every refused append was counted, a handful of lines said so (not one line an append).
        assert log.count("append to ") <= 5, log.count("append to ")
        assert log.count("failed; the store stops accepting appends until the node is restarted") == 1

        # The operator makes room and restarts the node, as its liveness probe would.
        assert mount_tmpfs(small_disk, "400m", remount=True) is None
        node.stop()
        node.start()
        assert wait_until_sync(lambda: _health(node, 200))["status"] == "ok"
        got = clients.confluent_consume(node.bootstrap, topic, PARTITIONS, len(acknowledged))
        values = Counter(value for _, _, value, _ in got)
        assert not [v for v, n in values.items() if n > 1]
        assert not set(acknowledged) - set(values)
        # Writes are taken again.
        clients.confluent_produce(
            node.bootstrap, topic, clients.make_messages(100, PARTITIONS, "after"), "none", True
        )
    finally:
        node.stop()


def _health(node: BrokerProcess, status: int) -> dict[str, str] | None:
    """The node's ``/health`` body if it answers ``status``, else None (wait_until's condition)."""
    answer = httpx.get(f"{node.admin_url}/health", timeout=10)
    return answer.json() if answer.status_code == status else None
