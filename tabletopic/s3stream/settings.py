"""Configuration keys of the storage engine (object store, WAL, caches, upload, compaction).

The ``s3.*`` keys describe the S3 bucket shared with the table pipeline; ``s3stream.*`` keys tune
the engine. Sizes are bytes, durations milliseconds.
"""

from enum import StrEnum

from tabletopic.config import define, in_range, one_of

GROUP = "storage"
MiB = 1024 * 1024


class ObjectStoreKind(StrEnum):
    """Values of ``s3stream.object.store`` (``auto`` resolves to one of the others) and of the
    ``kind`` of an :data:`~tabletopic.s3stream.objectstore.ObjectStoreSpec`."""

    AUTO = "auto"
    LOCAL = "local"
    S3 = "s3"


class WalMode(StrEnum):
    """Values of ``s3stream.wal.mode``: where an append is made durable before it is acknowledged."""

    LOCAL = "local"  # an fsynced WAL file on local disk; uploaded later
    OBJECT = "object"  # a batch object stored and committed (stateless node)
    SHARED = "shared"  # the local WAL's format on a path every broker reaches; taken over on failure


OBJECT_STORE = define(
    "s3stream.object.store",
    str,
    ObjectStoreKind.AUTO.value,
    "Where objects live: `local` (a directory, see s3stream.object.dir), `s3` (the s3.* bucket) or "
    "`auto` (s3 when s3.bucket is set, otherwise local).",
    GROUP,
    one_of(*ObjectStoreKind),
)
OBJECT_DIR = define(
    "s3stream.object.dir",
    str,
    None,
    "Directory of the local object store. Empty means `objects` under data.dir.",
    GROUP,
)
S3_ENDPOINT = define("s3.endpoint", str, None, "S3 endpoint URL (empty: AWS's default for s3.region).", GROUP)
S3_BUCKET = define("s3.bucket", str, None, "S3 bucket holding stream objects.", GROUP)
S3_REGION = define("s3.region", str, "us-east-1", "S3 region.", GROUP)
S3_ACCESS_KEY = define(
    "s3.access.key", str, None, "S3 access key id (empty: boto3's default credential chain).", GROUP
)
S3_SECRET_KEY = define("s3.secret.key", str, None, "S3 secret access key.", GROUP)
S3_PATH_STYLE = define(
    "s3.path.style",
    bool,
    False,
    "Address the bucket in the path (http://host/bucket/key) instead of the host name; needed by "
    "most self-hosted S3 servers.",
    GROUP,
)
S3_PREFIX = define(
    "s3.prefix", str, "", "Key prefix for every object this node writes (e.g. `cluster-a/`).", GROUP
)
OBJECT_RETRIES = define(
    "s3stream.object.retries",
    int,
    6,
    "Attempts per object-store request on transient errors (timeouts, 5xx, throttling), with "
    "exponential backoff. Authentication and missing-bucket errors fail at once.",
    GROUP,
    in_range(1, 100),
)
OBJECT_THREADS = define(
    "s3stream.object.threads",
    int,
    8,
    "Threads running blocking object-store requests (the event loop never blocks on them).",
    GROUP,
    in_range(1, 256),
)
MULTIPART_THRESHOLD = define(
    "s3stream.object.multipart.threshold",
    int,
    32 * MiB,
    "Objects at least this large are uploaded to S3 in parts.",
    GROUP,
    in_range(5 * MiB),
)
MULTIPART_PART_SIZE = define(
    "s3stream.object.multipart.part.size",
    int,
    16 * MiB,
    "Part size of multipart uploads (S3 requires at least 5 MiB).",
    GROUP,
    in_range(5 * MiB),
)

