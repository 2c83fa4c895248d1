"""Garbage from peers is logged, but rate-limited: one WARNING per kind per interval, with a count."""

from __future__ import annotations

import logging

import pytest

from tabletopic.log_limit import RateLimitedLog


def test_repeated_warnings_are_held_back_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t.limit"), interval_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="t.limit"):
        assert limited.warning("close", "closing connection %d: %s", 1, "garbage")
        for i in range(500):
            now[0] += 0.01
            assert not limited.warning("close", "closing connection %d: %s", i + 2, "garbage")
        assert limited.warning("sasl", "SASL failed")  # another kind is not held back
        now[0] += 10.0
        assert limited.warning("close", "closing connection %d: %s", 999, "garbage")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert messages[0] == "closing connection 1: garbage"
    assert messages[2].startswith("closing connection 999: garbage (500 more like it")
