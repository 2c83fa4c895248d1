"""Running and stopping background tasks the same way everywhere."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

log = logging.getLogger(__name__)

# Work carried on after its caller was cancelled (:func:`to_the_end`): referenced here until it
# ends, since the loop keeps only weak references to tasks.
_carried_on: set[asyncio.Task[Any]] = set()


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel ``tasks`` (None entries are skipped) and wait until every one has finished.

    The tasks' own cancellations and failures are not raised (they are being stopped), but a
    cancellation of the caller still is: ``gather`` only absorbs its children's exceptions.
    """
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


def to_the_end(work: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """``work`` as a coroutine function that runs to its end even when its caller is cancelled.

    The server lets a closed connection's requests finish, but a caller can still be cancelled half
    way: a component stopping, a caller that bounds its wait. Work that changes state in memory and
    then in a database must not stop between the two: the memory would say what the database does
    not, and the client's retry on a new connection would be answered from it. Shielded, the work
    goes on and only its answer is lost, as when the answer itself is lost on the way. A failure of
    work that outlived its caller is logged, since no one else sees it."""

    @functools.wraps(work)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        task = asyncio.ensure_future(work(*args, **kwargs))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                _carried_on.add(task)
                task.add_done_callback(functools.partial(_carried_to_the_end, work.__qualname__))
            raise

    return run


def _carried_to_the_end(what: str, task: asyncio.Task[Any]) -> None:
    _carried_on.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.info("%s went on after its caller was cancelled, and failed: %r", what, exc)


async def set_or_timeout(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set or ``timeout_s`` has passed.

    Not ``asyncio.wait_for(event.wait(), ...)``: on Python 3.11, when the event is set in the same
    loop iteration as the waiting task is cancelled, ``wait_for`` returns normally and the
    cancellation is lost; a loop around it never stops, and whoever waits for it to (a node's
    stop) waits until it is killed. ``asyncio.timeout`` cancels only on its own expiry.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


async def woken(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set or ``timeout_s`` has passed, then clear it: a polling loop's
    sleep that a wake-up cuts short (a wake-up during the pass that follows is not lost)."""
    await set_or_timeout(event, timeout_s)
    event.clear()


async def gather_at_most(limit: int, works: Iterable[Callable[[], Awaitable[T]]]) -> list[T]:
    """The results of ``works`` in order, at most ``limit`` of them running at a time: reads of
    many streams at once (a new leader rebuilding the state of thousands of partitions) without
    holding every read's data in memory together."""
    gate = asyncio.Semaphore(limit)

    async def run(work: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await work()

    return await asyncio.gather(*(run(work) for work in works))


async def first_of(waits: Iterable[asyncio.Future[Any]], timeout_s: float) -> None:
    """Wait until any of ``waits`` is done or ``timeout_s`` has passed (no wait at all: sleep it
    out), then cancel the others: a long poll's "until something changes", which leaves no waiter
    behind on the events it did not need."""
    pending = list(waits)
    if not pending:
        await asyncio.sleep(timeout_s)
        return
    try:
        await asyncio.wait(pending, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in pending:
            if not future.done():
                future.cancel()


async def run_every(
    interval: Callable[[], float],
    one_pass: Callable[[], Awaitable[Any]],
    what: str,
    log: logging.Logger,
) -> None:
    """Run ``one_pass`` after every ``interval()`` seconds (asked before each wait, so a changed
    setting applies from the next one) until cancelled. A pass that fails is logged on ``log`` as
    ``what`` and the next one runs after the next interval: one bad pass never stops the loop."""
    while True:
        await asyncio.sleep(interval())
        try:
            await one_pass()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s pass failed; retrying next interval", what)


class StallReport:
    """Logs what a shutdown still waits on when it takes longer than it should.

    A stop that hangs ends in the supervisor's SIGKILL with nothing in the log to say why. After
    ``after_s`` this names every pending asyncio task with the line it waits at, and dumps every
    thread's stack (``faulthandler``), once. It runs on a thread of its own so that it reports even
    when the event loop itself is blocked."""

    def __init__(self, what: str, after_s: float, log: logging.Logger) -> None:
        self.what = what
        self.after_s = after_s
        self.log = log
        self._done = threading.Event()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._watch, name=f"stall-report-{what}", daemon=True)

    def __enter__(self) -> StallReport:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._done.set()

    def _watch(self) -> None:
        if self._done.wait(self.after_s):
            return
        self.log.warning(
            "%s still running after %.0f s; it waits on:\n%s", self.what, self.after_s, self.pending_tasks()
        )
        faulthandler.dump_traceback(all_threads=True)

    def pending_tasks(self) -> str:
        """A line per unfinished task of the loop: its name and the chain of awaits it is
        suspended in, outermost first (``Task.get_stack`` gives only the task's own frame)."""
        for _ in range(3):  # the loop may change its task set while it is read from here
            try:
                tasks = list(asyncio.all_tasks(self._loop))
                break
            except RuntimeError:
                continue
        else:
            return "  (the loop's tasks could not be read)"
        lines = []
        for task in tasks:
            try:  # read from another thread while the loop may resume the task: best effort
                where = awaits_of(task.get_coro())
            except Exception as exc:
                where = f"? ({exc})"
            lines.append(f"  {task.get_name()}: {where}")
        return "\n".join(sorted(lines)) or "  (no tasks)"


def awaits_of(coroutine: object, most: int = 12) -> str:
    """Where a suspended coroutine waits: ``file:line function`` of each coroutine it awaits
    through (``cr_await``), outermost first; past ``most`` levels, only the innermost ones."""
    places: list[str] = []
    current: Any = coroutine
    while current is not None:
        frame = getattr(current, "cr_frame", None) or getattr(current, "gi_frame", None)
        if frame is None:
            places.append(type(current).__name__)  # a future or another awaitable: the end
            break
        code = frame.f_code
        places.append(f"{Path(code.co_filename).name}:{frame.f_lineno} {code.co_name}")
        current = getattr(current, "cr_await", None) or getattr(current, "gi_yieldfrom", None)
    if len(places) > most:
        places = ["…", *places[-most:]]
    return " > ".join(places)
