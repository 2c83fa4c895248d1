"""The controller lease against a real PostgreSQL: a broker stalled inside a database transaction
(SIGSTOP, a frozen VM, a cut network) must not keep the controller row locked, or no other broker
could take the controller over and no partition of a dead broker would move."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata, controller_table

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def test_a_controller_stalled_mid_transaction_loses_its_locks_and_the_lease_moves(postgres_url: str) -> None:
    engine = database.create_engine(postgres_url, idle_transaction_timeout_ms=500)
    meta = ClusterMetadata(engine)
    meta.migrate()
    assert meta.acquire_controller(1, 1, lease_s=0.2) == 1
    stalled = engine.connect()
    stalled.begin()  # the controller's round, frozen after locking its row
    stalled.execute(sa.select(controller_table).with_for_update()).all()
    time.sleep(0.3)  # the subject: its 0.2 s lease runs out while it holds the row

    taken: list[int | None] = []
    contender = threading.Thread(target=lambda: taken.append(meta.acquire_controller(2, 1, lease_s=3.0)))
    started = time.monotonic()
    contender.start()
    contender.join(timeout=15)
    assert taken == [2], "the stalled transaction still holds the controller row"
    print(f"controller taken over {time.monotonic() - started:.2f} s after the stall")
    with pytest.raises(sa.exc.DBAPIError):  # the server ended the stalled session
        stalled.execute(sa.select(1))
    stalled.close()
    engine.dispose()
