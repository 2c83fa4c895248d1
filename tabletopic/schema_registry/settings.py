"""Configuration keys of the schema registry (declared once; documented by ``tabletopic config docs``)."""

from tabletopic.config import define, in_range, one_of
from tabletopic.schema_registry.compatibility import CompatibilityLevel

GROUP = "schema registry"

LISTENER = define(
    "schema.registry.listener",
    str,
    "http://127.0.0.1:8081",
    "Where the Confluent-compatible schema registry REST API listens. Empty disables the HTTP API; the "
    "in-process lookup used by the table pipeline keeps working.",
    GROUP,
)
MAX_REQUEST_BYTES = define(
    "schema.registry.max.request.bytes",
    int,
    8 * 1024 * 1024,
    "Largest request body the registry accepts; bigger bodies are refused with HTTP 413 before they "
    "are read, so one client cannot make the node buffer arbitrary amounts of memory.",
    GROUP,
    in_range(1024, 1024 * 1024 * 1024),
)
DEFAULT_COMPATIBILITY = define(
    "schema.registry.compatibility.level",
    str,
    CompatibilityLevel.BACKWARD.value,
    "Global compatibility level used until one is stored with `PUT /config` (Confluent's "
    "`schema.compatibility.level`).",
    GROUP,
    one_of(*(level.value for level in CompatibilityLevel)),
)
LATEST_TTL_MS = define(
    "schema.registry.lookup.latest.ttl.ms",
    int,
    1000,
    "How long the in-process lookup used by the table pipeline caches the latest version of a subject. "
    "Schemas by id never change and are cached until evicted by size.",
    GROUP,
    in_range(0),
)
CACHE_MAX_ENTRIES = define(
    "schema.registry.lookup.cache.max.entries",
    int,
    10000,
    "Schemas kept by the in-process lookup (least recently used evicted first).",
    GROUP,
    in_range(1),
)
PARSED_CACHE_MAX_ENTRIES = define(
    "schema.registry.parsed.cache.max.entries",
    int,
    2000,
    "Parsed schemas the registry keeps for compatibility checks, so registering version N does not "
    "re-parse versions 1..N-1.",
    GROUP,
    in_range(1),
)
SQLITE_SYNCHRONOUS = define(
    "schema.registry.sqlite.synchronous",
    str,
    "NORMAL",
    "How durable a registration is before it is acknowledged, when the metadata database is SQLite "
    "(its `PRAGMA synchronous` for the registry's writes). `NORMAL`: the commit is handed to the "
    "operating system without waiting for the disk, so an acknowledged id survives the process being "
    "killed or crashing, but a power cut or kernel crash may lose the last registrations (the database "
    "stays consistent; Confluent's registry, storing schemas in a Kafka topic that is not fsynced, "
    "makes the same trade). `FULL`: every registration waits for an fsync (survives a power cut; "
    "sequential registrations are then bounded by the disk, typically 100-200/s). PostgreSQL metadata "
    "databases follow the server's own `synchronous_commit`.",
    GROUP,
    one_of("NORMAL", "FULL"),
)
