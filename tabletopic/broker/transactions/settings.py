"""Configuration keys of the transaction coordinator, named and defaulted as Apache Kafka's."""

from __future__ import annotations

from tabletopic.config import define, in_range

MAX_TIMEOUT = define(
    "transaction.max.timeout.ms",
    int,
    900_000,
    "Longest transaction timeout a producer may ask for (InitProducerId answers "
    "INVALID_TRANSACTION_TIMEOUT beyond).",
    "transactions",
    in_range(1),
)
ABORT_CHECK_INTERVAL = define(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    int,
    10_000,
    "How often open transactions are checked against their timeout; an expired one is aborted and "
    "its producer fenced.",
    "transactions",
    in_range(1),
)
ID_EXPIRATION = define(
    "transactional.id.expiration.ms",
    int,
    604_800_000,
    "How long a transactional id with no open transaction is remembered after its last use.",
    "transactions",
    in_range(1),
)
