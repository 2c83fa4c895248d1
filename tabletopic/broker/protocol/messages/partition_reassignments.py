"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): the moves asked for (a
partition's ``replicas`` None cancels its move under way), and the partitions whose moves a client
lists (None for every move under way). Each has one served version, v0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments.v0 import request as alter_v0
    from kio.schema.list_partition_reassignments.v0 import request as list_v0

AlterPartitionReassignmentsRequest: TypeAlias = "alter_v0.AlterPartitionReassignmentsRequest"
ReassignablePartition: TypeAlias = "alter_v0.ReassignablePartition"
ListPartitionReassignmentsRequest: TypeAlias = "list_v0.ListPartitionReassignmentsRequest"
