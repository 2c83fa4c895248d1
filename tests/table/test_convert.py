from __future__ import annotations

import datetime
import decimal
import json

import pyarrow as pa
import pytest

from tabletopic.records.columns import BatchError, DecodedRecords
from tabletopic.table.convert.rows import (
    DELETE_MARKER_COLUMN,
    DLQ_HEADER_REASON,
    RecordConversionError,
    RecordConverter,
    convert_records,
)
from tabletopic.table.table_config import ErrorsTolerance, TableTopicConfig
from tests.support.schemas import (
    USER_V1,
    USER_V2,
    MemoryLookup,
    avro_bytes,
    avro_record,
    debezium_envelope,
    wire,
)

T0 = datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC)


def records(values: list[bytes | None], keys: list[bytes | None] | None = None) -> DecodedRecords:
    n = len(values)
    return DecodedRecords(
        partition=2,
        offsets=list(range(100, 100 + n)),
        timestamps=[1_700_000_000_000 + i for i in range(n)],
        keys=keys if keys is not None else [b"k%d" % i for i in range(n)],
        values=values,
        headers=[(("trace", b"t%d" % i),) for i in range(n)],
    )


def cfg(**kw: str) -> TableTopicConfig:
    return TableTopicConfig.from_topic_configs({f"automq.table.topic.{k}": v for k, v in kw.items()}, "users")


def test_raw_mode_keeps_value_bytes_and_adds_kafka_columns() -> None:
    result = convert_records(records([b"\xff\x00", None]), cfg())
    batch = result.batch
    assert batch is not None and result.failures == []
    assert batch.schema.names == ["_kafka_value", "_kafka_key", "_kafka_header", "_kafka_metadata"]
    assert batch.schema.field("_kafka_value").type == pa.binary()
    assert batch.schema.field("_kafka_key").type == pa.string()
    assert batch.column("_kafka_value").to_pylist() == [b"\xff\x00", None]
    assert batch.column("_kafka_header").to_pylist()[0] == [("trace", b"t0")]
    assert batch.column("_kafka_metadata").to_pylist()[1] == {
        "partition": 2,
        "offset": 101,
        "timestamp": 1_700_000_000_001,
    }
    assert batch.schema.field("_kafka_metadata").type.field("partition").type == pa.int32()


def test_raw_key_conversion_gives_binary_keys() -> None:
    batch = convert_records(records([b"v"], keys=[b"\xfe"]), cfg(**{"convert.key.type": "raw"})).batch
    assert batch is not None and batch.column("_kafka_key").to_pylist() == [b"\xfe"]


def test_string_mode_rejects_invalid_utf8_as_invalid_data() -> None:
    result = convert_records(records([b"hello", b"\xff\xfe"]), cfg(**{"convert.value.type": "string"}))
    assert result.batch is not None and result.batch.column("_kafka_value").to_pylist() == ["hello"]
    assert len(result.failures) == 1 and result.failures[0].offset == 101
    assert "UTF-8" in result.failures[0].reason and result.failures[0].invalid_data


def test_avro_by_schema_id_without_flatten_gives_one_struct_column() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    value = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "ann", "created": T0}))
    batch = convert_records(records([value]), cfg(**{"convert.value.type": "by_schema_id"}), lookup).batch
    assert batch is not None
    assert batch.column("_kafka_value").to_pylist() == [{"id": 1, "name": "ann", "created": T0}]
    assert batch.schema.field("_kafka_value").type.field("created").type == pa.timestamp("us", "UTC")


