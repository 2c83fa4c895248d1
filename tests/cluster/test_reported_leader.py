"""Which leader, at which epoch, a broker's Metadata names from its snapshot of the cluster: the
placed leader while its incarnation lives or is newer than the snapshot knows, else a prediction
at the placement's own epoch, never above it (a client keeps the newest epoch it saw, KIP-320)."""

from __future__ import annotations

from tabletopic.cluster.controller import Assignment, predicted_leader
from tabletopic.cluster.db import ClusterSnapshot, NodeInfo
from tabletopic.cluster.node import Leader, reported_leader
from tabletopic.ids import BrokerEpoch, LeaderEpoch, NodeId

KEY = ("orders", 30)


def guess(*candidates: int) -> NodeId:
    """Where every broker with these candidates predicts :data:`KEY` goes."""
    node = predicted_leader(KEY, [NodeId(c) for c in candidates])
    assert node is not None
    return node


def node(node_id: int, epoch: int, alive: bool = True) -> NodeInfo:
    return NodeInfo(NodeId(node_id), BrokerEpoch(epoch), None, {}, "alive", alive)


def snapshot(nodes: list[NodeInfo], row: Assignment | None) -> ClusterSnapshot:
    partitions = {} if row is None else {KEY: row}
    return ClusterSnapshot({n.node_id: n for n in nodes}, 1, 1, partitions)


def placed(leader: int, node_epoch: int, epoch: int, target: int | None = None) -> Assignment:
    return Assignment(
        NodeId(leader), BrokerEpoch(node_epoch), LeaderEpoch(epoch), NodeId(target) if target else None
    )


def test_a_live_placed_leader_is_named_at_its_epoch() -> None:
    snap = snapshot([node(1, 4), node(2, 1), node(3, 1)], placed(1, 4, 7))
    assert reported_leader(snap, KEY) == Leader(NodeId(1), LeaderEpoch(7))


def test_a_dead_leaders_partition_is_predicted_at_the_placements_epoch() -> None:
    snap = snapshot([node(1, 4, alive=False), node(2, 1), node(3, 1)], placed(1, 4, 7))
    assert reported_leader(snap, KEY) == Leader(guess(2, 3), LeaderEpoch(7))


def test_a_restarted_leaders_partition_is_predicted_and_a_moves_target_is_named() -> None:
    restarted = snapshot([node(1, 5), node(2, 1), node(3, 1)], placed(1, 4, 7))
    assert reported_leader(restarted, KEY) == Leader(guess(1, 2, 3), LeaderEpoch(7))
    moving = snapshot([node(1, 4, alive=False), node(2, 1), node(3, 1)], placed(1, 4, 7, target=3))
    assert reported_leader(moving, KEY) == Leader(NodeId(3), LeaderEpoch(7))


def test_a_placement_on_an_incarnation_newer_than_this_snapshot_knows_is_trusted() -> None:
    """The controller placed the partition on broker 2's new incarnation; this broker's view of
    the nodes still has the old one (dead, or not yet listed at all). A guess would name another
    broker at epoch 10, and clients would then ignore the real placement at 9 as older."""
    lagging = snapshot([node(1, 1), node(2, 3, alive=False), node(3, 1)], placed(2, 4, 9))
    assert reported_leader(lagging, KEY) == Leader(NodeId(2), LeaderEpoch(9))
    unlisted = snapshot([node(1, 1), node(3, 1)], placed(2, 4, 9))
    assert reported_leader(unlisted, KEY) == Leader(NodeId(2), LeaderEpoch(9))


def test_an_unplaced_partition_is_predicted_at_epoch_zero_and_none_without_brokers() -> None:
    snap = snapshot([node(1, 1), node(2, 1)], None)
    assert reported_leader(snap, KEY) == Leader(guess(1, 2), LeaderEpoch(0))  # placed at 1
    assert reported_leader(snapshot([node(1, 1, alive=False)], None), KEY) is None


class Client:
    """A client's cache of the partition's leader, as librdkafka and the Java client keep it
    (KIP-320): an answer at an epoch older than the one held is ignored, any other is taken."""

    def __init__(self) -> None:
        self.leader: Leader | None = None

    def sees(self, snap: ClusterSnapshot) -> None:
        answer = reported_leader(snap, KEY)
        if answer is not None and (self.leader is None or answer.leader_epoch >= self.leader.leader_epoch):
            self.leader = answer


def test_a_client_follows_a_leader_whose_lease_only_lapsed_back_to_it() -> None:
    """PostgreSQL frozen for 8 s: every lease lapses on its clock, a broker's Metadata guesses
    another leader, then the leader renews and keeps its partition at its epoch. Guessed at the
    next epoch, the client kept the guess for good (a producer's records for the partition were
    never sent to the real leader again)."""
    client = Client()
    client.sees(snapshot([node(1, 1), node(2, 1), node(3, 1)], placed(1, 1, 7)))
    client.sees(snapshot([node(1, 1, alive=False), node(2, 1), node(3, 1)], placed(1, 1, 7)))
    assert client.leader is not None and client.leader.node_id != 1  # it took the guess
    client.sees(snapshot([node(1, 1), node(2, 1), node(3, 1)], placed(1, 1, 7)))
    assert client.leader == Leader(NodeId(1), LeaderEpoch(7))


def test_a_client_that_took_a_guess_takes_the_placement_wherever_it_is() -> None:
    """The controller places a partition at one epoch above its placement: newer than any guess,
    whether it placed it on the guess or (evening out partition counts) elsewhere."""
    for leader in (1, 2):
        client = Client()
        client.sees(snapshot([node(1, 1), node(2, 1), node(3, 1, alive=False)], placed(3, 1, 7)))
        client.sees(snapshot([node(1, 1), node(2, 1), node(3, 1, alive=False)], placed(leader, 1, 8)))
        assert client.leader == Leader(NodeId(leader), LeaderEpoch(8))
