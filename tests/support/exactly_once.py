"""An exactly-once pipeline, and the checks its user would make: a transactional writer, a group that
copies its records to another topic in transactions (consume-transform-produce), and the verdict
read back from both topics at the end.

- :class:`TransactionalWriter` writes 1 to 6 records to random partitions per transaction and commits
  it, or aborts one in four on purpose; it remembers what its producer said became of each.
- :class:`CopyingGroup` is a group of two read_committed members, each with its own transactional
  producer, copying every record and committing its consumed offsets in the same transaction
  (``send_offsets_to_transaction``), as Kafka Streams or a Flink sink would. A transaction that fails
  is aborted and the member goes back to the group's committed offsets.
- :func:`judge` waits for every open transaction to end and the group to catch up, then reads both
  topics read_committed and lists every way exactly-once was broken.

The cluster test and ``bench/txn_fault_run.py`` run it through faults.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.support.group_member import committed_offsets
from tests.support.kafka_clients import transactional_producer
from tests.support.waiting import wait_until_sync as wait_until

TRANSACTION_TIMEOUT_S = 60  # transactional_producer's transaction.timeout.ms
QUIET = {"log_level": 2}  # brokers killed on purpose: their refused connections are no news

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
FAILED_COMMIT = "aborted after a failed commit"
OUTCOMES = (COMMITTED, ABORTED, FAILED_COMMIT, UNKNOWN)


def _error(exc: KafkaException) -> KafkaError:
    error = exc.args[0]
    assert isinstance(error, KafkaError), exc
    return error


def _ready_producer(bootstrap: str, transactional_id: str) -> Producer:
    """A transactional producer with ``init_transactions`` done, which also fences any earlier
    producer of the id and ends what it left open; asked again while no coordinator answers."""
    # EXACTLY_ONCE_CLIENT_DEBUG=eos,cgrp: librdkafka's own account of each transactional call (to
    # stderr), for telling what a call that hung was waiting for.
    debug = os.environ.get("EXACTLY_ONCE_CLIENT_DEBUG")
    logging = {"debug": debug, "log_level": 7} if debug else QUIET
    while True:
        producer = Producer({**transactional_producer(bootstrap, transactional_id), **logging})
        try:
            producer.init_transactions(TRANSACTION_TIMEOUT_S)
            return producer
        except KafkaException as exc:
            print(f"         {transactional_id}: init_transactions: {_error(exc)}", flush=True)
            time.sleep(1)  # a pause before asking again, as an application would


def _commit(producer: Producer) -> None:
    """``commit_transaction``, asked again while the error is retriable (a timeout, a coordinator
    moving), as librdkafka's documentation says to."""
    while True:
        try:
            producer.commit_transaction(TRANSACTION_TIMEOUT_S)
            return
        except KafkaException as exc:
            if not _error(exc).retriable():
                raise


