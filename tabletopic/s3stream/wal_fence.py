"""The fence of a shared WAL directory: who may acknowledge appends written to it.

A shared WAL (``s3stream.wal.mode=shared``) lives on storage other brokers reach, so that one of
them can take it over when its broker dies. The broker that takes over must be sure the deposed
writer (paused, partitioned away, not dead) acknowledges nothing it did not see. The only tools
assumed are what NFS gives: fsync, atomic rename, exclusive create and close-to-open consistency
(a file opened after another client closed it shows that client's writes); no ``flock``.

One small file, ``OWNER``, says who that is: ``writer <node> <incarnation> <host> <pid>`` while
its broker writes, ``fenced ...`` with the recoverer's identity once a recoverer has taken it. The
last fencer wins: a recoverer checks after reading the segments that the fence is still its own.
Both sides replace it whole (write a temporary file created exclusively, fsync it, rename it over
``OWNER``, fsync the directory), so a reader sees one token or the other, never a mix.

- The writer re-reads ``OWNER`` by path (open, read, close: close-to-open makes the open see the
  server's current file) after every fsync and before acknowledging the group; another token means
  it was fenced, and it fails the group and every later one.
- The recoverer writes its ``fenced`` token before it opens any segment.

If the writer's check saw its own token, the check's open came before the recoverer's rename, and
the group's fsync before that: the group is on stable storage before the recoverer reads, so the
recovery replays it. If the check came after the rename, it sees the fence and the group is never
acknowledged. See docs/cluster.md for the whole argument.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tabletopic.s3stream.direct_io import fsync_directory
from tabletopic.s3stream.streams import StreamFenced

OWNER = "OWNER"


class Role(StrEnum):
    WRITER = "writer"  # the broker whose WAL this is writes and acknowledges
    FENCED = "fenced"  # a recoverer took the WAL over: nobody acknowledges anything in it


class TakeoverLost(Exception):
    """Another recoverer (or the broker itself, restarted) fenced the WAL after this one: it
    commits nothing and leaves the takeover to the last fencer."""


class WalFenced(StreamFenced):
    """This broker's shared WAL was taken over by another broker: nothing more is acknowledged."""


@dataclass(frozen=True, slots=True)
class WalToken:
    """One ``OWNER`` content: the role, the broker id and the WAL incarnation (the directory name a
    broker start chose), with host and process: two tokens are the same holder only if all agree."""

    role: Role
    node_id: int
    incarnation: str
    host: str = ""
    pid: int = 0

    def text(self) -> str:
        return f"{self.role.value} {self.node_id} {self.incarnation} {self.host or '-'} {self.pid}\n"

    @classmethod
    def parse(cls, text: str) -> WalToken | None:
        parts = text.split()
        if len(parts) != 5 or parts[0] not in Role.__members__.values():
            return None
        try:
            return cls(Role(parts[0]), int(parts[1]), parts[2], parts[3], int(parts[4]))
        except ValueError:
            return None

    @classmethod
    def here(cls, role: Role, node_id: int, incarnation: str) -> WalToken:
        """A token for this process."""
        return cls(role, node_id, incarnation, socket.gethostname(), os.getpid())

    def same_holder(self, other: WalToken | None) -> bool:
        return other is not None and (self.role, self.node_id, self.incarnation, self.host, self.pid) == (
            other.role,
            other.node_id,
            other.incarnation,
            other.host,
            other.pid,
        )

    def describe(self) -> str:
        return f"broker {self.node_id} (WAL {self.incarnation}, {self.host} pid {self.pid})"


class WalFence:
    """The ``OWNER`` file of one shared WAL directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / OWNER

    def read(self) -> WalToken | None:
        """The current token (None: no file, or one this version cannot read). Opens the file by
        path each time: on NFS the open revalidates, so a rename by another client is seen."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
        return WalToken.parse(data.decode("ascii", "replace"))

    def write(self, token: WalToken) -> None:
        """Replace ``OWNER`` with ``token`` atomically and durably (temporary file created
        exclusively, fsynced, renamed over, directory fsynced)."""
        # Not ``parents``: a recoverer whose shared mount is missing must fail, not write locally
        # (the directory itself may be gone: a recovered WAL is deleted).
        self.directory.mkdir(exist_ok=True)
        temporary = self.directory / f"{OWNER}.{token.role.value}.{token.node_id}.{os.getpid()}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # left by an earlier attempt of this same process and token
            temporary.unlink()
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, token.text().encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        fsync_directory(self.directory)

    def claim(self, token: WalToken) -> None:
        """A writer takes the directory (after its own recovery of what an earlier incarnation
        left in it)."""
        assert token.role is Role.WRITER
        self.write(token)

    def fence(self, token: WalToken) -> None:
        """A recoverer takes the directory: from the moment this returns, the writer acknowledges
        nothing more (see the module docstring). Call before opening any segment."""
        assert token.role is Role.FENCED
        self.write(token)

    def check(self, token: WalToken) -> None:
        """The writer's check after each fsync, before acknowledging.

        Raises:
            WalFenced: ``OWNER`` holds another token (a recoverer fenced this WAL).
        """
        current = self.read()
        if not token.same_holder(current):
            holder = "nobody" if current is None else f"{current.role.value} {current.describe()}"
            raise WalFenced(
                f"the shared WAL {self.directory} was taken over ({OWNER} now names {holder}): "
                f"this broker acknowledges nothing more"
            )
