"""DeleteTopics (20), version-free: the topics to delete.

Versions differ in shape (v1-v5 name topics in ``topic_names``; v6 names each in ``topics``, by
name or by id), so the request is a frozen dataclass read once from kio's class of any version;
the list a version lacks is empty. The ACL rule, which hands the handler kio's request with the
topics it may delete, reads kio's class of each version as :class:`DeleteTopicNamesRequest` (v1 to
v5) or :class:`DeleteTopicStatesRequest` (v6), which mypy checks at the end of this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

TOPIC_STATES_SINCE = 6  # topics named by name or id in ``topics`` (KIP-516)


@dataclass(frozen=True, slots=True)
class DeleteTopicState:
    name: str | None
    topic_id: uuid.UUID | None  # the all-zero id when the topic is named by name


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...] = ()  # v1 to v5
    topics: tuple[DeleteTopicState, ...] = ()  # v6 on


class DeleteTopicNamesRequest(Protocol):
    """v1 to v5: the topics by name."""

    @property
    def topic_names(self) -> Sequence[str]: ...


class DeletableTopic(Protocol):
    @property
    def name(self) -> str | None: ...

    @property
    def topic_id(self) -> uuid.UUID | None: ...


class DeleteTopicStatesRequest(Protocol):
    """v6 on: each topic by name or by id."""

    @property
    def topics(self) -> Sequence[DeletableTopic]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.delete_topics.v1.request import DeleteTopicsRequest as V1
    from kio.schema.delete_topics.v2.request import DeleteTopicsRequest as V2
    from kio.schema.delete_topics.v3.request import DeleteTopicsRequest as V3
    from kio.schema.delete_topics.v4.request import DeleteTopicsRequest as V4
    from kio.schema.delete_topics.v5.request import DeleteTopicsRequest as V5
    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as V6

    def _before_v6_topics_by_name(request: V1 | V2 | V3 | V4 | V5) -> DeleteTopicNamesRequest:
        return request

    def _from_v6_topics_by_name_or_id(request: V6) -> DeleteTopicStatesRequest:
        return request