def test_avro_flatten_spreads_fields_and_unifies_three_schema_versions() -> None:
    lookup = MemoryLookup()
    v1 = lookup.register("users-value", "AVRO", USER_V1)
    v2 = lookup.register("users-value", "AVRO", USER_V2)
    v3_schema = {
        **USER_V2,
        "fields": [*USER_V2["fields"], {"name": "tags", "type": {"type": "array", "items": "string"}}],
    }
    v3 = lookup.register("users-value", "AVRO", v3_schema)
    values = [
        wire(v1, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0})),
        wire(
            v2,
            avro_bytes(
                USER_V2,
                {"id": 2, "name": "b", "created": T0, "email": "b@x", "balance": decimal.Decimal("1.50")},
            ),
        ),
        wire(
            v3,
            avro_bytes(
                v3_schema,
                {
                    "id": 3,
                    "name": "c",
                    "created": T0,
                    "email": None,
                    "balance": decimal.Decimal("2"),
                    "tags": ["x"],
                },
            ),
        ),
        wire(v1, avro_bytes(USER_V1, {"id": 4, "name": "d", "created": T0})),
    ]
    converter = RecordConverter(cfg(**{"schema.type": "schema"}), lookup)
    result = converter.convert(records(values))
    batch = result.batch
    assert batch is not None and result.failures == []
    assert batch.schema.names[:6] == ["id", "name", "created", "email", "balance", "tags"]
    assert batch.schema.field("id").type == pa.int64()
    assert batch.column("id").to_pylist() == [1, 2, 3, 4]
    assert batch.column("email").to_pylist() == [None, "b@x", None, None]
    assert batch.column("balance").to_pylist()[1] == decimal.Decimal("1.50")
    assert batch.column("tags").to_pylist() == [None, None, ["x"], None]
    # Decoders are cached per schema id.
    calls = lookup.by_id_calls
    converter.convert(records(values))
    assert lookup.by_id_calls == calls


def test_by_latest_schema_reads_bare_avro_with_the_subjects_newest_schema() -> None:
    lookup = MemoryLookup()
    lookup.register("users-value", "AVRO", USER_V1)
    lookup.register("users-value", "AVRO", USER_V2)
    body = avro_bytes(
        USER_V2, {"id": 9, "name": "z", "created": T0, "email": None, "balance": decimal.Decimal("0")}
    )
    config = cfg(**{"convert.value.type": "by_latest_schema", "transform.value.type": "flatten"})
    batch = convert_records(records([body]), config, lookup).batch
    assert batch is not None and batch.column("id").to_pylist() == [9]


def test_avro_key_by_schema_id_becomes_a_struct_key() -> None:
    lookup = MemoryLookup()
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "int"}]}
    kid = lookup.register("users-key", "AVRO", key_schema)
    config = cfg(**{"convert.key.type": "by_schema_id"})
    batch = convert_records(
        records([b"v"], keys=[wire(kid, avro_bytes(key_schema, {"id": 5}))]), config, lookup
    ).batch
    assert batch is not None and batch.column("_kafka_key").to_pylist() == [{"id": 5}]


def test_poison_records_are_separated_with_reasons_and_raw_bytes() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    good = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}))
    values = [
        good,
        b"not wire format",
        wire(sid, b"\x02"),
        wire(999, b"\x00"),
        wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}) + b"junk"),
    ]
    result = convert_records(records(values), cfg(**{"schema.type": "schema"}), lookup)
    assert result.batch is not None and result.batch.num_rows == 1
    reasons = {f.offset: f.reason for f in result.failures}
    assert set(reasons) == {101, 102, 103, 104}
    assert "wire format" in reasons[101]
    assert "invalid Avro" in reasons[102]
    assert "not found" in reasons[103]
    assert "bytes left" in reasons[104]
    failed = result.failures[0]
    assert failed.value == b"not wire format" and failed.key == b"k1"
    assert (DLQ_HEADER_REASON, failed.reason.encode()) in failed.dlq_headers("users")


def test_errors_tolerance_decides_which_failures_may_be_skipped() -> None:
    lookup = MemoryLookup()
    result = convert_records(records([b"garbage"]), cfg(**{"schema.type": "schema"}), lookup)
    with pytest.raises(RecordConversionError, match="offset 100"):
        result.enforce(ErrorsTolerance.NONE)
    assert len(result.enforce(ErrorsTolerance.INVALID_DATA)) == 1
    assert len(result.enforce(ErrorsTolerance.ALL)) == 1


