"""JSON (with a JSON Schema) values to Arrow.

The type mapping is :mod:`tabletopic.table.convert.jsonschema_arrow` (over the registry's parsed
JSON Schema), imported lazily so the table pipeline does not
depend on the registry being importable in a Spark worker; a small built-in mapping covers the
common subset when that module is absent.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tabletopic.table.convert.arrowutil import apply_fixup, decode_each, values_to_array
from tabletopic.table.convert.native_column import NativeFirstDecoder


def json_schema_arrow_type(text: str, references: Sequence[tuple[str, str]] = ()) -> tuple[pa.DataType, bool]:
    """Arrow type for a JSON Schema document and whether it describes records (objects).

    Uses the format module's mapping when available: it answers an Arrow schema, one column per
    property for an object root, else a single ``value`` column.
    """
    try:
        from tabletopic.schema_registry.formats.jsonschema import FORMAT
        from tabletopic.table.convert.jsonschema_arrow import json_schema_to_arrow
    except ImportError:
        schema = json.loads(text)
        type_ = _fallback_type(schema, schema) if isinstance(schema, dict) else pa.string()
        return type_, pa.types.is_struct(type_)
    arrow_schema = json_schema_to_arrow(FORMAT.parse(text, dict(references)))
    root = json.loads(text)
    is_object = isinstance(root, dict) and isinstance(root.get("properties"), dict)
    if is_object or len(arrow_schema) != 1 or arrow_schema.names != ["value"]:
        return pa.struct(list(arrow_schema)), True
    return arrow_schema.field(0).type, False


def _fallback_type(node: Any, root: dict[str, Any]) -> pa.DataType:
    if not isinstance(node, dict):
        return pa.string()
    if "$ref" in node and isinstance(node["$ref"], str) and node["$ref"].startswith("#/"):
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _fallback_type(target, root)
    kind = node.get("type")
    if isinstance(kind, list):
        non_null = [k for k in kind if k != "null"]
        kind = non_null[0] if len(non_null) == 1 else None
    for combinator in ("oneOf", "anyOf"):
        if kind is None and combinator in node:
            options = [o for o in node[combinator] if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(options) == 1:
                return _fallback_type(options[0], root)
    if kind == "object" or (kind is None and "properties" in node):
        props = node.get("properties") or {}
        if props:
            return pa.struct([pa.field(name, _fallback_type(sub, root)) for name, sub in props.items()])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            return pa.map_(pa.string(), _fallback_type(extra, root))
        return pa.map_(pa.string(), pa.string())
    if kind == "array":
        return pa.list_(_fallback_type(node.get("items", {}), root))
    return {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}.get(str(kind), pa.string())


class JsonDecoder(NativeFirstDecoder):
    """Decodes UTF-8 JSON payloads against a JSON Schema's Arrow type."""

    def __init__(
        self, schema_text: str, references: Sequence[tuple[str, str]] = (), native: bool = True
    ) -> None:
        self.arrow_type, self.is_record = json_schema_arrow_type(schema_text, references)
        self._fix = _fixers(self.arrow_type)
        if native:
            from tabletopic.table.convert.native_json import compile_native

            # Whole columns through Arrow's JSON reader; a chunk it refuses comes back per record.
            self._native = compile_native(self.arrow_type, self.is_record)

    def decode_per_record(
        self, payloads: Sequence[bytes | None], skip: int = 0
    ) -> tuple[pa.Array, dict[int, str]]:
        """``json.loads`` per payload: slow, but it isolates each bad record."""
        values, failures = decode_each(
            payloads, skip, json.loads, (ValueError, UnicodeDecodeError), lambda exc: f"invalid JSON: {exc}"
        )
        apply_fixup(values, self._fix, failures)
        return values_to_array(values, self.arrow_type, self.arrow_type, failures), failures


def _fixers(type_: pa.DataType) -> Any:
    """Per-value adjustments JSON needs before Arrow takes it: fields typed string but holding
    objects or numbers are kept as JSON text (not rejected); numbers written as integers become
    floats; dates and times arrive as ISO 8601 text and are parsed here, so a bad one fails its own
    record only."""
    if pa.types.is_struct(type_):
        subs = {type_.field(i).name: _fixers(type_.field(i).type) for i in range(type_.num_fields)}
        subs = {k: v for k, v in subs.items() if v is not None}

        def fix_struct(value: Any) -> Any:
            if isinstance(value, dict):
                for name, f in subs.items():
                    if value.get(name) is not None:
                        value[name] = f(value[name])
            return value

        return fix_struct if subs else None
    if pa.types.is_string(type_):
        return lambda v: v if isinstance(v, str) else json.dumps(v)
    if pa.types.is_float64(type_):
        # A JSON Schema number may be written as an integer of any size (1180591620717411303424):
        # Arrow takes Python ints into float64 only within int64.
        return lambda v: float(v) if type(v) is int else v
    if pa.types.is_timestamp(type_):
        return _parse_timestamp
    if pa.types.is_date(type_):
        return lambda v: datetime.date.fromisoformat(v)
    if pa.types.is_time(type_):
        return lambda v: datetime.time.fromisoformat(v)
    if pa.types.is_list(type_):
        inner = _fixers(type_.value_type)
        if inner is None:
            return None
        return lambda v: [None if x is None else inner(x) for x in v] if isinstance(v, list) else v
    if pa.types.is_map(type_):
        inner = _fixers(type_.item_type)
        if inner is None:
            return None
        return lambda v: (
            {k: None if x is None else inner(x) for k, x in v.items()} if isinstance(v, dict) else v
        )
    return None


def _parse_timestamp(text: Any) -> datetime.datetime:
    if not isinstance(text, str):
        raise ValueError(f"expected an ISO 8601 date-time string, got {text!r}")
    value = datetime.datetime.fromisoformat(text)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)  # RFC 3339 requires an offset; be lenient
    return value
