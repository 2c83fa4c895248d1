"""One module per Kafka API; :data:`HANDLERS` maps API keys to their ``handle`` coroutines.

A handler takes ``(broker, ctx, request)`` (the kio request object of whatever version the client
sent) and returns a dict shaped like the newest response version (see
:func:`tabletopic.broker.protocol.build_response`), a ``WireResponse`` it encoded itself (Fetch's
zero-copy path), or None when no response is to be sent (Produce with acks=0).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tabletopic.broker.handlers import (
    alter_configs,
    api_versions,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    incremental_alter_configs,
    init_producer_id,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
)

Handler = Callable[[Any, Any, Any], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: produce.handle,
    1: fetch.handle,
    2: list_offsets.handle,
    3: metadata.handle,
    18: api_versions.handle,
    19: create_topics.handle,
    20: delete_topics.handle,
    21: delete_records.handle,
    22: init_producer_id.handle,
    23: offset_for_leader_epoch.handle,
    32: describe_configs.handle,
    33: alter_configs.handle,
    35: describe_log_dirs.handle,
    37: create_partitions.handle,
    43: elect_leaders.handle,
    44: incremental_alter_configs.handle,
    45: partition_reassignments.handle_alter,
    46: partition_reassignments.handle_list,
    55: describe_quorum.handle,
    60: describe_cluster.handle,
    61: describe_producers.handle,
    75: describe_topic_partitions.handle,
}
