"""``tabletopic sql``: Spark SQL against the platform's Iceberg catalog, one statement or a shell.

Spark statements run in the node's warm Spark session when a node serves ``/v1/sql`` on its admin
listener (:mod:`tabletopic.spark.sql_service`): about a second instead of the 10-30 s of starting
Spark here. Without one (no node running, or a node whose jobs run without Spark), this process
starts Spark itself, as before.

The platform's catalog is Spark's default catalog, so ``SELECT * FROM namespace.table`` works. When
Spark reaches the catalog through the built-in REST catalog and no node is serving it, this process
serves it itself (on a free loopback port) for as long as it runs, so the command also works on a
stopped node's data directory.
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import json
import logging
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tabletopic.catalog.backends import CatalogKind, SparkAccess
from tabletopic.cli_common import (
    ConfigFileOption,
    DataDirOption,
    OverrideOption,
    console,
    err_console,
    http_login,
    http_login_refused,
    load_config,
    print_table,
    setup_logging,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tabletopic.catalog.adapters import CatalogSpec
    from tabletopic.config import Config

log = logging.getLogger(__name__)

HISTORY_FILE = Path("~/.tabletopic_sql_history").expanduser()
PROMPT, CONTINUATION = "tabletopic> ", "       ...> "


class OutputFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


class SqlEngine(StrEnum):
    """Who runs ``tabletopic sql``: DuckDB over pyiceberg scans (starts at once, reads only), Spark
    SQL (DDL, writes, big tables; 5-25 s to start), or DuckDB for the interactive shell and Spark
    otherwise (``auto``)."""

    auto = "auto"
    duckdb = "duckdb"
    spark = "spark"


def sql(
    statement: Annotated[
        str | None,
        typer.Argument(help="SQL to run (several separated by ';'). Omit for an interactive shell."),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="table (rich), csv, or json (one object per row).")
    ] = OutputFormat.table,
    max_rows: Annotated[int, typer.Option("--max-rows", help="Rows shown in table format.")] = 1000,
    engine: Annotated[
        SqlEngine,
        typer.Option(
            "--engine",
            "-e",
            help="spark: full Spark SQL, in the node's warm Spark when a node serves it (about a "
            "second), else in a Spark started here (10-30 s); duckdb: embedded, read-only, about a "
            "second (pyiceberg scans, works offline); auto: duckdb for the interactive shell, spark "
            "for statements and pipes.",
        ),
    ] = SqlEngine.auto,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print the Spark configuration that connects your own "
            "spark-sql / PySpark to the platform's catalog, and exit.",
        ),
    ] = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Read table topics' tables with the records not yet committed (the committed snapshot "
            "plus the log above its offsets, converted as the commit converts them); runs on DuckDB.",
        ),
    ] = False,
    admin_url: Annotated[
        str | None,
        typer.Option(
            "--admin-url", help="Admin API of the node whose Spark runs the SQL (default: admin.listener)."
        ),
    ] = None,
    no_node: Annotated[
        bool,
        typer.Option(
            "--no-node",
            help="Start Spark in this process even when a node serves SQL (a session whose SET, USE "
            "and temporary views last for the whole command).",
        ),
    ] = False,
    data_dir: DataDirOption = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Run SQL against the platform's Iceberg catalog: in the node's warm Spark, or DuckDB in process.

    The platform's catalog is the default catalog (``SELECT * FROM default.clicks``)."""
    cfg = load_config(data_dir, config, override)
    from tabletopic.settings import LOG_LEVEL

    level = cfg.get(LOG_LEVEL)
    setup_logging("WARNING" if level == "INFO" else level)
    from tabletopic.catalog.adapters import catalog_spec
    from tabletopic.config import ConfigError

    try:
        spec = catalog_spec(cfg)
    except ConfigError as exc:
        err_console.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if print_config:
        _print_config(cfg, spec)
        return
    if fresh and engine is SqlEngine.spark:
        err_console.print("[red]--fresh runs on the embedded engine:[/red] use --engine duckdb or auto")
        raise typer.Exit(2)
    embedded = (
        fresh
        or engine is SqlEngine.duckdb
        or (engine is SqlEngine.auto and statement is None and sys.stdin.isatty())
    )
    remote = (
        None
        if no_node
        else node_sql(admin_url or cfg.get("admin.listener"), "duckdb" if embedded else "spark")
    )
    if remote is not None:  # the node's warm Spark, or its DuckDB (imports and catalog warm)
        _run_remote(remote, statement, output, max_rows, "duckdb" if embedded else "spark", fresh)
        return
    if embedded:
        _run_duckdb(cfg, statement, output, max_rows, fresh)
        return
    if statement is not None:
        err_console.print(
            "[dim]no node serves SQL at admin.listener: starting Spark in this process (10-30 s)[/dim]"
        )
    with ExitStack() as stack:
        spec = reachable_spec(cfg, spec, stack)
        spark = _session(cfg, spec)
        stack.callback(_stop_spark)
        run_statements(statement, lambda text: run_statement(spark, text, output, max_rows), "Spark SQL")


