"""``tabletopic demo``: a newcomer's first five minutes against a running node.

Creates an Avro table topic, registers its schema, produces sample orders with confluent-kafka's
``SerializingProducer``, waits until the table pipeline has committed them (watching ``/v1/tables``),
then queries the Iceberg table with Spark SQL through exactly the code path of ``tabletopic sql`` and
prints the command to run that query yourself. Every address comes from the same
``--data-dir/--config/--override`` options as ``serve``, so the demo finds the node it describes.
"""

from __future__ import annotations

import json
import random
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote

import typer

from tabletopic import settings
from tabletopic.cli_common import (
    ConfigFileOption,
    DataDirOption,
    OverrideOption,
    console,
    err_console,
    load_config,
)
from tabletopic.schema_registry import settings as registry_settings
from tabletopic.table import settings as table_settings

if TYPE_CHECKING:
    from tabletopic.config import Config

ORDER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "tabletopic.demo",
    "doc": "A sample order of tabletopic's demo.",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "item", "type": "string"},
        {"name": "quantity", "type": "int"},
        {"name": "amount", "type": "double"},
        {"name": "express", "type": "boolean"},
        {"name": "ordered_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
CUSTOMERS = ("ada", "grace", "linus", "barbara", "ken", "margaret", "dennis", "frances")
ITEMS = {"keyboard": 49.0, "monitor": 189.0, "mouse": 19.5, "laptop": 1099.0, "cable": 7.25}
COMMIT_INTERVAL_MS = 2000


@dataclass(frozen=True)
class Endpoints:
    """Where the running node listens, as its own configuration says."""

    bootstrap: str
    admin: str
    registry: str


def endpoints(cfg: Config, bootstrap: str | None) -> Endpoints:
    """The node's Kafka bootstrap, admin API and schema registry addresses from its configuration."""
    if bootstrap is None:
        from tabletopic.broker.security.client_login import node_listener

        bootstrap = node_listener(cfg).address
    registry = cfg.get(table_settings.SCHEMA_REGISTRY_URL) or cfg.get(registry_settings.LISTENER)
    return Endpoints(bootstrap, cfg.get(settings.ADMIN_LISTENER).rstrip("/"), registry.rstrip("/"))


def sample_order(order_id: int, rng: random.Random) -> dict[str, Any]:
    import datetime as dt

    item = rng.choice(list(ITEMS))
    quantity = rng.randint(1, 4)
    return {
        "order_id": order_id,
        "customer": rng.choice(CUSTOMERS),
        "item": item,
        "quantity": quantity,
        "amount": round(ITEMS[item] * quantity, 2),
        "express": rng.random() < 0.3,
        "ordered_at": dt.datetime.now(dt.UTC) - dt.timedelta(seconds=rng.randint(0, 86_400)),
    }


def _fail(message: str) -> typer.Exit:
    err_console.print(f"[red]{message}[/red]")
    return typer.Exit(1)


def _check_node(ep: Endpoints) -> None:
    import httpx

    try:
        httpx.get(f"{ep.admin}/v1/tables", timeout=5).raise_for_status()
    except httpx.HTTPError as exc:
        raise _fail(
            f"no node answers at {ep.admin} ({exc}). Start one first: tabletopic serve "
            "(with the same --data-dir/--config/--override options)"
        ) from exc


def _create_topic(ep: Endpoints, topic: str, namespace: str, table: str, partitions: int) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # no __all__ entry

    configs = {
        "automq.table.topic.enable": "true",
        "automq.table.topic.commit.interval.ms": str(COMMIT_INTERVAL_MS),
        "automq.table.topic.namespace": namespace,
        "automq.table.topic.table.name": table,
        "automq.table.topic.convert.value.type": "by_schema_id",
        "automq.table.topic.transform.value.type": "flatten",
        "automq.table.topic.partition.by": "[day(ordered_at)]",
    }
    admin = AdminClient({"bootstrap.servers": ep.bootstrap})
    future = admin.create_topics([NewTopic(topic, partitions, 1, config=configs)], request_timeout=30)[topic]
    try:
        future.result(30)
        console.print(f"created table topic [bold]{topic}[/bold] ({partitions} partitions)")
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise _fail(f"cannot create {topic} at {ep.bootstrap}: {exc.args[0].str()}") from exc
        console.print(f"table topic [bold]{topic}[/bold] exists; adding more orders to it")


def _register_schema(ep: Endpoints, topic: str) -> Any:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": ep.registry})
    schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(ORDER_SCHEMA), "AVRO"))
    console.print(f"registered the Avro schema as subject {topic}-value (id {schema_id}) at {ep.registry}")
    return client


