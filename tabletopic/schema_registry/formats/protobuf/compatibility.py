"""Protobuf compatibility by wire rules: can bytes written with the writer's schema be parsed by
a reader using the reader's schema without losing or misreading data?

Fields are matched by number (names are free to change, as on the wire), messages and enums by
name relative to their package. Kinds are Confluent's names; only incompatible findings are
returned, each with a location ``#/<Message>/<field number or oneof name>``.

Scalar types are grouped by wire encoding (Protobuf's own "updating a message type" rules): a
change inside a group reads back the same bytes, across groups it misreads them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pb2 import DescriptorProto as MessageProto
from google.protobuf.descriptor_pb2 import EnumDescriptorProto as EnumProto
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP
from google.protobuf.descriptor_pb2 import FileDescriptorProto as FileProto

from tabletopic.schema_registry.formats.base import Incompatibility
from tabletopic.schema_registry.formats.protobuf.schema import ParsedProtobufSchema


class WireGroup(StrEnum):
    """How the wire encodes a scalar: within a group a type change reads back the same bytes."""

    VARINT = "varint"
    ZIGZAG = "zigzag"
    FIXED32 = "fixed32"
    FIXED64 = "fixed64"
    LENGTH = "length"
    FLOAT = "float"
    DOUBLE = "double"


# Wire-compatible scalar groups; enums travel as varints like int32.
SCALAR_GROUPS: dict[int, WireGroup] = {
    FDP.TYPE_INT32: WireGroup.VARINT,
    FDP.TYPE_INT64: WireGroup.VARINT,
    FDP.TYPE_UINT32: WireGroup.VARINT,
    FDP.TYPE_UINT64: WireGroup.VARINT,
    FDP.TYPE_BOOL: WireGroup.VARINT,
    FDP.TYPE_ENUM: WireGroup.VARINT,
    FDP.TYPE_SINT32: WireGroup.ZIGZAG,
    FDP.TYPE_SINT64: WireGroup.ZIGZAG,
    FDP.TYPE_FIXED32: WireGroup.FIXED32,
    FDP.TYPE_SFIXED32: WireGroup.FIXED32,
    FDP.TYPE_FIXED64: WireGroup.FIXED64,
    FDP.TYPE_SFIXED64: WireGroup.FIXED64,
    FDP.TYPE_STRING: WireGroup.LENGTH,
    FDP.TYPE_BYTES: WireGroup.LENGTH,
    FDP.TYPE_FLOAT: WireGroup.FLOAT,
    FDP.TYPE_DOUBLE: WireGroup.DOUBLE,
}


class FieldKind(StrEnum):
    """What a field holds, as far as compatibility rules differ (spelt as in the messages)."""

    SCALAR = "scalar"
    MESSAGE = "message"
    MAP = "map"
    GROUP = "group"


@dataclass(frozen=True)
class _Named:
    kind: str  # "message" | "enum"
    proto: MessageProto | EnumProto
    file: FileProto


@dataclass
class _Index:
    """Full type name (leading dot) -> definition, over a schema and all its dependencies."""

    types: dict[str, _Named] = field(default_factory=dict)
    local: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, files: Iterable[FileProto]) -> _Index:
        index = cls()
        for file in files:
            scope = f".{file.package}" if file.package else ""
            for message in file.message_type:
                index._message(scope, message, file)
            for enum in file.enum_type:
                index._add(f"{scope}.{enum.name}", _Named("enum", enum, file))
        return index

    def _add(self, full: str, named: _Named) -> None:
        self.types[full] = named
        prefix = f".{named.file.package}." if named.file.package else "."
        self.local[full] = full[len(prefix) :] if full.startswith(prefix) else full.lstrip(".")

    def _message(self, scope: str, message: MessageProto, file: FileProto) -> None:
        full = f"{scope}.{message.name}"
        self._add(full, _Named("message", message, file))
        for nested in message.nested_type:
            self._message(full, nested, file)
        for enum in message.enum_type:
            self._add(f"{full}.{enum.name}", _Named("enum", enum, file))


def check_compatibility(reader: ParsedProtobufSchema, writer: ParsedProtobufSchema) -> list[Incompatibility]:
    """Every reason bytes written with ``writer`` may be misread by ``reader``; empty when compatible."""
    return _Checker(reader, writer).run()


class _Checker:
    def __init__(self, reader: ParsedProtobufSchema, writer: ParsedProtobufSchema) -> None:
        self.reader, self.writer = reader, writer
        self.rindex = _Index.build([reader.file, *reader.dependencies.values()])
        self.windex = _Index.build([writer.file, *writer.dependencies.values()])
        self.out: list[Incompatibility] = []
        self.compared: set[tuple[str, str]] = set()

    def add(self, kind: str, location: str, message: str) -> None:
        self.out.append(Incompatibility(kind, location, message))

    def run(self) -> list[Incompatibility]:
        rfile, wfile = self.reader.file, self.writer.file
        if rfile.package != wfile.package:
            self.add("PACKAGE_CHANGED", "#/", f"package changed from {wfile.package!r} to {rfile.package!r}")
        rscope = f".{rfile.package}" if rfile.package else ""
        wscope = f".{wfile.package}" if wfile.package else ""
        self.compare_types(
            rfile.message_type, rfile.enum_type, rscope, wfile.message_type, wfile.enum_type, wscope, ""
        )
        unique: dict[tuple[str, str], Incompatibility] = {}
        for item in self.out:
            unique.setdefault((item.kind, item.location), item)
        return list(unique.values())

    # -- types ---------------------------------------------------------------------------------

    def compare_types(
        self,
        rmessages: Iterable[MessageProto],
        renums: Iterable[EnumProto],
        rscope: str,
        wmessages: Iterable[MessageProto],
        wenums: Iterable[EnumProto],
        wscope: str,
        path: str,
    ) -> None:
        """Messages and enums declared side by side in a file or a message, matched by name."""
        reader_messages = {m.name: m for m in rmessages}
        for message in wmessages:
            if message.options.map_entry:
                continue  # map entries are compared through their map fields
            name = f"{path}.{message.name}" if path else message.name
            counterpart = reader_messages.get(message.name)
            if counterpart is None:
                self.add("MESSAGE_REMOVED", f"#/{name}", f"message {name} was removed or renamed")
                continue
            self.compare_message(
                counterpart, f"{rscope}.{message.name}", message, f"{wscope}.{message.name}", name
            )
        reader_enums = {e.name: e for e in renums}
        for enum in wenums:
            name = f"{path}.{enum.name}" if path else enum.name
            if enum.name in reader_enums:
                self.compare_enum(reader_enums[enum.name], f"{rscope}.{enum.name}", enum, name)

    def compare_enum(self, reader: EnumProto, rfull: str, writer: EnumProto, path: str) -> None:
        # Open enums keep unknown numbers, so only a closed reader enum (proto2, or editions with
        # ``enum_type = CLOSED``) loses data: the number goes to unknown fields, the field reads unset.
        if not self.reader_enum_is_closed(rfull):
            return
        known = {v.number for v in reader.value}
        for value in writer.value:
            if value.number not in known:
                self.add(
                    "ENUM_CONST_REMOVED",
                    f"#/{path}/{value.name}",
                    f"the reader's closed enum {path} has no value {value.number} ({value.name})",
                )

    def reader_enum_is_closed(self, full_name: str) -> bool:
        try:
            closed = getattr(self.reader.pool.FindEnumTypeByName(full_name.lstrip(".")), "is_closed", None)
        except KeyError:
            closed = None
        return closed if isinstance(closed, bool) else self.reader.syntax == "proto2"

    def compare_message(self, r: MessageProto, rfull: str, w: MessageProto, wfull: str, path: str) -> None:
        key = (rfull, wfull)
        if key in self.compared:
            return
        self.compared.add(key)
        rfields = {f.number: f for f in r.field}
        wfields = {f.number: f for f in w.field}
        roneof = _oneof_members(r)
        woneof = _oneof_members(w)

        for number, wf in wfields.items():
            location = f"#/{path}/{number}"
            rf = rfields.get(number)
            if rf is None:
                if wf.label == FDP.LABEL_REQUIRED:
                    self.add(
                        "REQUIRED_FIELD_REMOVED", location, f"required field {wf.name} ({number}) was removed"
                    )
                elif number in woneof:
                    self.add(
                        "ONEOF_FIELD_REMOVED",
                        location,
                        f"field {wf.name} ({number}) of oneof {woneof[number]} was removed: "
                        "the reader would see the oneof as unset",
                    )
                continue
            self.compare_field(rf, wf, location)

        reserved_numbers = _reserved(w.reserved_range)
        for number, rf in rfields.items():
            if number in wfields:
                continue
            location = f"#/{path}/{number}"
            if rf.label == FDP.LABEL_REQUIRED:
                self.add("REQUIRED_FIELD_ADDED", location, f"required field {rf.name} ({number}) was added")
            if _covered(number, reserved_numbers) or rf.name in w.reserved_name:
                self.add(
                    "FIELD_CONFLICTS_WITH_RESERVED",
                    location,
                    f"field {rf.name} ({number}) reuses a number or name the writer reserved",
                )
        reader_reserved = _reserved(r.reserved_range)
        dropped = [
            span
            for span in reserved_numbers
            if not any(lo <= span[0] and span[1] <= hi for lo, hi in reader_reserved)
            and not any(span[0] <= n <= span[1] for n in rfields)
        ]
        if dropped:
            shown = ", ".join(f"{lo}" if lo == hi else f"{lo} to {hi}" for lo, hi in dropped)
            self.add(
                "RESERVED_FIELD_REMOVED", f"#/{path}", f"reserved numbers {shown} are no longer reserved"
            )

        self.compare_oneofs(r, roneof, wfields, woneof, path)
        self.compare_types(r.nested_type, r.enum_type, rfull, w.nested_type, w.enum_type, wfull, path)

    def compare_oneofs(
        self,
        r: MessageProto,
        roneof: dict[int, str],
        wfields: dict[int, FDP],
        woneof: dict[int, str],
        path: str,
    ) -> None:
        """A reader oneof keeps one member; the writer must not be able to set two of them."""
        members: dict[str, list[int]] = {}
        for number, name in roneof.items():
            members.setdefault(name, []).append(number)
        for name, numbers in members.items():
            location = f"#/{path}/{name}"
            moved = [n for n in numbers if n in wfields and n not in woneof]
            writer_oneofs = {woneof[n] for n in numbers if n in woneof}
            if len(moved) > 1 or len(writer_oneofs) > 1:
                self.add(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
                    location,
                    f"oneof {name} now holds fields the writer can set together ({sorted(numbers)})",
                )
            elif moved and writer_oneofs:
                self.add(
                    "FIELD_MOVED_TO_EXISTING_ONEOF",
                    location,
                    f"field {moved[0]} moved into oneof {name}, whose members the writer can set with it",
                )

    # -- fields --------------------------------------------------------------------------------

    def field_kind(self, fld: FDP, index: _Index) -> FieldKind:
        if fld.type == FDP.TYPE_GROUP:
            return FieldKind.GROUP
        if fld.type == FDP.TYPE_MESSAGE:
            named = index.types.get(fld.type_name)
            if (
                named is not None
                and isinstance(named.proto, MessageProto)
                and named.proto.options.map_entry
                and fld.label == FDP.LABEL_REPEATED
            ):
                return FieldKind.MAP
            return FieldKind.MESSAGE
        return FieldKind.SCALAR

    def compare_field(self, rf: FDP, wf: FDP, location: str) -> None:
        rkind, wkind = self.field_kind(rf, self.rindex), self.field_kind(wf, self.windex)
        if rkind != wkind:
            self.add("FIELD_KIND_CHANGED", location, f"field {rf.name} changed from {wkind} to {rkind}")
            return
        if rkind is FieldKind.SCALAR:
            if SCALAR_GROUPS.get(rf.type) != SCALAR_GROUPS.get(wf.type):
                self.add(
                    "FIELD_SCALAR_KIND_CHANGED",
                    location,
                    f"field {rf.name} changed from {_type_label(wf)} to {_type_label(rf)}, "
                    "which the wire encodes differently",
                )
        elif rkind is FieldKind.MAP:
            rentry = self.rindex.types[rf.type_name].proto
            wentry = self.windex.types[wf.type_name].proto
            assert isinstance(rentry, MessageProto) and isinstance(wentry, MessageProto)
            rparts = {f.number: f for f in rentry.field}
            wparts = {f.number: f for f in wentry.field}
            for number, part in ((1, "key"), (2, "value")):
                if number in rparts and number in wparts:
                    self.compare_field(rparts[number], wparts[number], f"{location}/{part}")
            return  # map fields are always repeated entries: no label rules
        else:
            self.compare_named(rf, wf, location)
        self.compare_labels(rf, wf, rkind, location)

    def compare_named(self, rf: FDP, wf: FDP, location: str) -> None:
        rnamed, wnamed = self.rindex.types.get(rf.type_name), self.windex.types.get(wf.type_name)
        rlocal = self.rindex.local.get(rf.type_name, rf.type_name)
        wlocal = self.windex.local.get(wf.type_name, wf.type_name)
        if rnamed is None or wnamed is None or rlocal != wlocal:
            self.add(
                "FIELD_NAMED_TYPE_CHANGED",
                location,
                f"field {rf.name} changed type from {wlocal} to {rlocal}",
            )
            return
        if isinstance(rnamed.proto, MessageProto) and isinstance(wnamed.proto, MessageProto):
            self.compare_message(rnamed.proto, rf.type_name, wnamed.proto, wf.type_name, rlocal)

    def compare_labels(self, rf: FDP, wf: FDP, kind: FieldKind, location: str) -> None:
        rrep, wrep = rf.label == FDP.LABEL_REPEATED, wf.label == FDP.LABEL_REPEATED
        if rf.label == FDP.LABEL_REQUIRED and wf.label != FDP.LABEL_REQUIRED:
            self.add("REQUIRED_FIELD_ADDED", location, f"field {rf.name} became required")
        if rrep == wrep or rrep:
            # Singular -> repeated always parses: the single value becomes a one-element list.
            return
        if kind is FieldKind.SCALAR and SCALAR_GROUPS.get(rf.type) is WireGroup.LENGTH:
            return  # string/bytes: a singular reader keeps the last element, as protobuf specifies
        if kind is FieldKind.SCALAR:
            self.add(
                "FIELD_NUMERIC_LABEL_CHANGED",
                location,
                f"repeated numeric field {rf.name} became singular: packed values do not parse as one",
            )
        else:
            self.add(
                "FIELD_MESSAGE_LABEL_CHANGED",
                location,
                f"repeated message field {rf.name} became singular: the elements would be merged into one",
            )


def _oneof_members(message: MessageProto) -> dict[int, str]:
    """Field number -> oneof name, for real oneofs (proto3 ``optional`` makes synthetic ones)."""
    synthetic = {f.oneof_index for f in message.field if f.HasField("oneof_index") and f.proto3_optional}
    return {
        f.number: message.oneof_decl[f.oneof_index].name
        for f in message.field
        if f.HasField("oneof_index") and f.oneof_index not in synthetic
    }


def _reserved(ranges: Iterable[descriptor_pb2.DescriptorProto.ReservedRange]) -> list[tuple[int, int]]:
    """Reserved field numbers as inclusive spans, merged."""
    spans = sorted((r.start, r.end - 1) for r in ranges)
    merged: list[tuple[int, int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _covered(number: int, spans: list[tuple[int, int]]) -> bool:
    return any(lo <= number <= hi for lo, hi in spans)


def _type_label(fld: FDP) -> str:
    name = FDP.Type.Name(fld.type).removeprefix("TYPE_").lower()
    return str(fld.type_name).lstrip(".") if fld.type == FDP.TYPE_ENUM else str(name)
