"""The console's sampler: node counters become per-second rates, gauges are kept as they are, and a
node whose parts have not started yet still samples (and renders) what it has."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from tabletopic.api.sampler import Sampler
from tabletopic.api.sources import ConsoleSources
from tabletopic.api.timeseries import SeriesRing
from tabletopic.component import NotStarted


class NotStartedBroker:
    role = None  # a single node

    @property
    def service(self) -> Any:
        raise NotStarted("broker")

    @property
    def groups(self) -> Any:
        raise NotStarted("broker")


def test_counters_become_rates_and_gauges_stay_values() -> None:
    registry = CollectorRegistry()
    produced = Counter("tabletopic_broker_produce_bytes", "x", registry=registry)
    wal = Gauge("tabletopic_s3stream_wal_bytes", "x", registry=registry)
    ring = SeriesRing(points=10)
    sampler = Sampler(ConsoleSources(registry, NotStartedBroker()), ring)  # type: ignore[arg-type]
    wal.set(4096)
    first = sampler.sample(now=100.0)
    assert "node|produce_bytes_per_s" not in first  # no rate from one sample
    assert first["storage|wal_bytes"] == 4096
    produced.inc(5000)
    second = sampler.sample(now=105.0)
    assert second["node|produce_bytes_per_s"] == 1000.0
    window = ring.window("node|")
    assert window["t"] == [100.0, 105.0] and window["node|produce_bytes_per_s"] == [None, 1000.0]


def test_a_counter_that_went_backwards_skips_one_rate_instead_of_plotting_a_negative() -> None:
    registry = CollectorRegistry()
    sampler = Sampler(ConsoleSources(registry, NotStartedBroker()), SeriesRing(points=4))  # type: ignore[arg-type]
    sampler._previous = {"node|produce_bytes_per_s": 10_000.0}
    sampler._previous_at = 1.0
    Counter("tabletopic_broker_produce_bytes", "x", registry=registry).inc(10)
    assert "node|produce_bytes_per_s" not in sampler.sample(now=2.0)


class Pipeline:
    def __init__(self, status: Any) -> None:
        self.status = status


class Tables:
    def __init__(self, pipelines: dict[str, Pipeline]) -> None:
        self.coordinator = type("Coordinator", (), {"pipelines": pipelines})()


def test_a_restarted_pipeline_plots_no_lag_or_rows_until_it_has_read_its_table() -> None:
    """After a restart nothing was produced: the first samples must not plot the whole log as lag
    and the whole table as rows committed per second (a false spike)."""
    from tabletopic.table.coordinator import PipelineStatus

    status = PipelineStatus("orders", "default.orders", high_watermarks={0: 45_000})
    sources = ConsoleSources(
        CollectorRegistry(), NotStartedBroker(), tables=Tables({"orders": Pipeline(status)})
    )  # type: ignore[arg-type]
    sampler = Sampler(sources, SeriesRing(points=10))
    assert not any(k.startswith("table|") for k in sampler.sample(now=100.0))
    status.facts_loaded, status.rows_committed, status.committed_offsets = True, 45_000, {0: 45_000}
    loaded = sampler.sample(now=105.0)
    assert loaded["table|orders|lag_records"] == 0.0
    assert "table|orders|rows_per_s" not in loaded  # the first value of the total: no rate yet
    assert sampler.sample(now=110.0)["table|orders|rows_per_s"] == 0.0


class Broker:
    """A started broker with one topic whose high watermarks and leadership a test sets."""

    role: Any = None  # a single node, unless a test gives it a cluster snapshot

    def __init__(self) -> None:
        self.marks = [0, 0]
        self.led = {0}
        topic = type("Topic", (), {"name": "orders", "partition_count": 2})()
        topics = type("Topics", (), {"all": lambda _self: [topic]})()
        leadership = type("Leadership", (), {"leads": lambda _self, _t, p: p in self.led})()
        self.service = type(
            "Service",
            (),
            {
                "topics": topics,
                "leadership": leadership,
                "partition_offsets": lambda _s, _t: [(0, m) for m in self.marks],
            },
        )()

    @property
    def groups(self) -> Any:
        raise NotStarted("broker")


def test_a_partition_gained_by_failover_adds_no_false_spike_of_records_produced() -> None:
    broker = Broker()
    sampler = Sampler(ConsoleSources(CollectorRegistry(), broker), SeriesRing(points=10))  # type: ignore[arg-type]
    broker.marks = [100, 0]
    assert "topic|orders|records_per_s" not in sampler.sample(now=100.0)  # no rate from one sample
    broker.marks = [110, 0]
    assert sampler.sample(now=105.0)["topic|orders|records_per_s"] == 2.0
    broker.marks, broker.led = [120, 45_000], {0, 1}  # partition 1 taken over with its whole log
    third = sampler.sample(now=110.0)
    assert third["topic|orders|records_per_s"] == 2.0 and third["node|produced_records_per_s"] == 2.0
    broker.marks = [120, 45_010]
    assert sampler.sample(now=115.0)["node|produced_records_per_s"] == 2.0


def test_a_cluster_brokers_console_plots_every_live_brokers_and_topics_traffic_as_reported() -> None:
    """A broker's own counters cover only what it serves: the whole cluster's traffic comes from
    the load every broker reports with its lease (the dead broker's last report is stale)."""
    from tabletopic.cluster.controller import Assignment
    from tabletopic.cluster.db import ClusterSnapshot, NodeInfo
    from tabletopic.ids import BrokerEpoch, LeaderEpoch, NodeId

    def node(node_id: int, alive: bool, load: dict[str, list[float]]) -> NodeInfo:
        return NodeInfo(NodeId(node_id), BrokerEpoch(1), None, {}, "alive", alive, load)

    # [bytes in, bytes out, records in, records consumed as the groups a broker coordinates commit]
    nodes = [
        node(
            1, True, {"orders/0": [1000, 3000, 10, 4], "orders/1": [500, 0, 2.5, 0], "orders/3": [0, 0, 0, 6]}
        ),
        node(2, True, {"orders/3": [200, 0]}),  # a broker of an earlier release reports bytes only
        node(3, False, {"orders/2": [9999, 9999, 99, 99]}),
    ]
    # "idle" had no write in the window: its leader leaves it out of the report.
    led_by_1 = Assignment(NodeId(1), BrokerEpoch(1), LeaderEpoch(1))
    led = {key: led_by_1 for key in [("orders", 0), ("orders", 1), ("idle", 0), ("__consumer_offsets", 0)]}
    broker = Broker()
    broker.role = type(
        "Role",
        (),
        {"node": type("Node", (), {"snapshot": ClusterSnapshot({n.node_id: n for n in nodes}, 1, 1, led)})()},
    )()
    values = Sampler(ConsoleSources(CollectorRegistry(), broker), SeriesRing(points=4)).sample(now=100.0)  # type: ignore[arg-type]
    plotted = {k: v for k, v in values.items() if "cluster" in k}
    assert plotted == {
        "cluster|bytes_in_per_s|broker_1": 1500.0,
        "cluster|bytes_out_per_s|broker_1": 3000.0,
        "cluster|records_in_per_s|broker_1": 12.5,
        "cluster|bytes_in_per_s|broker_2": 200.0,
        "cluster|bytes_out_per_s|broker_2": 0.0,
        "cluster|records_in_per_s|broker_2": 0.0,
        "cluster|records_per_s|in": 12.5,
        "cluster|records_per_s|consumed": 10.0,
        "topic|orders|cluster_bytes_in_per_s": 1700.0,  # its partitions on every live broker
        "topic|orders|cluster_records_in_per_s": 12.5,
        "topic|orders|cluster_records_consumed_per_s": 10.0,
        "topic|idle|cluster_bytes_in_per_s": 0.0,  # idle, not a gap in its chart
        "topic|idle|cluster_records_in_per_s": 0.0,
        "topic|idle|cluster_records_consumed_per_s": 0.0,
    }
