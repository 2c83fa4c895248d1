"""A coordinator slot given up after the database refused a write (the group coordinator was
fenced) is taken again, and so loaded again, while the controller's placement still names this
broker: a lease that ran out for a moment must not leave the slot's groups without a coordinator."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from tabletopic.broker.cluster_role import ClusterRole
from tabletopic.broker.leadership import GROUP_SLOTS_TOPIC
from tests.support.waiting import wait_until


def _role(assignments: dict[Any, int]) -> ClusterRole:
    """A role with only what reconciling coordinator slots touches (no partitions, no streams)."""
    role = ClusterRole.__new__(ClusterRole)
    role.node = SimpleNamespace(my_assignments=lambda: dict(assignments))  # type: ignore[assignment]
    role.opened = {}
    role.on_groups_gained, role.on_groups_lost = [], []
    role.on_txn_slots_gained, role.on_txn_slots_lost = [], []
    role._wake = asyncio.Event()

    async def no_earlier_streams() -> None:
        return None

    role.takeovers = SimpleNamespace(release_earlier_streams=no_earlier_streams)  # type: ignore[assignment]
    return role


async def test_a_group_slot_given_up_is_taken_again_while_the_controller_still_names_this_broker() -> None:
    key = (GROUP_SLOTS_TOPIC, 2)
    role = _role({key: 5})
    gained: list[dict[int, int]] = []
    lost: list[set[int]] = []
    role.on_groups_gained.append(gained.append)
    role.on_groups_lost.append(lost.append)
    await role._reconcile()
    assert gained == [{2: 5}] and role.opened == {key: 5}

    role.give_up(key)
    assert lost == [{2}] and key not in role.opened
    await wait_until(role._wake.is_set, message="the role wakes to reconcile again")
    await role._reconcile()
    assert gained == [{2: 5}, {2: 5}] and role.opened == {key: 5}


async def test_giving_up_a_slot_not_led_here_changes_nothing() -> None:
    role = _role({})
    lost: list[set[int]] = []
    role.on_groups_lost.append(lost.append)
    role.give_up((GROUP_SLOTS_TOPIC, 1))
    assert lost == [] and not role._wake.is_set()
