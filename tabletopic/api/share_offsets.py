"""A share group's progress (KIP-932): each share partition's start offset and lag, as its
coordinator answers DescribeShareGroupOffsets (v1, which carries the lag).

librdkafka's admin API has no call for share groups, so the request goes through the broker's own
inter-broker client (logged in as the broker, on the inter-broker listener) to the coordinator the
broker computes for the group, itself included: one path for a single node and a cluster.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.security.inter_broker import BrokerUnreachable

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService

log = logging.getLogger(__name__)

DESCRIBE_SHARE_GROUP_OFFSETS, VERSION = 90, 1
TIMEOUT_S = 5.0


async def share_offsets(service: BrokerService, group_id: str) -> list[dict[str, Any]] | None:
    """``[{"topic", "partition", "start_offset", "lag"}]`` of ``group_id``'s share partitions (a
    lag of None where the coordinator could not tell it); None when the coordinator did not answer
    or refused."""
    client, leadership = service.inter_broker_client, service.leadership
    coordinator = leadership.group_coordinator(group_id)
    try:
        answer = await client.call(
            leadership.brokers(client.listener),
            coordinator,
            DESCRIBE_SHARE_GROUP_OFFSETS,
            VERSION,
            TIMEOUT_S,
            groups=[{"group_id": group_id, "topics": None}],
        )
    except (LookupError, BrokerUnreachable) as exc:
        log.debug(
            "share group %s: its coordinator, broker %d, did not answer: %s", group_id, coordinator, exc
        )
        return None
    found = next((g for g in answer.groups if g.group_id == group_id), None)
    if found is None or ErrorCode(found.error_code) is not ErrorCode.none:
        return None
    return [
        {
            "topic": topic.topic_name,
            "partition": int(p.partition_index),
            "start_offset": int(p.start_offset) if p.start_offset >= 0 else None,
            "lag": int(p.lag) if p.lag >= 0 else None,
        }
        for topic in sorted(found.topics, key=lambda t: t.topic_name)
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        if ErrorCode(p.error_code) is ErrorCode.none
    ]
