"""``tabletopic cluster balance [--dry-run]``: the auto-balancer's plan for the cluster as the
metadata database shows it now, every move with its reason; without ``--dry-run`` the moves are
asked for the way the controller's own rounds ask (reassignment targets, not pinned)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table as RichTable

from tabletopic.cli_common import (
    ConfigFileOption,
    DataDirOption,
    OverrideOption,
    console,
    err_console,
    load_config,
)

cluster_app = typer.Typer(
    help="Cluster mode: brokers sharing PostgreSQL and object storage.", no_args_is_help=True
)


def _rate(value: float) -> str:
    return f"{value / 1e6:.2f} MB/s" if value >= 1e5 else f"{value / 1e3:.1f} kB/s"


def _deviation(value: float, mean: float) -> str:
    return f"{(value - mean) / mean:+.0%}" if mean > 0 else "-"


@cluster_app.command("balance")
def balance(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; move nothing.")] = False,
    data_dir: DataDirOption = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Plan one balancing round from the load the brokers last reported (bytes in/out per second
    per partition) and print it with the reason for every move."""
    from tabletopic import database
    from tabletopic import settings as node_settings
    from tabletopic.cluster.autobalance import plan_for
    from tabletopic.cluster.db import ClusterMetadata
    from tabletopic.cluster.node import ClusterSettings

    loaded = load_config(data_dir, config, override)
    url = loaded.get(node_settings.METADATA_URL)
    if not url or not url.startswith("postgresql"):
        err_console.print("[red]set metadata.url to the cluster's PostgreSQL database[/red]")
        raise typer.Exit(2)
    engine = database.create_engine(url)
    try:
        meta = ClusterMetadata(engine)
        plan = plan_for(meta.snapshot(), ClusterSettings.from_config(loaded, 0).auto_balancer.planner)
        table = RichTable(title="broker load (bytes per second)")
        for column in ("broker", "in", "out", "in after", "out after"):
            table.add_column(column)
        for broker, (bytes_in, bytes_out) in sorted(plan.before.items()):
            after_in, after_out = plan.after[broker]
            table.add_row(
                str(broker),
                f"{_rate(bytes_in)} ({_deviation(bytes_in, plan.mean_in)})",
                f"{_rate(bytes_out)} ({_deviation(bytes_out, plan.mean_out)})",
                f"{_rate(after_in)} ({_deviation(after_in, plan.mean_in)})",
                f"{_rate(after_out)} ({_deviation(after_out, plan.mean_out)})",
            )
        console.print(table)
        if not plan.moves:
            console.print(f"no moves: {plan.note}")
            return
        for move in plan.moves:
            console.print(f"move {move.topic}-{move.partition} {move.source} -> {move.target}: {move.reason}")
        if dry_run:
            console.print(f"dry run: {len(plan.moves)} moves planned, none made")
            return
        meta.request_moves([(m.topic, m.partition, m.target) for m in plan.moves], pin=False)
        console.print(f"asked the controller for {len(plan.moves)} moves")
    finally:
        engine.dispose()
