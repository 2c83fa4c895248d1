"""The embedded SQL engine's statement rewriting: references to catalog tables are quoted (DuckDB
reserves ``default``) outside string literals, and the tables a statement names are found."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from tabletopic.table.ops.duck import DuckSession


def _orders(tmp_path: Path) -> tuple[DuckSession, Table]:
    """A session over a catalog holding ``default.orders`` with ids 1, 2 and 3."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("default")
    table = catalog.create_table("default.orders", schema=pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return DuckSession(catalog), table


def test_statements_name_catalog_tables_quoted_and_run_on_fresh_scans(tmp_path: Path) -> None:
    session, table = _orders(tmp_path)
    text, named = session.rewrite("SELECT 'default.orders' AS s, sum(id) FROM default.orders")
    assert text == 'SELECT \'default.orders\' AS s, sum(id) FROM "default"."orders"'
    assert named == [("default", "orders")]
    columns, rows = session.execute("SELECT sum(id) AS total FROM DEFAULT.orders")
    assert columns == ["total"] and list(rows) == [(6,)]
    table.append(pa.table({"id": pa.array([4], pa.int64())}))
    assert list(session.execute("SELECT count(*) FROM default.orders")[1]) == [(4,)]
    session.close()


def test_a_bare_table_name_after_from_or_join_is_the_default_namespaces_as_in_spark(tmp_path: Path) -> None:
    session, _ = _orders(tmp_path)
    text, named = session.rewrite("SELECT o.id AS orders FROM orders o JOIN\n  orders p ON o.id = p.id")
    assert (
        text == 'SELECT o.id AS orders FROM "default"."orders" o JOIN\n  "default"."orders" p ON o.id = p.id'
    )
    assert named == [("default", "orders")]
    assert list(session.execute("SELECT count(*) FROM orders")[1]) == [(3,)]
    # A CTE of that name is the statement's own, and a literal is left as it is.
    cte = "WITH orders AS (SELECT 7 AS id) SELECT id, 'FROM orders' FROM orders"
    assert session.rewrite(cte) == (cte, [])
    assert list(session.execute(cte)[1]) == [(7, "FROM orders")]
    session.close()


def test_show_tables_lists_the_catalogs_tables_of_the_default_namespace_or_the_one_named(
    tmp_path: Path,
) -> None:
    session, _ = _orders(tmp_path)
    assert session.execute("show tables;")[0] == ["namespace", "tableName"]
    assert list(session.execute("SHOW TABLES")[1]) == [("default", "orders")]
    assert list(session.execute('SHOW TABLES IN "default"')[1]) == [("default", "orders")]
    assert list(session.execute("SHOW TABLES FROM shop")[1]) == []
    session.close()


def test_a_table_the_catalog_lacks_is_named_in_words_not_as_duckdbs_parse_or_schema_error(
    tmp_path: Path,
) -> None:
    """``default`` is reserved in DuckDB: before the namespace's first table (a table topic queried
    before its first commit) it was left unquoted and DuckDB failed to parse the statement; in a
    known namespace DuckDB said the schema did not exist."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    session = DuckSession(catalog)  # no namespace, no table yet
    text, named = session.rewrite("SELECT * FROM default.clicks WHERE note = 'default.x'")
    assert text == "SELECT * FROM \"default\".clicks WHERE note = 'default.x'" and named == []
    with pytest.raises(LookupError, match=r"no table default\.clicks in the catalog.*first commit"):
        session.execute("SELECT * FROM default.clicks")
    session.close()

    session, _ = _orders(tmp_path)
    with pytest.raises(LookupError, match=r"no table default\.ordres, default\.my-topic in the catalog"):
        session.execute('SELECT * FROM default.ordres JOIN default."my-topic" USING (id)')
    assert list(session.execute('SELECT count(*) FROM "default"."orders"')[1]) == [(3,)]
    # Only what a statement reads is looked up: a column of an alias named like a namespace is not.
    assert session.missing('SELECT "default".id FROM "default"."orders" AS "default"') == []
    session.close()


def test_tables_after_a_comma_or_in_a_subquery_are_read_and_a_missing_one_is_named(tmp_path: Path) -> None:
    """Which tables a query reads is asked of DuckDB's parser, not only found after FROM or JOIN:
    ``FROM orders o, orders p`` read the second ``orders`` as a table DuckDB did not have, and a
    missing table after a comma got DuckDB's words, not the catalog's."""
    session, _ = _orders(tmp_path)
    rows = session.execute("SELECT count(*) FROM orders o, orders p WHERE o.id = p.id")[1]
    assert list(rows) == [(3,)]
    # Named twice (once rewritten, once bare), the table is scanned once.
    scans: list[tuple[str, str]] = []
    counted = DuckSession(session._catalog, lambda _catalog, name: scans.append(name))  # None: a plain scan
    assert list(counted.execute("SELECT count(*) FROM orders o, orders p WHERE o.id = p.id")[1]) == [(3,)]
    assert scans == [("default", "orders")]
    counted.close()
    nested = "SELECT id FROM default.orders WHERE id IN (SELECT max(id) FROM orders, (SELECT 1) AS one)"
    assert list(session.execute(nested)[1]) == [(3,)]
    assert session.read_tables('SELECT 1 FROM "default"."orders", x, (SELECT 2 FROM y.z)') == [
        ("default", "orders"),
        ("", "x"),
        ("y", "z"),
    ]
    with pytest.raises(LookupError, match=r"no table default\.refunds in the catalog"):
        session.execute("SELECT * FROM orders o, default.refunds r WHERE o.id = r.id")
    # A table of DuckDB's own that the session made stays its own.
    session.execute("CREATE TABLE scratch AS SELECT 42 AS answer")
    assert list(session.execute("SELECT answer FROM scratch, orders LIMIT 1")[1]) == [(42,)]
    session.close()
