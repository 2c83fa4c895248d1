"""Parsing JSON Schemas: metaschema validation, ``$ref`` resolution and the two stored forms.

Confluent stores JSON schemas as compact JSON with the keys in the order the client gave them, so
``canonical()`` keeps that order; ``normalized()`` sorts keys and unifies order-insensitive forms
(``type`` lists, ``required``, ``enum``) so two spellings of one schema compare equal.

References arrive as a mapping from reference name (the URL used in ``$ref``) to the referenced
schema's text; they are loaded into a :mod:`referencing` registry, so ``$ref`` resolution follows the
JSON Schema rules (``$id`` base URIs, JSON pointers, anchors) instead of ad-hoc string matching.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema
from referencing import Registry, Resource

if TYPE_CHECKING:
    # ``referencing`` does not re-export its resolver class; only its public methods are used.
    from referencing._core import Resolver as _Resolver

    Resolver = _Resolver[Any]
else:
    Resolver = Any

from tabletopic.schema_registry.formats.base import InvalidSchema, SameByCanonicalText, SchemaType

# Metaschema URIs we accept in ``$schema`` (without the optional trailing "#"). Draft 3 is left out
# on purpose: Confluent never supported it and its ``required: true`` form confuses the rules.
SUPPORTED_DIALECTS: dict[str, str] = {
    "http://json-schema.org/draft-04/schema": "draft-04",
    "http://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-07/schema": "draft-07",
    "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "https://json-schema.org/draft/2020-12/schema": "2020-12",
}
# Confluent's default when ``$schema`` is absent.
DEFAULT_DIALECT = "http://json-schema.org/draft-07/schema"

# Keywords whose value is one subschema, a list of subschemas, or a name -> subschema map.
SINGLE_SUBSCHEMA_KEYWORDS = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "not",
        "propertyNames",
        "if",
        "then",
        "else",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
LIST_SUBSCHEMA_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
MAP_SUBSCHEMA_KEYWORDS = frozenset(
    {"properties", "patternProperties", "definitions", "$defs", "dependentSchemas"}
)

JsonSchemaValue = dict[str, Any] | bool


def escape_pointer(token: str) -> str:
    """Escape one JSON-pointer token (RFC 6901), so property names with ``/`` stay unambiguous."""
    return token.replace("~", "~0").replace("/", "~1")


def iter_subschemas(schema: Any) -> Iterator[tuple[str, Any]]:
    """Yield ``(relative pointer, subschema)`` for every direct subschema of ``schema``.

    Only schema positions are visited: a property called ``type`` or an ``enum`` value that looks
    like a schema is data, and must not be rewritten or followed.
    """
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        token = escape_pointer(key)
        if key in SINGLE_SUBSCHEMA_KEYWORDS:
            if isinstance(value, dict | bool):
                yield token, value
        elif key in LIST_SUBSCHEMA_KEYWORDS or (key == "items" and isinstance(value, list)):
            if isinstance(value, list):
                for index, item in enumerate(value):
                    yield f"{token}/{index}", item
        elif key == "items":
            if isinstance(value, dict | bool):
                yield token, value
        elif (key in MAP_SUBSCHEMA_KEYWORDS or key == "dependencies") and isinstance(value, dict):
            for name, item in value.items():
                # ``dependencies`` mixes schemas and arrays of property names.
                if isinstance(item, dict | bool):
                    yield f"{token}/{escape_pointer(name)}", item


@dataclass(frozen=True, eq=False)
class ParsedJsonSchema(SameByCanonicalText):
    """A validated JSON Schema plus everything needed to follow its ``$ref``s.

    ``schema`` is the decoded document (a dict, or a boolean schema); ``dialect`` its metaschema
    URI without the trailing ``#`` (draft 7 when ``$schema`` is absent); ``references`` the
    referenced documents by reference name, already decoded; ``registry`` all of them loaded for
    ``$ref`` resolution.
    """

    schema: JsonSchemaValue
    dialect: str
    references: Mapping[str, JsonSchemaValue] = field(default_factory=dict)
    registry: Registry[Any] = field(default_factory=Registry)
    schema_type: str = SchemaType.JSON

    def canonical(self) -> str:
        """Compact JSON, keys in the given order: what Confluent stores and compares."""
        return json.dumps(self.schema, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        """Compact JSON with sorted keys and order-insensitive keyword values sorted."""
        return json.dumps(normalize(self.schema), separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def root_resolver(self) -> Resolver:
        """A resolver positioned at the root document, for following ``$ref`` from the top."""
        spec = referencing.jsonschema.specification_with(self.dialect)
        return self.registry.resolver_with_root(spec.create_resource(self.schema))

    def validator(self) -> Any:
        """A ``jsonschema`` validator for instances, with the references available (for tests and
        for a pipeline that wants to check records before writing them)."""
        cls = jsonschema.validators.validator_for(self.schema, default=_default_validator())
        return cls(self.schema, registry=self.registry)


def _default_validator() -> Any:
    return jsonschema.validators.validator_for({"$schema": DEFAULT_DIALECT})


def enter(schema: Any, resolver: Resolver, dialect: str) -> Resolver:
    """The resolver for refs inside ``schema``: a subschema with its own ``$id`` moves the base URI."""
    if isinstance(schema, dict) and ("$id" in schema or "id" in schema):
        spec = referencing.jsonschema.specification_with(dialect)
        try:
            return resolver.in_subresource(spec.create_resource(schema))
        except Exception:  # a malformed $id: keep the outer base rather than failing a check
            return resolver
    return resolver


REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords next to a reference that identify or annotate rather than constrain.
_NOT_CONSTRAINTS = frozenset(
    {*REF_KEYWORDS, "$id", "$schema", "$comment", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"}
)


def ref_of(schema: Any) -> str | None:
    """The reference a subschema follows, if any.

    ``$dynamicRef``/``$recursiveRef`` are resolved statically (from where they are written), which
    is what they mean for a schema that is not extended by another; ignoring them instead would
    make a reader look more permissive than it is.
    """
    if not isinstance(schema, dict):
        return None
    for keyword in REF_KEYWORDS:
        value = schema.get(keyword)
        if isinstance(value, str):
            return value
    return None


def dereference(schema: Any, resolver: Resolver, dialect: str) -> tuple[Any, Resolver]:
    """Follow ``$ref`` once: the target and the resolver to continue from.

    When a ``$ref`` has siblings (allowed from 2019-09 on), the result is ``allOf`` of the target
    and the siblings, which is what a validator checks.

    Raises:
        referencing.exceptions.Unresolvable: the reference does not resolve.
    """
    ref = ref_of(schema)
    if ref is None:
        return schema, resolver
    resolver = enter(schema, resolver, dialect)
    ignored = (
        *REF_KEYWORDS,
        "$id",
        "$schema",
        "$comment",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
    )
    siblings = {k: v for k, v in schema.items() if k not in ignored}
    if siblings and SUPPORTED_DIALECTS[dialect] not in ("draft-04", "draft-06", "draft-07"):
        # Both halves stay under the current base URI; the bare ``$ref`` is followed when reached.
        return {"allOf": [siblings, {"$ref": ref}]}, resolver
    resolved = resolver.lookup(ref)
    return resolved.contents, resolved.resolver


def normalize(schema: Any) -> Any:
    """Rewrite order-insensitive keyword values into one spelling (keys are sorted on dumping)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, list):
            types = sorted({t for t in value if isinstance(t, str)})
            out[key] = types[0] if len(types) == 1 else types
        elif key == "required" and isinstance(value, list):
            out[key] = sorted({r for r in value if isinstance(r, str)})
        elif key == "enum" and isinstance(value, list):
            unique = {json.dumps(v, sort_keys=True): v for v in value}
            out[key] = [unique[k] for k in sorted(unique)]
        elif key in SINGLE_SUBSCHEMA_KEYWORDS or (key == "items" and isinstance(value, dict | bool)):
            out[key] = normalize(value)
        elif key in LIST_SUBSCHEMA_KEYWORDS or (key == "items" and isinstance(value, list)):
            out[key] = [normalize(v) for v in value] if isinstance(value, list) else value
        elif key in MAP_SUBSCHEMA_KEYWORDS or key == "dependencies":
            out[key] = (
                {
                    k: normalize(v) if isinstance(v, dict | bool) else (sorted(v) if _is_str_list(v) else v)
                    for k, v in value.items()
                }
                if isinstance(value, dict)
                else value
            )
        else:
            out[key] = value
    return out


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _decode(text: Any, what: str) -> JsonSchemaValue:
    if not isinstance(text, str):
        raise InvalidSchema(f"{what}: expected the schema as a string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidSchema(f"{what}: the schema is empty")
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"{what}: invalid JSON: {exc}") from exc
    if not isinstance(value, dict | bool):
        raise InvalidSchema(
            f"{what}: a JSON Schema must be an object or a boolean, got {type(value).__name__}"
        )
    return value


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON; Python accepts them by default and would store them back out.
    raise ValueError(f"{name} is not valid JSON")


