"""What one ProduceRequest costs a broker, the way librdkafka sends them to many partitions.

librdkafka puts one partition in each ProduceRequest (its issue #1700), so a confluent-kafka
producer writing a few records a second to each of hundreds of partitions sends about one request
per record: the broker's cost per request, not per byte, is what such a workload pays. This bench
starts one node (``tabletopic serve`` on its defaults: local WAL with fsync) and sends, at a fixed
rate, idempotent acks=all records of ``--value`` bytes:

- ``a request a record``: round the partitions of a ``--partitions`` topic, ``linger.ms`` 0;
- ``batched`` (the baseline): the same records at the same rate to a one-partition topic with
  librdkafka's default linger, so many records share a request.

For each it prints the requests the broker answered (its own Produce counter), the broker
process's CPU (user + system, all threads, from /proc) per request and per record, and the ratio of
the two cases per record.

    .venv/bin/python bench/produce_request_bench.py [--rate 1500] [--seconds 20] [--partitions 600]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tabletopic.broker.metrics import api_name  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
_PRODUCE_ANSWERED = re.compile(
    r'^tabletopic_broker_requests_total\{api="' + api_name(0) + r'",error="[^"]*"\} (\S+)$', re.M
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid``, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def produce_answered(node: BrokerProcess) -> float:
    """The Produce requests the broker answered so far, by its own counter."""
    with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(value) for value in _PRODUCE_ANSWERED.findall(text))


def send(
    bootstrap: str, topic: str, partitions: int, args: argparse.Namespace, seconds: float, linger_ms: int
) -> int:
    """``args.rate`` records a second for ``seconds``, round ``partitions``; returns how many."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": linger_ms})
    value, rate = b"x" * args.value, args.rate
    started, sent = time.monotonic(), 0
    while (elapsed := time.monotonic() - started) < seconds:
        while sent < int(elapsed * rate):
            producer.produce(topic, value, partition=sent % partitions)
            sent += 1
        producer.poll(0.001)
    producer.flush(30)
    del producer  # its connections closed now, not when the node has gone (a "Disconnected" line)
    return sent


def measure(
    node: BrokerProcess, args: argparse.Namespace, topic: str, partitions: int, linger_ms: int
) -> tuple[float, float, int]:
    """(CPU seconds, requests, records) of the broker over one timed run, after a warm-up."""
    assert node.process_id is not None
    send(node.bootstrap, topic, partitions, args, 3, linger_ms)
    cpu, requests = cpu_seconds(node.process_id), produce_answered(node)
    records = send(node.bootstrap, topic, partitions, args, args.seconds, linger_ms)
    return cpu_seconds(node.process_id) - cpu, produce_answered(node) - requests, records


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="produce-request-bench-") as root:
        node = BrokerProcess(Path(root)).start()
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            created = admin.create_topics([NewTopic("many", args.partitions, 1), NewTopic("one", 1, 1)])
            for future in created.values():
                future.result(30)
            del admin  # its connection closed now, not when the node has gone
            print(
                f"one node, {args.value} B records, {args.rate} records/s for {args.seconds:.0f} s, "
                f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
            )
            per_record = {}
            for name, topic, partitions, linger in (
                ("a request a record", "many", args.partitions, 0),
                ("batched (baseline)", "one", 1, 5),
            ):
                cpu, requests, records = measure(node, args, topic, partitions, linger)
                per_record[name] = cpu / records
                each = records / max(requests, 1)
                print(
                    f"  {name:19} {requests:8.0f} requests, {each:5.1f} records each: "
                    f"{cpu / max(requests, 1) * 1e6:6.0f} µs CPU a request, "
                    f"{cpu / records * 1e6:6.1f} µs a record"
                )
            ratio = per_record["a request a record"] / per_record["batched (baseline)"]
            print(f"  ratio per record, a request a record / batched: {ratio:.1f}x")
        finally:
            node.stop()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=1500, help="records a second")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--partitions", type=int, default=600)
    parser.add_argument("--value", type=int, default=100, help="bytes a record")
    return parser.parse_args()


if __name__ == "__main__":
    main()
