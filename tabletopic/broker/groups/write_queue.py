"""Each group's database writes, one at a time, in the order the coordinator decided them.

A group's writes (membership snapshots, KIP-848 group state, offset commits and deletions, the
group's deletion) are queued behind the group's last one at the moment the state machine decides
them, not when they get to run: so a membership snapshot emitted before a DeleteGroups can never
land after it, and a held-back answer that follows a write is released only after it. Groups do
not wait for each other.

A write outlives its caller: a cancelled caller (a broker stopping, a held request's wait) is
cancelled without the write, and its outcome is still handled. In a cluster a write carries the fence of
the coordinator slot it was decided under (:mod:`.cluster`); a refused one (:class:`GroupFenced`)
is reported to ``fenced``, which drops the slot, whether or not anybody awaited the write.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from tabletopic.broker.groups.store import Fence, GroupFenced
from tabletopic.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
# A database that is down fails every write of every group until it is back.
WRITE_FAILED_LOG = RateLimitedLog(log, interval_s=10.0)


class GroupWriteQueue:
    """The queues of every group's writes.

    Args:
        fence_of: the fence a write of a group decided now carries (None on a single node).
        fenced: called with the group and the fence when a write of the group was refused.
    """

    def __init__(
        self,
        fence_of: Callable[[str], Fence | None],
        fenced: Callable[[str, Fence | None], None],
    ) -> None:
        self._fence_of = fence_of
        self._fenced = fenced
        self._tails: dict[str, asyncio.Task[None]] = {}  # each group's last queued write
        self._running: set[asyncio.Task[None]] = set()

    def enqueue(self, group_id: str, job: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Queue ``job`` behind the writes of ``group_id`` queued before it; its place is taken
        now, synchronously."""
        previous = self._tails.get(group_id)

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])  # its outcome belongs to its own caller
            await job()

        task: asyncio.Task[None] = asyncio.ensure_future(run())
        self._tails[group_id] = task
        self._running.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._running.discard(finished)
            if self._tails.get(group_id) is finished:
                del self._tails[group_id]

        task.add_done_callback(done)
        return task

    def is_last(self, group_id: str, task: asyncio.Task[None]) -> bool:
        """Whether ``task`` is the last write queued for ``group_id`` (nothing queued after it
        would be overtaken by what it writes)."""
        return self._tails.get(group_id) is task

    async def write(self, group_id: str, job: Callable[[Fence | None], Awaitable[None]]) -> None:
        """Run ``job`` with the fence of ``group_id`` decided now, queued, and wait for it.

        Raises:
            GroupFenced: the write was refused (``fenced`` was called first).
        """
        fence = self._fence_of(group_id)
        await self.wait(group_id, fence, self.enqueue(group_id, lambda: job(fence)))

    async def wait(self, group_id: str, fence: Fence | None, write: asyncio.Task[None]) -> None:
        """Wait for a queued write, shielded: a cancelled caller leaves the write running and its
        end to :meth:`in_background`.

        Raises:
            GroupFenced: the write was refused (``fenced`` was called first).
        """
        try:
            await asyncio.shield(write)
        except GroupFenced:
            self._fenced(group_id, fence)
            raise
        except asyncio.CancelledError:
            self.in_background(group_id, fence, write)
            raise

    def in_background(self, group_id: str, fence: Fence | None, write: asyncio.Task[None]) -> None:
        """Handle the end of a write nobody awaits: a refusal is reported to ``fenced``, any other
        failure is logged (rate-limited a group)."""
        write.add_done_callback(functools.partial(self._ended_unawaited, group_id, fence))

    def _ended_unawaited(self, group_id: str, fence: Fence | None, write: asyncio.Task[None]) -> None:
        if write.cancelled():
            return
        error = write.exception()
        if isinstance(error, GroupFenced):
            self._fenced(group_id, fence)
        elif error is not None:
            message = "a write of group %s that nobody awaited failed: %s"
            WRITE_FAILED_LOG.warning(group_id, message, group_id, error)

    async def drain(self) -> None:
        """Wait for every queued write to end (the coordinator is stopping)."""
        if self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)
