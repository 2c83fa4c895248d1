"""One catalog configuration, two clients: a pyiceberg ``Catalog`` for Python code and the
``spark.sql.catalog.<name>.*`` properties for Spark.

The configuration is AutoMQ's (``automq.table.topic.catalog.type`` plus ``...catalog.*`` pass-through
properties with pyiceberg's names). Spark reaches ``rest`` and ``hive`` catalogs directly with
Iceberg's own Java catalogs; ``builtin``, ``sql`` and ``glue`` catalogs it reaches through the built-in
REST catalog, which fronts the same pyiceberg catalog (see ``catalog.spark.access`` for why). What
differs between the kinds is one table, :data:`~tabletopic.catalog.backends.CATALOG_BACKENDS`; this
module holds what they share.

Object storage: pyiceberg uses its own FileIO with the ``s3.*`` properties; Spark uses Iceberg's
HadoopFileIO over Hadoop's s3a connector (the only S3 client whose jars PyPI carries), configured per
catalog through Iceberg's ``hadoop.*`` catalog-property overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tabletopic.catalog import settings as catalog_settings
from tabletopic.catalog.backends import CatalogBackend, CatalogKind, SparkAccess, backend_for
from tabletopic.config import Config, ConfigError
from tabletopic.http_auth import TOKEN_PATH

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from sqlalchemy.engine import Engine

CATALOG_PREFIX = "automq.table.topic.catalog."
SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
# Where a table topic's table lives unless its automq.table.topic.namespace says otherwise; Spark's
# current namespace in the platform's catalog, so `SELECT * FROM orders` and `SHOW TABLES` find the
# table topics (without it Spark's namespace is empty and both fail: "Invalid namespace").
DEFAULT_NAMESPACE = "default"
HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


@dataclass(frozen=True, slots=True)
class CatalogSpec:
    """The resolved catalog configuration of a node.

    Attributes:
        name: catalog name (pyiceberg name, sql ``catalog_name`` column, Spark catalog name).
        type: the catalog kind.
        warehouse: root location of new tables, or ``None`` to let the catalog decide.
        properties: pass-through properties with pyiceberg's names (no ``type``/``warehouse``).
        spark_access: ``DIRECT`` or ``REST``, already resolved from ``AUTO``.
        rest_uri: where Spark and other engines reach the built-in REST catalog (``None`` if disabled).
        rest_credential: ``user:password`` with which Spark gets a token at that catalog when it
            asks for a login (``authentication.method``): Iceberg's REST ``credential``.
    """

    name: str
    type: CatalogKind
    warehouse: str | None
    properties: dict[str, str] = field(default_factory=dict)
    spark_access: SparkAccess = SparkAccess.REST
    rest_uri: str | None = None
    rest_credential: str | None = field(default=None, repr=False)  # a password: kept out of logs

    @property
    def backend(self) -> CatalogBackend:
        return backend_for(self.type)

    @property
    def fronted_by_rest(self) -> bool:
        """Whether the built-in REST server serves this catalog (it never proxies a REST catalog)."""
        return self.backend.fronted and self.rest_uri is not None

    def with_rest_uri(self, uri: str) -> CatalogSpec:
        """A copy whose built-in REST endpoint is ``uri`` (e.g. an embedded server on a free port)."""
        return replace(self, properties=dict(self.properties), rest_uri=uri)


def default_warehouse(config: Config) -> str:
    """``file://`` URI of ``data.dir/warehouse`` (three slashes: pyiceberg's form, Spark accepts it)."""
    return (config.data_dir / "warehouse").as_uri()