def _produce(ep: Endpoints, topic: str, client: Any, count: int) -> dict[int, int]:
    """Produce ``count`` orders; returns the end offset acknowledged per partition."""
    from confluent_kafka import SerializingProducer
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import StringSerializer
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    producer = SerializingProducer(
        {
            "bootstrap.servers": ep.bootstrap,
            "acks": "all",
            "linger.ms": 10,
            "key.serializer": StringSerializer(),
            "value.serializer": AvroSerializer(client, json.dumps(ORDER_SCHEMA)),
        }
    )
    ends: dict[int, int] = {}
    errors: list[str] = []
    rng = random.Random()
    first_id = int(time.time() * 1000)
    columns = (TextColumn("producing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("produce", total=count)

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
                return
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)
            progress.advance(bar)

        for i in range(count):
            order = sample_order(first_id + i, rng)
            producer.produce(topic, key=order["customer"], value=order, on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(60)
    if remaining or errors:
        raise _fail(f"{remaining} orders unacknowledged; errors: {errors[:3]}")
    return ends


def _wait_for_commit(ep: Endpoints, topic: str, ends: dict[int, int], timeout: float) -> dict[str, Any]:
    """Follow ``/v1/tables/{topic}`` until the table covers every acknowledged order."""
    import httpx
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    target = sum(ends.values())
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("waiting for the Iceberg commit", total=target)
        while time.monotonic() < deadline:
            response = httpx.get(f"{ep.admin}/v1/tables/{topic}", timeout=10)
            if response.status_code == 200:
                status = response.json()
                committed = status["committed_offsets"]
                done = sum(min(committed.get(str(p), 0), end) for p, end in ends.items())
                progress.update(
                    bar, completed=done, description=f"table {status['table']}: {status['state']}"
                )
                if status.get("state") == "FAILED":
                    raise _fail(f"the table pipeline stopped: {status.get('last_error')}")
                if done >= target:
                    return status
            time.sleep(0.5)
    raise _fail(f"the table had not caught up after {timeout:.0f}s; last status: {status}")


def _option_args(data_dir: Path | None, config: Path | None, override: list[str] | None) -> list[str]:
    args: list[str] = []
    if data_dir is not None:
        args += ["--data-dir", str(data_dir)]
    if config is not None:
        args += ["--config", str(config)]
    for item in override or []:
        args += ["--override", item]
    return args


def demo(
    records: Annotated[int, typer.Option("--records", "-n", help="Orders to produce.", min=1)] = 300,
    topic: Annotated[str, typer.Option("--topic", help="Table topic to create (or reuse).")] = "demo.orders",
    partitions: Annotated[int, typer.Option("--partitions", help="Partitions of a new topic.", min=1)] = 3,
    bootstrap: Annotated[
        str | None, typer.Option("--bootstrap-server", "-b", help="Kafka bootstrap (default: listeners).")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the commit.")] = 300.0,
    query: Annotated[bool, typer.Option("--query/--no-query", help="Run the Spark SQL query.")] = True,
    data_dir: DataDirOption = None,
    config: ConfigFileOption = None,
    override: OverrideOption = None,
) -> None:
    """Produce sample Avro orders to a table topic on a running node and query its Iceberg table."""
    cfg = load_config(data_dir, config, override)
    ep = endpoints(cfg, bootstrap)
    _check_node(ep)
    namespace, _, table = topic.rpartition(".")
    namespace = namespace.replace(".", "_") or "demo"
    table = "".join(c if c.isalnum() or c == "_" else "_" for c in table)
    _create_topic(ep, topic, namespace, table, partitions)
    client = _register_schema(ep, topic)
    ends = _produce(ep, topic, client, records)
    console.print(f"{records} orders acknowledged by {ep.bootstrap}")
    status = _wait_for_commit(ep, topic, ends, timeout)
    console.print(
        f"committed to Iceberg table [bold]{status['table']}[/bold]: {status['rows_committed']} rows "
        f"in {status['commits']} commit(s) by this node since it started"
    )
    console.print(
        f"watch it in the console: {ep.admin}/tables/{quote(topic)} (freshness, lag, commits, rows)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    statement = (
        f"SELECT customer, count(*) AS orders, round(sum(amount), 2) AS revenue, "
        f"max(ordered_at) AS latest FROM {namespace}.{table} GROUP BY customer ORDER BY revenue DESC"
    )
    command = shlex.join(["tabletopic", "sql", *_option_args(data_dir, config, override), statement])
    if query:
        from tabletopic.spark.cli import OutputFormat, sql

        console.print("[bold]Spark SQL[/bold] on the table (starting Spark takes a few seconds):")
        sql(
            statement=statement,
            output=OutputFormat.table,
            max_rows=100,
            print_config=False,
            data_dir=data_dir,
            config=config,
            override=override,
        )
    console.print("\nRun it yourself (or omit the statement for an interactive shell):")
    console.print(command, markup=False, highlight=False, soft_wrap=True)
