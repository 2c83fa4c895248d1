"""Table-topic figures from one run: a real ``tabletopic serve`` node (Spark runner, local[2]) fed by
confluent-kafka, every figure beside a same-run baseline.

1. Cold start: the node starts with no table topics; a first table topic's first commit is timed
   from its first record acknowledged to the record committed (the small-job helper process and
   Spark start in the background then, unless a table topic already existed when the node started;
   a first commit this small runs in the helper, ``table.job.local.max.bytes``).
2. Catch-up per format: ``--records`` records already in a ``--partitions``-partition topic, then
   the table topic is switched on (AlterConfigs ``enable=true``, Spark warm); rows/s from the
   switch to every row committed. Avro (20 fields, flatten), Protobuf (flatten), JSON Schema
   (flatten) and plain JSON strings (``convert.value.type=string``). Each job's time split comes from
   ``/v1/tables``: the tasks' read/decode/write wall seconds and decode_cpu/write_cpu CPU seconds
   (summed over tasks; on a shared machine the CPU figures are the steadier), the cycle's plan,
   schema probe and schema change, the job's wall time and the commit's; ``outside`` is the rest
   of the wall time (the switch seen, status polls).
3. Steady state: ``--steady-rate`` records/s for ``--steady-seconds`` with a 1 s commit interval;
   per record, produce time -> the status poll that saw its offset committed. p50/p99, and the lag
   at the end (growing lag shows as a p99 close to the run's length); then the cycles' period
   (time between commits seen) and the median split of a cycle (cycles this small run in the
   helper process, not Spark).
4. Spark's fixed cost: an empty ``mapInArrow`` job (3 tasks, no rows) in a Spark session like the
   node's; the commit's time is the ``commit`` figure of the catch-up jobs.
5. Baselines, on the same Avro rows pre-built as Arrow: pyarrow alone (pyiceberg append: Parquet
   written by pyarrow, one commit) and Spark's own Iceberg writer (``mapInArrow`` yielding them,
   ``writeTo(...).append()``), through the same REST catalog; ratios against the Avro catch-up.
6. Upsert: a ``--upsert-rows`` batch (half existing keys) applied to a ``--upsert-keys``-row table
   (built by pyiceberg in seconds) the way the pipeline does (``tabletopic.table.row_delta``: position
   deletes located by key), rows/s, and one row per key checked; warm commits alternate batches
   without and with 1 % tombstones (deletes of existing keys), medians of three each, which should
   show the same rate.
7. Queries (``bench/table_queries.py``): ``tabletopic sql`` over a small table in the node's warm
   Spark, the CLI's start (``--help``, ``topics list``), ``sql --engine duckdb``, and ``sql --fresh``
   over a table with ``--fresh-records`` uncommitted records, each a new process as a user runs it.

Sections run alone with ``--only`` (e.g. ``--only sql,cli,duckdb,fresh`` or ``--only upsert``):
cold, catchup, steady, baselines, upsert, sql, cli, duckdb, fresh.

The machine is shared with other work: treat absolute figures as rough, the ratios as the signal.

Usage: python bench/table_bench.py [--records 1000000] [--partitions 3] [--formats avro,protobuf,...]
       [--steady-rate 50000] [--steady-seconds 20] [--upsert-keys 10000000] [--upsert-rows 100000]
       [--fresh-records 100000] [--repeats 5] [--only SECTION,...] [--skip SECTION,...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import itertools
import json
import random
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from percentiles import nearest_rank  # noqa: E402

from tests.support.table_node import TableNode, table_configs  # noqa: E402

FIELDS: list[dict[str, Any]] = [{"name": "id", "type": "long"}]
for _i in range(1, 20):
    _kind = ("int", "long", "double", "string", "boolean")[_i % 5]
    FIELDS.append({"name": f"f{_i:02d}_{_kind}", "type": _kind})
FIELDS[-1] = {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
SCHEMA = {"type": "record", "name": "BenchRecord", "namespace": "tabletopic.bench", "fields": FIELDS}
_PROTO_TYPES = {"int": "int32", "long": "int64", "double": "double", "string": "string", "boolean": "bool"}
PROTO = (
    'syntax = "proto3";\npackage tabletopic.bench;\nmessage BenchRecord {\n'
    + "".join(
        f"  {_PROTO_TYPES.get(f['type'], 'int64') if isinstance(f['type'], str) else 'int64'} "
        f"{f['name']} = {n};\n"
        for n, f in enumerate(FIELDS, 1)
    )
    + "}\n"
)
JSON_SCHEMA = {
    "type": "object",
    "properties": {
        f["name"]: {
            "type": {
                "int": "integer",
                "long": "integer",
                "double": "number",
                "string": "string",
                "boolean": "boolean",
            }.get(f["type"], "integer")
            if isinstance(f["type"], str)
            else "integer"
        }
        for f in FIELDS
    },
}
NODE_SETTINGS = {
    "table.job.runner": "spark",
    "spark.master": "local[2]",
    "spark.driver.memory": "1g",
    "table.coordinator.poll.interval.ms": "100",
    "log.level": "INFO",
}
FORMATS = ("avro", "protobuf", "json_schema", "json_string")
SECTIONS = ("cold", "catchup", "steady", "baselines", "upsert", "sql", "cli", "duckdb", "fresh")
T0_MS = int(dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)


def record(i: int, rng: random.Random) -> dict[str, Any]:
    """One 20-field row; ``created_at`` in epoch milliseconds."""
    value: dict[str, Any] = {"id": i}
    for field in FIELDS[1:]:
        kind = field["type"]
        name = field["name"]
        if isinstance(kind, dict):
            value[name] = T0_MS + i
        elif kind == "int":
            value[name] = rng.randint(-(2**31), 2**31 - 1)
        elif kind == "long":
            value[name] = rng.getrandbits(62)
        elif kind == "double":
            value[name] = rng.random() * 1e6
        elif kind == "string":
            value[name] = f"value-{rng.getrandbits(40):x}"
        else:
            value[name] = rng.random() < 0.5
    return value


def producer(node: TableNode, linger_ms: int = 20) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1 << 21,
        }
    )


def _confluent_prefix(schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id)


def encoder(
    node: TableNode, topic: str, fmt: str, work: Path
) -> tuple[Callable[[dict[str, Any]], bytes], dict[str, str]]:
    """``(encode one value, table-topic configs)`` for ``fmt``; registers the schema. Values are
    framed by hand after one serializer call registered the schema (the serializers' per-record
    Python cost is the client's, not the pipeline's)."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    flatten = {"convert_value_type": "by_schema_id", "transform_value_type": "flatten"}
    sample = record(0, random.Random(0))
    if fmt == "avro":
        import fastavro
        from confluent_kafka.schema_registry.avro import AvroSerializer

        first = AvroSerializer(node.registry(), json.dumps(SCHEMA))(sample, ctx)
        prefix = bytes(first[:5])
        parsed = fastavro.parse_schema(SCHEMA)

        def avro(value: dict[str, Any]) -> bytes:
            out = io.BytesIO()
            out.write(prefix)
            fastavro.schemaless_writer(out, parsed, value)
            return out.getvalue()

        return avro, flatten
    if fmt == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        from tests.support.table_producers import compile_proto

        module = compile_proto(PROTO, "table_bench_pb", work / "proto")
        serializer = ProtobufSerializer(module.BenchRecord, node.registry(), {"use.deprecated.format": False})
        first = serializer(module.BenchRecord(**sample), ctx)
        prefix = bytes(first[:6])  # magic, id, message index path [0]
        cls = module.BenchRecord
        return lambda value: prefix + cls(**value).SerializeToString(), flatten
    if fmt == "json_schema":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        first = JSONSerializer(json.dumps(JSON_SCHEMA), node.registry())(sample, ctx)
        prefix = bytes(first[:5])
        return lambda value: prefix + json.dumps(value, separators=(",", ":")).encode(), flatten
    return lambda value: json.dumps(value, separators=(",", ":")).encode(), {"convert_value_type": "string"}


