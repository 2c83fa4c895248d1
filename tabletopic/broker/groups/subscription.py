"""Just enough of the ``consumer`` embedded protocol to know which topics a member subscribes to.

The coordinator otherwise treats member metadata as opaque bytes; OffsetDelete is the one place Kafka
looks inside (GROUP_SUBSCRIBED_TO_TOPIC). Layout of ConsumerProtocolSubscription, all versions:
``int16 version, int32 count, count x (int16 length, utf-8 topic), ...`` (user data, owned partitions,
generation and rack follow and are not needed here).
"""

from __future__ import annotations

import struct


def topics(metadata: bytes) -> frozenset[str] | None:
    """The subscribed topics, or ``None`` when the bytes are not a consumer subscription."""
    try:
        (_version,) = struct.unpack_from(">h", metadata, 0)
        (count,) = struct.unpack_from(">i", metadata, 2)
        if count < 0 or count > len(metadata):
            return None
        offset = 6
        names: list[str] = []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, offset)
            offset += 2
            if length < 0 or offset + length > len(metadata):
                return None
            names.append(bytes(metadata[offset : offset + length]).decode("utf-8"))
            offset += length
        return frozenset(names)
    except (struct.error, UnicodeDecodeError):
        return None


def encode(topic_names: list[str], version: int = 0, user_data: bytes | None = None) -> bytes:
    """A version-0 subscription (used by tests and tools)."""
    out = bytearray(struct.pack(">hi", version, len(topic_names)))
    for name in topic_names:
        raw = name.encode("utf-8")
        out += struct.pack(">h", len(raw)) + raw
    if user_data is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(user_data)) + user_data
    return bytes(out)


def owned_partitions(metadata: bytes) -> frozenset[tuple[str, int]]:
    """The partitions a classic member says it owns (ConsumerProtocolSubscription v1+, sent by
    cooperative assignors after the user data); empty for v0 or undecodable bytes (an eager member
    gives up everything before it joins again)."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        (count,) = struct.unpack_from(">i", metadata, 2)
        if version < 1 or count < 0:
            return frozenset()
        offset = 6
        for _ in range(count):
            (length,) = struct.unpack_from(">h", metadata, offset)
            offset += 2 + max(length, 0)
        (user_data,) = struct.unpack_from(">i", metadata, offset)
        return _topic_partitions(metadata, offset + 4 + max(user_data, 0))
    except (struct.error, UnicodeDecodeError):
        return frozenset()


def assigned_partitions(assignment: bytes) -> frozenset[tuple[str, int]] | None:
    """The partitions of a ConsumerProtocolAssignment (what a classic member got from SyncGroup),
    or ``None`` when the bytes are not one. Empty bytes: nothing assigned yet."""
    if not assignment:
        return frozenset()
    try:
        return _topic_partitions(assignment, 2)  # after the int16 version
    except (struct.error, UnicodeDecodeError):
        return None


def _topic_partitions(data: bytes, offset: int) -> frozenset[tuple[str, int]]:
    """``int32 count, count x (int16 length, utf-8 topic, int32 n, n x int32 partition)`` at
    ``offset``: the owned partitions of a subscription and the partitions of an assignment."""
    (topics_count,) = struct.unpack_from(">i", data, offset)
    offset += 4
    found: set[tuple[str, int]] = set()
    for _ in range(max(topics_count, 0)):
        (length,) = struct.unpack_from(">h", data, offset)
        if length < 0 or offset + 2 + length > len(data):
            raise struct.error("topic name past the end")
        topic = bytes(data[offset + 2 : offset + 2 + length]).decode("utf-8")
        offset += 2 + length
        (partitions,) = struct.unpack_from(">i", data, offset)
        offset += 4
        for _ in range(max(partitions, 0)):
            (partition,) = struct.unpack_from(">i", data, offset)
            offset += 4
            found.add((topic, partition))
    return frozenset(found)


def encode_assignment(partitions: frozenset[tuple[str, int]]) -> bytes:
    """A version-0 ConsumerProtocolAssignment: what a classic member of a KIP-848 group gets from
    SyncGroup (the broker computed it; the member's own assignor is not run)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(struct.pack(">hi", 0, len(by_topic)))
    for topic, numbers in by_topic.items():
        raw = topic.encode("utf-8")
        out += struct.pack(">h", len(raw)) + raw + struct.pack(f">i{len(numbers)}i", len(numbers), *numbers)
    out += struct.pack(">i", -1)  # no user data
    return bytes(out)