def _run_duckdb(
    cfg: Config, statement: str | None, output: OutputFormat, max_rows: int, fresh: bool = False
) -> None:
    """The embedded engine: DuckDB over pyiceberg scans of the catalog (no Spark, no network; a
    fresh read also reads the log tail through the Kafka listener)."""
    from tabletopic.table.ops.access import open_catalog
    from tabletopic.table.ops.duck import DuckSession

    with ExitStack() as stack:
        session = DuckSession(open_catalog(cfg, stack), fresh_rows(cfg) if fresh else None)
        stack.callback(session.close)

        def run(text: str) -> bool:
            try:
                columns, rows = session.execute(text)
                print_rows(columns, ([plain(v) for v in row] for row in rows), output, max_rows)
                return True
            except Exception as exc:
                err_console.print(f"[red]error:[/red] {short_error(exc)}", highlight=False)
                return False

        run_statements(
            statement, run, "DuckDB over pyiceberg scans (read-only; --engine spark for Spark SQL)"
        )


def fresh_rows(cfg: Config) -> Callable[[Any, tuple[str, str]], Any]:
    """A DuckDB row source giving table topics' tables with their uncommitted records (tables no
    topic writes are scanned as they are)."""
    from tabletopic.table.ops.access import bootstrap_servers, record_converter
    from tabletopic.table.ops.fresh import fresh_read, table_topics

    servers = bootstrap_servers(cfg)
    topics: dict[tuple[str, str], Any] = {}

    def rows(catalog: Any, ident: tuple[str, str]) -> Any:
        if not topics:
            topics.update(table_topics(servers))
        found = topics.get(ident)
        if found is None:
            return None
        topic, config = found
        return fresh_read(servers, catalog, topic, config, record_converter(cfg, config)).rows

    return rows


class NodeSql:
    """A node's ``/v1/sql`` endpoint: statements run in its warm Spark session or its DuckDB."""

    def __init__(self, url: str) -> None:
        import httpx

        self.url = url.rstrip("/") + "/v1/sql"
        self._client = httpx.Client(timeout=httpx.Timeout(10, read=None), auth=http_login())

    def execute(
        self, statement: str, limit: int | None, engine: str = "spark", fresh: bool = False
    ) -> tuple[list[str], Iterator[list[Any]]]:
        """Run one statement on the node; its column names and rows (streamed).

        Raises:
            RuntimeError: the node refused the statement (the engine's message) or failed mid-way.
        """
        body = {"statement": statement, "limit": limit, "engine": engine, "fresh": fresh}
        request = self._client.build_request("POST", self.url, json=body)
        response = self._client.send(request, stream=True)
        if response.status_code != 200:
            response.read()
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text
            raise RuntimeError(str(detail or f"HTTP {response.status_code}"))
        lines = response.iter_lines()
        head = json.loads(next(lines))

        def rows() -> Iterator[list[Any]]:
            try:
                for line in lines:
                    value = json.loads(line)
                    if isinstance(value, dict):
                        raise RuntimeError(str(value.get("error")))
                    yield value
            finally:
                response.close()

        return [str(c) for c in head["columns"]], rows()

    def close(self) -> None:
        self._client.close()


def node_sql(admin_url: str | None, engine: str = "spark") -> NodeSql | None:
    """The node's SQL endpoint at ``admin_url``, if a node answers there and runs ``engine``."""
    import httpx

    if not admin_url:
        return None
    remote = NodeSql(admin_url)
    try:
        answer = remote._client.get(remote.url, timeout=2)
    except httpx.HTTPError:
        answer = None
    if answer is not None and answer.status_code == 401:
        remote.close()
        raise http_login_refused(admin_url)
    if answer is None or answer.status_code != 200:
        remote.close()
        return None
    try:
        engines = answer.json().get("engines") or [answer.json().get("engine")]
    except ValueError:
        engines = []
    if engine not in engines:
        remote.close()
        return None
    return remote


