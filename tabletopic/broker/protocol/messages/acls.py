"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): ACL bindings and the filters that match
them (each served v1 to v3).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.create_acls.v1 import request as create_v1
    from kio.schema.create_acls.v2 import request as create_v2
    from kio.schema.create_acls.v3 import request as create_v3
    from kio.schema.delete_acls.v1 import request as delete_v1
    from kio.schema.delete_acls.v2 import request as delete_v2
    from kio.schema.delete_acls.v3 import request as delete_v3
    from kio.schema.describe_acls.v1 import request as describe_v1
    from kio.schema.describe_acls.v2 import request as describe_v2
    from kio.schema.describe_acls.v3 import request as describe_v3

DescribeAclsRequest: TypeAlias = (
    "describe_v1.DescribeAclsRequest | describe_v2.DescribeAclsRequest | describe_v3.DescribeAclsRequest"
)
CreateAclsRequest: TypeAlias = (
    "create_v1.CreateAclsRequest | create_v2.CreateAclsRequest | create_v3.CreateAclsRequest"
)
AclCreation: TypeAlias = "create_v1.AclCreation | create_v2.AclCreation | create_v3.AclCreation"
DeleteAclsRequest: TypeAlias = (
    "delete_v1.DeleteAclsRequest | delete_v2.DeleteAclsRequest | delete_v3.DeleteAclsRequest"
)
AclsFilter: TypeAlias = (
    "describe_v1.DescribeAclsRequest | describe_v2.DescribeAclsRequest | "
    "describe_v3.DescribeAclsRequest | delete_v1.DeleteAclsFilter | delete_v2.DeleteAclsFilter | "
    "delete_v3.DeleteAclsFilter"
)
"""What DescribeAcls asks for, and each filter of DeleteAcls."""
