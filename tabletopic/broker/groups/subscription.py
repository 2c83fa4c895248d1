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
