"""An Avro schema with a field of every Avro type and logical type (nested records, unions, arrays
and maps of them), and values of it drawn at random with the edge values each type has: what the
Avro decoders are checked on, field by field and under property-based fuzzing."""

from __future__ import annotations

import datetime
import decimal
import random
import uuid
from typing import Any

from tests.support.schemas import avro_record

UTC = datetime.UTC

INNER = avro_record("Inner", {"x": "int", "s": "string"})
EVERY_TYPE = {
    "type": "record",
    "name": "R",
    "namespace": "ns",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": "int"},
        {"name": "b", "type": "boolean"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "raw", "type": "bytes"},
        {"name": "n", "type": "null"},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {
            "name": "fdec",
            "type": {
                "type": "fixed",
                "name": "FD",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
        },
        {"name": "date", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tsu", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "opt", "type": ["null", "string"]},
        {"name": "opt2", "type": ["int", "null"]},
        {"name": "inner", "type": INNER},
        {"name": "maybe", "type": ["null", "Inner"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "nums", "type": ["null", {"type": "array", "items": "long"}]},
        {"name": "days", "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}}},
        {"name": "attrs", "type": {"type": "map", "values": "double"}},
        {
            "name": "codes",
            "type": {"type": "map", "values": {"type": "enum", "name": "Code", "symbols": ["X", "Y"]}},
        },
    ],
}


def every_type_value(rnd: random.Random) -> dict[str, Any]:
    """A value of :data:`EVERY_TYPE` drawn from ``rnd``: edge values of each type (varint
    boundaries, the extremes of each width, empty and non-ASCII strings, nulls in every union)."""
    big = rnd.choice([0, 1, -1, 63, 64, -65, 8191, 8192, 2**31 - 1, -(2**31), 2**62, -(2**63)])
    return {
        "l": big,
        "i": rnd.randint(-(2**31), 2**31 - 1),
        "b": rnd.random() < 0.5,
        "f": 1.5,
        "d": rnd.random(),
        "s": rnd.choice(["", "é", "x" * 200, "日本"]),
        "raw": rnd.randbytes(rnd.randint(0, 300)),
        "n": None,
        "e": rnd.choice("ABC"),
        "fx": b"abc",
        "dec": decimal.Decimal(rnd.randint(-(10**11), 10**11)).scaleb(-3),
        "fdec": decimal.Decimal(rnd.randint(-(10**17), 10**17)).scaleb(-2),
        "date": datetime.date(2024, 2, 29),
        "tm": datetime.time(23, 59, 59, 999000),
        "tu": datetime.time(1, 2, 3, 456789),
        "ts": datetime.datetime(2024, 1, 1, 12, 30, 1, 123000, tzinfo=UTC),
        "tsu": rnd.choice([None, datetime.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)]),
        "lts": datetime.datetime(2000, 1, 1, 0, 0, 0, 1000),
        "u": str(uuid.UUID(int=rnd.getrandbits(128))),
        "opt": rnd.choice([None, "v"]),
        "opt2": rnd.choice([None, 7]),
        "inner": {"x": 1, "s": "in"},
        "maybe": rnd.choice([None, {"x": -2, "s": ""}]),
        "tags": rnd.choice([[], ["a"], ["é", "x" * 100, ""]]),
        "nums": rnd.choice([None, [], [1, -(2**40), 2**62]]),
        "days": [datetime.date(2024, 1, 1), datetime.date(1970, 1, 1)][: rnd.randint(0, 2)],
        "attrs": rnd.choice([{}, {"k": 1.5, "é": -0.0}]),
        "codes": {"c": rnd.choice("XY")},
    }
