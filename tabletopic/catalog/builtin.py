"""The built-in catalog's storage: pyiceberg's ``SqlCatalog`` tables inside tabletopic's metadata
database, reached through the node's own SQLAlchemy engine.

Sharing the engine (rather than letting pyiceberg open a second one on the same URL) keeps the
metadata database's SQLite settings — WAL, busy timeout, ``BEGIN IMMEDIATE`` — in force for catalog
commits too, so two commits to one table serialise in the database and the loser sees a
``CommitFailedException`` instead of "database is locked". The two tables are created by a
metadata migration like every other subsystem's; their layout is pyiceberg's (and Iceberg Java's
JdbcCatalog's), so other tools can read the same database.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.sql import IcebergNamespaceProperties, IcebergTables, SqlCatalog
from sqlalchemy.engine import Engine

from tabletopic import database

MIGRATIONS: list[database.Migration] = [
    database.create_tables(IcebergTables.__table__, IcebergNamespaceProperties.__table__),  # type: ignore[arg-type]
]


class EngineSqlCatalog(SqlCatalog):
    """``SqlCatalog`` over an existing engine.

    pyiceberg's constructor always builds its own engine from ``uri``; this one takes the node's, then
    runs pyiceberg's own schema-version detection so the catalog behaves exactly like upstream's.
    """

    def __init__(
        self, name: str, engine: Engine, properties: Mapping[str, str], owns_engine: bool = False
    ) -> None:
        MetastoreCatalog.__init__(self, name, **properties)
        self.engine = engine
        self._owns_engine = owns_engine
        self._init_catalog()

    def close(self) -> None:
        """Dispose of the engine only if this catalog created it (the metadata engine is the platform's)."""
        if self._owns_engine:
            self.engine.dispose()


def open_builtin_catalog(name: str, engine: Engine, properties: dict[str, Any]) -> EngineSqlCatalog:
    """The built-in catalog on the metadata database, migrating its tables first."""
    database.migrate(engine, "catalog", MIGRATIONS)
    props = {k: str(v) for k, v in properties.items() if k != "uri"}
    props["uri"] = str(engine.url.render_as_string(hide_password=False))
    props.setdefault("init_catalog_tables", "false")
    return EngineSqlCatalog(name, engine, props)


def open_sql_catalog(name: str, properties: dict[str, Any]) -> EngineSqlCatalog:
    """A ``sql`` catalog on the user's own database, with the same engine settings as the metadata DB."""
    engine = database.create_engine(str(properties["uri"]))
    database.migrate(engine, "catalog", MIGRATIONS)
    props = {k: str(v) for k, v in properties.items()}
    props.setdefault("init_catalog_tables", "false")
    return EngineSqlCatalog(name, engine, props, owns_engine=True)
