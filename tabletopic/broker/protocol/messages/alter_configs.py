"""AlterConfigs (33, served v0 to v2) and IncrementalAlterConfigs (44, v0 to v1): the resources whose
configs change, and how.

Both requests share a shape (resources, validate_only) that the handlers' one flow reads,
:class:`ConfigsAlteration`, generic over the resource. They differ in a resource's configs:
AlterConfigs gives the resource's whole new set of explicit values, IncrementalAlterConfigs an
operation per key (``config_operation``: SET, DELETE, APPEND or SUBTRACT, KIP-339).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

from tabletopic.broker.protocol.messages.describe_configs import ConfigResource

if TYPE_CHECKING:
    from kio.schema.alter_configs.v0 import request as alter_v0
    from kio.schema.alter_configs.v1 import request as alter_v1
    from kio.schema.alter_configs.v2 import request as alter_v2
    from kio.schema.incremental_alter_configs.v0 import request as incremental_v0
    from kio.schema.incremental_alter_configs.v1 import request as incremental_v1

ResourceT_co = TypeVar("ResourceT_co", bound=ConfigResource, covariant=True)


class ConfigsAlteration(Protocol[ResourceT_co]):
    """What AlterConfigs and IncrementalAlterConfigs requests both hold."""

    @property
    def resources(self) -> Sequence[ResourceT_co]: ...

    @property
    def validate_only(self) -> bool: ...


AlterConfigsRequest: TypeAlias = (
    "alter_v0.AlterConfigsRequest | alter_v1.AlterConfigsRequest | alter_v2.AlterConfigsRequest"
)
AlterConfigsResource: TypeAlias = (
    "alter_v0.AlterConfigsResource | alter_v1.AlterConfigsResource | alter_v2.AlterConfigsResource"
)
IncrementalAlterConfigsRequest: TypeAlias = (
    "incremental_v0.IncrementalAlterConfigsRequest | incremental_v1.IncrementalAlterConfigsRequest"
)
IncrementalAlterConfigsResource: TypeAlias = (
    "incremental_v0.AlterConfigsResource | incremental_v1.AlterConfigsResource"
)
AlterableConfigOperation: TypeAlias = "incremental_v0.AlterableConfig | incremental_v1.AlterableConfig"
