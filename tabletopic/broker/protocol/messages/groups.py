"""ListGroups (16), DescribeGroups (15) and DeleteGroups (42), version-free: the administration of
classic (and, as classic clients see them, KIP-848 and share) groups.

ListGroups filters by state from v4 and by type from v5, DescribeGroups asks for the authorized
operations from v3: those requests are frozen dataclasses read once from kio's class of any
version, a version without the field taking Kafka's default (no filter, not asked). DeleteGroups'
versions all satisfy its Protocol as they are (mypy checks each at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

DELETE_GROUPS_VERSIONS = range(0, 3)  # protocol/versions.py: GROUP_MAX_VERSIONS[42]


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()  # v4 on
    types_filter: tuple[str, ...] = ()  # v5 on


@dataclass(frozen=True, slots=True)
class DescribeGroupsRequest:
    groups: tuple[str, ...]
    include_authorized_operations: bool = False  # v3 on


class DeleteGroupsRequest(Protocol):
    @property
    def groups_names(self) -> Sequence[str]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.delete_groups.v0.request import DeleteGroupsRequest as DeleteGroups0
    from kio.schema.delete_groups.v1.request import DeleteGroupsRequest as DeleteGroups1
    from kio.schema.delete_groups.v2.request import DeleteGroupsRequest as DeleteGroups2

    def _delete_groups(request: DeleteGroups0 | DeleteGroups1 | DeleteGroups2) -> DeleteGroupsRequest:
        return request
