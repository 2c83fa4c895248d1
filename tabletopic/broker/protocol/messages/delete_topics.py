"""DeleteTopics (20), version-free: the topics to delete.

Versions differ in shape (v1-v5 name topics in ``topic_names``; v6 names each in ``topics``, by
name or by id), so the request is a frozen dataclass read once from kio's class of any version;
the list a version lacks is empty.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeleteTopicState:
    name: str | None
    topic_id: uuid.UUID | None  # the all-zero id when the topic is named by name


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    topic_names: tuple[str, ...] = ()  # v1 to v5
    topics: tuple[DeleteTopicState, ...] = ()  # v6 on
