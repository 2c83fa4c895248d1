"""``tabletopic cluster up`` starts a whole cluster (PostgreSQL, SeaweedFS, brokers) and stops it on
Ctrl-C; ``tabletopic cluster status`` shows brokers, leaders and coordinators."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cluster import wait_until
from tests.support.kafka_clients import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]


def test_cluster_up_prints_endpoints_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tabletopic", "cluster", "up", "--nodes", "2", "--racks", "a,b",
         "--base-port", "0", "--data-dir", str(tmp_path / "c"),
         "--override", "table.job.runner=inprocess"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, COLUMNS="400", PYTHONUNBUFFERED="1"),
    )  # fmt: skip
    assert process.stdout is not None
    output = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line, "cluster up exited:\n" + "".join(output)
            output.append(line)
            if "cluster is up" in line:
                break
        text = "".join(output)
        bootstrap = re.search(r"bootstrap servers: (\S+)", text)
        url = re.search(r"metadata.url:\s+(\S+)", text)
        assert bootstrap and url, text
        assert "broker 1 (rack a)" in text and "broker 2 (rack b)" in text
        create_topic(bootstrap.group(1), "orders", 4)

        def status() -> str:
            result = subprocess.run(
                [sys.executable, "-m", "tabletopic", "cluster", "status", "--metadata-url", url.group(1)],
                capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="400"),
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            return result.stdout

        report = wait_until(
            lambda: (s := status()) and s.count("orders ") == 4 and s, timeout=30, interval=0.5
        )
        assert re.search(r"^\s+1\s+a\s+1\s+yes", report, re.M), report
        assert re.search(r"^\s+2\s+b\s+1\s+yes", report, re.M), report
        assert "controller: broker" in report
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(90)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0
