"""Fetch sessions (KIP-227): a consumer of many partitions sends them once, then only what changed.

A session remembers, per partition, the fetch offset and size limit the client last sent and the
high watermark, last stable offset and log start offset it was last told. An incremental request
(epoch > 0) adds or updates the partitions it names and drops its ``forgotten_topics_data``; the
fetch then covers every partition of the session, and the answer lists only the partitions with
records, an error, or offsets that changed since the last answer.

The rules of the epochs, as Kafka's:

- ``session_id`` 0, epoch -1: no session (a full fetch, answered with session id 0).
- epoch 0: a full fetch that opens a new session (closing ``session_id`` if one was given).
- ``session_id`` != 0, epoch -1: close the session; the request is a full fetch without one.
- epoch > 0: incremental; an unknown id is FETCH_SESSION_ID_NOT_FOUND, a wrong epoch
  INVALID_FETCH_SESSION_EPOCH (the client then starts over with a full fetch).

The cache holds at most ``max.incremental.fetch.session.cache.slots`` sessions; when full, the least
recently used one is evicted (its client gets FETCH_SESSION_ID_NOT_FOUND once and starts over).
This module is pure state: no I/O.
"""

from __future__ import annotations

import collections
import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol.messages.fetch import (
    FINAL_EPOCH,
    LEADER_EPOCH_SINCE,
    NO_LEADER_EPOCH,
    FetchRequest,
    LeaderEpochFetchPartition,
    forgotten_topics,
    session_of,
    topic_key,
)

INITIAL_EPOCH = 0
PartitionKey = tuple[str | uuid.UUID, int]  # (topic name before Fetch v13, topic id from v13; partition)


@dataclass(slots=True)
class SessionPartition:
    """What the session remembers of one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1  # the leader epoch the client knows (v9+, KIP-320); -1: none
    high_watermark: int = -2  # what the client was last told; -2: never
    last_stable_offset: int = -2
    log_start_offset: int = -2


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next incremental request must carry
    partitions: dict[PartitionKey, SessionPartition] = field(default_factory=dict)

    def changed(self, key: PartitionKey, high_watermark: int, last_stable: int, log_start: int) -> bool:
        """Whether an answer for ``key`` differs from what the client was last told (and remember it)."""
        cached = self.partitions.get(key)
        if cached is None:
            return True
        now = (high_watermark, last_stable, log_start)
        before = (cached.high_watermark, cached.last_stable_offset, cached.log_start_offset)
        cached.high_watermark, cached.last_stable_offset, cached.log_start_offset = now
        return now != before


@dataclass(frozen=True, slots=True)
class SessionResolution:
    """What a Fetch request means once its session is applied."""

    error: ErrorCode
    session: FetchSession | None  # None: a sessionless full fetch (or an error)
    incremental: bool
    partitions: list[tuple[PartitionKey, SessionPartition]]  # what to read, in order


def requested(request: FetchRequest, version: int) -> list[tuple[PartitionKey, SessionPartition]]:
    """The partitions a Fetch request names, with their fetch offsets and limits.

    librdkafka never opens a session, so every one of its Fetches names every partition it reads
    from this broker and passes here: the version is looked at once per request, not per
    partition, nor its fields cast one by one (39 µs for 170 partitions, was 81)."""
    result: list[tuple[PartitionKey, SessionPartition]] = []
    add = result.append
    epochs = version >= LEADER_EPOCH_SINCE
    for topic in request.topics:
        key = topic_key(topic, version)
        for p in topic.partitions:
            epoch = cast(LeaderEpochFetchPartition, p).current_leader_epoch if epochs else NO_LEADER_EPOCH
            limit = p.partition_max_bytes
            add(((key, p.partition), SessionPartition(p.fetch_offset, limit if limit > 0 else 0, epoch)))
    return result


def forgotten(request: FetchRequest, version: int) -> Iterable[PartitionKey]:
    for topic in forgotten_topics(request, version):
        key = topic_key(topic, version)
        for partition in topic.partitions:
            yield (key, int(partition))


class FetchSessionCache:
    def __init__(self, max_sessions: int = 1000) -> None:
        self.max_sessions = max_sessions
        self._sessions: collections.OrderedDict[int, FetchSession] = collections.OrderedDict()
        self._ids = itertools.count(1)

    def __len__(self) -> int:
        return len(self._sessions)

    def resolve(self, request: FetchRequest, version: int) -> SessionResolution:
        """Apply a Fetch request's session fields (see the module docstring)."""
        named_id, named_epoch = session_of(request, version)
        session_id, epoch = int(named_id), int(named_epoch)
        wanted = requested(request, version)
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return SessionResolution(ErrorCode.none, None, False, wanted)
        if epoch == INITIAL_EPOCH:
            self._sessions.pop(session_id, None)
            if self.max_sessions <= 0:
                return SessionResolution(ErrorCode.none, None, False, wanted)
            session = FetchSession(self._new_id(), 1, dict(wanted))
            self._sessions[session.session_id] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
            return SessionResolution(ErrorCode.none, session, False, wanted)
        found = self._sessions.get(session_id)
        if found is None:
            return SessionResolution(ErrorCode.fetch_session_id_not_found, None, False, [])
        session = found
        if epoch != session.epoch:
            return SessionResolution(ErrorCode.invalid_fetch_session_epoch, None, False, [])
        self._sessions.move_to_end(session_id)
        session.epoch = 1 if session.epoch >= 2**31 - 1 else session.epoch + 1
        for key in forgotten(request, version):
            session.partitions.pop(key, None)
        for key, update in wanted:
            cached = session.partitions.get(key)
            if cached is None:
                session.partitions[key] = update
            else:
                cached.fetch_offset, cached.max_bytes = update.fetch_offset, update.max_bytes
                cached.current_leader_epoch = update.current_leader_epoch
        return SessionResolution(ErrorCode.none, session, True, list(session.partitions.items()))

    def _new_id(self) -> int:
        while True:
            candidate = next(self._ids) % (2**31 - 1) or 1
            if candidate not in self._sessions:
                return candidate
