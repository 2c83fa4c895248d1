"""The built-in Iceberg REST catalog: service semantics, HTTP app and an embeddable server."""

from tabletopic.catalog.rest.app import create_app
from tabletopic.catalog.rest.service import CatalogService

__all__ = ["CatalogService", "create_app"]
