"""A disk that really runs out of space: a small tmpfs mounted for a test (root and CAP_SYS_ADMIN,
as on CI's machine; elsewhere the caller skips with the reason :func:`mount_tmpfs` gives)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def mount_tmpfs(path: Path, size: str, remount: bool = False) -> str | None:
    """Mount a tmpfs of ``size`` (mount's syntax: ``40m``, ``1088k``) at ``path``, or give a mounted
    one that size (an operator freeing space); returns why it could not, None when it did."""
    options = f"remount,size={size}" if remount else f"size={size}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else (done.stderr.strip() or f"mount exited {done.returncode}")


def unmount(path: Path) -> None:
    """Detach the tmpfs at ``path`` (lazily: a process may still hold a file of it open)."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
