"""Stopping the helper processes tests start (servers, brokers, nodes) the same way everywhere: the
package's own ``terminate``, which `tabletopic cluster up` uses for its processes; and finding the
processes below one (PostgreSQL's backends, a bench's brokers), from /proc: there is no psutil."""

from __future__ import annotations

from pathlib import Path

from tabletopic.cluster.local import terminate

__all__ = ["descendants", "terminate"]


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, children before theirs."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # The parent pid is the 2nd field after the command, which may hold spaces: split
                # after its closing parenthesis.
                parents[int(entry.name)] = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found: list[int] = []
    frontier = [root]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found
