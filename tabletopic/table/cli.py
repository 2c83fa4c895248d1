"""``tabletopic tables list|describe|commit|pause|resume``: the table pipeline's status from a running
node, and its controls."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table as RichTable

from tabletopic.cli_common import (
    admin_call,
    admin_node,
    ago,
    console,
    or_dash,
    print_table,
)

app = typer.Typer(help="Table topics: their Iceberg tables, commits and lag.", no_args_is_help=True)

app.callback()(admin_node)


def _on(row: dict[str, Any]) -> str:
    coordinator = row.get("coordinator")
    return "-" if coordinator is None else f"broker {coordinator}"


def last_commit(when: float | None, snapshot: int | None) -> str:
    """``last commit 12 s ago (snapshot 123)``, or ``no commit yet`` (never ``snapshot None``)."""
    if snapshot is None:
        return "no commit yet" if when is None else f"last commit {ago(when)}"
    return f"last commit {ago(when)} (snapshot {snapshot})"


@app.command("list")
def list_tables(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every table topic of the node or cluster: table, state, coordinating broker, last commit,
    rows, lag, skipped records."""
    rows = admin_call(ctx.obj, "/v1/tables")
    if as_json:
        console.print_json(json.dumps(rows))
        return
    table = RichTable(
        "topic", "table", "state", "coordinator", "last commit", "rows", "lag (records)", "skipped", "error"
    )
    for r in rows:
        table.add_row(
            r["topic"],
            r["table"],
            r["state"],
            _on(r),
            ago(r["last_commit_time"], never="-"),
            or_dash(r["rows_committed"]),
            or_dash(r["lag_records"]),
            or_dash(r["records_skipped"]),
            (r["last_error"] or "")[:60],
        )
    print_table(table)


@app.command("describe")
def describe_table(ctx: typer.Context, topic: str) -> None:
    """One table topic in detail: committed offsets against high watermarks per partition."""
    r = admin_call(ctx.obj, f"/v1/tables/{topic}")
    console.print(f"[bold]{r['topic']}[/bold] -> {r['table']}  state {r['state']}  on {_on(r)}")
    console.print(
        f"{last_commit(r['last_commit_time'], r['last_commit_snapshot'])}, "
        f"{r['commits']} commits, {r['rows_committed']} rows, {r['records_skipped']} skipped, "
        f"lag {r['lag_records']} records / {r['lag_seconds']:.0f} s",
        highlight=False,
    )
    if r["last_error"]:
        console.print(f"[red]last error:[/red] {r['last_error']}")
    if r.get("warning"):  # a coordinator of an earlier release sends none
        console.print(f"[yellow]warning:[/yellow] {r['warning']}")
    partitions = RichTable("partition", "committed offset", "high watermark", "lag")
    for p, hw in r["high_watermarks"].items():
        committed = r["committed_offsets"].get(p, 0)
        partitions.add_row(p, str(committed), str(hw), str(max(hw - committed, 0)))
    print_table(partitions)


@app.command("commit")
def commit_now(ctx: typer.Context, topic: str) -> None:
    """Run the topic's next ingest cycle now instead of at the end of its commit interval."""
    admin_call(ctx.obj, f"/v1/tables/{topic}/commit", method="POST")
    console.print(f"commit of {topic} triggered")


@app.command("pause")
def pause(ctx: typer.Context, topic: str) -> None:
    """Start no more ingest cycles for the topic (records keep arriving and wait) until resumed."""
    admin_call(ctx.obj, f"/v1/tables/{topic}/pause", method="POST")
    console.print(f"{topic} paused")


@app.command("resume")
def resume(ctx: typer.Context, topic: str) -> None:
    """Resume a paused topic, or let a FAILED one try again now instead of after its backoff: it
    starts from the offsets its table holds, so every record is committed once."""
    admin_call(ctx.obj, f"/v1/tables/{topic}/resume", method="POST")
    console.print(f"{topic} resumed (see `tabletopic tables describe {topic}`)")
