"""The data behind each console page, as plain dicts for the templates (and tests).

Cheap in-memory reads run on the event loop; reads that touch the metadata database, the schema
registry or the Iceberg catalog run in a thread (``asyncio.to_thread``) and degrade to an error line
on the page instead of failing it.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import difflib
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from tabletopic.api import cluster_groups, cluster_view
from tabletopic.api.share_offsets import share_offsets
from tabletopic.api.sources import ConsoleSources
from tabletopic.ids import NodeId
from tabletopic.schema_registry.contexts import public_id

log = logging.getLogger(__name__)

DLQ_KEY = "automq.table.topic.errors.dlq.topic"
TABLE_ENABLE = "automq.table.topic.enable"
SNAPSHOTS_SHOWN = 20
PREVIEW_ROWS = 10
PREVIEW_CELL_CHARS = 80


async def overview(src: ConsoleSources) -> dict[str, Any]:
    """The overview page: the whole cluster (every broker, totals, timeline, balancer plan; see
    :mod:`tabletopic.api.cluster_view`) and this node's storage."""
    service = src.broker_service()
    cluster: dict[str, Any] = {"brokers": [], "timeline": [], "balancer": None}
    if service is not None:
        try:
            cluster = await asyncio.to_thread(cluster_view.read, service, src.engine)
        except Exception as exc:  # the metadata database is away: say so, render the rest
            cluster = {
                "brokers": [],
                "timeline": [],
                "balancer": None,
                "error": f"{type(exc).__name__}: {exc}",
            }
    return {
        "cluster": cluster,
        "cluster_id": service.cluster_id if service else None,
        "topics": cluster.get("topics", 0),
        "partitions": cluster.get("partitions", 0),
        "groups": await _group_count(src),
        "tables": _table_count(src),
        "storage": {
            "wal_bytes": src.metric("tabletopic_s3stream_wal_bytes"),
            "cache_hit_ratio": src.metric("tabletopic_s3stream_cache_hit_ratio"),
            "compaction_backlog_objects": src.metric("tabletopic_s3stream_compaction_backlog_objects"),
            "uploaded_bytes": src.metric("tabletopic_s3stream_upload_bytes_total"),
            "deleted_objects": src.metric("tabletopic_s3stream_deleted_objects_total"),
        },
    }


async def _group_count(src: ConsoleSources) -> int:
    """The groups of the node or cluster (ListGroups of every broker)."""
    asked = _group_client(src)
    if asked is None:
        return 0
    try:
        return len(await asyncio.to_thread(cluster_groups.group_ids, asked))
    except Exception as exc:
        log.warning("the groups could not be counted: %s", exc)
        return 0


def _table_count(src: ConsoleSources) -> int:
    """The cluster's table topics (any broker may coordinate them), or this node's own."""
    peers = src.peers
    if peers is not None and peers.clustered():
        return len(peers.table_topics())
    return len(src.pipelines())


async def stored_objects(src: ConsoleSources) -> dict[str, Any]:
    """Committed objects by kind (count, bytes), from the metadata database."""
    if src.engine is None:
        return {}
    from tabletopic.s3stream.db import StreamMetadata

    engine = src.engine

    def read() -> dict[str, Any]:
        by_kind: dict[str, dict[str, int]] = {}
        for obj in StreamMetadata(engine).committed_objects():
            entry = by_kind.setdefault(str(obj.kind), {"count": 0, "bytes": 0})
            entry["count"] += 1
            entry["bytes"] += obj.size
        return by_kind

    try:
        return await asyncio.to_thread(read)
    except Exception as exc:
        return {"error": {"count": 0, "bytes": 0, "message": str(exc)}}


async def topics(src: ConsoleSources) -> list[dict[str, Any]]:
    """Every topic with records and bytes summed over the cluster (each partition's high watermark
    as the partition's leader answers it in a cluster, see :mod:`tabletopic.api.cluster_view`)."""
    service = src.broker_service()
    if service is None:
        return []
    engine = src.engine

    def read() -> list[dict[str, Any]]:
        all_topics = sorted(service.topics.all(), key=lambda t: t.name)
        figures = cluster_view.StreamFigures({}, {})
        if engine is not None:
            try:
                figures = cluster_view.figures_of(service, engine, all_topics)
            except Exception as exc:
                log.debug("stream figures unavailable: %s", exc)
        in_cluster = cluster_view.clustered(service, engine)
        out = []
        for topic in all_topics:
            if in_cluster:
                offsets = [figures.offsets.get(s, (0, 0)) for s in topic.streams]
            else:
                offsets = service.partition_offsets(topic)
            out.append(
                {
                    "name": topic.name,
                    "partitions": topic.partition_count,
                    "records": sum(max(end - start, 0) for start, end in offsets),
                    "high_watermark": sum(end for _, end in offsets),
                    "stored_bytes": sum(figures.stored_bytes.get(s, 0) for s in topic.streams),
                    "table_topic": topic.configs.get(TABLE_ENABLE, "false").lower() == "true",
                    "explicit_configs": dict(topic.configs),
                }
            )
        return out

    return await asyncio.to_thread(read)


