"""Producing to the node with confluent-kafka's serializers, recording every acknowledged position."""

from __future__ import annotations

import importlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.support.kafka_clients import failover_producer
from tests.support.table_node import DeliveryLog, TableNode


def produce(
    node: TableNode,
    topic: str,
    values: Iterable[Any],
    value_serializer: Any = None,
    key: Callable[[int, Any], Any] | None = None,
    key_serializer: Any = None,
    partitions: int = 1,
    headers: Callable[[int], list[tuple[str, bytes]]] | None = None,
    log: DeliveryLog | None = None,
) -> DeliveryLog:
    """Produce ``values`` with acks=all through a ``SerializingProducer``; returns the delivery log.

    Keys default to ``str(i)`` so records spread over partitions; the log maps each acknowledged
    (partition, offset) to the value produced there.
    """
    from confluent_kafka import SerializingProducer
    from confluent_kafka.serialization import StringSerializer

    log = log or DeliveryLog()
    producer = SerializingProducer(
        {
            "bootstrap.servers": node.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "key.serializer": key_serializer or StringSerializer(),
            **({"value.serializer": value_serializer} if value_serializer is not None else {}),
        }
    )
    for i, value in enumerate(values):
        producer.produce(
            topic,
            key=key(i, value) if key else str(i),
            value=value,
            headers=headers(i) if headers else None,
            on_delivery=log.callback(value),
        )
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not log.errors, f"{remaining} undelivered, errors {log.errors[:3]}"
    assert not log.collisions, f"records acknowledged at one offset: {log.collisions[:5]}"
    return log


def compile_proto(source: str, name: str, out_dir: Path) -> ModuleType:
    """Compile ``source`` (a .proto file's text) with grpc_tools.protoc and import the generated
    module; the message classes ProtobufSerializer needs exist only after compilation."""
    out_dir.mkdir(parents=True, exist_ok=True)
    proto = out_dir / f"{name}.proto"
    proto.write_text(source)
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out_dir}", f"--python_out={out_dir}", str(proto)],
        check=True,
        capture_output=True,
    )
    if str(out_dir) not in sys.path:
        sys.path.insert(0, str(out_dir))
    return importlib.import_module(f"{name}_pb2")


def avro_bytes(node: TableNode, topic: str, schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    """``value`` in the registry's wire format (registering ``schema`` under ``<topic>-value``)."""
    import json

    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(node.registry(), json.dumps(schema))
    encoded = serializer(value, SerializationContext(topic, MessageField.VALUE))
    assert encoded is not None
    return bytes(encoded)


def produce_bytes(
    node: TableNode, topic: str, values: Iterable[bytes], log: DeliveryLog | None = None
) -> DeliveryLog:
    """Produce pre-encoded values (good and poison alike) with acks=all, keys ``str(i)``."""
    return produce(node, topic, values, log=log)


class SteadyProducer:
    """An idempotent acks=all confluent-kafka producer writing ``rate`` records a second from a
    thread until stopped: the load the crash, fault and cluster tests keep up through kills,
    restarts and moves (librdkafka retries in-flight records idempotently once a leader answers).

    Record n has the value ``record n`` and the key n (n % ``keys`` for upsert tables, so a key
    always lands in the same partition), in partition key % ``partitions``. :attr:`log` keeps every
    acknowledged (partition, offset) with its n, and every delivery error.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: float = 300.0,
        keys: int | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.topic, self.partitions, self.rate, self.keys = topic, partitions, rate, keys
        self.log = DeliveryLog()
        self.sent = 0
        self._producer = Producer(failover_producer(bootstrap, overrides))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def value(n: int) -> bytes:
        return f"record {n}".encode()

    def acked_values(self) -> set[bytes]:
        """The values of the records acknowledged so far, with or without an offset."""
        numbers = list(self.log.values.values()) + [n for _, n in list(self.log.unplaced)]
        return {self.value(n) for n in numbers}

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            while self.sent < (time.monotonic() - started) * self.rate:
                key = self.sent if self.keys is None else self.sent % self.keys
                self._producer.produce(
                    self.topic,
                    self.value(self.sent),
                    str(key).encode(),
                    partition=key % self.partitions,
                    on_delivery=self.log.callback(self.sent),
                )
                self.sent += 1
            self._producer.poll(0.01)

    def stop(self) -> None:
        """Stop writing; records still in flight are delivered by :meth:`finish`."""
        self._stop.set()
        self._thread.join(30)

    def finish(self, timeout: float = 120) -> DeliveryLog:
        """Wait until every record sent is acknowledged (failing the test otherwise)."""
        remaining = self._producer.flush(timeout)
        assert remaining == 0, f"{remaining} records never acknowledged"
        assert not self.log.collisions, f"records acknowledged at one offset: {self.log.collisions[:5]}"
        return self.log

    def __enter__(self) -> SteadyProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.finish()
