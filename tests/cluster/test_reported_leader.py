"""Which leader, at which epoch, a broker's Metadata names from its snapshot of the cluster: the
placed leader while its incarnation lives or is newer than the snapshot knows, else a prediction
at the epoch the controller will give."""

from __future__ import annotations

from tabletopic.cluster.controller import Assignment, leader_epoch_step, predicted_leader
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


def test_a_dead_leaders_partition_is_predicted_at_the_next_epoch() -> None:
    snap = snapshot([node(1, 4, alive=False), node(2, 1), node(3, 1)], placed(1, 4, 7))
    assert reported_leader(snap, KEY) == Leader(guess(2, 3), LeaderEpoch(8))


def test_a_restarted_leaders_partition_is_predicted_and_a_moves_target_is_named() -> None:
    restarted = snapshot([node(1, 5), node(2, 1), node(3, 1)], placed(1, 4, 7))
    assert reported_leader(restarted, KEY) == Leader(guess(1, 2, 3), LeaderEpoch(8))
    moving = snapshot([node(1, 4, alive=False), node(2, 1), node(3, 1)], placed(1, 4, 7, target=3))
    assert reported_leader(moving, KEY) == Leader(NodeId(3), LeaderEpoch(8))


def test_a_placement_on_an_incarnation_newer_than_this_snapshot_knows_is_trusted() -> None:
    """The controller placed the partition on broker 2's new incarnation; this broker's view of
    the nodes still has the old one (dead, or not yet listed at all). A guess would name another
    broker at epoch 10, and clients would then ignore the real placement at 9 as older."""
    lagging = snapshot([node(1, 1), node(2, 3, alive=False), node(3, 1)], placed(2, 4, 9))
    assert reported_leader(lagging, KEY) == Leader(NodeId(2), LeaderEpoch(9))
    unlisted = snapshot([node(1, 1), node(3, 1)], placed(2, 4, 9))
    assert reported_leader(unlisted, KEY) == Leader(NodeId(2), LeaderEpoch(9))


def test_an_unplaced_partition_is_predicted_at_epoch_one_and_none_without_brokers() -> None:
    snap = snapshot([node(1, 1), node(2, 1)], None)
    assert reported_leader(snap, KEY) == Leader(guess(1, 2), LeaderEpoch(1))
    assert reported_leader(snapshot([node(1, 1, alive=False)], None), KEY) is None


# Where the controller places a partition Metadata was guessing for: the guess's epoch if it is
# the guess, else one more, so that no client that took the guess ignores the placement.


def test_a_partition_failing_over_to_the_guess_gets_the_guessed_epoch() -> None:
    row = placed(3, 1, 7)
    live = {NodeId(1): BrokerEpoch(1), NodeId(2): BrokerEpoch(1)}
    reported = reported_leader(snapshot([node(1, 1), node(2, 1), node(3, 1, alive=False)], row), KEY)
    assert reported == Leader(guess(1, 2), LeaderEpoch(8))
    assert leader_epoch_step(KEY, row, guess(1, 2), live, [NodeId(1), NodeId(2)]) == 1


def test_a_partition_placed_elsewhere_than_the_guess_skips_the_guessed_epoch() -> None:
    row = placed(3, 1, 7)
    live = {NodeId(1): BrokerEpoch(1), NodeId(2): BrokerEpoch(1)}
    elsewhere = NodeId(3 - guess(1, 2))
    assert leader_epoch_step(KEY, row, elsewhere, live, [NodeId(1), NodeId(2)]) == 2


def test_a_new_partition_placed_elsewhere_than_the_guess_starts_at_epoch_two() -> None:
    live = {NodeId(1): BrokerEpoch(1), NodeId(2): BrokerEpoch(1)}
    assert reported_leader(snapshot([node(1, 1), node(2, 1)], None), KEY) == Leader(
        guess(1, 2), LeaderEpoch(1)
    )
    assert leader_epoch_step(KEY, None, guess(1, 2), live, [NodeId(1), NodeId(2)]) == 1
    assert leader_epoch_step(KEY, None, NodeId(3 - guess(1, 2)), live, [NodeId(1), NodeId(2)]) == 2


def test_a_move_of_a_live_leader_or_to_its_target_moves_the_epoch_by_one() -> None:
    live = {NodeId(1): BrokerEpoch(1), NodeId(2): BrokerEpoch(1)}
    eligible = [NodeId(1), NodeId(2)]
    assert leader_epoch_step(KEY, placed(1, 1, 7), NodeId(2), live, eligible) == 1  # balancing
    dead_with_target = placed(3, 1, 7, target=2)
    assert leader_epoch_step(KEY, dead_with_target, NodeId(2), live, eligible) == 1
    assert leader_epoch_step(KEY, dead_with_target, NodeId(1), live, eligible) == 2
