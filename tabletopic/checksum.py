"""CRC32C over pieces of which some already carry a known CRC.

A produced batch reaches the store with its CRC already computed: the broker verified it on the way
in (``records.crc.whole_batch_crc`` extends the batch's own CRC over its first bytes). The WAL
frame and the object block that hold the batch checksum the same bytes again, with their own
headers around them; rather than reading every byte twice more, their CRC is extended over a piece
whose CRC is known by combining the two values (the CRC of a concatenation follows
from the CRCs of its parts and the second part's length: a multiplication by a power of x modulo
the polynomial, constant time in the length). The on-disk formats are unchanged: the result is the
CRC32C of the same bytes, so readers and recovery check it as before.
"""

from __future__ import annotations

import anycrc
import crc32c

# CRC-32C (Castagnoli), as the crc32c package computes it: anycrc's name for it is CRC32-ISCSI.
_CRC32C = anycrc.Model("CRC32-ISCSI")


def extend(crc: int, piece: bytes | memoryview, known: int | None = None) -> int:
    """The CRC32C of (what ``crc`` covers) followed by ``piece``; ``known`` is ``piece``'s own
    CRC32C when the caller has it, which spares reading the piece."""
    if known is None:
        return int(crc32c.crc32c(piece, crc))
    return int(_CRC32C.combine(crc, known, len(piece)))
