"""Avro: parsing with the ``avro`` package, Confluent's stored forms, and schema-resolution checks.

What Confluent stores is the schema as the Java library prints it back (see
:mod:`~tabletopic.schema_registry.formats.avro_canonical`), so :meth:`AvroSchema.canonical` renders
that: key order and whitespace alone never make a new schema. ``normalize=true`` additionally
qualifies every name and sorts aliases, so more cosmetic edits map to one schema.

Compatibility follows the Avro specification's schema-resolution rules as Java's
``SchemaCompatibility`` applies them (which is what Confluent runs): each finding carries a
JSON-pointer location into the reader schema for ``verbose=true`` answers. The checker is our own
rather than ``avro.compatibility`` because that one loses locations when it merges results and
reports union branches at the wrong path.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.name
import avro.schema as avs

from tabletopic.schema_registry.formats.avro_canonical import java_form
from tabletopic.schema_registry.formats.base import Incompatibility, InvalidSchema, SchemaType

# Like Java, an unknown or misplaced logicalType is ignored (the schema stays valid); avro warns for
# each, which a server would print per request. Filtering the category once is thread-safe, unlike
# catch_warnings around every parse.
warnings.filterwarnings("ignore", category=avro.errors.IgnoredLogicalType)

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})

# Writer type -> reader types that can read it (Avro spec, "Schema Resolution": promotions).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}

# Key order of normalized schemas: what a reader looks for first, then everything else sorted.
_KEY_ORDER = ("type", "name", "fields", "symbols", "items", "values", "size", "default", "aliases")


@dataclass(frozen=True, slots=True)
class AvroSchema:
    """A parsed Avro schema plus the text forms the registry stores and compares."""

    schema: avs.Schema
    raw: Any  # the decoded JSON as given
    schema_type: str = SchemaType.AVRO

    def canonical(self) -> str:
        return json.dumps(java_form(self.raw), separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        return json.dumps(_normalize(self.raw, None, set()), separators=(",", ":"), ensure_ascii=False)


class AvroFormat:
    """The :class:`~tabletopic.schema_registry.formats.base.SchemaFormat` for Avro."""

    schema_type = SchemaType.AVRO

    def parse(self, text: str, references: Mapping[str, str]) -> AvroSchema:
        """Parse ``text`` after defining every referenced named type in the same name table.

        Raises:
            InvalidSchema: malformed JSON, unknown or redefined names, bad defaults or symbols.
        """
        # Names are checked once each after the parse: avro's own check re-validates the enclosing
        # namespace for every field whose type is a primitive (a fifth of a 50-field parse).
        names = avro.name.Names(validate_names=False)
        for ref_name, ref_text in references.items():
            try:
                avs.make_avsc_object(_decode(ref_text), names, validate_names=False)
            except InvalidSchema as exc:
                raise InvalidSchema(f"reference {ref_name}: {exc}") from exc
            except (avro.errors.AvroException, TypeError, ValueError, KeyError, AttributeError) as exc:
                raise InvalidSchema(f"reference {ref_name}: {exc}") from exc
        raw = _decode(text)
        try:
            schema = avs.make_avsc_object(raw, names, validate_names=False)
            for fullname in names.names:
                for part in fullname.split("."):
                    avro.name.validate_basename(part)
        except (avro.errors.AvroException, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise InvalidSchema(str(exc) or type(exc).__name__) from exc
        for location, field in _fields(schema, "", set()):
            if field.has_default and not _default_fits(field.type, field.default):
                raise InvalidSchema(
                    f"default value {json.dumps(field.default)} of field '{field.name}' at {location} "
                    f"does not match its type {_describe(field.type)}"
                )
        return AvroSchema(schema=schema, raw=raw)

    def reader_can_read(self, reader: object, writer: object) -> list[Incompatibility]:
        if not isinstance(reader, AvroSchema) or not isinstance(writer, AvroSchema):
            return [Incompatibility("TYPE_MISMATCH", "/", "schemas of different types are incompatible")]
        return _Checker().check(reader.schema, writer.schema, "")


FORMAT = AvroFormat()


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        # A bare name such as `string` (no quotes) is what people type; Confluent accepts it too.
        if isinstance(text, str) and text.strip() in PRIMITIVES:
            return text.strip()
        raise InvalidSchema(f"not valid JSON: {exc}") from exc


# --- default values --------------------------------------------------------------------------------


def _fields(schema: avs.Schema, location: str, seen: set[str]) -> Iterator[tuple[str, avs.Field]]:
    """Every record field reachable from ``schema`` with its location (each named type once)."""
    if isinstance(schema, avs.NamedSchema):
        if schema.fullname in seen:
            return
        seen.add(schema.fullname)
    if isinstance(schema, avs.RecordSchema):
        for index, field in enumerate(schema.fields):
            here = f"{location}/fields/{index}"
            yield here, field
            yield from _fields(field.type, f"{here}/type", seen)
    elif isinstance(schema, avs.ArraySchema):
        yield from _fields(schema.items, f"{location}/items", seen)
    elif isinstance(schema, avs.MapSchema):
        yield from _fields(schema.values, f"{location}/values", seen)
    elif isinstance(schema, avs.UnionSchema):
        for index, branch in enumerate(schema.schemas):
            yield from _fields(branch, f"{location}/{index}", seen)


def _default_fits(schema: avs.Schema, value: Any) -> bool:
    """Whether a JSON default is a valid value of ``schema`` (spec: "Default values"). Unions accept a
    value of any branch: the spec asks for the first, but Java's parser and real schemas are lenient."""
    if isinstance(schema, avs.UnionSchema):
        return any(_default_fits(branch, value) for branch in schema.schemas)
    if isinstance(schema, avs.FixedSchema):
        return isinstance(value, str) and len(value) == schema.size
    if isinstance(schema, avs.EnumSchema):
        return isinstance(value, str) and value in schema.symbols
    if isinstance(schema, avs.ArraySchema):
        return isinstance(value, list) and all(_default_fits(schema.items, v) for v in value)
    if isinstance(schema, avs.MapSchema):
        return isinstance(value, dict) and all(_default_fits(schema.values, v) for v in value.values())
    if isinstance(schema, avs.RecordSchema):
        return isinstance(value, dict) and all(
            _default_fits(field.type, value[field.name]) if field.name in value else field.has_default
            for field in schema.fields
        )
    return _primitive_default_fits(str(schema.type), value)