def test_corrupt_batches_are_skipped_only_under_errors_tolerance_all() -> None:
    decoded = records([b"x"])
    decoded.errors.append(BatchError(500, 10, "CRC32C mismatch"))
    result = convert_records(decoded, cfg())
    with pytest.raises(RecordConversionError, match="CRC32C"):
        result.enforce(ErrorsTolerance.INVALID_DATA)
    assert result.enforce(ErrorsTolerance.ALL) == []


def test_unmappable_schema_is_not_invalid_data() -> None:
    lookup = MemoryLookup()
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    sid = lookup.register("users-value", "AVRO", recursive)
    result = convert_records(records([wire(sid, b"\x00")]), cfg(**{"schema.type": "schema"}), lookup)
    assert not result.failures[0].invalid_data and "recursive" in result.failures[0].reason
    with pytest.raises(RecordConversionError):
        result.enforce(ErrorsTolerance.INVALID_DATA)
    assert len(result.enforce(ErrorsTolerance.ALL)) == 1


def test_json_schema_values_decode_and_bad_json_or_types_fail_individually() -> None:
    lookup = MemoryLookup()
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    sid = lookup.register("users-value", "JSON", schema)
    values = [
        wire(sid, json.dumps({"id": 1, "name": "a", "tags": ["t"]}).encode()),
        wire(sid, b"{not json"),
        wire(sid, json.dumps({"id": "one", "name": "b"}).encode()),
        wire(sid, json.dumps({"id": 4, "name": {"nested": 1}}).encode()),
    ]
    result = convert_records(records(values), cfg(**{"schema.type": "schema"}), lookup)
    assert result.batch is not None
    assert result.batch.column("id").to_pylist() == [1, 4]
    assert result.batch.column("name").to_pylist() == ["a", '{"nested": 1}']
    assert {f.offset for f in result.failures} == {101, 102}


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  enum Status { NEW = 0; PAID = 1; }
  Status status = 3;
  repeated string tags = 4;
  map<string, int32> counts = 5;
  Line line = 6;
  google.protobuf.Timestamp at = 7;
  uint64 big = 8;
  message Line { int32 qty = 1; }
}
message Other { string x = 1; }
"""


def _proto_classes():  # type: ignore[no-untyped-def]
    from google.protobuf import message_factory

    from tabletopic.schema_registry.lookup import RegisteredSchema
    from tabletopic.table.convert.protobuf import message_descriptor

    schema = RegisteredSchema(1, "PROTOBUF", PROTO)
    order = message_factory.GetMessageClass(message_descriptor(schema, (0,)))
    other = message_factory.GetMessageClass(message_descriptor(schema, (1,)))
    return order, other


def test_protobuf_values_with_message_indexes_decode_to_structs() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "PROTOBUF", PROTO)
    order_cls, other_cls = _proto_classes()
    order = order_cls(id=7, item="pen", status=1, tags=["a"], counts={"x": 2}, big=(1 << 64) - 1)
    order.line.qty = 3
    order.at.seconds = 1_700_000_000
    other = other_cls(x="hi")
    values = [
        wire(sid, order.SerializeToString(), b"\x00"),
        wire(sid, other.SerializeToString(), b"\x02\x02"),
        wire(sid, b"\xff\xff", b"\x00"),
    ]
    result = convert_records(records(values), cfg(**{"schema.type": "schema"}), lookup)
    batch = result.batch
    assert batch is not None and batch.num_rows == 2
    assert batch.column("id").to_pylist() == [7, None]
    assert batch.column("x").to_pylist() == [None, "hi"]
    assert batch.column("status").to_pylist()[0] == "PAID"
    assert batch.column("counts").to_pylist()[0] == [("x", 2)]
    assert batch.column("line").to_pylist()[0] == {"qty": 3}
    assert batch.column("big").to_pylist()[0] == -1
    assert batch.column("at").to_pylist()[0] == datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)
    assert [f.offset for f in result.failures] == [102]


DEBEZIUM_ROW = avro_record("Row", {"id": "int", "name": ["null", "string"]})
DEBEZIUM = debezium_envelope(DEBEZIUM_ROW, "pg.public.users", null_defaults=False)


def test_flatten_debezium_emits_row_images_and_cdc_for_create_update_delete() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", DEBEZIUM)
    src = {"db": "pg", "table": "users"}

    def event(op: str, before: dict | None, after: dict | None) -> bytes:
        return wire(
            sid, avro_bytes(DEBEZIUM, {"before": before, "after": after, "source": src, "op": op, "ts_ms": 5})
        )

    values = [
        event("c", None, {"id": 1, "name": "a"}),
        event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}),
        event("d", {"id": 1, "name": "b"}, None),
        None,  # tombstone after the delete
        event("r", None, {"id": 2, "name": "snap"}),
        event("u", None, None),
    ]
    config = cfg(
        **{
            "convert.value.type": "by_schema_id",
            "transform.value.type": "flatten_debezium",
            "id.columns": "[id]",
            "cdc.field": "_cdc.op",
        }
    )
    keys: list[bytes | None] = [b"k%d" % i for i in range(len(values))]
    keys[3] = None  # a tombstone without a key deletes nothing: left out and counted
    result = convert_records(records(values, keys), config, lookup)
    batch = result.batch
    assert batch is not None and result.tombstones == 1
    assert batch.schema.names == ["id", "name", "_cdc", "_kafka_key", "_kafka_header", "_kafka_metadata"]
    assert batch.column("id").to_pylist() == [1, 1, 1, 2]
    assert batch.column("name").to_pylist() == ["a", "b", "b", "snap"]
    cdc = batch.column("_cdc").to_pylist()
    assert [c["op"] for c in cdc] == ["I", "U", "D", "I"]
    assert cdc[0] == {"op": "I", "ts": 5, "offset": 100, "source": "pg.users"}
    assert [(f.offset, f.invalid_data) for f in result.failures] == [(105, False)]


def test_flatten_of_non_debezium_value_fails_every_record_clearly() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    value = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}))
    config = cfg(**{"convert.value.type": "by_schema_id", "transform.value.type": "flatten_debezium"})
    result = convert_records(records([value]), config, lookup)
    assert result.batch is None and "Debezium envelope" in result.failures[0].reason


def test_json_schema_dates_and_times_are_parsed_from_text() -> None:
    lookup = MemoryLookup()
    schema = {
        "type": "object",
        "properties": {
            "at": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
        },
    }
    sid = lookup.register("users-value", "JSON", schema)
    values = [
        wire(sid, b'{"at": "2024-05-01T12:00:00Z", "day": "2024-05-01"}'),
        wire(sid, b'{"at": "yesterday", "day": "2024-05-01"}'),
    ]
    result = convert_records(records(values), cfg(**{"schema.type": "schema"}), lookup)
    assert result.batch is not None
    assert result.batch.column("at").to_pylist() == [T0]
    assert result.batch.column("day").to_pylist() == [datetime.date(2024, 5, 1)]
    assert [f.offset for f in result.failures] == [101]


WKT_PROTO = """
syntax = "proto3";
package wk;
import "google/protobuf/wrappers.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
message Event {
  google.protobuf.Int64Value maybe = 1;
  google.protobuf.Duration took = 2;
  google.protobuf.Struct attrs = 3;
  oneof choice { string name = 4; int32 code = 5; }
  optional int32 opt = 6;
  map<int32, string> labels = 7;
}
"""


def test_protobuf_well_known_types_oneofs_and_optional_fields() -> None:
    from google.protobuf import message_factory

    from tabletopic.table.convert.protobuf import message_descriptor

    lookup = MemoryLookup()
    sid = lookup.register("users-value", "PROTOBUF", WKT_PROTO)
    cls = message_factory.GetMessageClass(message_descriptor(lookup.by_id(sid)))
    full = cls(name="n", opt=0, labels={3: "three"})
    full.maybe.value = 42
    full.took.seconds = 2
    full.took.nanos = 500_000_000
    full.attrs.update({"k": "v"})
    empty = cls(code=7)
    values = [wire(sid, m.SerializeToString(), b"\x00") for m in (full, empty)]
    result = convert_records(records(values), cfg(**{"schema.type": "schema"}), lookup)
    batch = result.batch
    assert batch is not None and result.failures == []
    assert batch.column("maybe").to_pylist() == [42, None]
    assert batch.column("took").to_pylist() == [2_500_000, None]
    assert json.loads(batch.column("attrs").to_pylist()[0]) == {"k": "v"}
    assert batch.column("name").to_pylist() == ["n", None]
    assert batch.column("code").to_pylist() == [None, 7]
    assert batch.column("opt").to_pylist() == [0, None]
    assert batch.column("labels").to_pylist() == [[(3, "three")], []]


def test_tombstones_on_an_upsert_table_become_deletes_keyed_by_the_record_key() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    value = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}))
    keyed = cfg(**{"schema.type": "schema", "id.columns": "[id]", "upsert.enable": "true"})
    result = convert_records(records([value, None, None], keys=[b"1", b"7", None]), keyed, lookup)
    batch = result.batch
    assert batch is not None and result.failures == [] and result.tombstones == 1
    assert batch.column("id").to_pylist() == [1, 7]  # the key "7" read as the int id column
    assert batch.column("name").to_pylist() == ["a", None]
    assert batch.column(DELETE_MARKER_COLUMN).to_pylist() == [False, True]


def test_a_batch_of_only_tombstones_on_an_upsert_table_deletes_by_key() -> None:
    keyed = cfg(**{"schema.type": "schema", "id.columns": "[id]", "upsert.enable": "true"})
    result = convert_records(records([None, None], keys=[b"3", b"4"]), keyed, MemoryLookup())
    batch = result.batch
    assert batch is not None and result.failures == []
    assert batch.schema.names == [
        "id",
        "_kafka_key",
        "_kafka_header",
        "_kafka_metadata",
        DELETE_MARKER_COLUMN,
    ]
    assert batch.column("id").to_pylist() == ["3", "4"]  # cast to the table's type when written


def test_tombstones_with_a_record_key_take_the_id_columns_from_its_fields() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    key_schema = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "int"}]}
    kid = lookup.register("users-key", "AVRO", key_schema)
    value = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}))
    config = cfg(
        **{
            "schema.type": "schema",
            "convert.key.type": "by_schema_id",
            "id.columns": "[id]",
            "cdc.field": "name",
        }
    )
    keys = [wire(kid, avro_bytes(key_schema, {"id": 1})), wire(kid, avro_bytes(key_schema, {"id": 9}))]
    result = convert_records(records([value, None], keys), config, lookup)
    # The first row's cdc.field "a" is no operation; the tombstone is exempt from that check.
    assert [f.offset for f in result.failures] == [100]
    assert result.batch is not None and result.batch.column("id").to_pylist() == [9]


def test_a_batch_of_only_tombstones_on_a_cdc_table_deletes_by_key_without_an_operation() -> None:
    # No value, so no cdc.field column: the deletes need none (they failed as "not in the record").
    config = cfg(**{"schema.type": "schema", "id.columns": "[id]", "cdc.field": "op"})
    result = convert_records(records([None, None], keys=[b"3", b"4"]), config, MemoryLookup())
    assert result.failures == [] and result.batch is not None
    assert result.batch.column(DELETE_MARKER_COLUMN).to_pylist() == [True, True]
    assert result.batch.column("id").to_pylist() == ["3", "4"]


def test_a_tombstone_key_that_cannot_be_an_id_fails_that_record_only() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    value = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}))
    keyed = cfg(**{"schema.type": "schema", "id.columns": "[id]", "upsert.enable": "true"})
    result = convert_records(records([value, None], keys=[b"1", b"not-a-number"]), keyed, lookup)
    assert [f.offset for f in result.failures] == [101] and "id column 'id'" in result.failures[0].reason
    assert result.batch is not None and result.batch.column("id").to_pylist() == [1]


def test_tombstones_on_an_append_table_are_left_out_and_counted_never_failed() -> None:
    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", USER_V1)
    value = wire(sid, avro_bytes(USER_V1, {"id": 1, "name": "a", "created": T0}))
    plain = convert_records(records([value, None]), cfg(**{"schema.type": "schema"}), lookup)
    assert plain.batch is not None and plain.batch.column("id").to_pylist() == [1]
    assert plain.failures == [] and plain.tombstones == 1
    only = convert_records(records([None, None]), cfg(**{"schema.type": "schema"}), lookup)
    assert only.batch is None and only.failures == [] and only.tombstones == 2
    only.enforce(ErrorsTolerance.NONE)  # nothing to stop the pipeline for
    raw = convert_records(records([b"v", None]), cfg())
    assert raw.batch is not None and raw.batch.column("_kafka_value").to_pylist() == [b"v", None]


def test_unknown_schema_id_is_looked_up_once_per_converter() -> None:
    lookup = MemoryLookup()
    converter = RecordConverter(cfg(**{"schema.type": "schema"}), lookup)
    result = converter.convert(records([wire(77, b"\x00")] * 50))
    assert len(result.failures) == 50 and lookup.by_id_calls == 1


def test_string_key_with_invalid_utf8_fails_the_record() -> None:
    result = convert_records(records([b"v1", b"v2"], keys=[b"ok", b"\xff"]), cfg())
    assert result.batch is not None and result.batch.column("_kafka_key").to_pylist() == ["ok"]
    assert [f.offset for f in result.failures] == [101]


def test_cdc_field_values_must_be_i_u_or_d() -> None:
    lookup = MemoryLookup()
    schema = {
        "type": "record",
        "name": "C",
        "fields": [{"name": "id", "type": "int"}, {"name": "op", "type": ["null", "string"]}],
    }
    sid = lookup.register("users-value", "AVRO", schema)
    values = [
        wire(sid, avro_bytes(schema, {"id": i, "op": op})) for i, op in enumerate(["I", "U", "D", "X", None])
    ]
    config = cfg(**{"schema.type": "schema", "id.columns": "[id]", "cdc.field": "op"})
    result = convert_records(records(values), config, lookup)
    assert result.batch is not None and result.batch.column("op").to_pylist() == ["I", "U", "D"]
    assert [(f.offset, f.invalid_data) for f in result.failures] == [(103, True), (104, True)]
    missing = cfg(**{"schema.type": "schema", "id.columns": "[id]", "cdc.field": "nope"})
    failures = convert_records(records(values), missing, lookup).failures
    assert len(failures) == 5 and not failures[0].invalid_data


def test_debezium_key_gives_the_id_columns() -> None:
    from tabletopic.table.convert.debezium import id_columns_from_key

    lookup = MemoryLookup()
    sid = lookup.register("users-value", "AVRO", DEBEZIUM)
    key_schema = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "int"}]}
    kid = lookup.register("users-key", "AVRO", key_schema)
    value = wire(
        sid,
        avro_bytes(
            DEBEZIUM,
            {
                "before": None,
                "after": {"id": 1, "name": "a"},
                "source": {"db": "d", "table": "t"},
                "op": "c",
                "ts_ms": 1,
            },
        ),
    )
    config = cfg(
        **{
            "convert.value.type": "by_schema_id",
            "convert.key.type": "by_schema_id",
            "transform.value.type": "flatten_debezium",
            "id.columns": "[_from_debezium_key_]",
            "cdc.field": "_cdc.op",
        }
    )
    result = convert_records(
        records([value], keys=[wire(kid, avro_bytes(key_schema, {"id": 1}))]), config, lookup
    )
    assert result.batch is not None and result.failures == []
    assert id_columns_from_key(result.batch.schema) == ("id",)
    with pytest.raises(ValueError, match="schema-based record key"):
        id_columns_from_key(convert_records(records([b"x"]), cfg()).batch.schema)  # type: ignore[union-attr]


def test_protobuf_by_latest_schema_uses_the_configured_message() -> None:
    lookup = MemoryLookup()
    lookup.register("users-value", "PROTOBUF", PROTO)
    _, other_cls = _proto_classes()
    config = cfg(
        **{
            "convert.value.type": "by_latest_schema",
            "convert.value.by_latest_schema.message.full.name": "shop.Other",
            "transform.value.type": "flatten",
        }
    )
    result = convert_records(records([other_cls(x="hey").SerializeToString()]), config, lookup)
    assert result.batch is not None and result.batch.column("x").to_pylist() == ["hey"]


def test_header_keys_with_invalid_utf8_do_not_break_the_batch() -> None:
    from tabletopic.records.crc import write_crc
    from tabletopic.records.decoder import decode_records
    from tabletopic.records.encoder import Record, build_batch
    from tests.records.samples import stored

    batch = bytearray(build_batch([Record(b"k", b"v", [("h", b"1")])]))
    index = batch.index(b"h\x02")  # header key "h" followed by the value length varint
    batch[index] = 0xFF
    write_crc(batch)
    result = convert_records(decode_records(stored([bytes(batch)]), 0, 1), cfg())
    assert result.batch is not None
    assert result.batch.column("_kafka_header").to_pylist() == [[("\ufffd", b"1")]]


def test_timestamps_beyond_64_bits_wrap_instead_of_failing_the_batch() -> None:
    decoded = records([b"a", b"b"])
    decoded.timestamps[1] = (1 << 63) + 5
    result = convert_records(decoded, cfg())
    assert result.batch is not None
    assert [m["timestamp"] for m in result.batch.column("_kafka_metadata").to_pylist()] == [
        1_700_000_000_000,
        -(1 << 63) + 5,
    ]


def test_a_registry_outage_fails_the_task_instead_of_skipping_records() -> None:
    class Down(MemoryLookup):
        def by_id(self, schema_id: int):  # type: ignore[no-untyped-def]
            raise ConnectionError("registry unreachable")

    with pytest.raises(ConnectionError):
        convert_records(records([wire(1, b"\x00")]), cfg(**{"schema.type": "schema"}), Down())


def test_debezium_json_envelopes_with_differing_before_and_after_schemas() -> None:
    lookup = MemoryLookup()
    row_v1 = {"type": "object", "properties": {"id": {"type": "integer"}}}
    row_v2 = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
    schema = {
        "type": "object",
        "properties": {
            "before": row_v1,
            "after": row_v2,
            "op": {"type": "string"},
            "ts_ms": {"type": "integer"},
        },
    }
    sid = lookup.register("users-value", "JSON", schema)
    values = [
        wire(
            sid, json.dumps({"before": None, "after": {"id": 1, "name": "a"}, "op": "c", "ts_ms": 3}).encode()
        ),
        wire(sid, json.dumps({"before": {"id": 1}, "after": None, "op": "d", "ts_ms": 4}).encode()),
    ]
    config = cfg(**{"convert.value.type": "by_schema_id", "transform.value.type": "flatten_debezium"})
    result = convert_records(records(values), config, lookup)
    assert result.batch is not None and result.failures == []
    assert result.batch.column("id").to_pylist() == [1, 1]
    assert result.batch.column("name").to_pylist() == ["a", None]
    assert [c["op"] for c in result.batch.column("_cdc").to_pylist()] == ["I", "D"]
