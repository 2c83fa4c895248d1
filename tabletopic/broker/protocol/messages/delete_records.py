"""DeleteRecords (21): the offset each partition's log is to start at, -1 for the high watermark
(served v0 to v2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.delete_records.v0 import request as v0
    from kio.schema.delete_records.v1 import request as v1
    from kio.schema.delete_records.v2 import request as v2

DeleteRecordsRequest: TypeAlias = (
    "v0.DeleteRecordsRequest | v1.DeleteRecordsRequest | v2.DeleteRecordsRequest"
)
DeleteRecordsPartition: TypeAlias = (
    "v0.DeleteRecordsPartition | v1.DeleteRecordsPartition | v2.DeleteRecordsPartition"
)
