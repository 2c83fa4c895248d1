"""A group coordinator as the coordinator tests build one: over the topics of :data:`TOPICS`, with
fast limits (:data:`FAST`) and, where a test moves time itself, a :class:`ManualClock`."""

from __future__ import annotations

import time
from collections.abc import Callable

from kio.schema.errors import ErrorCode
from sqlalchemy.engine import Engine

from tabletopic.broker.groups import subscription
from tabletopic.broker.groups.coordinator import GroupCoordinator
from tabletopic.broker.groups.model import GroupConfig, JoinRequest, JoinResult
from tests.support.group_harness import join_request as harness_join_request

TOPICS = {"orders": 3, "events": 1}

FAST = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)


class ManualClock:
    """A wall clock (epoch seconds) that moves only when a test says so."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_coordinator(
    engine: Engine, config: GroupConfig = FAST, clock: Callable[[], float] = time.time
) -> GroupCoordinator:
    return GroupCoordinator(engine, 1, "127.0.0.1", 9092, TOPICS.get, config=config, clock=clock)


def join_request(
    member_id: str = "",
    *,
    session_ms: int = 10_000,
    topics: list[str] | None = None,
    instance: str | None = None,
    client_id: str = "client",
) -> JoinRequest:
    """A v4+ consumer's JoinGroup of group ``g``, subscribed to ``topics`` (``orders``)."""
    protocols = (("range", subscription.encode(topics or ["orders"])),)
    return harness_join_request(
        member_id,
        protocols,
        instance=instance,
        client_id=client_id,
        session_ms=session_ms,
        rebalance_ms=5_000,
    )


async def join(coordinator: GroupCoordinator, **kwargs: object) -> JoinResult:
    """The two-phase join of a dynamic v4+ member."""
    first = await coordinator.join_group(join_request(**kwargs))  # type: ignore[arg-type]
    assert first.error is ErrorCode.member_id_required
    return await coordinator.join_group(join_request(first.member_id, **kwargs))  # type: ignore[arg-type]
