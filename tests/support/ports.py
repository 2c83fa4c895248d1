"""Free loopback ports for servers started by tests and benches: the package's own helpers, which
`tabletopic cluster up` uses for the same purpose."""

from __future__ import annotations

from tabletopic.cluster.local import free_port, wait_for_port

__all__ = ["free_port", "wait_for_port"]
