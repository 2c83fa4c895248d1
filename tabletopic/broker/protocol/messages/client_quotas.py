"""DescribeClientQuotas (48) and AlterClientQuotas (49), version-free: quotas per user and/or
client id.

kio's class of every served version satisfies these Protocols as it is (mypy checks each at the
end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

# api key -> the versions served (the broker's MAX_VERSIONS), each checked by mypy below.
SERVED_VERSIONS: dict[int, range] = {
    48: range(0, 2),  # DescribeClientQuotas
    49: range(0, 2),  # AlterClientQuotas
}


class QuotaFilterComponent(Protocol):
    @property
    def entity_type(self) -> str: ...

    @property
    def match_type(self) -> int: ...

    @property
    def match(self) -> str | None: ...


class DescribeClientQuotasRequest(Protocol):
    @property
    def components(self) -> Sequence[QuotaFilterComponent]: ...

    @property
    def strict(self) -> bool: ...


class QuotaEntity(Protocol):
    @property
    def entity_type(self) -> str: ...

    @property
    def entity_name(self) -> str | None: ...


class QuotaOp(Protocol):
    @property
    def key(self) -> str: ...

    @property
    def value(self) -> float: ...

    @property
    def remove(self) -> bool: ...


class QuotaAlteration(Protocol):
    @property
    def entity(self) -> Sequence[QuotaEntity]: ...

    @property
    def ops(self) -> Sequence[QuotaOp]: ...


class AlterClientQuotasRequest(Protocol):
    @property
    def entries(self) -> Sequence[QuotaAlteration]: ...

    @property
    def validate_only(self) -> bool: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.alter_client_quotas.v0.request import AlterClientQuotasRequest as Alter0
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest as Alter1
    from kio.schema.describe_client_quotas.v0.request import DescribeClientQuotasRequest as Describe0
    from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest as Describe1

    def _describe(request: Describe0 | Describe1) -> DescribeClientQuotasRequest:
        return request

    def _alter(request: Alter0 | Alter1) -> AlterClientQuotasRequest:
        return request
