"""A request that meets the metadata database away (PostgreSQL restarting): the connection closes,
which every client retries, with one line in the log instead of a traceback; and the transactional
id is left as its row is, so the retry is answered from what is stored."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from kio.schema.errors import ErrorCode

from tabletopic.broker import server
from tabletopic.log_limit import RateLimitedLog
from tests.support.inproc_broker import inproc_broker
from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, encode_request, is_closed_by_peer, roundtrip

INIT = request(22, 4, transactional_id="away", transaction_timeout=60000, producer_id=-1, producer_epoch=-1)


def _init_producer_id(bootstrap: str) -> Any:
    sock = connect(bootstrap)
    try:
        return roundtrip(sock, INIT)
    finally:
        sock.close()


def _closed_without_answer(bootstrap: str) -> bool:
    sock = connect(bootstrap)
    try:
        sock.sendall(encode_request(INIT, 1))
        return is_closed_by_peer(sock)
    finally:
        sock.close()


async def test_a_request_meeting_the_database_away_closes_its_connection_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The close line is rate-limited per process: a connection an earlier test closed in the last
    # 10 s would hold this one back.
    monkeypatch.setattr(server, "CLOSE_LOG", RateLimitedLog(server.log, interval_s=10.0))
    async with inproc_broker(tmp_path) as (broker, proxy):
        bootstrap = f"127.0.0.1:{proxy.port}"
        store = broker.transactions.store
        write = store.write_row

        def away(*args: Any) -> None:
            raise sa.exc.OperationalError(
                "UPDATE transactions", {}, Exception("the database system is shutting down")
            )

        store.write_row = away  # type: ignore[method-assign]
        assert await asyncio.to_thread(_closed_without_answer, bootstrap)
        assert broker.transactions.describe("away") is None  # not kept: its row was never written
        assert not [r for r in caplog.records if r.exc_info], "no traceback"
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any(
            "the metadata database could not serve it: the database system is shutting down" in m
            for m in said
        )

        store.write_row = write  # type: ignore[method-assign]
        answer = await asyncio.to_thread(_init_producer_id, bootstrap)  # the client's retry
        assert answer.error_code is ErrorCode.none and answer.producer_epoch == 0
