"""``tabletopic cluster up`` (a whole cluster on this machine, whose brokers ``cluster add|stop|restart``
start and stop while it runs), ``tabletopic cluster status``
(who is alive, who leads what, who coordinates which group and table), read from the metadata
database the brokers share and written by ``status_report``, ``tabletopic cluster unregister N``
(remove a broker that left for good) and ``tabletopic cluster balance [--dry-run]`` (the
auto-balancer's plan for the cluster as it is now, every move with its reason; without
``--dry-run`` the moves are asked for the way the controller's own rounds ask: reassignment
targets, not pinned)."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import sqlalchemy as sa
import typer
from rich.markup import escape

from tabletopic import database
from tabletopic.cli_common import (
    ConfigFileOption,
    OverrideOption,
    console,
    err_console,
    load_config,
    print_table,
)
from tabletopic.cluster import events
from tabletopic.cluster import settings as keys
from tabletopic.cluster.db import (
    MIGRATIONS,
    ClusterMetadata,
    ClusterSnapshot,
    UnregisterRefused,
)
from tabletopic.cluster.status_report import rate, render
from tabletopic.config import DEFAULT_CLUSTER_DIR, Config
from tabletopic.ids import NodeId
from tabletopic.leader_offsets import leader_high_watermarks
from tabletopic.settings import METADATA_URL

cluster_app = typer.Typer(help="Run and inspect a cluster of brokers.", no_args_is_help=True)


class WalChoice(StrEnum):
    """``cluster up --wal``: the brokers' s3stream.wal.mode."""

    SHARED = "shared"
    OBJECT = "object"


