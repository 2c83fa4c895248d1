"""The report ``tabletopic cluster status`` prints, as text built from a snapshot of the metadata
database (kept apart from the command's I/O so that it can be tested as a reader meets it): brokers
and their state and load, each partition's leader, epoch and high watermark, the coordinators of
groups and tables, and the controller's latest decisions."""

from __future__ import annotations

from typing import Any

from tabletopic.cli_common import columns, or_dash
from tabletopic.cluster import events
from tabletopic.cluster.controller import group_slot
from tabletopic.cluster.db import ClusterSnapshot, broker_state
from tabletopic.cluster.events import ClusterEvent
from tabletopic.cluster.load import RECORDS_CONSUMED, figure

GROUP_SLOTS_TOPIC = "__consumer_offsets"

# The timeline's newest entries `cluster status` prints, each one decision (a broker's failover is
# one entry, whatever its partition count), read from every row kept.
TIMELINE_SHOWN = 20


def is_internal(topic: str) -> bool:
    """Kafka's own topics (``__consumer_offsets`` slots, ``__transaction_state``, ...)."""
    return topic.startswith("__")


def render(
    snapshot: ClusterSnapshot,
    groups: list[str],
    tables: list[Any],
    slots: int,
    internal: bool = False,
    plain: bool = False,
    high_watermarks: dict[tuple[str, int], int] | None = None,
    timeline: list[ClusterEvent] | None = None,
    topics: set[str] | None = None,
) -> str:
    """The status report as text (kept apart from I/O so it can be tested): aligned columns, or
    tab-separated ones when ``plain`` (piped). Kafka's internal topics only with ``internal``;
    ``topics``, when given, are the only ones whose partitions are listed (a cluster of 10,000
    partitions otherwise lists every one, as ``kafka-topics --describe`` does).
    ``high_watermarks`` (each partition's committed stream end) adds a column; ``timeline`` (the
    controller's latest decisions, newest first) a section."""
    leaders: dict[int, int] = {}
    for (topic, _), row in snapshot.partitions.items():
        if not is_internal(topic) and row.leader is not None:
            leaders[row.leader] = leaders.get(row.leader, 0) + 1
    controller = "none" if snapshot.controller_id is None else f"broker {snapshot.controller_id}"
    lines = [
        f"controller: {controller} (controller epoch {snapshot.controller_epoch})",
        traffic(snapshot),
        "",
    ]
    nodes = [["NODE", "RACK", "EPOCH", "STATE", "LEADS", "BYTES IN", "BYTES OUT", "RECORDS IN", "ENDPOINTS"]]
    for node in sorted(snapshot.nodes.values(), key=lambda n: n.node_id):
        state = broker_state(node)
        # A dead or stopped broker's last report is stale: it carries nothing now.
        live = state in ("alive", "draining")
        bytes_in = sum(v[0] for v in node.load.values()) if live else 0
        bytes_out = sum(v[1] for v in node.load.values()) if live else 0
        records_in = node.records_in() if live else 0.0
        endpoints = " ".join(f"{k}://{h}:{p}" for k, (h, p) in node.endpoints.items())
        nodes.append(
            [str(node.node_id), node.rack or "-", str(node.node_epoch), state,
             str(leaders.get(node.node_id, 0)), rate(bytes_in), rate(bytes_out), records_rate(records_in),
             endpoints]
        )  # fmt: skip
    lines += columns(nodes, {0, 2, 4, 5, 6, 7}, plain)
    partitions = [
        ["TOPIC", "PART", "LEADER", "EPOCH", "MOVING TO"]
        + (["HIGH WATERMARK"] if high_watermarks is not None else [])
    ]
    # User topics first, then (with --internal) Kafka's own.
    for (topic, partition), row in sorted(
        snapshot.partitions.items(), key=lambda kv: (is_internal(kv[0][0]), kv[0])
    ):
        if (topic not in topics) if topics is not None else (is_internal(topic) and not internal):
            continue
        moving = "-" if row.target is None or row.target == row.leader else str(row.target)
        leader = str(row.leader) if row.leader is not None else "-1"
        cells = [topic, str(partition), leader, str(row.leader_epoch), moving]
        if high_watermarks is not None:
            cells.append(or_dash(high_watermarks.get((topic, partition))))
        partitions.append(cells)
    lines += ["", *columns(partitions, {1, 2, 3, 5}, plain)]
    hidden = sorted({t for t, _ in snapshot.partitions if is_internal(t)})
    if topics is not None:
        unknown = sorted(topics - {t for t, _ in snapshot.partitions})
        if unknown:
            lines.append(f"(no such topic: {', '.join(unknown)})")
    elif hidden and not internal:
        lines.append(
            f"({len(hidden)} internal topics not listed: {', '.join(hidden)}; --internal lists them)"
        )
    lines += ["", "group coordinators:"]
    for group in sorted(groups):
        slot = snapshot.partitions.get((GROUP_SLOTS_TOPIC, group_slot(group, slots)))
        lines.append(f"  {group}: broker {slot.leader if slot is not None else '?'}")
    if not groups:
        lines.append("  (no groups)")
    lines += ["", "table coordinators:"]
    for topic, owner, epoch, claim, _expires in sorted(tables):
        lines.append(f"  {topic}: {owner} (lease epoch {epoch}, partition-0 leader epoch {claim})")
    if not tables:
        lines.append("  (no table topics)")
    if timeline is not None:
        lines += ["", "timeline (failovers, moves, balancing; newest first):"]
        for decision in events.decisions(timeline)[:TIMELINE_SHOWN]:
            lines.append(f"  {decision.at or '-'}  {decision.line()}")
        if not timeline:
            lines.append("  (nothing yet)")
    return "\n".join(lines)


def traffic(snapshot: ClusterSnapshot) -> str:
    """The whole cluster's traffic in one line, summed over the live brokers' last reports."""
    live = [node for node in snapshot.nodes.values() if node.alive]  # a dead one's report is stale
    traffics = [node.traffic() for node in live]
    bytes_in = sum(bytes_in for bytes_in, _ in traffics)
    bytes_out = sum(bytes_out for _, bytes_out in traffics)
    records_in = sum(node.records_in() for node in live)
    consumed = sum(figure(rates, RECORDS_CONSUMED) for node in live for rates in node.load.values())
    return (
        f"traffic: {records_rate(records_in)} records in, {records_rate(consumed)} consumed (as groups "
        f"commit); {rate(bytes_in)} in, {rate(bytes_out)} out"
    )


def records_rate(value: float) -> str:
    """Records per second: to a tenth below 100 (a topic written now and then is not 0), then
    whole, then in thousands and millions."""
    if value >= 1e6:
        return f"{value / 1e6:.2f} M/s"
    if value >= 1e4:
        return f"{value / 1e3:.1f} k/s"
    return f"{value:.1f}/s" if value < 100 else f"{value:.0f}/s"


def rate(value: float) -> str:
    """Bytes per second in the unit a reader takes in at a glance."""
    if value == 0:
        return "0 B/s"
    return f"{value / 1e6:.2f} MB/s" if value >= 1e5 else f"{value / 1e3:.1f} kB/s"
