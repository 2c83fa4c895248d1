"""Do all of a column of JSON documents satisfy one JSON Schema? Answered in one Arrow call when the
schema only says what Arrow's JSON reader enforces itself.

Most schemas behind Kafka topics describe records: objects with typed properties, some required,
maybe nested objects and arrays. For those, the documents joined as newline-delimited JSON and read
by ``pyarrow.json`` with the schema's Arrow type as the explicit schema are checked in C: malformed
JSON, trailing garbage, a value of the wrong type, a document that is not an object all make the
read fail or the row count differ; required properties are then columns without nulls.

The answer is only ever "all valid" or "do not know": when the read fails, or the schema uses a
keyword Arrow does not enforce (``enum``, ``minimum``, ``pattern``, ``oneOf``, references…), or a
document could hide an explicit ``null`` or a newline from this check, the caller validates per
record with ``jsonschema``, which has the last word. So this never refuses anything by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

# Keywords that describe or annotate and constrain nothing Arrow would miss.
_NEUTRAL = {"title", "description", "$schema", "$id", "$comment", "default", "examples", "format"}
_SCALARS = {"string": pa.string(), "integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}


class _Unsupported(Exception):
    pass


def compile_all_valid(schema: Any) -> Callable[[bytes, int], bool] | None:
    """A function telling whether every one of ``count`` newline-delimited documents of a body
    certainly satisfies ``schema`` (False: some may not, check them one by one); None when the
    schema is not of the kind. Whitespace around a document (a blanked gap) is allowed."""
    try:
        shape = _Shape()
        arrow_type = _type(schema, shape, top=True)
    except _Unsupported:
        return None
    if not isinstance(arrow_type, pa.StructType) or shape.mixed_closed:
        return None
    arrow_schema = pa.schema(list(arrow_type))
    options = pa_json.ParseOptions(
        explicit_schema=arrow_schema,
        newlines_in_values=False,
        unexpected_field_behavior="error" if shape.closed else "ignore",
    )

    one_block = _read_options(_BLOCK)

    def all_valid(body: bytes, count: int) -> bool:
        if not count:
            return True
        if body.count(b"\n") != count - 1:  # one document per line
            return False
        if not body.isascii():  # Arrow lets bad UTF-8 through in names it ignores; JSON may not
            try:
                body.decode("utf-8")
            except UnicodeDecodeError:
                return False
        reading = one_block if len(body) < _BLOCK else _read_options(len(body) + 1)
        try:
            table = pa_json.read_json(pa.BufferReader(body), read_options=reading, parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        if table.num_rows != count:
            return False
        array = table.to_struct_array().combine_chunks()
        # Arrow reads an explicit null as "absent": where the schema forbids null, a null in the
        # columns may hide one. Without any null (the usual case) the scan of the text is spared.
        if shape.non_null and _has_nulls(array, top=True) and b"null" in body:
            return False
        return _required_present(array, schema)

    return all_valid


_BLOCK = 1 << 20


def _read_options(block_size: int) -> pa_json.ReadOptions:
    # The whole body in one block (so one chunk), read on this thread.
    return pa_json.ReadOptions(use_threads=False, block_size=block_size)


class _Shape:
    """What the compiled schema needs at run time."""

    def __init__(self) -> None:
        self.non_null = False  # some property may not be null (so an explicit null matters)
        self.closed = False  # some object has additionalProperties: false
        self.open = False  # some object allows other properties
        self.mixed_closed = False

    def object_seen(self, closed: bool) -> None:
        if closed:
            self.closed = True
        else:
            self.open = True
        self.mixed_closed = self.closed and self.open


def _type(node: Any, shape: _Shape, top: bool = False) -> pa.DataType:
    if not isinstance(node, dict):
        raise _Unsupported(f"schema node {node!r}")
    unknown = set(node) - _NEUTRAL - {"type", "properties", "required", "additionalProperties", "items"}
    if unknown:
        raise _Unsupported(f"keywords {sorted(unknown)}")
    kind = node.get("type")
    nullable = False
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        nullable = len(kinds) < len(kind)
        if len(kinds) != 1:
            raise _Unsupported(f"type {kind}")
        kind = kinds[0]
    if not nullable and not top:
        shape.non_null = True
    if kind in _SCALARS:
        if {"properties", "required", "additionalProperties", "items"} & set(node):
            raise _Unsupported("object or array keywords on a scalar")
        return _SCALARS[kind]
    if kind == "array":
        if {"properties", "required", "additionalProperties"} & set(node) or "items" not in node:
            raise _Unsupported("array without one items schema")
        return pa.list_(_type(node["items"], shape))
    if kind == "object":
        if "items" in node:
            raise _Unsupported("items on an object")
        additional = node.get("additionalProperties", True)
        if not isinstance(additional, bool):
            raise _Unsupported("additionalProperties schema")
        properties = node.get("properties") or {}
        required = node.get("required") or []
        if not isinstance(properties, dict) or not properties or not isinstance(required, list):
            raise _Unsupported("object without properties")
        if any(name not in properties for name in required):
            raise _Unsupported("required property without a schema")
        shape.object_seen(closed=not additional)
        return pa.struct([pa.field(name, _type(sub, shape)) for name, sub in properties.items()])
    raise _Unsupported(f"type {kind!r}")


def _has_nulls(array: pa.Array, top: bool = False) -> bool:
    """Whether any value below the top level, at any depth, is null."""
    if not top and array.null_count:
        return True
    if pa.types.is_struct(array.type):
        return any(_has_nulls(array.field(i)) for i in range(array.type.num_fields))
    if pa.types.is_list(array.type):
        return _has_nulls(array.flatten())
    return False


def _required_present(array: pa.Array, node: dict[str, Any]) -> bool:
    """No required property is missing where its object is present, at any depth."""
    kind = node.get("type")
    kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
    if kind == "array":
        return _required_present(array.flatten(), node["items"])
    if kind != "object":
        return True
    required = node.get("required") or []
    if array.null_count == 0:  # every object present (the usual case): counts alone answer
        if any(array.field(name).null_count for name in required):
            return False
    else:
        present = array.is_valid()
        for name in required:
            if pc.any(pc.and_(present, array.field(name).is_null())).as_py():
                return False
    return all(
        _required_present(array.field(name), sub) for name, sub in (node.get("properties") or {}).items()
    )
