"""Consumer groups as the whole cluster (or the single node) knows them, for the console and the
admin API of any broker.

A group lives on one coordinator (the broker leading its ``__consumer_offsets`` slot); the broker
asked may be another one, whose own coordinator knows nothing of it. So the console asks the way any
client would: ListGroups of every broker, DescribeGroups (or ConsumerGroupDescribe, for a KIP-848
group) and OffsetFetch of each group's coordinator (librdkafka finds them), through a client that
logs in as this broker. A single node is asked the same way, so every group type shows alike. The lag is each
committed offset against the high watermark its partition's leader answers
(:func:`tabletopic.api.views.partition_ends`).

Share groups (KIP-932) commit no offsets and librdkafka's admin API leaves them out: its
ListConsumerGroups filters them away and its DescribeConsumerGroups refuses them. Its older
``list_groups`` (ListGroups, then DescribeGroups, of every broker) lists every group with its
protocol type, state and members, so share groups are read from it; their progress (start offsets and
lag) comes from their coordinator (:mod:`tabletopic.api.share_offsets`).

Every call blocks: callers run them in a thread.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from tabletopic.leader_offsets import admin_client

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0

#: librdkafka's state names, as Kafka spells them in DescribeGroups (and the single node's console).
_STATES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "DEAD": "Dead",
    "UNKNOWN": "Unknown",
}

Ends = dict[str, list[tuple[int, int]]]

SHARE = "share"  # the protocol type ListGroups gives a share group


def _state(value: Any) -> str:
    name = getattr(value, "name", str(value))
    return _STATES.get(name, name.title())


def _protocol_type(description: Any) -> str:
    kind = getattr(getattr(description, "type", None), "name", "")
    if kind == "CONSUMER":
        return "consumer (KIP-848)"
    return "" if description.is_simple_consumer_group else "consumer"


def group_ids(config: dict[str, Any]) -> list[str]:
    """Every consumer group of the cluster (ListGroups of every broker); share groups apart."""
    listed = admin_client(config).list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    for error in listed.errors:
        log.debug("a broker did not list its groups: %s", error)
    return sorted(g.group_id for g in listed.valid)


def share_groups(config: dict[str, Any]) -> dict[str, Any]:
    """``{group id: GroupMetadata}`` of every share group of the cluster; empty when the brokers
    could not be asked (the consumer groups still show)."""
    try:
        with warnings.catch_warnings():  # deprecated for consumer groups, the only way to share ones
            warnings.simplefilter("ignore", DeprecationWarning)
            listed = admin_client(config).list_groups(timeout=TIMEOUT_S)
    except Exception as exc:
        log.debug("share groups not listed: %s", exc)
        return {}
    return {g.id: g for g in listed if g.protocol_type == SHARE}


def describe(config: dict[str, Any], ids: list[str]) -> dict[str, Any]:
    """``{group id: ConsumerGroupDescription}`` of the groups whose coordinators answered."""
    if not ids:
        return {}
    futures = admin_client(config).describe_consumer_groups(ids, request_timeout=TIMEOUT_S)
    out = {}
    for group_id, future in futures.items():
        try:
            out[group_id] = future.result(TIMEOUT_S)
        except Exception as exc:
            log.debug("group %s not described: %s", group_id, exc)
    return out


def offset_row(
    topic: str, partition: int, committed: int | None, ends: list[tuple[int, int]]
) -> dict[str, Any]:
    """One row of a group's offsets: the committed offset, the partition's high watermark (from
    ``ends``, the topic's ``(log start, high watermark)`` pairs) and the lag between them."""
    end = ends[partition][1] if partition < len(ends) else None
    lag = None if end is None or committed is None else max(end - committed, 0)
    return {"topic": topic, "partition": partition, "committed": committed, "high_watermark": end, "lag": lag}


def committed_offsets(config: dict[str, Any], group_id: str, ends: Ends | None) -> list[dict[str, Any]]:
    """The group's committed offsets, each with its partition's high watermark and the lag."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    request = [ConsumerGroupTopicPartitions(group_id)]
    answer = admin_client(config).list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)
    found = answer[group_id].result(TIMEOUT_S)
    return [
        offset_row(
            tp.topic, tp.partition, tp.offset if tp.offset >= 0 else None, (ends or {}).get(tp.topic, [])
        )
        for tp in sorted(found.topic_partitions or [], key=lambda tp: (tp.topic, tp.partition))
    ]


def groups(config: dict[str, Any], ends: Ends | None) -> list[dict[str, Any]]:
    """The console's group list: id, state, protocol type, members and total lag."""
    ids = group_ids(config)
    described = describe(config, ids)
    out = []
    for group_id in ids:
        description = described.get(group_id)
        try:
            lag = sum(row["lag"] or 0 for row in committed_offsets(config, group_id, ends))
        except Exception as exc:
            log.debug("offsets of group %s unavailable: %s", group_id, exc)
            lag = 0
        out.append(
            {
                "group_id": group_id,
                "state": _state(description.state) if description else "Unknown",
                "protocol_type": _protocol_type(description) if description else "",
                "members": len(description.members) if description else 0,
                "lag": lag,
            }
        )
    for share in share_groups(config).values():
        out.append(
            {
                "group_id": share.id,
                "state": share.state,
                "protocol_type": SHARE,
                "members": len(share.members),
                "lag": None,  # no committed offsets: its coordinator tells (share_offsets)
            }
        )
    return sorted(out, key=lambda row: row["group_id"])


def group(config: dict[str, Any], group_id: str, ends: Ends | None) -> dict[str, Any] | None:
    """The console's group page: state, assignor, members with their assignments, offsets and lag;
    None for a group the cluster does not know."""
    description = describe(config, [group_id]).get(group_id)
    if description is None or _state(description.state) == "Dead":
        share = share_groups(config).get(group_id)
        return None if share is None else _share_group(share)
    members = []
    for m in description.members:
        assignment: dict[str, list[int]] = {}
        for tp in getattr(m.assignment, "topic_partitions", None) or []:
            assignment.setdefault(tp.topic, []).append(tp.partition)
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.host,
                "instance_id": m.group_instance_id,
                "assignment": {t: sorted(p) for t, p in sorted(assignment.items())} or None,
            }
        )
    return {
        "group_id": group_id,
        "state": _state(description.state),
        "protocol_type": _protocol_type(description),
        "protocol_name": description.partition_assignor,
        "coordinator": getattr(description.coordinator, "id", None),
        "members": members,
        "offsets": committed_offsets(config, group_id, ends),
    }


def _share_group(share: Any) -> dict[str, Any]:
    """A share group's page as :func:`group` shapes one: its members, no assignments (a share
    group's lives in ShareGroupDescribe, which librdkafka does not send) and no committed offsets
    (the caller adds the share partitions' start offsets, :mod:`tabletopic.api.share_offsets`)."""
    members = [
        {
            "member_id": m.id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "instance_id": None,
            "assignment": None,
        }
        for m in share.members
    ]
    return {
        "group_id": share.id,
        "state": share.state,
        "protocol_type": SHARE,
        "protocol_name": share.protocol or None,
        "coordinator": getattr(share.broker, "id", None),
        "members": members,
        "offsets": [],
    }
