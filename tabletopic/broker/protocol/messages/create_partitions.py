"""CreatePartitions (37): the partition count each topic grows to (the count asked for, not the
number added), and optionally where the new partitions go (``assignments``, one per added
partition; None lets the broker place them). Served v0 to v3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

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
