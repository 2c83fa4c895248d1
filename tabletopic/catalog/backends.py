"""The catalog kinds and, in one table, everything that differs between them.

Each kind of ``automq.table.topic.catalog.type`` has one :class:`CatalogBackend` in
:data:`CATALOG_BACKENDS`: how its pyiceberg catalog is built, whether Spark can use Iceberg's own Java
catalog of that type or must go through the built-in REST catalog, which properties it requires, and
which module implements it. That module is imported only when a catalog of the kind is opened, so a
node without, say, the Hive thrift client still runs with any other catalog, and one configured for
Hive says what to install instead of failing with a bare ``ImportError``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Protocol

from tabletopic.config import ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from sqlalchemy.engine import Engine


class CatalogProperties(Protocol):
    """What a kind's Spark properties are made from: the resolved catalog configuration
    (:class:`~tabletopic.catalog.adapters.CatalogSpec`, which itself looks its kind up here)."""

    @property
    def type(self) -> CatalogKind: ...

    @property
    def warehouse(self) -> str | None: ...

    @property
    def properties(self) -> Mapping[str, str]: ...


class CatalogKind(StrEnum):
    """``automq.table.topic.catalog.type`` (the values are the configuration's spelling)."""

    BUILTIN = "builtin"
    REST = "rest"
    HIVE = "hive"
    GLUE = "glue"
    SQL = "sql"


class SparkAccess(StrEnum):
    """``catalog.spark.access``: how Spark reaches the catalog; ``AUTO`` is resolved per kind."""

    AUTO = "auto"
    DIRECT = "direct"
    REST = "rest"


class CatalogUnavailable(ConfigError):
    """The configured catalog kind's implementation cannot be imported on this node."""


# Short names a user may give a Glue catalog, and the pyiceberg property each one means.
GLUE_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "region": "glue.region",
        "endpoint": "glue.endpoint",
        "access-key-id": "glue.access-key-id",
        "secret-access-key": "glue.secret-access-key",
        "session-token": "glue.session-token",
        "catalog-id": "glue.id",
        "profile-name": "glue.profile-name",
    }
)

# Keys that only make sense to pyiceberg; never handed to Spark.
PYTHON_ONLY = ("py-io-impl", "downcast-ns-timestamp-to-us-on-write", "echo", "pool_pre_ping")

# (the backend's module, catalog name, pyiceberg properties, metadata engine) -> the catalog.
Builder = Callable[[ModuleType, str, dict[str, str], "Engine | None"], "Catalog"]


@dataclass(frozen=True, slots=True)
class CatalogBackend:
    """What one catalog kind needs and allows.

    Attributes:
        kind: the kind this entry describes.
        module: the module implementing the pyiceberg catalog, imported when one is opened.
        install: what provides ``module`` (named in the error when it cannot be imported).
        build: builds the pyiceberg catalog from the imported ``module``.
        spark_direct: Spark's own catalog properties for the kind, or ``None`` when Spark has no usable
            Iceberg Java catalog of that type and must go through the built-in REST catalog (which is
            also what ``catalog.spark.access=auto`` picks for those kinds).
        fronted: the built-in REST catalog may serve it (never for a REST catalog: it is not proxied).
        needs_listener: only this node can serve it, so other engines need the built-in REST endpoint.
        uri_required: the ``uri`` catalog property must be set.
        sqlalchemy_uri: ``uri`` is an SQLAlchemy URL (plain ``postgresql://`` then means psycopg 3).
        local_warehouse: with no warehouse configured, tables go under ``data.dir/warehouse``.
        aliases: short property names accepted for pyiceberg's names.
    """

    kind: CatalogKind
    module: str
    install: str
    build: Builder
    spark_direct: Callable[[CatalogProperties], dict[str, str]] | None = None
    fronted: bool = True
    needs_listener: bool = False
    uri_required: bool = False
    sqlalchemy_uri: bool = False
    local_warehouse: bool = False
    aliases: Mapping[str, str] = field(default_factory=dict)

    @property
    def default_access(self) -> SparkAccess:
        """What ``catalog.spark.access=auto`` means for this kind."""
        return SparkAccess.DIRECT if self.spark_direct is not None else SparkAccess.REST

    def open(self, name: str, properties: dict[str, str], engine: Engine | None) -> Catalog:
        """The pyiceberg catalog, importing the kind's implementation now.

        Raises:
            CatalogUnavailable: the implementation (or a library it needs) is not installed.
        """
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:
            raise CatalogUnavailable(
                f"the {self.kind} catalog is not available on this node ({exc}); install {self.install}"
            ) from exc
        return self.build(module, name, properties, engine)


