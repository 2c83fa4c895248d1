"""The announcement side of the brokers' shared security caches (ACLs, quotas): a change made
through a broker is re-read there before it is announced, and an announcement that fails (the
database away) does not fail the request that made the change: it is stored, and the other brokers'
periodic re-read still finds it."""

from __future__ import annotations

import logging

import pytest

from tabletopic.broker.security.shared_cache import SharedCache


class _Counted(SharedCache):
    what = "test state"
    kind = "test"

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []

    async def refresh(self) -> None:
        self.events.append("refresh")


async def test_a_change_is_read_here_before_it_is_announced() -> None:
    cache = _Counted()

    async def announce() -> None:
        cache.events.append("announce")

    cache.on_change.append(announce)
    await cache.changed()

    assert cache.events == ["refresh", "announce"]


async def test_an_announcement_that_fails_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    cache = _Counted()

    async def database_away() -> None:
        raise ConnectionError("metadata database unreachable")

    cache.on_change.append(database_away)
    with caplog.at_level(logging.WARNING):
        await cache.changed()

    assert cache.events == ["refresh"]
    assert "could not tell the other brokers that test state changed" in caplog.text


async def test_without_polling_the_state_is_read_once_and_nothing_is_left_running() -> None:
    cache = _Counted()
    await cache.start(poll=False)
    await cache.stop()

    assert cache.events == ["refresh"]
