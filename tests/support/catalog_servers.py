"""Catalog servers for tests and benches: a Hive Metastore from pyspark's own jars (embedded Derby),
a moto server standing in for AWS Glue, and the built-in REST catalog on a throwaway database."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.ports import free_port, wait_for_port
from tests.support.processes import terminate

HIVE_SITE = """<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name>
    <value>jdbc:derby:;databaseName={db};create=true</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name>
    <value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>{warehouse}</value></property>
  <property><name>hive.async.log.enabled</name><value>false</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>true</value></property>
  <property><name>hive.metastore.schema.verification</name><value>false</value></property>
  <property><name>hive.metastore.event.db.notification.api.auth</name><value>false</value></property>
</configuration>
"""

# Hive 2.3 does not create its transaction/lock tables through DataNucleus; pyiceberg's HiveCatalog
# takes a lock on every commit (NEXT_LOCK_ID), so create them once with Hive's own helper.
PREP_TXN_SOURCE = """
public class PrepTxn {
    public static void main(String[] args) throws Exception {
        org.apache.hadoop.hive.conf.HiveConf conf = new org.apache.hadoop.hive.conf.HiveConf();
        org.apache.hadoop.hive.metastore.txn.TxnDbUtil.setConfValues(conf);
        org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(conf);
    }
}
"""


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


@dataclass
class HiveMetastore:
    """``org.apache.hadoop.hive.metastore.HiveMetaStore`` with embedded Derby on a loopback port."""

    directory: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> str:
        return (self.directory / "warehouse").as_uri()

    def start(self, timeout: float = 180.0) -> HiveMetastore:
        conf = self.directory / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (self.directory / "warehouse").mkdir(exist_ok=True)
        (conf / "hive-site.xml").write_text(
            HIVE_SITE.format(db=self.directory / "metastore_db", warehouse=self.warehouse)
        )
        (conf / "PrepTxn.java").write_text(textwrap.dedent(PREP_TXN_SOURCE))
        classpath = f"{conf}:{pyspark_jars()}/*"
        java_opts = ["-Xmx384m", "-XX:+UseSerialGC", f"-Dderby.system.home={self.directory}"]
        log = open(self.directory / "metastore.log", "ab")  # noqa: SIM115 - owned by the process
        subprocess.run(
            ["java", *java_opts, "-cp", classpath, str(conf / "PrepTxn.java")],
            cwd=self.directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=timeout,
        )
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                "java",
                *java_opts,
                "-cp",
                classpath,
                "org.apache.hadoop.hive.metastore.HiveMetaStore",
                "-p",
                str(self.port),
            ],
            cwd=self.directory,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for_port(self.port, timeout)
        except TimeoutError:
            self.stop()
            tail = (self.directory / "metastore.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"Hive metastore did not start:\n{tail}") from None
        return self

    def stop(self) -> None:
        terminate(self.process)
        self.process = None


@dataclass
class MotoServer:
    """``moto_server`` (AWS Glue, S3, STS mocks) on a loopback port."""

    directory: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> MotoServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        binary = Path(sys.executable).parent / "moto_server"
        command = [str(binary)] if binary.exists() else [sys.executable, "-m", "moto.server"]
        log = open(self.directory / "moto.log", "ab")  # noqa: SIM115 - owned by the process
        self.process = subprocess.Popen(
            [*command, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, **self.env),
        )
        wait_for_port(self.port, timeout)
        return self

    def glue_properties(self, warehouse: str) -> dict[str, Any]:
        """pyiceberg GlueCatalog properties pointing at this server."""
        return {
            "glue.endpoint": self.endpoint,
            "glue.region": "us-east-1",
            "glue.access-key-id": "testing",
            "glue.secret-access-key": "testing",
            "warehouse": warehouse,
        }

    def stop(self) -> None:
        terminate(self.process)
        self.process = None


def java_available() -> bool:
    return shutil.which("java") is not None
