"""Small helpers shared by handler modules."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

log = logging.getLogger("tabletopic.broker.handlers")

ZERO_UUID = uuid.UUID(int=0)


def field(request: Any, name: str, default: Any = None) -> Any:
    """A request field that only some versions have."""
    return getattr(request, name, default)


def error_fields(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}
