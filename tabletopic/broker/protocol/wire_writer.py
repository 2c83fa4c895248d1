"""Kafka's primitive encodings for the hand-written response encoders (Metadata, Produce, Fetch).

kio's generic writer builds a typed entity per struct and dispatches a writer per field; on the
paths a broker answers thousands of times a second, or with thousands of entries, that was most of
the answer's cost. The encoders here write the same bytes (their unit tests compare them with kio's
for every version) from the handlers' dicts, with these helpers for what recurs: lengths and
strings in the classic and the flexible (KIP-482) forms, and tagged fields.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from tabletopic.records.encoder import uvarint

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
_LEADER = struct.Struct(">ii")

# An empty tagged-field section (flexible versions): the count, zero.
NO_TAGS = b"\x00"


class WireWriter:
    """Kafka's primitive encodings for one version (``flexible``: compact arrays and strings,
    tagged fields), appended to ``out``."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self.out = bytearray()

    def length(self, count: int) -> None:
        self.out += uvarint(count + 1) if self.flexible else I32.pack(count)

    def string(self, value: str | None) -> None:
        if value is None:
            self.out += b"\x00" if self.flexible else I16.pack(-1)
            return
        data = value.encode()
        self.out += (uvarint(len(data) + 1) if self.flexible else I16.pack(len(data))) + data

    def int32s(self, values: Sequence[int]) -> None:
        self.length(len(values))
        for value in values:
            self.out += I32.pack(value)

    def tags(self) -> None:
        if self.flexible:
            self.out += NO_TAGS

    def framed(self) -> list[Any]:
        """The response as the socket takes it: its length, then what was written."""
        return [I32.pack(len(self.out)), self.out]


def tagged(tag: int, data: bytes) -> bytes:
    """A tagged-field section holding one field: count, tag, size, data."""
    return b"\x01" + uvarint(tag) + uvarint(len(data)) + data


def leader_tags(tag: int, leader: tuple[int, int] | None) -> bytes:
    """The tagged fields of a partition that names its current leader (KIP-951) under ``tag``:
    none when there is none to name or it is (-1, -1), kio's default, which Kafka's writers leave
    out."""
    if leader is None or leader == (-1, -1):
        return NO_TAGS
    return tagged(tag, _LEADER.pack(leader[0], leader[1]) + NO_TAGS)


NODE_ENDPOINTS_TAG = 0  # the response's NodeEndpoints, in Fetch (v16 on) and Produce (v10 on)


def endpoint_tags(endpoints: Sequence[Mapping[str, Any]]) -> bytes:
    """A response's tagged fields: the endpoints of the leaders its partitions name, if any."""
    if not endpoints:
        return NO_TAGS
    data = bytearray(uvarint(len(endpoints) + 1))
    for endpoint in endpoints:
        host = endpoint["host"].encode()
        rack_name = endpoint.get("rack")
        rack = None if rack_name is None else rack_name.encode()
        data += I32.pack(endpoint["node_id"]) + uvarint(len(host) + 1) + host + I32.pack(endpoint["port"])
        data += b"\x00" if rack is None else uvarint(len(rack) + 1) + rack
        data += NO_TAGS  # the endpoint's own
    return tagged(NODE_ENDPOINTS_TAG, bytes(data))
