"""Fetch (1): the request fields the handler reads itself.

Fetch is the hot path, so the handler reads kio's class of each served version (v4 to v17) as it
is: nothing is converted per request. The partitions and the session fields are read by
:mod:`~tabletopic.broker.fetch_sessions` through the functions below, which take the version where
a field comes with a later one (sessions, leader epochs, topic ids); the answer is encoded by hand
(:mod:`~tabletopic.broker.protocol.fetch_encoder`), so there is no response type here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias, cast

if TYPE_CHECKING:
    from kio.schema.fetch.v4 import request as v4
    from kio.schema.fetch.v5 import request as v5
    from kio.schema.fetch.v6 import request as v6
    from kio.schema.fetch.v7 import request as v7
    from kio.schema.fetch.v8 import request as v8
    from kio.schema.fetch.v9 import request as v9
    from kio.schema.fetch.v10 import request as v10
    from kio.schema.fetch.v11 import request as v11
    from kio.schema.fetch.v12 import request as v12
    from kio.schema.fetch.v13 import request as v13
    from kio.schema.fetch.v14 import request as v14
    from kio.schema.fetch.v15 import request as v15
    from kio.schema.fetch.v16 import request as v16
    from kio.schema.fetch.v17 import request as v17

SESSIONS_SINCE = 7  # KIP-227: fetch sessions (session_id, session_epoch, forgotten_topics_data)
LEADER_EPOCH_SINCE = 9  # KIP-320: each partition names the leader epoch the client knows
RACK_ID_SINCE = 11  # KIP-392: the client names its rack from v11
TOPIC_ID_SINCE = 13  # KIP-516: topics by id instead of by name
NO_SESSION_ID = 0
FINAL_EPOCH = -1  # a session epoch that closes the session (or asks for none)
NO_LEADER_EPOCH = -1  # a partition's current_leader_epoch when the client names none
_NO_TOPIC_ID = uuid.UUID(int=0)

FetchRequest: TypeAlias = (
    "v4.FetchRequest | v5.FetchRequest | v6.FetchRequest | v7.FetchRequest | v8.FetchRequest | "
    "v9.FetchRequest | v10.FetchRequest | v11.FetchRequest | v12.FetchRequest | v13.FetchRequest | "
    "v14.FetchRequest | v15.FetchRequest | v16.FetchRequest | v17.FetchRequest"
)
FetchTopic: TypeAlias = (
    "v4.FetchTopic | v5.FetchTopic | v6.FetchTopic | v7.FetchTopic | v8.FetchTopic | v9.FetchTopic | "
    "v10.FetchTopic | v11.FetchTopic | v12.FetchTopic | v13.FetchTopic | v14.FetchTopic | "
    "v15.FetchTopic | v16.FetchTopic | v17.FetchTopic"
)
FetchPartition: TypeAlias = (
    "v4.FetchPartition | v5.FetchPartition | v6.FetchPartition | v7.FetchPartition | v8.FetchPartition | "
    "v9.FetchPartition | v10.FetchPartition | v11.FetchPartition | v12.FetchPartition | "
    "v13.FetchPartition | v14.FetchPartition | v15.FetchPartition | v16.FetchPartition | "
    "v17.FetchPartition"
)
ForgottenTopic: TypeAlias = (
    "v7.ForgottenTopic | v8.ForgottenTopic | v9.ForgottenTopic | v10.ForgottenTopic | "
    "v11.ForgottenTopic | v12.ForgottenTopic | v13.ForgottenTopic | v14.ForgottenTopic | "
    "v15.ForgottenTopic | v16.ForgottenTopic | v17.ForgottenTopic"
)
SessionFetchRequest: TypeAlias = (
    "v7.FetchRequest | v8.FetchRequest | v9.FetchRequest | v10.FetchRequest | v11.FetchRequest | "
    "v12.FetchRequest | v13.FetchRequest | v14.FetchRequest | v15.FetchRequest | v16.FetchRequest | "
    "v17.FetchRequest"
)
"""A Fetch request of v7 on, which may open, continue or close a fetch session."""
RackAwareFetchRequest: TypeAlias = (
    "v11.FetchRequest | v12.FetchRequest | v13.FetchRequest | v14.FetchRequest | v15.FetchRequest | "
    "v16.FetchRequest | v17.FetchRequest"
)
"""A Fetch request of v11 on, which names the client's rack."""
LeaderEpochFetchPartition: TypeAlias = (
    "v9.FetchPartition | v10.FetchPartition | v11.FetchPartition | v12.FetchPartition | "
    "v13.FetchPartition | v14.FetchPartition | v15.FetchPartition | v16.FetchPartition | "
    "v17.FetchPartition"
)
"""A partition of a Fetch request of v9 on, which names the leader epoch the client knows."""
TopicByName: TypeAlias = (
    "v4.FetchTopic | v5.FetchTopic | v6.FetchTopic | v7.FetchTopic | v8.FetchTopic | v9.FetchTopic | "
    "v10.FetchTopic | v11.FetchTopic | v12.FetchTopic | v7.ForgottenTopic | v8.ForgottenTopic | "
    "v9.ForgottenTopic | v10.ForgottenTopic | v11.ForgottenTopic | v12.ForgottenTopic"
)
"""A fetched or forgotten topic before v13."""
TopicById: TypeAlias = (
    "v13.FetchTopic | v14.FetchTopic | v15.FetchTopic | v16.FetchTopic | v17.FetchTopic | "
    "v13.ForgottenTopic | v14.ForgottenTopic | v15.ForgottenTopic | v16.ForgottenTopic | "
    "v17.ForgottenTopic"
)
"""A fetched or forgotten topic of v13 on."""


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
