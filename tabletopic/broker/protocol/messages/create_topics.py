"""CreateTopics (19): the topics to create, each with its partitions and configs (served v2 to v7).

A topic's ``num_partitions`` is -1 for the broker's default (or its assignments' count); of its
replica ``assignments`` only their count is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.create_topics.v2 import request as v2
    from kio.schema.create_topics.v3 import request as v3
    from kio.schema.create_topics.v4 import request as v4
    from kio.schema.create_topics.v5 import request as v5
    from kio.schema.create_topics.v6 import request as v6
    from kio.schema.create_topics.v7 import request as v7

CreateTopicsRequest: TypeAlias = (
    "v2.CreateTopicsRequest | v3.CreateTopicsRequest | v4.CreateTopicsRequest | v5.CreateTopicsRequest | "
    "v6.CreateTopicsRequest | v7.CreateTopicsRequest"
)
CreatableTopic: TypeAlias = (
    "v2.CreatableTopic | v3.CreatableTopic | v4.CreatableTopic | v5.CreatableTopic | v6.CreatableTopic | "
    "v7.CreatableTopic"
)
