"""AlterReplicaLogDirs (34): the log dir each partition is to move to (served v1 to v2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.alter_replica_log_dirs.v1 import request as v1
    from kio.schema.alter_replica_log_dirs.v2 import request as v2

AlterReplicaLogDirsRequest: TypeAlias = "v1.AlterReplicaLogDirsRequest | v2.AlterReplicaLogDirsRequest"
