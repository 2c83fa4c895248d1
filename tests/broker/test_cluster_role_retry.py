"""The cluster role's reconcile loop when applying leadership keeps failing: retried with back-off,
the traceback logged once, not a line every 0.2 s."""

from __future__ import annotations

import asyncio
import itertools
import logging
from types import SimpleNamespace

import pytest

from tabletopic.broker.cluster_role import ClusterRole


async def test_a_reconcile_that_keeps_failing_is_retried_with_back_off_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    attempts: list[float] = []
    applied = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def reconcile() -> None:
        attempts.append(loop.time())
        if len(attempts) <= 4:
            raise RuntimeError("stream tail unreadable")
        applied.set()

    role = SimpleNamespace(_wake=asyncio.Event(), _reconcile=reconcile)
    role._wake.set()
    caplog.set_level(logging.INFO, logger="tabletopic.broker.cluster_role")
    task = asyncio.create_task(ClusterRole._reconcile_loop(role))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(applied.wait(), 30)
    finally:
        task.cancel()
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps[-1] > gaps[0] * 3  # 0.2, 0.4, 0.8, 1.6 s
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "still fails" in warnings[0].getMessage()
    assert any("applied after 4 failed attempts" in r.getMessage() for r in caplog.records)
