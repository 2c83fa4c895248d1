"""CreateTopics (19), version-free: the topics to create, each with its partitions and configs.

Every served version (v2 to v7) has the fields the handler reads, so the request type is a Protocol
kio's class of each version satisfies as it is (mypy checks each at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

SERVED_VERSIONS = range(2, 8)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[19]


class CreatableTopicConfig(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str | None: ...


class CreatableTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def num_partitions(self) -> int:
        """-1 for the broker's default (or the assignments' count)."""
        ...

    @property
    def replication_factor(self) -> int: ...

    @property
    def assignments(self) -> Sequence[object]:
        """One replica assignment per partition; only their count is read here."""
        ...

    @property
    def configs(self) -> Sequence[CreatableTopicConfig]: ...


class CreateTopicsRequest(Protocol):
    @property
    def topics(self) -> Sequence[CreatableTopic]: ...

    @property
    def validate_only(self) -> bool: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.create_topics.v2.request import CreateTopicsRequest as V2
    from kio.schema.create_topics.v3.request import CreateTopicsRequest as V3
    from kio.schema.create_topics.v4.request import CreateTopicsRequest as V4
    from kio.schema.create_topics.v5.request import CreateTopicsRequest as V5
    from kio.schema.create_topics.v6.request import CreateTopicsRequest as V6
    from kio.schema.create_topics.v7.request import CreateTopicsRequest as V7

    def _every_version_is_a_create_topics_request(
        request: V2 | V3 | V4 | V5 | V6 | V7,
    ) -> CreateTopicsRequest:
        return request
