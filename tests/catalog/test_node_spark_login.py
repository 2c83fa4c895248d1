"""A node with ``authentication.method=BASIC`` guards its built-in REST catalog, and its own Spark
session goes through that catalog: ingest jobs run on Spark (every job over
``table.job.local.max.bytes``) and ``tabletopic sql``. The session was given no credentials, so
every one of those jobs failed with ``NotAuthorizedException`` and the table topic stayed
``STARTING``. The node now hands its Spark a bearer token of its own (``token`` in the catalog's
Spark configuration), which only this node's catalog accepts.

Spark here is the test run's one session, with the node's catalog configuration registered under a
fresh name: the same properties the node's own session starts with."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from tabletopic import database
from tabletopic.broker.security.http_auth import BrokerHttpSecurity
from tabletopic.broker.security.store import SecurityStore
from tabletopic.catalog.adapters import catalog_spec, spark_catalog_conf, spark_catalog_properties
from tabletopic.catalog.component import CatalogComponent
from tabletopic.cli_common import HTTP_PASSWORD_ENV, HTTP_USER_ENV
from tabletopic.config import Config
from tabletopic.spark.cli import reachable_spec
from tabletopic.spark.session import register_catalogs
from tests.support.tls_certs import TestCA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]


def _config(tmp_path: Path, **extra: str) -> Config:
    values = {
        "data.dir": str(tmp_path),
        "catalog.listener": "http://127.0.0.1:0",
        "authentication.method": "BASIC",
        "sasl.plain.users": "admin:admin-secret",
    }
    return Config({**values, **extra})


async def _started(config: Config) -> CatalogComponent:
    engine = database.create_engine(database.default_url(config.data_dir))
    SecurityStore(engine).migrate()  # what the broker does at start: the SCRAM users' tables
    component = CatalogComponent(config, engine, http_security=BrokerHttpSecurity(config, engine))
    await component.start()
    return component


@pytest.fixture
async def guarded_catalog(tmp_path: Path) -> AsyncIterator[CatalogComponent]:
    component = await _started(_config(tmp_path))
    yield component
    await component.stop()


def _renamed(conf: dict[str, str], name: str) -> dict[str, str]:
    """The node's catalog configuration under another catalog name."""
    prefix = "spark.sql.catalog.tabletopic"
    return {key.replace(prefix, f"spark.sql.catalog.{name}"): value for key, value in conf.items()}


async def _sql(spark: SparkSession, statement: str) -> list[Any]:
    """Run on a thread: the catalog Spark calls is served by this test's event loop."""
    return await asyncio.to_thread(lambda: spark.sql(statement).collect())


async def test_the_nodes_spark_reaches_its_guarded_catalog_with_a_token_of_its_own(
    guarded_catalog: CatalogComponent, spark: SparkSession, spark_catalog_name: str
) -> None:
    uri, conf = guarded_catalog.rest_uri, guarded_catalog.spark_conf
    assert uri is not None
    token = conf["spark.sql.catalog.tabletopic.token"]
    async with httpx.AsyncClient(base_url=uri) as client:
        assert (await client.get("/v1/config")).status_code == 401
        assert (
            await client.get("/v1/config", headers={"Authorization": f"Bearer {token}"})
        ).status_code == 200

    register_catalogs(spark, _renamed(conf, spark_catalog_name))
    await _sql(spark, f"CREATE NAMESPACE {spark_catalog_name}.db")
    await _sql(spark, f"CREATE TABLE {spark_catalog_name}.db.t (a BIGINT) USING iceberg")
    await _sql(spark, f"INSERT INTO {spark_catalog_name}.db.t VALUES (1), (2), (3)")

    assert (await _sql(spark, f"SELECT count(*) FROM {spark_catalog_name}.db.t"))[0][0] == 3
    assert guarded_catalog.catalog.load_table("db.t").scan().to_arrow().num_rows == 3


async def test_without_the_token_spark_is_refused(
    guarded_catalog: CatalogComponent, spark: SparkSession, spark_catalog_name: str
) -> None:
    conf = _renamed(guarded_catalog.spark_conf, spark_catalog_name)
    register_catalogs(spark, {k: v for k, v in conf.items() if not k.endswith(".token")})

    with pytest.raises(Exception, match="NotAuthorized"):
        await _sql(spark, f"SHOW NAMESPACES IN {spark_catalog_name}")


