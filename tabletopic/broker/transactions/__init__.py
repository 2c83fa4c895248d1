"""Kafka transactions: the transaction coordinator (durable per transactional id state, markers,
timeouts) and the partition-side view (last stable offset, aborted transactions) Fetch reads."""

from tabletopic.broker.transactions.coordinator import TransactionCoordinator, TxnError
from tabletopic.broker.transactions.partitions import PartitionTransactions

__all__ = ["PartitionTransactions", "TransactionCoordinator", "TxnError"]
