"""The transaction APIs a producer sends its coordinator (AddPartitionsToTxn 24, served v0 to v3;
AddOffsetsToTxn 25 and EndTxn 26, v0 to v4; TxnOffsetCommit 28, v0 to v4) and the admin views
(DescribeTransactions 65, v0; ListTransactions 66, v0 to v1).

TxnOffsetCommit's partitions name a leader epoch from v2 only, so its request is a frozen dataclass
read once from kio's class of any version, an older version's partitions naming none (-1). The
others are kio's class of each served version (AddPartitionsToTxn's v0 to v3 name one transaction
per request; v4 on is the brokers' batched form, not served).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from tabletopic.broker.protocol.messages.offset_commit import OffsetCommitTopic

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn.v0 import request as add_offsets_v0
    from kio.schema.add_offsets_to_txn.v1 import request as add_offsets_v1
    from kio.schema.add_offsets_to_txn.v2 import request as add_offsets_v2
    from kio.schema.add_offsets_to_txn.v3 import request as add_offsets_v3
    from kio.schema.add_offsets_to_txn.v4 import request as add_offsets_v4
    from kio.schema.add_partitions_to_txn.v0 import request as add_partitions_v0
    from kio.schema.add_partitions_to_txn.v1 import request as add_partitions_v1
    from kio.schema.add_partitions_to_txn.v2 import request as add_partitions_v2
    from kio.schema.add_partitions_to_txn.v3 import request as add_partitions_v3
    from kio.schema.describe_transactions.v0 import request as describe_v0
    from kio.schema.end_txn.v0 import request as end_v0
    from kio.schema.end_txn.v1 import request as end_v1
    from kio.schema.end_txn.v2 import request as end_v2
    from kio.schema.end_txn.v3 import request as end_v3
    from kio.schema.end_txn.v4 import request as end_v4
    from kio.schema.list_transactions.v0 import request as list_v0
    from kio.schema.list_transactions.v1 import request as list_v1
    from kio.schema.txn_offset_commit.v0 import request as offset_commit_v0
    from kio.schema.txn_offset_commit.v1 import request as offset_commit_v1
    from kio.schema.txn_offset_commit.v2 import request as offset_commit_v2
    from kio.schema.txn_offset_commit.v3 import request as offset_commit_v3
    from kio.schema.txn_offset_commit.v4 import request as offset_commit_v4


@dataclass(frozen=True, slots=True)
class TxnOffsetCommitRequest:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    # The topics and partitions of an OffsetCommit, field for field (the leader epoch from v2 here).
    topics: tuple[OffsetCommitTopic, ...]
    generation_id: int = -1  # v3 on (KIP-447): the consumer's generation, or member epoch
    member_id: str = ""  # v3 on
    group_instance_id: str | None = None  # v3 on


AddPartitionsToTxnRequest: TypeAlias = (
    "add_partitions_v0.AddPartitionsToTxnRequest | add_partitions_v1.AddPartitionsToTxnRequest | "
    "add_partitions_v2.AddPartitionsToTxnRequest | add_partitions_v3.AddPartitionsToTxnRequest"
)
AddPartitionsToTxnTopic: TypeAlias = (
    "add_partitions_v0.AddPartitionsToTxnTopic | add_partitions_v1.AddPartitionsToTxnTopic | "
    "add_partitions_v2.AddPartitionsToTxnTopic | add_partitions_v3.AddPartitionsToTxnTopic"
)
AddOffsetsToTxnRequest: TypeAlias = (
    "add_offsets_v0.AddOffsetsToTxnRequest | add_offsets_v1.AddOffsetsToTxnRequest | "
    "add_offsets_v2.AddOffsetsToTxnRequest | add_offsets_v3.AddOffsetsToTxnRequest | "
    "add_offsets_v4.AddOffsetsToTxnRequest"
)
EndTxnRequest: TypeAlias = (
    "end_v0.EndTxnRequest | end_v1.EndTxnRequest | end_v2.EndTxnRequest | end_v3.EndTxnRequest | "
    "end_v4.EndTxnRequest"
)
ProducerRequest: TypeAlias = "AddOffsetsToTxnRequest | EndTxnRequest"
"""The transactional producer every AddOffsetsToTxn and EndTxn names."""
TxnOffsetCommitScope: TypeAlias = (
    "offset_commit_v0.TxnOffsetCommitRequest | offset_commit_v1.TxnOffsetCommitRequest | "
    "offset_commit_v2.TxnOffsetCommitRequest | offset_commit_v3.TxnOffsetCommitRequest | "
    "offset_commit_v4.TxnOffsetCommitRequest"
)
"""What the ACL rule reads of kio's TxnOffsetCommit: the transaction, the group and the topics,
which it narrows to those the principal may read."""
DescribeTransactionsRequest: TypeAlias = "describe_v0.DescribeTransactionsRequest"
ListTransactionsRequest: TypeAlias = "list_v0.ListTransactionsRequest | list_v1.ListTransactionsRequest"
