"""Where a client is: KIP-392 rack id, AutoMQ's client.id convention, or a CIDR map."""

from __future__ import annotations

import pytest

from tabletopic.cluster.zones import (
    ZoneMap,
    ZoneMapError,
    client_zone,
    pick_broker_in_zone,
    zone_from_client_id,
)


@pytest.mark.parametrize(
    ("client_id", "zone"),
    [
        ("automq_az=eu-1a", "eu-1a"),
        ("orders-app&automq_az=b", "b"),
        ("automq_az=c&other=1", "c"),
        ("orders-app", None),
        ("automq_az=", None),
        ("", None),
        (None, None),
        ("%%%&&&==automq_az", None),
    ],
)
def test_zone_from_client_id(client_id: str | None, zone: str | None) -> None:
    assert zone_from_client_id(client_id) == zone


def test_rack_id_wins_over_client_id_and_address() -> None:
    zones = ZoneMap.parse("10.0.0.0/8=c")
    assert client_zone(rack_id="a", client_id="automq_az=b", address="10.1.2.3", zone_map=zones) == "a"
    assert client_zone(rack_id="", client_id="automq_az=b", address="10.1.2.3", zone_map=zones) == "b"
    assert client_zone(client_id="x", address="10.1.2.3", zone_map=zones) == "c"
    assert client_zone(client_id="x", address="192.168.0.1", zone_map=zones) is None


def test_most_specific_block_wins() -> None:
    zones = ZoneMap.parse("10.0.0.0/8=wide, 10.0.1.0/24=narrow,::1/128=v6")
    assert zones.zone_of("10.0.1.7") == "narrow"
    assert zones.zone_of("10.9.9.9") == "wide"
    assert zones.zone_of("::1") == "v6"
    assert zones.zone_of("not an address") is None


@pytest.mark.parametrize("text", ["10.0.0.0/8", "10.0.0.0/8=", "nonsense=a", "10.0.0.0/33=a"])
def test_bad_zone_map_entries_are_named(text: str) -> None:
    with pytest.raises(ZoneMapError) as caught:
        ZoneMap.parse(text)
    assert text.split("=")[0].strip() in str(caught.value)


def test_pick_broker_in_zone() -> None:
    brokers = [(1, "a"), (2, "b"), (3, "c"), (4, "b")]
    assert pick_broker_in_zone("a", leader=1, brokers=brokers) == 1
    assert pick_broker_in_zone("b", leader=1, brokers=brokers, key=0) == 2
    assert pick_broker_in_zone("b", leader=1, brokers=brokers, key=1) == 4
    assert pick_broker_in_zone("z", leader=3, brokers=brokers) == 3
    assert pick_broker_in_zone(None, leader=3, brokers=brokers) == 3
