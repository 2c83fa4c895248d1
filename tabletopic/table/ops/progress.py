"""Progress callbacks of a ``tables verify`` run, apart from the verify module so the CLI can draw
them without importing what a verify run needs (pyiceberg, numpy) before it runs one."""

from __future__ import annotations


class VerifyProgress:
    """Progress callbacks of a verify run (no-ops; the CLI draws bars)."""

    def start_topic(self, total: int) -> None: ...

    def topic(self, records: int) -> None: ...

    def start_table(self, total: int) -> None: ...

    def table(self, rows: int) -> None: ...
