"""The Confluent-compatible REST API of the schema registry (FastAPI)."""

from tabletopic.schema_registry.routers.factory import create_app

__all__ = ["create_app"]
