"""The batch CRC: CRC32C (Castagnoli) over everything from ``attributes`` to the end of the batch.

``baseOffset``, ``batchLength`` and ``partitionLeaderEpoch`` lie before the covered range, which is
why a broker may rewrite the base offset of a stored batch without recomputing anything.
"""

from __future__ import annotations

import struct

import crc32c

from tabletopic.checksum import extend

CRC_OFFSET = 17
CRC_START = 21  # the first covered byte: attributes

_UINT32 = struct.Struct(">I")


def batch_crc(batch: bytes | bytearray | memoryview) -> int:
    """The CRC a batch should carry, computed over its bytes from ``attributes`` on."""
    return int(crc32c.crc32c(memoryview(batch)[CRC_START:]))


def write_crc(batch: bytearray) -> None:
    """Recompute and store the CRC after the covered bytes were written or changed."""
    _UINT32.pack_into(batch, CRC_OFFSET, batch_crc(batch))


def whole_batch_crc(batch: bytes | memoryview, covered_crc: int) -> int:
    """The CRC32C of the whole batch, from the CRC of its covered bytes (verified by the caller):
    the 21 bytes before them are checksummed and the two combined, so the batch is not read again.
    What the store needs for its own checksums of the same bytes."""
    view = memoryview(batch)
    return extend(int(crc32c.crc32c(view[:CRC_START])), view[CRC_START:], covered_crc)