async def test_another_authenticators_node_token_is_refused(
    guarded_catalog: CatalogComponent, tmp_path: Path
) -> None:
    """The token carries a nonce of the authenticator that issued it: a token made with the same
    signing key by another service, node or restart opens nothing here."""
    config = _config(tmp_path / "other")
    other = BrokerHttpSecurity(config, database.create_engine(database.default_url(tmp_path))).authenticator()
    assert other is not None
    uri = guarded_catalog.rest_uri
    assert uri is not None
    async with httpx.AsyncClient(base_url=uri) as client:
        answer = await client.get("/v1/config", headers={"Authorization": f"Bearer {other.node_token()}"})
    assert answer.status_code == 401


async def test_the_nodes_spark_reaches_an_https_catalog_on_loopback(
    tmp_path: Path, spark: SparkSession, spark_catalog_name: str
) -> None:
    """The hardening checklist puts the catalog on HTTPS with a certificate of a private CA, which
    the node's JVM does not trust: every Spark ingest job failed with "PKIX path building failed".
    The node's Spark reaches the same catalog on a loopback listener instead, guarded alike."""
    ca = TestCA(tmp_path / "ca")
    server = ca.issue("localhost", server=True)
    config = _config(
        tmp_path, **{"catalog.listener": "https://127.0.0.1:0", "ssl.keystore.location": str(server.combined)}
    )
    component = await _started(config)
    try:
        public, conf = component.rest_uri, component.spark_conf
        loopback = conf["spark.sql.catalog.tabletopic.uri"]
        assert public is not None and public.startswith("https://")
        assert loopback.startswith("http://127.0.0.1:") and loopback != public
        async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(ca.cert))) as client:
            assert (await client.get(f"{public}/v1/config")).status_code == 401  # the listener as it was
            assert (await client.get(f"{loopback}/v1/config")).status_code == 401  # guarded alike

        register_catalogs(spark, _renamed(conf, spark_catalog_name))
        await _sql(spark, f"CREATE NAMESPACE {spark_catalog_name}.db")
        await _sql(spark, f"CREATE TABLE {spark_catalog_name}.db.t AS SELECT 1 AS a")
        assert (await _sql(spark, f"SELECT count(*) FROM {spark_catalog_name}.db.t"))[0][0] == 1
    finally:
        await component.stop()


async def test_spark_started_by_the_cli_logs_in_to_a_guarded_catalog_as_the_http_user(
    guarded_catalog: CatalogComponent,
    spark: SparkSession,
    spark_catalog_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``tabletopic sql`` and ``tables verify --engine spark`` start Spark in the CLI when no admin
    API answers. Given TABLETOPIC_HTTP_USER and TABLETOPIC_HTTP_PASSWORD, that Spark logs in to the
    node's guarded catalog (Iceberg's REST ``credential``: a token from ``/v1/oauth/tokens``);
    without them the command serves the catalog itself and says why. It used to do that even with
    a login at hand."""
    uri = guarded_catalog.rest_uri
    assert uri is not None
    config = _config(tmp_path, **{"catalog.listener": uri})  # the node, as the CLI reads its settings
    monkeypatch.setenv(HTTP_USER_ENV, "admin")
    monkeypatch.setenv(HTTP_PASSWORD_ENV, "admin-secret")
    with ExitStack() as stack:  # on a thread: the catalog is served by this test's event loop
        spec = await asyncio.to_thread(reachable_spec, config, catalog_spec(config), stack)
    properties = spark_catalog_properties(spec)
    assert spec.rest_uri == uri and properties["credential"] == "admin:admin-secret"
    assert properties["oauth2-server-uri"] == f"{uri.rstrip('/')}/v1/oauth/tokens"
    assert "admin-secret" not in repr(spec)
    guarded_catalog.catalog.create_namespace("cli_db")
    register_catalogs(spark, spark_catalog_conf(spark_catalog_name, properties))
    # admin has the read-only role (no http.readwrite.users): enough to read, refused a write.
    assert [row[0] for row in await _sql(spark, f"SHOW NAMESPACES IN {spark_catalog_name}")] == ["cli_db"]
    with pytest.raises(Exception, match="read-only role"):
        await _sql(spark, f"CREATE NAMESPACE {spark_catalog_name}.other")

    monkeypatch.delenv(HTTP_USER_ENV)
    with ExitStack() as stack:
        served = await asyncio.to_thread(reachable_spec, config, catalog_spec(config), stack)
        assert served.rest_uri != uri and served.rest_credential is None
    said = capsys.readouterr().err
    assert f"the catalog at {uri} asks for a login (set {HTTP_USER_ENV}" in said, said
