"""Keyword-level helpers for JSON Schema compatibility: type sets, bounds, item and property
views across drafts, and the writer-side ``allOf`` merge.

Pure functions over decoded schema dicts, shared by the comparison walk and the Arrow mapping.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any, TypeGuard

from tabletopic.schema_registry.formats.base import Incompatibility

ALL_TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})
# Keywords that never constrain instances, so a schema made only of them accepts everything.
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
        "$anchor",
        "format",
        "contentMediaType",
        "contentEncoding",
    }
)


def is_open(schema: Any) -> bool:
    """True when ``schema`` accepts every instance (``true``, ``{}``, or annotations only)."""
    return schema is True or (isinstance(schema, dict) and all(k in ANNOTATIONS for k in schema))


def json_type_of(value: Any) -> str:
    """The JSON Schema type name of a decoded JSON value (``1.0`` is an integer, as in the spec)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def enum_values(schema: Any) -> list[Any] | None:
    """The closed set of values a schema allows (``enum`` or ``const``), or ``None``."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return values if isinstance(values, list) else None


def types_of(schema: dict[str, Any]) -> set[str] | None:
    """The types a schema admits, ``None`` for any; inferred from ``enum`` when ``type`` is absent."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    values = enum_values(schema)
    if values is not None:
        return {json_type_of(v) for v in values}
    return None


def accepts(types: set[str] | None, name: str) -> bool:
    return types is None or name in types or (name == "integer" and "number" in types)


def value_key(value: Any) -> str:
    """A key under which JSON-equal values collide (``1`` and ``1.0`` do, ``1`` and ``true`` do not)."""

    def canon(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [canon(x) for x in v]
        if isinstance(v, dict):
            return {k: canon(x) for k, x in v.items()}
        return v

    return json.dumps(canon(value), sort_keys=True)


def without(schema: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in keys}


# Keywords whose two writer-side values hold together exactly when their ``allOf`` does.
_CONJOINED = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)


