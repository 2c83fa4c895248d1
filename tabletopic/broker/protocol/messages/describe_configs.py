"""DescribeConfigs (32), version-free: the resources whose configs a client asks for.

``include_documentation`` exists from v3 only, so the request is a frozen dataclass read once from
kio's class of any version, an older one asking for none. :class:`ConfigResource` is what the
config APIs (this one, AlterConfigs, IncrementalAlterConfigs) all name a resource by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ConfigResource(Protocol):
    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


@dataclass(frozen=True, slots=True)
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    configuration_keys: tuple[str, ...] | None  # None for every key


@dataclass(frozen=True, slots=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...]
    include_synonyms: bool
    include_documentation: bool = False  # v3 on
