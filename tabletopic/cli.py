"""``tabletopic``: serve a node, run SQL, manage topics and tables, print config docs, run benches."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
import typer.main
from typer import _click as click  # typer 0.29 vendors click: its Command and Context types
from typer.core import TyperCommand, TyperGroup

from tabletopic.cli_common import (
    ConfigFileOption,
    DataDirOption,
    OverrideOption,
    console,
    err_console,
    hoist_group_options,
    load_config,
    quiet_library_warnings,
    setup_logging,
)


class LazyGroup(TyperGroup):
    """The top-level command group, loading a subcommand's module only when that subcommand runs.

    Importing every subsystem's CLI up front (pyiceberg, SQLAlchemy, numpy, the Kafka codec...) made
    ``tabletopic --help`` and ``tabletopic topics list`` take one to five seconds. The listing of
    ``--help`` shows each lazy subcommand from its entry in :data:`LAZY_COMMANDS` (name and help)
    without importing it; the module is imported when the subcommand is resolved to run (or to
    print its own help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        eager = super().list_commands(ctx)
        return [*eager, *(name for name in LAZY_COMMANDS if name not in eager)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            return _Placeholder(cmd_name, help=LAZY_COMMANDS[cmd_name].help)
        return None if command is None else one_line_summaries(command)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Placeholder) and name is not None:
            command = load_command(name)
        return name, command, rest


class _Placeholder(TyperCommand):
    """A lazy subcommand's line in the top-level help: its name and help, nothing imported."""


@dataclass(frozen=True)
class LazyCommand:
    """Where a subcommand lives (``module:attribute``, a Typer app or a command function) and the
    one-line help the top-level listing shows for it (kept beside the import path so listing needs
    no import; a test holds it equal to the module's own help)."""

    target: str
    help: str


# Subcommands owned by their subsystems, imported only when run.
LAZY_COMMANDS: dict[str, LazyCommand] = {
    "sql": LazyCommand(
        "tabletopic.spark.cli:sql",
        "Run SQL against the platform's Iceberg catalog: in the node's warm Spark, or DuckDB in process.",
    ),
    "topics": LazyCommand("tabletopic.broker.cli:topics_app", "Manage Kafka topics."),
    "groups": LazyCommand(
        "tabletopic.api.groups_cli:groups_app",
        "Consumer groups: members, committed offsets and lag, offset resets.",
    ),
    "partitions": LazyCommand(
        "tabletopic.broker.cli:partitions_app", "Move partitions between brokers (cluster mode)."
    ),
    "users": LazyCommand(
        "tabletopic.broker.security.cli:users_app", "Manage SCRAM users (SASL/SCRAM and PLAIN logins)."
    ),
    "acls": LazyCommand(
        "tabletopic.broker.security.acl_cli:acls_app",
        "Manage ACLs (needs authorizer.class.name on the broker).",
    ),
    # One mount for every ``tables`` command: the status and controls (table/cli.py) and the
    # operations that may need Spark (spark/tables_cli.py, which adds them to the same group).
    "tables": LazyCommand(
        "tabletopic.spark.tables_cli:tables_app", "Table topics: their Iceberg tables, commits and lag."
    ),
    "storage": LazyCommand(
        "tabletopic.s3stream.cli:storage_app", "Inspect and verify s3stream storage (streams, objects, WAL)."
    ),
    "cluster": LazyCommand("tabletopic.cluster.cli:cluster_app", "Run and inspect a cluster of brokers."),
    "demo": LazyCommand(
        "tabletopic.demo:demo",
        "Produce sample Avro orders to a table topic on a running node and query its Iceberg table.",
    ),
}


def one_line_summaries(command: click.Command) -> click.Command:
    """Give ``command`` and every command below it a one-line summary: its docstring's first
    paragraph with the line breaks of the source taken out.

    A group's help lists its commands with that paragraph, and Typer (0.29, rich mode) keeps its
    line breaks there, so ``tabletopic --help`` broke serve's line after "table pipeline," and
    ``cluster --help`` restart's after "(stopped gracefully", wherever the source wrapped.
    """
    if command.short_help is None and command.help:
        first_paragraph = inspect.cleandoc(command.help).split("\n\n")[0]
        command.short_help = " ".join(first_paragraph.split())
    if isinstance(command, TyperGroup):  # every group Typer builds
        for subcommand in command.commands.values():
            one_line_summaries(subcommand)
    return command


def load_command(name: str) -> click.Command:
    """Import subcommand ``name`` and turn it into the click command Typer would have built."""
    module, _, attribute = LAZY_COMMANDS[name].target.partition(":")
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):
        # A group even with one subcommand (`partitions move`): get_command would collapse an app
        # of one command into that command, changing the command line users type.
        command: click.Command = typer.main.get_group(target)
    else:
        single = typer.Typer()
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    return one_line_summaries(command)


