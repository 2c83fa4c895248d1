"""Kafka transactions: the coordinator's sans-IO state machine (``machine``, its transition table in
``transitions``) and the asyncio driver around it (``coordinator``), durable per transactional id
state (``store``), markers through the partitions' leaders (``markers``), and the partition side
(last stable offset, aborted transactions) Fetch reads (``participants``, ``partitions``)."""

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
