"""Garbage from peers is logged, but rate-limited: one WARNING per kind per interval, with a count;
and a line about many things names a few of them."""

from __future__ import annotations

import logging

import pytest

from tabletopic.log_limit import RateLimitedLog, few_of


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


def test_a_failure_retried_every_second_logs_its_traceback_once_an_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A snapshot loop on a full disk failed every two seconds with a whole traceback each time.
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t.limit"), interval_s=60.0, clock=lambda: now[0])
    with caplog.at_level(logging.ERROR, logger="t.limit"):
        for _ in range(30):
            try:
                raise OSError(28, "No space left on device")
            except OSError:
                limited.error("snapshot", "snapshot failed", exc_info=True)
            now[0] += 2.0
    assert len(caplog.records) == 1
    assert caplog.records[0].levelno == logging.ERROR
    assert caplog.records[0].exc_info is not None and "No space left" in caplog.text


def test_few_of_names_the_first_five_and_counts_the_rest() -> None:
    assert few_of([]) == ""
    assert few_of(["a", "b"]) == "a, b"
    assert few_of([f"p{i}" for i in range(5)]) == "p0, p1, p2, p3, p4"
    assert few_of([f"p{i}" for i in range(1000)]) == "p0, p1, p2, p3, p4 and 995 more"