def _run_remote(
    remote: NodeSql,
    statement: str | None,
    output: OutputFormat,
    max_rows: int,
    engine: str = "spark",
    fresh: bool = False,
) -> None:
    def run(text: str) -> bool:
        try:
            limit = max_rows + 1 if output is OutputFormat.table else None
            columns, rows = remote.execute(text, limit, engine, fresh)
            print_rows(columns, rows, output, max_rows)
            return True
        except Exception as exc:
            err_console.print(f"[red]error:[/red] {exc}", highlight=False)
            return False

    try:
        where = "Spark SQL in the node's session" if engine == "spark" else "DuckDB in the node"
        run_statements(statement, run, f"{where}{' (fresh reads)' if fresh else ''} ({remote.url})")
    finally:
        remote.close()


def _session(cfg: Config, spec: CatalogSpec) -> SparkSession:
    from tabletopic.catalog.adapters import spark_catalog_conf, spark_catalog_properties
    from tabletopic.spark.session import get_spark

    return get_spark(cfg, spark_catalog_conf(spec.name, spark_catalog_properties(spec)), spec.name)


def _stop_spark() -> None:
    from tabletopic.spark.session import stop_spark

    stop_spark()


def reachable_spec(cfg: Config, spec: CatalogSpec, stack: ExitStack) -> CatalogSpec:
    """The spec with a REST endpoint that answers: the node's (logged in as the HTTP user of
    ``TABLETOPIC_HTTP_USER`` when it asks for a login), or one served from this process."""
    from tabletopic.table.ops.access import reach_rest_catalog

    if spec.spark_access is not SparkAccess.REST:
        return spec
    reach = reach_rest_catalog(spec.rest_uri)
    if reach.usable:
        return replace(spec, rest_credential=reach.credential)
    return _served_here(cfg, spec, stack, reach.why_not(spec.rest_uri))


def _served_here(cfg: Config, spec: CatalogSpec, stack: ExitStack, reason: str) -> CatalogSpec:
    """The spec pointing at the node's catalog served from this process for the command (the
    catalog opened from the metadata database, as the node opens it), saying ``reason``."""
    from tabletopic import database, settings
    from tabletopic.catalog.adapters import create_catalog
    from tabletopic.catalog.component import rest_app_for
    from tabletopic.catalog.rest.embedded import EmbeddedRestCatalog

    engine = None
    if spec.type is CatalogKind.BUILTIN:
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        engine = database.create_engine(cfg.get(settings.METADATA_URL) or database.default_url(cfg.data_dir))
        stack.callback(engine.dispose)
    catalog = create_catalog(spec, engine)
    server = EmbeddedRestCatalog(rest_app_for(catalog, spec)).start()
    stack.callback(server.stop)
    err_console.print(
        f"[dim]{reason}; serving the {spec.type} catalog from this process at {server.uri}[/dim]",
        soft_wrap=True,
    )
    return spec.with_rest_uri(server.uri)


