"""WriteTxnMarkers (27): the COMMIT (``transaction_result`` true) or ABORT markers a transaction
coordinator asks a partition leader to write (served v1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.write_txn_markers.v1 import request as v1

WriteTxnMarkersRequest: TypeAlias = "v1.WriteTxnMarkersRequest"
WritableTxnMarker: TypeAlias = "v1.WritableTxnMarker"
