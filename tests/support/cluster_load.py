"""Load for the balancer test and the cluster bench: a steady producer of random bytes, and each
broker's bytes in per second as the leaders reported it with their leases."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tabletopic.cluster.db import ClusterSnapshot
from tabletopic.cluster.load import BYTES_IN, figure

TOLERANCE = 0.2


@contextmanager
def steady_load(bootstrap: str, topic: str, partitions: int, bytes_per_second: int) -> Iterator[None]:
    """Writes ``bytes_per_second`` spread evenly over the topic's partitions from a thread."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 20})
    value = os.urandom(8192)
    stop = threading.Event()

    def run() -> None:
        sent = 0
        started = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - started) * bytes_per_second / len(value))
            while sent < due:
                try:
                    producer.produce(topic, value=value, partition=sent % partitions)
                except BufferError:
                    break
                sent += 1
            producer.poll(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)
        producer.flush(30)


def broker_loads(snapshot: ClusterSnapshot, topic: str) -> dict[int, float]:
    """Bytes in per second of ``topic`` on each live broker, as the leaders reported it."""
    loads = {n: 0.0 for n, info in snapshot.nodes.items() if info.alive}
    for node, info in snapshot.nodes.items():
        for key, rates in info.load.items():
            name, _, partition = key.rpartition("/")
            row = snapshot.partitions.get((name, int(partition))) if name == topic else None
            if row is not None and row.leader == node:
                loads[node] += figure(rates, BYTES_IN)
    return loads


def balanced(loads: dict[int, float]) -> bool:
    mean = sum(loads.values()) / len(loads)
    return mean > 0 and all(abs(v - mean) <= TOLERANCE * mean for v in loads.values())
