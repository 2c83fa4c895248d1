"""Avro schemas in the text Confluent stores: the Java library's ``Schema.toString()`` rendering.

Confluent keeps an Avro schema as the Java parser prints it back, not as the client sent it, so a
schema that differs only in key order, whitespace, ``{"type": "int"}`` for ``"int"`` or a repeated
namespace is one schema with one id and one version. The Java printer writes each construct's
reserved keys in a fixed order, then the other properties in the order given:

- record/error: ``type, name, namespace, doc, fields, <props>, aliases``
- field: ``name, type, doc, default, order (unless ascending), aliases, <props>``
- enum: ``type, name, namespace, doc, symbols, default, <props>, aliases``
- fixed: ``type, name, namespace, doc, size, <props>, aliases``
- array/map: ``type, items|values, <props>``; a primitive with no props is just its name.

Names are written relative to the enclosing namespace: ``namespace`` only where it differs from
the enclosing one (``""`` for a null namespace inside a named one), and a reference to a named type
as its short name when it lives in the enclosing namespace. Not Avro's Parsing Canonical Form,
which drops docs, defaults and aliases that readers need.
"""

from __future__ import annotations

from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_RESERVED = {
    "record": ("type", "name", "namespace", "doc", "fields", "aliases"),
    "error": ("type", "name", "namespace", "doc", "fields", "aliases"),
    "enum": ("type", "name", "namespace", "doc", "symbols", "default", "aliases"),
    "fixed": ("type", "name", "namespace", "doc", "size", "aliases"),
    "array": ("type", "items"),
    "map": ("type", "values"),
}
_FIELD_RESERVED = ("name", "type", "doc", "default", "order", "aliases")


def java_form(node: Any) -> Any:
    """``node`` (decoded schema JSON that already parsed) rebuilt as Java prints it."""
    return _Printer().schema(node, None)


class _Printer:
    def __init__(self) -> None:
        self.defined: set[str] = set()

    def schema(self, node: Any, space: str | None) -> Any:
        if isinstance(node, str):
            return node if node in PRIMITIVES else _relative(_full(node, space), space)
        if isinstance(node, list):
            return [self.schema(branch, space) for branch in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if not isinstance(kind, str) or kind not in _RESERVED:
            if isinstance(kind, str) and kind in PRIMITIVES:
                props = _props(node, ("type",))
                return {"type": kind, **props} if props else kind
            return self.schema(kind, space)  # {"type": <schema>} wraps another schema
        if kind in ("array", "map"):
            inner = "items" if kind == "array" else "values"
            return {"type": kind, inner: self.schema(node.get(inner), space), **_props(node, _RESERVED[kind])}
        return self._named(node, kind, space)

    def _named(self, node: dict[str, Any], kind: str, space: str | None) -> Any:
        name = str(node.get("name", ""))
        if "." in name:
            own_space: str | None = name.rsplit(".", 1)[0]
            short = name.rsplit(".", 1)[1]
        else:
            given = node.get("namespace", space)
            own_space = given if isinstance(given, str) and given else None
            short = name
        full = f"{own_space}.{short}" if own_space else short
        if full in self.defined:
            return _relative(full, space)
        self.defined.add(full)
        out: dict[str, Any] = {"type": kind, "name": short}
        if own_space is not None and own_space != space:
            out["namespace"] = own_space
        elif own_space is None and space is not None:
            out["namespace"] = ""
        if "doc" in node:
            out["doc"] = node["doc"]
        if kind in ("record", "error"):
            out["fields"] = [self._field(f, own_space) for f in node.get("fields", [])]
        elif kind == "enum":
            out["symbols"] = node.get("symbols", [])
            if "default" in node:
                out["default"] = node["default"]
        else:
            out["size"] = node.get("size")
        out.update(_props(node, _RESERVED[kind]))
        aliases = node.get("aliases")
        if isinstance(aliases, list) and aliases:
            out["aliases"] = [_relative(_full(str(a), own_space), own_space) for a in aliases]
        return out

    def _field(self, field: Any, space: str | None) -> Any:
        if not isinstance(field, dict):
            return field
        out: dict[str, Any] = {"name": field.get("name"), "type": self.schema(field.get("type"), space)}
        if "doc" in field:
            out["doc"] = field["doc"]
        if "default" in field:
            out["default"] = field["default"]
        if field.get("order", "ascending") != "ascending":
            out["order"] = field["order"]
        aliases = field.get("aliases")
        if isinstance(aliases, list) and aliases:
            out["aliases"] = aliases
        out.update(_props(field, _FIELD_RESERVED))
        return out


def _props(node: dict[str, Any], reserved: tuple[str, ...]) -> dict[str, Any]:
    """The non-reserved keys in the order given (Java keeps them in a linked map)."""
    return {k: v for k, v in node.items() if k not in reserved}


def _full(name: str, space: str | None) -> str:
    return name if "." in name or not space else f"{space}.{name}"


def _relative(full: str, space: str | None) -> str:
    if space and full.startswith(space + ".") and "." not in full[len(space) + 1 :]:
        return full[len(space) + 1 :]
    return full
