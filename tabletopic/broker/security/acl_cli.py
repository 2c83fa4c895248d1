"""``tabletopic acls``: add, list and remove ACLs through the Kafka admin protocol (CreateAcls,
DescribeAcls, DeleteAcls with confluent-kafka's AdminClient), like ``kafka-acls.sh``."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tabletopic.broker.security.cli import BootstrapOption, ClientOption, CommandConfigOption, admin_client
from tabletopic.cli_common import err_console

acls_app = typer.Typer(help="Manage ACLs (needs authorizer.class.name on the broker).", no_args_is_help=True)
TIMEOUT_S = 30

ResourceTypeOption = Annotated[
    str, typer.Option("--resource-type", "-t", help="topic, group, cluster, transactional-id.")
]
NameOption = Annotated[
    str | None, typer.Option("--name", "-n", help="Resource name (cluster: kafka-cluster).")
]
PatternOption = Annotated[
    str, typer.Option("--pattern", help="literal or prefixed (list/remove also: any, match).")
]
PrincipalOption = Annotated[str | None, typer.Option("--principal", "-p", help="User:alice, User:* ...")]
HostOption = Annotated[str | None, typer.Option("--host", help="Client address, * for any.")]
OperationOption = Annotated[
    str, typer.Option("--operation", "-o", help="read, write, create, delete, alter, describe, all ...")
]
PermissionOption = Annotated[str, typer.Option("--permission", help="allow or deny.")]


def _enum(kind: Any, value: str, what: str) -> Any:
    key = value.strip().upper().replace("-", "_")
    if key == "CLUSTER" and what == "resource type":
        key = "BROKER"  # confluent-kafka's name for Kafka's CLUSTER resource
    try:
        return getattr(kind, key)
    except AttributeError:
        choices = ", ".join(m.name.lower() for m in kind if m.name not in ("UNKNOWN",))
        raise typer.BadParameter(f"unknown {what} {value!r} (one of {choices})") from None


def _fail(exc: BaseException) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {exc}", highlight=False)
    return typer.Exit(1)


@acls_app.command("add")
def add(
    resource_type: ResourceTypeOption,
    principal: Annotated[str, typer.Option("--principal", "-p", help="User:alice, User:* ...")],
    operation: OperationOption,
    name: NameOption = None,
    pattern: PatternOption = "literal",
    host: Annotated[str, typer.Option("--host", help="Client address, * for any.")] = "*",
    permission: PermissionOption = "allow",
    bootstrap: BootstrapOption = "127.0.0.1:9092",
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Add one ACL binding."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kind = _enum(ResourceType, resource_type, "resource type")
    binding = AclBinding(
        kind,
        name or ("kafka-cluster" if kind == ResourceType.BROKER else ""),
        _enum(ResourcePatternType, pattern, "pattern"),
        principal,
        host,
        _enum(AclOperation, operation, "operation"),
        _enum(AclPermissionType, permission, "permission"),
    )
    admin = admin_client(bootstrap, command_config, x)
    try:
        admin.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(TIMEOUT_S)
    except Exception as exc:
        raise _fail(exc) from exc
    typer.echo(f"added {_describe(binding)}")


def _filter(
    resource_type: str, name: str | None, pattern: str, principal: str | None, host: str | None,
    operation: str, permission: str,
) -> Any:  # fmt: skip
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    # The stubs say str, but None is the documented "match any" of a filter field.
    make_filter: Any = AclBindingFilter
    return make_filter(
        _enum(ResourceType, resource_type, "resource type"),
        name,
        _enum(ResourcePatternType, pattern, "pattern"),
        principal,
        host,
        _enum(AclOperation, operation, "operation"),
        _enum(AclPermissionType, permission, "permission"),
    )


def _describe(binding: Any) -> str:
    return (
        f"{binding.permission_type.name.lower()} {binding.principal} {binding.operation.name.lower()} "
        f"{binding.restype.name.lower()}:{binding.name} ({binding.resource_pattern_type.name.lower()}, "
        f"host {binding.host})"
    )


@acls_app.command("list")
def list_acls(
    resource_type: Annotated[str, typer.Option("--resource-type", "-t")] = "any",
    name: NameOption = None,
    pattern: Annotated[str, typer.Option("--pattern")] = "any",
    principal: PrincipalOption = None,
    host: HostOption = None,
    operation: Annotated[str, typer.Option("--operation", "-o")] = "any",
    permission: Annotated[str, typer.Option("--permission")] = "any",
    bootstrap: BootstrapOption = "127.0.0.1:9092",
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """ACLs matching the filter (all by default)."""
    acl_filter = _filter(resource_type, name, pattern, principal, host, operation, permission)
    admin = admin_client(bootstrap, command_config, x)
    try:
        found = admin.describe_acls(acl_filter, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    except Exception as exc:
        raise _fail(exc) from exc
    for binding in found:
        typer.echo(_describe(binding))


@acls_app.command("remove")
def remove(
    resource_type: Annotated[str, typer.Option("--resource-type", "-t")] = "any",
    name: NameOption = None,
    pattern: Annotated[str, typer.Option("--pattern")] = "any",
    principal: PrincipalOption = None,
    host: HostOption = None,
    operation: Annotated[str, typer.Option("--operation", "-o")] = "any",
    permission: Annotated[str, typer.Option("--permission")] = "any",
    bootstrap: BootstrapOption = "127.0.0.1:9092",
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Remove every ACL matching the filter."""
    acl_filter = _filter(resource_type, name, pattern, principal, host, operation, permission)
    admin = admin_client(bootstrap, command_config, x)
    try:
        removed = admin.delete_acls([acl_filter], request_timeout=TIMEOUT_S)[acl_filter].result(TIMEOUT_S)
    except Exception as exc:
        raise _fail(exc) from exc
    for binding in removed:
        typer.echo(f"removed {_describe(binding)}")
