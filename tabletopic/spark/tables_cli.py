"""``tabletopic tables verify`` (and the other operations commands that may need Spark): registered
on the ``tables`` command group, defined here because Spark sits above the table package.

They reach the node the way ``tables`` does (``--data-dir``/``--config``/``--override`` before the
subcommand), talk Kafka to its listener with a real client, and open its catalog (through the
node's REST endpoint when it serves one).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table as RichTable

from tabletopic.cli_common import console, err_console, print_table
from tabletopic.table.cli import app as tables_app
from tabletopic.table.ops.progress import VerifyProgress

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

    from tabletopic.config import Config
    from tabletopic.table.ops.verify import TableCoverage, VerifyReport
    from tabletopic.table.table_config import TableTopicConfig

# Tables with more live rows than this are checked with Spark under --engine auto.
SPARK_ROWS_THRESHOLD = 5_000_000


class Engine(StrEnum):
    auto = "auto"
    pyiceberg = "pyiceberg"
    spark = "spark"


QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars (for scripts).")]
BootstrapOption = Annotated[
    str | None, typer.Option("--bootstrap-server", "-b", help="Kafka bootstrap (default: listeners).")
]


def _config(ctx: typer.Context) -> Config:
    parent = ctx.parent
    cfg = parent.meta.get("tabletopic.config") if parent is not None else None
    if cfg is None:
        cfg = ctx.meta.get("tabletopic.config")
    assert cfg is not None, "the tables callback loads the configuration"
    return cfg  # type: ignore[no-any-return]


class BarProgress(VerifyProgress):
    """Rich progress bars on stderr (stdout stays clean for ``--json``)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._topic: Any = None
        self._table: Any = None

    def start_topic(self, total: int) -> None:
        self._topic = self._progress.add_task("reading the topic", total=total or None)

    def topic(self, records: int) -> None:
        self._progress.advance(self._topic, records)

    def start_table(self, total: int) -> None:
        if self._topic is not None:
            self._progress.update(self._topic, completed=self._progress.tasks[self._topic].total or 0)
        self._table = self._progress.add_task("scanning the table", total=total or None)

    def table(self, rows: int) -> None:
        self._progress.advance(self._table, rows)


def progress_bar(quiet: bool) -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=quiet,
        transient=True,
    )


@dataclass(frozen=True)
class _TableOperation:
    """What a command acting on a table topic's table works with (:func:`_table_operation`)."""

    cfg: Config
    servers: str
    config: TableTopicConfig
    catalog: Catalog


@contextmanager
def _table_operation(
    ctx: typer.Context, topic: str, bootstrap: str | None, failure: type[Exception]
) -> Iterator[_TableOperation]:
    """The node's configuration, bootstrap servers, TOPIC's table config (refusing a topic that is
    not a table topic) and the open catalog, for the commands that write a table (redrive, rebuild);
    their refusals (``failure``, LookupError, ValueError) end the command with exit code 1."""
    from tabletopic.table.ops.access import bootstrap_servers, open_catalog
    from tabletopic.table.ops.topic_read import table_topic_config

    cfg = _config(ctx)
    servers = bootstrap or bootstrap_servers(cfg)
    with ExitStack() as stack:
        try:
            config = table_topic_config(servers, topic)
            yield _TableOperation(cfg, servers, config, open_catalog(cfg, stack))
        except (LookupError, ValueError, failure) as exc:
            err_console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc


@contextmanager
def _counted(quiet: bool, label: str) -> Iterator[Callable[[int], None]]:
    """A progress bar of unknown total labelled ``label``, as the callback that advances it."""
    with progress_bar(quiet) as bar:
        task = bar.add_task(label, total=None)
        yield lambda n: bar.advance(task, n)


def _spark_engine(cfg: Config, stack: ExitStack) -> Any:
    from tabletopic.catalog.adapters import catalog_spec, spark_catalog_conf, spark_catalog_properties
    from tabletopic.spark.cli import reachable_spec
    from tabletopic.spark.session import get_spark, stop_spark
    from tabletopic.spark.verify import spark_coverage

    spec = reachable_spec(cfg, catalog_spec(cfg), stack)
    spark = get_spark(cfg, spark_catalog_conf(spec.name, spark_catalog_properties(spec)), spec.name)
    stack.callback(stop_spark)

    def coverage(table: Table, snapshot_id: int | None, progress: Any) -> dict[int, TableCoverage]:
        name = ".".join((spec.name, *table.name()[-2:]))
        return spark_coverage(spark, name, snapshot_id, progress)

    return coverage


