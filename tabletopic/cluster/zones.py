"""Which zone (rack) a client is in, so it can be served by a broker in the same zone.

Cross-zone traffic is what object-storage Kafka saves most on; the broker can only avoid it if it
knows where the client is. Three sources, in order of trust:

1. the Fetch request's ``rack_id`` (KIP-392, ``client.rack`` in every Kafka consumer);
2. ``automq_az=<zone>`` inside ``client.id``, AutoMQ's convention for producers and admin
   clients, which have no ``client.rack`` on the wire: ``client.id`` is read like a URL query,
   ``name&automq_az=eu-1a`` or just ``automq_az=eu-1a``;
3. a CIDR map from the client's address (``broker.client.zone.cidrs``, e.g.
   ``10.0.1.0/24=a,10.0.2.0/24=b``), for clients nobody can reconfigure.

Pure code: no sockets, no configuration loading.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

CLIENT_ID_ZONE_KEY = "automq_az"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ZoneMapError(ValueError):
    """A CIDR map entry that does not parse; the message names the entry."""


@dataclass(frozen=True, slots=True)
class ZoneMap:
    """CIDR blocks to zones; the most specific block that holds an address wins."""

    entries: tuple[tuple[Network, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> ZoneMap:
        """Parse ``cidr=zone`` pairs separated by commas (the config value's format).

        Raises:
            ZoneMapError: an entry without ``=``, with an empty zone or an invalid block.
        """
        entries: list[tuple[Network, str]] = []
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            block, sep, zone = item.partition("=")
            if not sep or not zone.strip():
                raise ZoneMapError(f"{item!r} is not of the form CIDR=zone")
            try:
                network = ipaddress.ip_network(block.strip(), strict=False)
            except ValueError as exc:
                raise ZoneMapError(f"{block.strip()!r} is not a CIDR block: {exc}") from exc
            entries.append((network, zone.strip()))
        entries.sort(key=lambda entry: entry[0].prefixlen, reverse=True)
        return cls(tuple(entries))

    def zone_of(self, address: str | None) -> str | None:
        if not address or not self.entries:
            return None
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return None
        for network, zone in self.entries:
            if ip.version == network.version and ip in network:
                return zone
        return None


def zone_from_client_id(client_id: str | None) -> str | None:
    """The zone named by ``automq_az=`` in a client id, or None."""
    if not client_id or CLIENT_ID_ZONE_KEY not in client_id:
        return None
    for key, value in parse_qsl(client_id, keep_blank_values=True):
        if key.strip() == CLIENT_ID_ZONE_KEY and value.strip():
            return value.strip()
    return None


def client_zone(
    *,
    rack_id: str | None = None,
    client_id: str | None = None,
    address: str | None = None,
    zone_map: ZoneMap = ZoneMap(),
) -> str | None:
    """The client's zone from the most trusted source that names one, or None if unknown."""
    if rack_id and rack_id.strip():
        return rack_id.strip()
    return zone_from_client_id(client_id) or zone_map.zone_of(address)


def pick_broker_in_zone(
    zone: str | None,
    leader: int,
    brokers: Sequence[tuple[int, str | None]],
    key: int = 0,
) -> int:
    """The broker that should serve a client of ``zone`` for a partition led by ``leader``.

    The leader itself when it is in the client's zone (or the zone is unknown, or no live broker is
    in it); otherwise a broker of that zone chosen by ``key`` (e.g. the partition number) so a
    zone's clients spread over its brokers in a stable way.
    """
    same_zone = sorted(broker for broker, rack in brokers if zone is not None and rack == zone)
    if not same_zone or leader in same_zone:
        return leader
    return same_zone[key % len(same_zone)]


def zones(brokers: Iterable[tuple[int, str | None]]) -> set[str]:
    """The distinct zones the given brokers are in."""
    return {rack for _, rack in brokers if rack}
