"""Configuration keys of cluster mode (Kafka's names where Kafka has one)."""

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
    "controller gives its partitions to live brokers. Also the controller lease's length.",
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
