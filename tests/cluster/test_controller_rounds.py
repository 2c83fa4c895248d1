"""When the controller plans a full round. A full round reads every partition and every topic's
partitions, so at 10,000 partitions one every poll (4 a heartbeat) kept the controller at 30-45 % of
a core with nothing happening: it must plan only when something it plans from changed, and on a slow
timer besides."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import sqlalchemy as sa

from tabletopic.cluster.controller import PartitionKey
from tabletopic.cluster.db import ClusterSnapshot, NodeInfo, Version
from tabletopic.cluster.node import ClusterNode, ClusterSettings

EP = {"PLAINTEXT": ("127.0.0.1", 9092)}


def _nodes(alive: dict[int, bool], draining: Collection[int] = ()) -> dict[int, NodeInfo]:
    return {
        n: NodeInfo(n, 1, None, EP, "draining" if n in draining else "alive", up) for n, up in alive.items()
    }


class FakeMetadata:
    """The database as the controller sees it: a snapshot the test sets, and rounds counted."""

    def __init__(self) -> None:
        self.current = ClusterSnapshot(_nodes({1: True, 2: True}), None, 0, {}, Version(3, 0))
        self.rounds = 0
        self.moves: dict[PartitionKey, int] = {}

    def snapshot(self, since: ClusterSnapshot | None = None) -> ClusterSnapshot:
        return self.current

    def acquire_controller(self, node_id: int, node_epoch: int, lease_s: float) -> int:
        snap = self.current
        self.current = ClusterSnapshot(snap.nodes, node_id, 1, snap.partitions, snap.version)
        return 1

    def reconcile(
        self,
        node_id: int,
        controller_epoch: int,
        wanted: Sequence[PartitionKey],
        max_moves: int,
        apart: Collection[str] = (),
    ) -> tuple[dict[PartitionKey, int], Version]:
        self.rounds += 1
        moves, self.moves = self.moves, {}
        version = self.current.version
        if moves:
            version = Version(version.version + 1, version.purges)
            self.change(version=version)
        return moves, version

    def change(self, nodes: dict[int, NodeInfo] | None = None, version: Version | None = None) -> None:
        snap = self.current
        self.current = ClusterSnapshot(
            nodes or snap.nodes,
            snap.controller_id,
            snap.controller_epoch,
            snap.partitions,
            version or snap.version,
        )


def _controller() -> tuple[ClusterNode, FakeMetadata]:
    engine = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")  # never connected
    node = ClusterNode(engine, ClusterSettings(node_id=1), wanted=lambda: [("orders", 0)])
    fake = FakeMetadata()
    node.meta = fake  # type: ignore[assignment]
    return node, fake


async def test_idle_rounds_plan_once_then_not_until_something_changes() -> None:
    node, fake = _controller()
    for _ in range(5):
        await node._round()
    assert node.controller_epoch == 1
    assert fake.rounds == 1


async def test_a_new_cluster_version_a_dead_or_draining_broker_or_a_topic_change_plans_again() -> None:
    node, fake = _controller()
    await node._round()
    fake.change(version=Version(9, 0))  # a reassignment asked for on another broker
    await node._round()
    await node._round()
    assert fake.rounds == 2
    fake.change(nodes=_nodes({1: True, 2: False}))  # broker 2's lease expired
    await node._round()
    await node._round()
    assert fake.rounds == 3
    fake.change(nodes=_nodes({1: True, 2: False}, draining=[1]))
    await node._round()
    assert fake.rounds == 4
    node._notified("leaders")  # the controller's own decisions: nothing to plan
    await node._round()
    assert fake.rounds == 4
    node._notified("topics")
    await node._round()
    await node._round()
    assert fake.rounds == 5
    node._notified("topics:orders")  # one topic named
    await node._round()
    assert fake.rounds == 6


async def test_a_round_that_moved_something_is_followed_by_another() -> None:
    node, fake = _controller()
    fake.moves = {("orders", 0): 2}
    await node._round()
    await node._round()  # balancing goes on until a round moves nothing
    await node._round()
    assert fake.rounds == 2


async def test_the_slow_timer_plans_a_full_round_even_when_nothing_seems_to_change() -> None:
    node, fake = _controller()
    await node._round()
    node.full_round_s = 0.0
    await node._round()
    assert fake.rounds == 2