def merge_schemas(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The conjunction of two writer schemas, as far as it can be written as one schema.

    Conflicts that need more than this keep ``a``'s constraint and drop ``b``'s: a larger writer
    only makes the check stricter, never lets an incompatible change through.
    """
    out = dict(a)
    for key, value in b.items():
        existing_sum = next((k for k in ("anyOf", "oneOf") if isinstance(out.get(k), list)), None)
        if key in ("anyOf", "oneOf") and isinstance(value, list) and existing_sum is not None:
            # (A1 or A2) and (B1 or B2) = (A1 and B1) or (A1 and B2) or …; past a small product,
            # keep only ``a``'s alternatives (a larger writer, so still a safe answer).
            left = out[existing_sum]
            if len(left) * len(value) <= 64:
                out[existing_sum] = [{"allOf": [x, y]} for x in left for y in value]
        elif key not in out:
            out[key] = value
        elif key in _CONJOINED and isinstance(value, dict | bool) and isinstance(out[key], dict | bool):
            out[key] = {"allOf": [out[key], value]}
        elif key == "not" and isinstance(value, dict | bool) and isinstance(out[key], dict | bool):
            out[key] = {"anyOf": [out[key], value]}  # not A and not B = not (A or B)
        elif key == "enum" and isinstance(value, list) and isinstance(out[key], list):
            allowed = {value_key(v) for v in value}
            out[key] = [v for v in out[key] if value_key(v) in allowed]
        elif (
            key in ("properties", "patternProperties")
            and isinstance(value, dict)
            and isinstance(out[key], dict)
        ):
            props = dict(out[key])
            for name, sub in value.items():
                props[name] = {"allOf": [props[name], sub]} if name in props else sub
            out[key] = props
        elif key == "required" and isinstance(value, list) and isinstance(out[key], list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        elif key == "type":
            left, right = types_of({"type": out[key]}) or set(), types_of({"type": value}) or set()
            both = (left & right) | (
                {"integer"}
                if ("integer" in left and "number" in right) or ("number" in left and "integer" in right)
                else set()
            )
            out[key] = sorted(both)
        elif key == "multipleOf" and is_number(value) and is_number(out[key]):
            out[key] = _lcm(out[key], value)
        elif key in ("minimum", "minLength", "minItems", "minProperties") and is_number(value):
            out[key] = max(out[key], value) if is_number(out[key]) else value
        elif key in ("maximum", "maxLength", "maxItems", "maxProperties") and is_number(value):
            out[key] = min(out[key], value) if is_number(out[key]) else value
    return out


def _lcm(a: float, b: float) -> float:
    """Least common multiple of two positive rationals (multiples of both are multiples of it)."""
    x, y = Fraction(str(a)), Fraction(str(b))
    result = Fraction(math.lcm(x.numerator, y.numerator), math.gcd(x.denominator, y.denominator))
    return int(result) if result.denominator == 1 else float(result)


def dict_of(schema: dict[str, Any], keyword: str) -> dict[str, Any]:
    """``schema[keyword]`` when it is an object, else empty (the metaschema was checked, but a
    walk can reach merged or foreign documents)."""
    value = schema.get(keyword)
    return value if isinstance(value, dict) else {}


def list_of(schema: dict[str, Any], keyword: str) -> list[Any]:
    value = schema.get(keyword)
    return value if isinstance(value, list) else []


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def compare_reader_enum(r: dict[str, Any], wtypes: set[str] | None, loc: str) -> list[Incompatibility]:
    """A reader enum against a writer without one: only a writer whose types have finitely many
    values, all listed (``boolean`` with both, ``null``), stays compatible."""
    values = enum_values(r)
    if values is None:
        return []
    finite: dict[str, list[Any]] = {"boolean": [True, False], "null": [None]}
    if wtypes and all(t in finite for t in wtypes):
        listed = {value_key(v) for v in values}
        if all(value_key(v) in listed for t in wtypes for v in finite[t]):
            return []
    keyword = "const" if "const" in r else "enum"
    return [
        Incompatibility(
            "ENUM_ARRAY_NARROWED", f"{loc}/{keyword}", f"the reader added {keyword} the writer does not have"
        )
    ]


def bound(schema: dict[str, Any], side: str, dialect: str) -> tuple[float, bool, str] | None:
    """The tightest lower (``minimum``) or upper (``maximum``) bound as (value, exclusive, keyword);
    draft 4 spells exclusivity as a boolean next to ``minimum``/``maximum``."""
    exclusive_key = "exclusiveMinimum" if side == "minimum" else "exclusiveMaximum"
    plain, exclusive = schema.get(side), schema.get(exclusive_key)
    candidates: list[tuple[float, bool, str]] = []
    if is_number(plain):
        candidates.append((plain, exclusive is True, exclusive_key if exclusive is True else side))
    if is_number(exclusive):
        candidates.append((exclusive, True, exclusive_key))
    if not candidates:
        return None

    def tightness(c: tuple[float, bool, str]) -> tuple[float, bool]:
        return (c[0], c[1]) if side == "minimum" else (-c[0], c[1])

    return max(candidates, key=tightness)


def compare_limits(
    r: dict[str, Any], w: dict[str, Any], keyword: str, kind: str, *, upper: bool, loc: str
) -> list[Incompatibility]:
    reader, writer = r.get(keyword), w.get(keyword)
    if not is_number(reader):
        return []
    where = f"{loc}/{keyword}"
    if not is_number(writer):
        if not upper and reader <= 0:
            return []
        return [Incompatibility(f"{kind}_ADDED", where, f"the reader added {keyword} {reader}")]
    if (reader < writer) if upper else (reader > writer):
        change = "DECREASED" if upper else "INCREASED"
        return [Incompatibility(f"{kind}_{change}", where, f"{keyword} changed from {writer} to {reader}")]
    return []


def compare_bounds(r: dict[str, Any], w: dict[str, Any], noun: str, *, loc: str) -> list[Incompatibility]:
    """``max<noun>`` and ``min<noun>`` together (``Length``, ``Items``, ``Properties``): the reader may
    not accept a narrower range than the writer produced."""
    kind = noun.upper()
    upper = compare_limits(r, w, f"max{noun}", f"MAX_{kind}", upper=True, loc=loc)
    return upper + compare_limits(r, w, f"min{noun}", f"MIN_{kind}", upper=False, loc=loc)


def items_of(schema: dict[str, Any], *, reader: bool = False) -> tuple[list[Any], Any, str, str]:
    """Array items as (positional schemas, schema for the rest, keyword of each) across drafts.

    ``unevaluatedItems`` stands for the rest when nothing else does: after a tuple, the positions
    past it are exactly the unevaluated ones. On the reader's side only (``reader=True``), an
    ``additionalItems`` with no tuple before it is read as constraining every item, as Confluent's
    everit-based checker does; narrowing a reader is the safe direction, so the writer keeps the
    specification's meaning (such an ``additionalItems`` is ignored).
    """
    uneval = schema.get("unevaluatedItems", True)
    if isinstance(schema.get("prefixItems"), list):
        return schema["prefixItems"], schema.get("items", uneval), "prefixItems", "items"
    if isinstance(schema.get("items"), list):
        rest_key = (
            "additionalItems"
            if "additionalItems" in schema or "unevaluatedItems" not in schema
            else ("unevaluatedItems")
        )
        return schema["items"], schema.get("additionalItems", uneval), "items", rest_key
    if "items" in schema:
        return [], schema["items"], "items", "items"
    if reader and "additionalItems" in schema:
        return [], schema["additionalItems"], "items", "additionalItems"
    return [], uneval, "items", "items" if "unevaluatedItems" not in schema else "unevaluatedItems"


def items_form(schema: dict[str, Any]) -> str | None:
    """``"list"`` when one schema covers every item, ``"tuple"`` when items are positional, else
    ``None`` (no item keyword). Confluent treats a change between the two as incompatible: code
    generated from them differs (a list type against a tuple type) even where the values would
    validate."""
    if isinstance(schema.get("prefixItems"), list) or isinstance(schema.get("items"), list):
        return "tuple"
    if "items" in schema and not is_open(schema["items"]):
        return "list"
    return None


def schema_for_name(schema: dict[str, Any], name: str) -> Any:
    """What ``schema`` says about an undeclared property ``name``: the first matching
    ``patternProperties`` entry, else ``additionalProperties`` (open by default)."""
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern, sub in patterns.items():
            try:
                if re.search(pattern, name):
                    return sub
            except re.error:
                continue
    return schema.get("additionalProperties", True)


def dependencies_of(schema: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    arrays: dict[str, list[str]] = {}
    schemas: dict[str, Any] = {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        value = schema.get(keyword)
        if not isinstance(value, dict):
            continue
        for trigger, dep in value.items():
            if isinstance(dep, list):
                arrays[trigger] = [d for d in dep if isinstance(d, str)]
            elif isinstance(dep, dict | bool):
                schemas[trigger] = dep
    return arrays, schemas


# Regex syntax whose match depends on where it stands in the input (anchors, lookaround, word
# boundaries, back-references): a pattern free of it that matches "" matches every string.
_POSITIONAL = re.compile(r"[\^$]|\\[AZbBzG1-9]|\(\?[=!<]")


def universal_names(schema: Any) -> bool:
    """True when ``schema``, used as ``propertyNames``, accepts every string: it is open, or only
    says ``type: string`` and an unanchored ``pattern`` that matches the empty string (JSON Schema
    patterns search, so such a pattern matches at the start of any name)."""
    if is_open(schema):
        return True
    if not isinstance(schema, dict) or any(k not in ANNOTATIONS | {"type", "pattern"} for k in schema):
        return False
    if schema.get("type", "string") != "string":
        return False
    pattern = schema.get("pattern")
    if pattern is None:
        return True
    if not isinstance(pattern, str) or _POSITIONAL.search(pattern):
        return False
    try:
        return re.search(pattern, "") is not None
    except re.error:
        return False
