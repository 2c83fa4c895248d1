"""Table-topic figures: a real ``tabletopic serve`` node (Spark runner) fed by confluent-kafka.

1. Throughput: N Avro records (20 fields) to a table topic with P partitions; records/s from the
   first produce to the last row committed (the whole path: broker, object store, Spark job, Iceberg
   commit), with the time split of every committed job (tasks' read/decode/write seconds summed over
   tasks, job wall time, commit) from ``/v1/tables`` (``last_job_timings``).
2. Freshness: records at a steady rate to a topic with a short commit interval; per record, produce
   time -> the moment ``/v1/tables`` reports its offset committed (visible to queries). p50/p99.
3. Baseline: the same rows as pre-built Arrow batches appended by a plain Spark job
   (``mapInArrow`` yielding them, ``df.writeTo(table).append()``) through the same REST catalog.
   The ratio says what decoding Kafka batches, conversion and the exactly-once commit cost.

Usage: python bench/table_bench.py [--records 30000] [--partitions 3] [--commit-interval-ms 3000]
       [--freshness-seconds 20] [--freshness-rate 200] [--freshness-interval-ms 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.table_node import TableNode, table_configs  # noqa: E402

FIELDS: list[dict[str, Any]] = [{"name": "id", "type": "long"}]
for _i in range(1, 20):
    _kind = ("int", "long", "double", "string", "boolean")[_i % 5]
    FIELDS.append({"name": f"f{_i:02d}_{_kind}", "type": _kind})
FIELDS[-1] = {"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
SCHEMA = {"type": "record", "name": "BenchRecord", "namespace": "tabletopic.bench", "fields": FIELDS}
NODE_SETTINGS = {
    "table.job.runner": "spark",
    "spark.master": "local[2]",
    "spark.driver.memory": "1g",
    "table.coordinator.poll.interval.ms": "100",
    "log.level": "INFO",
}


def record(i: int, rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {"id": i}
    for field in FIELDS[1:]:
        kind = field["type"]
        name = field["name"]
        if isinstance(kind, dict):
            value[name] = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i)
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


def serializer(node: TableNode) -> Any:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    return AvroSerializer(node.registry(), json.dumps(SCHEMA))


def producer(node: TableNode, linger_ms: int = 20) -> Any:
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "acks": "all",
            "linger.ms": linger_ms,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )


def encode_all(node: TableNode, topic: str, values: list[dict[str, Any]]) -> list[bytes]:
    from confluent_kafka.serialization import MessageField, SerializationContext

    ser = serializer(node)
    ctx = SerializationContext(topic, MessageField.VALUE)
    return [bytes(ser(v, ctx)) for v in values]


def throughput(node: TableNode, args: argparse.Namespace, values: list[dict[str, Any]]) -> dict[str, Any]:
    topic = "bench_throughput"
    node.create_topic(
        topic,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten",
            commit_interval_ms=str(args.commit_interval_ms),
        ),
        partitions=args.partitions,
    )
    encoded = encode_all(node, topic, values)  # registers the schema; serialization is client cost
    ends: dict[int, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    p = producer(node)
    started = time.monotonic()
    for i, payload in enumerate(encoded):
        p.produce(topic, key=str(i).encode(), value=payload, on_delivery=delivered)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    acked = time.monotonic()
    jobs: dict[int, dict[str, Any]] = {}
    status: dict[str, Any] | None = None
    deadline = acked + args.timeout
    while time.monotonic() < deadline:
        status = node.table_status(topic)
        if status and status["last_commit_snapshot"] is not None:
            jobs[status["last_commit_snapshot"]] = status["last_job_timings"] | {
                "rows": status["rows_committed"]
            }
            committed = status["committed_offsets"]
            if all(committed.get(str(part), 0) >= end for part, end in ends.items()):
                break
        time.sleep(0.05)
    else:
        raise SystemExit(f"throughput: not committed after {args.timeout}s: {status}")
    done = time.monotonic()
    assert status is not None and status["rows_committed"] == len(values), status
    totals: dict[str, float] = {}
    for timings in jobs.values():
        for key, value in timings.items():
            if key != "rows":
                totals[key] = totals.get(key, 0.0) + value
    return {
        "records": len(values),
        "produce_s": acked - started,
        "end_to_end_s": done - started,
        "commits": status["commits"],
        "jobs_seen": len(jobs),
        "timings_total": totals,
    }


def freshness(node: TableNode, args: argparse.Namespace) -> list[float]:
    """Seconds from each record's produce call to the status poll that saw it committed."""
    topic = "bench_freshness"
    node.create_topic(
        topic,
        table_configs(
            convert_value_type="by_schema_id",
            transform_value_type="flatten",
            commit_interval_ms=str(args.freshness_interval_ms),
        ),
        partitions=args.partitions,
    )
    rng = random.Random(7)
    count = int(args.freshness_seconds * args.freshness_rate)
    encoded = encode_all(node, topic, [record(i, rng) for i in range(count)])
    sent_at: dict[int, float] = {}
    positions: dict[tuple[int, int], float] = {}
    lock = threading.Lock()

    def on_delivery(i: int) -> Any:
        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                with lock:
                    positions[(msg.partition(), msg.offset())] = sent_at[i]

        return delivered

    p = producer(node, linger_ms=5)
    stop = threading.Event()

    def produce() -> None:
        interval = 1.0 / args.freshness_rate
        next_at = time.monotonic()
        for i, payload in enumerate(encoded):
            sent_at[i] = time.monotonic()
            p.produce(topic, key=str(i).encode(), value=payload, on_delivery=on_delivery(i))
            p.poll(0)
            next_at += interval
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        p.flush(60)
        stop.set()

    thread = threading.Thread(target=produce)
    thread.start()
    latencies: dict[tuple[int, int], float] = {}
    deadline = time.monotonic() + args.freshness_seconds + args.timeout
    while time.monotonic() < deadline:
        status = node.table_status(topic)
        now = time.monotonic()
        if status:
            committed = {int(k): v for k, v in status["committed_offsets"].items()}
            with lock:
                for position, at in positions.items():
                    if position not in latencies and position[1] < committed.get(position[0], 0):
                        latencies[position] = now - at
        if stop.is_set() and len(latencies) >= count:
            break
        time.sleep(0.1)
    thread.join()
    return sorted(latencies.values())