def produce_all(node: TableNode, topic: str, payloads: list[bytes]) -> dict[int, int]:
    """Produce with acks=all; the end offset of every partition."""
    ends: dict[int, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    p = producer(node)
    for i, payload in enumerate(payloads):
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=payload, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(300) == 0
    return ends


def wait_caught_up(
    node: TableNode, topic: str, ends: dict[int, int], timeout: float
) -> tuple[dict[str, Any], list[dict[str, float]]]:
    """Poll the topic's status until every partition's end is committed; the last status and the
    time split of each job seen."""
    jobs: dict[int, dict[str, float]] = {}
    deadline = time.monotonic() + timeout
    status: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        status = node.table_status(topic)
        if status and status["last_commit_snapshot"] is not None:
            jobs[status["last_commit_snapshot"]] = dict(status["last_job_timings"])
            committed = status["committed_offsets"]
            if all(committed.get(str(part), 0) >= end for part, end in ends.items()):
                return status, list(jobs.values())
        time.sleep(0.05)
    raise SystemExit(f"{topic}: not caught up after {timeout}s: {status}")


def catch_up(
    node: TableNode, args: argparse.Namespace, fmt: str, values: list[dict[str, Any]], work: Path
) -> dict[str, Any]:
    """A backlog in a plain topic, then the table topic switched on: rows/s from the switch."""
    topic = f"bench_catchup_{fmt}"
    node.create_topic(topic, {}, partitions=args.partitions)
    encode, configs = encoder(node, topic, fmt, work)
    payloads = [encode(v) for v in values]
    started = time.monotonic()
    ends = produce_all(node, topic, payloads)
    produce_s = time.monotonic() - started
    switched = time.monotonic()
    node.alter_topic(topic, table_configs(commit_interval_ms=str(args.commit_interval_ms), **configs))
    status, jobs = wait_caught_up(node, topic, ends, args.timeout)
    seconds = time.monotonic() - switched
    assert status["rows_committed"] == len(values), status
    totals: dict[str, float] = {}
    for timings in jobs:
        for key, value in timings.items():
            totals[key] = totals.get(key, 0.0) + value
    # Wall time outside the cycles' phases: the switch seen, waits between cycles, status polls.
    phases = ("plan", "probe", "schema", "job", "commit")
    totals["outside"] = seconds - sum(totals.get(k, 0.0) for k in phases)
    return {
        "format": fmt,
        "records": len(values),
        "produce_rate": len(values) / produce_s,
        "seconds": seconds,
        "rate": len(values) / seconds,
        "commits": status["commits"],
        "jobs": jobs,
        "totals": totals,
    }


def steady(
    node: TableNode, args: argparse.Namespace, values: list[dict[str, Any]], work: Path
) -> dict[str, Any]:
    """Seconds from each record's produce call to the status poll that saw it committed."""
    topic = "bench_steady"
    node.create_topic(
        topic,
        table_configs(commit_interval_ms="1000", **encoder(node, topic, "avro", work)[1]),
        partitions=args.partitions,
    )
    encode = encoder(node, topic, "avro", work)[0]
    count = int(args.steady_seconds * args.steady_rate)
    payloads = [encode(values[i % len(values)]) for i in range(count)]
    sent_at = [0.0] * count
    positions: dict[tuple[int, int], int] = {}
    lock = threading.Lock()

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                positions[(msg.partition(), msg.offset())] = int(msg.key())

    p = producer(node, linger_ms=5)
    done = threading.Event()

    def produce() -> None:
        began = time.monotonic()
        for i, payload in enumerate(payloads):
            target = began + i / args.steady_rate
            pause = target - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            sent_at[i] = time.monotonic()
            while True:
                try:
                    p.produce(topic, key=str(i).encode(), value=payload, on_delivery=delivered)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 500 == 0:
                p.poll(0)
        p.flush(120)
        done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    latencies: list[float] = []
    seen: set[tuple[int, int]] = set()
    jobs: dict[int, dict[str, float]] = {}
    seen_at: list[float] = []  # when each new commit was first seen: the gaps are the cycle period
    deadline = time.monotonic() + args.steady_seconds + args.timeout
    while time.monotonic() < deadline:
        status = node.table_status(topic)
        now = time.monotonic()
        if status:
            if status["last_commit_snapshot"] is not None:
                if status["last_commit_snapshot"] not in jobs:
                    seen_at.append(now)
                jobs[status["last_commit_snapshot"]] = dict(status["last_job_timings"])
            committed = {int(k): v for k, v in status["committed_offsets"].items()}
            with lock:
                fresh = [pos for pos in positions if pos not in seen and pos[1] < committed.get(pos[0], 0)]
                for pos in fresh:
                    seen.add(pos)
                    latencies.append(now - sent_at[positions[pos]])
        if done.is_set() and len(seen) >= count:
            break
        time.sleep(0.05)
    thread.join()
    latencies.sort()
    produced_s = max(sent_at) - min(sent_at) if count else 0.0
    return {
        "latencies": latencies,
        "jobs": list(jobs.values()),
        "periods": [b - a for a, b in itertools.pairwise(seen_at)],
        "records": count,
        "achieved_rate": count / produced_s if produced_s else 0.0,
    }


def arrow_rows(values: list[dict[str, Any]], partitions: int) -> Any:
    """The Avro bench rows as the table holds them (flattened, ``created_at`` a timestamp)."""
    import pyarrow as pa

    rows = [
        {**v, "_kafka_metadata": {"partition": i % partitions, "offset": i, "timestamp": T0_MS}}
        for i, v in enumerate(values)
    ]
    table = pa.Table.from_pylist(rows)
    index = table.schema.get_field_index("created_at")
    return table.set_column(
        index,
        "created_at",
        table.column("created_at").cast(pa.timestamp("ms")).cast(pa.timestamp("us", "UTC")),
    )


def pyarrow_baseline(node: TableNode, table: Any) -> float:
    """Seconds for pyiceberg (Parquet by pyarrow) to append ``table`` in one commit."""
    catalog = node.catalog()
    name = "default.bench_pyarrow_baseline"
    if catalog.table_exists(name):
        catalog.drop_table(name)
    target = catalog.create_table(name, schema=table.schema)
    target.append(table.slice(0, 1000))  # warm-up: imports, catalog round trips
    started = time.monotonic()
    target.append(table)
    return time.monotonic() - started


def spark_session(node: TableNode, work: Path) -> Any:
    from tabletopic.catalog.adapters import SPARK_CATALOG_CLASS
    from tabletopic.config import Config
    from tabletopic.spark.session import get_spark

    conf = {
        "spark.sql.catalog.bench": SPARK_CATALOG_CLASS,
        "spark.sql.catalog.bench.type": "rest",
        "spark.sql.catalog.bench.uri": node.catalog_url,
    }
    return get_spark(Config({"data.dir": str(work / "spark"), "spark.master": "local[2]"}), conf)


def empty_job(spark: Any, repeats: int = 7) -> float:
    """Median seconds of a ``mapInArrow`` job of 3 tasks that yield nothing (the ingest job's shape)."""

    def nothing(batches: Any) -> Any:
        for _ in batches:
            pass
        return iter(())

    def run() -> float:
        began = time.monotonic()
        frame = spark.createDataFrame([(i,) for i in range(3)], "item int").repartition(3)
        frame.mapInArrow(nothing, "item int").collect()
        return time.monotonic() - began

    run()  # Python workers started
    return statistics.median(run() for _ in range(repeats))


def spark_baseline(spark: Any, table: Any, partitions: int) -> float:
    """Seconds for Spark's Iceberg writer to append ``table`` (mapInArrow yielding pre-built batches)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    step = len(table) // partitions + 1
    blobs = []
    for offset in range(0, len(table), step):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(offset, step))
        blobs.append(sink.getvalue().to_pybytes())
    spark_schema = from_arrow_schema(table.schema)
    name = "bench.default.bench_spark_baseline"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.createDataFrame([], spark_schema).writeTo(name).using("iceberg").create()

    def emit(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            for index in batch.column("index").to_pylist():
                yield from pa.ipc.open_stream(blobs[index]).read_all().to_batches()

    def append() -> float:
        began = time.monotonic()
        frame = spark.createDataFrame([(i,) for i in range(len(blobs))], "index int").repartition(len(blobs))
        frame.mapInArrow(emit, spark_schema).writeTo(name).append()
        return time.monotonic() - began

    append()  # warm-up
    return min(append(), append())


def with_tombstones(data: Any, keys: int, fraction: float) -> tuple[Any, Any]:
    """``data`` with ``fraction`` of its rows turned into deletes of existing keys (the staged
    delete marker, as a tombstone is staged); the batch and the keys deleted."""
    import numpy as np
    import pyarrow as pa

    ids = data.column("id").to_numpy()
    existing = np.flatnonzero(ids < keys)
    chosen = existing[: int(len(ids) * fraction)]
    marker = np.zeros(len(ids), dtype=bool)
    marker[chosen] = True
    index = data.schema.get_field_index("__tabletopic_delete")
    return data.set_column(index, "__tabletopic_delete", pa.array(marker)), ids[chosen]


def upsert(work: Path, keys: int, batch_rows: int) -> dict[str, float]:
    """A batch of ``batch_rows`` (half existing keys) applied to a ``keys``-row table the way the
    pipeline does (position deletes located by key, :mod:`tabletopic.table.row_delta`), then one with
    1 % tombstones; ``bench/upsert_bench.py`` has the MERGE INTO baseline and the read cost as
    deletes accumulate."""
    from bench.upsert_bench import batch, build_table, catalog, upsert_commit

    cat, _spec, rest = catalog(work / "upsert")
    try:
        cat.create_namespace("ns")
        _, load_s = build_table(cat, "bench_upsert", keys)
        from tabletopic.table import settings
        from tabletopic.table.key_index import KeyCache

        cache = KeyCache(settings.UPSERT_KEY_CACHE_BYTES.default)
        cold, _stats = upsert_commit(cat, "bench_upsert", batch(keys, batch_rows, 0), cache)
        # Warm commits alternate without and with 1 % tombstones (three of each): each commit adds
        # files the next one's lookup reads, so alternating compares like with like; medians.
        plain_s: list[float] = []
        tombstone_s: list[float] = []
        deleted: set[int] = set()
        new_keys = batch_rows - batch_rows // 2  # the cold commit's
        for round_ in range(1, 7):
            data = batch(keys, batch_rows, round_)
            ids = set(data.column("id").to_pylist())
            deleted -= ids  # written again
            new_keys += batch_rows - batch_rows // 2
            if round_ % 2 == 0:
                data, gone = with_tombstones(data, keys, 0.01)
                deleted |= set(gone.tolist())
            elapsed, _stats = upsert_commit(cat, "bench_upsert", data, cache)
            (tombstone_s if round_ % 2 == 0 else plain_s).append(elapsed)
        warm, tombstones = statistics.median(plain_s), statistics.median(tombstone_s)
        table = cat.load_table(("ns", "bench_upsert")).scan(selected_fields=("id",)).to_arrow()
        expected = keys + new_keys - len(deleted)
        assert table.num_rows == expected == len(table.column("id").unique()), (table.num_rows, expected)
    finally:
        rest.stop()
    return {
        "load_s": load_s,
        "cold_s": cold,
        "warm_s": warm,
        "rate": batch_rows / warm,
        "tombstones_s": tombstones,
        "tombstones_rate": batch_rows / tombstones,
    }


def cold_start(node: TableNode) -> float:
    """Seconds from a first record acknowledged on a new table topic to it committed."""
    topic = "bench_cold_start"
    node.create_topic(topic, table_configs(convert_value_type="string"))
    p = producer(node)
    p.produce(topic, value=b"cold")
    p.flush(30)
    started = time.monotonic()
    node.wait_committed(topic, {0: 1}, timeout=300)
    return time.monotonic() - started


def wait_spark_warm(node: TableNode, timeout: float = 120.0) -> float:
    """Seconds until the node says Spark is warm. The first table topic starts the warm-up in the
    background (the small-job helper first, then Spark and its Python workers); catch-up is
    measured with Spark already warm, as a running node has it."""
    started = time.monotonic()
    assert node.broker is not None
    while time.monotonic() - started < timeout:
        text = node.broker.log_path.read_text(errors="replace")
        if "Spark warmed up" in text or "Spark warm-up failed" in text:
            break
        time.sleep(0.2)
    return time.monotonic() - started


def say_upsert(
    args: argparse.Namespace, work: Path | None = None, say: Callable[[str], None] = print
) -> None:
    """The upsert figures, with and without 1 % tombstones (``--only upsert`` runs this alone)."""
    scratch = work or Path(tempfile.mkdtemp(prefix="table-bench-upsert-"))
    try:
        up = upsert(scratch, args.upsert_keys, args.upsert_rows)
    finally:
        if work is None:
            shutil.rmtree(scratch, ignore_errors=True)
    say(
        f"upsert {args.upsert_rows:,} rows (half existing keys) into {args.upsert_keys:,}: "
        f"{up['rate']:,.0f} rows/s (commit {up['warm_s']:.2f}s with the node's key cache warm; "
        f"first commit, cold: {args.upsert_rows / up['cold_s']:,.0f} rows/s; position deletes; "
        f"table load {up['load_s']:.1f}s)"
    )
    say(
        f"upsert with 1 % tombstones: {up['tombstones_rate']:,.0f} rows/s (commit {up['tombstones_s']:.2f}s; "
        f"ratio to without: {up['tombstones_rate'] / up['rate']:.2f})"
    )


def queries(node: TableNode, args: argparse.Namespace, skip: set[str], say: Callable[[str], None]) -> None:
    """Section 7: the query-side figures (``bench/table_queries.py``)."""
    from bench import table_queries as q

    if not {"sql", "duckdb", "cli", "fresh"} - skip:
        return
    p = producer(node)
    query = q.small_table(node, p)
    if "sql" not in skip:
        times = q.sql_times(node, query, args.repeats)
        say(f"sql (node's warm Spark) over a 1,000-row table: {q.summary(times)}")
    if "duckdb" not in skip:
        say(f"sql --engine duckdb, same query: {q.summary(q.duckdb_times(node, query, args.repeats))}")
    if "cli" not in skip:
        for command, times in q.cli_times(node, args.repeats).items():
            say(f"CLI start, {command}: {q.summary(times)}")
    if "fresh" not in skip:
        times, records = q.fresh_times(node, p, args.fresh_records, args.repeats)
        say(f"sql --fresh over {records:,} uncommitted records (+10 committed): {q.summary(times)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--commit-interval-ms", type=int, default=1000)
    parser.add_argument("--steady-rate", type=float, default=50_000.0, help="records/s")
    parser.add_argument("--steady-seconds", type=float, default=20.0)
    parser.add_argument("--upsert-keys", type=int, default=10_000_000)
    parser.add_argument("--upsert-rows", type=int, default=100_000)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--fresh-records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5, help="calls per query/CLI figure")
    parser.add_argument("--skip", default="", help=f"comma list of: {','.join(SECTIONS)}")
    parser.add_argument("--only", default="", help=f"comma list of: {','.join(SECTIONS)} (default all)")
    parser.add_argument("--keep", action="store_true", help="keep the node's data directory (GBs)")
    args = parser.parse_args()
    wanted = set(filter(None, args.only.split(","))) or set(SECTIONS)
    skip = set(SECTIONS) - wanted | set(filter(None, args.skip.split(",")))
    if not wanted <= set(SECTIONS) or not skip <= set(SECTIONS):
        raise SystemExit(f"sections are: {', '.join(SECTIONS)}")
    if "upsert" not in skip and skip >= set(SECTIONS) - {"upsert"}:
        say_upsert(args)  # needs no node
        return

    rng = random.Random(42)
    needs_values = bool({"catchup", "steady", "baselines"} - skip)
    values = [record(i, rng) for i in range(args.records)] if needs_values else []
    work = Path(tempfile.mkdtemp(prefix="table-bench-"))
    node = TableNode(work / "node", dict(NODE_SETTINGS))
    print(f"starting a node in {work} (Spark runner, local[2]); machine shared with other work", flush=True)
    node.start(timeout=240)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    try:
        if "cold" not in skip:
            cold = cold_start(node)
            say(
                f"cold start: first commit of a first table topic {cold:.1f}s after its record was "
                "acknowledged (commit interval 1 s)"
            )
        else:
            cold_start(node)  # the first table topic starts Spark's warm-up
        say(f"Spark warm {wait_spark_warm(node):.1f}s later (started by the first table topic)")
        results = []
        for fmt in args.formats.split(",") if "catchup" not in skip else ():
            result = catch_up(node, args, fmt, values, work)
            results.append(result)
            totals = result["totals"]
            split = "  ".join(f"{k} {v:.1f}s" for k, v in sorted(totals.items()))
            say(
                f"catch-up {fmt:<12} {result['rate']:>10,.0f} rows/s  ({result['records']:,} rows in "
                f"{result['seconds']:.1f}s, {result['commits']} commits; produced at "
                f"{result['produce_rate']:,.0f}/s)  split: {split}"
            )
        commit_times = [j["commit"] for r in results for j in r["jobs"] if "commit" in j]
        job_times = [j["job"] for r in results for j in r["jobs"] if "job" in j]
        if "steady" not in skip:
            st = steady(node, args, values, work)
            lat = st["latencies"]
            say(
                f"steady {st['achieved_rate']:,.0f} rec/s (asked {args.steady_rate:,.0f}), "
                "commit interval 1 s: "
                f"produce->visible p50 {nearest_rank(lat, 0.5):.2f}s  p99 {nearest_rank(lat, 0.99):.2f}s  "
                f"max {nearest_rank(lat, 1.0):.2f}s "
                f"({len(lat):,} records)"
            )
            keys = sorted({k for j in st["jobs"] for k in j})
            medians = "  ".join(
                f"{k} {statistics.median([j.get(k, 0.0) for j in st['jobs']]):.2f}s" for k in keys
            )
            periods = st["periods"] or [float("nan")]
            say(
                f"steady cycles: {len(st['jobs'])} commits seen, period median "
                f"{statistics.median(periods):.2f}s max {max(periods):.2f}s; "
                f"median split per cycle: {medians}"
            )
        queries(node, args, skip, say)
        if skip >= {"catchup", "baselines"}:
            return
        spark = spark_session(node, work)
        empty = empty_job(spark)
        say(
            f"spark empty job (3 tasks, no rows): {empty:.2f}s median; commit (catch-up jobs): "
            f"median {statistics.median(commit_times) if commit_times else float('nan'):.2f}s "
            f"over {len(commit_times)}; job wall median "
            f"{statistics.median(job_times) if job_times else float('nan'):.2f}s"
        )
        avro = next((r for r in results if r["format"] == "avro"), None)
        if "baselines" not in skip and avro is not None:
            table = arrow_rows(values, args.partitions)
            py_s = pyarrow_baseline(node, table)
            sp_s = spark_baseline(spark, table, args.partitions)
            n = len(values)
            say(
                f"baseline pyarrow alone (pyiceberg append, one commit): {n / py_s:>10,.0f} rows/s "
                f"({py_s:.1f}s)"
            )
            say(
                f"baseline Spark Iceberg writer (mapInArrow of Arrow rows): {n / sp_s:>10,.0f} rows/s "
                f"({sp_s:.1f}s)"
            )
            say(
                f"ratio avro catch-up / pyarrow alone: {avro['rate'] / (n / py_s):.2f}; "
                f"/ Spark writer: {avro['rate'] / (n / sp_s):.2f}"
            )
        if "upsert" not in skip:
            say_upsert(args, work, say)
        from tabletopic.spark.session import stop_spark

        stop_spark()
    finally:
        node.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n== summary (machine shared with other work) ==")
    for text in lines:
        print(text)


if __name__ == "__main__":
    main()
