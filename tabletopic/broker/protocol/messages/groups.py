"""ListGroups (16), DescribeGroups (15) and DeleteGroups (42): the administration of classic (and, as
classic clients see them, KIP-848 and share) groups.

ListGroups filters by state from v4 and by type from v5, DescribeGroups asks for the authorized
operations from v3: those requests are frozen dataclasses read once from kio's class of any
version, a version without the field taking Kafka's default (no filter, not asked). DeleteGroups
is kio's class of each served version (v0 to v2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.delete_groups.v0 import request as v0
    from kio.schema.delete_groups.v1 import request as v1
    from kio.schema.delete_groups.v2 import request as v2


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()  # v4 on
    types_filter: tuple[str, ...] = ()  # v5 on


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    groups: tuple[str, ...]
    include_authorized_operations: bool = False  # v3 on


DeleteGroupsRequest: TypeAlias = "v0.DeleteGroupsRequest | v1.DeleteGroupsRequest | v2.DeleteGroupsRequest"
