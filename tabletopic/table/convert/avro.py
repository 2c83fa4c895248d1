"""Avro values to Arrow: the type mapping and a batch decoder built on fastavro.

Type mapping (what Iceberg can hold, following Iceberg's own Avro conversion where it has one):

- unions with null -> the other branch, nullable; ``["null", A, B]`` and ``[A, B]`` -> a struct with
  one nullable field per branch, named ``member0``, ``member1``… (spark-avro's convention)
- enum -> string; fixed -> fixed_size_binary; bytes -> binary; map -> map<string, …>; array -> list
- decimal -> decimal128(p, s); date -> date32; time-millis/micros -> time64(us);
  timestamp-millis/micros/nanos -> timestamp(us, UTC); local-timestamp-* -> timestamp(us); uuid -> string

Speed: fastavro's Cython reader turns temporal logical types into ``datetime`` objects, which costs
more than the decoding itself. We hand fastavro a copy of the schema with those logical types
stripped, receive plain ints, build the array with a matching Arrow read type (``timestamp('ms')``
from ints is free) and cast the whole array to the table type at once.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Sequence
from typing import Any

import fastavro
import pyarrow as pa

from tabletopic.table.convert.arrowutil import apply_fixup, values_to_array
from tabletopic.table.convert.avro_types import AvroSchemaError, avro_to_arrow_type, map_avro_type

__all__ = ["AvroDecoder", "AvroSchemaError", "avro_to_arrow_type", "parse_avro_schema"]

_STRIPPED_LOGICAL = {
    "timestamp-millis", "timestamp-micros", "timestamp-nanos", "local-timestamp-millis",
    "local-timestamp-micros", "local-timestamp-nanos", "time-millis", "time-micros", "date", "uuid",
}  # fmt: skip


def parse_avro_schema(text: str, references: Sequence[tuple[str, str]] = ()) -> Any:
    """Parse registry schema text (plus referenced schemas) into a fully expanded fastavro schema."""
    named: dict[str, Any] = {}
    for _, ref_text in references:
        fastavro.parse_schema(json.loads(ref_text), named_schemas=named)
    return fastavro.parse_schema(json.loads(text), named_schemas=named, expand=True)


class AvroDecoder:
    """Decodes schemaless Avro payloads (no wire-format header) into one Arrow array.

    Built once per writer schema and cached by schema id: parsing the schema and deriving the
    types is far more expensive than decoding a record.
    """

    def __init__(
        self,
        text: str,
        references: Sequence[tuple[str, str]] = (),
        columnar: bool = True,
        native: bool = False,
    ) -> None:
        expanded = parse_avro_schema(text, references)
        mapped = map_avro_type(expanded, ())
        self.arrow_type: pa.DataType = mapped.final
        self._read_type = mapped.read
        self._fixup = mapped.fixup
        self._reader_schema = fastavro.parse_schema(_strip_logical(copy.deepcopy(expanded)))
        self.is_record = isinstance(expanded, dict) and expanded.get("type") == "record"
        from tabletopic.table.convert.avro_columnar import compile_decoder

        # The generated columnar decoder is ~2x faster where it applies; fastavro covers the rest.
        self._columnar = compile_decoder(expanded) if columnar else None
        if self._columnar is not None and self._columnar.arrow_type != self.arrow_type:
            self._columnar = None  # a mapping mismatch would be a bug; never risk wrong types
        from tabletopic.table.convert.native_avro import compile_native

        # Whole columns in native code (~15x); the decoders above take what it hands back.
        self._native = compile_native(expanded, self.arrow_type) if native else None

    def decode(
        self, payloads: Sequence[bytes | None], skip: int = 0, column: pa.BinaryArray | None = None
    ) -> tuple[pa.Array, dict[int, str]]:
        """Decode each payload from byte ``skip`` on (None stays null). Returns the array and
        ``{index: reason}`` for payloads that are not valid Avro for this schema (null rows)."""
        if self._native is not None:
            array = self._native.decode(payloads, skip, column)
            if array is not None:
                return array, {}
        if self._columnar is not None:
            return self._columnar.decode(payloads, skip)
        reader = fastavro.schemaless_reader
        schema = self._reader_schema
        values: list[Any] = []
        append = values.append
        failures: dict[int, str] = {}
        bytes_io = io.BytesIO
        for i, payload in enumerate(payloads):
            if payload is None:
                append(None)
                continue
            stream = bytes_io(payload)
            if skip:
                stream.seek(skip)
            try:
                value = reader(stream, schema, None)
            except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError…
                failures[i] = f"invalid Avro: {type(exc).__name__}: {exc}"
                append(None)
                continue
            if stream.tell() != len(payload):
                failures[i] = f"invalid Avro: {len(payload) - stream.tell()} bytes left after the record"
                append(None)
                continue
            append(value)
        apply_fixup(values, self._fixup, failures)
        return values_to_array(values, self._read_type, self.arrow_type, failures), failures


def _strip_logical(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("logicalType") in _STRIPPED_LOGICAL:
            node = {k: v for k, v in node.items() if k != "logicalType"}
        return {k: _strip_logical(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_strip_logical(v) for v in node]
    return node
