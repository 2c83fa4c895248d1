"""DeleteTopics (20): the topics to delete (served v1 to v6).

Versions differ in shape (v1-v5 name topics in ``topic_names``; v6 names each in ``topics``, by
name or by id), so the request is a frozen dataclass read once from kio's class of any version;
the list a version lacks is empty. The ACL rule, which hands the handler kio's request with the
topics it may delete, reads kio's class itself: :data:`DeleteTopicNamesRequest` (v1 to v5) or
:data:`DeleteTopicStatesRequest` (v6).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.delete_topics.v1 import request as v1
    from kio.schema.delete_topics.v2 import request as v2
    from kio.schema.delete_topics.v3 import request as v3
    from kio.schema.delete_topics.v4 import request as v4
    from kio.schema.delete_topics.v5 import request as v5
    from kio.schema.delete_topics.v6 import request as v6

TOPIC_STATES_SINCE = 6  # topics named by name or id in ``topics`` (KIP-516)


@dataclass(frozen=True, slots=True)
class DeleteTopicState:
    name: str | None
    topic_id: uuid.UUID | None  # the all-zero id when the topic is named by name


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...] = ()  # v1 to v5
    topics: tuple[DeleteTopicState, ...] = ()  # v6 on


DeleteTopicNamesRequest: TypeAlias = (
    "v1.DeleteTopicsRequest | v2.DeleteTopicsRequest | v3.DeleteTopicsRequest | v4.DeleteTopicsRequest | "
    "v5.DeleteTopicsRequest"
)
DeleteTopicStatesRequest: TypeAlias = "v6.DeleteTopicsRequest"
