"""Confluent's Protobuf wire framing: the message-index list after the schema id.

A Confluent Protobuf payload is ``0x00``, a 4-byte big-endian schema id, then the path to the
message type inside the schema as a list of indexes, then the message bytes. The list is a zigzag
varint count followed by zigzag varint indexes (top-level message, then nested message within it,
…); the single byte ``0x00`` is the shorthand for ``[0]``, the first message in the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from google.protobuf import descriptor

from tabletopic.schema_registry.formats.protobuf.schema import ParsedProtobufSchema

# No real schema nests messages this deep; a larger count is corrupt input, refused before looping.
MAX_INDEXES = 64


class MessageIndexError(ValueError):
    """The index list is truncated or corrupt, or names no message in the schema."""


def _read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MessageIndexError("truncated varint in the message-index list")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise MessageIndexError("varint longer than 10 bytes in the message-index list")


def _read_zigzag(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    raw, pos = _read_varint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _write_zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_message_indexes(buf: bytes | bytearray | memoryview, pos: int) -> tuple[list[int], int]:
    """Read the message-index list starting at ``pos`` (just after the schema id).

    Returns:
        The indexes (``[0]`` for the shorthand) and the position of the first message byte.

    Raises:
        MessageIndexError: truncated or corrupt list.
    """
    count, pos = _read_zigzag(buf, pos)
    if count == 0:
        return [0], pos
    if count < 0 or count > MAX_INDEXES:
        raise MessageIndexError(f"message-index count {count} is out of range")
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag(buf, pos)
        if index < 0:
            raise MessageIndexError(f"negative message index {index}")
        indexes.append(index)
    return indexes, pos


def write_message_indexes(indexes: Sequence[int]) -> bytes:
    """Encode an index list as serializers do (``[0]`` as the single byte ``0x00``)."""
    if list(indexes) == [0]:
        return b"\x00"
    return _write_zigzag(len(indexes)) + b"".join(_write_zigzag(i) for i in indexes)


def message_descriptor_for(
    parsed: ParsedProtobufSchema | Any, indexes: Sequence[int]
) -> descriptor.Descriptor:
    """The message type an index list names within ``parsed`` (from its private pool).

    ``parsed`` may also be a registry ``RegisteredSchema`` (anything with ``schema`` text and
    ``references`` pairs): it is compiled once and cached, which is what a decoder holding only
    the lookup result needs.

    Raises:
        MessageIndexError: an index past the end of its list of messages.
        InvalidSchema: ``parsed`` is schema text that does not compile.
    """
    if not isinstance(parsed, ParsedProtobufSchema):
        parsed = _compiled(parsed.schema, tuple(tuple(pair) for pair in parsed.references))
    if not indexes:
        indexes = [0]
    file = parsed.file_descriptor
    candidates = list(file.message_types_by_name.values())
    # ``message_types_by_name`` follows declaration order, which is what the indexes count.
    ordered = [file.message_types_by_name[m.name] for m in parsed.file.message_type]
    candidates = ordered or candidates
    found: descriptor.Descriptor | None = None
    for depth, index in enumerate(indexes):
        if index >= len(candidates):
            raise MessageIndexError(
                f"message index {index} at depth {depth} names no message (have {len(candidates)})"
            )
        found = candidates[index]
        candidates = list(found.nested_types)
    assert found is not None
    return found


@lru_cache(maxsize=256)
def _compiled(text: str, references: tuple[tuple[str, str], ...]) -> ParsedProtobufSchema:
    from tabletopic.schema_registry.formats.protobuf.format import FORMAT

    parsed: ParsedProtobufSchema = FORMAT.parse(text, dict(references))
    return parsed


def message_indexes_of(parsed: ParsedProtobufSchema, full_name: str) -> list[int]:
    """The index list naming message ``full_name`` (what a serializer writes before the bytes).

    Raises:
        MessageIndexError: no such message in the schema file.
    """

    def search(messages: Sequence[descriptor.Descriptor], path: list[int]) -> list[int] | None:
        for index, message in enumerate(messages):
            if message.full_name == full_name:
                return [*path, index]
            found = search(list(message.nested_types), [*path, index])
            if found is not None:
                return found
        return None

    file = parsed.file_descriptor
    found = search([file.message_types_by_name[m.name] for m in parsed.file.message_type], [])
    if found is None:
        raise MessageIndexError(f"no message {full_name!r} in {parsed.file.name}")
    return found
