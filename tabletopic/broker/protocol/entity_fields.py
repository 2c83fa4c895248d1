"""The shape of a kio entity's fields, read from the generated dataclasses' own annotations.

kio generates one frozen dataclass per Kafka schema struct and version, and its annotations say all
the broker needs: ``tuple[X, ...]`` is an array, ``X | None`` is nullable, a dataclass ``X`` is a
nested entity, and the field metadata carries the wire type (``kafka_type``) and the tagged-field
number (``tag``). kio 0.6.5 offers helpers for this only in private modules
(``kio.serial._introspect``, ``kio.serial._implicit_defaults``) that may change in any release, so
the response builder and the request length guard read the annotations themselves, with the same
rules.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from collections.abc import Mapping
from typing import Any

from kio.serial.readers import tz_aware_from_i64
from kio.static.constants import uuid_zero
from kio.static.primitive import (
    PhantomStr,
    TZAware,
    f64,
    i8,
    i16,
    i32,
    i32Timedelta,
    i64,
    i64Timedelta,
    u8,
    u16,
    u32,
    u64,
)


@dataclasses.dataclass(frozen=True, slots=True)
class FieldShape:
    """What one dataclass field of a kio entity holds."""

    type_: Any  # the element type of an array, the non-None type of a nullable field
    is_array: bool
    is_entity: bool  # type_ is a nested entity (a dataclass)
    # kio's "optional": the field, or an array's elements, may be None.
    nullable: bool


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (types.UnionType, typing.Union)


def _without_none(annotation: Any) -> Any:
    if not _is_union(annotation):
        return annotation
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return args[0] if len(args) == 1 else annotation


def field_shape(field: dataclasses.Field[Any]) -> FieldShape:
    annotation = field.type
    if isinstance(annotation, str):
        raise TypeError(f"field {field.name} has an unresolved annotation {annotation!r}")
    outer = _without_none(annotation)
    is_array = typing.get_origin(outer) is tuple
    element = typing.get_args(outer)[0] if is_array else outer
    nullable = _is_union(annotation) or (is_array and _is_union(element))
    type_ = _without_none(element) if not is_array else element
    return FieldShape(type_, is_array, dataclasses.is_dataclass(type_), nullable)


def field_tag(field: dataclasses.Field[Any]) -> int | None:
    """The tagged-field number of a field of a flexible version, None for a plain field."""
    tag = field.metadata.get("tag")
    return None if tag is None else int(tag)


# The zero value of each primitive wire type (what kio's generated code uses for absent fields).
IMPLICIT_DEFAULTS: Mapping[type, Any] = types.MappingProxyType(
    {
        u8: u8(0),
        u16: u16(0),
        u32: u32(0),
        u64: u64(0),
        i8: i8(0),
        i16: i16(0),
        i32: i32(0),
        i64: i64(0),
        f64: f64(0.0),
        i32Timedelta: i32Timedelta.parse(datetime.timedelta(0)),
        i64Timedelta: i64Timedelta.parse(datetime.timedelta(0)),
        TZAware: tz_aware_from_i64(i64(0)),
        uuid.UUID: uuid_zero,
        str: "",
        PhantomStr: "",
        bytes: b"",
    }
)
