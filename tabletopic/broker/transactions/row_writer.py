"""The transaction coordinator's database writes, one at a time on one thread that keeps its
connection open.

A transaction row is written twice on every transaction's critical path (AddPartitionsToTxn and
EndTxn are answered once their row is durable), and the producer waits for each. Sent through
asyncio's default executor with a pool checkout per write, the hand-over cost about as much as a
small SQLite commit itself (``bench/txn_row_bench.py`` measures both ways). One thread also keeps
the writes of the rows in the order they were asked for, which the coordinator relies on anyway
(it holds the transactional id's lock across a write).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger(__name__)

T = TypeVar("T")

_Job = tuple[Callable[[Connection], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class RowWriter:
    """Runs ``fn(connection)`` in a database transaction on the writer thread, in call order. A
    database error drops the connection (the next write opens a new one): a PostgreSQL server
    restarted or a connection cut by the network is not retried with a dead socket."""

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._connection: Connection | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    async def run(self, fn: Callable[[Connection], T]) -> T:
        if self._closed:
            raise RuntimeError(f"{self._thread.name}: writer closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, loop, future))
        return await future

    async def close(self) -> None:
        """Finish the writes asked for, then stop the thread and close the connection."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, loop, future = job
            try:
                result = self._write(fn)
            except BaseException as exc:  # handed to the caller, whatever it is
                loop.call_soon_threadsafe(_fail, future, exc)
            else:
                loop.call_soon_threadsafe(_succeed, future, result)
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _write(self, fn: Callable[[Connection], T]) -> T:
        if self._connection is None:
            self._connection = self._engine.connect()
        connection = self._connection
        try:
            with connection.begin():
                return fn(connection)
        except sa.exc.DBAPIError:
            self._connection = None
            try:
                connection.close()
            except Exception as exc:  # already broken: nothing more to release
                log.debug("closing a failed writer connection: %s", exc)
            raise


def _succeed(future: asyncio.Future[T], result: T) -> None:
    if not future.done():  # the caller may have been cancelled meanwhile
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
