"""``tabletopic groups list|describe|reset-offsets``: consumer groups of the node, or of the whole
cluster, through the admin API (``admin.listener`` of the node's configuration, or ``--admin-url``).

Through the admin API rather than a Kafka client of its own: the node already asks every group's
coordinator (any broker of a cluster may be asked) and each partition's leader for its high
watermark, and a reset goes through Kafka's own checks there (a group with members is refused).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.table import Table as RichTable

from tabletopic.cli_common import (
    admin_call,
    admin_node,
    console,
    or_dash,
    print_table,
)

groups_app = typer.Typer(
    help="Consumer groups: members, committed offsets and lag, offset resets.", no_args_is_help=True
)

groups_app.callback()(admin_node)


def _path(group: str) -> str:
    return f"/v1/groups/{quote(group, safe='')}"


@groups_app.command("list")
def list_groups(ctx: typer.Context) -> None:
    """Every consumer group: state, type, members and total lag."""
    rows = admin_call(ctx.obj, "/v1/groups")
    table = RichTable("group", "state", "type", "members", "lag")
    for r in rows:
        table.add_row(
            r["group_id"], r["state"], r["protocol_type"] or "-", str(r["members"]), or_dash(r["lag"])
        )
    print_table(table)
    if not rows:
        console.print("no consumer groups")


@groups_app.command("describe")
def describe_group(ctx: typer.Context, group: str) -> None:
    """One group: its members with their assignments, and each committed offset with its lag."""
    found: dict[str, Any] = admin_call(ctx.obj, _path(group))
    coordinator = found.get("coordinator")
    where = "" if coordinator is None else f", coordinator broker {coordinator}"
    console.print(
        f"[bold]{found['group_id']}[/bold]  state {found['state']}, "
        f"protocol {found.get('protocol_type') or '-'}/{found.get('protocol_name') or '-'}{where}",
        highlight=False,
    )
    members = RichTable("member", "client id", "host", "assignment")
    for m in found["members"]:
        assigned = "; ".join(f"{t}: {', '.join(map(str, p))}" for t, p in (m["assignment"] or {}).items())
        members.add_row(m["member_id"], m["client_id"], m["client_host"], assigned or "-")
    print_table(members)
    # A share group's partitions start at their first record not yet acknowledged (no commits).
    start = "start offset" if found.get("protocol_type") == "share" else "committed offset"
    offsets = RichTable("topic", "partition", start, "high watermark", "lag")
    for o in found["offsets"]:
        offsets.add_row(
            o["topic"],
            str(o["partition"]),
            or_dash(o["committed"]),
            or_dash(o["high_watermark"]),
            or_dash(o["lag"]),
        )
    print_table(offsets)


@groups_app.command("reset-offsets")
def reset_offsets(
    ctx: typer.Context,
    group: str,
    topic: Annotated[str, typer.Option("--topic", "-t", help="The topic whose offsets are reset.")],
    to: Annotated[
        str, typer.Option("--to", help="earliest, latest, timestamp (ms, in --value) or offset (--value).")
    ],
    value: Annotated[int | None, typer.Option("--value", help="The timestamp (ms) or offset.")] = None,
    partition: Annotated[
        list[int] | None, typer.Option("--partition", "-p", help="Repeatable; default: every partition.")
    ] = None,
) -> None:
    """Move a group's committed offsets on a topic (Kafka refuses it while the group has members)."""
    if to not in ("earliest", "latest", "timestamp", "offset"):
        raise typer.BadParameter("one of earliest, latest, timestamp, offset", param_hint="--to")
    body = {"topic": topic, "to": to, "value": value, "partitions": partition}
    answer = admin_call(ctx.obj, f"{_path(group)}/offsets", method="POST", body=body)
    moved = ", ".join(f"{p} -> {o}" for p, o in sorted(answer["offsets"].items(), key=lambda i: int(i[0])))
    console.print(f"{group} on {topic}: {moved}", highlight=False)
