"""Parsing Protobuf schemas into descriptors: ``.proto`` text through protoc, or a base64
serialized ``FileDescriptorProto`` as Confluent's serializers send it.

Either way the result is a set of ``FileDescriptorProto``s (the schema, its references, the
well-known types it imports) loaded into a private ``DescriptorPool``: the pool's builder checks
what protoc would (unresolved types, duplicate numbers), and the table pipeline decodes records with
``message_factory.GetMessageClass`` on it. A private pool per schema keeps two versions of one
message name from colliding, which the default pool would refuse.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache

from google.protobuf import descriptor, descriptor_pb2, descriptor_pool, unknown_fields
from google.protobuf.message import DecodeError

from tabletopic.schema_registry.formats.base import InvalidSchema, SameByCanonicalText, SchemaType

# File name given to a schema registered as text (Confluent's Java provider uses "default" too).
DEFAULT_FILE_NAME = "default.proto"
WELL_KNOWN_PREFIX = "google/protobuf/"
# A serialized descriptor in base64 never contains the braces, quotes and semicolons every
# ``.proto`` file has, so the alphabet alone tells the two input forms apart.
_BASE64 = re.compile(r"^[A-Za-z0-9+/=_\-\s]+$")
# Bound the work one request can cause (protoc and the pool builder are native code).
MAX_SCHEMA_BYTES = 4 * 1024 * 1024
# protoc keeps process-wide state in its source tree; serialize calls into it.
_PROTOC_LOCK = threading.Lock()


@dataclass(frozen=True, eq=False)
class ParsedProtobufSchema(SameByCanonicalText):
    """A compiled schema: its ``FileDescriptorProto``, every file it depends on, and a pool."""

    file: descriptor_pb2.FileDescriptorProto
    dependencies: Mapping[str, descriptor_pb2.FileDescriptorProto]
    pool: descriptor_pool.DescriptorPool
    schema_type: str = SchemaType.PROTOBUF
    _cache: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def file_descriptor(self) -> descriptor.FileDescriptor:
        return self.pool.FindFileByName(self.file.name)

    @property
    def syntax(self) -> str:
        return self.file.syntax or "proto2"

    def message_names(self) -> list[str]:
        """Full names of the top-level messages in declaration order (message index 0 first)."""
        prefix = f"{self.file.package}." if self.file.package else ""
        return [prefix + m.name for m in self.file.message_type]

    def canonical(self) -> str:
        """A stable ``.proto`` rendering of the descriptor, the same for text and base64 input."""
        if "canonical" not in self._cache:
            from tabletopic.schema_registry.formats.protobuf.render import render

            self._cache["canonical"] = render(self.file, self.dependencies.values(), normalize=False)
        return self._cache["canonical"]

    def normalized(self) -> str:
        """The rendering with imports and options sorted, fields in number order and every type
        name fully qualified, so equivalent spellings compare equal."""
        if "normalized" not in self._cache:
            from tabletopic.schema_registry.formats.protobuf.render import render

            self._cache["normalized"] = render(self.file, self.dependencies.values(), normalize=True)
        return self._cache["normalized"]

    def serialized(self) -> str:
        """The base64 ``FileDescriptorProto`` answered for ``?format=serialized``."""
        return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")


@cache
def _protoc_include() -> str:
    import grpc_tools

    return os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")


# Files every Confluent client treats as built in and never registers as references (see
# ``_is_builtin`` in confluent-kafka): the Protobuf well-known types, Google's common types
# (``google/type/*.proto``) and Confluent's own (``confluent/meta.proto``, decimal, variant).
# The last two groups are loaded from the installed packages when present.
_BUILTIN_MODULES = (
    "google.protobuf.any_pb2",
    "google.protobuf.api_pb2",
    "google.protobuf.descriptor_pb2",
    "google.protobuf.duration_pb2",
    "google.protobuf.empty_pb2",
    "google.protobuf.field_mask_pb2",
    "google.protobuf.source_context_pb2",
    "google.protobuf.struct_pb2",
    "google.protobuf.timestamp_pb2",
    "google.protobuf.type_pb2",
    "google.protobuf.wrappers_pb2",
    "confluent_kafka.schema_registry.confluent.meta_pb2",
    "confluent_kafka.schema_registry.confluent.type.decimal_pb2",
    "confluent_kafka.schema_registry.confluent.type.variant_pb2",
    "confluent_kafka.schema_registry.confluent.types.decimal_pb2",
)


@cache
def well_known_files() -> dict[str, bytes]:
    """Serialized ``FileDescriptorProto`` of every built-in file available here, by import path."""
    import importlib
    import pkgutil

    names = list(_BUILTIN_MODULES)
    try:
        import google.type

        names += [
            f"google.type.{m.name}"
            for m in pkgutil.iter_modules(google.type.__path__)
            if m.name.endswith("_pb2")
        ]
    except ImportError:
        pass
    out: dict[str, bytes] = {}
    for module_name in names:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # an optional package that is absent or broken: that file is just unknown
            continue
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        out[proto.name] = proto.SerializeToString()
    return out


_IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)


def builtin_sources(texts: Iterable[str], provided: Iterable[str]) -> dict[str, str]:
    """``.proto`` text for the built-in files the sources import that protoc does not ship
    (everything but ``google/protobuf/*``), with their own imports, rendered from descriptors."""
    from tabletopic.schema_registry.formats.protobuf.render import render

    builtins = well_known_files()
    have = set(provided)
    wanted = [name for text in texts for name in _IMPORT.findall(text)]
    out: dict[str, str] = {}
    while wanted:
        name = wanted.pop()
        if name in have or name in out or name.startswith(WELL_KNOWN_PREFIX) or name not in builtins:
            continue
        proto = descriptor_pb2.FileDescriptorProto.FromString(builtins[name])
        deps = [
            descriptor_pb2.FileDescriptorProto.FromString(builtins[d])
            for d in proto.dependency
            if d in builtins
        ]
        out[name] = render(proto, deps, normalize=True)
        wanted.extend(proto.dependency)
    return out


def looks_like_base64(text: str) -> bool:
    return bool(_BASE64.match(text))


def decode_descriptor(text: str, what: str) -> descriptor_pb2.FileDescriptorProto:
    """Decode a base64 serialized ``FileDescriptorProto``.

    Raises:
        InvalidSchema: not base64, not a descriptor, or a descriptor without a file name.
    """
    compact = re.sub(r"\s+", "", text)
    altchars = b"-_" if "-" in compact or "_" in compact else None  # URL-safe alphabet
    try:
        data = base64.b64decode(compact + "=" * (-len(compact) % 4), altchars=altchars, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidSchema(f"{what}: neither .proto text nor valid base64: {exc}") from exc
    if not data:
        raise InvalidSchema(f"{what}: the serialized descriptor is empty")
    proto = descriptor_pb2.FileDescriptorProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise InvalidSchema(f"{what}: not a serialized FileDescriptorProto: {exc}") from exc
    if len(unknown_fields.UnknownFieldSet(proto)):
        # Random bytes often parse as *some* message; unknown fields give them away.
        raise InvalidSchema(f"{what}: not a serialized FileDescriptorProto (unknown fields)")
    if not proto.message_type and not proto.enum_type and not proto.service and not proto.extension:
        raise InvalidSchema(f"{what}: the descriptor defines no message, enum or service")
    return proto


def compile_proto_files(
    files: Mapping[str, str], targets: list[str]
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """Compile ``.proto`` sources with the protoc bundled in ``grpcio-tools``.

    Args:
        files: file name (the import path) -> source text.
        targets: the files to compile; their imports come from ``files`` or the well-known types.

    Returns:
        Every compiled file, the targets and all their imports, by name.

    Raises:
        InvalidSchema: protoc's own error messages.
    """
    from grpc_tools import _protoc_compiler

    files = {**builtin_sources(files.values(), files), **files}
    with tempfile.TemporaryDirectory(prefix="tabletopic-proto-") as root:
        for name, text in files.items():
            path = _safe_path(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        out = os.path.join(root, ".descriptor_set.pb")
        includes = [root.encode(), _protoc_include().encode()]
        with _PROTOC_LOCK:
            for target in targets:
                # get_protos reports errors as an exception instead of printing them to fd 2.
                try:
                    _protoc_compiler.get_protos(target.encode(), includes)
                except _protoc_compiler.ProtocErrors as exc:
                    raise InvalidSchema(_protoc_message(exc, root)) from exc
            args = [
                b"protoc",
                b"--proto_path=" + includes[0],
                b"--proto_path=" + includes[1],
                b"--include_imports",
                b"--descriptor_set_out=" + out.encode(),
                *(t.encode() for t in targets),
            ]
            status = _protoc_compiler.run_main(args)
        if status != 0 or not os.path.exists(out):
            raise InvalidSchema(f"protoc failed (status {status}) compiling {', '.join(targets)}")
        with open(out, "rb") as handle:
            fds = descriptor_pb2.FileDescriptorSet.FromString(handle.read())
    return {f.name: f for f in fds.file}


def _protoc_message(exc: Exception, root: str) -> str:
    """protoc's errors as ``file:line:column: message`` lines (1-based, as the protoc CLI prints)."""
    lines = []
    errors = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
    for error in errors:
        name = _text(getattr(error, "filename", b"")).replace(root + os.sep, "")
        line, column = getattr(error, "line", -1), getattr(error, "column", -1)
        where = f"{name}:{line + 1}:{column + 1}" if line >= 0 else name
        lines.append(f"{where}: {_text(getattr(error, 'message', b''))}")
    return "\n".join(lines) or str(exc).replace(root + os.sep, "")


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _safe_path(root: str, name: str) -> str:
    """The on-disk path for an import name, refusing names that would escape the temp dir."""
    if not name or name.startswith("/") or "\\" in name or any(p in ("..", "") for p in name.split("/")):
        raise InvalidSchema(f"invalid import path {name!r} for a Protobuf reference")
    return os.path.join(root, *name.split("/"))


def parse(text: str, references: Mapping[str, str]) -> ParsedProtobufSchema:
    """Parse ``.proto`` text or a base64 ``FileDescriptorProto``, with referenced files by import path.

    Raises:
        InvalidSchema: empty input, protoc errors, undecodable base64, or descriptors that do not link.
    """
    if not isinstance(text, str):
        raise InvalidSchema(f"expected the schema as a string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidSchema("the schema is empty")
    if len(text) > MAX_SCHEMA_BYTES or sum(len(t) for t in references.values()) > MAX_SCHEMA_BYTES:
        raise InvalidSchema("the schema and its references exceed the size limit")

    # References: text ones go to protoc as files, base64 ones are decoded and rendered as text so
    # that a text schema can import them.
    sources: dict[str, str] = {}
    decoded: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for name, ref_text in references.items():
        what = f"reference {name!r}"
        if not isinstance(ref_text, str) or not ref_text.strip():
            raise InvalidSchema(f"{what}: the referenced schema is empty")
        if looks_like_base64(ref_text.strip()):
            proto = decode_descriptor(ref_text, what)
            proto.name = name
            decoded[name] = proto
        else:
            sources[name] = ref_text

    if looks_like_base64(text.strip()):
        main = decode_descriptor(text, "schema")
        if not main.name:
            main.name = DEFAULT_FILE_NAME
        compiled = _compile_references(sources, decoded)
        files = {**compiled, **decoded}
    else:
        main_name = DEFAULT_FILE_NAME
        while main_name in sources or main_name in decoded:
            main_name = "_" + main_name
        all_sources = {**_render_decoded(decoded), **sources, main_name: text}
        files = compile_proto_files(all_sources, [main_name])
        main = files.pop(main_name)
    return _link(main, files)


def _compile_references(
    sources: Mapping[str, str], decoded: Mapping[str, descriptor_pb2.FileDescriptorProto]
) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    if not sources:
        return {}
    return compile_proto_files({**_render_decoded(decoded), **sources}, sorted(sources))


def _render_decoded(decoded: Mapping[str, descriptor_pb2.FileDescriptorProto]) -> dict[str, str]:
    """``.proto`` text for base64 references, so protoc can resolve imports of them."""
    if not decoded:
        return {}
    from tabletopic.schema_registry.formats.protobuf.render import render

    return {name: render(proto, decoded.values(), normalize=True) for name, proto in decoded.items()}


def _link(
    main: descriptor_pb2.FileDescriptorProto, files: Mapping[str, descriptor_pb2.FileDescriptorProto]
) -> ParsedProtobufSchema:
    """Add ``main`` and, dependencies first, every file it imports to a fresh pool.

    Raises:
        InvalidSchema: an import that is neither a reference nor a well-known type, or a
            descriptor the pool refuses (unresolved type names, duplicate symbols…).
    """
    known = dict(files)
    well_known = well_known_files()
    pool = descriptor_pool.DescriptorPool()
    added: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def add(proto: descriptor_pb2.FileDescriptorProto, chain: tuple[str, ...]) -> None:
        if proto.name in added:
            return
        if proto.name in chain:
            raise InvalidSchema(f"import cycle: {' -> '.join((*chain, proto.name))}")
        for dep in proto.dependency:
            if dep in added:
                continue
            if dep in known:
                add(known[dep], (*chain, proto.name))
            elif dep in well_known:
                add(descriptor_pb2.FileDescriptorProto.FromString(well_known[dep]), (*chain, proto.name))
            else:
                raise InvalidSchema(
                    f"{proto.name}: import {dep!r} is neither a reference nor a well-known type"
                )
        try:
            pool.Add(proto)
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidSchema(f"{proto.name}: invalid descriptor: {exc}") from exc
        added[proto.name] = proto

    add(main, ())
    try:
        pool.FindFileByName(main.name)
    except KeyError as exc:
        raise InvalidSchema(f"{main.name}: the descriptor did not load: {exc}") from exc
    dependencies = {n: p for n, p in added.items() if n != main.name}
    return ParsedProtobufSchema(file=main, dependencies=dependencies, pool=pool)
