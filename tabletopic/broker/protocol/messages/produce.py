"""Produce (0), version-free: what the broker reads of a request and what it answers.

Every Produce version the broker serves (v3 to v12) has the same request fields, so the request
type is a Protocol that kio's class of each version satisfies as it is: the hot path reads the
request kio parsed (or :mod:`~tabletopic.broker.protocol.produce_reader` built, records lent)
without converting it, and mypy checks at the end of this module that each version fits. The
response is a TypedDict in the newest version's shape, which the response builder fits to the
client's version: a dict at run time, a checked type for mypy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from kio.schema.errors import ErrorCode

SERVED_VERSIONS = range(3, 13)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[0]


class PartitionProduceData(Protocol):
    @property
    def index(self) -> int: ...

    @property
    def records(self) -> bytes | memoryview | None:
        """The partition's record batches, lent by the request's frame when it can (never copied)."""
        ...


class TopicProduceData(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partition_data(self) -> Sequence[PartitionProduceData]: ...


class ProduceRequest(Protocol):
    @property
    def transactional_id(self) -> str | None: ...

    @property
    def acks(self) -> int: ...

    @property
    def timeout(self) -> timedelta: ...

    @property
    def topic_data(self) -> Sequence[TopicProduceData]: ...


class BatchIndexAndErrorMessage(TypedDict):
    batch_index: int
    batch_index_error_message: str | None


class PartitionProduceResponse(TypedDict):
    index: int
    error_code: ErrorCode
    error_message: str | None
    base_offset: int
    log_append_time: int
    log_start_offset: int
    record_errors: NotRequired[list[BatchIndexAndErrorMessage]]


class TopicProduceResponse(TypedDict):
    name: str
    partition_responses: list[PartitionProduceResponse]


class ProduceResponse(TypedDict):
    responses: list[TopicProduceResponse]
    throttle_time: int


if TYPE_CHECKING:  # kio's class of every served version is a ProduceRequest (checked by mypy only)
    from kio.schema.produce.v3.request import ProduceRequest as V3
    from kio.schema.produce.v4.request import ProduceRequest as V4
    from kio.schema.produce.v5.request import ProduceRequest as V5
    from kio.schema.produce.v6.request import ProduceRequest as V6
    from kio.schema.produce.v7.request import ProduceRequest as V7
    from kio.schema.produce.v8.request import ProduceRequest as V8
    from kio.schema.produce.v9.request import ProduceRequest as V9
    from kio.schema.produce.v10.request import ProduceRequest as V10
    from kio.schema.produce.v11.request import ProduceRequest as V11
    from kio.schema.produce.v12.request import ProduceRequest as V12

    def _every_version_is_a_produce_request(
        request: V3 | V4 | V5 | V6 | V7 | V8 | V9 | V10 | V11 | V12,
    ) -> ProduceRequest:
        return request
