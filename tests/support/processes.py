"""Stopping the helper processes tests start (servers, brokers, nodes) the same way everywhere: the
package's own ``terminate``, which `tabletopic cluster up` uses for its processes."""

from __future__ import annotations

from tabletopic.cluster.local import terminate

__all__ = ["terminate"]
