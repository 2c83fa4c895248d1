"""One error type for a record batch that cannot be accepted or decoded.

The codec does not speak Kafka's wire error codes: it says what kind of fault it found, and each
caller maps that to its own answer (the broker to a Produce error code, the table pipeline to a
per-batch error beside the decoded rows).
"""

from __future__ import annotations

from enum import Enum


class BatchFault(Enum):
    """What is wrong with a batch, coarse enough for a caller to pick its response by."""

    CORRUPT = "corrupt"
    """Bytes that do not form a batch: truncation, a bad length, a CRC mismatch, undecodable data."""

    UNSUPPORTED_FORMAT = "unsupported_format"
    """A well-formed batch of an older message format (magic 0 or 1)."""

    INVALID_RECORD = "invalid_record"
    """A readable batch whose record count or offsets break the format's rules."""


class RecordBatchError(ValueError):
    """A batch that cannot be accepted or decoded; ``fault`` says what kind of problem it is."""

    def __init__(self, message: str, fault: BatchFault = BatchFault.CORRUPT) -> None:
        super().__init__(message)
        self.fault = fault
