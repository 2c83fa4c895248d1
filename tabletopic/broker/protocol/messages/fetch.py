"""Fetch (1), version-free: the request fields the handler reads itself.

Fetch is the hot path, so the request type is a Protocol that kio's class of every served version
(v4 to v17) satisfies as it is: nothing is converted per request, and mypy checks at the end of this
module that each version fits. The partitions and the session fields are read by
:mod:`~tabletopic.broker.fetch_sessions`; the answer is encoded by hand
(:mod:`~tabletopic.broker.protocol.fetch_encoder`), so there is no response type here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, cast

SERVED_VERSIONS = range(4, 18)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[1]
RACK_ID_SINCE = 11  # KIP-392: the client names its rack from v11


class FetchRequest(Protocol):
    @property
    def max_wait(self) -> timedelta: ...

    @property
    def min_bytes(self) -> int: ...

    @property
    def max_bytes(self) -> int: ...

    @property
    def isolation_level(self) -> int: ...


class RackAwareFetchRequest(FetchRequest, Protocol):
    """A Fetch request of v11 on, which names the client's rack."""

    @property
    def rack_id(self) -> str: ...


def client_rack(request: FetchRequest, version: int) -> str | None:
    """The rack the client names (rack-aware routing), None for a version that cannot name one."""
    if version < RACK_ID_SINCE:
        return None
    return cast(RackAwareFetchRequest, request).rack_id


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.fetch.v4.request import FetchRequest as V4
    from kio.schema.fetch.v5.request import FetchRequest as V5
    from kio.schema.fetch.v6.request import FetchRequest as V6
    from kio.schema.fetch.v7.request import FetchRequest as V7
    from kio.schema.fetch.v8.request import FetchRequest as V8
    from kio.schema.fetch.v9.request import FetchRequest as V9
    from kio.schema.fetch.v10.request import FetchRequest as V10
    from kio.schema.fetch.v11.request import FetchRequest as V11
    from kio.schema.fetch.v12.request import FetchRequest as V12
    from kio.schema.fetch.v13.request import FetchRequest as V13
    from kio.schema.fetch.v14.request import FetchRequest as V14
    from kio.schema.fetch.v15.request import FetchRequest as V15
    from kio.schema.fetch.v16.request import FetchRequest as V16
    from kio.schema.fetch.v17.request import FetchRequest as V17

    def _every_version_is_a_fetch_request(
        request: V4 | V5 | V6 | V7 | V8 | V9 | V10 | V11 | V12 | V13 | V14 | V15 | V16 | V17,
    ) -> FetchRequest:
        return request

    def _from_v11_the_client_names_its_rack(
        request: V11 | V12 | V13 | V14 | V15 | V16 | V17,
    ) -> RackAwareFetchRequest:
        return request
