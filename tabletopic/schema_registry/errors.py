"""Confluent's error codes in one table, and the one exception every registry layer raises.

Clients key on both the HTTP status and ``error_code`` (confluent-kafka maps 40401/40403 to "not
found" and retries nothing else), so both live together here and nowhere else.
"""

from __future__ import annotations

from enum import Enum


class ErrorCode(Enum):
    """``(error_code, http_status)`` pairs as Confluent's schema registry answers them."""

    SUBJECT_NOT_FOUND = (40401, 404)
    VERSION_NOT_FOUND = (40402, 404)
    SCHEMA_NOT_FOUND = (40403, 404)
    SUBJECT_SOFT_DELETED = (40404, 404)
    SUBJECT_NOT_SOFT_DELETED = (40405, 404)
    VERSION_SOFT_DELETED = (40406, 404)
    VERSION_NOT_SOFT_DELETED = (40407, 404)
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED = (40408, 404)
    SUBJECT_MODE_NOT_CONFIGURED = (40409, 404)
    # What Confluent's REST layer answers for a resource it does not serve.
    NOT_SUPPORTED = (404, 404)
    INCOMPATIBLE_SCHEMA = (40901, 409)
    REQUEST_TOO_LARGE = (41301, 413)
    INVALID_SCHEMA = (42201, 422)
    INVALID_VERSION = (42202, 422)
    INVALID_COMPATIBILITY_LEVEL = (42203, 422)
    INVALID_MODE = (42204, 422)
    OPERATION_NOT_PERMITTED = (42205, 422)
    REFERENCE_EXISTS = (42206, 422)
    INVALID_SUBJECT = (42208, 422)
    INVALID_RULESET = (42210, 422)
    CONTEXT_NOT_EMPTY = (42211, 422)
    STORE_ERROR = (50001, 500)

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def status(self) -> int:
        return self.value[1]


class RegistryError(Exception):
    """A failure the client caused or must hear about, carrying the Confluent code to answer with."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(ErrorCode.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def level_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        ErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
        f"Subject '{subject}' does not have subject-level compatibility configured",
    )


def mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        ErrorCode.SUBJECT_MODE_NOT_CONFIGURED,
        f"Subject '{subject}' does not have subject-level mode configured",
    )


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(ErrorCode.VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    if schema_id is None:
        return RegistryError(ErrorCode.SCHEMA_NOT_FOUND, "Schema not found")
    return RegistryError(ErrorCode.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: {detail}")


def invalid_subject(subject: str, why: str) -> RegistryError:
    shown = subject if len(subject) <= 80 else subject[:77] + "..."
    return RegistryError(ErrorCode.INVALID_SUBJECT, f"Invalid subject {shown!r}: {why}")


def invalid_version(raw: str) -> RegistryError:
    return RegistryError(
        ErrorCode.INVALID_VERSION,
        f"The specified version '{raw}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )
