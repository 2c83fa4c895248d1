"""The interface every schema format implements, kept free of HTTP and storage.

Compatibility is asked pairwise: ``reader_can_read(reader, writer)`` answers whether data written
with ``writer`` can be read by a consumer using ``reader``. The registry composes the levels from it:
BACKWARD = new reads old, FORWARD = old reads new, FULL = both, *_TRANSITIVE = against every earlier
version instead of the latest only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class InvalidSchema(ValueError):
    """The schema text does not parse or violates its format's rules (Confluent error 42201)."""


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason a reader cannot read a writer's data.

    ``location`` is a JSON-pointer-like path to the offending element (``/fields/2/type``); ``kind``
    a short machine name (``READER_FIELD_MISSING_DEFAULT_VALUE``, ``FIELD_NUMBER_CHANGED``, …);
    ``message`` a sentence for ``verbose=true`` answers.
    """

    kind: str
    location: str
    message: str


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A named dependency: ``name`` as used inside the schema (an Avro full name, a JSON ``$ref`` URL,
    a ``.proto`` import path), resolved to ``subject``/``version`` in the registry."""

    name: str
    subject: str
    version: int


class ParsedSchema(Protocol):
    # A read-only member, so frozen dataclasses (and plain attributes) both satisfy the protocol.
    @property
    def schema_type(self) -> str:
        """``"AVRO"`` | ``"JSON"`` | ``"PROTOBUF"``."""

    def canonical(self) -> str:
        """The text the registry stores and compares for "same schema" (Confluent's canonical form
        for the format, without normalization)."""

    def normalized(self) -> str:
        """The canonical form after ``normalize=true`` rules (order-insensitive parts sorted, defaults
        made explicit) — used when a client registers or looks up with ``normalize=true``."""


class SchemaFormat(Protocol):
    @property
    def schema_type(self) -> str: ...

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """Parse ``text``. ``references`` maps each reference name to the referenced schema's text
        (already resolved transitively by the caller, in dependency order). Raises InvalidSchema."""

    def reader_can_read(self, reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
        """Empty list when compatible."""
