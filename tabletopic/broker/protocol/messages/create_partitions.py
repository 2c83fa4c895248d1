"""CreatePartitions (37): the partition count each topic grows to (the count asked for, not the
number added), and optionally where the new partitions go (``assignments``, one per added
partition; None lets the broker place them). Served v0 to v3.

The response is a TypedDict in the newest version's shape, which the response builder fits to the
client's version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias, TypedDict

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from kio.schema.create_partitions.v0 import request as v0
    from kio.schema.create_partitions.v1 import request as v1
    from kio.schema.create_partitions.v2 import request as v2
    from kio.schema.create_partitions.v3 import request as v3

CreatePartitionsRequest: TypeAlias = (
    "v0.CreatePartitionsRequest | v1.CreatePartitionsRequest | v2.CreatePartitionsRequest | "
    "v3.CreatePartitionsRequest"
)
CreatePartitionsTopic: TypeAlias = (
    "v0.CreatePartitionsTopic | v1.CreatePartitionsTopic | v2.CreatePartitionsTopic | "
    "v3.CreatePartitionsTopic"
)
CreatePartitionsAssignment: TypeAlias = (
    "v0.CreatePartitionsAssignment | v1.CreatePartitionsAssignment | v2.CreatePartitionsAssignment | "
    "v3.CreatePartitionsAssignment"
)


class CreatePartitionsTopicResult(TypedDict):
    name: str
    error_code: ErrorCode
    error_message: str | None


class CreatePartitionsResponse(TypedDict):
    throttle_time: int
    results: list[CreatePartitionsTopicResult]
