"""DescribeLogDirs (35): the partitions whose log dirs a client asks about, None for every partition
(served v1 to v4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.describe_log_dirs.v1 import request as v1
    from kio.schema.describe_log_dirs.v2 import request as v2
    from kio.schema.describe_log_dirs.v3 import request as v3
    from kio.schema.describe_log_dirs.v4 import request as v4

DescribeLogDirsRequest: TypeAlias = (
    "v1.DescribeLogDirsRequest | v2.DescribeLogDirsRequest | v3.DescribeLogDirsRequest | "
    "v4.DescribeLogDirsRequest"
)
