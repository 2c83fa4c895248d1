"""One view of the whole cluster, the same from every broker: brokers (rack, node epoch, state,
controller, partitions and coordinator slots held, bytes in and out), every partition's leader and
high watermark, records and bytes summed over the cluster, the timeline of the controller's
decisions and the auto-balancer's current plan.

Why from the metadata database and the leaders, not from this broker's memory: a broker's own store
knows only the partitions it leads (others read 0), and its registry knows only itself. Leaders,
epochs and loads are ``cluster_*`` rows every broker shares; log starts and stored bytes are the
committed streams and objects. High watermarks are asked of each partition's leader
(:mod:`tabletopic.leader_offsets`): the database's ``end_offset`` is only what has been uploaded,
which on the shared WAL trails what the leader has acknowledged; it stands in for a leader that does
not answer. A single node answers from its own store (its local WAL is ahead of the database) and its
own registry.

Every read here is blocking; callers run :func:`read` in a thread.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC, TXN_SLOTS_TOPIC
from tabletopic.cluster import events
from tabletopic.cluster.autobalance import plan_for
from tabletopic.cluster.db import ClusterMetadata, ClusterSnapshot, broker_state
from tabletopic.cluster.node import ClusterSettings
from tabletopic.cluster.settings import RACK
from tabletopic.cluster.status_report import records_rate
from tabletopic.leader_offsets import leader_high_watermarks
from tabletopic.s3stream.db import ObjectState, objects_table, ranges_table, streams_table

if TYPE_CHECKING:
    from tabletopic.broker.service import BrokerService
    from tabletopic.broker.topics import Topic

log = logging.getLogger(__name__)

TIMELINE_EVENTS = 200


def rate(value: float) -> str:
    """Bytes per second with a unit (what ``cluster status`` prints)."""
    if value == 0:
        return "0 B/s"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B/s"


def size(value: int) -> str:
    number = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if number < 1024 or unit == "TiB":
            return f"{number:.0f} {unit}" if unit == "B" else f"{number:.1f} {unit}"
        number /= 1024
    return f"{number:.1f} TiB"  # pragma: no cover


@dataclass(frozen=True)
class StreamFigures:
    """``(log start, high watermark)`` and the bytes stored of each stream."""

    offsets: dict[int, tuple[int, int]]
    stored_bytes: dict[int, int]


def stream_figures(engine: Engine, stream_ids: list[int]) -> StreamFigures:
    """Offsets and stored bytes of streams, as committed in the metadata database (one query for
    each: a GROUP BY over the object ranges of committed objects)."""
    if not stream_ids:
        return StreamFigures({}, {})
    s, r, o = streams_table, ranges_table, objects_table
    wanted = set(stream_ids)
    with engine.connect() as conn:
        offsets = {
            int(row[0]): (int(row[1]), int(row[2]))
            for row in conn.execute(sa.select(s.c.stream_id, s.c.start_offset, s.c.end_offset))
            if int(row[0]) in wanted
        }
        stored = {
            int(row[0]): int(row[1] or 0)
            for row in conn.execute(
                sa.select(r.c.stream_id, sa.func.sum(r.c.size))
                .select_from(
                    r.join(o, r.c.object_id == o.c.object_id).join(s, s.c.stream_id == r.c.stream_id)
                )
                # committed objects, ranges not wholly trimmed away
                .where(o.c.state == ObjectState.COMMITTED, r.c.end_offset > s.c.start_offset)
                .group_by(r.c.stream_id)
            )
            if int(row[0]) in wanted
        }
    return StreamFigures(offsets, stored)


def cluster_figures(service: BrokerService, engine: Engine, topics: list[Topic]) -> StreamFigures:
    """:func:`stream_figures` of ``topics`` with each high watermark as the partition's leader
    answers it, where it answers (:mod:`tabletopic.leader_offsets`): the database's end offset
    trails the leader by its upload interval on the shared WAL."""
    figures = stream_figures(engine, [s for t in topics for s in t.streams])
    stream_of = {
        (t.name, index): stream
        for t in topics
        for index, stream in enumerate(t.streams)
        if stream in figures.offsets
    }
    offsets = dict(figures.offsets)
    for key, end in leader_high_watermarks(console_client_config(service), stream_of).items():
        start, committed = offsets[stream_of[key]]
        offsets[stream_of[key]] = (start, max(end, committed))
    return StreamFigures(offsets, figures.stored_bytes)


def figures_of(service: BrokerService, engine: Engine, topics: list[Topic]) -> StreamFigures:
    """:func:`cluster_figures` in a cluster, else the database's :func:`stream_figures` alone."""
    if clustered(service, engine):
        return cluster_figures(service, engine, topics)
    return stream_figures(engine, [s for t in topics for s in t.streams])


def console_client_config(service: BrokerService) -> dict[str, Any]:
    """librdkafka settings of the console's clients: the broker's own login, logging errors only
    (a view that cannot reach a broker says so itself)."""
    return {**service.own_client_config(), "log_level": 3}


