"""``tabletopic cluster up`` as a supervisor: a broker that ended with EXIT_REJOIN (it left the
cluster, its shared WAL taken over while it was paused) is started again by itself; a broker that
crashed otherwise is reported with how to restart it, and left alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tabletopic.cluster.local import LocalCluster, NodeProcess
from tabletopic.config import EXIT_REJOIN


def _exited(code: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    process.wait(30)
    return process


def _broker(tmp_path: Path, node_id: int) -> NodeProcess:
    return NodeProcess(
        node_id=node_id,
        data_dir=tmp_path / f"broker-{node_id}",
        settings={},
        kafka_port=9092 + node_id,
        admin_port=0,
        registry_port=0,
        catalog_port=0,
    )


def test_a_broker_that_left_the_cluster_is_started_again_and_a_crashed_one_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = LocalCluster(tmp_path)
    left, crashed = _broker(tmp_path, 1), _broker(tmp_path, 2)
    left.data_dir.mkdir()
    left.log_path.write_text("... its shared WAL was taken over by another broker\n")
    left.process, crashed.process = _exited(EXIT_REJOIN), _exited(1)
    cluster.brokers = {1: left, 2: crashed}
    started: list[int] = []
    monkeypatch.setattr(NodeProcess, "start", lambda self, timeout=90.0: started.append(self.node_id) or self)

    messages = dict(cluster.check_brokers())

    assert started == [1]
    assert messages[1] == (
        "broker 1 started again to rejoin the cluster it had left. Its last log line: "
        "... its shared WAL was taken over by another broker"
    )
    assert "exited with code 1" in messages[2] and "tabletopic cluster restart 2" in messages[2]
    assert cluster.check_brokers() == []  # each exit is reported once
