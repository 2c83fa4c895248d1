"""A group of Protobuf payloads turned into one message upb parses in a single call, without
copying each payload out of the records block.

Broker-side validation checks a group of payloads (one schema id) that lie in the records block
with a few bytes of record framing between them: the record length, attributes, deltas, the key,
the value length and the wire-format prefix (at least 11 bytes). Slicing every payload into its
own ``bytes`` and joining them again costs about as much as the check itself, so instead the block
is copied once and only those gaps are rewritten: the payloads become the items of a ``repeated``
message field (field 1) of a wrapper message, each gap holding the item's tag and length, preceded
by a ``bytes`` field (field 2, declared, so it is not an unknown field) that pads whatever the gap
has left. None when a group cannot be laid out so (a gap too small, a filler length no varint can
spell); the caller then takes the per-record path.

(JSON documents are joined instead: blanking the framing between them in place measured no
cheaper than the join.)
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]

ITEM_TAG = 0x0A  # field 1, length-delimited: the payload, as a message
FILLER_TAG = 0x12  # field 2, length-delimited: bytes that pad a gap


def _varint_sizes(values: Ints) -> Ints:
    return 1 + (values >= 1 << 7) + (values >= 1 << 14) + (values >= 1 << 21) + (values >= 1 << 28)


def _put_varints(body: Bytes, at: Ints, values: Ints, sizes: Ints) -> None:
    for k in range(int(sizes.max(initial=1))):
        rows = sizes > k
        byte = (values[rows] >> (7 * k)) & 0x7F
        body[at[rows] + k] = byte | np.where(sizes[rows] > k + 1, 0x80, 0)


def protobuf_items(data: Bytes, starts: Ints, ends: Ints) -> bytes | None:
    """The payloads as the serialised items (field 1) of one wrapper message, gaps padded with
    field 2; None when a gap cannot hold its item's header and a well-formed filler."""
    if not len(starts):
        return b""
    lengths = ends - starts
    sizes = _varint_sizes(lengths)
    heads = starts - sizes - 1  # where each item's tag goes
    filler = heads[1:] - ends[:-1]  # bytes of the gap before each later item's header
    # A filler of F bytes is tag + varint(m) + m bytes: F in [2, 129] (m < 128, one byte) or
    # [131, 16386] (two bytes); 0 needs none; 1 and 130 cannot be spelt.
    one = (filler >= 2) & (filler <= 129)
    two = (filler >= 131) & (filler <= 16386)
    if not bool((one | two | (filler == 0)).all()) or int(heads[0]) < 0:
        return None
    first = int(heads[0])
    body = data[first : int(ends[-1])].copy()
    body[heads - first] = ITEM_TAG
    _put_varints(body, heads - first + 1, lengths, sizes)
    padded = np.flatnonzero(filler > 0)
    if len(padded):
        at = ends[:-1][padded] - first
        size = filler[padded]
        width = np.where(size >= 131, 2, 1)
        body[at] = FILLER_TAG
        _put_varints(body, at + 1, size - 1 - width, width)
    return body.tobytes()