def clustered(service: BrokerService | None, engine: Engine | None) -> bool:
    return bool(service is not None and service.clustered and engine is not None)


def partitions_of(
    service: BrokerService, engine: Engine | None, topic: Topic, snapshot: ClusterSnapshot | None = None
) -> list[dict[str, Any]]:
    """Every partition of ``topic`` with its real leader, leader epoch and high watermark (see the
    module docstring for where each comes from)."""
    figures = StreamFigures({}, {})
    in_cluster = clustered(service, engine)
    if engine is not None:
        try:
            figures = figures_of(service, engine, [topic])
        except Exception as exc:  # the database is away: offsets below come from the local store
            log.debug("stream figures unavailable: %s", exc)
    if in_cluster and snapshot is None and engine is not None:
        snapshot = ClusterMetadata(engine).snapshot()
    local = service.partition_offsets(topic)
    rows = []
    for index, stream in enumerate(topic.streams):
        if in_cluster and stream in figures.offsets:
            start, end = figures.offsets[stream]
        else:
            start, end = local[index]
        leader: int | None = service.node_id
        epoch = 0
        moving_to = None
        if snapshot is not None:
            row = snapshot.partitions.get((topic.name, index))
            if row is not None:
                leader, epoch = row.leader, row.leader_epoch
                moving_to = row.target if row.target is not None and row.target != row.leader else None
            else:  # not placed yet: the leader Metadata reports (predicted)
                leader, epoch = service.leadership.leader(topic.name, index)
        rows.append(
            {
                "partition": index,
                "leader": leader,
                "leader_epoch": epoch,
                "moving_to": moving_to,
                "stream_id": stream,
                "log_start_offset": start,
                "high_watermark": end,
                "records": max(end - start, 0),
                "stored_bytes": figures.stored_bytes.get(stream, 0),
            }
        )
    return rows


def _coordinators(engine: Engine) -> dict[str, str]:
    """``{topic: owner}`` of the table coordinators' leases."""
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("table_coordinator_leases"):
            return {}
        rows = conn.execute(sa.text("SELECT topic, owner FROM table_coordinator_leases"))
        return {str(r[0]): str(r[1]) for r in rows}


def _brokers(
    service: BrokerService, snapshot: ClusterSnapshot, table_owners: dict[str, str]
) -> list[dict[str, Any]]:
    led: dict[int, dict[str, int]] = {}
    for (topic, _), row in snapshot.partitions.items():
        if row.leader is None:
            continue
        counts = led.setdefault(row.leader, {"partitions": 0, "group": 0, "txn": 0})
        if topic == GROUP_SLOTS_TOPIC:
            counts["group"] += 1
        elif topic == TXN_SLOTS_TOPIC:
            counts["txn"] += 1
        else:
            counts["partitions"] += 1
    out = []
    for node in sorted(snapshot.nodes.values(), key=lambda n: n.node_id):
        state = broker_state(node)
        live = state in ("alive", "draining")
        bytes_in, bytes_out = node.traffic()
        records_in = node.records_in()
        counts = led.get(node.node_id, {"partitions": 0, "group": 0, "txn": 0})
        tables = sorted(t for t, owner in table_owners.items() if _owner_node(owner) == node.node_id)
        out.append(
            {
                "node_id": node.node_id,
                "rack": node.rack,
                "node_epoch": node.node_epoch,
                "state": state,
                "alive": live,
                "is_controller": snapshot.controller_id == node.node_id,
                "this_node": node.node_id == service.node_id,
                "partitions": counts["partitions"],
                "group_coordinator_slots": counts["group"],
                "transaction_coordinator_slots": counts["txn"],
                "table_coordinators": tables,
                "bytes_in_per_second": bytes_in,
                "bytes_out_per_second": bytes_out,
                "bytes_in": rate(bytes_in),
                "bytes_out": rate(bytes_out),
                "records_in_per_second": records_in,
                "records_in": records_rate(records_in),
                "listeners": [
                    {"protocol": name, "host": host, "port": port}
                    for name, (host, port) in node.endpoints.items()
                ],
            }
        )
    return out


def _owner_node(owner: str) -> int | None:
    """The broker id in a table coordinator lease's owner (``"<host>/broker-<id>"``)."""
    found = re.search(r"broker-(\d+)$", owner)
    return int(found.group(1)) if found else None


def _plan(service: BrokerService, snapshot: ClusterSnapshot) -> dict[str, Any]:
    # Only the balancer's settings are read: which broker asks does not matter to them.
    node_id: Any = service.node_id
    settings = ClusterSettings.from_config(service.config, node_id).auto_balancer
    plan = plan_for(snapshot, settings.planner)
    return {
        "enabled": settings.enabled,
        "note": plan.note,
        "moves": [
            {"topic": m.topic, "partition": m.partition, "from": m.source, "to": m.target, "reason": m.reason}
            for m in plan.moves
        ],
        "brokers": [
            {
                "node_id": broker,
                "bytes_in": rate(before[0]),
                "bytes_out": rate(before[1]),
                "bytes_in_after": rate(plan.after[broker][0]),
                "bytes_out_after": rate(plan.after[broker][1]),
            }
            for broker, before in sorted(plan.before.items())
        ],
    }


