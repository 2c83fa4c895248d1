"""The embedded SQL engine of ``tabletopic sql``: pyiceberg scans the tables a statement names and
DuckDB queries them in process. It starts in well under a second and needs no network (DuckDB's own
``iceberg`` extension is downloaded at run time, so it is not used).

Each statement registers the tables it names (``namespace.table``, or a bare table name of the
``default`` namespace, as Spark resolves it), freshly scanned, as DuckDB views of the same name;
``default`` is a reserved word in DuckDB, so unquoted references to known tables are quoted before
DuckDB parses the statement. Which tables a query reads is then asked of DuckDB's own parser
(``json_serialize_sql``), so a table after a comma (``FROM a, b``) or in any subquery is found as
one after FROM or JOIN is. Scans read whole tables: the embedded engine is for small and medium
tables; ``--engine spark`` runs the same SQL on Spark.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pyiceberg.catalog import Catalog

from tabletopic.catalog.adapters import DEFAULT_NAMESPACE

if TYPE_CHECKING:
    import pyarrow as pa


# A table's rows other than its current snapshot's, or None for a plain scan: fresh reads
# (:mod:`tabletopic.table.ops.fresh`) give the snapshot plus the records not yet committed.
RowSource = Callable[[Catalog, tuple[str, str]], "pa.Table | None"]


# SHOW TABLES [IN|FROM namespace], answered from the catalog.
_SHOW_TABLES = re.compile(r'\s*SHOW\s+TABLES(?:\s+(?:IN|FROM)\s+("?[\w.]+"?))?\s*;?\s*', re.IGNORECASE)


# A table named after FROM or JOIN as ``"namespace".table`` (or ``"namespace"."table"``), as
# :meth:`DuckSession.rewrite` leaves it. Only there: elsewhere ``name.x`` may be a column of a table
# or alias that shares its name with a namespace, which DuckDB resolves itself.
_QUOTED_TABLE_REFERENCE = re.compile(
    r'\b(?:FROM|JOIN)\s+"([^"]+)"\s*\.\s*(?:"([^"]+)"|([A-Za-z_]\w*))', re.IGNORECASE
)


def _base_tables(node: Any, found: list[tuple[str, str]]) -> None:
    """Collect the ``(schema, table)`` of every table reference in a serialized query, in the
    order the statement names them."""
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE":
            reference = (str(node.get("schema_name", "")), str(node.get("table_name", "")))
            if reference not in found:
                found.append(reference)
        for value in node.values():
            _base_tables(value, found)
    elif isinstance(node, list):
        for value in node:
            _base_tables(value, found)


class DuckSession:
    """One DuckDB connection over a pyiceberg catalog."""

    def __init__(self, catalog: Catalog, rows: RowSource | None = None) -> None:
        import duckdb

        self._catalog = catalog
        self._rows = rows
        self._con = duckdb.connect()
        # Parses statements apart: the session's own connection may hold a result still read.
        self._parser = self._con.cursor()
        self._known: list[tuple[str, str]] | None = None

    def known_tables(self) -> list[tuple[str, str]]:
        if self._known is None:
            found: list[tuple[str, str]] = []
            for namespace in self._catalog.list_namespaces():
                for ident in self._catalog.list_tables(namespace):
                    found.append((".".join(ident[:-1]), ident[-1]))
            self._known = found
        return self._known

    def rewrite(self, statement: str) -> tuple[str, list[tuple[str, str]]]:
        """``statement`` with references to known tables quoted, and the tables it names."""
        named: list[tuple[str, str]] = []
        parts = statement.split("'")
        for index in range(0, len(parts), 2):  # outside single-quoted literals
            for namespace, table in self.known_tables():
                pattern = re.compile(
                    rf'(?<![\w."])"?{re.escape(namespace)}"?\s*\.\s*"?{re.escape(table)}"?(?![\w"])',
                    re.IGNORECASE,
                )
                replaced, count = pattern.subn(f'"{namespace}"."{table}"', parts[index])
                if count:
                    parts[index] = replaced
                    if (namespace, table) not in named:
                        named.append((namespace, table))
            for table in {t for ns, t in self.known_tables() if ns == DEFAULT_NAMESPACE}:
                # A bare name after FROM or JOIN is a table topic's table, as in Spark, unless the
                # statement names a CTE so.
                if re.search(rf"(?<![\w.]){re.escape(table)}\s+AS\s*\(", statement, re.IGNORECASE):
                    continue
                bare_table = re.compile(rf'\b(FROM|JOIN)(\s+)"?{re.escape(table)}"?(?![\w."])', re.IGNORECASE)
                replaced, count = bare_table.subn(rf'\1\2"{DEFAULT_NAMESPACE}"."{table}"', parts[index])
                if count:
                    parts[index] = replaced
                    if (DEFAULT_NAMESPACE, table) not in named:
                        named.append((DEFAULT_NAMESPACE, table))
            for namespace in self._namespaces():
                # Other names in a known namespace (or ``default``, before its first table): quoted
                # too, so that DuckDB never fails to parse the reserved word; :meth:`missing` names
                # them.
                bare = re.compile(rf'(?<![\w."]){re.escape(namespace)}(?=\s*\.\s*[A-Za-z_"])', re.IGNORECASE)
                parts[index] = bare.sub(f'"{namespace}"', parts[index])
        return "'".join(parts), named

    def _namespaces(self) -> set[str]:
        return {ns for ns, _ in self.known_tables()} | {DEFAULT_NAMESPACE}

    def _missing_of(self, read: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Of the tables a query reads, those in a catalog namespace that the catalog lacks."""
        known = {(ns.lower(), t.lower()) for ns, t in self.known_tables()}
        namespaces = {ns.lower() for ns in self._namespaces()}
        return [
            (ns, t) for ns, t in read if ns.lower() in namespaces and (ns.lower(), t.lower()) not in known
        ]

    def missing(self, rewritten: str) -> list[tuple[str, str]]:
        """The tables a rewritten statement reads (after FROM or JOIN) in a catalog namespace that
        the catalog lacks, in the order named: a table topic's table before its first commit, or a
        misspelt name. For statements DuckDB's parser does not serialize (:meth:`read_tables`)."""
        named: list[tuple[str, str]] = []
        for part in rewritten.split("'")[::2]:  # outside single-quoted literals
            for namespace, quoted, plain in _QUOTED_TABLE_REFERENCE.findall(part):
                if (namespace, quoted or plain) not in named:
                    named.append((namespace, quoted or plain))
        return self._missing_of(named)

    def read_tables(self, rewritten: str) -> list[tuple[str, str]] | None:
        """The tables a rewritten query reads, ``(schema, table)`` with ``""`` for no schema, as
        DuckDB's parser finds them wherever they stand (after a comma, in a subquery); None for a
        statement it does not serialize (anything but a query) or cannot parse (then DuckDB says
        why when it runs it)."""
        answer = self._parser.execute("SELECT json_serialize_sql(?)", [rewritten]).fetchone()
        tree = json.loads(answer[0]) if answer else {"error": True}
        if tree.get("error"):
            return None
        found: list[tuple[str, str]] = []
        _base_tables(tree, found)
        return found

    def _register(self, namespace: str, table: str) -> None:
        """Register ``namespace.table``, freshly scanned, as the view of that name."""
        arrow = self._rows(self._catalog, (namespace, table)) if self._rows is not None else None
        if arrow is None:
            arrow = self._catalog.load_table((*namespace.split("."), table)).scan().to_arrow()
        scratch = f"__tabletopic_{namespace}_{table}".replace(".", "_")
        self._con.register(scratch, arrow)
        self._con.execute(f'CREATE SCHEMA IF NOT EXISTS "{namespace}"')
        self._con.execute(f'CREATE OR REPLACE VIEW "{namespace}"."{table}" AS SELECT * FROM "{scratch}"')

    def execute(self, statement: str) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
        """Run one statement; its column names and rows."""
        if (shown := _SHOW_TABLES.fullmatch(statement)) is not None:
            # The catalog's tables, as Spark lists them: DuckDB knows only those a statement named.
            namespace = (shown.group(1) or DEFAULT_NAMESPACE).strip('"')
            tables = [(ns, t) for ns, t in self.known_tables() if ns.lower() == namespace.lower()]
            return ["namespace", "tableName"], iter(sorted(tables))
        text, named = self.rewrite(statement)
        read = self.read_tables(text)
        if missing := (self.missing(text) if read is None else self._missing_of(read)):
            names = ", ".join(f"{ns}.{t}" for ns, t in missing)
            raise LookupError(
                f"no table {names} in the catalog; a table topic's table is created by its first "
                "commit (`tabletopic tables list` shows which have committed, `tabletopic tables "
                "commit TOPIC` commits now)"
            )
        # A bare name the rewrite left (after a comma, say) that is a table of ``default``: as Spark.
        defaults = {t.lower(): t for ns, t in self.known_tables() if ns == DEFAULT_NAMESPACE}
        bare = [defaults[t.lower()] for schema, t in read or () if not schema and t.lower() in defaults]
        for namespace, table in dict.fromkeys([*named, *((DEFAULT_NAMESPACE, t) for t in bare)]):
            self._register(namespace, table)  # each table scanned once, however it is named
        for table in bare:  # DuckDB's own schema, where a bare name is looked up
            self._con.execute(
                f'CREATE OR REPLACE VIEW main."{table}" AS SELECT * FROM "{DEFAULT_NAMESPACE}"."{table}"'
            )
        cursor = self._con.execute(text)
        if not cursor.description:  # DDL and other statements without a result
            return [], iter(())
        columns = [str(d[0]) for d in cursor.description]

        def rows() -> Iterator[tuple[Any, ...]]:
            while batch := cursor.fetchmany(10_000):
                yield from batch

        return columns, rows()

    def close(self) -> None:
        self._parser.close()
        self._con.close()
