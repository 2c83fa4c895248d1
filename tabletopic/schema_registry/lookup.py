"""How the table pipeline reads schemas: an in-process view of the registry, cached.

The registry implements it directly against the metadata DB; Spark executors get a small HTTP
implementation pointed at ``automq.table.topic.schema.registry.url``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    schema_id: int
    schema_type: str  # a SchemaType value
    schema: str
    # Referenced schemas' texts by reference name, resolved transitively (what a decoder needs).
    references: tuple[tuple[str, str], ...] = ()
    subject: str | None = None
    version: int | None = None


class SchemaNotFound(LookupError):
    """No schema with that id, or no such subject/version."""


class SchemaLookup(Protocol):
    def by_id(self, schema_id: int) -> RegisteredSchema:
        """Raises SchemaNotFound."""

    def latest(self, subject: str) -> RegisteredSchema:
        """The newest non-deleted version of ``subject``. Raises SchemaNotFound."""
