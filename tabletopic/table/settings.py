"""Broker-level keys of the table-topic pipeline (topic-level keys live in ``table_config.py``)."""

from enum import StrEnum

from tabletopic.config import define, in_range, one_of


class JobRunnerKind(StrEnum):
    """Where ingest jobs run (``table.job.runner``)."""

    SPARK = "spark"
    INPROCESS = "inprocess"


SCHEMA_REGISTRY_URL = define(
    "automq.table.topic.schema.registry.url",
    str,
    None,
    "Schema registry the table pipeline decodes schema-typed topics with. Empty means this node's "
    "built-in registry (`schema.registry.listener`).",
    "table topics",
)
RUNNER = define(
    "table.job.runner",
    str,
    "spark",
    "Where ingest jobs run: `spark` (the node's Spark session, `spark.master`) or `inprocess` (in the "
    "broker process without Spark; for tiny deployments and tests).",
    "table topics",
    one_of(*JobRunnerKind),
)
POLL_INTERVAL_MS = define(
    "table.coordinator.poll.interval.ms",
    int,
    1000,
    "How often the table coordinator looks for table topics that are due (commit interval elapsed or "
    "size threshold crossed).",
    "table topics",
    in_range(10, 60_000),
)
NATIVE_DECODE = define(
    "table.job.native.decode",
    bool,
    True,
    "Decode Avro, Protobuf and JSON Schema values a whole column at a time in native code "
    "(DataFusion's Avro reader, ptars, Arrow's JSON reader) instead of one record at a time; a chunk "
    "that fails or misaligns is decoded per record. Turn off to decode per record only (stricter: an "
    "Avro union branch index out of range in a datum of the right length fails that record instead "
    "of reading as a branch).",
    "table topics",
)
MAX_TASK_BYTES = define(
    "table.job.max.task.bytes",
    int,
    64 * 1024 * 1024,
    "Bounds the memory of an ingest task: ranges are cut into work items of at most this many stored "
    "bytes, a task decodes them a quarter of this at a time (at least 256 KiB), and once the decoded "
    "rows it holds pass this many bytes it writes them out as a data file and drops them. A task "
    "holds at most one object slice of raw bytes, one chunk being decoded and this many bytes of "
    "rows (rows whose schema the table cannot hold yet are the exception: the job reports it).",
    "table topics",
    in_range(1024, 1 << 34),
)
UPSERT_KEY_CACHE_BYTES = define(
    "table.upsert.key.cache.bytes",
    int,
    256 * 1024 * 1024,
    "Memory for the keys of upsert/CDC tables' data files (and their position deletes), kept between "
    "commits so a commit reads only the key columns of files it has not seen yet; least recently "
    "used files are dropped first. About 16 bytes per row of an integer key. 0 reads every key "
    "column at every commit.",
    "table topics",
    in_range(0, 1 << 40),
)
UPSERT_MAX_CYCLE_BYTES = define(
    "table.upsert.max.cycle.bytes",
    int,
    128 * 1024 * 1024,
    "Stored bytes of records one commit of an upsert/CDC table takes at most (at least one work item, "
    "so at most `table.job.max.task.bytes` more): the coordinator reads the whole batch's rows to keep "
    "each key's latest, so this bounds its memory. A longer backlog (a first catch-up) is committed "
    "over several cycles, each starting as soon as the previous one committed.",
    "table topics",
    in_range(1, 1 << 40),
)
LOCAL_MAX_BYTES = define(
    "table.job.local.max.bytes",
    int,
    32 * 1024 * 1024,
    "With the `spark` runner, ingest jobs whose work items hold at most this many stored bytes run "
    "in a warm helper Python process of the node instead of as a Spark job (whose fixed cost, about "
    "0.5 s, is most of a short commit interval's cycle); larger jobs run on Spark. 0 sends every job "
    "to Spark. The helper costs about 200 MB of memory once a table topic exists.",
    "table topics",
    in_range(0, 1 << 40),
)
MAX_TASKS = define(
    "table.job.max.tasks",
    int,
    0,
    "Upper bound on the Spark tasks of one ingest job (0: one per core of the Spark session, "
    "`defaultParallelism`). Each task gets a share of the job's work items of about equal stored "
    "bytes (large items cut at object-slice boundaries) and converts them one after the other.",
    "table topics",
    in_range(0, 100_000),
)
LEASE_TTL_MS = define(
    "table.coordinator.lease.ms",
    int,
    30_000,
    "How long a node's claim on a topic's coordinator role lasts without renewal; another node takes "
    "over (with a higher epoch) only after it expired.",
    "table topics",
    in_range(1000, 3_600_000),
)
COMPACTION_INTERVAL_MS = define(
    "table.compaction.interval.ms",
    int,
    3_600_000,
    "How often small data files of each table are rewritten into larger ones with Spark's "
    "`rewrite_data_files` (0 disables). Needs the Spark runner.",
    "table topics",
    in_range(0, 7 * 86_400_000),
)
MAX_CONCURRENT_JOBS = define(
    "table.coordinator.max.concurrent.jobs",
    int,
    2,
    "How many table topics may run an ingest job at the same time (each job uses the Spark session's "
    "cores; more topics queue for a slot).",
    "table topics",
    in_range(1, 64),
)
DELETE_MERGE_INTERVAL_MS = define(
    "table.delete.merge.interval.ms",
    int,
    3_600_000,
    "How often the position-delete files of each upsert/CDC table are merged into fewer with Spark's "
    "`rewrite_position_delete_files` (0 disables). Needs the Spark runner.",
    "table topics",
    in_range(0, 7 * 86_400_000),
)
ORPHAN_CLEANUP_INTERVAL_MS = define(
    "table.orphan.cleanup.interval.ms",
    int,
    86_400_000,
    "How often files under each table's location that no snapshot references (left by killed or "
    "re-planned jobs) are removed with Spark's `remove_orphan_files` (0 disables). Needs the Spark runner.",
    "table topics",
    in_range(0, 30 * 86_400_000),
)
ORPHAN_MIN_AGE_MS = define(
    "table.orphan.min.age.ms",
    int,
    3 * 86_400_000,
    "Files younger than this are never removed as orphans (a job or MERGE may still be writing them).",
    "table topics",
    in_range(3_600_000, 365 * 86_400_000),
)
SCHEMA_VALIDATION_REFRESH_MS = define(
    "schema.validation.refresh.ms",
    int,
    1000,
    "Broker-side schema validation (topic configs `confluent.value.schema.validation`, "
    "`confluent.key.schema.validation`): how old the broker's cached subjects of a schema id must be "
    "before a record refused for its subject makes it read the registry again. Schemas themselves are "
    "cached by id for good (an id's schema never changes).",
    "schema registry",
    in_range(0, 3_600_000),
)
