"""A restarted broker's console plots the whole cluster from before its restart.

The series of the whole cluster (every broker's traffic, each topic's records across the cluster:
:func:`tabletopic.api.sampler.cluster_wide`) are the same on every broker, which samples them from
every broker's lease report, and a broker keeps them in memory only. So a broker restarted, or just
added, showed those charts empty while every other broker showed the last hour. At start its
console asks the live brokers, one at a time, for them (``/console/series/cluster``) and starts its
ring with the first answer; its own series start empty, as they are its own.

A peer answers only callers it authenticates, and a broker holds no credentials for another's
admin API: with HTTP authentication on (``authentication.method``) the charts start empty as before.
"""

from __future__ import annotations

import logging
import math
import time
from itertools import pairwise
from typing import Any

from tabletopic.api.cluster_tables import PeerError, TablePeers
from tabletopic.api.sampler import cluster_wide
from tabletopic.api.timeseries import SeriesRing

log = logging.getLogger(__name__)

CLUSTER_SERIES_PATH = "/console/series/cluster"

Columns = dict[str, list[float | None]]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_cluster_series(body: Any, now: float) -> tuple[list[float], Columns] | None:
    """A peer's answer as its sample times and the cluster's columns, the samples before ``now``
    only (this broker's own samples follow); None where the answer is not that shape."""
    if not isinstance(body, dict):
        return None
    times = body.get("t")
    if not isinstance(times, list) or not all(_number(t) for t in times):
        return None
    if any(later <= earlier for earlier, later in pairwise(times)):
        return None
    kept = sum(1 for t in times if t < now)
    columns: Columns = {}
    for name, column in body.items():
        if name == "t" or not cluster_wide(name):
            continue
        if not isinstance(column, list) or len(column) != len(times):
            return None
        if not all(value is None or _number(value) for value in column):
            return None
        columns[name] = column[:kept]
    return [float(t) for t in times[:kept]], columns


async def carry_over(ring: SeriesRing, peers: TablePeers) -> int:
    """Start ``ring`` with the cluster's series of the first live peer that answers them; returns
    the samples loaded (0 on a single node, with no peer answering, or with the ring begun)."""
    if not peers.clustered():
        return 0
    for node_id, url in sorted((await peers.admin_urls()).items()):
        try:
            answer = await peers.ask(node_id, url, "GET", CLUSTER_SERIES_PATH, {})
        except PeerError:
            continue  # said (rate-limited) where it was asked
        found = parse_cluster_series(answer.body, time.time()) if answer.status_code == 200 else None
        if found is None:
            log.info(
                "broker %d answered %d without the cluster's series for the console; asking the next",
                node_id,
                answer.status_code,
            )
            continue
        times, columns = found
        loaded = ring.preload(times, columns)
        if loaded:
            log.info(
                "console: the cluster's charts start with broker %d's last %d samples (%d series, "
                "from %.0f s ago)",
                node_id,
                loaded,
                len(columns),
                time.time() - times[-loaded],
            )
        return loaded
    return 0
