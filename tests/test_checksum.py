"""CRC32C extended over pieces whose CRC is known equals the CRC of the bytes themselves."""

from __future__ import annotations

import crc32c
from hypothesis import given
from hypothesis import strategies as st

from tabletopic.checksum import extend


@given(st.lists(st.tuples(st.binary(max_size=300), st.booleans()), max_size=6), st.binary(max_size=20))
def test_combining_known_crcs_gives_the_crc_of_the_concatenation(
    pieces: list[tuple[bytes, bool]], seed: bytes
) -> None:
    crc = crc32c.crc32c(seed)
    for piece, known in pieces:
        crc = extend(crc, piece, crc32c.crc32c(piece) if known else None)
    assert crc == crc32c.crc32c(seed + b"".join(piece for piece, _ in pieces))
