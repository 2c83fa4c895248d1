"""The interface every schema format implements, kept free of HTTP and storage.

Compatibility is asked pairwise: ``reader_can_read(reader, writer)`` answers whether data written
with ``writer`` can be read by a consumer using ``reader``. The registry composes the levels from it:
BACKWARD = new reads old, FORWARD = old reads new, FULL = both, *_TRANSITIVE = against every earlier
version instead of the latest only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

_log = logging.getLogger(__name__)


class SchemaType(StrEnum):
    """``schemaType`` in Confluent's API (and the registry's ``schema_type`` column)."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"


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
        """One of :class:`SchemaType`."""

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


class SameByCanonicalText:
    """Equality, hashing and ``str`` by the canonical text, so two parses of one schema are one
    schema. For parsed-schema dataclasses declared with ``eq=False`` (their fields, such as compiled
    descriptors, have no useful equality of their own)."""

    def canonical(self) -> str:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash(self.canonical())

    def __str__(self) -> str:
        return self.canonical()


@dataclass(frozen=True)
class GuardedFormat:
    """The guard rails every format plug-in owes the registry, around the format's own functions:
    ``parse`` raises only :class:`InvalidSchema` (bad input is 42201, never a 500), and
    ``reader_can_read`` never raises (a defect in a rule answers "incompatible", the safe side, with
    the reason, and leaves the traceback in the log)."""

    schema_type: str
    label: str  # the format's name in messages: "invalid Protobuf schema: ..."
    parsed_type: type
    parse_text: Callable[[str, Mapping[str, str]], Any]
    check: Callable[[Any, Any], list[Incompatibility]]
    root: str  # the path compatibility messages give the whole schema: "#/" or "#"

    def parse(self, text: str, references: Mapping[str, str]) -> Any:
        try:
            return self.parse_text(text, references)
        except InvalidSchema:
            raise
        except Exception as exc:
            raise InvalidSchema(f"invalid {self.label} schema: {exc}") from exc

    def reader_can_read(self, reader: ParsedSchema, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(reader, self.parsed_type) or not isinstance(writer, self.parsed_type):
            message = f"cannot compare {reader.schema_type} with {writer.schema_type}"
            return [Incompatibility("SCHEMA_TYPE_CHANGED", self.root, message)]
        try:
            return self.check(reader, writer)
        except Exception as exc:
            _log.exception("%s compatibility check failed", self.label)
            return [
                Incompatibility(
                    "COMPATIBILITY_CHECK_FAILED", self.root, f"the check could not complete: {exc}"
                )
            ]
