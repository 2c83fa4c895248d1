"""The CLI starts fast: a subcommand's module is imported only when that subcommand runs, so
``tabletopic --help`` and ``tabletopic topics ...`` load neither pyiceberg, SQLAlchemy, numpy, Kafka's
codec nor Spark; the top-level listing still shows every subcommand with its own help."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from tabletopic.cli import LAZY_COMMANDS, app, load_command

pytestmark = pytest.mark.timeout(120)

HEAVY = ("pyiceberg", "sqlalchemy", "numpy", "kio", "pyspark", "pyarrow", "duckdb", "confluent_kafka")


def modules_loaded_by(*argv: str) -> list[str]:
    code = (
        "import sys\n"
        f"sys.argv = ['tabletopic', *{list(argv)!r}]\n"
        "from tabletopic.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(eval(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [("--help",), ("topics", "--help"), ("tables", "list", "--help")])
def test_help_of_light_commands_imports_no_heavy_library(argv: tuple[str, ...]) -> None:
    assert modules_loaded_by(*argv) == []


def test_top_level_help_lists_every_subcommand_with_the_help_of_its_own_module() -> None:
    for name, lazy in LAZY_COMMANDS.items():
        module, _, attribute = lazy.target.partition(":")
        target = getattr(importlib.import_module(module), attribute)
        own = target.info.help if isinstance(target, typer.Typer) else (target.__doc__ or "")
        assert lazy.help == " ".join(str(own).split("\n\n")[0].split()), name
    listing = CliRunner().invoke(app, ["--help"]).output
    for name in LAZY_COMMANDS:
        assert name in listing


def test_tables_is_one_group_with_status_controls_and_operations() -> None:
    group = load_command("tables")
    assert isinstance(group, typer.core.TyperGroup)
    assert {"list", "describe", "resume", "verify", "redrive", "rebuild"} <= set(group.commands)


def test_a_lazy_group_of_one_subcommand_stays_a_group() -> None:
    """`tabletopic partitions move TOPIC PARTITION --to N` as documented: loading the app lazily
    must not collapse a one-command group into its command."""
    from tabletopic.cli import load_command

    command = load_command("partitions")
    assert "move" in getattr(command, "commands", {}), command


def test_a_groups_listing_shows_each_commands_summary_on_one_line_not_broken_where_the_source_was() -> None:
    """Typer's rich listing kept the line breaks of a docstring's first paragraph: ``--help`` broke
    serve's summary after "table pipeline," and ``cluster --help`` restart's after "(stopped
    gracefully", with the rest of the line empty. Wide enough, each summary is one line."""
    wide = {"COLUMNS": "400"}
    top = CliRunner().invoke(app, ["--help"], env=wide).output
    assert "table pipeline, admin API. Stops cleanly on Ctrl-C / SIGTERM." in top
    listing = CliRunner().invoke(app, ["cluster", "--help"], env=wide).output
    assert "(stopped gracefully first if it still runs), on the same ports." in listing
    for name in LAZY_COMMANDS:
        command = load_command(name)
        for subcommand in getattr(command, "commands", {}).values():
            assert "\n" not in (subcommand.short_help or ""), (name, subcommand.name)
