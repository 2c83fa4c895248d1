"""Transactions against the metadata database for the registry: reads on their own engine when
that helps (SQLite), writes retried on conflicts between nodes, driver errors turned into 50001."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from tabletopic.schema_registry import db
from tabletopic.schema_registry.errors import ErrorCode, RegistryError

log = logging.getLogger(__name__)

T = TypeVar("T")
WRITE_ATTEMPTS = 6


class RegistryDatabase:
    """The registry's access to its tables.

    Args:
        engine: the shared metadata engine; every write goes through it.
        read_engine: an engine for reads only (see :func:`.db.sqlite_read_engine`); defaults
            to ``engine``.
    """

    def __init__(self, engine: Engine, read_engine: Engine | None = None) -> None:
        self.engine = engine
        self.read_engine = read_engine or engine

    def close(self) -> None:
        """Release the read engine if it is the registry's own (the write engine is the caller's)."""
        if self.read_engine is not self.engine:
            self.read_engine.dispose()

    # --- transactions ------------------------------------------------------------------------------

    def _read(self, fn: Callable[[Connection], T]) -> T:
        try:
            with self.read_engine.connect() as conn:
                return fn(conn)
        except DBAPIError as exc:
            raise RegistryError(
                ErrorCode.STORE_ERROR, f"Error while reading the registry store: {exc}"
            ) from exc

    def _write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` in one transaction, retrying conflicts between nodes (a unique key taken by a
        concurrent writer, a serialization failure, SQLite's busy lock)."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    # Every registry write takes the id counter's row lock first, so writes from
                    # all nodes are serialized: a delete can never slip between a registration's
                    # reference check and its commit (PostgreSQL runs READ COMMITTED).
                    db.lock_ids(conn)
                    return fn(conn)
            except (IntegrityError, OperationalError) as exc:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise RegistryError(
                        ErrorCode.STORE_ERROR, f"Error while writing the registry store: {exc}"
                    ) from exc
                log.debug("registry write conflict, retrying: %s", exc)
                time.sleep(0.01 * 2**attempt)
            except DBAPIError as exc:
                raise RegistryError(
                    ErrorCode.STORE_ERROR, f"Error while writing the registry store: {exc}"
                ) from exc
        raise AssertionError("unreachable")