def catalog_spec(config: Config) -> CatalogSpec:
    """Resolve the node's catalog configuration.

    Raises:
        ConfigError: the combination cannot work (e.g. a REST catalog without ``uri``).
    """
    backend = backend_for(config.get(catalog_settings.CATALOG_TYPE))
    kind = backend.kind
    props = {
        key: value
        for key, value in config.prefixed(CATALOG_PREFIX).items()
        if key not in ("type", "warehouse")
    }
    for alias, real in backend.aliases.items():
        if alias in props:
            props.setdefault(real, props.pop(alias))
    warehouse = config.get(catalog_settings.CATALOG_WAREHOUSE) or None
    if warehouse is None and backend.local_warehouse:
        warehouse = default_warehouse(config)
    if warehouse is not None:
        warehouse = normalize_location(warehouse)
    _add_storage_fallback(config, warehouse, props)

    listener = config.get(catalog_settings.CATALOG_LISTENER) or None
    rest_uri = (config.get(catalog_settings.CATALOG_ADVERTISED_URI) or listener) if listener else None
    if rest_uri is not None:
        rest_uri = rest_uri.rstrip("/")
    access = SparkAccess(config.get(catalog_settings.CATALOG_SPARK_ACCESS))
    if access is SparkAccess.AUTO:
        access = backend.default_access

    if backend.uri_required and not props.get("uri"):
        what = " (an SQLAlchemy URL)" if backend.sqlalchemy_uri else ""
        raise ConfigError(f"{CATALOG_PREFIX}uri{what} is required for catalog type {kind}")
    if backend.needs_listener and rest_uri is None:
        raise ConfigError(f"catalog.listener must be set for the {kind} catalog")
    if access is SparkAccess.REST and not backend.fronted:
        access = SparkAccess.DIRECT
    if access is SparkAccess.REST and rest_uri is None:
        raise ConfigError(
            f"Spark reaches a {kind} catalog through the built-in REST catalog: set catalog.listener"
        )
    if access is SparkAccess.DIRECT and backend.spark_direct is None:
        raise ConfigError(f"Spark cannot reach a {kind} catalog directly; use catalog.spark.access=rest")
    return CatalogSpec(
        name=config.get(catalog_settings.CATALOG_NAME),
        type=kind,
        warehouse=warehouse,
        properties=props,
        spark_access=access,
        rest_uri=rest_uri,
    )


def _add_storage_fallback(config: Config, warehouse: str | None, props: dict[str, str]) -> None:
    """An S3 warehouse with no ``s3.*`` catalog properties borrows the node's object-store settings
    (``s3.endpoint``/``s3.access.key``/...), so one S3 configuration serves both storage and tables."""
    if warehouse is None or not is_s3(warehouse) or "s3.endpoint" in props:
        return
    node = config.as_dict()
    mapping = {
        "s3.endpoint": "s3.endpoint",
        "s3.region": "s3.region",
        "s3.access.key": "s3.access-key-id",
        "s3.secret.key": "s3.secret-access-key",
    }
    for node_key, catalog_key in mapping.items():
        value = node.get(node_key)
        if value:
            props.setdefault(catalog_key, str(value))


def is_s3(location: str) -> bool:
    return location.startswith(("s3://", "s3a://", "s3n://"))


def normalize_location(location: str) -> str:
    """Spark writes ``file:/x`` and pyiceberg ``file:///x``; keep the latter, which both read."""
    if location.startswith("file:/") and not location.startswith("file://"):
        return "file://" + location[len("file:") :]
    if location.startswith("/"):
        return "file://" + location
    return location


# --------------------------------------------------------------------------------------------- pyiceberg


def pyiceberg_properties(spec: CatalogSpec) -> dict[str, str]:
    """Properties for ``pyiceberg.catalog.load_catalog`` (type, warehouse and pass-through keys)."""
    props = dict(spec.properties)
    if spec.warehouse is not None:
        props["warehouse"] = spec.warehouse
    if spec.backend.sqlalchemy_uri:
        props["uri"] = sqlalchemy_url(props["uri"])
    return props


