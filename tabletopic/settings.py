"""Platform-wide configuration keys (those not owned by one subsystem)."""

from tabletopic.config import DEFAULT_DATA_DIR, define, http_url, one_of

DATA_DIR = define(
    "data.dir",
    str,
    DEFAULT_DATA_DIR,
    "Directory for everything a node keeps locally: the WAL, the local object store, the SQLite "
    "metadata database and the default Iceberg warehouse.",
    "platform",
)
METADATA_URL = define(
    "metadata.url",
    str,
    None,
    "SQLAlchemy URL of the metadata database shared by storage, broker, registry and catalog. "
    "Empty means a SQLite file `metadata.db` in `data.dir`; use `postgresql+psycopg://user:pw@host/db` "
    "to let several brokers share one database.",
    "platform",
)
LOG_LEVEL = define(
    "log.level",
    str,
    "INFO",
    "Log level of the server process: DEBUG, INFO, WARNING or ERROR.",
    "platform",
    one_of("DEBUG", "INFO", "WARNING", "ERROR"),
)
ADMIN_LISTENER = define(
    "admin.listener",
    str,
    "http://127.0.0.1:8080",
    "Where the admin HTTP API (`/health`, `/metrics`, `/v1/...`) listens. Empty disables it.",
    "platform",
)
ADMIN_ADVERTISED_URI = define(
    "admin.advertised.uri",
    str,
    None,
    "URL other brokers and people's browsers use to reach this node's admin API and console in a "
    "cluster (default: `admin.listener`, a wildcard host replaced by the host advertised to Kafka "
    "clients). Set it when that is not where they reach it: a container's port mapping, a load "
    "balancer, TLS ended in front.",
    "platform",
    http_url,
)
