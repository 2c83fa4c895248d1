"""Kafka transactions: the coordinator's sans-IO state machine (``machine``, its transition table in
``transitions``) and the asyncio driver around it (``coordinator``), durable per transactional id
state (``store``), markers through the partitions' leaders (``markers``), and the partition side
(last stable offset, aborted transactions) Fetch reads (``participants``, ``partitions``)."""

from typing import TYPE_CHECKING

from tabletopic.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from tabletopic.broker.transactions.coordinator import TransactionCoordinator, TxnError
    from tabletopic.broker.transactions.partitions import PartitionTransactions

# Re-exports loaded on first use (see tabletopic.lazy_exports).
_EXPORTS = {
    "TransactionCoordinator": "tabletopic.broker.transactions.coordinator",
    "TxnError": "tabletopic.broker.transactions.coordinator",
    "PartitionTransactions": "tabletopic.broker.transactions.partitions",
}

__all__ = ["PartitionTransactions", "TransactionCoordinator", "TxnError"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
