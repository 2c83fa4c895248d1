"""``tabletopic topics``: create, list, describe, delete and alter-config, through the Kafka admin
protocol (confluent-kafka's AdminClient) against any bootstrap server, so it works as well against
a remote node as a local one. The client's own security settings (a SASL or SSL listener) come from
``--command-config`` and ``-X``, as for ``tabletopic users``.

``confluent_kafka.admin`` is the documented home of NewTopic, ConfigResource and friends, but the
package imports them from private modules without re-exporting them for type checkers, hence the
``attr-defined`` ignores on those imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tabletopic.cli_common import (
    BootstrapOption,
    ClientOption,
    CommandConfigOption,
    client_failure,
    columns,
    key_value_pairs,
    or_dash,
    remember_node,
)
from tabletopic.leader_offsets import leader_log_ranges

if TYPE_CHECKING:
    from tabletopic.broker.wire_client import ConnectionPool

topics_app = typer.Typer(help="Manage Kafka topics.", no_args_is_help=True, callback=remember_node)

TIMEOUT_S = 30
LEADER_POLL_TIMEOUT_S = 10.0  # one Metadata question while `partitions move` waits


def _client_config(
    ctx: typer.Context, bootstrap: str | None, command_config: Path | None, x: list[str] | None
) -> dict[str, str]:
    """The configuration of the command's Kafka clients, its login tried (``logged_in_client_config``).
    log_level 2 (critical only): a node that goes away mid-command must not print a line per retry;
    ``-X log_level=7`` still shows them."""
    from tabletopic.broker.security.client_login import logged_in_client_config

    return {"log_level": "2", **logged_in_client_config(ctx, bootstrap, command_config, x)}


def _admin(config: Mapping[str, str]) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(dict(config))


@topics_app.command("create")
def create(
    ctx: typer.Context,
    name: str,
    bootstrap: BootstrapOption = None,
    partitions: Annotated[int, typer.Option("--partitions", "-p", help="Partition count.")] = 1,
    config: Annotated[list[str] | None, typer.Option("--config", "-c", help="key=value, repeatable.")] = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Create a topic."""
    topic_config = key_value_pairs(config, "--config")
    client = _client_config(ctx, bootstrap, command_config, x)
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=topic_config)
    try:
        admin = _admin(client)  # must outlive the future, or librdkafka destroys the request
        admin.create_topics([topic], request_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc
    typer.echo(f"created topic {name} with {partitions} partition(s)")


@topics_app.command("list")
def list_topics(
    ctx: typer.Context,
    bootstrap: BootstrapOption = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """List topics with their partition counts."""
    client = _client_config(ctx, bootstrap, command_config, x)
    bootstrap = client["bootstrap.servers"]
    try:
        metadata = _admin(client).list_topics(timeout=TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc
    for name in sorted(metadata.topics):
        typer.echo(f"{name}\t{len(metadata.topics[name].partitions)}")
    if not metadata.topics:  # said on stderr: what a script reads stays empty
        typer.echo(f"no topics on {bootstrap} yet: create one with `tabletopic topics create NAME`", err=True)


@topics_app.command("describe")
def describe(
    ctx: typer.Context,
    name: str,
    bootstrap: BootstrapOption = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Partitions with their offsets, and the topic's configs."""
    client = _client_config(ctx, bootstrap, command_config, x)
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    admin = _admin(client)
    try:
        metadata = admin.list_topics(name, timeout=TIMEOUT_S)
        topic = metadata.topics[name]
        if topic.error is not None:
            raise RuntimeError(str(topic.error))
        resource = ConfigResource(ResourceType.TOPIC, name)
        configs = admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource].result(TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc
    # One ListOffsets a leader for all its partitions, not a round trip a partition (8,000 of them
    # took 2.7 s on one node over loopback, now 1.5 s, and each round trip more over a network); a
    # partition whose leader does not answer in time shows "-".
    wanted = [(name, p) for p in sorted(topic.partitions)]
    starts, ends = leader_log_ranges(client, wanted, timeout=TIMEOUT_S)
    typer.echo(f"topic {name}  partitions {len(topic.partitions)}")
    rows = [["partition", "leader", "log-start", "high-watermark"]]
    for tp in wanted:
        leader = topic.partitions[tp[1]].leader
        rows.append([str(tp[1]), str(leader), or_dash(starts.get(tp)), or_dash(ends.get(tp))])
    for line in columns(rows, right={0, 1, 2, 3}):
        typer.echo(f"  {line}")
    typer.echo("configs:")
    for key in sorted(configs):
        entry = configs[key]
        marker = "" if entry.is_default else "  (set)"
        typer.echo(f"  {key}={entry.value}{marker}")


@topics_app.command("delete")
def delete(
    ctx: typer.Context,
    name: str,
    bootstrap: BootstrapOption = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Delete a topic and its data."""
    client = _client_config(ctx, bootstrap, command_config, x)
    try:
        admin = _admin(client)
        admin.delete_topics([name], request_timeout=TIMEOUT_S)[name].result(TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc
    typer.echo(f"deleted topic {name}")


@topics_app.command("alter-config")
def alter_config(
    ctx: typer.Context,
    name: str,
    bootstrap: BootstrapOption = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--config", "-c", "--set", help="key=value to set, repeatable (as topics create --config)."
        ),
    ] = None,
    delete_: Annotated[list[str] | None, typer.Option("--delete", help="key to remove, repeatable.")] = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Set or remove topic configs (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in key_value_pairs(set_, "--config").items()
    ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete_ or []]
    if not entries:
        raise typer.BadParameter("give --config key=value and/or --delete key")
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
    client = _client_config(ctx, bootstrap, command_config, x)
    try:
        admin = _admin(client)
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc
    typer.echo(f"altered configs of {name}")


# The node is found as for topics: -d, --override, -b.
partitions_app = typer.Typer(
    help="Move partitions between brokers (cluster mode).", no_args_is_help=True, callback=remember_node
)


@partitions_app.command("move")
def move(
    ctx: typer.Context,
    topic: str,
    partition: int,
    to: Annotated[int, typer.Option("--to", help="Broker id to lead the partition.")],
    bootstrap: BootstrapOption = None,
    wait: Annotated[
        float, typer.Option("--wait", help="Seconds to wait for the new leader (0: no wait).")
    ] = 10,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Move a partition's leadership to another broker (AlterPartitionReassignments): no data is
    copied, the new leader opens the partition's stream from object storage."""
    from tabletopic.broker.security.client_login import wire_connect
    from tabletopic.broker.wire_client import ConnectionPool

    client = _client_config(ctx, bootstrap, command_config, x)
    bootstrap = client["bootstrap.servers"]
    pool = ConnectionPool(wire_connect(client))  # one login for the request and every poll after it
    try:
        _move(pool, bootstrap, topic, partition, to, wait)
    finally:
        pool.close()


def _move(pool: ConnectionPool, bootstrap: str, topic: str, partition: int, to: int, wait: float) -> None:
    import time

    from tabletopic.broker.wire_client import WireError

    started = time.monotonic()
    try:
        answer = pool.call_first(
            bootstrap,
            45,
            0,
            TIMEOUT_S,
            topics=[{"name": topic, "partitions": [{"partition_index": partition, "replicas": [to]}]}],
        )
    except WireError as exc:
        raise client_failure(exc) from exc
    result = answer.responses[0].partitions[0] if answer.responses else None
    code = answer.error_code if result is None else result.error_code
    if code.value != 0:
        message = answer.error_message if result is None else result.error_message
        raise client_failure(RuntimeError(f"{code.name}: {message}"))
    while wait > 0 and time.monotonic() - started < wait:
        leader = _leader(pool, bootstrap, topic, partition)
        if leader == to:
            typer.echo(f"{topic}-{partition} is led by broker {to} ({time.monotonic() - started:.2f} s)")
            return
        time.sleep(0.05)
    if wait > 0:
        raise client_failure(RuntimeError(f"{topic}-{partition} did not move to broker {to} within {wait} s"))
    typer.echo(f"asked to move {topic}-{partition} to broker {to}")


def _leader(pool: ConnectionPool, bootstrap: str, topic: str, partition: int) -> int | None:
    from tabletopic.broker.wire_client import WireError

    try:
        answer = pool.call_first(
            bootstrap,
            3,
            12,
            LEADER_POLL_TIMEOUT_S,
            topics=[{"name": topic, "topic_id": None}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    except WireError:
        return None
    for p in answer.topics[0].partitions:
        if p.partition_index == partition:
            return int(p.leader_id)
    return None
