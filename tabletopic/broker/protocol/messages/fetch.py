"""Fetch (1), version-free: the request fields the handler reads itself.

Fetch is the hot path, so the request type is a Protocol that kio's class of every served version
(v4 to v17) satisfies as it is: nothing is converted per request, and mypy checks at the end of this
module that each version fits. The partitions and the session fields are read by
:mod:`~tabletopic.broker.fetch_sessions` through the functions below, which take the version where
a field comes with a later one (sessions, leader epochs, topic ids); the answer is encoded by hand
(:mod:`~tabletopic.broker.protocol.fetch_encoder`), so there is no response type here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, cast

SERVED_VERSIONS = range(4, 18)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[1]
SESSIONS_SINCE = 7  # KIP-227: fetch sessions (session_id, session_epoch, forgotten_topics_data)
LEADER_EPOCH_SINCE = 9  # KIP-320: each partition names the leader epoch the client knows
RACK_ID_SINCE = 11  # KIP-392: the client names its rack from v11
TOPIC_ID_SINCE = 13  # KIP-516: topics by id instead of by name
NO_SESSION_ID = 0
FINAL_EPOCH = -1  # a session epoch that closes the session (or asks for none)
NO_LEADER_EPOCH = -1  # a partition's current_leader_epoch when the client names none
_NO_TOPIC_ID = uuid.UUID(int=0)


class FetchPartition(Protocol):
    @property
    def partition(self) -> int: ...

    @property
    def fetch_offset(self) -> int: ...

    @property
    def partition_max_bytes(self) -> int: ...


class LeaderEpochFetchPartition(FetchPartition, Protocol):
    """A partition of a Fetch request of v9 on, which names the leader epoch the client knows."""

    @property
    def current_leader_epoch(self) -> int: ...


class FetchTopic(Protocol):
    @property
    def partitions(self) -> Sequence[FetchPartition]: ...


class ForgottenTopic(Protocol):
    @property
    def partitions(self) -> Sequence[int]: ...


class TopicByName(Protocol):
    """A fetched or forgotten topic before v13."""

    @property
    def topic(self) -> str: ...


class TopicById(Protocol):
    """A fetched or forgotten topic of v13 on."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...


class FetchRequest(Protocol):
    @property
    def max_wait(self) -> timedelta: ...

    @property
    def min_bytes(self) -> int: ...

    @property
    def max_bytes(self) -> int: ...

    @property
    def isolation_level(self) -> int: ...

    @property
    def topics(self) -> Sequence[FetchTopic]: ...


class SessionFetchRequest(FetchRequest, Protocol):
    """A Fetch request of v7 on, which may open, continue or close a fetch session."""

    @property
    def session_id(self) -> int: ...

    @property
    def session_epoch(self) -> int: ...

    @property
    def forgotten_topics_data(self) -> Sequence[ForgottenTopic]: ...


class RackAwareFetchRequest(FetchRequest, Protocol):
    """A Fetch request of v11 on, which names the client's rack."""

    @property
    def rack_id(self) -> str: ...


def client_rack(request: FetchRequest, version: int) -> str | None:
    """The rack the client names (rack-aware routing), None for a version that cannot name one."""
    if version < RACK_ID_SINCE:
        return None
    return cast(RackAwareFetchRequest, request).rack_id


def session_of(request: FetchRequest, version: int) -> tuple[int, int]:
    """The session id and epoch a request names: none before v7 (a sessionless full fetch)."""
    if version < SESSIONS_SINCE:
        return NO_SESSION_ID, FINAL_EPOCH
    session = cast(SessionFetchRequest, request)
    return session.session_id, session.session_epoch


def forgotten_topics(request: FetchRequest, version: int) -> Sequence[ForgottenTopic]:
    """The topics' partitions an incremental request drops from its session (none before v7)."""
    if version < SESSIONS_SINCE:
        return ()
    return cast(SessionFetchRequest, request).forgotten_topics_data


def topic_key(topic: FetchTopic | ForgottenTopic, version: int) -> str | uuid.UUID:
    """A fetched or forgotten topic's name (before v13) or id (the all-zero id when it has none)."""
    if version >= TOPIC_ID_SINCE:
        return cast(TopicById, topic).topic_id or _NO_TOPIC_ID
    return cast(TopicByName, topic).topic


