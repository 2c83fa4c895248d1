"""Client quotas as Kafka has them: byte rates for produce and fetch and a request-time share per
user and/or client id, with Kafka's precedence of the most specific matching entity, measured over
``quota.window.num`` samples of ``quota.window.size.seconds`` and enforced with throttle_time_ms.

Pure parts (entities, precedence, rates, throttle arithmetic) are here; the node's quotas in
``quota_service``, the handlers that manage them in ``broker/handlers/client_quotas.py``, the
enforcement around Produce/Fetch in ``quota_guard``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
# Kafka's client quota keys; the last two are stored and reported but have nothing to limit here.
QUOTA_KEYS = {
    USER: (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, "controller_mutation_rate"),
    CLIENT_ID: (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, "controller_mutation_rate"),
    IP: ("connection_creation_rate",),
}

# An entity: entity type -> name, None being the type's default entity ("<default>").
Entity = tuple[tuple[str, str | None], ...]


class InvalidQuota(ValueError):
    """Kafka answers INVALID_REQUEST with this message."""


def make_entity(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """Validate and order an entity. Raises InvalidQuota."""
    seen: dict[str, str | None] = {}
    for entity_type, name in parts:
        if entity_type not in ENTITY_TYPES:
            raise InvalidQuota(f"Unexpected entity type {entity_type}")
        if entity_type in seen:
            raise InvalidQuota(f"Duplicate {entity_type} in entity")
        if name == "":
            raise InvalidQuota(f"Empty {entity_type} name; a null name is the default entity")
        seen[entity_type] = name
    if not seen:
        raise InvalidQuota("Empty entity")
    if IP in seen and len(seen) > 1:
        raise InvalidQuota("An ip entity cannot be combined with user or client-id")
    return tuple(sorted(seen.items()))


# The widest encoded entity stored (the quota table's column; PostgreSQL refuses a longer value).
MAX_ENCODED_ENTITY = 600


def encode_entity(entity: Entity) -> str:
    return json.dumps(entity)


def decode_entity(text: str) -> Entity:
    return tuple((str(t), n) for t, n in json.loads(text))


def candidates(user: str, client_id: str) -> list[Entity]:
    """Kafka's order of precedence for a request of ``user`` and ``client_id``."""
    return [
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    ]


@dataclass
class Rate:
    """Events per second over a window of samples (Kafka's SampledStat, simplified): the oldest
    sample is dropped as time moves on, and a window not yet full counts as full so a burst at
    start-up cannot hide behind an empty history."""

    samples: int
    sample_seconds: float
    _values: dict[int, float] = field(default_factory=dict)

    def record(self, amount: float, now: float) -> None:
        slot = int(now // self.sample_seconds)
        self._values[slot] = self._values.get(slot, 0.0) + amount
        oldest = slot - self.samples + 1
        for old in [s for s in self._values if s < oldest]:
            del self._values[old]

    def rate(self, now: float) -> float:
        slot = int(now // self.sample_seconds)
        oldest = slot - self.samples + 1
        total = sum(v for s, v in self._values.items() if s >= oldest)
        return total / (self.samples * self.sample_seconds)


def throttle_ms(observed: float, quota: float, window_seconds: float) -> int:
    """Kafka's throttle: how long the client must wait for its rate to fall back to the quota,
    ``(observed - quota) / quota * window``, never longer than the window."""
    if quota <= 0 or observed <= quota:
        return 0 if quota > 0 else int(window_seconds * 1000)
    return int(min((observed - quota) / quota * window_seconds, window_seconds) * 1000)


class QuotaTracker:
    """The quotas in force and each entity's measured rates.

    Args:
        samples, sample_seconds: ``quota.window.num`` and ``quota.window.size.seconds``.
        clock: seconds.
    """

    def __init__(
        self, samples: int, sample_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.samples = samples
        self.sample_seconds = sample_seconds
        self._clock = clock
        self.quotas: dict[Entity, dict[str, float]] = {}
        self._rates: dict[tuple[Entity, str], Rate] = {}

    @property
    def window_seconds(self) -> float:
        return self.samples * self.sample_seconds

    def replace(self, quotas: dict[Entity, dict[str, float]]) -> None:
        self.quotas = quotas
        live = set(quotas)
        self._rates = {k: v for k, v in self._rates.items() if k[0] in live}

    def quota_for(self, user: str, client_id: str, key: str) -> tuple[Entity, float] | None:
        """The most specific entity with a quota on ``key`` for this user and client id."""
        if not self.quotas:
            return None
        for entity in candidates(user, client_id):
            values = self.quotas.get(entity)
            if values is not None and key in values:
                return entity, values[key]
        return None

    def record(self, user: str, client_id: str, key: str, amount: float) -> int:
        """Count ``amount`` against the entity's quota on ``key``; the throttle time it now needs."""
        found = self.quota_for(user, client_id, key)
        if found is None:
            return 0
        entity, quota = found
        now = self._clock()
        rate = self._rates.setdefault((entity, key), Rate(self.samples, self.sample_seconds))
        rate.record(amount, now)
        return throttle_ms(rate.rate(now), quota, self.window_seconds)

    def current_throttle(self, user: str, client_id: str, key: str) -> int:
        """The throttle time the entity is under now, without recording anything."""
        found = self.quota_for(user, client_id, key)
        if found is None:
            return 0
        entity, quota = found
        rate = self._rates.get((entity, key))
        observed = rate.rate(self._clock()) if rate is not None else 0.0
        return throttle_ms(observed, quota, self.window_seconds)
