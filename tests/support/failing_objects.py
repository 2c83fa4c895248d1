"""A real object store whose PUTs can be made to fail, as an unreachable or flaky S3 would: every
PUT while ``broken``, or only the next one once ``fail_next`` is set. Reads and everything else go
to the real store."""

from __future__ import annotations

from typing import Any

from tabletopic.s3stream.streams import StorageUnavailable


class FailingPuts:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.description = inner.description
        self.broken = False  # every PUT fails (connection refused)
        self.fail_next = False  # the next PUT fails, then they succeed again (connection reset)
        self.refused = 0  # PUTs failed so far

    def put(self, key: str, data: Any) -> None:
        if self.broken or self.fail_next:
            reason = "connection refused" if self.broken else "connection reset"
            self.fail_next = False
            self.refused += 1
            raise StorageUnavailable(f"PUT {key} failed on {self.description}: {reason}")
        self.inner.put(key, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
