"""Kafka transactions: the transaction coordinator (durable per transactional id state, markers,
timeouts) and the partition-side view (last stable offset, aborted transactions) Fetch reads."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tabletopic.broker.transactions.coordinator import TransactionCoordinator, TxnError
    from tabletopic.broker.transactions.partitions import PartitionTransactions

# Re-exports loaded on first use: importing a settings module of this package (every command loads
# every key) must not pull in the heavy modules behind them.
_EXPORTS = {
    "TransactionCoordinator": "tabletopic.broker.transactions.coordinator",
    "TxnError": "tabletopic.broker.transactions.coordinator",
    "PartitionTransactions": "tabletopic.broker.transactions.partitions",
}

__all__ = ["PartitionTransactions", "TransactionCoordinator", "TxnError"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