async def topic(src: ConsoleSources, name: str) -> dict[str, Any] | None:
    from tabletopic.api.topics import TopicApiError, describe

    service = src.broker_service()
    if service is None:
        return None
    try:
        return await asyncio.to_thread(describe, service, name, src.engine)
    except TopicApiError:
        return None


Ends = dict[str, list[tuple[int, int]]]


async def partition_ends(src: ConsoleSources) -> Ends | None:
    """``{topic: [(log start, high watermark), ...]}``: from the database and the leaders in a
    cluster (a broker's own store knows only what it leads), from the node's store on a single node."""
    service = src.broker_service()
    engine = src.engine
    if service is None:
        return None
    if engine is None or not cluster_view.clustered(service, engine):
        return {t.name: list(service.partition_offsets(t)) for t in service.topics.all()}

    def read() -> Ends:
        all_topics = list(service.topics.all())
        figures = cluster_view.cluster_figures(service, engine, all_topics)
        return {t.name: [figures.offsets.get(s, (0, 0)) for s in t.streams] for t in all_topics}

    try:
        return await asyncio.to_thread(read)
    except Exception as exc:
        log.debug("partition ends unavailable: %s", exc)
        return None


def _group_client(src: ConsoleSources) -> dict[str, Any] | None:
    """Client settings to ask about groups as this broker, the way any Kafka client does: ListGroups,
    DescribeGroups or ConsumerGroupDescribe, and OffsetFetch of each group's coordinator. One path
    for a single node and a cluster, so every group type is seen alike (the node's own coordinator,
    read in process, knew its classic groups only: KIP-848 groups were missing). None before the
    broker has started."""
    service = src.broker_service()
    return None if service is None else cluster_view.console_client_config(service)


async def groups(src: ConsoleSources) -> list[dict[str, Any]]:
    """Every group of the node or cluster, as its coordinator answers (see
    :mod:`~tabletopic.api.cluster_groups`)."""
    asked = _group_client(src)
    if asked is None:
        return []
    ends = await partition_ends(src)
    try:
        rows = await asyncio.to_thread(cluster_groups.groups, asked, ends)
    except Exception as exc:
        log.warning("the groups could not be listed: %s", exc)
        return []
    service = src.broker_service()
    shares = [row for row in rows if row["protocol_type"] == cluster_groups.SHARE]
    if service is not None and shares:
        progress = await asyncio.gather(*(share_offsets(service, row["group_id"]) for row in shares))
        for row, offsets in zip(shares, progress, strict=True):
            lags = [o["lag"] for o in offsets or [] if o["lag"] is not None]
            row["lag"] = sum(lags) if offsets is not None else None
    return rows


async def group(src: ConsoleSources, group_id: str) -> dict[str, Any] | None:
    """One group's page: state, members and their assignments, committed offsets and lag; None for
    a group the node or cluster does not know."""
    asked = _group_client(src)
    if asked is None:
        return None
    ends = await partition_ends(src)
    try:
        found = await asyncio.to_thread(cluster_groups.group, asked, group_id, ends)
    except Exception as exc:
        log.warning("group %s could not be described: %s", group_id, exc)
        return None
    if found is None:
        return None
    path = f"/groups/{quote(group_id, safe='')}"
    found["page"] = _plotted_elsewhere(src, found.get("coordinator"), path)
    service = src.broker_service()
    if found["protocol_type"] == cluster_groups.SHARE and service is not None:
        # Each share partition's start offset stands where a consumer group's committed offset does.
        found["offsets"] = [
            cluster_groups.offset_row(
                o["topic"], o["partition"], o["start_offset"], (ends or {}).get(o["topic"], [])
            )
            | {"lag": o["lag"]}  # what is still to deliver: acknowledged records past the start count not
            for o in await share_offsets(service, group_id) or []
        ]
    return found


