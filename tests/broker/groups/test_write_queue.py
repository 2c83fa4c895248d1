"""A group's database writes run one at a time in the order they were queued, outlive a caller
that leaves, and report a refusal (the slot moved) whether or not anybody awaited the write."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable

import pytest

from tabletopic.broker.groups.store import Fence, GroupFenced
from tabletopic.broker.groups.write_queue import GroupWriteQueue


def _never_fenced(_conn: object) -> bool:
    return True


class Recorder:
    """A queue whose writes log what they do, and the refusals reported to it."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.started: collections.defaultdict[str, asyncio.Event] = collections.defaultdict(asyncio.Event)
        self.refused: list[tuple[str, Fence | None]] = []
        self.queue = GroupWriteQueue(lambda _group: _never_fenced, self._refused)

    def _refused(self, group_id: str, fence: Fence | None) -> None:
        self.refused.append((group_id, fence))

    def job(
        self, name: str, delay: float = 0.0, error: Exception | None = None
    ) -> Callable[[], Awaitable[None]]:
        """A write that takes ``delay`` seconds (the subject: a slow database) and may fail."""

        async def run() -> None:
            self.events.append(f"{name} start")
            self.started[name].set()
            await asyncio.sleep(delay)
            if error is not None:
                raise error
            self.events.append(f"{name} end")

        return run


async def test_a_groups_writes_run_one_at_a_time_in_queue_order_and_groups_do_not_wait_for_each_other() -> (
    None
):
    recorder = Recorder()
    slow = recorder.queue.enqueue("g", recorder.job("g1", delay=0.05))
    fast = recorder.queue.enqueue("g", recorder.job("g2"))
    other = recorder.queue.enqueue("h", recorder.job("h1"))
    await asyncio.gather(slow, fast, other)
    events = recorder.events
    assert events.index("g1 end") < events.index("g2 start")  # queued behind the slower write
    assert events.index("h1 end") < events.index("g1 end")  # another group's write ran meanwhile


async def test_a_failed_write_does_not_stop_the_next_one_of_its_group() -> None:
    recorder = Recorder()
    failed = recorder.queue.enqueue("g", recorder.job("g1", error=RuntimeError("database down")))
    after = recorder.queue.enqueue("g", recorder.job("g2"))
    await after
    assert failed.done() and isinstance(failed.exception(), RuntimeError)
    assert recorder.events[-1] == "g2 end"


async def test_only_the_last_queued_write_of_a_group_is_last() -> None:
    recorder = Recorder()
    first = recorder.queue.enqueue("g", recorder.job("g1"))
    assert recorder.queue.is_last("g", first)
    second = recorder.queue.enqueue("g", recorder.job("g2"))
    assert not recorder.queue.is_last("g", first) and recorder.queue.is_last("g", second)
    await recorder.queue.drain()
    assert not recorder.queue.is_last("g", second)  # done: nothing is queued for the group


async def test_a_refused_write_reports_its_fence_before_its_caller_sees_the_refusal() -> None:
    recorder = Recorder()

    async def refused(fence: Fence | None) -> None:
        assert fence is _never_fenced  # the fence of the group, decided when the write was queued
        raise GroupFenced("slot 3 moved")

    with pytest.raises(GroupFenced):
        await recorder.queue.write("g", refused)
    assert recorder.refused == [("g", _never_fenced)]


async def test_a_caller_that_leaves_does_not_cancel_the_write_and_its_refusal_is_still_reported() -> None:
    recorder = Recorder()
    write = recorder.queue.enqueue("g", recorder.job("g1", delay=0.05, error=GroupFenced("moved")))
    waiting = asyncio.ensure_future(recorder.queue.wait("g", _never_fenced, write))
    await recorder.started["g1"].wait()
    waiting.cancel()  # the client's connection closed
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await recorder.queue.drain()
    assert write.done() and not write.cancelled()
    assert recorder.events == ["g1 start"]  # it ran on, and failed by itself
    await asyncio.sleep(0)  # done callbacks run on the next loop iteration
    assert recorder.refused == [("g", _never_fenced)]


async def test_a_background_write_that_fails_is_logged_once_in_a_burst(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    for n in range(3):
        task = recorder.queue.enqueue("g", recorder.job(f"g{n}", error=RuntimeError("database down")))
        recorder.queue.in_background("g", None, task)
    with caplog.at_level(logging.WARNING, logger="tabletopic.broker.groups.write_queue"):
        await recorder.queue.drain()
        await asyncio.sleep(0)
    failures = [r for r in caplog.records if "nobody awaited failed" in r.getMessage()]
    assert len(failures) == 1 and "database down" in failures[0].getMessage()
    assert recorder.refused == []
