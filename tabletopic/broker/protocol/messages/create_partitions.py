"""CreatePartitions (37), version-free: the partition count each topic grows to, and optionally
where the new partitions go.

Every served version (v0 to v3) has the fields the handler reads, so the request type is a Protocol
kio's class of each version satisfies as it is (mypy checks each at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict

from kio.schema.errors import ErrorCode

SERVED_VERSIONS = range(0, 4)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[37]


class CreatePartitionsAssignment(Protocol):
    @property
    def broker_ids(self) -> Sequence[int]: ...


class CreatePartitionsTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def count(self) -> int:
        """The partition count asked for (not the number added)."""
        ...

    @property
    def assignments(self) -> Sequence[CreatePartitionsAssignment] | None:
        """One per added partition, or None to let the broker place them."""
        ...


class CreatePartitionsRequest(Protocol):
    @property
    def topics(self) -> Sequence[CreatePartitionsTopic]: ...

    @property
    def validate_only(self) -> bool: ...


class CreatePartitionsTopicResult(TypedDict):
    name: str
    error_code: ErrorCode
    error_message: str | None


class CreatePartitionsResponse(TypedDict):
    throttle_time: int
    results: list[CreatePartitionsTopicResult]


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.create_partitions.v0.request import CreatePartitionsRequest as V0
    from kio.schema.create_partitions.v1.request import CreatePartitionsRequest as V1
    from kio.schema.create_partitions.v2.request import CreatePartitionsRequest as V2
    from kio.schema.create_partitions.v3.request import CreatePartitionsRequest as V3

    def _every_version_is_a_create_partitions_request(
        request: V0 | V1 | V2 | V3,
    ) -> CreatePartitionsRequest:
        return request
