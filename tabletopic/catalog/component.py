"""The catalog subsystem inside ``tabletopic serve``.

On start it opens the platform's pyiceberg catalog, serves it over the built-in REST catalog when
Spark reaches it that way, and offers the parts above it:

* :attr:`CatalogComponent.catalog`: the pyiceberg ``Catalog`` (in-process; for ``builtin`` this is
  the very SqlCatalog the REST server fronts, so both paths share one commit protocol);
* :attr:`CatalogComponent.spec`: the resolved :class:`~tabletopic.catalog.adapters.CatalogSpec`;
* :attr:`CatalogComponent.spark_conf`: ``spark.sql.catalog.<name>.*`` entries for Spark;
* :attr:`CatalogComponent.rest_uri`: the built-in REST endpoint (or ``None``).

The REST server runs on the node's event loop, and Spark in the same process reaches the catalog
through it: run Spark work in a thread (``asyncio.to_thread``), never on the loop, or Spark's first
catalog call waits for a loop that is waiting for Spark.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from sqlalchemy.engine import Engine

from tabletopic.catalog import settings as catalog_settings
from tabletopic.catalog.adapters import (
    CatalogSpec,
    catalog_spec,
    create_catalog,
    spark_catalog_conf,
    spark_catalog_properties,
)
from tabletopic.catalog.backends import SparkAccess
from tabletopic.catalog.rest import CatalogService, create_app
from tabletopic.component import Started, started
from tabletopic.config import Config
from tabletopic.http_auth import ICEBERG_REST, HttpAuthenticator, HttpSecurity

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from tabletopic.http_service import HttpService

log = logging.getLogger(__name__)


def rest_app_for(catalog: Catalog, spec: CatalogSpec, max_page_size: int = 1000) -> FastAPI:
    """The REST app fronting ``catalog``; loaded tables carry the catalog's ``s3.*`` FileIO settings so
    pyiceberg clients of the REST catalog can read the data files with no configuration of their own."""
    table_config = {k: v for k, v in spec.properties.items() if k.startswith("s3.")}
    return create_app(CatalogService(catalog, table_config, max_page_size, spec.warehouse))


def advertised_uri(listener: str, bound_port: int) -> str:
    """The URI clients use for a listener: the port actually bound (a listener may say port 0) and a
    connectable host (a wildcard bind address is reachable locally as loopback)."""
    from tabletopic.http_service import parse_listener

    host, _port = parse_listener(listener)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    scheme = "https" if listener.lower().startswith("https://") else "http"
    return f"{scheme}://{host}:{bound_port}"


@dataclass(eq=False)
class CatalogComponent:
    """Opens the catalog and runs the built-in REST catalog server (see module docstring), guarded by
    the node's :class:`~tabletopic.http_auth.HttpSecurity`."""

    name = "catalog"

    config: Config
    engine: Engine
    _: KW_ONLY
    http_security: HttpSecurity
    _http: HttpService | None = field(default=None, init=False)
    # Where the node's Spark reaches an HTTPS catalog.
    _loopback: HttpService | None = field(default=None, init=False)
    _catalog: Catalog | None = field(default=None, init=False)
    _spec: CatalogSpec | None = field(default=None, init=False)
    _spark_conf: dict[str, str] | None = field(default=None, init=False)

    catalog = Started["Catalog"]("catalog")  # the opened pyiceberg catalog
    spec = Started[CatalogSpec]("catalog spec")  # resolved, with the REST URI actually bound

    @property
    def spark_conf(self) -> dict[str, str]:
        """``spark.sql.catalog.<name>.*`` entries that give Spark this catalog (resolved once at
        start, as before: every ingest job asks for them)."""
        return dict(started(self._spark_conf, self.name, "Spark catalog configuration"))

    @property
    def rest_uri(self) -> str | None:
        """The built-in REST catalog's endpoint, when Spark goes through it."""
        spec = self.spec
        return spec.rest_uri if spec.fronted_by_rest else None

    async def start(self) -> None:
        config = self.config
        spec = catalog_spec(config)
        # Opening may talk to a remote metastore or migrate the metadata DB: keep it off the loop.
        catalog = await asyncio.to_thread(create_catalog, spec, self.engine)
        self._catalog = catalog
        listener = config.get(catalog_settings.CATALOG_LISTENER)
        spark_spec = spec
        authenticator: HttpAuthenticator | None = None
        if spec.fronted_by_rest and listener:
            app = rest_app_for(catalog, spec, config.get(catalog_settings.CATALOG_PAGE_SIZE))
            authenticator = self.http_security.authenticator()
            served = authenticator.wrap(app, ICEBERG_REST) if authenticator is not None else app
            tls = self.http_security.https_options(listener)
            self._http = await self._serve(served, listener, tls)
            if not config.get(catalog_settings.CATALOG_ADVERTISED_URI):
                spec = spark_spec = spec.with_rest_uri(advertised_uri(listener, self._http.port))
            if tls:
                # The node's Spark (a JVM) does not trust the CA of the node's own certificate, a
                # private one as a rule: it reaches the same catalog on loopback, where nothing
                # leaves the machine, guarded as the listener is.
                self._loopback = await self._serve(served, "http://127.0.0.1:0", {})
                spark_spec = spec.with_rest_uri(f"http://127.0.0.1:{self._loopback.port}")
        spark_properties = spark_catalog_properties(spark_spec)
        if spec.fronted_by_rest and authenticator is not None:
            spark_properties["token"] = authenticator.node_token()  # the node's Spark logs in too
        self._spark_conf = spark_catalog_conf(spec.name, spark_properties)
        self._spec = spec
        log.info(
            "Iceberg catalog %s (%s) ready; Spark reaches it %s",
            spec.name,
            spec.type,
            "through " + str(spark_spec.rest_uri) if spec.spark_access is SparkAccess.REST else "directly",
        )

    async def _serve(self, app: object, listener: str, tls: dict[str, Any]) -> HttpService:
        """One listener of the REST catalog, started."""
        from tabletopic.http_service import HttpService

        service = HttpService(
            "Iceberg REST catalog", app, listener, key=catalog_settings.CATALOG_LISTENER.name, tls=tls
        )
        await service.start()
        return service

    async def stop(self) -> None:
        for service in (self._http, self._loopback):
            if service is not None:
                await service.stop()
        self._http = self._loopback = None
        if self._catalog is not None:
            close = getattr(self._catalog, "close", None)
            if close is not None:
                close()
            self._catalog = None
