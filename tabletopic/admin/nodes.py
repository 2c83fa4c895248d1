"""What the admin API and the console know about the cluster's nodes, behind one function.

A single node today; cluster mode (several brokers, racks, leaders) changes :func:`nodes` alone and
every page and endpoint that lists nodes follows.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from tabletopic.broker.component import BrokerComponent
from tabletopic.component import NotStarted

_STARTED = time.time()


@dataclass(frozen=True)
class Listener:
    protocol: str
    host: str
    port: int


@dataclass(frozen=True)
class NodeInfo:
    """One broker as shown to operators."""

    node_id: int
    listeners: tuple[Listener, ...]
    rack: str | None = None
    is_controller: bool = False
    this_node: bool = True
    topics: int = 0
    partitions: int = 0
    leaders: int = 0  # partitions this node leads
    started_at: float = field(default=_STARTED)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def nodes(broker: BrokerComponent) -> list[NodeInfo]:
    """Every node of the cluster (empty while the broker has not started)."""
    try:
        service = broker.service
    except NotStarted:
        return []
    partitions = service.topics.partition_count()
    return [
        NodeInfo(
            node_id=service.node_id,
            listeners=tuple(Listener(str(e.protocol), e.host, e.port) for e in service.advertised.values()),
            is_controller=True,
            topics=len(service.topics),
            partitions=partitions,
            leaders=partitions,
        )
    ]
