"""Micro-benchmark of the table pipeline's per-record work: record batch v2 decoding and record ->
Arrow conversion, for 20-field records in Confluent wire format (Avro, JSON Schema, Protobuf).

    .venv/bin/python bench/decode_bench.py [--records 100000] [--batch 1000] [--codec none|gzip|lz4|...]

Prints records/s per CPU second (the machine is shared, so wall time mostly measures neighbours;
it is printed beside) for: batch decoding only; raw mode (value kept as bytes); Avro by_schema_id
as one struct column and flattened (generated columnar decoder, and fastavro for comparison); JSON
and Protobuf flattened. Single-threaded, as one Spark Python worker runs. Batches are built with
the codec's encoder (``tabletopic.records.encoder``), byte for byte what a producer sends.
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import time
from collections.abc import Callable
from typing import Any

import fastavro

from tabletopic.records.compression import Compression
from tabletopic.records.decoder import decode_records
from tabletopic.records.encoder import Record, build_batch
from tabletopic.s3stream.streams import StoredBatch
from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaNotFound
from tabletopic.table.convert import avro as avro_module
from tabletopic.table.convert.rows import RecordConverter
from tabletopic.table.table_config import TableTopicConfig

_AVRO_TYPES = ["long", "string", "double", "int", "boolean"]
AVRO = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        *({"name": f"f{i}", "type": _AVRO_TYPES[i % 5]} for i in range(18)),
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
_JSON_TYPES = ["integer", "string", "number", "integer", "boolean"]
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        **{f"f{i}": {"type": _JSON_TYPES[i % 5]} for i in range(18)},
        "ts": {"type": "integer"},
        "note": {"type": ["null", "string"]},
    },
}
_PROTO_TYPES = ["int64", "string", "double", "int32", "bool"]
PROTO = "\n".join(
    [
        'syntax = "proto3";',
        "package bench;",
        "message Event {",
        *(f"  {_PROTO_TYPES[i % 5]} f{i} = {i + 1};" for i in range(18)),
        "  int64 ts = 19;",
        "  optional string note = 20;",
        "}",
    ]
)
CODECS = {codec.name.lower(): codec for codec in Compression}
SCHEMAS = {
    1: RegisteredSchema(1, "AVRO", json.dumps(AVRO), (), "bench-value", 1),
    2: RegisteredSchema(2, "JSON", json.dumps(JSON_SCHEMA), (), "bench-json-value", 1),
    3: RegisteredSchema(3, "PROTOBUF", PROTO, (), "bench-proto-value", 1),
}


class Lookup:
    def by_id(self, schema_id: int) -> RegisteredSchema:
        try:
            return SCHEMAS[schema_id]
        except KeyError:
            raise SchemaNotFound(str(schema_id)) from None

    def latest(self, subject: str) -> RegisteredSchema:
        return next(s for s in SCHEMAS.values() if s.subject == subject)


def record(k: int) -> dict[str, Any]:
    values: dict[str, Any] = {
        f"f{j}": [k, f"value-{k}-{j}", k * 0.5, j, k % 2 == 0][j % 5] for j in range(18)
    }
    values["ts"] = 1_700_000_000_000 + k
    values["note"] = None if k % 3 else "n"
    return values


def encoders() -> dict[str, Callable[[int], bytes]]:
    parsed = fastavro.parse_schema(AVRO)

    def avro(k: int) -> bytes:
        body = io.BytesIO()
        fastavro.schemaless_writer(body, parsed, record(k))
        return b"\x00" + struct.pack(">I", 1) + body.getvalue()

    def json_value(k: int) -> bytes:
        return b"\x00" + struct.pack(">I", 2) + json.dumps(record(k)).encode()

    from google.protobuf import message_factory

    from tabletopic.table.convert.protobuf import message_descriptor

    cls = message_factory.GetMessageClass(message_descriptor(SCHEMAS[3]))

    def protobuf(k: int) -> bytes:
        values = {name: v for name, v in record(k).items() if v is not None}
        return b"\x00" + struct.pack(">I", 3) + b"\x00" + cls(**values).SerializeToString()

    return {"avro": avro, "json": json_value, "protobuf": protobuf}


def make_batches(total: int, per_batch: int, codec: str, encode: Callable[[int], bytes]) -> list[StoredBatch]:
    out: list[StoredBatch] = []
    offset = 0
    while offset < total:
        n = min(per_batch, total - offset)
        records = [Record(b"key-%d" % (offset + i), encode(offset + i)) for i in range(n)]
        payload = build_batch(records, compression=CODECS[codec], timestamp=1_700_000_000_000 + offset)
        out.append(StoredBatch(offset, n, payload))
        offset += n
    return out


def measure(name: str, total: int, fn: Callable[[], int], repeat: int = 3) -> float:
    """Best of ``repeat`` runs, as records per CPU second of this process (wall rate beside)."""
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        rows = fn()
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    assert rows == total, (name, rows, total)
    rate = total / best_cpu
    print(f"{name:<42} {rate:>10,.0f} records/s per core  (wall {total / best_wall:>10,.0f}/s)")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    args = parser.parse_args()
    total = args.records
    encode = encoders()
    data = {fmt: make_batches(total, args.batch, args.codec, fn) for fmt, fn in encode.items()}
    size = sum(len(b.payload) for b in data["avro"])
    print(f"{total:,} records of 20 fields per format, batches of {args.batch}, codec {args.codec}")
    print(f"(Avro data: {size / 1e6:.1f} MB in {len(data['avro'])} batches)")
    lookup = Lookup()
    p = "automq.table.topic."

    def convert(fmt: str, configs: dict[str, str], native: bool = True) -> Callable[[], int]:
        config = TableTopicConfig.from_topic_configs(configs, "bench")
        batches = data[fmt]

        def run() -> int:
            converter = RecordConverter(config, lookup, native=native)
            result = converter.convert(decode_records(batches, 0, total))
            assert not result.failures, result.failures[:1]
            return result.batch.num_rows if result.batch is not None else 0

        return run

    c_parse = measure(
        "decode record batches (C reader)", total, lambda: len(decode_records(data["avro"], 0, total))
    )
    py_parse = measure(
        "decode record batches (Python loop)",
        total,
        lambda: len(decode_records(data["avro"], 0, total, native=False)),
    )
    print(f"{'  ratio C / Python':<42} {c_parse / py_parse:>10.2f}")
    measure("decode + convert raw", total, convert("avro", {}))
    measure(
        "decode + convert avro (struct value)",
        total,
        convert("avro", {p + "convert.value.type": "by_schema_id"}),
    )
    flatten = {p + "schema.type": "schema"}
    native = measure("decode + convert avro flatten (native)", total, convert("avro", flatten))
    per_record = measure("decode + convert avro flatten (per record)", total, convert("avro", flatten, False))
    print(f"{'  ratio native / per record':<42} {native / per_record:>10.2f}")
    original = avro_module.AvroDecoder.__init__

    def fastavro_only(
        self: Any, text: str, references: Any = (), columnar: bool = True, native: bool = False
    ) -> None:
        original(self, text, references, columnar=False, native=False)

    avro_module.AvroDecoder.__init__ = fastavro_only  # type: ignore[method-assign]
    measure("decode + convert avro flatten (fastavro)", total, convert("avro", flatten))
    avro_module.AvroDecoder.__init__ = original  # type: ignore[method-assign]
    for fmt in ("json", "protobuf"):
        fast = measure(f"decode + convert {fmt} flatten (native)", total, convert(fmt, flatten))
        slow = measure(f"decode + convert {fmt} flatten (per record)", total, convert(fmt, flatten, False))
        print(f"{'  ratio native / per record':<42} {fast / slow:>10.2f}")


if __name__ == "__main__":
    main()