class TransactionalWriter:
    """Transactions of 1 to 6 records at ``rate`` a second; ``outcomes`` pairs each transaction's
    values with what the producer said became of it."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float, seed: float) -> None:
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.rng = random.Random(seed)
        self.outcomes: list[tuple[str, list[bytes]]] = []
        self.restarts = 0
        self.transactional_id = f"writer-{uuid.uuid4().hex[:6]}"
        self._stop = threading.Event()
        self._producer = _ready_producer(bootstrap, self.transactional_id)
        self._thread = threading.Thread(target=self._run, daemon=True, name="transactional-writer")
        self._thread.start()

    def _run(self) -> None:
        started, n = time.monotonic(), 0
        while not self._stop.is_set():
            if n >= (time.monotonic() - started) * self.rate:
                time.sleep(0.005)  # the writer's rate: ahead of it, wait for the clock
                continue
            values = [f"w{n}-{i}".encode() for i in range(self.rng.randint(1, 6))]
            self.outcomes.append((self._transaction(values, commit=self.rng.random() >= 0.25), values))
            n += 1

    def _transaction(self, values: list[bytes], commit: bool) -> str:
        try:
            self._producer.begin_transaction()
            for value in values:
                self._producer.produce(self.topic, value, partition=self.rng.randrange(self.partitions))
            if not commit:
                self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
                return ABORTED
            _commit(self._producer)
            return COMMITTED
        except KafkaException as exc:
            error = _error(exc)
            if error.txn_requires_abort():
                try:
                    self._producer.abort_transaction(TRANSACTION_TIMEOUT_S)
                    return FAILED_COMMIT if commit else ABORTED
                except KafkaException as again:
                    error = _error(again)
            print(f"         writer: {error}; a new producer takes over", flush=True)
            self._producer = _ready_producer(self.bootstrap, self.transactional_id)
            self.restarts += 1
            return UNKNOWN

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(3 * TRANSACTION_TIMEOUT_S)


@dataclass
class CopyingGroup:
    """Two members of one group, each copying ``source``'s records to ``sink`` exactly once."""

    bootstrap: str
    source: str
    sink: str
    partitions: int
    group_id: str = field(default_factory=lambda: f"copy-{uuid.uuid4().hex[:6]}")
    committed: int = 0  # transactions
    aborted: int = 0
    hung: list[str] = field(default_factory=list)  # members still in a client call when stopped
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _calls: dict[str, tuple[str, float]] = field(default_factory=dict)  # member -> (call, since)

    def start(self) -> CopyingGroup:
        for i in range(2):
            thread = threading.Thread(target=self._member, args=(i,), daemon=True, name=f"copier-{i}")
            thread.start()
            self._threads.append(thread)
        return self

    def _member(self, index: int) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group_id,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,
                # A member stuck in a client call (see stop) leaves the group after 20 s, and the
                # other member takes its partitions, as a production pipeline would configure it.
                "session.timeout.ms": 10_000,
                "max.poll.interval.ms": 20_000,
                **QUIET,
            }
        )
        consumer.subscribe([self.source])
        transactional_id = f"{self.group_id}-{index}"
        producer = _ready_producer(self.bootstrap, transactional_id)
        try:
            while not self._stop.is_set():
                batch = [m for m in consumer.consume(200, 0.5) if m.error() is None]
                if not batch:
                    continue
                try:
                    self._copy(consumer, producer, batch)
                    self.committed += 1
                except KafkaException as exc:
                    self.aborted += 1
                    try:
                        if not _error(exc).txn_requires_abort():
                            raise
                        producer.abort_transaction(TRANSACTION_TIMEOUT_S)
                    except KafkaException as again:
                        print(f"         {transactional_id}: {_error(again)}; a new producer", flush=True)
                        producer = _ready_producer(self.bootstrap, transactional_id)
                    _rewind(consumer)
        finally:
            consumer.close()

    def _copy(self, consumer: Consumer, producer: Producer, batch: list[Any]) -> None:
        member = threading.current_thread().name
        producer.begin_transaction()
        for message in batch:
            producer.produce(self.sink, b"p-" + message.value(), partition=message.partition())
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        try:
            self._calls[member] = ("send_offsets_to_transaction", time.monotonic())
            producer.send_offsets_to_transaction(
                positions, consumer.consumer_group_metadata(), TRANSACTION_TIMEOUT_S
            )
            self._calls[member] = ("commit_transaction", time.monotonic())
            _commit(producer)
        finally:
            self._calls.pop(member, None)

    def stop(self) -> None:
        """Stop the members; one still inside a client call past that call's timeout is named in
        :attr:`hung` and left behind (a daemon thread). librdkafka's
        ``send_offsets_to_transaction`` can block past its timeout while the group coordinator it
        cached has left the cluster (confluentinc/librdkafka#5456 and #5511): the broker answers
        nothing wrong, the call is never sent."""
        self._stop.set()
        deadline = time.monotonic() + TRANSACTION_TIMEOUT_S + 15
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                call, since = self._calls.get(thread.name, ("a client call", time.monotonic()))
                self.hung.append(f"{thread.name} in {call} for {time.monotonic() - since:.0f} s")


def _rewind(consumer: Consumer) -> None:
    """Back to the group's committed offsets, so the aborted transaction's records are read again.
    Asked again until the group's coordinator answers: a member that went on from its position
    instead would commit past records it never copied."""
    while True:
        try:
            for tp in consumer.committed(consumer.assignment(), 30):
                offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            return
        except KafkaException as exc:  # the group's coordinator moving
            print(f"         rewind: {_error(exc)}; asking again", flush=True)
            time.sleep(0.5)  # a pause before asking again, as an application would


def latest_offsets(admin: AdminClient, topic: str, partitions: int, level: IsolationLevel) -> dict[int, int]:
    """Each partition's latest offset: the high watermark, or read_committed the last stable offset."""
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    answers = admin.list_offsets(asked, isolation_level=level, request_timeout=30)
    return {tp.partition: future.result(60).offset for tp, future in answers.items()}


def read_committed(bootstrap: str, topic: str, partitions: int) -> Counter[bytes]:
    """Every value a read_committed reader sees, reading until nothing came for five seconds."""
    return Counter(value for value, _ in _read(bootstrap, topic, partitions, "read_committed"))


