"""The transaction APIs a producer sends its coordinator (AddPartitionsToTxn 24, AddOffsetsToTxn 25,
EndTxn 26, TxnOffsetCommit 28) and the admin views (DescribeTransactions 65, ListTransactions 66),
version-free.

Where every served version has the fields a handler reads the request type is a Protocol kio's
class satisfies as it is (mypy checks each version at the end of this module). TxnOffsetCommit's
partitions name a leader epoch from v2 only, so its request is a frozen dataclass read once from
kio's class of any version, an older version's partitions naming none (-1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict

from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol.messages.offset_commit import OffsetCommitTopic

# api key -> the versions served (protocol/versions.py), each checked by mypy below.
SERVED_VERSIONS: dict[int, range] = {
    24: range(0, 4),  # AddPartitionsToTxn
    25: range(0, 5),  # AddOffsetsToTxn
    26: range(0, 5),  # EndTxn
    28: range(0, 5),  # TxnOffsetCommit (what the ACL rule reads)
    65: range(0, 1),  # DescribeTransactions
    66: range(0, 2),  # ListTransactions
}


class TopicPartitions(Protocol):
    """A topic and partition indexes, as AddPartitionsToTxn names them."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[int]: ...


class AddPartitionsToTxnRequest(Protocol):
    """v0-v3: one transaction per request (v4 on is the brokers' batched form, not served)."""

    @property
    def v3_and_below_transactional_id(self) -> str: ...

    @property
    def v3_and_below_producer_id(self) -> int: ...

    @property
    def v3_and_below_producer_epoch(self) -> int: ...

    @property
    def v3_and_below_topics(self) -> Sequence[TopicPartitions]: ...


class ProducerRequest(Protocol):
    """The transactional producer every AddOffsetsToTxn and EndTxn names."""

    @property
    def transactional_id(self) -> str: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...


class AddOffsetsToTxnRequest(ProducerRequest, Protocol):
    @property
    def group_id(self) -> str: ...


class EndTxnRequest(ProducerRequest, Protocol):
    @property
    def committed(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    # The topics and partitions of an OffsetCommit, field for field (the leader epoch from v2 here).
    topics: tuple[OffsetCommitTopic, ...]


class TxnOffsetCommitPartitionIndex(Protocol):
    @property
    def partition_index(self) -> int: ...


class TxnOffsetCommitTopicPartitions(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[TxnOffsetCommitPartitionIndex]: ...


class TxnOffsetCommitScope(Protocol):
    """What the ACL rule reads of kio's TxnOffsetCommit (every served version): the transaction,
    the group and the topics, which it narrows to those the principal may read."""

    @property
    def transactional_id(self) -> str: ...

    @property
    def group_id(self) -> str: ...

    @property
    def topics(self) -> Sequence[TxnOffsetCommitTopicPartitions]: ...


class AddOffsetsToTxnResponse(TypedDict):
    throttle_time: int
    error_code: ErrorCode


class EndTxnResponse(TypedDict):
    """The newest version's shape: producer_id and producer_epoch (v5, transaction protocol 2) are
    -1 here, as the broker never bumps the epoch at the end of a transaction."""

    throttle_time: int
    error_code: ErrorCode
    producer_id: int
    producer_epoch: int


class DescribeTransactionsRequest(Protocol):
    @property
    def transactional_ids(self) -> Sequence[str]: ...


class ListTransactionsRequest(Protocol):
    @property
    def state_filters(self) -> Sequence[str]: ...

    @property
    def producer_id_filters(self) -> Sequence[int]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.add_offsets_to_txn.v0.request import AddOffsetsToTxnRequest as AddOffsets0
    from kio.schema.add_offsets_to_txn.v1.request import AddOffsetsToTxnRequest as AddOffsets1
    from kio.schema.add_offsets_to_txn.v2.request import AddOffsetsToTxnRequest as AddOffsets2
    from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest as AddOffsets3
    from kio.schema.add_offsets_to_txn.v4.request import AddOffsetsToTxnRequest as AddOffsets4
    from kio.schema.add_partitions_to_txn.v0.request import AddPartitionsToTxnRequest as AddPartitions0
    from kio.schema.add_partitions_to_txn.v1.request import AddPartitionsToTxnRequest as AddPartitions1
    from kio.schema.add_partitions_to_txn.v2.request import AddPartitionsToTxnRequest as AddPartitions2
    from kio.schema.add_partitions_to_txn.v3.request import AddPartitionsToTxnRequest as AddPartitions3
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest as Describe0
    from kio.schema.end_txn.v0.request import EndTxnRequest as EndTxn0
    from kio.schema.end_txn.v1.request import EndTxnRequest as EndTxn1
    from kio.schema.end_txn.v2.request import EndTxnRequest as EndTxn2
    from kio.schema.end_txn.v3.request import EndTxnRequest as EndTxn3
    from kio.schema.end_txn.v4.request import EndTxnRequest as EndTxn4
    from kio.schema.list_transactions.v0.request import ListTransactionsRequest as List0
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest as List1
    from kio.schema.txn_offset_commit.v0.request import TxnOffsetCommitRequest as TxnOffsetCommit0
    from kio.schema.txn_offset_commit.v1.request import TxnOffsetCommitRequest as TxnOffsetCommit1
    from kio.schema.txn_offset_commit.v2.request import TxnOffsetCommitRequest as TxnOffsetCommit2
    from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest as TxnOffsetCommit3
    from kio.schema.txn_offset_commit.v4.request import TxnOffsetCommitRequest as TxnOffsetCommit4

    def _add_partitions(
        request: AddPartitions0 | AddPartitions1 | AddPartitions2 | AddPartitions3,
    ) -> AddPartitionsToTxnRequest:
        return request

    def _add_offsets(
        request: AddOffsets0 | AddOffsets1 | AddOffsets2 | AddOffsets3 | AddOffsets4,
    ) -> AddOffsetsToTxnRequest:
        return request

    def _end_txn(request: EndTxn0 | EndTxn1 | EndTxn2 | EndTxn3 | EndTxn4) -> EndTxnRequest:
        return request

    def _describe(request: Describe0) -> DescribeTransactionsRequest:
        return request

    def _list(request: List0 | List1) -> ListTransactionsRequest:
        return request

    def _txn_offset_commit(
        request: TxnOffsetCommit0 | TxnOffsetCommit1 | TxnOffsetCommit2 | TxnOffsetCommit3 | TxnOffsetCommit4,
    ) -> TxnOffsetCommitScope:
        return request
