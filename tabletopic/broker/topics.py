"""Topics and their partitions: in memory for the hot path, in the metadata database for restarts.

Every partition is one s3stream stream (stream offsets are Kafka offsets), so a topic is just a
name, a topic id, explicit configs and a list of stream ids indexed by partition number.
Mutations are serialised by one lock and written to the database before the in-memory view
changes, so a crash never leaves a topic that clients saw but the next start does not know.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa
from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Connection, Engine

from tabletopic import database
from tabletopic.broker.topic_config_keys import (
    InvalidTopicConfig,
    TopicConfigExtension,
    validate_topic_configs,
)
from tabletopic.s3stream.streams import StreamNotFound, StreamStore

log = logging.getLogger(__name__)

MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

_meta = sa.MetaData()
topics_table = sa.Table(
    "broker_topics",
    _meta,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("topic_id", sa.String(36), nullable=False, unique=True),
)
partitions_table = sa.Table(
    "broker_partitions",
    _meta,
    sa.Column(
        "topic", sa.String(255), sa.ForeignKey("broker_topics.name", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("partition", sa.Integer, primary_key=True),
    sa.Column("stream_id", sa.BigInteger, nullable=False),
)
topic_configs_table = sa.Table(
    "broker_topic_configs",
    _meta,
    sa.Column(
        "topic", sa.String(255), sa.ForeignKey("broker_topics.name", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
broker_state_table = sa.Table(
    "broker_state",
    _meta,
    sa.Column("key", sa.String(255), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
producer_snapshots_table = sa.Table(
    "broker_producer_snapshots",
    _meta,
    sa.Column("stream_id", sa.BigInteger, primary_key=True),
    sa.Column("end_offset", sa.BigInteger, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
)

MIGRATIONS = [
    database.create_tables(
        topics_table, partitions_table, topic_configs_table, broker_state_table, producer_snapshots_table
    ),
]


class TopicError(Exception):
    """A topic operation refused with a Kafka error code and a message for the client."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    streams: list[int]  # stream id of each partition, indexed by partition number
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def partition_count(self) -> int:
        return len(self.streams)


def check_topic_name(name: str) -> None:
    """Kafka's topic name rules. Raises TopicError(INVALID_TOPIC_EXCEPTION)."""
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME:
        raise TopicError(ErrorCode.invalid_topic_exception, f"topic name longer than {MAX_TOPIC_NAME}")
    if not _LEGAL_NAME.match(name):
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


