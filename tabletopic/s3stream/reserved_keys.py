"""Object keys reserved ahead for the object WAL's batch objects.

Every object is reserved (a ``prepared`` row in the metadata DB) before its PUT, so that garbage
collection can delete what an interrupted upload left behind. Reserving one key per upload put a
metadata transaction on every acknowledgement's path (1.5-5 ms of a 10-20 ms upload on loopback);
reserving :data:`RESERVE_AHEAD` stream-set keys at a time pays it once per that many uploads.

A reserved key is old as soon as it is taken, so it must be committed before any node's garbage
collection takes it for an orphan (``s3stream.object.delete.grace.ms`` after it was reserved): keys
are kept for at most half the grace period and dropped after (their rows are then collected as
orphans, harmlessly: nothing was written under them). With a grace under two seconds nothing is
reserved ahead.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from tabletopic.s3stream.db import ObjectKind
from tabletopic.s3stream.state import StoreState

RESERVE_AHEAD = 16


class ReservedKeys:
    """Hands out ``(object_id, key)`` reservations; the ids are in ``state.inflight_objects`` from
    their reservation on (the uploader removes them once committed or abandoned)."""

    def __init__(self, state: StoreState) -> None:
        self.state = state
        self.max_age = state.settings.delete_grace_ms / 2000
        self._ahead: deque[tuple[int, str, float]] = deque()

    async def take(self, kinds: Sequence[ObjectKind]) -> list[tuple[int, str]]:
        """Reservations for objects of ``kinds``, in order."""
        state = self.state
        if state.local_wal or self.max_age < 1 or list(kinds) != [ObjectKind.STREAM_SET]:
            reserved = await state.db(state.meta.prepare_objects, list(kinds))
            state.inflight_objects.update(oid for oid, _ in reserved)
            return reserved
        now = time.monotonic()
        while self._ahead and now - self._ahead[0][2] > self.max_age:
            state.inflight_objects.discard(self._ahead.popleft()[0])  # left to GC as an orphan
        if not self._ahead:
            fresh = await state.db(state.meta.prepare_objects, [ObjectKind.STREAM_SET] * RESERVE_AHEAD)
            state.inflight_objects.update(oid for oid, _ in fresh)
            reserved_at = time.monotonic()
            self._ahead.extend((oid, key, reserved_at) for oid, key in fresh)
        oid, key, _ = self._ahead.popleft()
        return [(oid, key)]
