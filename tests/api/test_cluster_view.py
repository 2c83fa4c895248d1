"""The cluster view's pure parts: each broker's row from a snapshot (slots and partitions counted
apart, a dead broker's stale load shown as 0, table coordinators by lease owner), rates with units."""

from __future__ import annotations

from types import SimpleNamespace

from tabletopic.api import cluster_view
from tabletopic.cluster.controller import Assignment
from tabletopic.cluster.db import ClusterSnapshot, NodeInfo


def test_each_broker_row_counts_partitions_and_coordinator_slots_apart_and_a_dead_brokers_load_is_zero() -> (
    None
):
    reported = {"t/0": [2_500_000, 1000, 25_000]}  # bytes in, bytes out, records in per second
    nodes = {
        1: NodeInfo(1, 3, "a", {"PLAINTEXT": ("127.0.0.1", 9092)}, "alive", True, reported),
        2: NodeInfo(2, 1, "b", {"PLAINTEXT": ("127.0.0.1", 9102)}, "alive", False, {"t/1": [9_000_000, 0]}),
    }
    partitions = {
        ("t", 0): Assignment(1, 3, 4),
        ("t", 1): Assignment(2, 1, 2),
        ("__consumer_offsets", 0): Assignment(1, 3, 1),
        ("__consumer_offsets", 1): Assignment(1, 3, 1),
        ("__transaction_state", 0): Assignment(2, 1, 1),
    }
    snapshot = ClusterSnapshot(nodes, 1, 7, partitions)
    service = SimpleNamespace(node_id=2)
    rows = {
        r["node_id"]: r
        for r in cluster_view._brokers(service, snapshot, {"orders": "host7/broker-2"})  # type: ignore[arg-type]
    }
    assert rows[1]["is_controller"] and not rows[2]["is_controller"] and rows[2]["this_node"]
    assert (
        rows[1]["partitions"],
        rows[1]["group_coordinator_slots"],
        rows[1]["transaction_coordinator_slots"],
    ) == (1, 2, 0)
    assert rows[1]["bytes_in"] == "2.50 MB/s" and rows[1]["bytes_out"] == "1.00 kB/s"
    assert rows[1]["records_in"] == "25.0 k/s" and rows[2]["records_in"] == "0.0/s"
    assert rows[2]["state"] == "dead" and rows[2]["bytes_in"] == "0 B/s"  # its last report is stale
    assert rows[2]["table_coordinators"] == ["orders"] and rows[1]["table_coordinators"] == []
    assert rows[1]["rack"] == "a" and rows[1]["listeners"] == [
        {"protocol": "PLAINTEXT", "host": "127.0.0.1", "port": 9092}
    ]


def test_rates_and_sizes_carry_units() -> None:
    assert [cluster_view.rate(v) for v in (0, 512, 1500, 2e6, 3e9)] == [
        "0 B/s",
        "512 B/s",
        "1.50 kB/s",
        "2.00 MB/s",
        "3.00 GB/s",
    ]
    assert cluster_view.size(2048) == "2.0 KiB"
