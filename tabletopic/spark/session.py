"""The one SparkSession of a process: Spark 3.5 with Iceberg, on loopback, configured from tabletopic's
configuration.

Starting a JVM costs seconds and hundreds of MB, so a process (a node, ``tabletopic sql``, a test run)
builds exactly one session, lazily, on first use; later callers that need another catalog add it to
the running session (``spark.sql.catalog.<new name>`` can be set at run time) instead of starting a
second one. Every jar comes from PyPI (see :mod:`tabletopic.spark.jars`), none from Maven.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from tabletopic.catalog.adapters import SPARK_CATALOG_CLASS
from tabletopic.config import REGISTRY, Config
from tabletopic.spark import jars
from tabletopic.spark import settings as spark_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tabletopic.catalog.component import CatalogComponent

log = logging.getLogger(__name__)
# Quiet JVM start-up (no default-profile banner, no native-hadoop warning): tabletopic's own log4j2 file.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

_lock = threading.Lock()
_session: SparkSession | None = None
_started_in: float | None = None


def use_s3a(config: Config, catalog_conf: Mapping[str, str]) -> bool:
    """Whether to put the s3a connector on the classpath (it cannot be added once the JVM runs)."""
    mode = config.get(spark_settings.SPARK_S3A)
    if mode == "never":
        return False
    if mode == "always":
        return True
    uses_s3 = any(".hadoop.fs.s3a." in key or key.startswith("spark.hadoop.fs.s3a.") for key in catalog_conf)
    uses_s3 = uses_s3 or any(
        str(value).startswith(("s3://", "s3a://"))
        for key, value in catalog_conf.items()
        if key.endswith(".warehouse")
    )
    return uses_s3 or jars.cached_s3a_jars() is not None


def spark_conf(
    config: Config,
    catalog_conf: Mapping[str, str] | None = None,
    default_catalog: str | None = None,
) -> dict[str, str]:
    """Every Spark property of the session (pure: builds the dict, starts nothing).

    Args:
        config: the node configuration (``spark.*`` keys, ``data.dir``).
        catalog_conf: ``spark.sql.catalog.<name>.*`` entries
            (e.g. :attr:`~tabletopic.catalog.component.CatalogComponent.spark_conf`).
        default_catalog: catalog that unqualified names resolve in (``spark.sql.defaultCatalog``).

    Raises:
        tabletopic.spark.jars.JarNotFoundError: a required jar is missing.
    """
    catalog_conf = dict(catalog_conf or {})
    local_ip = config.get(spark_settings.SPARK_LOCAL_IP)
    jar_paths = [str(jars.iceberg_runtime_jar())]
    s3a = use_s3a(config, catalog_conf)
    if s3a:
        jar_paths += [str(path) for path in jars.ensure_s3a_jars()]
    conf: dict[str, str] = {
        "spark.app.name": "tabletopic",
        "spark.master": config.get(spark_settings.SPARK_MASTER),
        "spark.driver.memory": config.get(spark_settings.SPARK_DRIVER_MEMORY),
        "spark.ui.enabled": str(config.get(spark_settings.SPARK_UI_ENABLED)).lower(),
        "spark.sql.shuffle.partitions": str(config.get(spark_settings.SPARK_SHUFFLE_PARTITIONS)),
        "spark.driver.host": local_ip,
        "spark.driver.bindAddress": local_ip,
        "spark.jars": ",".join(jar_paths),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        # No Hive support and no Derby in the working directory; Spark's own warehouse (for non-Iceberg
        # temp tables) lives under the data dir.
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": (config.data_dir / "spark-warehouse").as_uri(),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": "-Dderby.system.home="
        + str(config.data_dir / "derby")
        + f" -Dlog4j.configurationFile={LOG4J_CONFIG.as_uri()}",
    }
    if s3a:
        conf["spark.hadoop.fs.s3.impl"] = "org.apache.hadoop.fs.s3a.S3AFileSystem"
        conf["spark.hadoop.fs.s3a.directory.marker.retention"] = "keep"
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
    conf.update(passthrough_conf(config))
    conf.update(catalog_conf)
    if default_catalog:
        conf["spark.sql.defaultCatalog"] = default_catalog
    return conf


def passthrough_conf(config: Config) -> dict[str, str]:
    """``spark.*`` keys the user set that tabletopic does not declare itself: Spark's to interpret."""
    # Declared keys (the Spark-native ones are mapped explicitly in spark_conf) are excluded.
    return {
        f"spark.{key}": value
        for key, value in config.prefixed("spark.").items()
        if f"spark.{key}" not in REGISTRY
    }


def get_spark(
    config: Config | None = None,
    catalog_conf: Mapping[str, str] | None = None,
    default_catalog: str | None = None,
) -> SparkSession:
    """The process's SparkSession, started on first call.

    Later calls return the same session; catalogs in ``catalog_conf`` it does not have yet are added at
    run time (``default_catalog`` then only applies if the session is new — use
    ``spark.catalog.setCurrentCatalog`` otherwise).
    """
    global _session, _started_in
    with _lock:
        # A session stopped behind our back (spark.stop()) has lost its JVM context: build anew.
        if _session is not None and _session.sparkContext._jsc is not None:
            if catalog_conf:
                register_catalogs(_session, catalog_conf)
            return _session
        config = config if config is not None else Config()
        conf = spark_conf(config, catalog_conf, default_catalog)
        started = time.monotonic()
        _session = _build(conf, config.get(spark_settings.SPARK_LOCAL_IP))
        _started_in = time.monotonic() - started
        log.info(
            "Spark %s session started in %.1fs (master %s)",
            _session.version,
            _started_in,
            conf["spark.master"],
        )
        return _session


def _build(conf: Mapping[str, str], local_ip: str) -> SparkSession:
    # Before the JVM starts: loopback only, and Python workers run this interpreter (the venv).
    os.environ.setdefault("SPARK_LOCAL_IP", local_ip)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def register_catalogs(spark: SparkSession, catalog_conf: Mapping[str, str]) -> None:
    """Add catalogs to a running session.

    Spark instantiates a catalog on first use and caches it, so a name already configured keeps its
    first definition; re-registering it with different properties is logged and ignored.
    """
    names = {key.split(".")[3] for key in catalog_conf if key.startswith("spark.sql.catalog.")}
    for name in names:
        prefix = f"spark.sql.catalog.{name}"
        existing = spark.conf.get(prefix, None)
        if existing is not None:
            changed = [
                k for k, v in catalog_conf.items() if k.startswith(prefix) and spark.conf.get(k, None) != v
            ]
            if changed:
                log.warning("Spark catalog %s is already configured; ignoring changes to %s", name, changed)
            continue
        for key, value in catalog_conf.items():
            if key.startswith(prefix + ".") and key != prefix:
                spark.conf.set(key, value)
        spark.conf.set(prefix, catalog_conf.get(prefix, SPARK_CATALOG_CLASS))
    for key, value in catalog_conf.items():
        if not key.startswith("spark.sql.catalog."):
            spark.conf.set(key, value)


def session_start_seconds() -> float | None:
    """How long the current session took to start (for benches and logs)."""
    return _started_in


def stop_spark() -> None:
    """Stop the process's session (the next :func:`get_spark` starts a new one)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None


def node_spark(config: Config, catalog: CatalogComponent) -> SparkSession:
    """The session for code running inside a node (the ingest job, maintenance): the process's one
    session with the node's catalog registered and, if the session is new, made the default.

    Requires the catalog component to have started.
    """
    return get_spark(config, catalog.spark_conf, catalog.spec.name)
