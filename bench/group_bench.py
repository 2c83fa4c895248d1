"""Consumer groups on one node, the classic protocol against KIP-848 (``group.protocol=consumer``)
in one run, with confluent-kafka:

- **consume**: a group of ``--members`` consumers, each in its own thread, reads a topic of
  ``--partitions`` partitions holding ``--records`` records of 1 KiB from the start: seconds from
  the subscribes to the first record (the group forming; the classic protocol waits
  ``group.initial.rebalance.delay.ms``, 3 s by default, for more members), MB/s from the first
  record to the last (with KIP-848 the first member starts at once and partitions move to the
  others while they are read; classic assigns once, after the delay), and the seconds from the
  subscribes to the last record, what a user waits;
- **rebalance**: with two members stable, a third joins; the time until every partition is owned
  again and the newcomer owns its share (the member joins → every partition owned again). Repeated
  ``--rebalances`` times, p50 and max.

- **share groups** (KIP-932, confluent-kafka's ``ShareConsumer`` in implicit acknowledgement):
  ``--share-records`` records in one partition read by a share group of 1 and of 3 members, MB/s
  from the first record to the last (every record acquired, delivered and accepted once).

The node is started once (local WAL) and both protocols run against it, alternating, so a drift
in the machine's load weighs on both alike. The ratios close the report.

Usage: python bench/group_bench.py [--records 200000] [--partitions 12] [--members 3]
                                   [--rebalances 5] [--share-records 50000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.kafka_clients import share_group_starts_earliest  # noqa: E402

VALUE = b"g" * 1024
PROTOCOLS = ("classic", "consumer")


def consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
    }
    if protocol == "classic":  # the cooperative assignor: the classic protocol at its best
        config.update({"partition.assignment.strategy": "cooperative-sticky", "heartbeat.interval.ms": 300})
    return Consumer(config)


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"groups-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    return topic


def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("the topic was not filled within 120 s")


def consume_rate(
    bootstrap: str, topic: str, records: int, members: int, protocol: str
) -> tuple[float, float, float]:
    """Seconds to the first record, MB/s after it and seconds to the last record, of a group of
    ``members`` reading ``records`` from the start."""
    group = f"consume-{protocol}-{uuid.uuid4().hex[:6]}"

    def client() -> tuple[Consumer, Callable[[], list[Any]]]:
        member = consumer(bootstrap, group, protocol)
        return member, lambda: member.consume(1000, 0.1)

    return read_together(client, topic, records, members, f"{protocol} group")


def share_rate(bootstrap: str, topic: str, records: int, members: int) -> float:
    """MB/s of a share group of ``members`` reading the ``records`` of ``topic`` (implicit mode:
    a poll accepts the batch of the poll before)."""
    from confluent_kafka import ShareConsumer

    group = f"share-{uuid.uuid4().hex[:6]}"
    share_group_starts_earliest({"bootstrap.servers": bootstrap}, group)

    def client() -> tuple[Any, Callable[[], list[Any]]]:
        member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        return member, lambda: member.poll(0.1)

    return read_together(client, topic, records, members, f"share group of {members}")[1]


def read_together(
    client: Callable[[], tuple[Any, Callable[[], list[Any]]]],
    topic: str,
    records: int,
    members: int,
    what: str,
) -> tuple[float, float, float]:
    """``members`` clients, each in its own thread, read ``records`` of ``topic`` between them:
    seconds to the first record, MB/s after it, seconds to the last. ``client`` makes one member
    and the call that returns its next messages."""
    counts = [0] * members
    first: list[float] = []
    done = threading.Event()

    def member(index: int) -> None:
        consumer_, receive = client()
        consumer_.subscribe([topic])
        try:
            while not done.is_set():
                counts[index] += sum(1 for message in receive() if message.error() is None)
                if counts[index] and not first:
                    first.append(time.monotonic())
                if sum(counts) >= records:
                    done.set()
        finally:
            consumer_.close()

    started = time.monotonic()
    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for thread in threads:
        thread.start()
    if not done.wait(300):
        raise RuntimeError(f"{what}: read {sum(counts)} of {records} records in 300 s")
    ended = time.monotonic()
    for thread in threads:
        thread.join(30)
    return first[0] - started, records * len(VALUE) / (ended - first[0]) / 1e6, ended - started


def rebalance_seconds(bootstrap: str, topic: str, partitions: int, protocol: str) -> float:
    """Two members stable, a third joins: seconds until all partitions are owned again and the
    newcomer owns its share."""
    group = f"rebalance-{protocol}-{uuid.uuid4().hex[:6]}"
    clients = [consumer(bootstrap, group, protocol) for _ in range(2)]
    try:
        for client in clients:
            client.subscribe([topic])
        owned = owner_counts(clients)
        wait(lambda: sum(owned()) == partitions and min(owned()) > 0, 60, f"{protocol}: two members settle")
        clients.append(consumer(bootstrap, group, protocol))
        joined = time.monotonic()
        clients[-1].subscribe([topic])
        owned = owner_counts(clients)
        share = partitions // len(clients)
        wait(
            lambda: sum(owned()) == partitions and min(owned()) >= share,
            60,
            f"{protocol}: the third member gets its share",
        )
        return time.monotonic() - joined
    finally:
        for client in clients:
            client.close()


def owner_counts(clients: list[Consumer]) -> Callable[[], list[int]]:
    """A probe that polls every member once (a member applies assignments only in its poll) and
    returns how many partitions each owns."""

    def probe() -> list[int]:
        for client in clients:
            client.poll(0.01)
        return [len(client.assignment()) for client in clients]

    return probe


def wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records of 1 KiB in the consume run")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--members", type=int, default=3, help="members of the consuming group")
    parser.add_argument("--rebalances", type=int, default=5, help="joins timed per protocol")
    parser.add_argument("--share-records", type=int, default=50_000, help="records of the share group runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="group-bench-") as tmp:
        node = BrokerProcess(Path(tmp), {"group.consumer.heartbeat.interval.ms": "300"}).start()
        try:
            topic = create_topic(node.bootstrap, args.partitions)
            fill(node.bootstrap, topic, args.records)
            starts: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
            rates: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
            totals: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
            for protocol in (*PROTOCOLS, *reversed(PROTOCOLS)):
                start, rate, total = consume_rate(node.bootstrap, topic, args.records, args.members, protocol)
                starts[protocol].append(start)
                rates[protocol].append(rate)
                totals[protocol].append(total)
            share_topic = create_topic(node.bootstrap, 1)
            fill(node.bootstrap, share_topic, args.share_records)
            shares = {n: share_rate(node.bootstrap, share_topic, args.share_records, n) for n in (1, 3)}
            joins: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
            for _ in range(args.rebalances):
                for protocol in PROTOCOLS:
                    joins[protocol].append(
                        rebalance_seconds(node.bootstrap, topic, args.partitions, protocol)
                    )
        finally:
            node.stop()
    print(
        f"consumer groups, one node (local WAL): {args.records:,} records of 1 KiB in {args.partitions} "
        f"partitions, {args.members} members; classic = cooperative-sticky, consumer = KIP-848 (uniform)"
    )
    print(
        f"{'protocol':<10}{'first record s':>16}{'consume MB/s':>14}{'all read s':>12}"
        f"{'join p50 s':>12}{'join max s':>12}"
    )
    for protocol in PROTOCOLS:
        print(
            f"{protocol:<10}{statistics.mean(starts[protocol]):>16.2f}{statistics.mean(rates[protocol]):>14.1f}"
            f"{statistics.mean(totals[protocol]):>12.2f}"
            f"{statistics.median(joins[protocol]):>12.2f}{max(joins[protocol]):>12.2f}"
        )
    consume_ratio = statistics.mean(rates["consumer"]) / statistics.mean(rates["classic"])
    join_ratio = statistics.median(joins["consumer"]) / statistics.median(joins["classic"])
    print(f"KIP-848 / classic: consume {consume_ratio:.2f}x, join time {join_ratio:.2f}x")
    print(
        f"share group, {args.share_records:,} records of 1 KiB in one partition: 1 member "
        f"{shares[1]:.1f} MB/s, 3 members {shares[3]:.1f} MB/s ({shares[3] / shares[1]:.2f}x)"
    )


if __name__ == "__main__":
    main()
