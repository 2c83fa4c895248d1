"""Configuration keys of cluster mode (Kafka's names where Kafka has one)."""

from tabletopic.cluster.zones import ZoneMap
from tabletopic.config import define, in_range

ENABLE = define(
    "cluster.enable",
    bool,
    False,
    "Run as one broker of a cluster: nodes share `metadata.url` (PostgreSQL) and the object store, "
    "and each partition is led by one live broker. Needs `s3stream.wal.mode=object`.",
    "cluster",
)
RACK = define("broker.rack", str, None, "The rack (zone) of this broker, reported to clients.", "cluster")
HEARTBEAT_INTERVAL_MS = define(
    "broker.heartbeat.interval.ms",
    int,
    1000,
    "How often a broker renews its lease in the metadata database (and the controller its own).",
    "cluster",
    in_range(50),
)
SESSION_TIMEOUT_MS = define(
    "broker.session.timeout.ms",
    int,
    3000,
    "A broker whose lease was not renewed for this long (on the database's clock) is dead: the "
    "controller gives its partitions to live brokers. Also the controller lease's length; PostgreSQL "
    "ends a session left idle inside a transaction for twice this long (a paused broker's locks).",
    "cluster",
    in_range(200),
)
CONTROLLED_SHUTDOWN_TIMEOUT_MS = define(
    "controlled.shutdown.timeout.ms",
    int,
    10_000,
    "On SIGTERM a broker asks the controller to move its partitions away and waits up to this long "
    "for them to go before it stops.",
    "cluster",
    in_range(0),
)
BALANCE_MAX_MOVES = define(
    "cluster.balance.max.moves",
    int,
    8,
    "At most this many partitions the controller moves per round to even out the partition count "
    "of live brokers (0 switches balancing off).",
    "cluster",
    in_range(0),
)
GROUP_PARTITIONS = define(
    "offsets.topic.num.partitions",
    int,
    50,
    "Consumer groups are spread over brokers by hashing the group id onto this many coordinator "
    "slots, each led by a live broker like a partition.",
    "cluster",
    in_range(1),
)
TXN_PARTITIONS = define(
    "transaction.state.log.num.partitions",
    int,
    50,
    "Transactional ids are spread over brokers by hashing the id onto this many transaction "
    "coordinator slots, each led by a live broker like a partition (the state itself is in the "
    "metadata database).",
    "cluster",
    in_range(1),
)

# Auto-balancing (AutoMQ's AutoBalancer): leaders move so network load evens out ------------------
AUTO_BALANCER_ENABLE = define(
    "auto.balancer.enable",
    bool,
    True,
    "In cluster mode, the controller moves partition leaders so that every broker's network bytes "
    "in and out stay within `auto.balancer.tolerance` of the mean (AutoMQ's AutoBalancer). While it "
    "is active (the cluster carries at least `auto.balancer.min.bytes.per.second` per broker) the "
    "partition-count balancing of `cluster.balance.max.moves` pauses, so the two never undo each "
    "other.",
    "cluster",
)
AUTO_BALANCER_DETECT_INTERVAL_MS = define(
    "auto.balancer.detect.interval.ms",
    int,
    60_000,
    "How often the controller plans a balancing round (AutoMQ detects every 60 s).",
    "cluster",
    in_range(100),
)
AUTO_BALANCER_METRICS_WINDOW_MS = define(
    "auto.balancer.metrics.window.ms",
    int,
    10_000,
    "Brokers report each partition's bytes in/out and records in per second averaged over this "
    "window, with their lease renewal. After a round that moved something, the next waits at least "
    "1.5 windows so the new leaders' reports cover the load they took.",
    "cluster",
    in_range(100),
)
AUTO_BALANCER_TOLERANCE = define(
    "auto.balancer.tolerance",
    float,
    0.2,
    "The band around the mean, as a fraction, that every broker's bytes in and out should stay in.",
    "cluster",
    in_range(0.01, 10),
)
AUTO_BALANCER_MAX_MOVES = define(
    "auto.balancer.max.moves",
    int,
    8,
    "At most this many leadership moves per balancing round.",
    "cluster",
    in_range(0),
)
AUTO_BALANCER_COOLDOWN_MS = define(
    "auto.balancer.cooldown.ms",
    int,
    120_000,
    "A partition the balancer moved is not moved by it again for this long (no thrashing).",
    "cluster",
    in_range(0),
)
AUTO_BALANCER_MIN_BYTES_PER_SECOND = define(
    "auto.balancer.min.bytes.per.second",
    int,
    1 << 20,
    "Below this mean load per broker (in or out) the cluster counts as idle: no load balancing "
    "(noise), partition counts are balanced instead. AutoMQ ignores brokers under 1 MiB/s.",
    "cluster",
    in_range(0),
)


def _check_zone_map(value: str) -> None:
    ZoneMap.parse(value)  # raises ZoneMapError (a ValueError) naming the bad entry


# Rack-aware routing ---------------------------------------------------------------------------
CLIENT_ZONE_CIDRS = define(
    "broker.client.zone.cidrs",
    str,
    "",
    "Zones of clients by address, for clients that name none (no `client.rack`, no "
    "`automq_az=<zone>` in `client.id`): comma-separated `CIDR=zone` pairs, e.g. "
    "`10.0.1.0/24=a,10.0.2.0/24=b`; the most specific block wins.",
    "cluster",
    lambda value: _check_zone_map(value),
)