def leader_epoch_of(partition: FetchPartition, version: int) -> int:
    """The leader epoch the client knows of a partition (none before v9)."""
    if version < LEADER_EPOCH_SINCE:
        return NO_LEADER_EPOCH
    return cast(LeaderEpochFetchPartition, partition).current_leader_epoch


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.fetch.v4.request import FetchRequest as V4
    from kio.schema.fetch.v4.request import FetchTopic as T4
    from kio.schema.fetch.v5.request import FetchRequest as V5
    from kio.schema.fetch.v5.request import FetchTopic as T5
    from kio.schema.fetch.v6.request import FetchRequest as V6
    from kio.schema.fetch.v6.request import FetchTopic as T6
    from kio.schema.fetch.v7.request import FetchRequest as V7
    from kio.schema.fetch.v7.request import FetchTopic as T7
    from kio.schema.fetch.v7.request import ForgottenTopic as F7
    from kio.schema.fetch.v8.request import FetchRequest as V8
    from kio.schema.fetch.v8.request import FetchTopic as T8
    from kio.schema.fetch.v8.request import ForgottenTopic as F8
    from kio.schema.fetch.v9.request import FetchPartition as P9
    from kio.schema.fetch.v9.request import FetchRequest as V9
    from kio.schema.fetch.v9.request import FetchTopic as T9
    from kio.schema.fetch.v9.request import ForgottenTopic as F9
    from kio.schema.fetch.v10.request import FetchPartition as P10
    from kio.schema.fetch.v10.request import FetchRequest as V10
    from kio.schema.fetch.v10.request import FetchTopic as T10
    from kio.schema.fetch.v10.request import ForgottenTopic as F10
    from kio.schema.fetch.v11.request import FetchPartition as P11
    from kio.schema.fetch.v11.request import FetchRequest as V11
    from kio.schema.fetch.v11.request import FetchTopic as T11
    from kio.schema.fetch.v11.request import ForgottenTopic as F11
    from kio.schema.fetch.v12.request import FetchPartition as P12
    from kio.schema.fetch.v12.request import FetchRequest as V12
    from kio.schema.fetch.v12.request import FetchTopic as T12
    from kio.schema.fetch.v12.request import ForgottenTopic as F12
    from kio.schema.fetch.v13.request import FetchPartition as P13
    from kio.schema.fetch.v13.request import FetchRequest as V13
    from kio.schema.fetch.v13.request import FetchTopic as T13
    from kio.schema.fetch.v13.request import ForgottenTopic as F13
    from kio.schema.fetch.v14.request import FetchPartition as P14
    from kio.schema.fetch.v14.request import FetchRequest as V14
    from kio.schema.fetch.v14.request import FetchTopic as T14
    from kio.schema.fetch.v14.request import ForgottenTopic as F14
    from kio.schema.fetch.v15.request import FetchPartition as P15
    from kio.schema.fetch.v15.request import FetchRequest as V15
    from kio.schema.fetch.v15.request import FetchTopic as T15
    from kio.schema.fetch.v15.request import ForgottenTopic as F15
    from kio.schema.fetch.v16.request import FetchPartition as P16
    from kio.schema.fetch.v16.request import FetchRequest as V16
    from kio.schema.fetch.v16.request import FetchTopic as T16
    from kio.schema.fetch.v16.request import ForgottenTopic as F16
    from kio.schema.fetch.v17.request import FetchPartition as P17
    from kio.schema.fetch.v17.request import FetchRequest as V17
    from kio.schema.fetch.v17.request import FetchTopic as T17
    from kio.schema.fetch.v17.request import ForgottenTopic as F17

    def _every_version_is_a_fetch_request(
        request: V4 | V5 | V6 | V7 | V8 | V9 | V10 | V11 | V12 | V13 | V14 | V15 | V16 | V17,
    ) -> FetchRequest:
        return request

    def _from_v7_a_session(
        request: V7 | V8 | V9 | V10 | V11 | V12 | V13 | V14 | V15 | V16 | V17,
    ) -> SessionFetchRequest:
        return request

    def _from_v9_a_leader_epoch(
        partition: P9 | P10 | P11 | P12 | P13 | P14 | P15 | P16 | P17,
    ) -> LeaderEpochFetchPartition:
        return partition

    def _before_v13_topics_by_name(
        topic: T4 | T5 | T6 | T7 | T8 | T9 | T10 | T11 | T12 | F7 | F8 | F9 | F10 | F11 | F12,
    ) -> TopicByName:
        return topic

    def _from_v13_topics_by_id(topic: T13 | T14 | T15 | T16 | T17 | F13 | F14 | F15 | F16 | F17) -> TopicById:
        return topic

    def _from_v11_the_client_names_its_rack(
        request: V11 | V12 | V13 | V14 | V15 | V16 | V17,
    ) -> RackAwareFetchRequest:
        return request
