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
        postmaster = int((self.directory / "data" / "postmaster.pid").read_text().split()[0])
        frozen = [postmaster, *_descendants(postmaster)]
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


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc (children before theirs)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The parent pid is the 2nd field after the command, which may hold spaces: split
                # after its closing parenthesis.
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found
