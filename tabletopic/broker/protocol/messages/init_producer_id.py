"""InitProducerId (22), version-free: a producer's request for its id and epoch.

From v3 a producer names the id and epoch it already has (KIP-360, to bump its epoch rather than
get a new id), so the request is a frozen dataclass read once from kio's class of any version; an
older version names none (-1).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class InitProducerIdRequest:
    transactional_id: str | None
    transaction_timeout: timedelta
    producer_id: int = NO_PRODUCER_ID  # v3 on
    producer_epoch: int = NO_PRODUCER_EPOCH  # v3 on
