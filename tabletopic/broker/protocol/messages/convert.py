"""From kio's per-version request classes to our version-free request types, with a reader
generated once per type.

A version-free request type is a frozen dataclass whose field names are Kafka's (as kio spells
them) and whose nested entities are tuples of further such dataclasses. Reading a kio request of
any version takes each field the version has and the type's default for each it lacks; a field
without a default must exist in every version the broker serves, so its absence is our bug, not
the peer's (an ``AttributeError``).

A reflective walk over the fields costs about 15 µs a request, so for each type the first use
writes a plain function that names every field (as ``dataclasses`` writes ``__init__``); later
calls cost what hand-written code would.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_READERS: dict[type, Callable[[Any], Any]] = {}


def read_message(cls: type[T], message: Any) -> T:
    """The version-free ``cls`` of a kio message object of any version."""
    reader = _READERS.get(cls)
    if reader is None:
        reader = _READERS[cls] = _compile_reader(cls)
    result: T = reader(message)
    return result


def _fields(cls: type) -> list[tuple[dataclasses.Field[Any], type | None, bool]]:
    """Each field with the entity type of its elements when it is a tuple of entities, and whether
    that tuple is nullable (``tuple[X, ...] | None``)."""
    hints = typing.get_type_hints(cls)
    fields = []
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        nullable = _without_none(hint)
        fields.append((field, _entity_of(nullable or hint), nullable is not None))
    return fields


def _without_none(hint: Any) -> Any:
    """``X`` for ``X | None``, else None."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0]
    return None


def _entity_of(hint: Any) -> type | None:
    """``X`` for ``tuple[X, ...]`` when X is a dataclass, else None."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
            return args[0]
    return None


def _compile_reader(cls: type) -> Callable[[Any], Any]:
    scope: dict[str, Any] = {"cls": cls, "read": read_message}
    arguments = []
    for number, (field, entity, nullable) in enumerate(_fields(cls)):
        if field.default is not dataclasses.MISSING:
            scope[f"default{number}"] = field.default
            value = f"getattr(message, {field.name!r}, default{number})"
        elif field.default_factory is not dataclasses.MISSING:
            scope[f"default{number}"] = field.default_factory()
            value = f"getattr(message, {field.name!r}, default{number})"
        else:
            value = f"message.{field.name}"
        if entity is not None:
            scope[f"entity{number}"] = entity
            if nullable:  # a null list stays null
                read = f"tuple([read(entity{number}, item) for item in value{number}])"
                value = f"(None if (value{number} := {value}) is None else {read})"
            else:
                value = f"tuple([read(entity{number}, item) for item in {value}])"
        arguments.append(f"{field.name}={value}")
    return _define(f"def reader(message):\n    return cls({', '.join(arguments)})\n", scope, "reader")


def _define(source: str, scope: dict[str, Any], name: str) -> Callable[[Any], Any]:
    """Define the function ``name`` from ``source``, which names only the type's own fields."""
    exec(compile(source, f"<{name} of {scope['cls'].__qualname__}>", "exec"), scope)
    function: Callable[[Any], Any] = scope[name]
    return function
