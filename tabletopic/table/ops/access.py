"""How an operations command reaches a node's Kafka listener and Iceberg catalog from the node's
configuration (the same ``--data-dir``/``--config``/``--override`` the node was started with)."""

from __future__ import annotations

from contextlib import ExitStack

from pyiceberg.catalog import Catalog

from tabletopic.cli_common import kafka_bootstrap
from tabletopic.config import Config


def bootstrap_servers(cfg: Config) -> str:
    """``host:port`` of the node's PLAINTEXT listener (advertised one first)."""
    return kafka_bootstrap(cfg)


def rest_alive(uri: str, timeout: float = 1.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{uri}/v1/config", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def open_catalog(cfg: Config, stack: ExitStack) -> Catalog:
    """The node's catalog: through its REST endpoint when the node serves one, else opened directly
    (the built-in catalog from the metadata database), so the commands work on a stopped node too."""
    from pyiceberg.catalog import load_catalog

    from tabletopic.catalog.adapters import catalog_spec, create_catalog
    from tabletopic.catalog.backends import CatalogKind

    spec = catalog_spec(cfg)
    if spec.rest_uri and spec.fronted_by_rest and rest_alive(spec.rest_uri):
        return load_catalog(spec.name, type="rest", uri=spec.rest_uri)
    engine = None
    if spec.type is CatalogKind.BUILTIN:
        from tabletopic import database, settings  # SQLAlchemy: only when no node serves the catalog

        engine = database.create_engine(cfg.get(settings.METADATA_URL) or database.default_url(cfg.data_dir))
        stack.callback(engine.dispose)
    return create_catalog(spec, engine)