def _dialect_of(schema: JsonSchemaValue, what: str) -> str:
    declared = schema.get("$schema") if isinstance(schema, dict) else None
    if declared is None:
        return DEFAULT_DIALECT
    if not isinstance(declared, str):
        raise InvalidSchema(f"{what}: $schema must be a string")
    key = declared.rstrip("#")
    if key not in SUPPORTED_DIALECTS:
        raise InvalidSchema(
            f"{what}: unsupported $schema {declared!r}; supported: {', '.join(SUPPORTED_DIALECTS)}"
        )
    return key


def _check(schema: JsonSchemaValue, dialect: str, what: str) -> None:
    cls = jsonschema.validators.validator_for({"$schema": dialect})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise InvalidSchema(f"{what}: invalid schema at {where}: {exc.message}") from exc
    except RecursionError as exc:
        raise InvalidSchema(f"{what}: the schema is nested too deeply") from exc


def parse(text: str, references: Mapping[str, str]) -> ParsedJsonSchema:
    """Decode, validate against the metaschema, load references and check every ``$ref`` resolves.

    Raises:
        InvalidSchema: invalid JSON, unsupported ``$schema``, a metaschema violation (in the schema
            or a reference), or a ``$ref`` that resolves nowhere.
    """
    schema = _decode(text, "schema")
    dialect = _dialect_of(schema, "schema")
    _check(schema, dialect, "schema")

    decoded: dict[str, JsonSchemaValue] = {}
    for name, ref_text in references.items():
        what = f"reference {name!r}"
        ref_schema = _decode(ref_text, what)
        _check(ref_schema, _dialect_of(ref_schema, what), what)
        decoded[name] = ref_schema

    default_spec = referencing.jsonschema.specification_with(dialect)
    base = schema.get("$id") if isinstance(schema, dict) else None
    resources: list[tuple[str, Resource[Any]]] = []
    for name, ref_schema in decoded.items():
        resource = Resource.from_contents(ref_schema, default_specification=default_spec)
        resources.append((name, resource))
        if isinstance(base, str) and base:
            # ``"$ref": "address.json"`` inside a schema with ``$id`` resolves against that base.
            resources.append((urljoin(base, name), resource))
    try:
        registry: Registry[Any] = Registry().with_resources(resources).crawl()
    except Exception as exc:
        raise InvalidSchema(f"references could not be loaded: {exc}") from exc

    parsed = ParsedJsonSchema(schema=schema, dialect=dialect, references=decoded, registry=registry)
    _check_refs_resolve(parsed)
    return parsed


def _check_refs_resolve(parsed: ParsedJsonSchema) -> None:
    """Resolve every ``$ref`` once, so a dangling reference is refused at registration time rather
    than discovered by a consumer."""
    seen: set[int] = set()
    stack: list[tuple[Any, Resolver, str]] = [(parsed.schema, parsed.root_resolver(), "#")]
    while stack:
        schema, resolver, location = stack.pop()
        if not isinstance(schema, dict) or id(schema) in seen:
            continue
        seen.add(id(schema))
        resolver = enter(schema, resolver, parsed.dialect)
        ref = ref_of(schema)
        if ref is not None:
            try:
                resolved = resolver.lookup(ref)
            except referencing.exceptions.Unresolvable as exc:
                raise InvalidSchema(f"unresolved $ref {ref!r} at {location}: {exc}") from exc
            except Exception as exc:  # malformed pointers and the like
                raise InvalidSchema(f"invalid $ref {ref!r} at {location}: {exc}") from exc
            stack.append((resolved.contents, resolved.resolver, f"{location}/$ref"))
        for pointer, sub in iter_subschemas(schema):
            stack.append((sub, resolver, f"{location}/{pointer}"))