def _primitive_default_fits(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("int", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind in ("float", "double"):
        if isinstance(value, str):
            return value in ("NaN", "Infinity", "-Infinity")
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind in ("bytes", "string"):
        return isinstance(value, str)
    return True


def _describe(schema: avs.Schema) -> str:
    return getattr(schema, "fullname", None) or str(schema.type)


# --- normalization ---------------------------------------------------------------------------------


def _qualify(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _normalize(node: Any, namespace: str | None, defined: set[str]) -> Any:
    if isinstance(node, str):
        return node if node in PRIMITIVES else _qualify(node, namespace)
    if isinstance(node, list):
        return [_normalize(branch, namespace, defined) for branch in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    extra = {k: v for k, v in node.items() if k not in ("type", "name", "namespace")}
    if isinstance(kind, str) and kind in PRIMITIVES and not extra:
        return kind
    out: dict[str, Any] = {}
    if isinstance(kind, str) and kind in NAMED:
        name = str(node.get("name", ""))
        inner_ns = node.get("namespace", namespace) if "." not in name else name.rsplit(".", 1)[0]
        fullname = _qualify(name, node.get("namespace", namespace))
        defined.add(fullname)
        out["type"] = kind
        out["name"] = fullname
        for key, value in extra.items():
            if key == "fields" and isinstance(value, list):
                out["fields"] = [_normalize_field(f, inner_ns, defined) for f in value]
            elif key == "aliases" and isinstance(value, list):
                out["aliases"] = sorted(_qualify(str(a), inner_ns) for a in value)
            else:
                out[key] = value
    else:
        out["type"] = _normalize(kind, namespace, defined)
        for key, value in extra.items():
            out[key] = _normalize(value, namespace, defined) if key in ("items", "values") else value
    return _ordered(out)


def _normalize_field(field: Any, namespace: str | None, defined: set[str]) -> Any:
    if not isinstance(field, dict):
        return field
    out = {k: v for k, v in field.items() if k != "type"}
    out["type"] = _normalize(field.get("type"), namespace, defined)
    if isinstance(out.get("aliases"), list):
        out["aliases"] = sorted(str(a) for a in out["aliases"])
    ordered = _ordered(out)
    return {"name": ordered.pop("name"), **ordered} if "name" in ordered else ordered


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    first = [k for k in _KEY_ORDER if k in node]
    rest = sorted(k for k in node if k not in _KEY_ORDER)
    return {k: node[k] for k in first + rest}


# --- compatibility ---------------------------------------------------------------------------------


def _type_name(schema: avs.Schema) -> str:
    return str(schema.type).upper()


class _Checker:
    """Schema resolution between one reader and one writer, collecting every incompatibility.

    Recursive named types are handled by assuming a pair already under inspection is compatible
    (the same fixpoint Java's checker uses), so self-referencing records terminate.
    """

    def __init__(self) -> None:
        self._in_progress: set[tuple[int, int]] = set()

    def check(self, reader: avs.Schema, writer: avs.Schema, location: str) -> list[Incompatibility]:
        key = (id(reader), id(writer))
        if key in self._in_progress:
            return []
        self._in_progress.add(key)
        try:
            return self._check(reader, writer, location)
        finally:
            self._in_progress.discard(key)

    def compatible(self, reader: avs.Schema, writer: avs.Schema) -> bool:
        return not self.check(reader, writer, "")

    def _check(self, reader: avs.Schema, writer: avs.Schema, location: str) -> list[Incompatibility]:
        if isinstance(writer, avs.UnionSchema) or isinstance(reader, avs.UnionSchema):
            return self._unions(reader, writer, location)
        rtype, wtype = str(reader.type), str(writer.type)
        if rtype != wtype:
            if rtype in PROMOTIONS.get(wtype, ()):
                return []
            return [
                _incompat(
                    "TYPE_MISMATCH",
                    location,
                    f"reader type: {_type_name(reader)} not compatible with writer type: "
                    f"{_type_name(writer)}",
                )
            ]
        if isinstance(reader, avs.ArraySchema) and isinstance(writer, avs.ArraySchema):
            return self.check(reader.items, writer.items, f"{location}/items")
        if isinstance(reader, avs.MapSchema) and isinstance(writer, avs.MapSchema):
            return self.check(reader.values, writer.values, f"{location}/values")
        if isinstance(reader, avs.FixedSchema) and isinstance(writer, avs.FixedSchema):
            return _name_check(reader, writer, location) + _fixed_size(reader, writer, location)
        if isinstance(reader, avs.EnumSchema) and isinstance(writer, avs.EnumSchema):
            return _name_check(reader, writer, location) + _enum_symbols(reader, writer, location)
        if isinstance(reader, avs.RecordSchema) and isinstance(writer, avs.RecordSchema):
            return _name_check(reader, writer, location) + self._record(reader, writer, location)
        return []  # the same primitive type

    def _unions(self, reader: avs.Schema, writer: avs.Schema, location: str) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        if isinstance(writer, avs.UnionSchema) and not isinstance(reader, avs.UnionSchema):
            # Every branch the writer may have used must resolve against the reader.
            for branch in writer.schemas:
                found += self.check(reader, branch, location)
            return found
        assert isinstance(reader, avs.UnionSchema)
        if not isinstance(writer, avs.UnionSchema):
            if any(self.compatible(branch, writer) for branch in reader.schemas):
                return []
            message = f"reader union lacking writer type: {_type_name(writer)}"
            return [_incompat("MISSING_UNION_BRANCH", location, message)]
        for index, branch in enumerate(writer.schemas):
            if not any(self.compatible(r, branch) for r in reader.schemas):
                message = f"reader union lacking writer type: {_type_name(branch)}"
                found.append(_incompat("MISSING_UNION_BRANCH", f"{location}/{index}", message))
        return found

    def _record(
        self, reader: avs.RecordSchema, writer: avs.RecordSchema, location: str
    ) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        by_name = writer.fields_dict  # avro rebuilds this dict on every access: take it once
        for index, field in enumerate(reader.fields):
            here = f"{location}/fields/{index}"
            writer_field = _writer_field(by_name, field)
            if writer_field is None:
                if not field.has_default:
                    found.append(
                        _incompat(
                            "READER_FIELD_MISSING_DEFAULT_VALUE",
                            here,
                            f"The field '{field.name}' at path '{here}' in the reader schema has no default "
                            "value and is missing in the writer schema",
                        )
                    )
                continue
            found += self.check(field.type, writer_field.type, f"{here}/type")
        return found


def _incompat(kind: str, location: str, message: str) -> Incompatibility:
    return Incompatibility(kind=kind, location=location or "/", message=message)


def _aliases(schema: avs.NamedSchema) -> set[str]:
    aliases = schema.props.get("aliases")
    names = [str(a) for a in aliases] if isinstance(aliases, list) else []
    namespace = getattr(schema, "namespace", None)
    return set(names) | {_qualify(a, namespace) for a in names}


def _fixed_size(reader: avs.FixedSchema, writer: avs.FixedSchema, location: str) -> list[Incompatibility]:
    if reader.size == writer.size:
        return []
    message = f"expected: {writer.size}, found: {reader.size}"
    return [_incompat("FIXED_SIZE_MISMATCH", f"{location}/size", message)]


def _enum_symbols(reader: avs.EnumSchema, writer: avs.EnumSchema, location: str) -> list[Incompatibility]:
    """A writer symbol the reader lacks is readable only through the reader's default symbol."""
    missing = [s for s in writer.symbols if s not in reader.symbols]
    if not missing or reader.props.get("default") in reader.symbols:
        return []
    message = f"reader enum {reader.fullname} lacks writer symbols {missing} and has no default"
    return [_incompat("MISSING_ENUM_SYMBOLS", f"{location}/symbols", message)]


def _name_check(reader: avs.NamedSchema, writer: avs.NamedSchema, location: str) -> list[Incompatibility]:
    # Java compares unqualified names, or a reader alias naming the writer (qualified or not).
    if reader.name == writer.name or {writer.fullname, writer.name} & _aliases(reader):
        return []
    return [_incompat("NAME_MISMATCH", f"{location}/name", f"expected: {writer.fullname}")]


def _writer_field(by_name: Mapping[str, avs.Field], reader_field: avs.Field) -> avs.Field | None:
    """The writer's field a reader field resolves to: same name, else one of the reader's aliases."""
    aliases = reader_field.props.get("aliases")
    for name in [reader_field.name, *(aliases if isinstance(aliases, list) else [])]:
        match = by_name.get(str(name))
        if isinstance(match, avs.Field):
            return match
    return None
