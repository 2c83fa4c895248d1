"""AlterReplicaLogDirs (34), version-free: the log dir each partition is to move to.

Every served version (v1 to v2) has the fields the handler reads, so the request type is a Protocol
kio's class of each version satisfies as it is (mypy checks each below).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

SERVED_VERSIONS = range(1, 3)  # protocol/versions.py: kio's minimum to MAX_VERSIONS[34]


class AlterReplicaLogDirTopic(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[int]: ...


class AlterReplicaLogDir(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def topics(self) -> Sequence[AlterReplicaLogDirTopic]: ...


class AlterReplicaLogDirsRequest(Protocol):
    @property
    def dirs(self) -> Sequence[AlterReplicaLogDir]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.alter_replica_log_dirs.v1.request import AlterReplicaLogDirsRequest as V1
    from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest as V2

    def _every_version_is_an_alter_replica_log_dirs_request(
        request: V1 | V2,
    ) -> AlterReplicaLogDirsRequest:
        return request
