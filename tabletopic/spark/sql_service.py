"""The node's SQL endpoint: ``POST /v1/sql`` runs a statement in the node's own Spark session, or
in DuckDB over its catalog (``"engine": "duckdb"``, and ``"fresh": true`` for fresh reads).

A ``tabletopic sql`` that started Spark for itself paid 10-30 s per call (a JVM, the Iceberg runtime,
the catalog) while the node kept a warm session for its table pipeline. The node serves that session
here instead, so a query over a small table answers in about a second. Spark Connect would let any
PySpark use the session too, but pyspark 3.5 ships without its server (the ``spark-connect`` jar is a
separate Maven artifact, on no registry this project installs from), so the endpoint is plain HTTP:
a JSON request, newline-delimited JSON back (the column names first, then one array per row, values
as ``tabletopic sql`` prints them), through the admin listener with its authentication and roles
(a POST needs a read-write user, like any other change).

DuckDB statements (``tabletopic sql --engine duckdb`` and ``--fresh`` with a node up) run here for
the same reason: the CLI spent more than a second importing pyiceberg and pyarrow and opening the
catalog before its first row, which the node has done once. Each statement gets a DuckDB connection
of its own over the node's catalog (:class:`~tabletopic.table.ops.duck.DuckSession`), in a thread.

The session is the pipeline's: statements run beside ingest jobs on the same cores, and a long
query slows commits down. Statements are Spark SQL with the node's catalog as the default catalog.
Each runs in a new session of the same Spark (``newSession``: same cores, catalogs and caches, its
own SQL settings, temporary views and current namespace), so a ``SET`` or ``USE`` never changes
what the pipeline's jobs see, and nothing carries over from one statement to the next.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from tabletopic.table.ops.duck import DuckSession

log = logging.getLogger(__name__)

SQL_PATH = "/v1/sql"
MEDIA_TYPE = "application/x-ndjson"


class SqlRequest(BaseModel):
    statement: str = Field(description="One SQL statement (Spark SQL, or DuckDB's dialect).")
    limit: int | None = Field(default=None, ge=0, description="At most this many rows (none: all).")
    engine: Literal["spark", "duckdb"] = Field(default="spark", description="Where it runs.")
    fresh: bool = Field(
        default=False, description="DuckDB: table topics' tables with their uncommitted records."
    )


def sql_router(spark: Callable[[], Any] | None, duck: Callable[[bool], DuckSession]) -> APIRouter:
    """The ``/v1/sql`` routes over the session ``spark()`` returns (started on first use) and the
    DuckDB sessions ``duck(fresh)`` opens.

    Args:
        spark: the node's session provider (:func:`tabletopic.spark.session.node_spark` bound to
            the node's config and catalog); None on a node whose jobs run without Spark.
        duck: a new DuckDB session over the node's catalog (with fresh reads when asked).
    """
    router = APIRouter(prefix=SQL_PATH, tags=["sql"])

    @router.get("", summary="Which engines this node runs SQL in")
    async def describe() -> dict[str, Any]:
        from tabletopic.spark.session import session_start_seconds

        engines = ["spark", "duckdb"] if spark is not None else ["duckdb"]
        return {"engine": engines[0], "engines": engines, "started": session_start_seconds() is not None}

    @router.post("", summary="Run one SQL statement in the node's warm Spark session or in DuckDB")
    async def run(request: SqlRequest) -> Response:
        from tabletopic.spark.cli import short_error

        if request.engine == "duckdb" or request.fresh:
            return await _run_duckdb(duck, request)
        if spark is None:
            return JSONResponse({"detail": "this node runs no Spark: use the duckdb engine"}, status_code=400)
        try:
            frame = await asyncio.to_thread(lambda: spark().newSession().sql(request.statement))
        except Exception as exc:  # a statement Spark refuses: the user's error, told in Spark's words
            return JSONResponse({"detail": short_error(exc)}, status_code=400)
        return StreamingResponse(_lines(frame, request.limit), media_type=MEDIA_TYPE)

    return router


async def _run_duckdb(duck: Callable[[bool], DuckSession], request: SqlRequest) -> Response:
    from tabletopic.spark.cli import plain, short_error

    def start() -> tuple[DuckSession, list[str], Iterator[tuple[Any, ...]]]:
        session = duck(request.fresh)
        try:
            columns, rows = session.execute(request.statement)
        except Exception:
            session.close()
            raise
        return session, columns, rows

    try:
        session, columns, rows = await asyncio.to_thread(start)
    except Exception as exc:  # a statement DuckDB refuses, a tail the commit would stop on
        return JSONResponse({"detail": short_error(exc)}, status_code=400)

    def lines() -> Iterator[str]:
        try:
            yield json.dumps({"columns": columns}) + "\n"
            for count, row in enumerate(rows):
                if request.limit is not None and count >= request.limit:
                    break
                yield json.dumps([plain(v) for v in row], default=str) + "\n"
        except Exception as exc:
            yield json.dumps({"error": short_error(exc)}) + "\n"
        finally:
            session.close()

    return StreamingResponse(lines(), media_type=MEDIA_TYPE)


def _lines(frame: Any, limit: int | None) -> Iterator[str]:
    """The result as NDJSON: ``{"columns": [...]}``, then one JSON array per row; an error met while
    rows stream (the response has started) is the last line, ``{"error": "..."}``."""
    from tabletopic.spark.cli import plain, short_error

    yield json.dumps({"columns": list(frame.columns)}) + "\n"
    try:
        if not frame.columns:
            frame.collect()  # DDL ran at planning; nothing to show
            return
        rows = frame.limit(limit).collect() if limit is not None else frame.toLocalIterator()
        for row in rows:
            yield json.dumps([plain(v) for v in row], default=str) + "\n"
    except Exception as exc:
        log.info("SQL statement failed while streaming its rows: %s", short_error(exc))
        yield json.dumps({"error": short_error(exc)}) + "\n"
