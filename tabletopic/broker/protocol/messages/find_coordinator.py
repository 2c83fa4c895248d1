"""FindCoordinator (10), version-free: the keys whose coordinator a client asks for.

Versions differ in shape (v0-v3 ask for one ``key``, v4 on for a batch of ``coordinator_keys``;
``key_type`` from v1), so the request is a frozen dataclass read once from kio's class of any
version, a field a version lacks taking Kafka's default for it.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP_KEY = 0  # key_type of a consumer group, the only kind before v1
TRANSACTION_KEY = 1
COORDINATOR_KEYS_SINCE = 4  # v4 on asks for a batch of keys


@dataclass(frozen=True, slots=True)
class FindCoordinatorRequest:
    key: str = ""  # v0 to v3
    key_type: int = GROUP_KEY  # v1 on
    coordinator_keys: tuple[str, ...] = ()  # v4 on
