"""A single node (cluster.enable=false) on a PostgreSQL metadata database holds it alone (issue 29,
item 12): a second single node, or one beside a live cluster broker, refuses to start naming
cluster.enable; a cluster broker refuses a database a single node holds; a lease taken over is
noticed at the next renewal."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tabletopic import database
from tabletopic.cluster.db import ClusterMetadata
from tabletopic.cluster.single import SingleNodeLease
from tabletopic.config import Config, ConfigError
from tabletopic.platform import Platform

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]


def _config(postgres_url: str, data_dir: Path, **extra: str) -> Config:
    values = {"metadata.url": postgres_url, **extra}
    return Config.load(overrides=[f"{k}={v}" for k, v in values.items()], data_dir=data_dir)


def test_a_second_single_node_on_the_same_database_refuses_to_start_naming_cluster_enable(
    postgres_url: str, tmp_path: Path
) -> None:
    first = Platform.create(_config(postgres_url, tmp_path / "a"))
    with pytest.raises(ConfigError) as refused:
        Platform.create(_config(postgres_url, tmp_path / "b"))
    message = str(refused.value)
    assert "cluster.enable" in message and "\n" not in message
    assert str(tmp_path / "a") in message  # names the node that holds it
    asyncio.run(first.stop())  # gives the lease back
    second = Platform.create(_config(postgres_url, tmp_path / "b"))
    asyncio.run(second.stop())


def test_a_single_node_refuses_a_database_where_a_cluster_broker_of_its_own_id_is_live(
    postgres_url: str, tmp_path: Path
) -> None:
    engine = database.create_engine(postgres_url)
    try:
        meta = ClusterMetadata(engine)
        meta.migrate()
        meta.register(0, None, {"PLAINTEXT": ("127.0.0.1", 9092)}, lease_s=60)
    finally:
        engine.dispose()
    with pytest.raises(ConfigError, match=r"brokers \[0\] .*cluster\.enable=true"):
        Platform.create(_config(postgres_url, tmp_path / "single", **{"broker.id": "0"}))


def test_a_cluster_broker_refuses_a_database_a_single_node_holds(postgres_url: str, tmp_path: Path) -> None:
    single = Platform.create(_config(postgres_url, tmp_path / "single"))
    try:
        clustered = {"cluster.enable": "true", "s3stream.wal.mode": "object", "broker.id": "5"}
        with pytest.raises(ConfigError, match=r"single node .*cluster\.enable=false"):
            Platform.create(_config(postgres_url, tmp_path / "broker", **clustered))
    finally:
        asyncio.run(single.stop())


def test_a_lease_taken_over_after_it_expired_fails_its_next_renewal(postgres_url: str) -> None:
    engine = database.create_engine(postgres_url)
    try:
        # Long at first, so a slow machine cannot let it lapse before the other node looks; only
        # the last renewal is short, and nothing bounds how long after it the takeover comes.
        stalled = SingleNodeLease(engine, "stalled", lease_s=30)
        other = SingleNodeLease(engine, "other", lease_s=30)
        assert stalled.acquire().single is None
        assert other.acquire().single == "stalled"
        stalled.lease_s = 0.3
        assert stalled.renew()
        time.sleep(0.5)  # the subject: the 0.3 s lease runs out
        assert other.acquire().single is None
        assert not stalled.renew()
        assert stalled.acquire().single == "other"
    finally:
        engine.dispose()


@pytest.mark.integration
def test_a_running_single_node_whose_lease_is_taken_stops_with_one_line(
    postgres_url: str, tmp_path: Path
) -> None:
    import sqlalchemy as sa

    from tabletopic.cluster.single import lease_table
    from tests.support.broker_process import BrokerProcess

    node = BrokerProcess(tmp_path / "node", overrides={"metadata.url": postgres_url})
    node.start()
    try:
        engine = database.create_engine(postgres_url)
        try:
            with engine.begin() as conn:  # what another node does once the lease has lapsed
                conn.execute(
                    sa.update(lease_table).values(
                        holder="intruder", lease_expires=sa.func.now() + sa.text("interval '60 seconds'")
                    )
                )
        finally:
            engine.dispose()
        assert node.process is not None
        assert node.process.wait(30) == 2
    finally:
        node.stop()
    log = (tmp_path / "node" / "broker.log").read_text(errors="replace")
    assert "another node took this single node's metadata database" in log
