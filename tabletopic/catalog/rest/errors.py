"""The REST catalog's error responses: every failure, whoever caused it, answers with the spec's
``{"error": {"message", "type", "code"}}`` body.

Clients pick their exception from ``type`` and status (Iceberg Java's ``ErrorHandlers`` do; Spark,
for example, needs a real ``NoSuchTableException`` 404 when it probes ``db.t.snapshots`` for a
metadata table), so the mapping below is part of the protocol. Bad input is always a 4xx with
``BadRequestException``, never FastAPI's default 422 body.
"""

from __future__ import annotations

import errno
import json
import logging
from typing import Any

import pydantic
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pyiceberg import exceptions as ice
from starlette.exceptions import HTTPException as StarletteHTTPException

from tabletopic import database

log = logging.getLogger(__name__)


class RestCatalogError(Exception):
    """An error the catalog answers with a given status and spec error type."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


class BadRequest(RestCatalogError):
    """The client sent something malformed (400 BadRequestException)."""

    def __init__(self, message: str) -> None:
        super().__init__(400, "BadRequestException", message)


# (exception classes, HTTP status, spec error type), tried in order: a row must stand above any row
# holding a base class of its own. pyiceberg's exceptions carry the backing catalog's verdict
# (SqlCatalog, GlueCatalog, HiveCatalog all raise these), so one table translates every backend.
ERROR_TABLE: tuple[tuple[tuple[type[Exception], ...], int, str], ...] = (
    ((ice.NoSuchTableError,), 404, "NoSuchTableException"),
    ((ice.NoSuchNamespaceError,), 404, "NoSuchNamespaceException"),
    ((ice.NoSuchViewError,), 404, "NoSuchViewException"),
    (
        (ice.TableAlreadyExistsError, ice.NamespaceAlreadyExistsError, ice.ViewAlreadyExistsError),
        409,
        "AlreadyExistsException",
    ),
    ((ice.NamespaceNotEmptyError,), 409, "NamespaceNotEmptyException"),
    ((ice.CommitFailedException,), 409, "CommitFailedException"),
    ((ice.CommitStateUnknownException,), 500, "CommitStateUnknownException"),
    ((NotImplementedError,), 406, "UnsupportedOperationException"),
    # pyiceberg signals invalid identifiers and impossible metadata updates with ValueError.
    (
        (
            ice.NoSuchPropertyException,
            ice.ValidationError,
            pydantic.ValidationError,
            json.JSONDecodeError,
            ValueError,
            KeyError,
            # A value the metadata database refuses (PostgreSQL: a NUL in a property).
            sqlalchemy.exc.DataError,
        ),
        400,
        "BadRequestException",
    ),
)


def error_body(status: int, error_type: str, message: str) -> dict[str, dict[str, object]]:
    return {"error": {"message": message, "type": error_type, "code": status}}


def error_response(status: int, error_type: str, message: str) -> Response:
    return JSONResponse(error_body(status, error_type, message), status_code=status)


def classify(exc: BaseException) -> tuple[int, str, str]:
    """Status, error type and message for any exception raised while serving a request."""
    if isinstance(exc, RestCatalogError):
        return exc.status, exc.error_type, exc.message
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        return 400, "BadRequestException", "a name or location is too long for the file system"
    if isinstance(exc, RecursionError):
        return 400, "BadRequestException", "request nests too deeply"
    for classes, status, error_type in ERROR_TABLE:
        if isinstance(exc, classes):
            return status, error_type, _message(exc)
    # The log has the details; the client is not told the node's paths or internals.
    return 500, "ServiceFailureException", f"internal error ({type(exc).__name__}); see the catalog's log"


def _message(exc: BaseException) -> str:
    if isinstance(exc, pydantic.ValidationError):
        details = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:5]
        )
        return f"malformed request: {details}"
    if isinstance(exc, sqlalchemy.exc.DataError):
        return f"a value cannot be stored: {database.driver_message(exc)}"
    text = str(exc) or type(exc).__name__
    return text.strip("'\"") if isinstance(exc, KeyError) else text


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers once for the whole app (no per-route try/except)."""

    async def on_error(_request: Request, exc: Exception) -> Response:
        status, error_type, message = classify(exc)
        if status >= 500:
            log.error("REST catalog request failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
        return error_response(status, error_type, message)

    async def on_http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        kinds = {404: "NotFoundException", 405: "MethodNotAllowedException"}
        return error_response(exc.status_code, kinds.get(exc.status_code, "RESTException"), str(exc.detail))

    async def on_validation_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        parts = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
        return error_response(400, "BadRequestException", "malformed request: " + "; ".join(parts))

    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    # Known classes go to Starlette's ExceptionMiddleware (answered quietly); a bare ``Exception``
    # handler alone would run in ServerErrorMiddleware, which re-raises and logs every 404 as a crash.
    app.add_exception_handler(RestCatalogError, on_error)
    for classes, _status, _type in ERROR_TABLE:
        for cls in classes:
            app.add_exception_handler(cls, on_error)

    @app.middleware("http")
    async def last_resort(request: Request, call_next: Any) -> Response:
        # Anything no handler above claimed: answer in the spec's shape here, because Starlette's
        # catch-all re-raises after responding and uvicorn then drops the client's keep-alive
        # connection, failing its next, unrelated request too.
        try:
            response: Response = await call_next(request)
            return response
        except Exception as exc:
            return await on_error(request, exc)
