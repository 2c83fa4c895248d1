"""ElectLeaders (43): the partitions whose leader a client asks to elect, None for every partition
(served v0 to v2; a partition has one replica here, so ``election_type`` changes nothing).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.elect_leaders.v0 import request as v0
    from kio.schema.elect_leaders.v1 import request as v1
    from kio.schema.elect_leaders.v2 import request as v2

ElectLeadersRequest: TypeAlias = "v0.ElectLeadersRequest | v1.ElectLeadersRequest | v2.ElectLeadersRequest"