def baseline(node: TableNode, values: list[dict[str, Any]], partitions: int) -> dict[str, float]:
    """Plain Spark: pre-built Arrow batches yielded by mapInArrow, appended through the REST catalog."""
    import pyarrow as pa

    from tabletopic.catalog.adapters import SPARK_CATALOG_CLASS
    from tabletopic.config import Config
    from tabletopic.spark.session import get_spark, stop_spark

    rows = [
        {**v, "created_at": v["created_at"], "_kafka_metadata": {"partition": i % partitions, "offset": i}}
        for i, v in enumerate(values)
    ]
    table = pa.Table.from_pylist(rows)
    table = table.set_column(
        table.schema.get_field_index("created_at"),
        "created_at",
        table.column("created_at").cast(pa.timestamp("us", "UTC")),
    )
    chunks = [
        c.to_batches()
        for c in (
            table.slice(o, len(table) // partitions + 1)
            for o in range(0, len(table), len(table) // partitions + 1)
        )
    ]
    blobs = []
    for batches in chunks:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        blobs.append(sink.getvalue().to_pybytes())

    catalog = "bench"
    conf = {
        f"spark.sql.catalog.{catalog}": SPARK_CATALOG_CLASS,
        f"spark.sql.catalog.{catalog}.type": "rest",
        f"spark.sql.catalog.{catalog}.uri": node.catalog_url,
    }
    started = time.monotonic()
    spark = get_spark(
        Config({"data.dir": tempfile.mkdtemp(prefix="table-bench-spark-"), "spark.master": "local[2]"}), conf
    )
    session_s = time.monotonic() - started
    from pyspark.sql.pandas.types import from_arrow_schema

    spark_schema = from_arrow_schema(table.schema)
    name = f"{catalog}.default.baseline"
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

    append()  # warm-up: Python workers, code paths
    seconds = min(append(), append())
    count = spark.table(name).count()
    stop_spark()
    assert count == 3 * len(values), count
    return {"session_s": session_s, "append_s": seconds}


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(int(q * len(values)), len(values) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--commit-interval-ms", type=int, default=3000)
    parser.add_argument("--freshness-seconds", type=float, default=20.0)
    parser.add_argument("--freshness-rate", type=float, default=200.0, help="records/s")
    parser.add_argument("--freshness-interval-ms", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--skip-baseline", action="store_true")
    args = parser.parse_args()

    rng = random.Random(42)
    values = [record(i, rng) for i in range(args.records)]
    data_dir = Path(tempfile.mkdtemp(prefix="table-bench-"))
    node = TableNode(data_dir, dict(NODE_SETTINGS))
    print(f"starting a node in {data_dir} (Spark runner, local[2]) ...", flush=True)
    node.start(timeout=240)
    try:
        # Warm the node's Spark session and Python workers so the first figure is not start-up.
        warm = throughput_warmup(node)
        print(f"warm-up commit took {warm:.1f}s (Spark session start + first job)", flush=True)
        tp = throughput(node, args, values)
        rate = tp["records"] / tp["end_to_end_s"]
        print(f"\n== throughput: {tp['records']} records x 20 fields, {args.partitions} partitions")
        print(f"produce (acks=all):          {tp['records'] / tp['produce_s']:>10,.0f} records/s")
        print(f"first produce -> committed:  {rate:>10,.0f} records/s ({tp['end_to_end_s']:.1f}s)")
        print(f"commits: {tp['commits']}; job time split summed over the {tp['jobs_seen']} jobs seen:")
        for key, value in sorted(tp["timings_total"].items()):
            print(f"  {key:<8} {value:8.2f}s")

        lat = freshness(node, args)
        print(
            f"\n== freshness: {args.freshness_rate:.0f} records/s for {args.freshness_seconds:.0f}s, "
            f"commit interval {args.freshness_interval_ms} ms"
        )
        print(
            f"produce -> committed: p50 {pct(lat, 0.5):.2f}s  p99 {pct(lat, 0.99):.2f}s  ({len(lat)} records)"
        )
        if not args.skip_baseline:
            base = baseline(node, values, args.partitions)
            base_rate = len(values) / base["append_s"]
            print(f"\n== baseline: plain Spark mapInArrow append of the same {len(values)} rows")
            print(f"append:                      {base_rate:>10,.0f} rows/s ({base['append_s']:.2f}s)")
            print(f"ratio tabletopic end-to-end / baseline append: {rate / base_rate:.2f}")
            job = tp["timings_total"].get("job")
            if job:
                print(f"ratio tabletopic job time / baseline append: {job / base['append_s']:.2f}")
    finally:
        node.stop()


def throughput_warmup(node: TableNode) -> float:
    """One small commit on a throwaway topic: starts the node's Spark session."""
    topic = "bench_warmup"
    node.create_topic(topic, table_configs(convert_value_type="string"))
    p = producer(node)
    p.produce(topic, value=b"warm")
    p.flush(30)
    started = time.monotonic()
    node.wait_committed(topic, {0: 1}, timeout=300)
    return time.monotonic() - started


if __name__ == "__main__":
    main()
