"""Broker-side schema validation: validated vs unvalidated produce, same node, same run.

One ``tabletopic serve`` node (local WAL). Per format (Avro, JSON Schema, Protobuf) payloads are
made once by confluent-kafka's own serializers, registered in the node's registry under the
validated topic's subject; then confluent-kafka (acks=all, linger 5 ms) produces the same payloads
for ``--seconds`` to a plain topic and to a topic with ``confluent.value.schema.validation=true``,
``--rounds`` times, alternating which goes first. Printed: msgs/s and MB/s of each and their ratio
validated/plain (target >= 0.70); and the broker's CPU time per message (from /proc) and the
client's (this process: the Python produce loop and librdkafka's threads) in each run: on a shared
box the wall-clock ratio mostly measures who else is running, while the CPU per message says what
validation itself costs, and what share of the whole (client + broker) it is.

Where the time goes, in process: the broker's per-batch work without validation (header + CRC32C)
against the validator's (record framing, grouping, decoding), in CPU microseconds per record for
one 1000-record batch (CPU time, steadier than wall time on a shared machine).

Usage: python bench/validation_bench.py [--seconds 3] [--rounds 2] [--formats avro,json,protobuf]
The machine may be shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.broker_process import BrokerProcess  # noqa: E402

VALIDATE = {"confluent.value.schema.validation": "true"}
AVRO = {
    "type": "record",
    "name": "Click",
    "namespace": "bench",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "ms", "type": "long"},
        {"name": "score", "type": "double"},
        {"name": "mobile", "type": "boolean"},
    ],
}
JSON_SCHEMA = {
    "title": "Click",
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "page": {"type": "string"},
        "ms": {"type": "integer"},
        "score": {"type": "number"},
        "mobile": {"type": "boolean"},
    },
    "required": ["user", "page", "ms"],
}


def click(i: int) -> dict[str, Any]:
    return {
        "user": f"user-{i % 977}",
        "page": f"/p/{i % 31}",
        "ms": 1_700_000_000_000 + i,
        "score": i / 7,
        "mobile": i % 3 == 0,
    }


def proto_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto(name="bench/click.proto", package="bench", syntax="proto3")
    message = file.message_type.add(name="Click")
    kinds = descriptor_pb2.FieldDescriptorProto
    for number, (name, kind) in enumerate(
        [
            ("user", kinds.TYPE_STRING),
            ("page", kinds.TYPE_STRING),
            ("ms", kinds.TYPE_INT64),
            ("score", kinds.TYPE_DOUBLE),
            ("mobile", kinds.TYPE_BOOL),
        ],
        start=1,
    ):
        message.field.add(name=name, number=number, type=kind, label=kinds.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Click"))


def payloads(fmt: str, registry_url: str, topic: str, count: int = 1000) -> list[bytes]:
    """``count`` wire-format values made by confluent-kafka's serializer (registers the schema)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        avro = AvroSerializer(client, json.dumps(AVRO))
        return [avro(click(i), ctx) for i in range(count)]
    if fmt == "json":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        js = JSONSerializer(json.dumps(JSON_SCHEMA), client)
        return [js(click(i), ctx) for i in range(count)]
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    cls = proto_class()
    pb = ProtobufSerializer(cls, client, {"use.deprecated.format": False})
    return [pb(cls(**click(i)), ctx) for i in range(count)]


def create_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(
    bootstrap: str, topic: str, values: list[bytes], seconds: float, broker_pid: int
) -> tuple[float, float, float, float]:
    """msgs/s, MB/s, the broker's and the client's CPU microseconds per message."""
    before, client = process_cpu_s(broker_pid), time.process_time()
    msgs, mb = produce(bootstrap, topic, values, seconds)
    count = msgs * seconds
    return (
        msgs,
        mb,
        (process_cpu_s(broker_pid) - before) / count * 1e6,
        (time.process_time() - client) / count * 1e6,
    )


