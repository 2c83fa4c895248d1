"""Upsert and CDC tables held to a model: whatever mix of inserts, updates, tombstones and CDC
operations (I/U/D) reaches the table, in one commit cycle or over several, across partitions and with
either decoder, the table is exactly the latest row of every key and the offsets are the log's end.

The coordinator runs for real (S3Stream store, pyiceberg SQL catalog, the ingest task in-process);
only the schema registry is an in-memory fake. Spark's runner is held to the same bug in
``test_upsert_spark``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog

from tabletopic.records.encoder import Record, build_batch
from tabletopic.s3stream.store import S3StreamStore
from tabletopic.table.commit import committed_state
from tabletopic.table.coordinator import CoordinatorContext, PipelineState, TopicPipeline
from tabletopic.table.ports import PartitionView, TopicView
from tests.support.schemas import MemoryLookup, wire
from tests.support.table_coordinator import Directory, start_coordinator_parts

pytestmark = pytest.mark.slow

VALUE_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "op": {"type": "string"}},
    "required": ["id", "name", "op"],
}
_topics = itertools.count()
_clock = itertools.count(1_700_000_000_000)


@dataclass(repr=False)  # a failing example prints its scenario, not the node's insides
class Node:
    store: S3StreamStore
    catalog: SqlCatalog
    directory: Directory
    ctx: CoordinatorContext
    schema_id: int

    async def add_topic(self, partitions: int, **configs: str) -> TopicView:
        name = f"t{next(_topics)}"
        views = [PartitionView(p, await self.store.create_stream()) for p in range(partitions)]
        base = {
            "automq.table.topic.enable": "true",
            "automq.table.topic.namespace": "kafka",
            "automq.table.topic.convert.value.type": "by_schema_id",
            "automq.table.topic.transform.value.type": "flatten",
            "automq.table.topic.id.columns": "[id]",
        }
        view = TopicView(name, f"id-{name}", {**base, **configs}, tuple(views))
        self.directory.topics[name] = view
        return view

    async def produce(
        self, view: TopicView, partition: int, records: list[tuple[int, dict[str, Any] | None]]
    ) -> None:
        """One stored batch of ``(key, value)`` records, a tombstone where the value is None. Each
        record gets a later timestamp than any before it, so log order is the order the upsert
        commit ranks changes by (timestamp, partition, offset)."""
        batch = build_batch(
            [
                Record(
                    str(key).encode(),
                    None if value is None else wire(self.schema_id, json.dumps(value).encode()),
                    timestamp=next(_clock),
                )
                for key, value in records
            ]
        )
        await self.store.append(view.partitions[partition].stream_id, batch, len(records))

    def rows(self, view: TopicView) -> dict[int, str]:
        data = self.catalog.load_table(("kafka", view.name)).scan().to_arrow()
        ids = data.column("id").to_pylist()
        assert len(ids) == len(set(ids)), f"two rows for one key: {sorted(ids)}"
        return dict(zip(ids, data.column("name").to_pylist(), strict=True))


@pytest.fixture
async def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Node]:
    from tabletopic.schema_registry import client

    lookup = MemoryLookup()
    schema_id = lookup.register("values", "JSON", VALUE_SCHEMA)
    monkeypatch.setattr(client, "HttpSchemaLookup", lambda _url: lookup)
    parts = await start_coordinator_parts(tmp_path, "http://registry.invalid")
    yield Node(parts.store, parts.catalog, parts.directory, parts.ctx, schema_id)
    await parts.close()


@pytest.mark.parametrize("native", [True, False])
async def test_an_update_and_a_tombstone_in_one_cycle_commit_on_an_upsert_table(
    node: Node, native: bool
) -> None:
    # Issue 30: after 1,000 rows, key 7 updated and key 8 deleted in one go put the table topic in
    # FAILED ("column name is string in one schema version and large_string in another"): the
    # tombstone's rows were cast to the table's Arrow types, the update's were not.
    node.ctx = CoordinatorContext(**{**node.ctx.__dict__, "native_decode": native})
    view = await node.add_topic(2, **{"automq.table.topic.upsert.enable": "true"})
    for partition in range(2):
        await node.produce(
            view, partition, [(i, {"id": i, "name": f"n{i}", "op": "I"}) for i in range(partition, 1000, 2)]
        )
    pipeline = TopicPipeline(node.ctx, view.name)
    assert await pipeline.run_cycle(), pipeline.status.last_error
    # Updates in both partitions, the tombstone beside one of them (the 100 updates and 2
    # tombstones): a partition's rows with a delete were cast, the other's were not.
    await node.produce(view, 1, [(7, {"id": 7, "name": "seven", "op": "U"})])
    await node.produce(view, 0, [(6, {"id": 6, "name": "six", "op": "U"}), (8, None)])
    assert await pipeline.run_cycle(), pipeline.status.last_error
    assert pipeline.status.state is PipelineState.RUNNING
    expected = {i: f"n{i}" for i in range(1000) if i != 8} | {6: "six", 7: "seven"}
    assert node.rows(view) == expected
    assert committed_state(node.catalog.load_table(("kafka", view.name))).offsets == {0: 502, 1: 501}


async def test_a_first_cycle_with_only_a_tombstone_in_one_partition_creates_the_table_from_the_values(
    node: Node,
) -> None:
    # Before the table exists a tombstone's id column can only be typed as its key ("3": a string);
    # it conflicted with the values' integer id and the first commit failed.
    view = await node.add_topic(2, **{"automq.table.topic.upsert.enable": "true"})
    await node.produce(view, 0, [(2, {"id": 2, "name": "two", "op": "I"})])
    await node.produce(view, 1, [(3, None)])
    pipeline = TopicPipeline(node.ctx, view.name)
    assert await pipeline.run_cycle(), pipeline.status.last_error
    assert node.rows(view) == {2: "two"}
    table = node.catalog.load_table(("kafka", view.name))
    assert str(table.schema().find_field("id").field_type) == "long"


def test_a_schema_learnt_from_deletes_alone_yields_to_another_tasks_values() -> None:
    from tabletopic.table.ingest_task import DELETES_ONLY, _output, collect_outputs

    values = pa.schema([("id", pa.int64()), ("name", pa.string())])
    deletes = pa.schema([("id", pa.string())])
    outputs = [
        _output("schema", deletes.serialize().to_pybytes(), 1, DELETES_ONLY.decode()),
        _output("schema", values.serialize().to_pybytes(), 1),
    ]
    assert collect_outputs(outputs).needs_schema == values
    # A job that saw nothing but deletes still reports what it saw.
    assert collect_outputs(outputs[:1]).needs_schema == deletes


KEYS = 8


@dataclass(frozen=True)
class Change:
    key: int
    kind: str  # "I", "U", "D" (a value with that op) or "tombstone" (a null value)


def changes(cdc: bool) -> st.SearchStrategy[list[Change]]:
    kinds = ["I", "U", "D", "tombstone"] if cdc else ["I", "U", "tombstone"]
    return st.lists(
        st.builds(Change, st.integers(0, KEYS - 1), st.sampled_from(kinds)), min_size=1, max_size=12
    )


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    cdc = draw(st.booleans())
    return {
        "cdc": cdc,
        "partitions": draw(st.integers(1, 3)),
        "native": draw(st.booleans()),
        # 1 byte: a task writes its rows out after every chunk, so one cycle stages several files.
        "max_task_bytes": draw(st.sampled_from([64 << 20, 1])),
        # Per cycle, the changes and how many stored batches each partition gets them in.
        "cycles": draw(st.lists(st.tuples(changes(cdc), st.integers(1, 3)), min_size=1, max_size=3)),
    }


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenarios())
async def test_upsert_and_cdc_tables_hold_the_latest_row_per_key_after_any_mix_of_changes(
    node: Node, scenario: dict[str, Any]
) -> None:
    partitions = scenario["partitions"]
    configs = (
        {"automq.table.topic.cdc.field": "op"}
        if scenario["cdc"]
        else {"automq.table.topic.upsert.enable": "true"}
    )
    view = await node.add_topic(partitions, **configs)
    ctx = CoordinatorContext(
        **{
            **node.ctx.__dict__,
            "native_decode": scenario["native"],
            "max_task_bytes": scenario["max_task_bytes"],
        }
    )
    pipeline = TopicPipeline(ctx, view.name)
    model: dict[int, str] = {}
    ends = dict.fromkeys(range(partitions), 0)
    serial = itertools.count()
    for number, (cycle, batches) in enumerate(scenario["cycles"]):
        if number == 0:
            # The first commit creates the table from the rows' columns: it needs one row with a
            # value (a table created from tombstones alone would have no value columns to match).
            cycle = [Change(0, "I"), *cycle]
        by_partition: dict[int, list[tuple[int, dict[str, Any] | None]]] = {}
        for change in cycle:
            name = f"k{change.key}-{next(serial)}"
            if change.kind == "tombstone":
                value = None
                model.pop(change.key, None)
            else:
                value = {"id": change.key, "name": name, "op": change.kind}
                if change.kind == "D":
                    model.pop(change.key, None)
                else:
                    model[change.key] = name
            # Kafka's partitioner: one key, one partition, so each key's changes keep their order.
            by_partition.setdefault(change.key % partitions, []).append((change.key, value))
        for partition, records in by_partition.items():
            size = -(-len(records) // batches)
            for start in range(0, len(records), size):
                await node.produce(view, partition, records[start : start + size])
            ends[partition] += len(records)
        assert await pipeline.run_cycle(), pipeline.status.last_error
        assert pipeline.status.state is PipelineState.RUNNING, pipeline.status.last_error
        assert node.rows(view) == model
    table = node.catalog.load_table(("kafka", view.name))
    assert committed_state(table).offsets == {p: end for p, end in ends.items() if end}
