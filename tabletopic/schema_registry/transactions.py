"""Transactions against the metadata database for the registry: reads on their own engine when
that helps (SQLite), writes retried on conflicts between nodes, driver errors turned into 50001."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from tabletopic import database
from tabletopic.schema_registry import db
from tabletopic.schema_registry.errors import ErrorCode, RegistryError

log = logging.getLogger(__name__)

T = TypeVar("T")
WRITE_ATTEMPTS = 6


def _store_error(doing: str, exc: DBAPIError) -> RegistryError:
    """50001, in the driver's words (the client need not see the registry's SQL)."""
    return RegistryError(
        ErrorCode.STORE_ERROR, f"Error while {doing} the registry store: {database.driver_message(exc)}"
    )


class RegistryDatabase:
    """The registry's access to its tables.

    Args:
        engine: the shared metadata engine; every write goes through it.
        read_engine: an engine for reads only (see :func:`.db.sqlite_read_engine`); defaults
            to ``engine``.
        write_engine: an engine for writes (see :func:`.db.sqlite_write_engine`); defaults to
            ``engine``.
    """

    def __init__(
        self, engine: Engine, read_engine: Engine | None = None, write_engine: Engine | None = None
    ) -> None:
        self._shared = engine
        self.engine = write_engine or engine
        self.read_engine = read_engine or engine
        # SQLite's BEGIN IMMEDIATE already serializes writers: the counter's row lock is for
        # PostgreSQL (and costs a statement per write on SQLite).
        self._lock_rows = self.engine.dialect.name != "sqlite"
        self._group_lock = threading.Lock()
        self._pending: list[_Pending[Any]] = []
        self._leading = False

    def close(self) -> None:
        """Release the registry's own engines (the shared one is the caller's)."""
        for own in {self.read_engine, self.engine} - {self._shared}:
            own.dispose()

    # --- transactions ------------------------------------------------------------------------------

    def _read(self, fn: Callable[[Connection], T]) -> T:
        try:
            with self.read_engine.connect() as conn:
                return fn(conn)
        except DBAPIError as exc:
            raise _store_error("reading", exc) from exc

    def _write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction, retrying conflicts between nodes (a unique key taken by a
        concurrent writer, a serialization failure, SQLite's busy lock)."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    # Every registry write takes the id counter's row lock first, so writes from
                    # all nodes are serialized: a delete can never slip between a registration's
                    # reference check and its commit (PostgreSQL runs READ COMMITTED).
                    if self._lock_rows:
                        db.lock_ids(conn)
                    return fn(conn)
            except (IntegrityError, OperationalError) as exc:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise _store_error("writing", exc) from exc
                log.debug("registry write conflict, retrying: %s", exc)
                time.sleep(0.01 * 2**attempt)
            except DBAPIError as exc:
                raise _store_error("writing", exc) from exc
        raise AssertionError("unreachable")

    def _write_grouped(self, fn: Callable[[Connection], T]) -> T:
        """Like :meth:`_write`, but concurrent callers share one transaction and one commit.

        A commit waits for the disk (an fsync for SQLite): one per registration caps a node at a
        few hundred a second however many clients there are. Here the first caller leads: it runs
        every queued ``fn`` in one transaction, each inside its own savepoint so one refusal
        (a :class:`RegistryError`) undoes only its own work, commits once and hands each caller its
        result; callers that arrived meanwhile form the next batch. Each ``fn`` runs as if alone:
        it sees the writes of those before it in the batch.
        """
        item: _Pending[T] = _Pending(fn)
        with self._group_lock:
            self._pending.append(item)
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._lead()
        return item.outcome()

    def _lead(self) -> None:
        while True:
            with self._group_lock:
                batch, self._pending = self._pending, []
                if not batch:
                    self._leading = False
                    return
            try:
                self._write(functools.partial(self._run_batch, batch=batch))
            except BaseException as exc:
                # The whole batch failed (a store error): every caller hears it. Anything else
                # than an Exception still propagates, but no caller is left waiting.
                with self._group_lock:
                    stranded = [] if isinstance(exc, Exception) else self._pending
                    if stranded:
                        self._pending, self._leading = [], False
                for item in [*batch, *stranded]:
                    item.fail(exc)
                if not isinstance(exc, Exception):
                    raise
            else:
                for item in batch:
                    item.release()

    @staticmethod
    def _run_batch(conn: Connection, *, batch: list[_Pending[Any]]) -> None:
        if len(batch) == 1:
            # Alone, a refusal may undo the whole transaction: no savepoint (two statements) needed.
            # The RegistryError leaves the transaction, which rolls back, and reaches the caller.
            batch[0].result = batch[0].fn(conn)
            return
        for item in batch:
            savepoint = conn.begin_nested()
            try:
                item.result = item.fn(conn)
                item.error = None
            except RegistryError as exc:
                savepoint.rollback()
                item.error = exc
            else:
                savepoint.commit()


class _Pending(Generic[T]):
    """One caller's work in a group commit, and the event it waits on."""

    def __init__(self, fn: Callable[[Connection], T]) -> None:
        self.fn = fn
        self.result: T | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    def release(self) -> None:
        self._done.set()

    def fail(self, exc: BaseException) -> None:
        self.error = exc
        self._done.set()

    def outcome(self) -> T:
        self._done.wait()
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]