WAL_MODE = define(
    "s3stream.wal.mode",
    str,
    WalMode.LOCAL.value,
    "`local`: appends are acknowledged after an fsync of a WAL file on local disk and uploaded "
    "later. `object`: appends of all streams are batched into shared objects, each started as soon "
    "as the upload before it ends, and acknowledged once theirs is stored and indexed (stateless "
    "node). `shared`: as `local`, but in a "
    "directory under s3stream.wal.path that every broker can reach (NFS/EFS/FSx, a multi-attach "
    "disk), so that a live broker takes the WAL over when this one dies (cluster mode).",
    GROUP,
    one_of(*WalMode),
)
WAL_DIR = define(
    "s3stream.wal.dir", str, None, "Directory of the local WAL. Empty: `wal` under data.dir.", GROUP
)
WAL_PATH = define(
    "s3stream.wal.path",
    str,
    None,
    "Shared WAL (s3stream.wal.mode=shared): a directory every broker of the cluster can reach; each "
    "broker writes its WAL in the subdirectory named by its broker.id. Empty: `shared-wal` under "
    "data.dir (only right for brokers that share one data.dir). `tabletopic cluster up` sets it.",
    GROUP,
)
WAL_SEGMENT_BYTES = define(
    "s3stream.wal.segment.bytes",
    int,
    64 * MiB,
    "Size a local WAL segment file is preallocated to; a segment is closed at this size (and at each "
    "upload) and reused once its data is in object storage. Disk use: the WAL's data rounded up to "
    "segments, plus one segment opened ahead and up to two spares.",
    GROUP,
    in_range(1 * MiB),
)
WAL_CAPACITY_BYTES = define(
    "s3stream.wal.capacity.bytes",
    int,
    1024 * MiB,
    "Most bytes the local WAL may hold before appends wait for uploads to free space.",
    GROUP,
    in_range(4 * MiB),
)
WAL_OBJECT_BATCH_MS = define(
    "s3stream.wal.object.batch.ms",
    int,
    5,
    "Object WAL: least time between the starts of two batch objects. A batch object starts as soon "
    "as an upload slot is free (see `s3stream.wal.object.max.in.flight.uploads`) and this long after "
    "the previous one started, holding every append that arrived meanwhile. The ceiling of an "
    "append's wait for its batch to start while a slot is free, and the cost knob: at most "
    "1000 / this many uploads (object PUTs) per second per broker.",
    GROUP,
    in_range(0),
)
WAL_OBJECT_BATCH_BYTES = define(
    "s3stream.wal.object.batch.bytes",
    int,
    8 * MiB,
    "Object WAL: a batch object is closed at this many bytes; it is written as soon as an upload "
    "slot is free.",
    GROUP,
    in_range(1024),
)
WAL_OBJECT_MAX_IN_FLIGHT = define(
    "s3stream.wal.object.max.in.flight.uploads",
    int,
    1,
    "Object WAL: most batch objects being PUT and committed at once; appends arriving while every "
    "slot is busy wait and form the next batch object (group commit). Commits, and so "
    "acknowledgements, stay in offset order. 1 suits a store whose PUT is about as fast as the "
    "metadata commit (SeaweedFS, MinIO, S3 Express One Zone); raise it (2-4) where the PUT's own "
    "latency dominates (S3 Standard): the next PUTs then overlap it, at the cost of more, smaller "
    "objects.",
    GROUP,
    in_range(1, 64),
)
UPLOAD_INTERVAL_MS = define(
    "s3stream.upload.interval.ms",
    int,
    10_000,
    "Local WAL: data is uploaded to object storage at least this often.",
    GROUP,
    in_range(10),
)
UPLOAD_BYTES = define(
    "s3stream.upload.bytes",
    int,
    64 * MiB,
    "Local WAL: data is uploaded as soon as this many bytes are waiting.",
    GROUP,
    in_range(1024),
)
STREAM_SPLIT_BYTES = define(
    "s3stream.stream.object.split.bytes",
    int,
    16 * MiB,
    "A stream with at least this many bytes in one upload or compaction gets its own stream object "
    "instead of a share of a stream-set object.",
    GROUP,
    in_range(1024),
)
BLOCK_BYTES = define(
    "s3stream.object.block.bytes",
    int,
    1 * MiB,
    "Target size of a data block inside an object: the unit of range reads and the block cache.",
    GROUP,
    in_range(4096),
)
LOG_CACHE_BYTES = define(
    "s3stream.log.cache.bytes",
    int,
    256 * MiB,
    "Memory for recent appends, so that tail reads never touch object storage.",
    GROUP,
    in_range(1 * MiB),
)
BLOCK_CACHE_BYTES = define(
    "s3stream.block.cache.bytes",
    int,
    128 * MiB,
    "Memory for blocks read from objects.",
    GROUP,
    in_range(1 * MiB),
)
READAHEAD_BYTES = define(
    "s3stream.block.cache.readahead.bytes",
    int,
    4 * MiB,
    "A cold read fetches at least this many bytes of the stream in one range request.",
    GROUP,
    in_range(0),
)
APPEND_TIMEOUT_MS = define(
    "s3stream.append.timeout.ms",
    int,
    30_000,
    "Longest an append waits for WAL space or an acknowledgement before StorageUnavailable.",
    GROUP,
    in_range(100),
)
COMPACTION_INTERVAL_MS = define(
    "s3stream.compaction.interval.ms",
    int,
    60_000,
    "How often background compaction looks for work. 0 disables it.",
    GROUP,
    in_range(0),
)
COMPACTION_RATE = define(
    "s3stream.compaction.rate.bytes.per.second",
    int,
    64 * MiB,
    "Compaction reads and writes at most this many bytes per second.",
    GROUP,
    in_range(1024),
)
COMPACTION_SMALL_OBJECT_BYTES = define(
    "s3stream.compaction.small.object.bytes",
    int,
    32 * MiB,
    "Objects smaller than this are merged with their neighbours, size-tiered: one joins a merge once "
    "the others hold as much live data as it does.",
    GROUP,
    in_range(1024),
)
COMPACTION_MAX_OBJECT_BYTES = define(
    "s3stream.compaction.max.object.bytes",
    int,
    256 * MiB,
    "Compaction writes objects of at most about this size.",
    GROUP,
    in_range(1024),
)
DELETE_GRACE_MS = define(
    "s3stream.object.delete.grace.ms",
    int,
    120_000,
    "Objects replaced by compaction (and orphans of interrupted uploads) are deleted this long "
    "after they stop being referenced, so that reads already under way can finish.",
    GROUP,
    in_range(0),
)
