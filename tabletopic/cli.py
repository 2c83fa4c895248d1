"""``tabletopic``: serve a node, run SQL, manage topics and tables, print config docs, run benches."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

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

app = typer.Typer(
    help="tabletopic: Kafka-compatible streaming on object storage, materialised into Iceberg tables.",
    no_args_is_help=True,
    add_completion=False,
)
config_app = typer.Typer(help="Inspect configuration keys.", no_args_is_help=True)
app.add_typer(config_app, name="config")

# Subcommand groups owned by their subsystems: (name, "module:typer_app_attribute").
SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("topics", "tabletopic.broker.cli:topics_app"),
    ("partitions", "tabletopic.broker.cli:partitions_app"),
    ("users", "tabletopic.broker.security.cli:users_app"),
    ("acls", "tabletopic.broker.security.acl_cli:acls_app"),
    ("tables", "tabletopic.table.cli:app"),
    ("storage", "tabletopic.s3stream.cli:storage_app"),
    ("cluster", "tabletopic.cluster.cli:cluster_app"),
)

for _name, _path in SUBCOMMANDS:
    _module, _, _attr = _path.partition(":")
    app.add_typer(getattr(importlib.import_module(_module), _attr), name=_name)

from tabletopic.spark.cli import sql as _sql_command  # noqa: E402 - top-level command owned by spark/

app.command("sql")(_sql_command)
importlib.import_module("tabletopic.spark.tables_cli")  # adds verify/redrive/rebuild to `tables`
app.command("demo")(importlib.import_module("tabletopic.demo").demo)  # first five minutes


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
    from tabletopic.config import NODE_UMASK, ConfigError, StartupError
    from tabletopic.platform import serve as serve_platform

    os.umask(NODE_UMASK)  # the node's files are its own (see tabletopic.config.make_private_dir)
    try:
        import uvloop

        uvloop.run(serve_platform(cfg))
    except (StartupError, ConfigError) as exc:
        # Something the user fixes (a busy port, a missing bucket, ...): the message names the key;
        # a traceback would only bury it.
        err_console.print(f"[red]cannot start:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


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
    "topics": {"--data-dir", "-d", "--override", "-o"},
    "users": {"--data-dir", "-d", "--override", "-o"},
    "acls": {"--data-dir", "-d", "--override"},  # -o is --operation there
}


def main() -> None:
    quiet_library_warnings()
    sys.argv = hoist_group_options(sys.argv, GROUP_OPTIONS)
    app()
