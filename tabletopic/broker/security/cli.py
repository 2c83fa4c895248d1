"""``tabletopic users``: SCRAM users through the Kafka admin protocol (AlterUserScramCredentials /
DescribeUserScramCredentials with confluent-kafka's AdminClient), so it works against any node,
local or remote, like ``kafka-configs.sh --entity-type users``.

The node is found the one way every client command finds it (``--bootstrap-server``, else the
node's configuration: ``-d``/``--override``, ``TABLETOPIC_*``, endpoints.properties). The client's own
security settings come from ``--command-config`` (a properties file, as Kafka's tools take it) and
``-X key=value`` (as kcat takes them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tabletopic.broker.security.scram import MIN_ITERATIONS, SCRAM_MECHANISMS
from tabletopic.cli_common import (
    BootstrapOption,
    ClientOption,
    CommandConfigOption,
    client_failure,
    remember_node,
)

users_app = typer.Typer(
    help="Manage SCRAM users (SASL/SCRAM and PLAIN logins).", no_args_is_help=True, callback=remember_node
)

MechanismOption = Annotated[
    list[str] | None,
    typer.Option("--mechanism", "-m", help="SCRAM-SHA-256 or SCRAM-SHA-512, repeatable (default: both)."),
]
TIMEOUT_S = 30


def admin_client(
    ctx: typer.Context, bootstrap: str | None, command_config: Path | None, settings: list[str] | None
) -> Any:
    """An AdminClient for the node with the client settings of ``--command-config`` and ``-X``
    (:func:`~tabletopic.broker.security.client_login.logged_in_client_config`)."""
    from confluent_kafka.admin import AdminClient

    from tabletopic.broker.security.client_login import logged_in_client_config

    return AdminClient({**logged_in_client_config(ctx, bootstrap, command_config, settings)})


def _mechanisms(names: list[str] | None) -> list[Any]:
    from confluent_kafka.admin import ScramMechanism  # type: ignore[attr-defined]

    chosen = [n.upper() for n in names] if names else list(SCRAM_MECHANISMS)
    unknown = [n for n in chosen if n not in SCRAM_MECHANISMS]
    if unknown:
        raise typer.BadParameter(f"unknown mechanism {', '.join(unknown)} (SCRAM-SHA-256, SCRAM-SHA-512)")
    return [getattr(ScramMechanism, n.replace("-", "_")) for n in chosen]


def _wait(futures: dict[str, Any]) -> None:
    try:
        for future in futures.values():
            future.result(TIMEOUT_S)
    except Exception as exc:
        raise client_failure(exc) from exc


@users_app.command("add")
def add(
    ctx: typer.Context,
    name: str,
    password: Annotated[str, typer.Option(prompt=True, hide_input=True, confirmation_prompt=True)],
    bootstrap: BootstrapOption = None,
    mechanism: MechanismOption = None,
    iterations: Annotated[int, typer.Option(help="PBKDF2 iterations (4096..16384).")] = MIN_ITERATIONS,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Create a user or set a new password (salted and hashed by the client, never sent in clear)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        UserScramCredentialUpsertion,
    )

    upsertions = [
        UserScramCredentialUpsertion(name, ScramCredentialInfo(m, iterations), password.encode())
        for m in _mechanisms(mechanism)
    ]
    admin = admin_client(ctx, bootstrap, command_config, x)
    _wait(admin.alter_user_scram_credentials(upsertions, request_timeout=TIMEOUT_S))
    typer.echo(f"set SCRAM credentials of {name}")


@users_app.command("delete")
def delete(
    ctx: typer.Context,
    name: str,
    bootstrap: BootstrapOption = None,
    mechanism: MechanismOption = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Remove a user's SCRAM credentials (all mechanisms unless --mechanism is given)."""
    from confluent_kafka.admin import UserScramCredentialDeletion  # type: ignore[attr-defined]

    admin = admin_client(ctx, bootstrap, command_config, x)
    if mechanism:
        chosen = _mechanisms(mechanism)
    else:
        described = admin.describe_user_scram_credentials([name], request_timeout=TIMEOUT_S)
        try:
            chosen = [i.mechanism for i in described[name].result(TIMEOUT_S).scram_credential_infos]
        except Exception as exc:
            raise client_failure(exc) from exc
    deletions = [UserScramCredentialDeletion(name, m) for m in chosen]
    _wait(admin.alter_user_scram_credentials(deletions, request_timeout=TIMEOUT_S))
    typer.echo(f"deleted SCRAM credentials of {name}")


@users_app.command("list")
def list_users(
    ctx: typer.Context,
    names: Annotated[list[str] | None, typer.Argument(help="Users to show (default: all).")] = None,
    bootstrap: BootstrapOption = None,
    command_config: CommandConfigOption = None,
    x: ClientOption = None,
) -> None:
    """Users with their SCRAM mechanisms and iteration counts (never the secrets)."""
    admin = admin_client(ctx, bootstrap, command_config, x)
    try:
        result = admin.describe_user_scram_credentials(names or None, request_timeout=TIMEOUT_S)
        described = (
            {n: f.result(TIMEOUT_S) for n, f in result.items()}
            if isinstance(result, dict)
            else result.result(TIMEOUT_S)
        )
    except Exception as exc:
        raise client_failure(exc) from exc
    for user in sorted(described):
        infos = ", ".join(
            f"{i.mechanism.name.replace('_', '-')} (iterations {i.iterations})"
            for i in described[user].scram_credential_infos
        )
        typer.echo(f"{user}\t{infos}")
