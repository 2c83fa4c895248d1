"""How an operations command reaches a node's Kafka listener and Iceberg catalog from the node's
configuration (the same ``--data-dir``/``--config``/``--override`` the node was started with)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog

from tabletopic.broker.security.client_login import node_listener
from tabletopic.cli_common import (
    HTTP_PASSWORD_ENV,
    HTTP_USER_ENV,
    err_console,
    http_login,
    http_login_refused,
)
from tabletopic.config import Config

if TYPE_CHECKING:
    from tabletopic.table.convert.rows import RecordConverter
    from tabletopic.table.table_config import TableTopicConfig


def bootstrap_servers(cfg: Config) -> str:
    """``host:port`` of the node's PLAINTEXT listener (advertised one first)."""
    return node_listener(cfg).address


def rest_answer(uri: str, timeout: float = 1.0) -> int | None:
    """The HTTP status a REST catalog at ``uri`` answers ``GET /v1/config`` with; None when nothing
    answers there (a 401 is a catalog that asks for a login, not a missing one)."""
    import httpx

    try:
        return httpx.get(f"{uri}/v1/config", timeout=timeout).status_code
    except httpx.HTTPError:
        return None


@dataclass(frozen=True, slots=True)
class CatalogReach:
    """How a command reaches the node's REST catalog: ``usable`` as it is, or with ``credential``
    (``user:password``, Iceberg's REST ``credential``) when it asks for a login; not usable when
    nothing answers, or when it asks for a login (``asks_login``) and none is set."""

    usable: bool
    credential: str | None = None
    asks_login: bool = False

    def why_not(self, uri: str | None) -> str:
        if self.asks_login:
            return (
                f"the catalog at {uri} asks for a login (set {HTTP_USER_ENV} and {HTTP_PASSWORD_ENV} "
                f"to go through it)"
            )
        return f"no catalog server at {uri}"


def reach_rest_catalog(uri: str | None) -> CatalogReach:
    """Ask the REST catalog at ``uri``: usable when it answers; when it asks for a login
    (``authentication.method=BASIC``), usable as the HTTP user of ``TABLETOPIC_HTTP_USER`` if one is
    set (the commands and the CLI's Spark get a token with it)."""
    answer = rest_answer(uri) if uri else None
    if answer == 200:
        return CatalogReach(usable=True)
    if answer == 401:
        login = http_login()
        if login is None:
            return CatalogReach(usable=False, asks_login=True)
        return CatalogReach(usable=True, credential=":".join(login))
    return CatalogReach(usable=False)


def open_catalog(cfg: Config, stack: ExitStack) -> Catalog:
    """The node's catalog: through its REST endpoint when the node serves one, else opened directly
    (the built-in catalog from the metadata database), so the commands work on a stopped node too."""
    from pyiceberg.catalog import load_catalog

    from tabletopic.catalog.adapters import catalog_spec, create_catalog
    from tabletopic.catalog.backends import CatalogKind

    spec = catalog_spec(cfg)
    reach = reach_rest_catalog(spec.rest_uri if spec.fronted_by_rest else None)
    if reach.usable and reach.credential is None:
        return load_catalog(spec.name, type="rest", uri=spec.rest_uri)
    if reach.usable:
        from pyiceberg.exceptions import OAuthError

        try:
            return load_catalog(spec.name, type="rest", uri=spec.rest_uri, credential=reach.credential)
        except OAuthError as exc:  # the catalog's token endpoint refused the user
            raise http_login_refused(str(spec.rest_uri)) from exc
    if reach.asks_login:
        err_console.print(
            f"[dim]{reach.why_not(spec.rest_uri)}; reading it from the metadata database[/dim]",
            soft_wrap=True,
        )
    engine = None
    if spec.type is CatalogKind.BUILTIN:
        from tabletopic import database, settings  # SQLAlchemy: only when no node serves the catalog

        engine = database.create_engine(cfg.get(settings.METADATA_URL) or database.default_url(cfg.data_dir))
        stack.callback(engine.dispose)
    return create_catalog(spec, engine)


def record_converter(cfg: Config, config: TableTopicConfig) -> RecordConverter:
    """The converter the node's commits use for a topic, for commands that turn records into rows
    themselves (verify, rebuild, fresh reads): with the node's schema registry when the topic's
    key or value is converted by schema."""
    from tabletopic.table.convert.rows import RecordConverter

    lookup = None
    url = cfg.get("automq.table.topic.schema.registry.url") or cfg.get("schema.registry.listener")
    if url and (config.value_converter.type.uses_schema or config.key_converter.type.uses_schema):
        from tabletopic.schema_registry.client import HttpSchemaLookup

        lookup = HttpSchemaLookup(str(url).rstrip("/"))
    return RecordConverter(config, lookup)
