"""WriteTxnMarkers (27), version-free: the COMMIT or ABORT markers a transaction coordinator asks
a partition leader to write.

The one served version's class satisfies the Protocol as it is (mypy checks it below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from tabletopic.broker.protocol.messages.topic_partitions import TopicPartitionIndexes

SERVED_VERSIONS = range(1, 2)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[27]


class WritableTxnMarker(Protocol):
    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...

    @property
    def transaction_result(self) -> bool:
        """True to commit, False to abort."""
        ...

    @property
    def topics(self) -> Sequence[TopicPartitionIndexes]: ...

    @property
    def coordinator_epoch(self) -> int: ...


class WriteTxnMarkersRequest(Protocol):
    @property
    def markers(self) -> Sequence[WritableTxnMarker]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.write_txn_markers.v1.request import WriteTxnMarkersRequest as V1

    def _every_version_is_a_write_txn_markers_request(request: V1) -> WriteTxnMarkersRequest:
        return request
