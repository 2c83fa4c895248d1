"""AlterReplicaLogDirs (34): a node has one logical log dir (DescribeLogDirs names it; the data
lives in the object store), so moving a replica to it is the no-op Kafka answers NONE for, and any
other path is LOG_DIR_NOT_FOUND. Kept so admin tools that rebalance disks get Kafka's answers
instead of an unsupported API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from tabletopic.broker.protocol.responses import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
)

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService


async def handle(
    broker: BrokerService, ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    log_dir = str(broker.config.data_dir)
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for target in request.dirs:
        for wanted in target.topics:
            topic = broker.topics.get(wanted.name)
            for partition in wanted.partitions:
                if topic is None or not 0 <= int(partition) < topic.partition_count:
                    code = ErrorCode.unknown_topic_or_partition
                elif target.path.rstrip("/") != log_dir.rstrip("/"):
                    code = ErrorCode.log_dir_not_found
                else:
                    code = ErrorCode.none
                results.setdefault(wanted.name, []).append({"partition_index": partition, "error_code": code})
    return {
        "throttle_time": 0,
        "results": [{"topic_name": name, "partitions": parts} for name, parts in results.items()],
    }
