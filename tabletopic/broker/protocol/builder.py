"""Version-tolerant construction of kio response objects from plain dicts.

Handlers describe a response once, shaped like the NEWEST version of the response schema (nested
entities as dicts or lists of dicts), and :func:`build_response` fits that description to whatever
version the client asked for: keys the version lacks are dropped, fields the dict leaves out get
their schema default (or a neutral zero), and nested dicts become that version's entity classes.
That keeps one code path per API instead of one per (API, version) pair.

Tolerance stops at keys that are no field of the message in ANY version: such a key is a misspelt
field, which would otherwise go on the wire as the field's default, so it raises
:class:`UnknownFieldError`.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from kio.index import UnknownEntity, load_entity_module, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import LoadableEntityType, schema_name_map
from kio.serial.readers import tz_aware_from_i64
from kio.static.constants import EntityType, uuid_zero
from kio.static.primitive import TZAware, i32Timedelta, i64, i64Timedelta

from tabletopic.broker.protocol.entity_fields import IMPLICIT_DEFAULTS, field_shape

_MISSING = object()
_MESSAGE_KINDS: dict[str, LoadableEntityType] = {
    "request": EntityType.request,
    "response": EntityType.response,
}
Converter = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldPlan:
    """How to fill one field of one entity class."""

    name: str
    convert: Converter
    default: Any  # _MISSING when the field has no schema default and needs a neutral value
    neutral: Any  # that neutral value (kio entities are immutable, so one instance serves all)


def _as_timedelta(value: Any) -> datetime.timedelta:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=int(value))


def _as_error_code(value: Any) -> ErrorCode:
    if isinstance(value, ErrorCode):
        return value
    return ErrorCode(int(value))


def _as_uuid(value: Any) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(str(value))


def _as_tz_aware(value: Any) -> Any:
    """Timestamps may be given as epoch milliseconds (-1 meaning "none", as on the wire)."""
    if value is None or isinstance(value, datetime.datetime):
        return value
    return tz_aware_from_i64(i64(int(value)))


def _identity(value: Any) -> Any:
    return value


def _primitive_converter(type_: type) -> Converter:
    if type_ is ErrorCode:
        return _as_error_code
    if type_ in (i32Timedelta, i64Timedelta) or type_ is datetime.timedelta:
        return _as_timedelta
    if type_ is uuid.UUID:
        return _as_uuid
    if type_ is TZAware:
        return _as_tz_aware
    return _identity


class UnknownFieldError(TypeError):
    """A response dict names a field that no version of the message has (a handler bug)."""


def _neutral_value(field: dataclasses.Field[Any]) -> Any:
    """The value Kafka's generated code would use for a field the handler did not mention."""
    shape = field_shape(field)
    if field.metadata.get("kafka_type") == "records":
        # Never null on the wire, as Kafka's own answers: librdkafka takes a null record set for a
        # parse failure of the whole response and retries it forever.
        return b""
    if shape.nullable and not shape.is_array and field.metadata.get("kafka_type") != "error_code":
        return None
    if shape.is_array:
        return ()
    if shape.is_entity:
        return build_entity(shape.type_, {})
    type_ = shape.type_
    if type_ is ErrorCode:
        return ErrorCode.none
    if type_ is bool:
        return False
    if type_ is uuid.UUID:
        return uuid_zero
    for base in getattr(type_, "__mro__", (type_,)):
        if base in IMPLICIT_DEFAULTS:
            return IMPLICIT_DEFAULTS[base]
    return None


@cache
def _plan(entity_type: type) -> tuple[_FieldPlan, ...]:
    plans = []
    for field in dataclasses.fields(entity_type):
        shape = field_shape(field)
        if shape.is_array and shape.is_entity:
            convert = _entity_tuple_converter(shape.type_)
        elif shape.is_entity:
            convert = _entity_converter(shape.type_, shape.nullable)
        elif shape.is_array:
            convert = _primitive_tuple_converter(_primitive_converter(shape.type_))
        else:
            convert = _primitive_converter(shape.type_)
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = _MISSING
        neutral = _neutral_value(field) if default is _MISSING else None
        plans.append(_FieldPlan(field.name, convert, default, neutral))
    return tuple(plans)


def _entity_tuple_converter(entity_type: type) -> Converter:
    def convert(value: Any) -> Any:
        if value is None:
            return None
        return tuple(
            item if isinstance(item, entity_type) else build_entity(entity_type, item) for item in value
        )

    return convert


def _entity_converter(entity_type: type, optional: bool) -> Converter:
    def convert(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, entity_type):
            return value
        return build_entity(entity_type, value or {})

    return convert


def _primitive_tuple_converter(item: Converter) -> Converter:
    def convert(value: Iterable[Any] | None) -> Any:
        if value is None:
            return None
        return tuple(item(v) for v in value)

    return convert


@cache
def _field_names_of_any_version(entity_type: type) -> frozenset[str]:
    """The fields of ``entity_type`` in every version of its message: kio names an entity after
    its schema struct in every version module (``kio.schema.<api>.v<N>.<kind>``), so the union of
    the same-named classes' fields is what a newest-shaped dict may legitimately mention."""
    names = {field.name for field in dataclasses.fields(entity_type)}
    parts = entity_type.__module__.split(".")
    if len(parts) != 5 or parts[:2] != ["kio", "schema"] or parts[4] not in _MESSAGE_KINDS:
        return frozenset(names)
    api, kind = parts[2], _MESSAGE_KINDS[parts[4]]
    for version in schema_name_map.get(api, {}):
        try:
            module = load_entity_module(api, version, kind)
        except UnknownEntity:
            continue
        same = getattr(module, entity_type.__name__, None)
        if isinstance(same, type) and dataclasses.is_dataclass(same):
            names.update(field.name for field in dataclasses.fields(same))
    return frozenset(names)


def build_entity(entity_type: type, values: Mapping[str, Any]) -> Any:
    """Build one kio entity of ``entity_type`` from a dict, recursively.

    Keys of fields that exist only in other versions of the message are ignored; missing fields
    take the schema default, else a neutral value (0, "", empty tuple, ``ErrorCode.none``, None for
    nullable fields). A key that is a field in no version raises :class:`UnknownFieldError`.
    """
    kwargs: dict[str, Any] = {}
    used = 0
    for plan in _plan(entity_type):
        value = values.get(plan.name, _MISSING)
        if value is _MISSING:
            if plan.default is not _MISSING:
                continue
            kwargs[plan.name] = plan.neutral
        else:
            used += 1
            kwargs[plan.name] = plan.convert(value)
    if used != len(values):  # keys this version lacks: fine if another version has them
        _check_keys_exist(entity_type, values)
    return entity_type(**kwargs)


def _check_keys_exist(entity_type: type, values: Mapping[str, Any]) -> None:
    unknown = sorted(set(values) - _field_names_of_any_version(entity_type))
    if unknown:
        raise UnknownFieldError(f"{entity_type.__name__} has no field {', '.join(unknown)} in any version")


@cache
def response_class(api_key: int, api_version: int) -> type:
    """The kio response class of one API version (raises kio's UnknownAPIKey / UnknownEntity)."""
    return load_response_schema(api_key, api_version)


def build_response(api_key: int, api_version: int, fields: Mapping[str, Any]) -> Any:
    """Build the kio response object of ``api_key`` at ``api_version`` from a newest-version-shaped
    dict. See the module docstring for the rules."""
    return build_entity(response_class(api_key, api_version), fields)
