"""AlterConfigs (33) and IncrementalAlterConfigs (44), version-free: the resources whose configs
change, and how.

Both requests share a shape (resources, validate_only) that the handlers' one flow reads, and every
served version of each has the fields read, so each request type is a Protocol kio's class of each
version satisfies as it is (mypy checks each at the end of this module). They differ in a resource's
configs: AlterConfigs gives the new set of values, IncrementalAlterConfigs an operation per key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

from tabletopic.broker.protocol.messages.describe_configs import ConfigResource

ALTER_CONFIGS_VERSIONS = range(0, 3)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[33]
INCREMENTAL_ALTER_CONFIGS_VERSIONS = range(0, 2)  # likewise MAX_VERSIONS[44]

ResourceT_co = TypeVar("ResourceT_co", bound=ConfigResource, covariant=True)


class ConfigsAlteration(Protocol[ResourceT_co]):
    """What AlterConfigs and IncrementalAlterConfigs requests both hold."""

    @property
    def resources(self) -> Sequence[ResourceT_co]: ...

    @property
    def validate_only(self) -> bool: ...


class AlterableConfig(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str | None: ...


class AlterConfigsResource(ConfigResource, Protocol):
    @property
    def configs(self) -> Sequence[AlterableConfig]:
        """The resource's whole new set of explicit configs."""
        ...


class AlterableConfigOperation(AlterableConfig, Protocol):
    @property
    def config_operation(self) -> int:
        """SET, DELETE, APPEND or SUBTRACT (KIP-339)."""
        ...


class IncrementalAlterConfigsResource(ConfigResource, Protocol):
    @property
    def configs(self) -> Sequence[AlterableConfigOperation]: ...


AlterConfigsRequest: TypeAlias = ConfigsAlteration[AlterConfigsResource]
IncrementalAlterConfigsRequest: TypeAlias = ConfigsAlteration[IncrementalAlterConfigsResource]


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.alter_configs.v0.request import AlterConfigsRequest as Alter0
    from kio.schema.alter_configs.v1.request import AlterConfigsRequest as Alter1
    from kio.schema.alter_configs.v2.request import AlterConfigsRequest as Alter2
    from kio.schema.incremental_alter_configs.v0.request import (
        IncrementalAlterConfigsRequest as Incremental0,
    )
    from kio.schema.incremental_alter_configs.v1.request import (
        IncrementalAlterConfigsRequest as Incremental1,
    )

    def _every_version_is_an_alter_configs_request(
        request: Alter0 | Alter1 | Alter2,
    ) -> AlterConfigsRequest:
        return request

    def _every_version_is_an_incremental_alter_configs_request(
        request: Incremental0 | Incremental1,
    ) -> IncrementalAlterConfigsRequest:
        return request