def _read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[tuple[bytes, str]]:
    """Each record's value and ``partition@offset``, reading until nothing came for five seconds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-back-{uuid.uuid4().hex[:6]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    records: list[tuple[bytes, str]] = []
    quiet_since = time.monotonic()
    try:
        while time.monotonic() - quiet_since < 5:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    records.append((message.value() or b"", f"{message.partition()}@{message.offset()}"))
                    quiet_since = time.monotonic()
    finally:
        consumer.close()
    return records


@dataclass
class Verdict:
    """What a user of the pipeline would find; :attr:`clean` when exactly-once held."""

    outcomes: Counter[str]
    visible: int  # input records a read_committed reader sees
    copied: int  # output records
    violations: Counter[str]
    examples: list[str]
    hanging: str  # "none", or which last stable offsets stopped short
    group: str  # when the copying group caught up, or that it never did
    client_hangs: list[str]  # copiers left inside a client call (see CopyingGroup.stop)

    @property
    def clean(self) -> bool:
        return not self.violations and self.hanging == "none" and self.group.startswith("caught")

    def lines(self) -> list[str]:
        return [
            "writer transactions: " + ", ".join(f"{self.outcomes[o]} {o}" for o in OUTCOMES),
            f"input records visible {self.visible}, output records {self.copied}",
            f"violations: {dict(self.violations) or 'none'}",
            *(f"  {example}" for example in self.examples),
            f"hanging transactions: {self.hanging}",
            f"copying group: {self.group}",
            f"copiers stuck in a client call past its timeout: {self.client_hangs or 'none'}",
        ]


def judge(writer: TransactionalWriter, group: CopyingGroup, since: float) -> Verdict:
    """Wait for every transaction to end and ``group`` to commit the end of its source (``since``:
    the monotonic time its catch-up is counted from), stop ``group``, and read both topics back."""
    admin = AdminClient({"bootstrap.servers": group.bootstrap, **QUIET})
    topics = (group.source, group.sink)

    def offsets(level: IsolationLevel) -> list[dict[int, int]]:
        return [latest_offsets(admin, t, group.partitions, level) for t in topics]

    try:  # an open transaction ends (commit, abort or timeout) within the transaction timeout
        wait_until(
            lambda: offsets(IsolationLevel.READ_COMMITTED) == offsets(IsolationLevel.READ_UNCOMMITTED),
            timeout=TRANSACTION_TIMEOUT_S + 30,
            interval=1,
        )
        hanging = "none"
    except TimeoutError:
        stable, high = offsets(IsolationLevel.READ_COMMITTED), offsets(IsolationLevel.READ_UNCOMMITTED)
        hanging = f"last stable offsets {stable} short of the high watermarks {high}"
    try:
        wait_until(lambda: _caught_up(group, admin), timeout=120, interval=1)
        caught = f"caught up and committed {time.monotonic() - since:.1f} s after the last fault"
    except TimeoutError:
        caught = "never caught up within 120 s"
    group.stop()
    seen_in = read_committed(group.bootstrap, group.source, group.partitions)
    seen_out = read_committed(group.bootstrap, group.sink, group.partitions)
    violations, examples = _violations(writer.outcomes, seen_in, seen_out)
    missing = {b"p-" + v for v in seen_in} - seen_out.keys()
    if missing:  # written but hidden (an abort marker, a stuck transaction), or never written?
        logged = {
            v: where for v, where in _read(group.bootstrap, group.sink, group.partitions, "read_uncommitted")
        }
        hidden = sorted(f"{v!r} at {logged[v]}" for v in missing if v in logged)
        examples.append(
            f"of {len(missing)} copies missing, {len(hidden)} are in the log uncommitted: {hidden[:8]}"
        )
    return Verdict(
        Counter(outcome for outcome, _ in writer.outcomes),
        sum(seen_in.values()),
        sum(seen_out.values()),
        violations,
        examples,
        hanging,
        caught,
        group.hung,
    )


def _caught_up(group: CopyingGroup, admin: AdminClient) -> bool:
    partitions = range(group.partitions)
    committed = committed_offsets(group.bootstrap, group.group_id, group.source, partitions, **QUIET)
    ends = latest_offsets(admin, group.source, group.partitions, IsolationLevel.READ_COMMITTED)
    return all(offset >= ends[p] for p, offset in committed.items())


def _violations(
    outcomes: list[tuple[str, list[bytes]]], seen_in: Counter[bytes], seen_out: Counter[bytes]
) -> tuple[Counter[str], list[str]]:
    """Every way the read-back breaks exactly-once, counted by kind, with the first 20 examples."""
    violations: Counter[str] = Counter()
    examples: list[str] = []

    def found(kind: str, example: str) -> None:
        violations[kind] += 1
        if len(examples) < 20:
            examples.append(f"{kind}: {example}")

    written: set[bytes] = set()
    for outcome, values in outcomes:
        written.update(values)
        counts = [seen_in[v] for v in values]
        if outcome == COMMITTED and counts != [1] * len(values):
            found("committed transaction not visible exactly once", f"{values} seen {counts}")
        elif outcome in (ABORTED, FAILED_COMMIT) and any(counts):
            found(f"{outcome} transaction visible", f"{values} seen {counts}")
        elif outcome == UNKNOWN and counts not in ([0] * len(values), [1] * len(values)):
            found("transaction of unknown outcome visible in part", f"{values} seen {counts}")
    for value in seen_in.keys() - written:
        found("input record nobody wrote", repr(value))
    for value, count in seen_in.items():
        if seen_out[b"p-" + value] != count:
            found("input record not copied exactly once", f"{value!r} copied {seen_out[b'p-' + value]}x")
    for value in seen_out.keys() - {b"p-" + v for v in seen_in}:
        found("output record from no visible input", repr(value))
    return violations, examples
