"""Render a ``FileDescriptorProto`` as ``.proto`` text.

Confluent stores Protobuf schemas as ``.proto`` text even when a client registers a serialized
descriptor, so the registry needs a printer. Two modes:

- canonical: declaration order kept, type names as short as the scoping rules allow;
- normalized: imports and options sorted, fields in number order, every type name fully
  qualified with a leading dot, so spellings of one schema render to one text.

Message order is kept in both modes: Confluent's wire format addresses a message by its index in
the file, so reordering messages would change which message an index names.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from google.protobuf import descriptor_pb2, text_encoding, text_format
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from tabletopic.schema_registry.formats.protobuf.fields import is_repeated

FIELD_NUMBER_MAX = 536_870_911
ENUM_NUMBER_MAX = 2_147_483_647
SCALAR_NAMES: dict[int, str] = {
    FDP.TYPE_DOUBLE: "double",
    FDP.TYPE_FLOAT: "float",
    FDP.TYPE_INT64: "int64",
    FDP.TYPE_UINT64: "uint64",
    FDP.TYPE_INT32: "int32",
    FDP.TYPE_FIXED64: "fixed64",
    FDP.TYPE_FIXED32: "fixed32",
    FDP.TYPE_BOOL: "bool",
    FDP.TYPE_STRING: "string",
    FDP.TYPE_BYTES: "bytes",
    FDP.TYPE_UINT32: "uint32",
    FDP.TYPE_SFIXED32: "sfixed32",
    FDP.TYPE_SFIXED64: "sfixed64",
    FDP.TYPE_SINT32: "sint32",
    FDP.TYPE_SINT64: "sint64",
}
INDENT = "  "


def render(
    file: descriptor_pb2.FileDescriptorProto,
    dependencies: Iterable[descriptor_pb2.FileDescriptorProto] = (),
    *,
    normalize: bool = False,
) -> str:
    """The ``.proto`` text of ``file``; ``dependencies`` supply the names that imports bring into
    scope, so shortened type names are checked against everything visible."""
    return _Printer(file, [file, *dependencies], normalize).file()


def default_json_name(name: str) -> str:
    """protoc's default ``json_name``: drop underscores, upper-case the letter after each."""
    out: list[str] = []
    upper = False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


class SymbolKind(StrEnum):
    """What a full name names, as far as resolving type names cares."""

    TYPE = "type"  # a message or an enum
    PACKAGE = "package"  # a package prefix
    OTHER = "other"  # fields, enum values, services, extensions