def sqlalchemy_url(url: str) -> str:
    """Plain ``postgresql://`` URLs mean psycopg 3 here (the driver we install), not psycopg2."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def create_catalog(spec: CatalogSpec, engine: Engine | None = None) -> Catalog:
    """The pyiceberg catalog for ``spec``, built by its kind's entry in the backend table.

    Args:
        spec: the resolved configuration.
        engine: the metadata database engine; required for ``builtin``, which keeps its tables there.

    Raises:
        ConfigError: ``builtin`` without an engine.
        CatalogUnavailable: the kind's implementation is not installed (the message says what to install).
    """
    return spec.backend.open(spec.name, pyiceberg_properties(spec), engine)


# ------------------------------------------------------------------------------------------------- Spark


def spark_catalog_properties(spec: CatalogSpec) -> dict[str, str]:
    """Iceberg ``SparkCatalog`` properties (relative to ``spark.sql.catalog.<name>.``)."""
    props: dict[str, str] = {
        # The table pipeline commits every few seconds and users expect to see it: no stale cache.
        "cache-enabled": "false",
        "default-namespace": DEFAULT_NAMESPACE,
    }
    if spec.spark_access == SparkAccess.REST:
        if spec.rest_uri is None:
            raise ConfigError("the built-in REST catalog is disabled (catalog.listener is empty)")
        props.update({"type": "rest", "uri": spec.rest_uri})
        if spec.rest_credential is not None:
            # Spark trades the credential for a token at the catalog's own token endpoint; named, as
            # Iceberg's REST client will stop guessing it from the catalog's uri.
            props["credential"] = spec.rest_credential
            props["oauth2-server-uri"] = spec.rest_uri.rstrip("/") + TOKEN_PATH
    else:
        direct = spec.backend.spark_direct
        if direct is None:
            raise ConfigError(f"Spark cannot reach a {spec.type} catalog directly")
        props.update(direct(spec))
    s3 = {k: v for k, v in spec.properties.items() if k.startswith("s3.")}
    if s3 or (spec.warehouse is not None and is_s3(spec.warehouse)):
        props["io-impl"] = HADOOP_FILE_IO
        props.update({f"hadoop.{k}": v for k, v in hadoop_s3a_conf(s3).items()})
    return props


def hadoop_s3a_conf(s3_props: Mapping[str, str]) -> dict[str, str]:
    """Hadoop s3a settings equivalent to pyiceberg's ``s3.*`` FileIO properties.

    ``s3://`` is mapped to S3AFileSystem too, because pyiceberg and most catalogs write ``s3://``
    locations; directory markers are kept (object stores other than AWS mishandle their deletion).
    """
    conf = {
        "fs.s3.impl": S3A_FILESYSTEM,
        "fs.s3a.impl": S3A_FILESYSTEM,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.directory.marker.retention": "keep",
    }
    endpoint = s3_props.get("s3.endpoint")
    if endpoint:
        conf["fs.s3a.endpoint"] = endpoint
        conf["fs.s3a.connection.ssl.enabled"] = str(endpoint.startswith("https")).lower()
    if s3_props.get("s3.force-virtual-addressing", "false").lower() == "true":
        conf["fs.s3a.path.style.access"] = "false"
    if "s3.path-style-access" in s3_props:
        conf["fs.s3a.path.style.access"] = s3_props["s3.path-style-access"].lower()
    if s3_props.get("s3.region"):
        conf["fs.s3a.endpoint.region"] = s3_props["s3.region"]
    if s3_props.get("s3.access-key-id"):
        conf["fs.s3a.access.key"] = s3_props["s3.access-key-id"]
        conf["fs.s3a.secret.key"] = s3_props.get("s3.secret-access-key", "")
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if s3_props.get("s3.session-token"):
            conf["fs.s3a.session.token"] = s3_props["s3.session-token"]
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        conf["fs.s3a.aws.credentials.provider"] = provider
    return conf


def spark_catalog_conf(name: str, properties: Mapping[str, str]) -> dict[str, str]:
    """Full Spark configuration entries registering catalog ``name`` with ``properties``."""
    conf = {f"spark.sql.catalog.{name}": SPARK_CATALOG_CLASS}
    conf.update({f"spark.sql.catalog.{name}.{key}": value for key, value in properties.items()})
    return conf


def needs_s3a(properties: Mapping[str, Any]) -> bool:
    """Whether a catalog's Spark properties use Hadoop's s3a connector."""
    return any(key.startswith("hadoop.fs.s3a.") for key in properties)
