"""The registry's value types and the small pure helpers around them (no database, no HTTP)."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from tabletopic.schema_registry import db
from tabletopic.schema_registry.compatibility import CompatibilityFailure, CompatibilityLevel
from tabletopic.schema_registry.db import SchemaRow
from tabletopic.schema_registry.errors import invalid_version
from tabletopic.schema_registry.formats.base import ParsedSchema, SchemaFormat, SchemaReference

LATEST = -1  # what "latest" and "-1" parse to
MAX_VERSION = 2**31 - 1
# Caches hold parses of schemas up to this size only, so their memory stays bounded by entry count.
CACHEABLE_TEXT = 256 * 1024


def has_control_character(name: str) -> bool:
    """Whether ``name`` holds a control character, which no subject may (PostgreSQL refuses NUL in
    text outright): such a name is refused as a subject and can never be found as one."""
    return any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name)


def parse_version(raw: str | int) -> int:
    """``"latest"``/``-1`` -> :data:`LATEST`; ``"3"`` -> 3. Raises 42202 for anything else."""
    text = str(raw).strip()
    if text.lower() == "latest" or text == "-1":
        return LATEST
    try:
        value = int(text)
    except ValueError:
        raise invalid_version(text) from None
    if not 1 <= value <= MAX_VERSION:
        raise invalid_version(text)
    return value


@dataclass(frozen=True, slots=True)
class SchemaSubmission:
    """A schema as a client sends it to be registered, looked up or checked for compatibility.

    Attributes:
        text: the schema text as sent.
        schema_type: ``schemaType`` as sent (``None`` means Avro; any case).
        references: the schemas it references, by subject and version.
        normalize: ``normalize=true``: store and compare the normalized form.
        contract: ``metadata`` and ``ruleSet`` as compact JSON ("" when neither was sent).
    """

    text: str
    schema_type: str | None = None
    references: tuple[SchemaReference, ...] = ()
    normalize: bool = False
    contract: str = ""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A schema from a request, parsed, with the text it would be stored as."""

    schema_type: str
    fmt: SchemaFormat
    parsed: ParsedSchema
    text: str
    references: tuple[SchemaReference, ...]
    contract: str = ""

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.schema_type, self.text, self.references, self.contract)


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    subject: str
    version: int
    schema: SchemaRow
    deleted: bool = False


def fingerprint(
    schema_type: str, text: str, references: Sequence[SchemaReference], contract: str = ""
) -> str:
    """The identity of a stored schema. A schema without a contract keeps the fingerprint it had
    before contracts were stored, so existing rows still match."""
    payload = f"{schema_type}\n{text}\n{db.encode_references(references)}"
    if contract:
        payload += f"\n{contract}"
    return hashlib.sha256(payload.encode()).hexdigest()


def guid_of(fingerprint_hex: str) -> str:
    """A schema's GUID (``/schemas/guids/{guid}``): its fingerprint's first 128 bits as a UUID, so
    the same schema, references and contract have the same GUID on every node."""
    return str(uuid.UUID(fingerprint_hex[:32]))


def guid_prefix(guid: str) -> str | None:
    """The fingerprint prefix a GUID stands for, ``None`` when ``guid`` is not a UUID."""
    try:
        return uuid.UUID(guid).hex
    except (ValueError, AttributeError):
        return None


def encode_messages(failures: Sequence[CompatibilityFailure], level: CompatibilityLevel) -> list[str]:
    """``verbose=true`` messages: one per finding, then the level, as Confluent lists them."""
    if not failures:
        return []
    return [f.describe() for f in failures] + [f"{{compatibility: '{level.value}'}}"]
