"""LeaderMarkers, the broker's MarkerWriter, against fakes of the broker, its participants and the
cluster: which markers are written here, which are asked of other leaders, and that both go at once
(the producer's next transaction waits for the slowest)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from kio.schema.errors import ErrorCode

from tabletopic.broker.transactions.actions import WriteMarkers
from tabletopic.broker.transactions.cluster import TxnCluster
from tabletopic.broker.transactions.markers import LeaderMarkers
from tabletopic.broker.transactions.model import TxnPartition
from tabletopic.broker.transactions.participants import Participants
from tabletopic.broker.transactions.ports import TxnBroker

HERE = TxnPartition("t", 0, 10, 0)
ELSEWHERE = TxnPartition("t", 1, 11, 0)
MOVING = TxnPartition("t", 2, 12, 0)


def marked(*partitions: TxnPartition) -> WriteMarkers:
    return WriteMarkers("tid", 5, 1, True, partitions, (), in_background=True)


class Leaders:
    """Partition 0 is led here; the others elsewhere. The local write waits until the other
    leaders have been asked, so markers written one after the other never finish."""

    def __init__(self, refused: frozenset[tuple[str, int]] = frozenset()) -> None:
        self.asked_elsewhere = asyncio.Event()
        self.written_here: list[int] = []
        self.sent: list[tuple[str, int]] = []
        self.refused = refused

    async def write_marker(self, stream_id: int, pid: int, epoch: int, commit: bool, start: int) -> None:
        await asyncio.wait_for(self.asked_elsewhere.wait(), 2)
        self.written_here.append(stream_id)

    async def send_markers(
        self, partitions: list[tuple[str, int]], pid: int, epoch: int, commit: bool, coordinator_epoch: int
    ) -> dict[tuple[str, int], ErrorCode]:
        self.sent += partitions
        self.asked_elsewhere.set()
        await asyncio.sleep(0)
        return {
            key: ErrorCode.not_leader_or_follower if key in self.refused else ErrorCode.none
            for key in partitions
        }


def writer(leaders: Leaders) -> LeaderMarkers:
    leadership = SimpleNamespace(leads=lambda topic, partition: partition == 0)
    broker = SimpleNamespace(leadership=leadership, clustered=True)
    markers = LeaderMarkers(cast(TxnBroker, broker), cast(Participants, leaders))
    markers.attach_cluster(cast(TxnCluster, leaders))
    return markers


async def test_markers_here_and_elsewhere_are_written_at_once() -> None:
    leaders = Leaders()
    failed = await writer(leaders).write(marked(HERE, ELSEWHERE), [HERE, ELSEWHERE], 3)
    assert failed == []  # fails (times out) if the local markers are written before the others are asked
    assert leaders.written_here == [HERE.stream_id]
    assert leaders.sent == [("t", 1)]


async def test_a_marker_another_leader_refused_is_returned_to_try_again() -> None:
    leaders = Leaders(refused=frozenset({("t", 2)}))
    pending: list[Any] = [HERE, ELSEWHERE, MOVING]
    failed = await writer(leaders).write(marked(HERE, ELSEWHERE, MOVING), pending, 3)
    assert failed == [MOVING]
    assert sorted(leaders.sent) == [("t", 1), ("t", 2)]
