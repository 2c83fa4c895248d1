"""The pure parts of answering for a cluster's table topics from any broker: the admin URL a broker
registers, what goes along with a forwarded request, and which row a listing keeps for a topic that
several brokers (or none) report. The real path, with real brokers, is
``tests/cluster/test_tables_from_any_broker.py``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa

from tabletopic.api.cluster_tables import FORWARDED, UNREACHABLE, TablePeers, passed_on
from tabletopic.cluster.db import _add_admin_url
from tabletopic.cluster.node import reachable_admin_url

ENDPOINTS = {"PLAINTEXT": ("10.0.0.7", 9092)}


def test_a_wildcard_admin_listener_is_registered_with_the_host_kafka_clients_are_given() -> None:
    assert reachable_admin_url("http://0.0.0.0:8080", ENDPOINTS) == "http://10.0.0.7:8080"
    assert reachable_admin_url("https://[::]:8443/", {"P": ("fe80::1", 9092)}) == "https://[fe80::1]:8443"
    assert reachable_admin_url("http://admin.example:8080/", ENDPOINTS) == "http://admin.example:8080"
    assert reachable_admin_url("", ENDPOINTS) is None  # admin API switched off


def test_admin_advertised_uri_is_registered_as_it_is_and_must_be_a_url() -> None:
    from tabletopic.config import Config, ConfigError

    advertised = "https://console.example/broker-1/"
    assert reachable_admin_url("http://0.0.0.0:8080", ENDPOINTS, advertised) == advertised.rstrip("/")
    assert reachable_admin_url("", ENDPOINTS, advertised) is None  # no admin API to reach
    with pytest.raises(ConfigError, match=r"admin\.advertised\.uri: must be an http:// or https:// URL"):
        Config({"admin.advertised.uri": "broker1:8080"})


def test_a_forwarded_request_carries_the_callers_credentials_and_nothing_else() -> None:
    headers = {"authorization": "Basic YTpi", "cookie": "session=1", "host": "broker-1"}
    assert passed_on(headers) == {"authorization": "Basic YTpi", FORWARDED: "1"}


def _peers(coordinators: dict[str, int]) -> TablePeers:
    topics = {
        name: SimpleNamespace(name=name, configs={"automq.table.topic.enable": "true"})
        for name in coordinators
    }
    service = SimpleNamespace(
        node_id=1,
        clustered=True,
        topics=SimpleNamespace(all=lambda: list(topics.values()), get=topics.get),
        leadership=SimpleNamespace(leader=lambda topic, _partition: (coordinators[topic], 5)),
    )
    return TablePeers(lambda: service, sa.create_engine("sqlite://"))  # type: ignore[arg-type,return-value]


def _row(topic: str, state: str = "IDLE", rows: int = 7) -> dict[str, Any]:
    return {"topic": topic, "table": f"default.{topic}", "state": state, "rows_committed": rows}


def test_a_listing_keeps_each_topics_row_from_its_coordinator_and_says_why_when_there_is_none() -> None:
    peers = _peers({"here": 1, "there": 2, "moved": 3, "dark": 3, "new": 2, "gone": 4})
    merged = peers._merge(
        {"here": 1, "there": 2, "moved": 3, "dark": 3, "new": 2, "gone": 4},
        {
            1: [_row("here"), _row("moved", "STOPPED", 1)],
            2: [_row("there"), _row("moved", "IDLE", 9)],
            # broker 3 did not answer
        },
        {3: "broker 3 did not answer at http://b3:8080: ReadTimeout"},
    )
    rows = {r["topic"]: r for r in merged}
    assert rows["here"]["coordinator"] == 1 and rows["there"]["coordinator"] == 2
    # Its expected coordinator is silent: a broker still running it wins over one that stopped it.
    assert rows["moved"]["coordinator"] == 2 and rows["moved"]["rows_committed"] == 9
    assert rows["dark"]["state"] == UNREACHABLE and rows["dark"]["coordinator"] == 3
    assert "broker 3 did not answer" in rows["dark"]["last_error"] and rows["dark"]["rows_committed"] is None
    # Broker 4's lease ran out (not asked): its topics wait for their next coordinator.
    assert rows["gone"]["state"] == UNREACHABLE and "broker 4 is not alive" in rows["gone"]["last_error"]
    # Broker 2 answered but has not started the pipeline it has just been given.
    assert rows["new"]["state"] == "STARTING" and rows["new"]["lag_records"] is None
    assert rows["new"]["table"] == "default.new"


def test_a_cluster_database_from_before_admin_urls_gets_the_column() -> None:
    engine = sa.create_engine("sqlite://")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE cluster_nodes (node_id INTEGER PRIMARY KEY, state TEXT)")
        _add_admin_url(conn)
        _add_admin_url(conn)  # a fresh database has it already: nothing to do
        columns = {c["name"] for c in sa.inspect(conn).get_columns("cluster_nodes")}
    assert "admin_url" in columns