def _print_config(cfg: Config, spec: CatalogSpec) -> None:
    """Spark properties a user's own Spark 3.5 needs for this catalog (jars from this install)."""
    from tabletopic.catalog.adapters import spark_catalog_conf, spark_catalog_properties
    from tabletopic.spark.session import spark_conf

    catalog_conf = spark_catalog_conf(spec.name, spark_catalog_properties(spec))
    full = spark_conf(cfg, catalog_conf, spec.name)
    keys = ["spark.jars", "spark.sql.extensions", "spark.sql.defaultCatalog"]
    keys += sorted(k for k in full if k.startswith("spark.hadoop.fs.s3"))
    keys += list(catalog_conf)
    lines = [f"--conf {key}={full[key]}" for key in keys if key in full]
    console.print(
        f"# Spark 3.5 (Scala 2.12) configuration for catalog '{spec.name}' ({spec.type}).\n"
        "# spark-sql / pyspark / spark-submit: pass these flags; spark-defaults.conf: drop '--conf '.",
        markup=False,
        highlight=False,
        soft_wrap=True,  # a wrapped comment line would lose its '#'
    )
    if spec.spark_access is SparkAccess.REST:
        login = str(cfg.get("authentication.method") or "NONE").upper() != "NONE"
        console.print(
            f"# The catalog is served by `tabletopic serve` at {spec.rest_uri}."
            + (
                f"\n# It asks for a login (authentication.method): add --conf "
                f"spark.sql.catalog.{spec.name}.credential=USER:PASSWORD"
                if login
                else ""
            ),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


# ------------------------------------------------------------------------------------ statements


def split_statements(text: str) -> list[str]:
    """Split on ``;`` outside quotes and comments; empty statements are dropped."""
    statements: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote is not None:
            current.append(ch)
            if ch == "\\" and i + 1 < len(text):
                current.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in ("'", '"', "`"):
            quote = ch
            current.append(ch)
        elif ch == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == ";":
            statements.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    statements.append("".join(current))
    return [s.strip() for s in statements if s.strip()]


def run_statement(spark: SparkSession, text: str, output: OutputFormat, max_rows: int) -> bool:
    """Run one statement and print its result; errors are printed, not raised. Returns success."""
    try:
        frame = spark.sql(text)
        print_frame(frame, output, max_rows)
        return True
    except Exception as exc:
        err_console.print(f"[red]error:[/red] {short_error(exc)}", highlight=False)
        return False


def short_error(exc: BaseException) -> str:
    """Spark errors without the JVM stack trace."""
    lines = str(exc).strip().splitlines()
    kept = [line for line in lines if not line.lstrip().startswith(("at ", "JVM stacktrace"))]
    return "\n".join(kept[:12]) or type(exc).__name__


def plain(value: Any) -> Any:
    """A JSON/CSV-friendly form of a Spark (or DuckDB) value."""
    if "pyspark" in sys.modules:  # only Spark gives Rows; DuckDB's results need no pyspark import
        from pyspark.sql import Row

        if isinstance(value, Row):
            return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def _rows(frame: DataFrame, limit: int | None) -> Iterator[list[Any]]:
    source: Iterable[Any] = frame.limit(limit).collect() if limit is not None else frame.toLocalIterator()
    for row in source:
        yield [plain(v) for v in row]


def print_frame(frame: DataFrame, output: OutputFormat, max_rows: int) -> None:
    if not frame.columns:
        frame.collect()  # DDL: run it; nothing to show
    limit = max_rows + 1 if output is OutputFormat.table else None
    print_rows(frame.columns, _rows(frame, limit), output, max_rows)


def print_rows(columns: list[str], rows: Iterable[list[Any]], output: OutputFormat, max_rows: int) -> None:
    """Print plain (:func:`plain`) row values as a rich table, CSV or JSON lines."""
    if output is OutputFormat.csv:
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        for values in rows:
            writer.writerow([json.dumps(v) if isinstance(v, dict | list) else v for v in values])
        sys.stdout.flush()
        return
    if output is OutputFormat.json:
        for values in rows:
            sys.stdout.write(json.dumps(dict(zip(columns, values, strict=True)), default=str) + "\n")
        sys.stdout.flush()
        return
    from rich.table import Table

    if not columns:
        console.print("[dim]OK[/dim]")
        return
    table = Table(*columns, show_lines=False, header_style="bold")
    count = 0
    for values in rows:
        count += 1
        if count > max_rows:
            break
        table.add_row(
            *(
                "NULL" if v is None else json.dumps(v) if isinstance(v, dict | list) else str(v)
                for v in values
            )
        )
    print_table(table)
    suffix = f" (first {max_rows} shown)" if count > max_rows else ""
    console.print(f"[dim]{min(count, max_rows)} row(s){suffix}[/dim]")


def run_statements(statement: str | None, run: Callable[[str], bool], engine: str) -> None:
    """Run the ``-e`` statements with ``run`` (exit 1 if any failed, after running them all), or
    without ``-e`` read statements from the terminal or a pipe (``engine`` names where they run)."""
    if statement is None:
        read_statements(run, engine)
        return
    failed = False
    for text in split_statements(statement):
        failed |= not run(text)
    if failed:
        raise typer.Exit(1)


def read_statements(run: Callable[[str], bool], engine: str) -> None:
    """Read statements until ``;`` and ``run`` each; works on a terminal (with history) or a pipe."""
    interactive = sys.stdin.isatty()
    if interactive:
        try:
            import readline

            if HISTORY_FILE.exists():
                readline.read_history_file(HISTORY_FILE)
        except (ImportError, OSError):
            readline = None  # type: ignore[assignment]
        console.print(
            f"[dim]{engine} on the tabletopic catalog. End statements with ';', exit with Ctrl-D.[/dim]"
        )
    buffer: list[str] = []
    while True:
        try:
            line = input(CONTINUATION if buffer else PROMPT) if interactive else sys.stdin.readline()
        except EOFError:
            break
        except KeyboardInterrupt:
            buffer = []
            console.print()
            continue
        if not interactive and line == "":
            break
        if not buffer and line.strip().lower() in ("exit", "quit", "exit;", "quit;"):
            break
        buffer.append(line.rstrip("\n"))
        text = "\n".join(buffer)
        if text.rstrip().endswith(";"):
            buffer = []
            for statement in split_statements(text):
                run(statement)
    if buffer and (rest := split_statements("\n".join(buffer))):
        for statement in rest:
            run(statement)
    if interactive:
        try:
            import readline

            readline.write_history_file(HISTORY_FILE)
        except (ImportError, OSError):
            pass
