"""High watermarks as the partitions' leaders answer them, through librdkafka's ListOffsets (one
request per leader however many partitions are asked).

Why ask the leaders: the metadata database holds each stream's end offset as far as it has been
*uploaded*. On the shared WAL (the cluster default) a leader acknowledges a record once its local
WAL has it and uploads it later (``s3stream.upload.interval.ms``), so the database trails the high
watermark clients see, and with the object store paused it stops moving altogether. Both the admin
API (:mod:`tabletopic.api.cluster_view`) and ``tabletopic cluster status`` show the leaders' answer
and keep the database's figure for a partition whose leader does not answer in time (a broker dead
and not yet replaced), each leader's partitions apart from the others'; ``tabletopic topics
describe`` asks the leaders for log start offsets too. The call blocks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

#: How long a view waits for the leaders' answers before it shows the database's figures.
LEADER_TIMEOUT_S = 2.0

_admins: dict[str, Any] = {}
_admins_lock = threading.Lock()


def admin_client(config: Mapping[str, Any]) -> Any:
    """One AdminClient per client configuration for the life of the process: a new one for every
    console refresh would bootstrap and fetch metadata again each time."""
    from confluent_kafka.admin import AdminClient

    key = repr(sorted(config.items()))
    with _admins_lock:
        client = _admins.get(key)
        if client is None:
            client = _admins[key] = AdminClient(dict(config))
        return client


def leader_high_watermarks(
    config: Mapping[str, Any], partitions: Iterable[tuple[str, int]], timeout: float = LEADER_TIMEOUT_S
) -> dict[tuple[str, int], int]:
    """``{(topic, partition): high watermark}`` as each partition's leader answers it, asked by a
    client with librdkafka settings ``config``; a partition whose leader did not answer within
    ``timeout`` is left out (the caller keeps what it had)."""
    return leader_log_ranges(config, partitions, timeout, log_starts=False)[1]


def leader_log_ranges(
    config: Mapping[str, Any],
    partitions: Iterable[tuple[str, int]],
    timeout: float = LEADER_TIMEOUT_S,
    log_starts: bool = True,
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Each partition's log start offset (only when ``log_starts``) and high watermark, as
    :func:`leader_high_watermarks` asks them: one Metadata, then both questions at once.

    One ListOffsets call per leader and question, all in flight at once: librdkafka answers a
    call that spans several leaders only when every one of them has, so a single leader that hangs
    (paused, or waiting on the object store) would time the others' partitions out with it."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]  # no __all__ entry

    specs = [OffsetSpec.earliest(), OffsetSpec.latest()] if log_starts else [OffsetSpec.latest()]  # type: ignore[no-untyped-call]
    wanted = set(partitions)
    if not wanted:
        return ({}, {})
    answers: list[dict[tuple[str, int], int]] = [{} for _ in specs]
    deadline = time.monotonic() + timeout
    admin = admin_client(config)
    asked: list[dict[Any, Any]] = [{} for _ in specs]  # per question: {TopicPartition: future}
    try:
        leaders = _leaders(admin.list_topics(timeout=timeout), wanted)
        for led in leaders.values():
            for futures, spec in zip(asked, specs, strict=True):
                question = {TopicPartition(topic, partition): spec for topic, partition in led}
                futures.update(admin.list_offsets(question, request_timeout=timeout))
    except Exception as exc:  # no metadata, or a refused request: every figure stays the caller's
        log.debug("leaders' offsets unavailable: %s", exc)
        return ({}, {})
    for futures, answered in zip(asked, answers, strict=True):
        for tp, future in futures.items():
            try:
                answer = future.result(timeout=max(0.0, deadline - time.monotonic()))
                answered[(tp.topic, tp.partition)] = int(answer.offset)
            except Exception as exc:
                log.debug("no offset from the leader of %s-%d: %s", tp.topic, tp.partition, exc)
    return (answers[0] if log_starts else {}), answers[-1]


def _leaders(metadata: Any, wanted: set[tuple[str, int]]) -> dict[int, list[tuple[str, int]]]:
    """``wanted`` by the leader the cluster's Metadata names (-1: none known; librdkafka looks)."""
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for topic, partition in sorted(wanted):
        topic_metadata = metadata.topics.get(topic)
        partition_metadata = None if topic_metadata is None else topic_metadata.partitions.get(partition)
        leader = -1 if partition_metadata is None else int(partition_metadata.leader)
        by_leader.setdefault(leader, []).append((topic, partition))
    return by_leader