@tables_app.command("verify")
def verify_command(
    ctx: typer.Context,
    topic: str,
    engine: Annotated[
        Engine, typer.Option("--engine", help="Scan with pyiceberg, Spark, or pick by table size.")
    ] = Engine.auto,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    quiet: QuietOption = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Prove the table holds every record of TOPIC up to its committed offsets exactly once, or list
    the missing, duplicated and unexpected offsets by partition. Exit code 1 when it does not."""
    from tabletopic.table.ops.access import bootstrap_servers, open_catalog, record_converter
    from tabletopic.table.ops.status import live_rows
    from tabletopic.table.ops.verify import pyiceberg_coverage, target_of, verify

    cfg = _config(ctx)
    servers = bootstrap or bootstrap_servers(cfg)
    with ExitStack() as stack:
        try:
            target = target_of(servers, topic)
            catalog = open_catalog(cfg, stack)
            chosen: Any = pyiceberg_coverage
            if engine is Engine.spark:
                chosen = _spark_engine(cfg, stack)
            elif engine is Engine.auto:
                table = catalog.load_table(target.identifier)
                if live_rows(table.metadata.current_snapshot()) > SPARK_ROWS_THRESHOLD:
                    chosen = _spark_engine(cfg, stack)
            converter = (
                record_converter(cfg, target.config) if target.writes_deletes and target.config else None
            )
            with progress_bar(quiet or as_json) as bar:
                report = verify(servers, catalog, target, chosen, BarProgress(bar), converter)
        except (LookupError, ValueError) as exc:
            err_console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from exc
    if as_json:
        console.print_json(json.dumps(report.as_dict()))
    else:
        print_report(report)
    if not report.ok:
        raise typer.Exit(1)


def print_report(report: VerifyReport) -> None:
    from tabletopic.table.ops import ranges as R

    columns = ("partition", "log start", "committed", "records", "rows", "skipped", "missing", "duplicated")
    table = RichTable(*columns, "unexpected")
    for p in report.partitions:
        table.add_row(
            str(p.partition),
            str(p.log_start),
            str(p.committed),
            str(p.expected),
            str(p.rows),
            str(p.skipped),
            str(R.count(p.missing)),
            str(sum((e - s) * (c - 1) for s, e, c in p.duplicates)),
            str(R.count(p.unexpected)),
        )
    console.print(f"[bold]{report.topic}[/bold] -> {report.table} at snapshot {report.snapshot_id}")
    print_table(table)
    for p in report.partitions:
        if p.missing:
            missing = R.describe(p.missing)
            console.print(f"partition {p.partition}: missing offsets {missing}", highlight=False)
        if p.duplicates:
            shown = ", ".join(f"{s}{'' if e == s + 1 else f'-{e - 1}'} x{c}" for s, e, c in p.duplicates[:8])
            console.print(f"partition {p.partition}: duplicated offsets {shown}", highlight=False)
        if p.unexpected:
            console.print(
                f"partition {p.partition}: rows at offsets that hold no record {R.describe(p.unexpected)}",
                highlight=False,
            )
        if p.topic_incomplete:
            console.print(f"partition {p.partition}: the topic could not be read to the committed offset")
        if p.below_log_start:
            console.print(
                f"partition {p.partition}: {p.below_log_start} rows of records already removed by retention "
                "(checked for duplicates only)"
            )
    if report.ok:
        console.print("[green]OK[/green]: every record up to the committed offsets is in the table once")
    else:
        console.print("[red]NOT OK[/red]: see the offsets above")


@tables_app.command("redrive")
def redrive_command(
    ctx: typer.Context,
    topic: str,
    skip_failing: Annotated[
        bool,
        typer.Option("--skip-failing", help="Leave dead letters that still fail behind instead of stopping."),
    ] = False,
    quiet: QuietOption = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Replay TOPIC's dead letters into its table, exactly once, once their cause is fixed (the
    replayed DLQ offsets are committed with the rows, so running it again replays nothing twice)."""
    from tabletopic.table.ops.access import record_converter
    from tabletopic.table.ops.redrive import RedriveError, redrive

    with (
        _table_operation(ctx, topic, bootstrap, RedriveError) as op,
        _counted(quiet, "reading dead letters") as progress,
    ):
        result = redrive(
            op.servers,
            op.catalog,
            topic,
            op.config,
            record_converter(op.cfg, op.config),
            skip_failing=skip_failing,
            progress=progress,
        )
    if result.snapshot_id is None:
        console.print(f"nothing to redrive: no new dead letters in {op.config.dlq_topic}")
        return
    console.print(
        f"redrove {result.replayed} dead letters of {topic} into the table at snapshot {result.snapshot_id} "
        f"(DLQ {op.config.dlq_topic} offsets now {result.dlq_offsets})",
        highlight=False,
    )
    if result.still_failing:
        console.print(f"[yellow]{len(result.still_failing)} still failing, left behind[/yellow]")


@tables_app.command("rebuild")
def rebuild_command(
    ctx: typer.Context,
    topic: str,
    from_offset: Annotated[
        int | None, typer.Option("--from-offset", help="Rebuild from this offset of every partition.")
    ] = None,
    from_timestamp: Annotated[
        int | None,
        typer.Option(
            "--from-timestamp", help="Rebuild from the first record at or after this time (epoch ms)."
        ),
    ] = None,
    adopt: Annotated[
        bool,
        typer.Option(
            "--adopt",
            help="Take over an existing Iceberg table as TOPIC's table, keeping its rows; the pipeline "
            "ingests from --from-offset/--from-timestamp (default: from now on).",
        ),
    ] = False,
    round_records: Annotated[
        int, typer.Option("--round-records", help="Records read and committed to the branch per round.")
    ] = 200_000,
    quiet: QuietOption = False,
    bootstrap: BootstrapOption = None,
) -> None:
    """Rebuild TOPIC's table from the topic on a branch and swap it in atomically while the live
    pipeline keeps committing (an interrupted rebuild resumes), or adopt an existing table."""
    from confluent_kafka import TopicPartition

    from tabletopic.table.ops.access import record_converter
    from tabletopic.table.ops.rebuild import RebuildError, rebuild, start_offsets
    from tabletopic.table.ops.rebuild import adopt as adopt_table
    from tabletopic.table.ops.topic_read import open_consumer

    if from_offset is not None and from_timestamp is not None:
        err_console.print("[red]give --from-offset or --from-timestamp, not both[/red]")
        raise typer.Exit(2)
    with _table_operation(ctx, topic, bootstrap, RebuildError) as op:
        servers = op.servers
        starts = start_offsets(servers, topic, from_offset, from_timestamp)
        if adopt:
            if from_offset is None and from_timestamp is None:  # from now on: the high watermarks
                consumer = open_consumer(servers)
                try:
                    starts = {
                        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                        for p in starts
                    }
                finally:
                    consumer.close()
            snapshot = adopt_table(op.catalog, topic, op.config, starts, _topic_id(servers, topic))
            console.print(
                f"adopted the table for {topic} at snapshot {snapshot}; ingest continues from {starts}"
            )
            return
        with _counted(quiet, "rebuilding") as progress:
            result = rebuild(
                servers,
                op.catalog,
                topic,
                op.config,
                record_converter(op.cfg, op.config),
                starts,
                round_records=round_records,
                progress=progress,
            )
    console.print(
        f"rebuilt the table of {topic}: {result.rows} rows in {result.rounds} rounds"
        f"{' (resumed)' if result.resumed else ''}; swapped in at snapshot {result.snapshot_id}, "
        f"offsets {result.offsets}",
        highlight=False,
    )


def _topic_id(bootstrap: str, topic: str) -> str:
    """The topic's id as the broker reports it (the table records which topic fed it)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    described = admin.describe_topics(_topic_collection(topic), request_timeout=15)
    kafka_id = described[topic].result(15).topic_id
    # Kafka prints topic ids in base64; the pipeline records them as UUID strings.
    msb, lsb = kafka_id.get_most_significant_bits(), kafka_id.get_least_significant_bits()
    return str(uuid.UUID(int=((msb & (2**64 - 1)) << 64) | (lsb & (2**64 - 1))))


def _topic_collection(topic: str) -> Any:
    from confluent_kafka import TopicCollection

    return TopicCollection([topic])
