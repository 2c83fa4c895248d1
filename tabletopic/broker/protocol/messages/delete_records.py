"""DeleteRecords (21), version-free: the offset each partition's log is to start at.

Every served version (v0 to v2) has the fields the handler reads, so the request type is a Protocol
kio's class of each version satisfies as it is (mypy checks each at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

SERVED_VERSIONS = range(0, 3)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[21]


class DeleteRecordsPartition(Protocol):
    @property
    def partition_index(self) -> int: ...

    @property
    def offset(self) -> int:
        """The new log start offset; -1 for the high watermark."""
        ...


class DeleteRecordsTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[DeleteRecordsPartition]: ...


class DeleteRecordsRequest(Protocol):
    @property
    def topics(self) -> Sequence[DeleteRecordsTopic]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.delete_records.v0.request import DeleteRecordsRequest as V0
    from kio.schema.delete_records.v1.request import DeleteRecordsRequest as V1
    from kio.schema.delete_records.v2.request import DeleteRecordsRequest as V2

    def _every_version_is_a_delete_records_request(request: V0 | V1 | V2) -> DeleteRecordsRequest:
        return request
