"""Finding a NUL character in a request's strings, which the metadata database cannot store.

Kafka lets any string carry U+0000, but PostgreSQL refuses it in a text column, so a group id,
transactional id, client id, ACL or user name holding one would fail the statement that stores it,
and the request with it, only on a cluster. The server refuses such a request up front instead,
with INVALID_REQUEST, the same on SQLite and PostgreSQL (see ``server.KafkaConnection``).

Strings stored as bytes are exempt (:data:`BYTE_EXACT_FIELDS`). A kio request type's string fields
are found once (:func:`_string_paths`), so a request costs one check per string it carries.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from tabletopic.broker.protocol.entity_fields import field_shape

# Strings stored byte-exact (``database.Utf8Bytes``), so a NUL in them is kept, as Kafka keeps it:
# an offset's commit metadata (OffsetCommit, TxnOffsetCommit).
BYTE_EXACT_FIELDS = frozenset({"committed_metadata"})


@dataclasses.dataclass(frozen=True, slots=True)
class _StringField:
    name: str
    is_array: bool
    entity: type | None  # a nested entity that holds strings; None for a string field


@cache
def _string_paths(entity_type: type) -> tuple[_StringField, ...]:
    """The fields of ``entity_type`` that are strings or nested entities holding strings."""
    found = []
    for field in dataclasses.fields(entity_type):
        if field.name in BYTE_EXACT_FIELDS:
            continue
        shape = field_shape(field)
        if shape.is_entity:
            if _string_paths(shape.type_):
                found.append(_StringField(field.name, shape.is_array, shape.type_))
        elif isinstance(shape.type_, type) and issubclass(shape.type_, str):
            found.append(_StringField(field.name, shape.is_array, None))
    return tuple(found)


def _first_nul(entity: Any) -> str | None:
    """The dotted name of the first string of ``entity`` holding a NUL; the name is only built for
    a request that has one (this runs on every request)."""
    entity_type: type = type(entity)
    for field in _string_paths(entity_type):
        value = getattr(entity, field.name)
        if value is None:
            continue
        for item in value if field.is_array else (value,):
            if item is None:
                continue
            if field.entity is None:
                if "\x00" in item:
                    return field.name
            elif (inner := _first_nul(item)) is not None:
                return f"{field.name}.{inner}"
    return None


def nul_field(client_id: str | None, body: Any) -> str | None:
    """The name of the first field of a request (its header's ``client_id`` included) whose
    string holds a NUL, else None. ``body`` is a kio request object."""
    if client_id is not None and "\x00" in client_id:
        return "client_id"
    return _first_nul(body)