def produce(bootstrap: str, topic: str, values: list[bytes], seconds: float) -> tuple[float, float]:
    """msgs/s and MB/s of acknowledged produce for ``seconds`` (flush included)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
        }
    )
    failures: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(err)

    sent = nbytes = 0
    count = len(values)
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(1000):
            value = values[sent % count]
            try:
                producer.produce(topic, value, on_delivery=report)
            except BufferError:
                producer.poll(0.001)
                continue
            sent += 1
            nbytes += len(value)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed: {failures[0]}")
    return sent / elapsed, nbytes / elapsed / 1e6


def in_process_costs(values: list[bytes], topic: str, registry_url: str) -> tuple[float, float]:
    """Microseconds per record: header + CRC validation vs schema validation, one 1000-record batch."""
    from tabletopic.records.encoder import Record, build_batch
    from tabletopic.records.header import validate_batches
    from tabletopic.schema_registry.client import HttpSchemaLookup
    from tabletopic.validation.schema_validation import SchemaValidator

    lookup = HttpSchemaLookup(registry_url)
    ids = {int.from_bytes(v[1:5], "big") for v in values}
    subjects = {i: [f"{topic}-value"] for i in ids}
    validator = SchemaValidator(lambda: lookup, lambda i: subjects.get(i, []), refresh_s=3600)
    batch = build_batch([Record(None, v) for v in values])

    async def run() -> tuple[float, float]:
        headers = validate_batches(batch)
        assert await validator.check(topic, VALIDATE, batch, headers) is None
        rounds = 30
        start = time.process_time()
        for _ in range(rounds):
            validate_batches(batch)
        plain = (time.process_time() - start) / rounds / len(values) * 1e6
        start = time.process_time()
        for _ in range(rounds):
            await validator.check(topic, VALIDATE, batch, headers)
        checked = (time.process_time() - start) / rounds / len(values) * 1e6
        return plain, checked

    try:
        return asyncio.run(run())
    finally:
        lookup.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--formats", default="avro,json,protobuf")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="validation-bench-") as tmp:
        node = BrokerProcess(Path(tmp)).start()
        try:
            print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores, shared)")
            assert node.process is not None
            pid = node.process.pid
            print(
                f"{'format':<9} {'bytes':>5} {'plain msg/s':>12} {'valid. msg/s':>13} {'ratio':>6}"
                f" {'plain MB/s':>10} {'valid. MB/s':>11} {'broker cpu µs/msg':>17} {'valid.':>7}"
                f" {'client cpu µs/msg':>17} {'valid.':>7} {'hdr µs/rec':>10} {'val. µs/rec':>11}"
            )
            for fmt in args.formats.split(","):
                tag = uuid.uuid4().hex[:6]
                plain, checked = f"plain-{fmt}-{tag}", f"validated-{fmt}-{tag}"
                create_topic(node.bootstrap, plain, {})
                create_topic(node.bootstrap, checked, VALIDATE)
                values = payloads(fmt, node.registry_url, checked)
                produce(node.bootstrap, checked, values, 0.5)  # warm: schema cached, decoder built
                runs: dict[str, list[tuple[float, float, float, float]]] = {plain: [], checked: []}
                for number in range(args.rounds):
                    # Alternate which goes first: the second run of a round shares the node with the
                    # first one's background work (WAL upload, compaction).
                    for topic in (plain, checked) if number % 2 == 0 else (checked, plain):
                        runs[topic].append(measured(node.bootstrap, topic, values, args.seconds, pid))
                p_msgs = sum(r[0] for r in runs[plain]) / args.rounds
                v_msgs = sum(r[0] for r in runs[checked]) / args.rounds
                p_mb = sum(r[1] for r in runs[plain]) / args.rounds
                v_mb = sum(r[1] for r in runs[checked]) / args.rounds
                p_cpu = sum(r[2] for r in runs[plain]) / args.rounds
                v_cpu = sum(r[2] for r in runs[checked]) / args.rounds
                p_client = sum(r[3] for r in runs[plain]) / args.rounds
                v_client = sum(r[3] for r in runs[checked]) / args.rounds
                header_us, check_us = in_process_costs(values, checked, node.registry_url)
                size = sum(len(v) for v in values) // len(values)
                print(
                    f"{fmt:<9} {size:>5} {p_msgs:>12,.0f} {v_msgs:>13,.0f} {v_msgs / p_msgs:>6.2f}"
                    f" {p_mb:>10.1f} {v_mb:>11.1f} {p_cpu:>17.2f} {v_cpu:>7.2f}"
                    f" {p_client:>17.2f} {v_client:>7.2f} {header_us:>10.3f} {check_us:>11.3f}"
                )
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            node.stop()


if __name__ == "__main__":
    main()
