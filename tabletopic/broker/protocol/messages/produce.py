"""Produce (0): what the broker reads of a request.

Every Produce version the broker serves (v3 to v12) has the same request fields, so the hot path
reads the request kio parsed (or :mod:`~tabletopic.broker.protocol.produce_reader` built, each
partition's ``records`` lent by the request's frame, never copied) without converting it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.produce.v3 import request as v3
    from kio.schema.produce.v4 import request as v4
    from kio.schema.produce.v5 import request as v5
    from kio.schema.produce.v6 import request as v6
    from kio.schema.produce.v7 import request as v7
    from kio.schema.produce.v8 import request as v8
    from kio.schema.produce.v9 import request as v9
    from kio.schema.produce.v10 import request as v10
    from kio.schema.produce.v11 import request as v11
    from kio.schema.produce.v12 import request as v12

ProduceRequest: TypeAlias = (
    "v3.ProduceRequest | v4.ProduceRequest | v5.ProduceRequest | v6.ProduceRequest | v7.ProduceRequest | "
    "v8.ProduceRequest | v9.ProduceRequest | v10.ProduceRequest | v11.ProduceRequest | "
    "v12.ProduceRequest"
)
PartitionProduceData: TypeAlias = (
    "v3.PartitionProduceData | v4.PartitionProduceData | v5.PartitionProduceData | "
    "v6.PartitionProduceData | v7.PartitionProduceData | v8.PartitionProduceData | "
    "v9.PartitionProduceData | v10.PartitionProduceData | v11.PartitionProduceData | "
    "v12.PartitionProduceData"
)