def native_spark_properties(spec: CatalogProperties) -> dict[str, str]:
    """Properties of Iceberg's Java catalog of the spec's own type (Spark talks to the catalog itself).

    Object-storage keys are left out: Spark's FileIO is configured from them separately.
    """
    props = {"type": str(spec.type)}
    props.update({k: v for k, v in spec.properties.items() if not k.startswith(("s3.", *PYTHON_ONLY))})
    if spec.warehouse is not None:
        props["warehouse"] = spec.warehouse
    return props


def _builtin(module: ModuleType, name: str, properties: dict[str, str], engine: Engine | None) -> Catalog:
    if engine is None:
        raise ConfigError("the builtin catalog needs the metadata database engine")
    catalog: Catalog = module.open_builtin_catalog(name, engine, properties)
    return catalog


def _sql(module: ModuleType, name: str, properties: dict[str, str], _engine: Engine | None) -> Catalog:
    catalog: Catalog = module.open_sql_catalog(name, properties)
    return catalog


def _pyiceberg_class(attribute: str) -> Builder:
    """A builder calling pyiceberg's catalog class ``attribute`` as ``Class(name, **properties)``."""

    def build(module: ModuleType, name: str, properties: dict[str, str], _engine: Engine | None) -> Catalog:
        catalog: Catalog = getattr(module, attribute)(name, **properties)
        return catalog

    return build


_BACKENDS = (
    CatalogBackend(
        CatalogKind.BUILTIN, "tabletopic.catalog.builtin", "pyiceberg[sql-sqlite]", _builtin,
        needs_listener=True, local_warehouse=True,
    ),
    CatalogBackend(
        CatalogKind.REST, "pyiceberg.catalog.rest", "pyiceberg", _pyiceberg_class("RestCatalog"),
        spark_direct=native_spark_properties, fronted=False, uri_required=True,
    ),
    CatalogBackend(
        CatalogKind.HIVE, "pyiceberg.catalog.hive", "pyiceberg[hive]", _pyiceberg_class("HiveCatalog"),
        spark_direct=native_spark_properties, uri_required=True,
    ),
    # Spark's GlueCatalog needs AWS SDK v2, which no PyPI package provides: REST only.
    CatalogBackend(
        CatalogKind.GLUE, "pyiceberg.catalog.glue", "pyiceberg[glue]", _pyiceberg_class("GlueCatalog"),
        aliases=GLUE_ALIASES,
    ),
    # Spark's JdbcCatalog would need JDBC driver jars and a second commit implementation: REST only.
    CatalogBackend(
        CatalogKind.SQL, "tabletopic.catalog.builtin", "pyiceberg[sql-sqlite] or [sql-postgres]", _sql,
        uri_required=True, sqlalchemy_uri=True, local_warehouse=True,
    ),
)  # fmt: skip
CATALOG_BACKENDS: Mapping[CatalogKind, CatalogBackend] = MappingProxyType({b.kind: b for b in _BACKENDS})


def backend_for(kind: str) -> CatalogBackend:
    """The table entry of ``kind`` (a :class:`CatalogKind` or its configuration spelling).

    Raises:
        ConfigError: not a catalog kind.
    """
    try:
        return CATALOG_BACKENDS[CatalogKind(kind)]
    except ValueError:
        raise ConfigError(f"unknown catalog type {kind}") from None
