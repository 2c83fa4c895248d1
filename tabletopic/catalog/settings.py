"""Catalog configuration keys.

The catalog keys are AutoMQ's broker keys so a user can move an AutoMQ ``server.properties`` over
unchanged: ``automq.table.topic.catalog.type`` picks the kind and every other
``automq.table.topic.catalog.*`` key is a catalog property handed to pyiceberg (and, translated where
the names differ, to Spark's Iceberg catalog).
"""

from tabletopic.catalog.backends import CatalogKind, SparkAccess
from tabletopic.config import define, one_of

CATALOG_TYPES = tuple(kind.value for kind in CatalogKind)

CATALOG_TYPE = define(
    "automq.table.topic.catalog.type",
    str,
    CatalogKind.BUILTIN.value,
    "Iceberg catalog the table topics are written to: `builtin` (the REST catalog served by this node "
    "on `catalog.listener`, backed by the metadata database), `rest` (any Iceberg REST catalog), "
    "`hive` (Hive Metastore over thrift), `glue` (AWS Glue) or `sql` (a SQLite/PostgreSQL catalog "
    "database of your own).",
    "catalog",
    one_of(*CATALOG_TYPES),
)
CATALOG_WAREHOUSE = define(
    "automq.table.topic.catalog.warehouse",
    str,
    None,
    "Root location of new tables, e.g. `s3://bucket/iceberg` or `file:///srv/warehouse`. Empty means "
    "`data.dir/warehouse` for the built-in and sql catalogs; a REST catalog may pick its own.",
    "catalog",
)
CATALOG_PROPERTIES = define(
    "automq.table.topic.catalog.*",
    str,
    None,
    "Catalog properties passed through untouched, with pyiceberg's names: `uri`, `prefix`, "
    "`credential`, `token`, `oauth2-server-uri`, `scope`, `rest.sigv4-enabled`, `rest.signing-region`, "
    "`glue.region`, `glue.endpoint`, `glue.id`, `glue.access-key-id`, `s3.endpoint`, "
    "`s3.access-key-id`, `s3.secret-access-key`, `s3.region`, `hive.kerberos-authentication`, ... "
    "Short aliases `region`, `endpoint`, `access-key-id`, `secret-access-key`, `catalog-id` are "
    "accepted for glue.",
    "catalog",
)
CATALOG_NAME = define(
    "catalog.name",
    str,
    "tabletopic",
    "Name of the platform's catalog: the pyiceberg catalog name, the `catalog_name` column of a sql "
    "catalog and the Spark catalog name (Spark's default catalog in `tabletopic sql`).",
    "catalog",
)
CATALOG_LISTENER = define(
    "catalog.listener",
    str,
    "http://127.0.0.1:8181",
    "Where the built-in Iceberg REST catalog listens. It serves the platform's catalog (the metadata "
    "database for `builtin`; the configured catalog for `sql`, `glue` and `hive`) so Spark and other "
    "engines reach it over the REST protocol. Empty disables it (not allowed for `builtin`).",
    "catalog",
)
CATALOG_ADVERTISED_URI = define(
    "catalog.advertised.uri",
    str,
    None,
    "URI other processes use to reach the built-in REST catalog (default: the listener). Set it when "
    "Spark executors on other machines must reach this node.",
    "catalog",
)
CATALOG_SPARK_ACCESS = define(
    "catalog.spark.access",
    str,
    SparkAccess.AUTO.value,
    "How Spark reaches the catalog: `direct` (Spark's own Iceberg catalog of the same type), "
    "`rest` (through the built-in REST catalog) or `auto`: direct for `rest` and `hive`, REST for "
    "`builtin`, `sql` (no JDBC driver jars needed, one commit path) and `glue` (Spark's GlueCatalog "
    "needs AWS SDK v2, which no PyPI package provides).",
    "catalog",
    one_of(*(access.value for access in SparkAccess)),
)
CATALOG_PAGE_SIZE = define(
    "catalog.rest.max.page.size",
    int,
    1000,
    "Largest page the built-in REST catalog returns when listing namespaces or tables.",
    "catalog",
)
