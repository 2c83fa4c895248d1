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
shared machine distort less than wall time) with the append's own cost measured alone and taken
off:

- ``wake``: the Fetch waits (max_wait 500 ms), one append to one partition of the session wakes it;
- ``ready``: a partition already has data when the Fetch arrives (no wait).

Also printed: the same two cases with a session of one partition, the floor a Fetch costs whatever
its session holds, and the ratio of the two.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tabletopic import database  # noqa: E402
from tabletopic.broker.context import RequestContext  # noqa: E402
from tabletopic.broker.handlers import HANDLERS  # noqa: E402
from tabletopic.broker.listeners import Endpoint  # noqa: E402
from tabletopic.broker.service import BrokerService  # noqa: E402
from tabletopic.config import Config  # noqa: E402
from tabletopic.s3stream.config import StoreSettings  # noqa: E402
from tabletopic.s3stream.memory import MemoryStreamStore  # noqa: E402
from tabletopic.s3stream.objectstore import LocalObjectStoreSpec, open_object_store  # noqa: E402
from tabletopic.s3stream.store import S3StreamStore  # noqa: E402
from tabletopic.s3stream.streams import StreamStore  # noqa: E402
from tests.support.kafka_requests import make_batch, session_fetch_request  # noqa: E402

VERSION = 12  # names topics (v13+ names ids); librdkafka 2.x sends 11-16
FETCH = 1
BATCH = make_batch([b"x" * 100])


def fetch_request(session_id: int, epoch: int, offsets: dict[int, int], max_wait_ms: int) -> Any:
    return session_fetch_request(
        "many", offsets, session=(session_id, epoch), max_wait=max_wait_ms, max_bytes=50 << 20
    )


class Session:
    """One consumer's fetch session over ``partitions``, as librdkafka drives it: a full fetch,
    then incremental ones naming only the partitions whose position moved."""

    def __init__(self, broker: BrokerService, partitions: list[int]) -> None:
        self.broker = broker
        self.partitions = partitions
        self.session_id = 0
        self.epoch = 0
        self.moved: dict[int, int] = {}  # named by the next incremental Fetch
        self.read: dict[int, int] = {}  # what the Fetch in progress returns
        self.positions = dict.fromkeys(partitions, 0)

    def appended(self, partition: int) -> None:
        self.positions[partition] += 1
        self.read[partition] = self.positions[partition]

    async def fetch(self, max_wait_ms: int) -> None:
        handler = HANDLERS[FETCH]
        named = dict(self.positions) if self.epoch == 0 else self.moved
        req = fetch_request(self.session_id, self.epoch, named, max_wait_ms)
        ctx = RequestContext(FETCH, VERSION, 1, "bench", "127.0.0.1", 1)
        await handler(self.broker, ctx, req)
        # The answer is already encoded; the consumer's positions follow from what was appended.
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

        for size in (session_size, 1):
            session = Session(broker, list(range(size)))
            await session.fetch(0)  # the full fetch that opens the session
            started = time.process_time()
            for i in range(fetches):
                await append(session, i)
            appends = time.process_time() - started
            await session.fetch(0)  # drain what those appends left
            started = time.process_time()
            for i in range(fetches):
                await append(session, i)
                await session.fetch(500)
            figures[f"ready/{size}"] = (time.process_time() - started - appends) / fetches * 1e6
            started = time.process_time()
            for i in range(fetches):
                waiting = asyncio.ensure_future(session.fetch(500))
                for _ in range(3):
                    await asyncio.sleep(0)  # let the Fetch reach its wait
                await append(session, i)
                await waiting
            figures[f"wake/{size}"] = (time.process_time() - started - appends) / fetches * 1e6
        return figures
    finally:
        await broker.stop()
        await store.close()
        engine.dispose()


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
        print(
            f"  {case:5}  session of {args.session}: {many:8.1f} µs   of 1: {one:7.1f} µs"
            f"   ratio {many / one:5.1f}x"
        )


if __name__ == "__main__":
    main()
