"""Responses built from a request alone, for the API's handler and for whoever answers in its place
(the authorisation guard refusing a request answers in the handler's shape).
"""

from __future__ import annotations

from collections.abc import Iterator

from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from tabletopic.broker.protocol.responses import LeaderIdAndEpoch, WriteTxnMarkersResponse

NO_LEADER = (-1, -1)  # ``(node id, leader epoch)`` of a partition whose leader an answer does not name


def current_leader(leader: tuple[int, int]) -> LeaderIdAndEpoch:
    """A refused partition's CurrentLeader (KIP-951): ``(node id, leader epoch)``, (-1, -1) when
    unknown."""
    return {"leader_id": leader[0], "leader_epoch": leader[1]}


def write_txn_markers_answer(
    request: WriteTxnMarkersRequest, codes: Iterator[ErrorCode]
) -> WriteTxnMarkersResponse:
    """WriteTxnMarkers' response: each partition of each marker with the next of ``codes``, in
    request order."""
    return {
        "markers": [
            {
                "producer_id": marker.producer_id,
                "topics": [
                    {
                        "name": topic.name,
                        "partitions": [
                            {"partition_index": int(index), "error_code": next(codes)}
                            for index in topic.partition_indexes
                        ],
                    }
                    for topic in marker.topics
                ],
            }
            for marker in request.markers
        ]
    }