def _plotted_elsewhere(src: ConsoleSources, coordinator: int | None, path: str) -> str | None:
    """``path`` on the console of ``coordinator`` when that is another live broker of the cluster:
    a group's lag is sampled by the broker coordinating it, so its plots are drawn there."""
    snapshot = src.cluster_snapshot()
    if snapshot is None or coordinator is None or coordinator == this_node(src):
        return None
    node = snapshot.nodes.get(NodeId(coordinator))
    if node is None or not node.alive or node.admin_url is None:
        return None
    return f"{node.admin_url.rstrip('/')}{path}"


def this_node(src: ConsoleSources) -> int | None:
    service = src.broker_service()
    return None if service is None else service.node_id


def tables(src: ConsoleSources) -> list[dict[str, Any]]:
    """The table topics this node coordinates."""
    here = this_node(src)
    return [{**p.status.as_dict(), "coordinator": here} for _, p in sorted(src.pipelines().items())]


async def cluster_tables(src: ConsoleSources, headers: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every table topic of the cluster (:mod:`tabletopic.api.cluster_tables`); a row another
    broker coordinates carries ``page``, its page on that broker's console (where its plots are)."""
    peers = src.peers
    if peers is None or not peers.clustered():
        return tables(src)
    urls = await peers.admin_urls()  # the other live brokers': a row of this one gets no page
    rows = await peers.listing(tables(src), headers, urls)
    for row in rows:
        url = urls.get(row["coordinator"])
        row["page"] = None if url is None else _table_page(url, row["topic"])
    return rows


async def table_page_elsewhere(src: ConsoleSources, topic: str) -> str | None:
    """``topic``'s console page on the broker that coordinates it, when that is another one."""
    peers = src.peers
    if peers is None or not peers.clustered():
        return None
    owner = peers.coordinator_of(topic)
    if owner is None or owner == this_node(src) or topic not in peers.table_topics():
        return None
    url = (await peers.admin_urls()).get(owner)
    return None if url is None else _table_page(url, topic)


def _table_page(admin_url: str, topic: str) -> str:
    return f"{admin_url.rstrip('/')}/tables/{quote(topic, safe='')}"


def _dlq_size(src: ConsoleSources, configs: dict[str, str]) -> dict[str, Any] | None:
    name = configs.get(DLQ_KEY)
    service = src.broker_service()
    if not name or service is None:
        return None
    found = service.topics.get(name)
    if found is None:
        return {"topic": name, "records": 0}
    return {"topic": name, "records": sum(e - s for s, e in service.partition_offsets(found))}


def _iceberg(src: ConsoleSources, table_name: str) -> dict[str, Any]:
    """Snapshots (rows and bytes per commit), schema versions and partition spec of a table."""
    catalog = src.iceberg_catalog()
    if catalog is None:
        return {"error": "the catalog has not started"}
    try:
        table = catalog.load_table(table_name)
    except Exception as exc:  # not created before the first commit; or the catalog is down
        return {"error": f"{type(exc).__name__}: {exc}"}
    metadata = table.metadata
    snapshots = sorted(metadata.snapshots, key=lambda s: s.timestamp_ms, reverse=True)
    current = metadata.current_schema_id
    return {
        "location": metadata.location,
        "format_version": metadata.format_version,
        "snapshots": [
            {
                "snapshot_id": s.snapshot_id,
                "timestamp_ms": s.timestamp_ms,
                "operation": s.summary.operation.value if s.summary else None,
                "added_records": s.summary.get("added-records") if s.summary else None,
                "added_bytes": s.summary.get("added-files-size") if s.summary else None,
                "total_records": s.summary.get("total-records") if s.summary else None,
            }
            for s in snapshots[:SNAPSHOTS_SHOWN]
        ],
        "snapshot_count": len(snapshots),
        "schemas": [
            {
                "schema_id": schema.schema_id,
                "current": schema.schema_id == current,
                "columns": [f"{f.name}: {f.field_type}" for f in schema.fields],
            }
            for schema in sorted(metadata.schemas, key=lambda s: s.schema_id, reverse=True)
        ],
        "partition_spec": spec_text(table.spec(), table.schema()),
        "rows": _preview(table) if snapshots else {"columns": [], "rows": []},
    }


def plain(value: Any) -> Any:
    """A cell value as JSON would show it: structs as objects, maps (Arrow gives them as lists of
    key/value tuples) as objects, binary as text when it is UTF-8 (else hex), times as ISO 8601."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            return {str(plain(k)): plain(v) for k, v in value}
        return [plain(item) for item in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return value


def cell(value: Any) -> str:
    """One cell of the row sample as the table's type reads: ``null``, numbers and booleans as
    JSON writes them, text as it is, structs and maps as JSON (never a Python repr)."""
    shown = plain(value)
    if shown is None:
        text = "null"
    elif isinstance(shown, str):
        text = shown
    else:
        text = json.dumps(shown, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= PREVIEW_CELL_CHARS else text[: PREVIEW_CELL_CHARS - 1] + "…"


def spec_text(spec: Any, schema: Any) -> str:
    """A partition spec as it is written in ``automq.table.topic.partition.by``:
    ``day(ts), bucket(16, customer)``; ``unpartitioned`` when it has no field."""
    parts = []
    for field in spec.fields:
        try:
            column = schema.find_column_name(field.source_id) or str(field.source_id)
        except Exception:
            column = str(field.source_id)
        transform = field.transform
        kind = type(transform).__name__.removesuffix("Transform").lower()
        if kind == "identity":
            parts.append(column)
        elif kind == "bucket":
            parts.append(f"bucket({transform.num_buckets}, {column})")
        elif kind == "truncate":
            parts.append(f"truncate({transform.width}, {column})")
        else:
            parts.append(f"{kind}({column})")
    return ", ".join(parts) if parts else "unpartitioned"


def _preview(table: Any) -> dict[str, Any]:
    """A few rows of the current snapshot (pyiceberg scan with a limit: reads one data file or so)."""
    try:
        arrow = table.scan(limit=PREVIEW_ROWS).to_arrow()
    except Exception as exc:
        return {"columns": [], "rows": [], "error": f"{type(exc).__name__}: {exc}"}
    columns = list(arrow.column_names)
    return {
        "columns": columns,
        "rows": [[cell(row[c]) for c in columns] for row in arrow.to_pylist()],
    }


async def table(src: ConsoleSources, topic_name: str) -> dict[str, Any] | None:
    pipeline = src.pipelines().get(topic_name)
    if pipeline is None:
        return None
    status = pipeline.status.as_dict()
    service = src.broker_service()
    found = service.topics.get(topic_name) if service is not None else None
    configs = dict(found.configs) if found is not None else {}
    return {
        "status": status,
        "configs": configs,
        "dlq": _dlq_size(src, configs),
        "iceberg": await asyncio.to_thread(_iceberg, src, status["table"]),
    }


async def subjects(src: ConsoleSources) -> list[dict[str, Any]] | None:
    registry = src.schema_registry()
    if registry is None:
        return None

    def read() -> list[dict[str, Any]]:
        out = []
        for subject in registry.subjects():
            out.append(
                {
                    "subject": subject,
                    "versions": registry.versions(subject),
                    "compatibility": _level(registry, subject),
                }
            )
        return out

    return await asyncio.to_thread(read)


def _level(registry: Any, subject: str | None) -> str:
    try:
        return str(registry.get_level(subject, default_to_global=True))
    except Exception:
        return "-"


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, sort_keys=False)
    except ValueError:
        return text  # Protobuf


async def subject(
    src: ConsoleSources, name: str, left: int | None, right: int | None
) -> dict[str, Any] | None:
    """A subject's versions, and a unified diff between two of them (default: the last two)."""
    registry = src.schema_registry()
    if registry is None:
        return None

    def read() -> dict[str, Any] | None:
        try:
            versions = registry.versions(name)
        except Exception:
            return None
        if not versions:
            return None
        new = right if right in versions else versions[-1]
        old = left if left in versions else (versions[-2] if len(versions) > 1 else new)
        old_row, new_row = registry.version(name, old), registry.version(name, new)
        old_text, new_text = _pretty(old_row.schema.schema), _pretty(new_row.schema.schema)
        diff = list(
            difflib.unified_diff(
                old_text.splitlines(), new_text.splitlines(), f"version {old}", f"version {new}", lineterm=""
            )
        )
        return {
            "subject": name,
            "versions": versions,
            "compatibility": _level(registry, name),
            "schema_type": new_row.schema.schema_type,
            "left": old,
            "right": new,
            "left_id": public_id(old_row.schema.id),
            "right_id": public_id(new_row.schema.id),
            "schema": new_text,
            "diff": diff,
        }

    return await asyncio.to_thread(read)
