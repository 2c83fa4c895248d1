"""Micro-benchmark of the table pipeline's per-record work: record batch v2 decoding and record ->
Arrow conversion, for 20-field Avro records in Confluent wire format.

    .venv/bin/python bench/decode_bench.py [--records 200000] [--batch 1000] [--codec none|gzip|zstd|lz4]

Prints records/s for: batch decoding only; raw mode (value kept as bytes); by_schema_id without
flatten (one struct column); by_schema_id + flatten. Single-threaded, as one Spark Python worker runs.
Batches are built with kafka-python's producer-side builder (a real client's bytes).
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import time
from collections.abc import Callable
from typing import Any

import cramjam
import crc32c
import fastavro
from kafka.record.default_records import DefaultRecordBatchBuilder

from tabletopic.s3stream.api import StoredBatch
from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaNotFound
from tabletopic.table.convert.rows import RecordConverter
from tabletopic.table.records import decode_batches
from tabletopic.table.topic_config import TableTopicConfig

_TYPES = ["long", "string", "double", "int", "boolean"]
SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        *({"name": f"f{i}", "type": _TYPES[i % 5]} for i in range(18)),
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
CODECS = {"none": 0, "gzip": 1, "lz4": 3, "zstd": 4}


class OneSchema:
    def __init__(self) -> None:
        self.schema = RegisteredSchema(1, "AVRO", json.dumps(SCHEMA), (), "bench-value", 1)

    def by_id(self, schema_id: int) -> RegisteredSchema:
        if schema_id != 1:
            raise SchemaNotFound(str(schema_id))
        return self.schema

    def latest(self, subject: str) -> RegisteredSchema:
        return self.schema


def make_batches(total: int, per_batch: int, codec: str) -> list[StoredBatch]:
    parsed = fastavro.parse_schema(SCHEMA)
    out: list[StoredBatch] = []
    offset = 0
    while offset < total:
        n = min(per_batch, total - offset)
        own_lz4 = codec == "lz4"
        builder = DefaultRecordBatchBuilder(2, 0 if own_lz4 else CODECS[codec], False, -1, -1, -1, 1 << 30)
        for i in range(n):
            k = offset + i
            record: dict[str, Any] = {
                f"f{j}": [k, f"value-{k}-{j}", k * 0.5, j, k % 2 == 0][j % 5] for j in range(18)
            }
            record["ts"] = 1_700_000_000_000 + k
            record["note"] = None if k % 3 else "n"
            body = io.BytesIO()
            fastavro.schemaless_writer(body, parsed, record)
            value = b"\x00" + struct.pack(">I", 1) + body.getvalue()
            builder.append(i, 1_700_000_000_000 + k, b"key-%d" % k, value, [])
        payload = bytes(builder.build())
        if own_lz4:  # kafka-python's lz4 library is not installed; compress with cramjam
            block = bytes(cramjam.lz4.compress(payload[61:]))
            head = bytearray(payload[:61])
            struct.pack_into(">i", head, 8, 49 + len(block))
            struct.pack_into(">h", head, 21, 3)
            buf = bytearray(bytes(head) + block)
            struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
            payload = bytes(buf)
        out.append(StoredBatch(offset, n, payload))
        offset += n
    return out


def measure(name: str, total: int, fn: Callable[[], int], repeat: int = 3) -> float:
    """Best of ``repeat`` runs. The rate is per CPU second of this process (the machine is shared,
    so wall time mostly measures the neighbours); wall time is printed beside it."""
    best_cpu = best_wall = float("inf")
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        rows = fn()
        best_cpu = min(best_cpu, time.process_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
    assert rows == total, (name, rows, total)
    rate = total / best_cpu
    print(f"{name:<40} {rate:>10,.0f} records/s per core  (wall {total / best_wall:>10,.0f}/s)")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    args = parser.parse_args()
    batches = make_batches(args.records, args.batch, args.codec)
    size = sum(len(b.payload) for b in batches)
    print(
        f"{args.records:,} records of 20 Avro fields, {len(batches)} batches, "
        f"codec {args.codec}, {size / 1e6:.1f} MB"
    )
    lookup = OneSchema()

    def decode_only() -> int:
        return len(decode_batches(batches, 0, args.records))

    def convert(configs: dict[str, str]) -> Callable[[], int]:
        config = TableTopicConfig.from_topic_configs(configs, "bench")

        def run() -> int:
            converter = RecordConverter(config, lookup)
            result = converter.convert(decode_batches(batches, 0, args.records))
            assert not result.failures, result.failures[:1]
            return result.batch.num_rows if result.batch is not None else 0

        return run

    p = "automq.table.topic."
    measure("decode record batches", args.records, decode_only)
    measure("decode + convert raw", args.records, convert({}))
    measure(
        "decode + convert avro (struct value)",
        args.records,
        convert({p + "convert.value.type": "by_schema_id"}),
    )
    measure("decode + convert avro flatten", args.records, convert({p + "schema.type": "schema"}))
    from tabletopic.table.convert import avro as avro_module

    original = avro_module.AvroDecoder.__init__

    def fastavro_only(self: Any, text: str, references: Any = (), columnar: bool = True) -> None:
        original(self, text, references, columnar=False)

    avro_module.AvroDecoder.__init__ = fastavro_only  # type: ignore[method-assign]
    measure("decode + convert avro flatten (fastavro)", args.records, convert({p + "schema.type": "schema"}))
    avro_module.AvroDecoder.__init__ = original  # type: ignore[method-assign]


if __name__ == "__main__":
    main()
