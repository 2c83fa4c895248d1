"""Every failure leaves the API as Confluent's ``{"error_code": N, "message": "…"}``, never
FastAPI's default body and never a bare 500. Handlers are registered once, here."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from tabletopic.schema_registry.errors import ErrorCode, RegistryError
from tabletopic.schema_registry.routers.models import RegistryJSONResponse

log = logging.getLogger(__name__)


def _validation_code(path: str) -> ErrorCode:
    """Which Confluent code a malformed body earns depends on what the body was for."""
    if path.startswith("/config"):
        return ErrorCode.INVALID_COMPATIBILITY_LEVEL
    if path.startswith("/mode"):
        return ErrorCode.INVALID_MODE
    return ErrorCode.INVALID_SCHEMA


def _describe(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        message = str(error.get("msg", "invalid"))
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    async def registry_error(_request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, RegistryError)
        return RegistryJSONResponse(exc.body(), status_code=exc.error.status)

    async def validation_error(request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, RequestValidationError)
        code = _validation_code(request.url.path)
        message = _describe(exc)
        for error in exc.errors():
            if error.get("type") == "json_invalid":
                message = f"Invalid JSON in request body: {error.get('ctx', {}).get('error', 'malformed')}"
        return RegistryJSONResponse({"error_code": code.code, "message": message}, status_code=code.status)

    async def http_error(request: Request, exc: Exception) -> RegistryJSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:
            # FastAPI's answer when a body cannot be decoded at all (e.g. JSON nested past the
            # parser's recursion limit): for Confluent that is an unprocessable request.
            code = _validation_code(request.url.path)
            return RegistryJSONResponse(
                {"error_code": code.code, "message": "Invalid request body: it cannot be decoded as JSON"},
                status_code=code.status,
            )
        reason = exc.detail if isinstance(exc.detail, str) else "error"
        return RegistryJSONResponse(
            {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {reason}"},
            status_code=exc.status_code,
            headers=exc.headers,
        )

    async def unexpected(_request: Request, exc: Exception) -> RegistryJSONResponse:
        log.exception("schema registry request failed", exc_info=exc)
        return RegistryJSONResponse(
            {"error_code": ErrorCode.STORE_ERROR.code, "message": f"Internal error: {type(exc).__name__}"},
            status_code=500,
        )

    app.add_exception_handler(RegistryError, registry_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)
