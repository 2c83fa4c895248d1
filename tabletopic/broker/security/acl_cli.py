"""``tabletopic acls``: add, list and remove ACLs through the Kafka admin protocol (CreateAcls,
DescribeAcls, DeleteAcls with confluent-kafka's AdminClient), like ``kafka-acls.sh``. The node is
found as every client command finds it (``tabletopic users`` explains the client settings)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tabletopic.broker.security.cli import admin_client
from tabletopic.cli_common import (
    BootstrapOption,
    ClientOption,
    CommandConfigOption,
    DataDirOption,
    client_failure,
    remember_node,
)

acls_app = typer.Typer(help="Manage ACLs (needs authorizer.class.name on the broker).", no_args_is_help=True)
TIMEOUT_S = 30

# `-o` is --operation here (as in kafka-acls.sh), so the node override is spelled out.
LongOverrideOption = Annotated[
    list[str] | None,
    typer.Option("--override", help="key=value of the node's configuration, repeatable."),
]


@acls_app.callback()
def _options(ctx: typer.Context, data_dir: DataDirOption = None, override: LongOverrideOption = None) -> None:
    """Which node: ``--bootstrap-server``, else the node's own configuration (``listeners``)."""
    remember_node(ctx, data_dir, override)


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


@acls_app.command("add")
def add(
    ctx: typer.Context,
    resource_type: ResourceTypeOption,
    principal: Annotated[str, typer.Option("--principal", "-p", help="User:alice, User:* ...")],
    operation: OperationOption,
    name: NameOption = None,
    pattern: PatternOption = "literal",
    host: Annotated[str, typer.Option("--host", help="Client address, * for any.")] = "*",
    permission: PermissionOption = "allow",
    bootstrap: BootstrapOption = None,
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
    admin = admin_client(ctx, bootstrap, command_config, x)
    try:
        admin.create_acls([binding], request_timeout=TIMEOUT_S)[binding].result(TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc
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


def _filter_command(action: str) -> Any:
    """``list`` and ``remove`` take the same filter, so they are one function with one option set."""

    def command(
        ctx: typer.Context,
        resource_type: Annotated[str, typer.Option("--resource-type", "-t")] = "any",
        name: NameOption = None,
        pattern: Annotated[str, typer.Option("--pattern")] = "any",
        principal: PrincipalOption = None,
        host: HostOption = None,
        operation: Annotated[str, typer.Option("--operation", "-o")] = "any",
        permission: Annotated[str, typer.Option("--permission")] = "any",
        bootstrap: BootstrapOption = None,
        command_config: CommandConfigOption = None,
        x: ClientOption = None,
    ) -> None:
        acl_filter = _filter(resource_type, name, pattern, principal, host, operation, permission)
        admin = admin_client(ctx, bootstrap, command_config, x)  # must outlive its futures
        try:
            if action == "list":
                found = admin.describe_acls(acl_filter, request_timeout=TIMEOUT_S).result(TIMEOUT_S)
            else:
                found = admin.delete_acls([acl_filter], request_timeout=TIMEOUT_S)[acl_filter].result(
                    TIMEOUT_S
                )
        except Exception as exc:
            raise client_failure(exc) from exc
        for binding in found:
            typer.echo(_describe(binding) if action == "list" else f"removed {_describe(binding)}")

    command.__doc__ = (
        "ACLs matching the filter (all by default)."
        if action == "list"
        else "Remove every ACL matching the filter."
    )
    return command


acls_app.command("list")(_filter_command("list"))
acls_app.command("remove")(_filter_command("remove"))
