"""Kafka transactions: the coordinator's sans-IO state machine (``machine``, its transition table in
``transitions``) and the asyncio driver around it (``coordinator``), durable per transactional id
state (``store``), markers through the partitions' leaders (``markers``), and the partition side
(last stable offset, aborted transactions) Fetch reads (``participants``, ``partitions``)."""

from tabletopic.broker.transactions.coordinator import TransactionCoordinator, TxnError
from tabletopic.broker.transactions.partitions import PartitionTransactions

__all__ = ["PartitionTransactions", "TransactionCoordinator", "TxnError"]
