"""Configuration keys of the Kafka broker (names follow Apache Kafka's where one exists)."""

from tabletopic.config import define, in_range

LISTENERS = define(
    "listeners",
    list,
    ["PLAINTEXT://127.0.0.1:9092"],
    "Kafka listeners, comma separated `NAME://HOST:PORT`. NAME is a security protocol (PLAINTEXT, SSL, "
    "SASL_PLAINTEXT, SASL_SSL) or a name given one in `listener.security.protocol.map` "
    "(`INTERNAL://:9093,EXTERNAL://:9094`); port 0 picks a free port; TLS keys in `ssl.*`.",
    "broker",
)
ADVERTISED_LISTENERS = define(
    "advertised.listeners",
    list,
    [],
    "What clients are told to connect to, same form as `listeners` and matched by listener name; a "
    "listener not named here advertises its own address. Clients are answered with endpoints of the "
    "listener they came in on.",
    "broker",
)
LISTENER_SECURITY_PROTOCOL_MAP = define(
    "listener.security.protocol.map",
    list,
    ["PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"],
    "Security protocol of each listener name, `NAME:PROTOCOL` comma separated "
    "(`INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL`), as in Kafka. The four protocol names always map to "
    "themselves.",
    "broker",
)
INTER_BROKER_LISTENER_NAME = define(
    "inter.broker.listener.name",
    str,
    None,
    "The listener the node's own clients use (dead-letter producer, table ingest jobs) and the one "
    "operator tools list first; empty means the listener named PLAINTEXT, else the first listener.",
    "broker",
)
BROKER_ID = define("broker.id", int, 1, "The node id this broker reports in Metadata.", "broker", in_range(0))
CLUSTER_ID = define(
    "cluster.id",
    str,
    None,
    "Cluster id reported to clients; empty means one generated on first start and kept in the "
    "metadata database.",
    "broker",
)
AUTO_CREATE_TOPICS = define(
    "auto.create.topics.enable",
    bool,
    True,
    "Create a topic when a client asks Metadata about a missing one (and allows auto-creation).",
    "broker",
)
NUM_PARTITIONS = define(
    "num.partitions",
    int,
    1,
    "Partitions of an auto-created topic and the CreateTopics default.",
    "broker",
    in_range(1, 100_000),
)
MESSAGE_MAX_BYTES = define(
    "message.max.bytes",
    int,
    1048588,
    "Largest record batch accepted (after compression); the default of a topic's `max.message.bytes`.",
    "broker",
    in_range(0),
)
SOCKET_REQUEST_MAX_BYTES = define(
    "socket.request.max.bytes",
    int,
    104857600,
    "Largest request frame; a longer length prefix closes the connection before anything is allocated.",
    "broker",
    in_range(1024),
)
CONNECTIONS_MAX_IDLE_MS = define(
    "connections.max.idle.ms",
    int,
    600_000,
    "A client connection with no request or response for this long, and no request in flight, is "
    "closed (Kafka's key and default). Besides freeing what a vanished client left open, the close "
    "is what wakes a librdkafka transactional producer blocked in send_offsets_to_transaction on a "
    "group coordinator that left the cluster (librdkafka issues 5456 and 5511).",
    "broker",
    in_range(1000),
)
QUEUED_MAX_REQUESTS = define(
    "queued.max.requests",
    int,
    64,
    "Requests one connection may have in flight before the broker stops reading from it (backpressure).",
    "broker",
    in_range(1),
)
FETCH_SESSION_SLOTS = define(
    "max.incremental.fetch.session.cache.slots",
    int,
    1000,
    "Most incremental fetch sessions (KIP-227) the broker keeps; past it the least recently used is "
    "evicted and its consumer starts over with a full fetch. 0 disables fetch sessions.",
    "broker",
    in_range(0),
)
QUEUED_MAX_REQUEST_BYTES = define(
    "queued.max.request.bytes",
    int,
    268435456,
    "Bytes of requests in flight on all connections together before the broker stops reading new "
    "ones (a request larger than this is still served, alone); 0 or less means no limit.",
    "broker",
)
LOG_RETENTION_MS = define(
    "log.retention.ms",
    int,
    604800000,
    "Default `retention.ms` of topics: older batches are trimmed; -1 keeps everything.",
    "broker",
)
LOG_RETENTION_BYTES = define(
    "log.retention.bytes",
    int,
    -1,
    "Default `retention.bytes` of a partition; -1 means no size limit.",
    "broker",
)
RETENTION_CHECK_INTERVAL_MS = define(
    "log.retention.check.interval.ms",
    int,
    300000,
    "How often the retention task looks for partitions to trim.",
    "broker",
    in_range(100),
)
PRODUCER_STATE_SNAPSHOT_INTERVAL_MS = define(
    "producer.state.snapshot.interval.ms",
    int,
    2000,
    "How often idempotent-producer sequence state is written to the metadata database; after a "
    "restart the batches appended since the last snapshot are replayed from the streams.",
    "broker",
    in_range(10),
)
PRODUCER_ID_EXPIRATION_MS = define(
    "producer.id.expiration.ms",
    int,
    86400000,
    "How long the broker remembers the sequence state of an idempotent producer that stopped writing.",
    "broker",
    in_range(1000),
)
SASL_PLAIN_USERS = define(
    "sasl.plain.users",
    list,
    [],
    "Users of SASL/PLAIN on SASL_PLAINTEXT and SASL_SSL listeners, comma separated `user:password` "
    "(SCRAM users, managed with `tabletopic users`, can log in with PLAIN too).",
    "broker",
)