app = typer.Typer(
    cls=LazyGroup,
    help="tabletopic: Kafka-compatible streaming on object storage, materialised into Iceberg tables.",
    no_args_is_help=True,
    add_completion=False,
)
config_app = typer.Typer(help="Inspect configuration keys.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@app.command()
def serve(
    data_dir: DataDirOption = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Start a node: Kafka listener, storage, schema registry, Iceberg REST catalog, table pipeline,
    admin API. Stops cleanly on Ctrl-C / SIGTERM."""
    cfg = load_config(data_dir, config, override, endpoints=False)
    from tabletopic import settings

    setup_logging(cfg.get(settings.LOG_LEVEL))
    from tabletopic.config import EXIT_REJOIN, NODE_UMASK, ConfigError, LeftCluster, StartupError
    from tabletopic.platform import serve as serve_platform

    os.umask(NODE_UMASK)  # the node's files are its own (see tabletopic.config.make_private_dir)
    try:
        import uvloop

        uvloop.run(serve_platform(cfg))
    except (StartupError, ConfigError) as exc:
        # Something the user fixes (a busy port, a missing bucket, ...): the message names the key;
        # a traceback would only bury it.
        from rich.markup import escape

        err_console.print(f"[red]cannot start:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except LeftCluster as exc:  # a supervisor that restarts on failure has it join again
        from rich.markup import escape

        err_console.print(f"[yellow]stopped:[/yellow] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_REJOIN) from None


@config_app.command("docs")
def config_docs() -> None:
    """Print the Markdown reference of every configuration key with its default."""
    from tabletopic.config import render_docs

    console.print(render_docs(), markup=False, highlight=False, soft_wrap=True)


@config_app.command("show")
def config_show(
    data_dir: DataDirOption = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Print the effective configuration (defaults, file, environment and overrides resolved)."""
    cfg = load_config(data_dir, config, override, endpoints=False)
    from tabletopic.config import format_value

    # Plain lines as a properties file holds them (never wrapped to a terminal's width).
    typer.echo("\n".join(f"{key}={format_value(value)}" for key, value in sorted(cfg.as_dict().items())))


BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"


def bench_names() -> list[str]:
    """The benchmarks there are: one ``bench/NAME_bench.py`` script each (the help lists these)."""
    return sorted(p.name.removesuffix("_bench.py") for p in BENCH_DIR.glob("*_bench.py"))


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help=f"Benchmark: {', '.join(bench_names()) or 'none found'}.")],
    args: Annotated[list[str] | None, typer.Argument(help="Arguments passed to the bench script.")] = None,
) -> None:
    """Run one of the benchmark scripts in bench/ (they print figures and ratios)."""
    script = BENCH_DIR / f"{name}_bench.py"
    if not script.exists():
        raise typer.BadParameter(f"no benchmark named {name}; there are: {', '.join(bench_names())}")
    raise typer.Exit(subprocess.call([sys.executable, str(script), *(args or [])]))


# Options of a command group that users also type after its subcommand (`tables list --admin-url U`).
GROUP_OPTIONS = {
    "tables": {"--admin-url", "--data-dir", "-d", "--config", "-c", "--override", "-o"},
    "groups": {"--admin-url", "--data-dir", "-d", "--config", "-c", "--override", "-o"},
    "topics": {"--data-dir", "-d", "--override", "-o"},
    "users": {"--data-dir", "-d", "--override", "-o"},
    "acls": {"--data-dir", "-d", "--override"},  # -o is --operation there
}


def main() -> None:
    quiet_library_warnings()
    sys.argv = hoist_group_options(sys.argv, GROUP_OPTIONS)
    app()