def _single_node(service: BrokerService, engine: Engine | None) -> dict[str, Any]:
    topics = [_topic_summary(t.name, partitions_of(service, engine, t)) for t in service.topics.all()]
    return {
        "cluster_id": service.cluster_id,
        "mode": "single node",
        "controller_id": service.node_id,
        "controller_epoch": 0,
        "this_node": service.node_id,
        "brokers": [
            {
                "node_id": service.node_id,
                "rack": service.config.get(RACK) or None,
                "node_epoch": 0,
                "state": "alive",
                "alive": True,
                "is_controller": True,
                "this_node": True,
                "partitions": sum(t["partitions"] for t in topics),
                "group_coordinator_slots": 0,
                "transaction_coordinator_slots": 0,
                "table_coordinators": [],
                "bytes_in": "-",
                "bytes_out": "-",
                "listeners": [
                    {"protocol": str(e.protocol), "host": e.host, "port": e.port}
                    for e in service.advertised.values()
                ],
            }
        ],
        **_totals(topics),
        "timeline": [],
        "decisions": [],
        "balancer": {
            "enabled": False,
            "note": "a single node has nothing to balance",
            "moves": [],
            "brokers": [],
        },
    }


def _topic_summary(name: str, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "partitions": len(partitions),
        "records": sum(p["records"] for p in partitions),
        "high_watermark": sum(p["high_watermark"] for p in partitions),
        "stored_bytes": sum(p["stored_bytes"] for p in partitions),
        "leaders": sorted({p["leader"] for p in partitions if p["leader"] is not None}),
    }


def _totals(topics: list[dict[str, Any]]) -> dict[str, Any]:
    topics = sorted(topics, key=lambda t: t["name"])
    return {
        "topics": len(topics),
        "partitions": sum(t["partitions"] for t in topics),
        "records": sum(t["records"] for t in topics),
        "stored_bytes": sum(t["stored_bytes"] for t in topics),
        "stored": size(sum(t["stored_bytes"] for t in topics)),
        "topic_list": topics,
    }


def read(service: BrokerService, engine: Engine | None, with_partitions: bool = False) -> dict[str, Any]:
    """The whole cluster as this broker's admin API answers it (``GET /v1/cluster``)."""
    if not clustered(service, engine):
        return _single_node(service, engine)
    assert engine is not None
    snapshot = ClusterMetadata(engine).snapshot()
    all_topics = list(service.topics.all())
    figures = cluster_figures(service, engine, all_topics)
    summaries = []
    partitions: dict[str, list[dict[str, Any]]] = {}
    for topic in all_topics:
        rows = []
        for index, stream in enumerate(topic.streams):
            row = snapshot.partitions.get((topic.name, index))
            start, end = figures.offsets.get(stream, (0, 0))
            rows.append(
                {
                    "partition": index,
                    "leader": row.leader if row is not None else None,
                    "leader_epoch": row.leader_epoch if row is not None else 0,
                    "high_watermark": end,
                    "log_start_offset": start,
                    "records": max(end - start, 0),
                    "stored_bytes": figures.stored_bytes.get(stream, 0),
                }
            )
        summaries.append(_topic_summary(topic.name, rows))
        partitions[topic.name] = rows
    try:
        kept = events.recent(engine, events.KEEP)
        timeline = [e.as_dict() for e in kept[:TIMELINE_EVENTS]]
        decisions = [d.as_dict() for d in events.decisions(kept)[:TIMELINE_EVENTS]]
    except Exception as exc:
        timeline = [{"kind": "error", "reason": f"timeline unavailable: {exc}"}]
        decisions = [{"kind": "error", "cause": timeline[0]["reason"], "where": "", "went_to": ""}]
    answer = {
        "cluster_id": service.cluster_id,
        "mode": "cluster",
        "controller_id": snapshot.controller_id,
        "controller_epoch": snapshot.controller_epoch,
        "this_node": service.node_id,
        "brokers": _brokers(service, snapshot, _coordinators(engine)),
        **_totals(summaries),
        "coordinator_slots": {
            GROUP_SLOTS_TOPIC: sum(1 for t, _ in snapshot.partitions if t == GROUP_SLOTS_TOPIC),
            TXN_SLOTS_TOPIC: sum(1 for t, _ in snapshot.partitions if t == TXN_SLOTS_TOPIC),
        },
        "timeline": timeline,
        "decisions": decisions,
        "balancer": _plan(service, snapshot),
    }
    if with_partitions:
        answer["partition_list"] = partitions
    return answer
