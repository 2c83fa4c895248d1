"""A length pre-check run before kio's native parser sees a request.

kio's Rust reader reserves memory for an array from its declared element count before reading the
elements, so a 5-byte compact-array count of 2**32 makes it ask for 32 GiB and the allocator
aborts the whole process (found by ``tests/broker/test_fuzz.py``). This module walks the request's
schema over the bytes, skipping values and checking only that every array count and string/bytes
length fits in what is left of the frame, which no valid request can violate. Cost: a few
microseconds for a Produce request (records are skipped by length, never touched).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from tabletopic.broker.protocol.entity_fields import field_shape, field_tag
from tabletopic.broker.protocol.errors import MalformedFrame

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "uuid": 16,
    "error_code": 2,
    "timedelta_i32": 4,
    "timedelta_i64": 8,
    "datetime_i64": 8,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

# A step reads one field at ``position`` and returns the position after it.
Step = Callable[[memoryview, int], int]


def _fail(position: int, what: str) -> MalformedFrame:
    return MalformedFrame(f"{what} at byte {position} runs past the end of the request")


def _uvarint(view: memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(view):
            raise _fail(position, "varint")
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
        if shift > 35:
            raise MalformedFrame(f"varint longer than 5 bytes at byte {position}")


def _length(view: memoryview, position: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A (compact) length or count; -1 means null."""
    if flexible:
        value, position = _uvarint(view, position)
        return value - 1, position
    size = 4 if wide else 2
    if position + size > len(view):
        raise _fail(position, "length")
    value = (_INT32 if wide else _INT16).unpack_from(view, position)[0]
    return value, position + size


def _primitive_step(kafka_type: str, flexible: bool, nullable: bool = True) -> Step:
    if kafka_type in _FIXED_SIZES:
        size = _FIXED_SIZES[kafka_type]

        def fixed(view: memoryview, position: int) -> int:
            if position + size > len(view):
                raise _fail(position, kafka_type)
            return position + size

        return fixed
    wide = kafka_type in ("bytes", "records")

    def sized(view: memoryview, position: int) -> int:
        length, position = _length(view, position, flexible, wide)
        if length < -1 or position + max(length, 0) > len(view):
            raise _fail(position, f"{kafka_type} of {length} bytes")
        if length == -1 and not nullable:
            raise MalformedFrame(f"null {kafka_type} at byte {position} for a non-nullable field")
        return position + max(length, 0)

    return sized


def _array_step(element: Step, min_element_size: int, flexible: bool, nullable: bool) -> Step:
    def array(view: memoryview, position: int) -> int:
        count, position = _length(view, position, flexible, wide=True)
        if count < -1 or position + count * min_element_size > len(view):
            raise _fail(position, f"array of {count} elements")
        if count == -1 and not nullable:
            # kio hands such a null over as None and handlers would trip over it.
            raise MalformedFrame(f"null array at byte {position} for a non-nullable field")
        for _ in range(max(count, 0)):
            position = element(view, position)
        return position

    return array


def _min_size(step_kind: str | None, flexible: bool) -> int:
    if step_kind in _FIXED_SIZES:
        return _FIXED_SIZES[step_kind]
    return 1 if flexible else 2  # an entity or a length prefix takes at least this much


def _nullable_entity_step(entity: Step) -> Step:
    """A nullable struct is prefixed with an int8: -1 for null, 1 when the struct follows."""

    def nullable(view: memoryview, position: int) -> int:
        if position >= len(view):
            raise _fail(position, "nullable struct marker")
        if view[position] == 0xFF:
            return position + 1
        return entity(view, position + 1)

    return nullable


def _skip(size: int) -> Step:
    def skip(view: memoryview, position: int) -> int:
        if position + size > len(view):
            raise _fail(position, f"{size} bytes of fixed-size fields")
        return position + size

    return skip


def _field_step(field: dataclasses.Field[Any], flexible: bool) -> Step:
    shape = field_shape(field)
    kafka_type = field.metadata.get("kafka_type")
    nullable = shape.nullable
    if shape.is_array and shape.is_entity:
        return _array_step(entity_check(shape.type_), 1, flexible, nullable)
    if shape.is_entity:
        return _nullable_entity_step(entity_check(shape.type_)) if nullable else entity_check(shape.type_)
    if shape.is_array:
        element = _primitive_step(str(kafka_type), flexible)
        return _array_step(element, _min_size(kafka_type, flexible), flexible, nullable)
    return _primitive_step(str(kafka_type), flexible, nullable)


@cache
def entity_check(entity_type: Any) -> Step:
    """The step that walks one entity of ``entity_type`` (cached per class)."""
    flexible = bool(entity_type.__flexible__)
    plain: list[Step] = []
    tagged: dict[int, Step] = {}
    fixed_run = 0  # consecutive fixed-size fields are skipped in one step
    for field in dataclasses.fields(entity_type):
        tag = field_tag(field)
        if tag is not None:
            tagged[tag] = _field_step(field, flexible)
            continue
        kafka_type = field.metadata.get("kafka_type")
        if kafka_type in _FIXED_SIZES and not field_shape(field).is_array:
            fixed_run += _FIXED_SIZES[str(kafka_type)]
            continue
        if fixed_run:
            plain.append(_skip(fixed_run))
            fixed_run = 0
        plain.append(_field_step(field, flexible))
    if fixed_run:
        plain.append(_skip(fixed_run))

    def walk(view: memoryview, position: int) -> int:
        for step in plain:
            position = step(view, position)
        if flexible:
            count, position = _uvarint(view, position)
            if position + count * 2 > len(view):
                raise _fail(position, f"{count} tagged fields")
            for _ in range(count):
                tag, position = _uvarint(view, position)
                size, position = _uvarint(view, position)
                end = position + size
                if end > len(view):
                    raise _fail(position, f"tagged field of {size} bytes")
                tagged_step = tagged.get(tag)
                if tagged_step is not None and tagged_step(view[:end], position) > end:
                    raise _fail(position, f"tagged field {tag}")
                position = end
        return position

    return walk


def check_lengths(entity_type: Any, view: memoryview, position: int) -> None:
    """Raise MalformedFrame unless every length in the entity at ``position`` fits the frame."""
    entity_check(entity_type)(view, position)