class TopicRegistry:
    """The broker's topics. Reads are synchronous dict lookups; changes are coroutines."""

    def __init__(
        self,
        engine: Engine,
        store: StreamStore,
        config_extensions: Sequence[TopicConfigExtension] = (),
    ) -> None:
        self._engine = engine
        self._store = store
        self._config_extensions = tuple(config_extensions)
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._lock = asyncio.Lock()
        # Called after every change this registry wrote (cluster mode tells the other brokers).
        self.on_change: list[Callable[[str], Awaitable[None]]] = []

    def set_config_extensions(self, extensions: Sequence[TopicConfigExtension]) -> None:
        self._config_extensions = tuple(extensions)

    async def load(self) -> None:
        """Apply migrations and read every topic."""
        await asyncio.to_thread(database.migrate, self._engine, "broker", MIGRATIONS)
        topics = await asyncio.to_thread(self._read_all)
        self._by_name = {t.name: t for t in topics}
        self._by_id = {t.topic_id: t for t in topics}
        log.info("loaded %d topics", len(topics))

    async def reload(self, names: Collection[str] | None = None) -> None:
        """Read topics again (another broker changed them): every one, or only ``names`` (what a
        cluster NOTIFY names; reading all 10,000 partitions on every broker for each of 100 topics
        created in a row made creation quadratic). A name no longer in the database is dropped."""
        async with self._lock:
            if names is None:
                topics = await asyncio.to_thread(self._read_all)
                self._by_name = {t.name: t for t in topics}
                self._by_id = {t.topic_id: t for t in topics}
                return
            wanted = sorted(set(names))
            found = {t.name: t for t in await asyncio.to_thread(self._read_all, wanted)}
            for name in wanted:
                old = self._by_name.pop(name, None)
                if old is not None:
                    self._by_id.pop(old.topic_id, None)
                topic = found.get(name)
                if topic is not None:
                    self._by_name[name] = topic
                    self._by_id[topic.topic_id] = topic

    def read_partition_keys(self) -> list[tuple[str, int]]:
        """Blocking: every ``(topic, partition)`` in the database (what the controller places)."""
        with self._engine.connect() as conn:
            rows = conn.execute(sa.select(partitions_table.c.topic, partitions_table.c.partition))
            return [(str(r[0]), int(r[1])) for r in rows]

    async def _changed(self, name: str) -> None:
        for hook in self.on_change:
            try:
                await hook(name)
            except Exception:
                log.exception("topic change hook failed for %s", name)

    def _read_all(self, names: Sequence[str] | None = None) -> list[Topic]:
        """Every topic, or those of ``names``, with partitions and configs read from one snapshot.
        In PostgreSQL's default READ COMMITTED each statement sees the commits made before it, so a
        topic created between the first query and the next had partitions of a topic the first
        never saw (the cluster's "reloading topics failed" with a KeyError); REPEATABLE READ reads
        all three tables as of the transaction's first query. SQLite's transactions are snapshots
        already."""
        t, p, c = topics_table, partitions_table, topic_configs_table
        topics_q, partitions_q, configs_q = sa.select(t), sa.select(p), sa.select(c)
        if names is not None:
            topics_q = topics_q.where(t.c.name.in_(names))
            partitions_q = partitions_q.where(p.c.topic.in_(names))
            configs_q = configs_q.where(c.c.topic.in_(names))
        connection = self._engine.connect()
        if self._engine.dialect.name == "postgresql":
            connection = connection.execution_options(isolation_level="REPEATABLE READ")
        with connection as conn, conn.begin():
            topics = {
                row.name: Topic(row.name, uuid.UUID(row.topic_id), []) for row in conn.execute(topics_q)
            }
            for row in conn.execute(partitions_q.order_by(p.c.topic, p.c.partition)):
                topics[row.topic].streams.append(int(row.stream_id))
            for row in conn.execute(configs_q):
                topics[row.topic].configs[row.key] = row.value
        return list(topics.values())

    # --- reads -------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def partition_count(self) -> int:
        return sum(len(t.streams) for t in self._by_name.values())

    # --- changes -----------------------------------------------------------------------------
    async def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
    ) -> Topic:
        """Create a topic with ``partitions`` fresh streams.

        Raises:
            TopicError: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS or
                INVALID_CONFIG.
        """
        check_topic_name(name)
        if partitions < 1:
            raise TopicError(ErrorCode.invalid_partitions, f"partition count {partitions} must be positive")
        if partitions > 100_000:
            raise TopicError(ErrorCode.invalid_partitions, f"partition count {partitions} is too large")
        checked = self._validate_configs(configs or {})
        await self._validate_for_topic(name, checked)
        async with self._lock:
            if name in self._by_name:
                raise TopicError(ErrorCode.topic_already_exists, f"topic {name} already exists")
            if validate_only:
                return Topic(name, uuid.uuid4(), [0] * partitions, checked)
            streams = await self._store.create_streams(partitions)
            topic = Topic(name, uuid.uuid4(), streams, checked)
            try:
                await asyncio.to_thread(self._insert, topic)
            except sa.exc.IntegrityError:
                # Another broker created it a moment ago (two clients auto-creating one topic at
                # once), its notice still on the way: learn that topic and answer as Kafka does.
                for stream_id in streams:
                    await self._store.delete_stream(stream_id)
                raced = True
            else:
                self._by_name[name] = topic
                self._by_id[topic.topic_id] = topic
                raced = False
        if raced:
            await self.reload([name])
            raise TopicError(ErrorCode.topic_already_exists, f"topic {name} already exists")
        log.info("created topic %s with %d partitions", name, partitions)
        await self._changed(name)
        return topic

    def _insert(self, topic: Topic) -> None:
        with self._engine.begin() as conn:
            conn.execute(sa.insert(topics_table).values(name=topic.name, topic_id=str(topic.topic_id)))
            self._insert_partitions(conn, topic.name, 0, topic.streams)
            if topic.configs:
                conn.execute(
                    sa.insert(topic_configs_table),
                    [{"topic": topic.name, "key": k, "value": v} for k, v in topic.configs.items()],
                )

    @staticmethod
    def _insert_partitions(conn: Connection, name: str, first: int, streams: list[int]) -> None:
        conn.execute(
            sa.insert(partitions_table),
            [{"topic": name, "partition": first + i, "stream_id": s} for i, s in enumerate(streams)],
        )

    def _validate_configs(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        try:
            return validate_topic_configs(configs, self._config_extensions)
        except InvalidTopicConfig as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from exc

    async def _validate_for_topic(self, name: str, configs: dict[str, str]) -> None:
        """The extensions' checks that need the topic's name and the node's state."""
        for extension in self._config_extensions:
            if extension.validate_topic is None or not any(k.startswith(extension.prefix) for k in configs):
                continue
            try:
                await asyncio.to_thread(extension.validate_topic, name, dict(configs))
            except ValueError as exc:
                raise TopicError(ErrorCode.invalid_config, str(exc)) from exc

    def _require(self, name: str) -> Topic:
        topic = self._by_name.get(name)
        if topic is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name} does not exist")
        return topic

    async def delete(self, name: str) -> Topic:
        """Delete a topic and its streams. Raises TopicError(UNKNOWN_TOPIC_OR_PARTITION)."""
        async with self._lock:
            topic = self._require(name)
            await asyncio.to_thread(self._delete_rows, name)
            del self._by_name[name]
            self._by_id.pop(topic.topic_id, None)
        for stream_id in topic.streams:
            try:
                await self._store.delete_stream(stream_id)
            except StreamNotFound:
                pass
        log.info("deleted topic %s", name)
        await self._changed(name)
        return topic

    def _delete_rows(self, name: str) -> None:
        with self._engine.begin() as conn:
            for table in (topic_configs_table, partitions_table):
                conn.execute(sa.delete(table).where(table.c.topic == name))
            conn.execute(sa.delete(topics_table).where(topics_table.c.name == name))

    async def add_partitions(self, name: str, total: int, validate_only: bool = False) -> Topic:
        """Grow a topic to ``total`` partitions. Raises TopicError(INVALID_PARTITIONS) when not a
        strict increase."""
        async with self._lock:
            topic = self._require(name)
            # The database's count, not this broker's copy of the topic: in a cluster another
            # broker may have grown it a moment ago, its notice still on the way.
            current = await asyncio.to_thread(self._stored_partition_count, name)
            if total <= current:
                raise TopicError(
                    ErrorCode.invalid_partitions,
                    f"topic {name} has {current} partitions; the new count {total} must be larger",
                )
            if total > 100_000:
                raise TopicError(ErrorCode.invalid_partitions, f"partition count {total} is too large")
            if validate_only:
                return topic
            streams = await self._store.create_streams(total - current)

            def write() -> bool:
                with self._engine.begin() as conn:
                    conn.execute(  # one grower at a time per topic (PostgreSQL; SQLite has one writer)
                        sa.select(topics_table.c.name).where(topics_table.c.name == name).with_for_update()
                    )
                    if self._count_partitions(conn, name) != current:
                        return False
                    self._insert_partitions(conn, name, current, streams)
                    return True

            if not await asyncio.to_thread(write):
                for stream_id in streams:
                    await self._store.delete_stream(stream_id)
                raise TopicError(
                    ErrorCode.invalid_partitions,
                    f"topic {name} was grown by another request meanwhile; ask again with a larger count",
                )
        await self.reload([name])
        await self._changed(name)
        return self._require(name)

    def _stored_partition_count(self, name: str) -> int:
        with self._engine.connect() as conn:
            return self._count_partitions(conn, name)

    @staticmethod
    def _count_partitions(conn: Connection, name: str) -> int:
        p = partitions_table
        return int(conn.execute(sa.select(sa.func.count()).where(p.c.topic == name)).scalar_one())

    async def replace_configs(
        self, name: str, configs: Mapping[str, str], validate_only: bool = False
    ) -> Topic:
        """Set a topic's explicit configs to exactly ``configs`` (AlterConfigs semantics; the
        incremental form computes the full set first). Raises TopicError."""
        checked = self._validate_configs(configs)
        await self._validate_for_topic(name, checked)
        async with self._lock:
            topic = self._require(name)
            if validate_only:
                return topic

            def write() -> None:
                with self._engine.begin() as conn:
                    conn.execute(sa.delete(topic_configs_table).where(topic_configs_table.c.topic == name))
                    if checked:
                        conn.execute(
                            sa.insert(topic_configs_table),
                            [{"topic": name, "key": k, "value": v} for k, v in checked.items()],
                        )

            await asyncio.to_thread(write)
            topic.configs = checked
        await self._changed(name)
        return topic

    # --- broker-wide state kept next to the topics --------------------------------------------
    async def state_value(self, key: str, create: str | None = None) -> str | None:
        """A value of the ``broker_state`` table, inserting ``create`` when absent. Brokers of a
        cluster starting together race to insert the first value (the cluster id): the loser reads
        the winner's."""

        def run() -> str | None:
            select = sa.select(broker_state_table.c.value).where(broker_state_table.c.key == key)
            with self._engine.begin() as conn:
                row = conn.execute(select).first()
                if row is not None:
                    return str(row[0])
                if create is None:
                    return None
                try:
                    with conn.begin_nested():
                        conn.execute(sa.insert(broker_state_table).values(key=key, value=create))
                except sa.exc.IntegrityError:
                    return str(conn.execute(select).scalar_one())
                return create

        return await asyncio.to_thread(run)

    async def state_items(self, prefix: str) -> dict[str, str]:
        """Every ``broker_state`` entry under ``prefix``, prefix stripped."""

        def run() -> dict[str, str]:
            with self._engine.begin() as conn:
                rows = conn.execute(
                    sa.select(broker_state_table).where(broker_state_table.c.key.startswith(prefix))
                )
                return {row.key[len(prefix) :]: row.value for row in rows}

        return await asyncio.to_thread(run)

    async def replace_state_items(self, prefix: str, values: Mapping[str, str]) -> None:
        """Make the entries under ``prefix`` exactly ``values``."""

        def run() -> None:
            with self._engine.begin() as conn:
                conn.execute(sa.delete(broker_state_table).where(broker_state_table.c.key.startswith(prefix)))
                if values:
                    conn.execute(
                        sa.insert(broker_state_table),
                        [{"key": prefix + k, "value": v} for k, v in values.items()],
                    )

        await asyncio.to_thread(run)

    async def allocate_block(self, key: str, size: int) -> int:
        """Reserve ``size`` consecutive numbers of the counter ``key``; return the first."""

        def run() -> int:
            with self._engine.begin() as conn:
                row = conn.execute(
                    sa.select(broker_state_table.c.value).where(broker_state_table.c.key == key)
                ).first()
                first = int(row[0]) if row is not None else 0
                if row is None:
                    conn.execute(sa.insert(broker_state_table).values(key=key, value=str(first + size)))
                else:
                    conn.execute(
                        sa.update(broker_state_table)
                        .where(broker_state_table.c.key == key)
                        .values(value=str(first + size))
                    )
                return first

        return await asyncio.to_thread(run)
