"""Options and helpers shared by every CLI command (kept apart from ``cli.py`` so subcommand modules
can import them without a cycle). Subcommand modules keep heavy imports (pyspark, pyiceberg) inside
their functions so ``tabletopic --help`` stays fast."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from tabletopic.config import Config, ConfigError

console = Console()
err_console = Console(stderr=True)

DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", "-d", help="Node data directory (default: data.dir, ./data)."),
]
ConfigFileOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="A server.properties-style file."),
]
OverrideOption = Annotated[
    list[str] | None,
    typer.Option("--override", "-o", help="key=value, repeatable; wins over file and environment."),
]


def load_config(data_dir: Path | None, config_file: Path | None, overrides: list[str] | None) -> Config:
    try:
        return Config.load(config_file=config_file, overrides=overrides or [], data_dir=data_dir)
    except ConfigError as exc:
        err_console.print(f"[red]configuration error:[/red] {exc}")
        raise typer.Exit(2) from exc


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )
    # Third-party chatter that says nothing a user can act on.
    for noisy in ("py4j", "botocore", "urllib3", "uvicorn.error", "aiokafka", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
