"""ElectLeaders (43), version-free: the partitions whose leader a client asks to elect.

Every served version (v0 to v2) has the one field the handler reads (a partition has one replica
here, so ``election_type`` changes nothing), so the request type is a Protocol kio's class of each
version satisfies as it is (mypy checks each below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from tabletopic.broker.protocol.messages.topic_partitions import TopicAndPartitions

SERVED_VERSIONS = range(0, 3)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[43]


class ElectLeadersRequest(Protocol):
    @property
    def topic_partitions(self) -> Sequence[TopicAndPartitions] | None:
        """None for every partition."""
        ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.elect_leaders.v0.request import ElectLeadersRequest as V0
    from kio.schema.elect_leaders.v1.request import ElectLeadersRequest as V1
    from kio.schema.elect_leaders.v2.request import ElectLeadersRequest as V2

    def _every_version_is_an_elect_leaders_request(request: V0 | V1 | V2) -> ElectLeadersRequest:
        return request
