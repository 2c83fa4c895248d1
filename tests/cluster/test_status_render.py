"""``tabletopic cluster status`` as a reader meets it: one state per broker, rates with units (none
for a broker that is gone), user topics first and Kafka's internal ones only on request, and plain
tab-separated columns when piped."""

from __future__ import annotations

from tabletopic.cluster.controller import Assignment
from tabletopic.cluster.db import ClusterSnapshot, NodeInfo
from tabletopic.cluster.status_report import render


def snapshot() -> ClusterSnapshot:
    # [bytes in, bytes out, records in, records consumed] per second; an earlier release: bytes only
    load = {"orders/0": [2_500_000, 1_000, 12.5, 3], "orders/1": [1_500, 0]}
    nodes = {
        1: NodeInfo(1, 3, "a", {"PLAINTEXT": ("127.0.0.1", 9092)}, "alive", True, load),
        2: NodeInfo(2, 1, "b", {"PLAINTEXT": ("127.0.0.1", 9102)}, "alive", False, load),  # lease ran out
        3: NodeInfo(3, 2, None, {}, "stopped", False, {}),
        4: NodeInfo(4, 5, "a", {}, "draining", True, {}),
        5: NodeInfo(5, 1, "c", {}, "retired", False, {}),  # its WAL was taken over
    }
    partitions = {
        ("orders", 0): Assignment(1, 3, 4),
        ("orders", 1): Assignment(1, 3, 2, target=4),
        ("__transaction_state", 0): Assignment(1, 3, 1),
        ("__consumer_offsets", 0): Assignment(1, 3, 1),
        ("clicks", 0): Assignment(None, 0, 0),
    }
    return ClusterSnapshot(nodes, 1, 7, partitions)


def node_lines(report: str) -> dict[str, list[str]]:
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NODE"))
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split("\t")
        rows[cells[0]] = cells
    return rows


def test_each_broker_shows_one_state_and_a_dead_one_carries_no_bytes() -> None:
    report = render(snapshot(), [], [], 6, plain=True)
    # The whole cluster's traffic, under the controller: the live brokers' reports only.
    assert (
        report.splitlines()[1]
        == "traffic: 12.5/s records in, 3.0/s consumed (as groups commit); 2.50 MB/s in, 1.0 kB/s out"
    )
    header = next(line for line in report.splitlines() if line.startswith("NODE")).split("\t")
    assert "ALIVE" not in header and "STATE" in header
    rows = node_lines(report)
    state = header.index("STATE")
    assert {n: rows[n][state] for n in rows} == {
        "1": "alive",
        "2": "dead",
        "3": "stopped",
        "4": "draining",
        "5": "dead",
    }
    bytes_in, bytes_out = header.index("BYTES IN"), header.index("BYTES OUT")
    records_in = header.index("RECORDS IN")
    assert rows["1"][bytes_in] == "2.50 MB/s" and rows["1"][bytes_out] == "1.0 kB/s"
    assert rows["1"][records_in] == "12.5/s"
    assert rows["2"][bytes_in] == "0 B/s" and rows["2"][bytes_out] == "0 B/s"
    assert rows["2"][records_in] == "0.0/s"


def test_internal_topics_are_listed_only_on_request_after_the_user_topics() -> None:
    plain = render(snapshot(), [], [], 6, plain=True)
    assert "__transaction_state" not in plain.split("internal topics not listed")[0]
    assert "2 internal topics not listed: __consumer_offsets, __transaction_state; --internal" in plain
    listed = [
        line.split("\t")[0] for line in render(snapshot(), [], [], 6, internal=True, plain=True).splitlines()
    ]
    topics = [t for t in listed if t in ("orders", "clicks", "__transaction_state", "__consumer_offsets")]
    assert topics == ["clicks", "orders", "orders", "__consumer_offsets", "__transaction_state"]


def test_piped_columns_are_tab_separated_and_aligned_on_a_terminal() -> None:
    plain = render(snapshot(), [], [], 6, plain=True)
    assert "orders\t1\t1\t2\t4" in plain
    aligned = render(snapshot(), [], [], 6)
    assert "\t" not in aligned
    rows = [line for line in aligned.splitlines() if line.startswith(("TOPIC", "orders", "clicks"))]
    assert len({row.index(row.split()[1]) for row in rows[1:]}) == 1  # PART lines up


def test_the_takeover_of_a_dead_brokers_partitions_names_who_leads_them_now() -> None:
    from tabletopic.cluster.cli import takeover_report

    led_by_2 = {("orders", 0), ("orders", 1), ("clicks", 0)}
    before = ClusterSnapshot({}, 1, 7, {key: Assignment(2, 1, 3) for key in led_by_2})
    assert takeover_report(2, led_by_2, before) is None  # its session has not expired yet
    halfway = ClusterSnapshot({}, 1, 7, {**before.partitions, ("orders", 0): Assignment(1, 3, 4)})
    assert takeover_report(2, led_by_2, halfway) is None
    after = ClusterSnapshot(
        {},
        1,
        8,
        {
            ("orders", 0): Assignment(1, 3, 4),
            ("orders", 1): Assignment(3, 2, 4),
            ("clicks", 0): Assignment(1, 3, 4),
        },
    )
    assert takeover_report(2, led_by_2, after) == (
        "broker 2 is dead: the 3 partitions it led are now led by broker 1 (2), broker 3 (1)"
    )


def test_status_shows_each_partitions_high_watermark_and_the_timeline_when_given() -> None:
    from tabletopic.cluster.events import ClusterEvent

    marks = {key: 7 for key in snapshot().partitions}
    timeline = [
        ClusterEvent(
            "failover",
            "broker 2 is dead (its lease expired); broker 1 took over",
            "orders",
            0,
            2,
            1,
            "2026-01-01T10:00:00+00:00",
        )
    ]
    plain = render(snapshot(), [], [], 6, plain=True, high_watermarks=marks, timeline=timeline)
    assert "\tHIGH WATERMARK" in plain
    assert any(line.startswith("orders\t0\t") and line.endswith("\t7") for line in plain.splitlines()), plain
    assert "failover orders-0: broker 2 is dead" in plain


def test_a_broker_failover_is_one_line_of_the_timeline_whatever_its_partition_count() -> None:
    from tabletopic.cluster.events import ClusterEvent

    at = "2026-01-01T10:00:00+00:00"
    timeline = [
        ClusterEvent(
            "failover", "broker 2 is dead (its lease expired); broker 1 took over", "orders", p, 2, 1, at
        )
        for p in range(300)
    ]
    plain = render(snapshot(), [], [], 6, plain=True, timeline=timeline)
    shown = plain.split("timeline (failovers, moves, balancing; newest first):\n")[1].splitlines()
    assert shown == [
        f"  {at}  failover of 300 partitions (orders-0, orders-1, orders-2, orders-3, orders-4 "
        "and 295 more): broker 2 is dead (its lease expired); to broker 1 (300)"
    ]


def test_topic_picks_the_partitions_listed_and_names_a_topic_that_does_not_exist() -> None:
    plain = render(snapshot(), [], [], 6, plain=True, topics={"clicks", "__transaction_state", "nope"})
    listed = [line.split("\t")[0] for line in plain.splitlines()]
    assert [t for t in listed if t in ("orders", "clicks", "__transaction_state")] == [
        "clicks",
        "__transaction_state",
    ]
    assert "(no such topic: nope)" in plain and "internal topics not listed" not in plain
