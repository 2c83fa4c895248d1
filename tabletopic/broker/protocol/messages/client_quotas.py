"""DescribeClientQuotas (48) and AlterClientQuotas (49): quotas per user and/or client id (both
served v0 to v1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.alter_client_quotas.v0 import request as alter_v0
    from kio.schema.alter_client_quotas.v1 import request as alter_v1
    from kio.schema.describe_client_quotas.v0 import request as describe_v0
    from kio.schema.describe_client_quotas.v1 import request as describe_v1

DescribeClientQuotasRequest: TypeAlias = (
    "describe_v0.DescribeClientQuotasRequest | describe_v1.DescribeClientQuotasRequest"
)
QuotaFilterComponent: TypeAlias = "describe_v0.ComponentData | describe_v1.ComponentData"
AlterClientQuotasRequest: TypeAlias = "alter_v0.AlterClientQuotasRequest | alter_v1.AlterClientQuotasRequest"
QuotaAlteration: TypeAlias = "alter_v0.EntryData | alter_v1.EntryData"
