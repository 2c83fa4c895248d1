"""``tabletopic topics`` against the running broker."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.integration


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tabletopic", "topics", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_create_list_describe_alter_delete(bootstrap: str) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    created = _cli(bootstrap, "create", name, "--partitions", "3", "--config", "retention.ms=123456")
    assert created.returncode == 0, created.stderr
    listed = _cli(bootstrap, "list")
    assert f"{name}\t3" in listed.stdout
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(name, value=b"v%d" % i, partition=2)
    assert producer.flush(30) == 0
    described = _cli(bootstrap, "describe", name)
    assert described.returncode == 0, described.stderr
    # One aligned row a partition: partition, leader, log start, high watermark.
    cells = [line.split() for line in described.stdout.splitlines()]
    rows = [c for c in cells if c[:1] in (["0"], ["1"], ["2"])]
    assert [(r[0], r[2], r[3]) for r in rows] == [("0", "0", "0"), ("1", "0", "0"), ("2", "0", "3")]
    assert "retention.ms=123456  (set)" in described.stdout
    altered = _cli(
        bootstrap, "alter-config", name, "--set", "retention.bytes=1000", "--delete", "retention.ms"
    )
    assert altered.returncode == 0, altered.stderr
    described = _cli(bootstrap, "describe", name).stdout
    assert "retention.bytes=1000  (set)" in described
    assert "retention.ms=123456" not in described
    assert _cli(bootstrap, "delete", name).returncode == 0
    assert f"{name}\t" not in _cli(bootstrap, "list").stdout


def test_bad_config_fails_with_the_broker_reason(bootstrap: str) -> None:
    result = _cli(bootstrap, "create", f"cli-{uuid.uuid4().hex[:8]}", "--config", "no.such=1")
    assert result.returncode == 1
    assert "no.such" in result.stderr
