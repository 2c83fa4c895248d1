"""A throwaway PostgreSQL server (Debian's ``postgresql`` package) on a random loopback port: the
package's own :class:`tabletopic.cluster.local.PostgresServer` (``tabletopic cluster up`` uses it
too), in a fresh temporary directory by default."""

from __future__ import annotations

import os
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tabletopic.cluster import local
from tabletopic.cluster.local import postgres_bin_dir
from tests.support.processes import descendants

__all__ = ["PostgresServer", "postgres_bin_dir"]


@dataclass
class PostgresServer(local.PostgresServer):
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tabletopic-pg-")))

    def restart(self) -> None:
        """Restart as an operator does: a fast shutdown (every client disconnected, statements under
        way aborted with AdminShutdown), then the same data on the same port. The SIGTERM of a plain
        terminate would be a smart shutdown, which waits for the brokers' connections forever."""
        self.shut_down()
        self.start(self.port)

    def pause(self) -> list[int]:
        """Freeze the whole server, as a stalled disk or a paused VM freezes it: SIGSTOP to the
        postmaster and to every backend (a backend serves its session on its own, so stopping the
        postmaster alone would stop only new connections). Returns the processes for
        :meth:`resume`."""
        postmaster = self.postmaster_pid()
        frozen = [postmaster, *descendants(postmaster)]
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        return frozen

    @staticmethod
    def resume(frozen: list[int]) -> None:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
