"""Protobuf messages -> Arrow in native code: a whole column of messages at once (ptars, Rust).

ptars decodes serialized messages of one type straight into Arrow arrays, about 20x the per-record
``FromString`` plus Python conversion. Its output is reshaped to exactly the type the per-record
decoder produces (:attr:`ProtobufDecoder.arrow_type`): unsigned 32-bit values widen to int64,
unsigned 64-bit values keep their bits in int64, enum numbers become value names.

Only message types whose every field maps plainly are compiled (scalars, enums, nested messages,
repeated fields and maps of those); well-known types (``Timestamp``, wrappers, ``Struct``…),
recursive messages, groups and field-less messages keep the per-record decoder, whose mapping for
them is not a plain one.

ptars is lenient where the Python runtime is strict in ways that matter to ``errors.tolerance``: it
is therefore handed bodies only after the caller checked each record's Confluent prefix (magic byte,
schema id, message indexes) — a body without it would decode as some other message — and any error
while decoding a chunk returns None, so the caller decodes that chunk per record and the bad records
are isolated exactly as before. Strings are checked for valid UTF-8 by Arrow's own validation: the
Python runtime refuses invalid UTF-8 in a proto3 ``string``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor import FieldDescriptor as FD

from tabletopic.schema_registry.formats.protobuf.fields import is_repeated
from tabletopic.table.convert.native_column import decode_column, importable

log = logging.getLogger(__name__)

# Below this many messages the per-record decoder is as fast.
MIN_NATIVE_MESSAGES = 64
_WELL_KNOWN_PREFIX = "google.protobuf."


class _Unsupported(Exception):
    """ptars' output cannot be reshaped to the per-record type exactly."""


@cache
def available() -> bool:
    return importable("ptars")


def _plain(desc: Descriptor, ancestry: tuple[str, ...]) -> bool:
    """Whether every field of ``desc`` (recursively) has a plain mapping ptars gives exactly."""
    if desc.full_name.startswith(_WELL_KNOWN_PREFIX) or desc.full_name in ancestry or not desc.fields:
        return False
    inner = (*ancestry, desc.full_name)
    for f in desc.fields:
        if f.type == FD.TYPE_GROUP:
            return False
        if f.type != FD.TYPE_MESSAGE:
            continue
        message = f.message_type
        if message.GetOptions().map_entry:
            value = message.fields_by_number[2]
            if value.type == FD.TYPE_GROUP:
                return False
            if value.type == FD.TYPE_MESSAGE and not _plain(value.message_type, inner):
                return False
        elif not _plain(message, inner):
            return False
    return True


class NativeProtobufColumn:
    """Decodes a column of serialized messages of one type with ptars, to ``target``."""

    def __init__(self, desc: Descriptor, target: pa.DataType) -> None:
        from ptars import HandlerPool, PtarsConfig

        config = PtarsConfig(list_value_name="element", enum_repr="int32")
        self._handler = HandlerPool([desc.file], config=config).get_for_message(desc)
        self._desc = desc
        self._target = target

    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> pa.Array | None:
        """The column as ``target`` (null where a payload is None), or None when it has to be
        decoded per record (any decode error, or a shape that does not reshape exactly)."""
        return decode_column(
            payloads, skip, column, MIN_NATIVE_MESSAGES, self.decode_binary, "Protobuf messages"
        )

    def decode_binary(self, binary: pa.BinaryArray, skip: int = 0) -> pa.Array:
        """Every message of ``binary`` (no nulls) from byte ``skip`` on as ``target``; raises on any
        error."""
        if skip:
            binary = pc.binary_slice(binary, skip, (1 << 31) - 1)
        batch = self._handler.array_to_record_batch(binary)
        if batch.num_rows != len(binary):
            raise ValueError(f"{batch.num_rows} rows from {len(binary)} messages")
        root = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))
        array = _reshape_message(root, self._desc, self._target)
        array.validate(full=True)  # invalid UTF-8 in a string: the per-record path fails it
        return array


def compile_native(desc: Descriptor, target: pa.DataType) -> NativeProtobufColumn | None:
    """A native decoder for messages of ``desc`` whose output is ``target``, or None when ptars is
    missing or the message has a field whose mapping is not plain."""
    if not available() or not _plain(desc, ()):
        return None
    try:
        return NativeProtobufColumn(desc, target)
    except Exception as exc:  # a descriptor ptars cannot load: per record it is
        log.debug("no native Protobuf decoder for %s: %s", desc.full_name, exc)
        return None


def _reshape_message(array: pa.Array, desc: Descriptor, target: pa.DataType) -> pa.Array:
    if not pa.types.is_struct(target) or not pa.types.is_struct(array.type):
        raise _Unsupported(f"{array.type} -> {target}")
    children = []
    for f in target:
        field = desc.fields_by_name.get(f.name)
        if field is None or array.type.get_field_index(f.name) < 0:
            raise _Unsupported(f"field {f.name} missing")
        children.append(_reshape_field(array.field(f.name), field, f.type))
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


def _reshape_field(array: pa.Array, field: FD, target: pa.DataType) -> pa.Array:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        if not pa.types.is_map(target) or not pa.types.is_map(array.type):
            raise _Unsupported(f"{array.type} -> {target}")
        keys = _reshape_single(array.keys, entry.fields_by_number[1], target.key_type)
        items = _reshape_single(array.items, entry.fields_by_number[2], target.item_type)
        return _with_mask(pa.MapArray.from_arrays(array.offsets, keys, items, type=target), array)
    if is_repeated(field):
        if not pa.types.is_list(target) or not pa.types.is_list(array.type):
            raise _Unsupported(f"{array.type} -> {target}")
        values = _reshape_single(array.values, field, target.value_type)
        offsets = array.offsets
        if array.offset or len(array.values) != offsets[-1].as_py():
            raise _Unsupported("sliced list")
        return _with_mask(pa.ListArray.from_arrays(offsets, values, type=target), array)
    return _reshape_single(array, field, target)


def _with_mask(rebuilt: pa.Array, original: pa.Array) -> pa.Array:
    if not original.null_count:
        return rebuilt
    raise _Unsupported("null list or map")  # protobuf has none; never seen from ptars


def _reshape_single(array: pa.Array, field: FD, target: pa.DataType) -> pa.Array:
    if field.type == FD.TYPE_MESSAGE:
        return _reshape_message(array, field.message_type, target)
    if field.type == FD.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        numbers = pc.cast(array, pa.int32())
        known = pa.array(list(names), pa.int32())
        at = pc.index_in(numbers, value_set=known)
        named = pc.take(pa.array(list(names.values()), pa.string()), at)
        # An unknown number keeps its number as text, as the per-record decoder does.
        out = pc.if_else(pc.is_null(at), pc.cast(numbers, pa.string()), named)
        return out.cast(target)
    if field.type in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        if not pa.types.is_int64(target):
            raise _Unsupported(f"uint64 as {target}")
        return array.cast(pa.int64(), safe=False)  # the same bits, as the per-record mapping keeps them
    if array.type == target:
        return array
    try:
        return array.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unsupported(f"{array.type} -> {target}: {exc}") from exc
