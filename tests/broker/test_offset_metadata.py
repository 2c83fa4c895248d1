"""An offset's commit metadata is stored byte-exact, NUL and any Unicode included, on SQLite and on
PostgreSQL, as Kafka keeps it. PostgreSQL's text columns refuse a NUL character: the commit failed
there and the client got COORDINATOR_NOT_AVAILABLE. Real client: kafka-python (confluent-kafka
passes metadata as a C string, which cannot hold a NUL)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.broker.groups.store import MIGRATIONS, CommittedOffset, GroupStore
from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess

METADATA = "a\x00b\x00 ü € 🎉 \u2028 end"


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_commit_metadata_with_a_nul_survives_a_restart_byte_exact(
    request: pytest.FixtureRequest, tmp_path: Path, engine: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    overrides = {} if engine == "sqlite" else {"metadata.url": request.getfixturevalue("postgres_url")}
    broker = BrokerProcess(tmp_path / "broker", overrides=overrides).start()
    try:
        topic, group = f"meta-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        clients.create_topic(broker.bootstrap, topic, 1)
        tp = TopicPartition(topic, 0)

        def consumer() -> KafkaConsumer:
            return KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)

        first = consumer()
        first.commit({tp: OffsetAndMetadata(5, METADATA, -1)})
        assert first.committed(tp, metadata=True) == OffsetAndMetadata(5, METADATA, -1)
        first.close()
        broker.stop()
        broker.start()
        second = consumer()
        stored = second.committed(tp, metadata=True)
        second.close()
        assert stored is not None and (stored.offset, stored.metadata) == (5, METADATA)
    finally:
        broker.stop()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_metadata_of_the_text_column_is_carried_over_by_the_migration(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """A database of the first schema (metadata in a text column) keeps its offsets' metadata."""
    url = database.default_url(tmp_path) if backend == "sqlite" else request.getfixturevalue("postgres_url")
    engine = database.create_engine(url)
    try:
        database.migrate(engine, "groups", MIGRATIONS[:1])
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE group_offsets ADD COLUMN metadata TEXT")
            conn.execute(
                sa.text(
                    'INSERT INTO group_offsets (group_id, topic, "partition", committed_offset, '
                    "leader_epoch, metadata, commit_ms) "
                    "VALUES ('g', 't', 0, 7, -1, 'old ü', 1), ('g', 't', 1, 8, -1, NULL, 1)"
                )
            )
        store = GroupStore(engine)
        store.migrate()
        offsets = store.load().offsets
        assert offsets["g"][("t", 0)].metadata == "old ü" and offsets["g"][("t", 1)].metadata is None
        store.commit_offsets("g", {("t", 2): CommittedOffset(9, -1, METADATA, 2)})
        assert store.load().offsets["g"][("t", 2)].metadata == METADATA
    finally:
        engine.dispose()
