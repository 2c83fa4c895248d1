"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), version-free: ACL bindings and the
filters that match them.

kio's class of every served version (v1 to v3) satisfies these Protocols as it is (mypy checks
each at the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

# api key -> the versions served (the broker's MAX_VERSIONS), each checked by mypy below.
SERVED_VERSIONS: dict[int, range] = {
    29: range(1, 4),  # DescribeAcls
    30: range(1, 4),  # CreateAcls
    31: range(1, 4),  # DeleteAcls
}


class AclCreation(Protocol):
    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...

    @property
    def resource_pattern_type(self) -> int: ...

    @property
    def principal(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def operation(self) -> int: ...

    @property
    def permission_type(self) -> int: ...


class AclsFilter(Protocol):
    """What DescribeAcls asks for and each filter of DeleteAcls."""

    @property
    def resource_type_filter(self) -> int: ...

    @property
    def resource_name_filter(self) -> str | None: ...

    @property
    def pattern_type_filter(self) -> int: ...

    @property
    def principal_filter(self) -> str | None: ...

    @property
    def host_filter(self) -> str | None: ...

    @property
    def operation(self) -> int: ...

    @property
    def permission_type(self) -> int: ...


class DescribeAclsRequest(AclsFilter, Protocol):
    pass


class CreateAclsRequest(Protocol):
    @property
    def creations(self) -> Sequence[AclCreation]: ...


class DeleteAclsRequest(Protocol):
    @property
    def filters(self) -> Sequence[AclsFilter]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.create_acls.v1.request import CreateAclsRequest as Create1
    from kio.schema.create_acls.v2.request import CreateAclsRequest as Create2
    from kio.schema.create_acls.v3.request import CreateAclsRequest as Create3
    from kio.schema.delete_acls.v1.request import DeleteAclsRequest as Delete1
    from kio.schema.delete_acls.v2.request import DeleteAclsRequest as Delete2
    from kio.schema.delete_acls.v3.request import DeleteAclsRequest as Delete3
    from kio.schema.describe_acls.v1.request import DescribeAclsRequest as Describe1
    from kio.schema.describe_acls.v2.request import DescribeAclsRequest as Describe2
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest as Describe3

    def _describe(request: Describe1 | Describe2 | Describe3) -> DescribeAclsRequest:
        return request

    def _create(request: Create1 | Create2 | Create3) -> CreateAclsRequest:
        return request

    def _delete(request: Delete1 | Delete2 | Delete3) -> DeleteAclsRequest:
        return request