def collect_symbols(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> dict[str, SymbolKind]:
    """Every full name (with leading dot) visible to a file, and what it names."""
    symbols: dict[str, SymbolKind] = {}

    def message(scope: str, proto: descriptor_pb2.DescriptorProto) -> None:
        name = f"{scope}.{proto.name}"
        symbols[name] = SymbolKind.TYPE
        for fld in [*proto.field, *proto.extension]:
            symbols.setdefault(f"{name}.{fld.name}", SymbolKind.OTHER)
        for oneof in proto.oneof_decl:
            symbols.setdefault(f"{name}.{oneof.name}", SymbolKind.OTHER)
        for nested in proto.nested_type:
            message(name, nested)
        for enum in proto.enum_type:
            enum_type(name, enum)

    def enum_type(scope: str, proto: descriptor_pb2.EnumDescriptorProto) -> None:
        symbols[f"{scope}.{proto.name}"] = SymbolKind.TYPE
        for value in proto.value:  # C++ scoping: values are siblings of their enum
            symbols.setdefault(f"{scope}.{value.name}", SymbolKind.OTHER)

    for file in files:
        scope = ""
        for part in file.package.split(".") if file.package else []:
            scope = f"{scope}.{part}"
            symbols.setdefault(scope, SymbolKind.PACKAGE)
        for msg in file.message_type:
            message(scope, msg)
        for enum in file.enum_type:
            enum_type(scope, enum)
        for service in file.service:
            symbols.setdefault(f"{scope}.{service.name}", SymbolKind.OTHER)
        for ext in file.extension:
            symbols.setdefault(f"{scope}.{ext.name}", SymbolKind.OTHER)
    return symbols


def resolve(name: str, scope: str, symbols: dict[str, SymbolKind]) -> str | None:
    """Resolve a relative type name from ``scope`` the way protoc does: the innermost scope
    holding the first component wins, and the rest must then exist under it (no backtracking)."""
    first, _, rest = name.partition(".")
    current = scope
    while True:
        candidate = f"{current}.{first}"
        kind = symbols.get(candidate)
        if kind is not None:
            if not rest:
                return candidate if kind is SymbolKind.TYPE else None
            if kind in (SymbolKind.TYPE, SymbolKind.PACKAGE):
                full = f"{candidate}.{rest}"
                return full if symbols.get(full) is SymbolKind.TYPE else None
        if not current:
            return None
        current = current.rpartition(".")[0]


class _Printer:
    def __init__(
        self,
        file: descriptor_pb2.FileDescriptorProto,
        files: list[descriptor_pb2.FileDescriptorProto],
        normalize: bool,
    ) -> None:
        self.proto = file
        self.normalize = normalize
        self.symbols = collect_symbols(files)
        self.package_scope = "." + file.package if file.package else ""
        self.editions = file.syntax == "editions"
        self.proto3 = file.syntax == "proto3"
        self.lines: list[str] = []

    # -- helpers -------------------------------------------------------------------------------

    def emit(self, depth: int, text: str) -> None:
        self.lines.append(f"{INDENT * depth}{text}" if text else "")

    def type_name(self, full: str, scope: str) -> str:
        if self.normalize or not full.startswith("."):
            return full
        parts = full[1:].split(".")
        for count in range(1, len(parts) + 1):
            candidate = ".".join(parts[-count:])
            if resolve(candidate, scope, self.symbols) == full:
                return candidate
        return full

    def options(self, options: Any) -> list[tuple[str, str]]:
        """``(name, value)`` for each option set on an options message (extensions included)."""
        out: list[tuple[str, str]] = []
        for fld, value in options.ListFields():
            name = f"({fld.full_name})" if fld.is_extension else fld.name
            values = value if is_repeated(fld) else [value]
            out.extend((name, _option_value(fld, v)) for v in values)
        return sorted(out) if self.normalize else out

    def emit_options(self, depth: int, options: Any) -> None:
        for name, value in self.options(options):
            self.emit(depth, f"option {name} = {value};")

    # -- file ----------------------------------------------------------------------------------

    def file(self) -> str:
        proto = self.proto
        if self.editions:
            self.emit(0, f'edition = "{_edition_name(proto.edition)}";')
        else:
            self.emit(0, f'syntax = "{proto.syntax or "proto2"}";')
        if proto.package:
            self.emit(0, f"package {proto.package};")
        imports = []
        for index, dep in enumerate(proto.dependency):
            modifier = (
                "public "
                if index in proto.public_dependency
                else "weak "
                if index in proto.weak_dependency
                else ""
            )
            imports.append(f'import {modifier}"{text_encoding.CEscape(dep, as_utf8=True)}";')
        if imports:
            self.emit(0, "")
            for line in sorted(imports) if self.normalize else imports:
                self.emit(0, line)
        if proto.HasField("options") and self.options(proto.options):
            self.emit(0, "")
            self.emit_options(0, proto.options)
        for message in proto.message_type:
            self.emit(0, "")
            self.message(0, message, self.package_scope)
        for enum in proto.enum_type:
            self.emit(0, "")
            self.enum(0, enum)
        for service in proto.service:
            self.emit(0, "")
            self.service(0, service)
        self.extensions(0, proto.extension, self.package_scope)
        return "\n".join(self.lines) + "\n"

    # -- messages ------------------------------------------------------------------------------

    def message(
        self, depth: int, proto: descriptor_pb2.DescriptorProto, scope: str, group: FDP | None = None
    ) -> None:
        name = f"{scope}.{proto.name}"
        if group is None:
            self.emit(depth, f"message {proto.name} {{")
        else:
            self.emit(
                depth,
                f"{self.label(group, in_oneof=False)}group {proto.name} = {group.number}"
                f"{self.field_options(group, name)} {{",
            )
        inner = depth + 1
        if proto.HasField("options"):
            self.emit_options(inner, proto.options)
        self.reserved(inner, proto.reserved_range, proto.reserved_name, FIELD_NUMBER_MAX, end_exclusive=True)

        nested_by_name = {n.name: n for n in proto.nested_type}
        skip_nested: set[str] = set()
        real_oneofs = self.real_oneofs(proto)
        # (number, a field or a real oneof's (index, members)), in declaration or number order.
        items: list[tuple[int, FDP | tuple[int, list[FDP]]]] = []
        seen_oneofs: set[int] = set()
        for fld in proto.field:
            if fld.HasField("oneof_index") and fld.oneof_index in real_oneofs:
                if fld.oneof_index not in seen_oneofs:
                    seen_oneofs.add(fld.oneof_index)
                    members = [
                        f
                        for f in proto.field
                        if f.HasField("oneof_index") and f.oneof_index == fld.oneof_index
                    ]
                    items.append((min(f.number for f in members), (fld.oneof_index, members)))
            else:
                items.append((fld.number, fld))
        if self.normalize:
            items.sort(key=lambda item: item[0])
        for _, item in items:
            if isinstance(item, FDP):
                skip_nested |= self.field(inner, item, proto, name, nested_by_name, in_oneof=False)
            else:
                index, members = item
                oneof = proto.oneof_decl[index]
                self.emit(inner, f"oneof {oneof.name} {{")
                if oneof.HasField("options"):
                    self.emit_options(inner + 1, oneof.options)
                for member in sorted(members, key=lambda f: f.number) if self.normalize else members:
                    skip_nested |= self.field(inner + 1, member, proto, name, nested_by_name, in_oneof=True)
                self.emit(inner, "}")
        for ext_range in proto.extension_range:
            end = "max" if ext_range.end - 1 >= FIELD_NUMBER_MAX else str(ext_range.end - 1)
            span = str(ext_range.start) if end == str(ext_range.start) else f"{ext_range.start} to {end}"
            self.emit(inner, f"extensions {span};")
        for enum in proto.enum_type:
            self.enum(inner, enum)
        for nested in proto.nested_type:
            if nested.name in skip_nested:
                continue
            self.message(inner, nested, name)
        self.extensions(inner, proto.extension, name)
        self.emit(depth, "}")

    @staticmethod
    def real_oneofs(proto: descriptor_pb2.DescriptorProto) -> set[int]:
        """Indexes of oneofs written as ``oneof`` blocks; proto3 ``optional`` makes synthetic ones."""
        synthetic = {f.oneof_index for f in proto.field if f.HasField("oneof_index") and f.proto3_optional}
        return {i for i in range(len(proto.oneof_decl)) if i not in synthetic}

    def label(self, fld: FDP, *, in_oneof: bool) -> str:
        if in_oneof:
            return ""
        if fld.label == FDP.LABEL_REPEATED:
            return "repeated "
        if fld.proto3_optional:
            return "optional "
        if fld.label == FDP.LABEL_REQUIRED:
            return "required "
        if self.proto3 or self.editions:
            return ""
        return "optional "

    def field(
        self,
        depth: int,
        fld: FDP,
        owner: descriptor_pb2.DescriptorProto,
        scope: str,
        nested_by_name: dict[str, descriptor_pb2.DescriptorProto],
        *,
        in_oneof: bool,
    ) -> set[str]:
        """Emit one field; returns nested type names rendered inline (map entries, groups)."""
        local = fld.type_name.rpartition(".")[2]
        nested = nested_by_name.get(local) if fld.type_name == f"{scope}.{local}" else None
        if fld.type == FDP.TYPE_GROUP and nested is not None:
            self.message(depth, nested, scope, group=fld)
            return {nested.name}
        if (
            fld.type == FDP.TYPE_MESSAGE
            and nested is not None
            and nested.options.map_entry
            and fld.label == FDP.LABEL_REPEATED
        ):
            key, value = [*sorted(nested.field, key=lambda f: f.number), FDP(), FDP()][:2]
            type_text = f"map<{self.field_type(key, scope)}, {self.field_type(value, scope)}>"
            self.emit(depth, f"{type_text} {fld.name} = {fld.number}{self.field_options(fld, scope)};")
            return {nested.name}
        type_text = self.field_type(fld, scope)
        self.emit(
            depth,
            f"{self.label(fld, in_oneof=in_oneof)}{type_text} {fld.name} = {fld.number}"
            f"{self.field_options(fld, scope)};",
        )
        return set()

    def field_type(self, fld: FDP, scope: str) -> str:
        if fld.type in SCALAR_NAMES:
            return SCALAR_NAMES[fld.type]
        return self.type_name(fld.type_name, scope)

    def field_options(self, fld: FDP, scope: str) -> str:
        parts: list[tuple[str, str]] = []
        if fld.HasField("default_value"):
            parts.append(("default", self.default_value(fld)))
        if fld.HasField("json_name") and fld.json_name != default_json_name(fld.name):
            parts.append(("json_name", f'"{text_encoding.CEscape(fld.json_name, as_utf8=True)}"'))
        if fld.HasField("options"):
            parts.extend(self.options(fld.options))
        if self.normalize:
            parts.sort()
        return f" [{', '.join(f'{k} = {v}' for k, v in parts)}]" if parts else ""

    @staticmethod
    def default_value(fld: FDP) -> str:
        value = fld.default_value
        if fld.type == FDP.TYPE_STRING:
            return f'"{text_encoding.CEscape(value, as_utf8=True)}"'
        if fld.type == FDP.TYPE_BYTES:
            return f'"{value}"'  # the descriptor already holds bytes C-escaped
        return str(value)

    # -- enums, services, extensions -----------------------------------------------------------

    def enum(self, depth: int, proto: descriptor_pb2.EnumDescriptorProto) -> None:
        self.emit(depth, f"enum {proto.name} {{")
        inner = depth + 1
        if proto.HasField("options"):
            self.emit_options(inner, proto.options)
        self.reserved(inner, proto.reserved_range, proto.reserved_name, ENUM_NUMBER_MAX, end_exclusive=False)
        for value in proto.value:
            options = self.options(value.options) if value.HasField("options") else []
            suffix = f" [{', '.join(f'{k} = {v}' for k, v in options)}]" if options else ""
            self.emit(inner, f"{value.name} = {value.number}{suffix};")
        self.emit(depth, "}")

    def service(self, depth: int, proto: descriptor_pb2.ServiceDescriptorProto) -> None:
        scope = f"{self.package_scope}.{proto.name}"
        self.emit(depth, f"service {proto.name} {{")
        inner = depth + 1
        if proto.HasField("options"):
            self.emit_options(inner, proto.options)
        for method in proto.method:
            request = ("stream " if method.client_streaming else "") + self.type_name(
                method.input_type, scope
            )
            response = ("stream " if method.server_streaming else "") + self.type_name(
                method.output_type, scope
            )
            head = f"rpc {method.name}({request}) returns ({response})"
            options = self.options(method.options) if method.HasField("options") else []
            if options:
                self.emit(inner, head + " {")
                for name, value in options:
                    self.emit(inner + 1, f"option {name} = {value};")
                self.emit(inner, "}")
            else:
                self.emit(inner, head + ";")
        self.emit(depth, "}")

    def extensions(self, depth: int, fields: Iterable[FDP], scope: str) -> None:
        by_extendee: dict[str, list[FDP]] = {}
        for fld in fields:
            by_extendee.setdefault(fld.extendee, []).append(fld)
        for extendee, members in by_extendee.items():
            if depth == 0:
                self.emit(0, "")
            self.emit(depth, f"extend {self.type_name(extendee, scope)} {{")
            for fld in members:
                self.emit(
                    depth + 1,
                    f"{self.label(fld, in_oneof=False)}{self.field_type(fld, scope)} {fld.name}"
                    f" = {fld.number}"
                    f"{self.field_options(fld, scope)};",
                )
            self.emit(depth, "}")

    def reserved(
        self, depth: int, ranges: Iterable[Any], names: Iterable[str], maximum: int, *, end_exclusive: bool
    ) -> None:
        spans: list[tuple[int, str]] = []
        for span in ranges:
            last = span.end - 1 if end_exclusive else span.end
            end = "max" if last >= maximum else str(last)
            spans.append(
                (span.start, str(span.start) if end == str(span.start) else f"{span.start} to {end}")
            )
        if self.normalize:
            spans.sort()
        if spans:
            self.emit(depth, f"reserved {', '.join(text for _, text in spans)};")
        quoted = [n if self.editions else f'"{n}"' for n in (sorted(names) if self.normalize else names)]
        if quoted:
            self.emit(depth, f"reserved {', '.join(quoted)};")


def _option_value(fld: Any, value: Any) -> str:
    if fld.type == fld.TYPE_ENUM:
        enum_value = fld.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if fld.type == fld.TYPE_BOOL:
        return "true" if value else "false"
    if fld.type == fld.TYPE_STRING:
        return f'"{text_encoding.CEscape(value, as_utf8=True)}"'
    if fld.type == fld.TYPE_BYTES:
        return f'"{text_encoding.CEscape(value, as_utf8=False)}"'
    if fld.type in (fld.TYPE_MESSAGE, fld.TYPE_GROUP):
        return "{ " + str(text_format.MessageToString(value, as_one_line=True)) + " }"
    if isinstance(value, float):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else str(value)
    return str(value)


def _edition_name(edition: int) -> str:
    name = descriptor_pb2.Edition.Name(edition) if edition else "EDITION_2023"
    return name.removeprefix("EDITION_")
