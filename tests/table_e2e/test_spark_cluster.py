"""A Spark standalone cluster (master + one worker from pyspark's own jars, on loopback) running
the ingest job of a node configured with ``spark.master=spark://...``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port, wait_for_port
from tests.support.table_node import SPARK_NODE_SETTINGS, TableNode, assert_exactly_once, table_configs
from tests.support.table_producers import produce
from tests.support.waiting import wait_until_sync

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]


def _java(main: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    import pyspark

    home = Path(pyspark.__file__).parent
    jars = home / "jars"
    # The worker builds each executor's classpath from SPARK_HOME/jars; without a Scala version it
    # looks for a source build's target directories ("Cannot find any build directories").
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        SPARK_SCALA_VERSION="2.12",
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        # Scratch (each executor's copy of the jars, 230 MB) beside the log, not in /tmp: an executor
        # killed with its process group never removes its own.
        SPARK_LOCAL_DIRS=str(log.parent / "local"),
    )
    return subprocess.Popen(
        ["java", "-Xmx256m", "-cp", f"{jars}/*", main, *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[str]:
    """``spark://127.0.0.1:P`` of a fresh master with one 1-core worker registered."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    master = _java(
        "org.apache.spark.deploy.master.Master",
        ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
        tmp_path / "master.log",
    )
    processes = [master]
    try:
        wait_for_port(port, 60)
        url = f"spark://127.0.0.1:{port}"
        processes.append(
            _java(
                "org.apache.spark.deploy.worker.Worker",
                [
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(tmp_path / "work"),
                ],
                tmp_path / "worker.log",
            )
        )

        def worker_alive() -> bool:  # the web UI (which reports workers) comes up after the RPC port
            state = httpx.get(f"http://127.0.0.1:{ui}/json/", timeout=5).json()
            return bool(state.get("aliveworkers", 0) >= 1)

        try:
            wait_until_sync(worker_alive, timeout=60, interval=0.5)
        except TimeoutError:
            pytest.fail(f"no worker registered:\n{(tmp_path / 'worker.log').read_text()[-3000:]}")
        yield url
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait(10)


def test_node_with_a_standalone_spark_master_ingests_a_topic(spark_cluster: str, tmp_path: Path) -> None:
    settings = {
        **SPARK_NODE_SETTINGS,
        "spark.master": spark_cluster,
        "spark.executor.memory": "512m",
        "spark.cores.max": "1",
        "table.job.local.max.bytes": "0",  # every job on the cluster, none in the node's helper
    }
    node = TableNode(tmp_path / "cluster-node", settings)
    try:
        node.start(timeout=180)
        topic = "cluster_events"
        node.create_topic(topic, table_configs(convert_value_type="string"), partitions=2)
        log = produce(node, topic, [f"e{i}".encode() for i in range(200)], partitions=2)
        node.wait_committed(topic, log.end_offsets(), timeout=400)
        assert_exactly_once(node.rows(topic), log)
        # The job ran on the cluster: the worker launched an executor for the node's application.
        assert any((tmp_path / "work").glob("app-*/*/stderr"))
        assert any((tmp_path / "local").glob("spark-*/executor-*"))  # its scratch, removed with tmp_path
    finally:
        node.kill()
