"""CPU per Fetch of a consumer whose fetch session holds many partitions that are mostly idle.

    .venv/bin/python bench/fetch_session_bench.py [--partitions 1000] [--session 170] [--fetches 2000]

The shape a consumer group of a 1,000-partition topic gives each broker of a three-broker
cluster: every member's fetch session names ~170 partitions of that broker, records arrive on one
of them at a time, and each incremental Fetch long-polls until some partition has data. The
broker's handler is called in process over the s3stream engine on a local WAL and object directory
(or, with ``--store memory``, the in-memory stream store), with no socket and no client, so
what is measured is the handler's own work per Fetch: resolving the session's partitions, reading
them, waiting on them and choosing what the answer lists.

Two cases, each printed as microseconds of CPU per Fetch (process time, which neighbours on a
shared machine distort less than wall time). Each request reaches the handler as the server parses
it from a socket; the appends' own cost and the client's (building and encoding the requests) are
measured alone and taken off:

- ``wake``: the Fetch waits (max_wait 500 ms), one append to one partition of the session wakes it;
- ``ready``: a partition already has data when the Fetch arrives (no wait).

Also printed: the same two cases with a session of one partition, the floor a Fetch costs whatever
its session holds, and the ratio of the two; and the same partitions fetched without a session, as
librdkafka fetches (it never opens one: each Fetch names every partition, each answer lists every
one), which is what a confluent-kafka consumer group costs a broker; and the encoder alone on an
answer of that many partitions with nothing to say, timed apart from the rest (its least of five).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic import database  # noqa: E402
from tabletopic.broker.context import RequestContext  # noqa: E402
from tabletopic.broker.handlers import HANDLERS  # noqa: E402
from tabletopic.broker.listeners import Endpoint  # noqa: E402
from tabletopic.broker.protocol.codec import parse_request  # noqa: E402
from tabletopic.broker.protocol.fetch_encoder import (  # noqa: E402
    FetchedPartition,
    FetchedTopic,
    encode_fetch_response,
)
from tabletopic.broker.service import BrokerService  # noqa: E402
from tabletopic.config import Config  # noqa: E402
from tabletopic.s3stream.config import StoreSettings  # noqa: E402
from tabletopic.s3stream.memory import MemoryStreamStore  # noqa: E402
from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, open_object_store  # noqa: E402
from tabletopic.s3stream.store import S3StreamStore  # noqa: E402
from tabletopic.s3stream.streams import StreamStore  # noqa: E402
from tests.support.kafka_requests import make_batch, session_fetch_request  # noqa: E402
from tests.support.raw_kafka_client import encode_request  # noqa: E402

VERSION = 12  # names topics (v13+ names ids); librdkafka 2.x sends 11-16
FETCH = 1
BATCH = make_batch([b"x" * 100])


def fetch_request(session_id: int, epoch: int, offsets: dict[int, int], max_wait_ms: int) -> Any:
    return session_fetch_request(
        "many", offsets, session=(session_id, epoch), max_wait=max_wait_ms, max_bytes=50 << 20
    )


class Session:
    """One consumer's Fetches of some partitions, starting at ``ends``. ``incremental``: as the
    Java client drives a fetch session (KIP-227), a full fetch, then incremental ones naming only
    the partitions whose position moved. Otherwise as librdkafka fetches, which never opens a
    session: every Fetch (session id 0, epoch -1) names every partition and the answer lists every
    one."""

    def __init__(self, broker: BrokerService, ends: dict[int, int], incremental: bool = True) -> None:
        self.broker = broker
        self.partitions = list(ends)
        self.incremental = incremental
        self.session_id = 0
        self.epoch = 0
        self.moved: dict[int, int] = {}  # named by the next incremental Fetch
        self.read: dict[int, int] = {}  # what the Fetch in progress returns
        # Each partition's end: a case starts caught up with what the cases before it appended.
        self.positions = dict(ends)
        self.consumed = dict(ends)  # what the Fetches so far returned

    def appended(self, partition: int) -> None:
        self.positions[partition] += 1
        self.read[partition] = self.positions[partition]

    def frame(self, max_wait_ms: int) -> bytes:
        """The next Fetch as the client sends it: built and encoded here, the client's cost, which
        the bench measures apart and takes off."""
        if self.incremental:
            named = dict(self.positions) if self.epoch == 0 else self.moved
            request = fetch_request(self.session_id, self.epoch, named, max_wait_ms)
        else:
            request = fetch_request(0, -1, self.consumed, max_wait_ms)
        return encode_request(request, 1)[4:]

    async def fetch(self, max_wait_ms: int) -> None:
        """Parse the next Fetch as the server does and answer it."""
        request = parse_request(self.frame(max_wait_ms))
        ctx = RequestContext(FETCH, VERSION, 1, "bench", "127.0.0.1", 1)
        await HANDLERS[FETCH](self.broker, ctx, request.body)
        # The answer is already encoded; the consumer's positions follow from what was appended.
        if not self.incremental:
            self.consumed = dict(self.positions)
            return
        if self.epoch == 0:
            self.session_id = next(reversed(self.broker.fetch_sessions._sessions))
        self.epoch += 1
        self.moved, self.read = self.read, {}


def _store(kind: str, tmp: Path) -> StreamStore:
    if kind == "memory":
        return MemoryStreamStore()
    # The engine as a node runs it on defaults: local WAL, objects in a local directory.
    settings = StoreSettings(wal_mode="local", wal_dir=tmp / "wal")
    objects = open_object_store(LocalObjectStoreSpec(root=str(tmp / "objects")))
    return S3StreamStore(settings, database.create_engine(database.default_url(tmp / "store")), objects)


async def _run(partitions: int, session_size: int, fetches: int, kind: str, tmp: Path) -> dict[str, float]:
    config = Config({"data.dir": str(tmp), "log.retention.check.interval.ms": "3600000"})
    engine = database.create_engine(database.default_url(tmp))
    store = _store(kind, tmp)
    await store.start()
    broker = BrokerService(config, engine, store)
    broker.advertised = {"PLAINTEXT": Endpoint("PLAINTEXT", "127.0.0.1", 9092)}
    await broker.start()
    try:
        topic = await broker.topics.create("many", partitions, {})
        figures: dict[str, float] = {}

        async def append(session: Session, i: int) -> None:
            p = session.partitions[i % len(session.partitions)]
            await store.append(topic.streams[p], BATCH, 1)
            session.appended(p)

        for size, incremental in ((session_size, True), (1, True), (session_size, False)):
            ends = {p: store.stream_info(topic.streams[p]).end_offset for p in range(size)}
            session = Session(broker, ends, incremental)
            mode = "" if incremental else "sessionless/"
            await session.fetch(0)  # the first, full Fetch (it opens an incremental case's session)
            started = time.process_time()
            for i in range(fetches):
                await append(session, i)
            appends = time.process_time() - started
            await session.fetch(0)  # drain what those appends left
            # A Fetch of each case names one moved partition (incremental) or all (sessionless).
            moved, session.moved = session.moved, dict(list(session.positions.items())[:1])
            started = time.process_time()
            for _ in range(fetches):
                session.frame(500)
            session.moved = moved
            # The appends' and the client's own CPU, taken off each case below.
            others = appends + time.process_time() - started
            started = time.process_time()
            for i in range(fetches):
                await append(session, i)
                await session.fetch(500)
            figures[f"{mode}ready/{size}"] = (time.process_time() - started - others) / fetches * 1e6
            started = time.process_time()
            for i in range(fetches):
                waiting = asyncio.ensure_future(session.fetch(500))
                for _ in range(3):
                    await asyncio.sleep(0)  # let the Fetch reach its wait
                await append(session, i)
                await waiting
            figures[f"{mode}wake/{size}"] = (time.process_time() - started - others) / fetches * 1e6
        return figures
    finally:
        await broker.stop()
        await store.close()
        engine.dispose()


def encode_quiet_answer(partitions: int) -> float:
    """µs to encode a v12 answer listing ``partitions`` partitions with nothing to say (what most of
    a sessionless Fetch's answer is), the least of five timings of 2,000: the encoder alone, apart
    from the rest of the handler and the machine's noise."""
    quiet = [FetchedPartition(i, 0, 1000 + i, 0) for i in range(partitions)]
    topics = [FetchedTopic("many", uuid.UUID(int=1), quiet)]
    runs = timeit.repeat(lambda: encode_fetch_response(1, VERSION, 0, topics), number=2000, repeat=5)
    return min(runs) / 2000 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the topic")
    parser.add_argument("--session", type=int, default=170, help="partitions in the fetch session")
    parser.add_argument("--fetches", type=int, default=2000, help="fetches per case")
    parser.add_argument(
        "--store",
        choices=["memory", "engine"],
        default="engine",
        help="the in-memory store or the s3stream engine",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = asyncio.run(_run(args.partitions, args.session, args.fetches, args.store, Path(tmp)))
    print(
        f"{args.store} store, topic of {args.partitions} partitions, {args.fetches} fetches a case:"
        " CPU µs per Fetch"
    )
    for case in ("ready", "wake"):
        many, one = figures[f"{case}/{args.session}"], figures[f"{case}/1"]
        full = figures[f"sessionless/{case}/{args.session}"]
        print(
            f"  {case:5}  session of {args.session}: {many:8.1f} µs   of 1: {one:7.1f} µs"
            f"   ratio {many / one:5.1f}x   {args.session} partitions without a session: {full:8.1f} µs"
        )
    print(f"  encoding alone, an answer of {args.session} partitions with nothing to say: "
          f"{encode_quiet_answer(args.session):.1f} µs")  # fmt: skip


if __name__ == "__main__":
    main()