@cluster_app.command("up")
def up(
    nodes: Annotated[int, typer.Option("--nodes", "-n", help="Number of brokers.", min=1, max=32)] = 3,
    racks: Annotated[
        str, typer.Option("--racks", help="Comma-separated racks, dealt to brokers in turn.")
    ] = "",
    data_dir: Annotated[
        Path, typer.Option("--data-dir", help="Where PostgreSQL, SeaweedFS, brokers keep data.")
    ] = DEFAULT_CLUSTER_DIR,
    base_port: Annotated[
        int,
        typer.Option(
            "--base-port",
            help="Kafka port of broker 1; broker N adds 10 x (N-1) to it and to the console (8080), "
            "registry (8081) and catalog (8181) ports. A taken port is replaced by a free one (said "
            "so). 0: free ports for everything.",
        ),
    ] = (9092),
    wal: Annotated[
        WalChoice,
        typer.Option(
            "--wal",
            help="`shared`: each broker's WAL is a directory under --data-dir every broker reaches, "
            "acknowledged after an fsync and taken over by a live broker when its broker dies. "
            "`object`: appends are acknowledged once stored in a batch object (no disk state).",
        ),
    ] = WalChoice.SHARED,
    override: OverrideOption = None,
) -> None:
    """Start PostgreSQL, SeaweedFS and N brokers on loopback; Ctrl-C stops everything."""
    from tabletopic.cluster.local import CLUSTER_FILE, LocalCluster, missing_for_cluster_up
    from tabletopic.cluster.up_control import not_started, serve_requests

    missing = missing_for_cluster_up()
    if missing:
        for line in missing:
            err_console.print(f"[red]error:[/red] {escape(line)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    extra = dict(item.split("=", 1) for item in override or [] if "=" in item)
    cluster = LocalCluster(
        data_dir.resolve(),
        nodes=nodes,
        racks=[r.strip() for r in racks.split(",") if r.strip()],
        base_port=base_port,
        settings=extra,
        wal=wal.value,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        console.print(f"starting PostgreSQL, SeaweedFS and {nodes} brokers under {cluster.root} …")
        began = time.monotonic()
        cluster.start()
        took = time.monotonic() - began
        assert cluster.seaweedfs is not None
        for note in cluster.notes:
            console.print(f"note: {note}", highlight=False)
        for absent in not_started(cluster.metadata_url, set(cluster.brokers)):
            console.print(
                f"note: broker {absent} of this cluster was not started (--nodes {nodes}): "
                f"`tabletopic cluster add --id {absent}` starts it, `tabletopic cluster unregister "
                f"{absent}` removes it for good",
                highlight=False,
            )
        console.print(f"bootstrap servers: {cluster.bootstrap}", highlight=False)
        console.print(f"metadata.url:      {cluster.metadata_url}", highlight=False)
        console.print(f"S3 endpoint:       {cluster.seaweedfs.endpoint} (bucket {cluster.seaweedfs.bucket})")
        for node in cluster.brokers.values():
            rack = node.settings.get("broker.rack", "-")
            console.print(
                f"broker {node.node_id} (rack {rack}): kafka {node.bootstrap}  "
                f"admin http://127.0.0.1:{node.admin_port}  registry http://127.0.0.1:{node.registry_port}  "
                f"catalog http://127.0.0.1:{node.catalog_port}  log {node.log_path}",
                highlight=False,
            )
        here = "" if data_dir == DEFAULT_CLUSTER_DIR else f" --data-dir {data_dir}"
        console.print(f"endpoints written to {cluster.root / CLUSTER_FILE}", highlight=False)
        console.print(f"status: tabletopic cluster status{here}", highlight=False)
        console.print(f"cluster is up ({took:.1f} s); Ctrl-C stops it")
        takeovers = TakeoverWatch(cluster.metadata_url)
        try:
            while not stop.wait(1.0):
                for node_id, message in cluster.check_brokers():
                    err_console.print(f"[red]broker down:[/red] {message}", highlight=False, soft_wrap=True)
                    takeovers.watch(node_id)
                serve_requests(cluster, lambda line: console.print(line, highlight=False))
                running = {n for n, node in cluster.brokers.items() if node.process is not None}
                for line in takeovers.poll(running):
                    console.print(line, highlight=False)
        finally:
            takeovers.close()
    except RuntimeError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False)
        raise typer.Exit(1) from exc
    finally:
        console.print("stopping the cluster …")
        began = time.monotonic()
        cluster.stop()
        console.print(
            f"cluster stopped ({time.monotonic() - began:.1f} s); its data stays in {cluster.root}, "
            "and the same command starts it again",
            highlight=False,
        )


def takeover_report(node_id: int, partitions: set[tuple[str, int]], snapshot: ClusterSnapshot) -> str | None:
    """Who leads the partitions dead broker ``node_id`` led, once every one of them has a new
    leader (None until then): the survivors' own log says only "now leading N more partitions"."""
    gained: dict[int, int] = {}
    for key in partitions:
        row = snapshot.partitions.get(key)
        if row is None:  # deleted meanwhile
            continue
        if row.leader is None or row.leader == node_id:
            return None
        gained[row.leader] = gained.get(row.leader, 0) + 1
    if not gained:
        return None
    by = ", ".join(f"broker {leader} ({count})" for leader, count in sorted(gained.items()))
    return f"broker {node_id} is dead: the {sum(gained.values())} partitions it led are now led by {by}"


class TakeoverWatch:
    """After a broker dies, say once who took over its partitions (read from the metadata
    database, as ``cluster status`` reads it), or that they are still without a leader."""

    def __init__(self, metadata_url: str, give_up_s: float = 120.0) -> None:
        self.metadata_url = metadata_url
        self.give_up_s = give_up_s
        self.engine: sa.Engine | None = None
        self.pending: dict[int, tuple[set[tuple[str, int]], float]] = {}

    def _snapshot(self) -> ClusterSnapshot | None:
        try:
            if self.engine is None:
                self.engine = database.create_engine(self.metadata_url)
            return ClusterMetadata(self.engine).snapshot()
        except Exception:  # the database may be restarting: try again next round
            return None

    def watch(self, node_id: int) -> None:
        import time

        snapshot = self._snapshot()
        if snapshot is None:
            return
        led = {key for key, row in snapshot.partitions.items() if row.leader == node_id}
        if led:
            self.pending[node_id] = (led, time.monotonic() + self.give_up_s)

    def poll(self, running: set[int]) -> list[str]:
        """Lines for the dead brokers whose partitions all have a new leader now; a broker that
        runs again (restarted before its session expired keeps its partitions) is dropped."""
        import time

        for node_id in [n for n in self.pending if n in running]:
            del self.pending[node_id]
        if not self.pending:
            return []
        snapshot = self._snapshot()
        if snapshot is None:
            return []
        lines = []
        for node_id, (partitions, give_up_at) in list(self.pending.items()):
            report = takeover_report(node_id, partitions, snapshot)
            if report is None and time.monotonic() > give_up_at:
                report = (
                    f"broker {node_id} is dead and some of its {len(partitions)} partitions still have "
                    "no other leader; see tabletopic cluster status"
                )
            if report is not None:
                lines.append(report)
                del self.pending[node_id]
        return lines

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()


MetadataUrlOption = Annotated[
    str | None,
    typer.Option(
        "--metadata-url",
        envvar="TABLETOPIC_METADATA_URL",
        help="The brokers' metadata.url (default: the one `cluster up` wrote into --data-dir).",
    ),
]
ClusterDirOption = Annotated[
    Path,
    typer.Option("--data-dir", help="The data directory of `tabletopic cluster up` (its cluster.json)."),
]


def cluster_metadata_url(explicit: str | None, configured: str | None, data_dir: Path) -> str | None:
    """Which metadata database to read: ``--metadata-url`` (or its environment variable), else the
    configuration's ``metadata.url``, else the one ``cluster up`` recorded in ``data_dir``."""
    if explicit or configured:
        return explicit or configured
    from tabletopic.cluster.local import CLUSTER_FILE

    try:
        recorded = json.loads((data_dir / CLUSTER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    url = recorded.get("metadata_url") if isinstance(recorded, dict) else None
    return url if isinstance(url, str) and url else None


def _no_metadata_url(data_dir: Path) -> typer.Exit:
    err_console.print(
        f"[red]error:[/red] no cluster found: {data_dir / 'cluster.json'} does not exist (start one "
        "with `tabletopic cluster up`, or give --data-dir DIR of one, or --metadata-url, the brokers' "
        "metadata.url)",
        highlight=False,
        soft_wrap=True,
    )
    return typer.Exit(2)


def _cluster_database(
    metadata_url: str | None, data_dir: Path, cfg: Config, changes: bool = False
) -> sa.Engine:
    """The brokers' metadata database (found as :func:`cluster_metadata_url` says), once it holds
    the cluster tables this release reads: brokers migrate it as they start, so a CLI newer than
    every running broker meets a schema without the columns it selects. An older CLI reads a newer
    schema (its migrations only add). A command that ``changes`` the cluster needs PostgreSQL,
    whose NOTIFY wakes the brokers."""
    url = cluster_metadata_url(metadata_url, cfg.get(METADATA_URL), data_dir)
    if not url:
        raise _no_metadata_url(data_dir)
    if changes and not url.startswith("postgresql"):
        err_console.print("[red]error:[/red] give --metadata-url (the brokers' PostgreSQL metadata.url)")
        raise typer.Exit(2)
    engine = database.create_engine(url)
    found, known = database.schema_version(engine, "cluster"), len(MIGRATIONS)
    if found >= known:
        return engine
    engine.dispose()
    if found == 0:
        err_console.print("[red]error:[/red] no cluster is registered in this database")
    else:
        err_console.print(
            f"[red]error:[/red] the cluster's metadata schema is at version {found} and this tabletopic "
            f"reads version {known}: start one broker of this release (it migrates the database as it "
            "starts), or run the tabletopic the brokers run",
            highlight=False,
        )
    raise typer.Exit(1)


UpDirOption = Annotated[
    Path, typer.Option("--data-dir", help="The data directory of the running `tabletopic cluster up`.")
]
WaitOption = Annotated[float, typer.Option("--timeout", help="Seconds to wait for it.")]


def _ask_cluster_up(data_dir: Path, action: str, node_id: int | None, timeout: float) -> None:
    """Have the running ``cluster up`` on ``data_dir`` do ``action`` (see ``up_control``), print
    what it says and exit 1 when it was not done."""
    from tabletopic.cluster.local import CLUSTER_FILE
    from tabletopic.cluster.up_control import NotRunning, ask, next_broker_id, running_cluster

    try:
        recorded = running_cluster(data_dir, CLUSTER_FILE)
    except NotRunning:
        err_console.print(
            f"[red]error:[/red] no `tabletopic cluster up` is running on {data_dir} (its {CLUSTER_FILE} "
            "names none alive); start the cluster again with `tabletopic cluster up`",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1) from None
    node_id = next_broker_id(recorded) if node_id is None else node_id
    owner = recorded["pid"]
    console.print(f"asked `cluster up` (pid {owner}) to {action} broker {node_id} …", highlight=False)
    done, message = ask(data_dir, action, node_id, timeout)
    if not done:
        err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    console.print(message, highlight=False, soft_wrap=True)


@cluster_app.command("restart")
def restart(
    node_id: Annotated[int, typer.Argument(help="The broker to restart (its broker.id).", min=1)],
    data_dir: UpDirOption = DEFAULT_CLUSTER_DIR,
    timeout: WaitOption = 150.0,
) -> None:
    """Restart one broker of the `tabletopic cluster up` running on --data-dir (stopped gracefully
    first if it still runs), on the same ports."""
    _ask_cluster_up(data_dir, "restart", node_id, timeout)


@cluster_app.command("add")
def add(
    node_id: Annotated[
        int | None, typer.Option("--id", help="Its broker.id (default: one past the highest).", min=1)
    ] = None,
    data_dir: UpDirOption = DEFAULT_CLUSTER_DIR,
    timeout: WaitOption = 150.0,
) -> None:
    """Start one more broker in the `tabletopic cluster up` running on --data-dir (scaling out): it
    registers and the controller's balancing gives it partitions, with no data copied."""
    _ask_cluster_up(data_dir, "add", node_id, timeout)


@cluster_app.command("stop")
def stop(
    node_id: Annotated[int, typer.Argument(help="The broker to stop (its broker.id).", min=1)],
    data_dir: UpDirOption = DEFAULT_CLUSTER_DIR,
) -> None:
    """Stop one broker of the `tabletopic cluster up` running on --data-dir as SIGTERM does (scaling
    in): it hands its partitions to the other brokers, then exits and stays stopped."""
    from tabletopic.cluster.up_control import STOP_GRACE_S

    # No --timeout: `cluster up` kills a broker that has not stopped within STOP_GRACE_S.
    _ask_cluster_up(data_dir, "stop", node_id, STOP_GRACE_S + 30)


@cluster_app.command("unregister")
def unregister(
    node_id: Annotated[int, typer.Argument(help="The broker to remove (its broker.id).", min=0)],
    metadata_url: MetadataUrlOption = None,
    data_dir: ClusterDirOption = DEFAULT_CLUSTER_DIR,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Remove a broker that left for good (scaled in, its machine gone) from the cluster, as
    `kafka-cluster unregister` does: `cluster status` and the console stop listing it. Refused
    while it is alive or anything still waits on it."""
    cfg = load_config(None, config, override)
    engine = _cluster_database(metadata_url, data_dir, cfg, changes=True)
    try:
        epoch = ClusterMetadata(engine).unregister(NodeId(node_id), by="`tabletopic cluster unregister`")
    except UnregisterRefused as exc:
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    finally:
        engine.dispose()
    console.print(
        f"unregistered broker {node_id}: `cluster status` and the console no longer list it; a broker "
        f"started again with broker.id={node_id} joins as a new incarnation (epoch {epoch + 1})",
        highlight=False,
    )


@cluster_app.command("status")
def status(
    metadata_url: MetadataUrlOption = None,
    data_dir: ClusterDirOption = DEFAULT_CLUSTER_DIR,
    internal: Annotated[
        bool, typer.Option("--internal", help="Also list Kafka's internal topics (__consumer_offsets, ...).")
    ] = False,
    topic: Annotated[
        list[str] | None,
        typer.Option("--topic", help="List only this topic's partitions (repeatable; internal ones too)."),
    ] = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Brokers (id, rack, epoch, state alive/draining/dead/stopped, load), the controller, leaders per
    partition (user topics; --internal adds Kafka's own, --topic picks some), group and table
    coordinators."""
    cfg = load_config(None, config, override)
    engine = _cluster_database(metadata_url, data_dir, cfg)
    try:
        snapshot = ClusterMetadata(engine).snapshot()
        groups = _rows(engine, "SELECT group_id FROM group_metadata", "group_metadata")
        tables = _rows(
            engine,
            "SELECT topic, owner, epoch, claim, expires_at FROM table_coordinator_leases",
            "table_coordinator_leases",
        )
        marks = {**_high_watermarks(engine), **_leaders_high_watermarks(snapshot)}
        timeline = events.recent(engine, limit=events.KEEP)
    finally:
        engine.dispose()
    report = render(
        snapshot,
        [str(g[0]) for g in groups],
        tables,
        cfg.get(keys.GROUP_PARTITIONS),
        internal=internal,
        topics=set(topic) if topic else None,
        plain=not console.is_terminal,
        high_watermarks=marks,
        timeline=timeline,
    )
    sys.stdout.write(report + "\n")  # never wrapped or cut to a terminal width


def _high_watermarks(engine: sa.Engine) -> dict[tuple[str, int], int]:
    """Each partition's high watermark: its stream's committed end in the metadata database (in
    cluster mode an acknowledged record is in a committed object), whichever broker leads it."""
    inspector = sa.inspect(engine)
    if not (inspector.has_table("broker_partitions") and inspector.has_table("s3stream_streams")):
        return {}
    query = (
        "SELECT p.topic, p.partition, s.end_offset FROM broker_partitions p "
        "JOIN s3stream_streams s ON s.stream_id = p.stream_id"
    )
    try:
        with engine.connect() as conn:
            return {(str(r[0]), int(r[1])): int(r[2]) for r in conn.execute(sa.text(query))}
    except sa.exc.SQLAlchemyError:
        return {}


#: ``cluster status`` starts its client cold (a connection, Metadata, then ListOffsets) and runs once:
#: it waits longer for the leaders than the console's refreshes, whose client is warm.
STATUS_LEADER_TIMEOUT_S = 5.0


def _leaders_high_watermarks(snapshot: ClusterSnapshot) -> dict[tuple[str, int], int]:
    """Each partition's high watermark as its leader answers it (the database's trails it by the
    upload interval on the shared WAL); none where the brokers cannot be reached from here or want
    credentials (the database's figures stand)."""
    addresses = [
        f"{host}:{port}"
        for node in snapshot.nodes.values()
        if node.alive
        for host, port in list(node.endpoints.values())[:1]
    ]
    if not addresses:
        return {}
    config = {"bootstrap.servers": ",".join(addresses), "log_level": 0}
    return leader_high_watermarks(config, list(snapshot.partitions), timeout=STATUS_LEADER_TIMEOUT_S)


def _rows(engine: sa.Engine, query: str, table: str) -> list[Any]:
    if not sa.inspect(engine).has_table(table):
        return []
    with engine.connect() as conn:
        return list(conn.execute(sa.text(query)))


def _deviation(value: float, mean: float) -> str:
    return f"{(value - mean) / mean:+.0%}" if mean > 0 else "-"


@cluster_app.command("balance")
def balance(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; move nothing.")] = False,
    metadata_url: MetadataUrlOption = None,
    data_dir: ClusterDirOption = DEFAULT_CLUSTER_DIR,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Plan one balancing round from the load the brokers last reported (bytes in/out per second
    per partition) and print it with the reason for every move."""
    from rich.table import Table as RichTable

    from tabletopic.cluster.autobalance import plan_for
    from tabletopic.cluster.node import ClusterSettings

    loaded = load_config(None, config, override)
    engine = _cluster_database(metadata_url, data_dir, loaded, changes=not dry_run)
    try:
        meta = ClusterMetadata(engine)
        plan = plan_for(meta.snapshot(), ClusterSettings.from_config(loaded, NodeId(0)).auto_balancer.planner)
        table = RichTable(title="broker load (bytes per second)")
        for column in ("broker", "in", "out", "in after", "out after"):
            table.add_column(column)
        for broker, (bytes_in, bytes_out) in sorted(plan.before.items()):
            after_in, after_out = plan.after[broker]
            table.add_row(
                str(broker),
                f"{rate(bytes_in)} ({_deviation(bytes_in, plan.mean_in)})",
                f"{rate(bytes_out)} ({_deviation(bytes_out, plan.mean_out)})",
                f"{rate(after_in)} ({_deviation(after_in, plan.mean_in)})",
                f"{rate(after_out)} ({_deviation(after_out, plan.mean_out)})",
            )
        print_table(table)
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
