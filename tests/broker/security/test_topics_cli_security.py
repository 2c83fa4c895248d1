"""``tabletopic topics`` and ``tabletopic partitions move`` on SASL and SSL listeners: the client's
security settings come from ``-X`` or ``--command-config`` (as for ``users`` and ``acls``), and a
node found through its configuration whose listener is secured, with no settings given, is refused
in one line naming the options, not with librdkafka's ``Broker transport failure``."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from tabletopic.cli import app
from tests.support.secure_brokers import SecureBroker

# How a test's commands log in: the options they get, for a broker and a directory to write files in.
ClientOptions = Callable[[SecureBroker, Path], list[str]]
SCRAM_LOGIN = ["sasl.mechanism=SCRAM-SHA-256", "sasl.username=carol", "sasl.password=carol-secret"]


def _run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _x(*settings: str) -> list[str]:
    return [word for setting in settings for word in ("-X", setting)]


def _sasl_plaintext_with_x(broker: SecureBroker, tmp_path: Path) -> list[str]:
    return ["-b", broker.sasl_plaintext, *_x("security.protocol=SASL_PLAINTEXT", *SCRAM_LOGIN)]


def _sasl_ssl_with_command_config(broker: SecureBroker, tmp_path: Path) -> list[str]:
    client_config = tmp_path / "client.properties"
    client_config.write_text(
        f"security.protocol=SASL_SSL\nssl.ca.location={broker.ca.cert}\n"
        "sasl.mechanism=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n"
    )
    return ["-b", broker.sasl_ssl, "--command-config", str(client_config)]


@pytest.mark.integration
@pytest.mark.parametrize("client", [_sasl_plaintext_with_x, _sasl_ssl_with_command_config])
def test_topics_and_partitions_move_log_in_with_the_client_settings(
    secure_broker: SecureBroker, tmp_path: Path, client: ClientOptions
) -> None:
    login = client(secure_broker, tmp_path)
    name = f"secured-{uuid.uuid4().hex[:8]}"
    created = _run("topics", "create", name, "--partitions", "2", *login)
    assert created.exit_code == 0, created.output
    listed = _run("topics", "list", *login)
    assert listed.exit_code == 0 and f"{name}\t2" in listed.stdout, listed.output
    described = _run("topics", "describe", name, *login)  # its ListOffsets log in too
    assert described.exit_code == 0, described.output
    # partition, leader, log start, high watermark: offsets answered ("-" where no leader did).
    assert ["1", "1", "0", "0"] in [line.split() for line in described.stdout.splitlines()], described.output
    altered = _run("topics", "alter-config", name, "--set", "retention.ms=60000", *login)
    assert altered.exit_code == 0, altered.output
    # The broker's own wire client (AlterPartitionReassignments, then Metadata until the leader is
    # there): on one node the only valid target is the node itself.
    moved = _run("partitions", "move", name, "0", "--to", "1", *login)
    assert moved.exit_code == 0 and f"{name}-0 is led by broker 1" in moved.stdout, moved.output
    deleted = _run("topics", "delete", name, *login)
    assert deleted.exit_code == 0, deleted.output
    assert f"{name}\t" not in _run("topics", "list", *login).stdout


def _node_options(group: str, data_dir: Path, listeners: str, protocol_map: str) -> list[str]:
    """The group's options that describe the node as `tabletopic serve` reads it (spelled
    --override: in acls, -o is --operation)."""
    overrides = [f"listeners={listeners}", f"listener.security.protocol.map={protocol_map}"]
    return [group, "-d", str(data_dir), *(word for item in overrides for word in ("--override", item))]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("group", "command"), [("topics", ["list"]), ("users", ["list"]), ("acls", ["list"])]
)
def test_a_secured_listener_found_through_the_configuration_asks_for_the_client_settings(
    secure_broker: SecureBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    group: str,
    command: list[str],
) -> None:
    monkeypatch.delenv("TABLETOPIC_BOOTSTRAP", raising=False)
    address = secure_broker.sasl_plaintext
    node = _node_options(group, tmp_path, f"PLAINTEXT://{address}", "PLAINTEXT:SASL_PLAINTEXT")
    refused = _run(*node, *command)
    assert refused.exit_code == 1, refused.output
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert f"the Kafka listener at {address} is SASL_PLAINTEXT" in lines[0], lines[0]
    assert "listener.security.protocol.map" in lines[0], lines[0]
    assert "--command-config" in lines[0] and "-X security.protocol=SASL_PLAINTEXT" in lines[0], lines[0]
    # With the settings, the same node found the same way answers.
    answered = _run(*node, *command, *_x("security.protocol=SASL_PLAINTEXT", *SCRAM_LOGIN))
    assert answered.exit_code == 0, answered.output


def test_a_listener_named_after_its_protocol_is_refused_without_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``partitions`` finds the node as ``topics`` does (here ``-d`` and ``--override``). Refused
    before any connection, so no broker is needed."""
    monkeypatch.delenv("TABLETOPIC_BOOTSTRAP", raising=False)
    node = ["partitions", "-d", str(tmp_path), "--override", "listeners=SASL_SSL://0.0.0.0:1"]
    refused = _run(*node, "move", "t", "0", "--to", "1")
    assert refused.exit_code == 1, refused.output
    line = refused.stderr.strip()
    assert "\n" not in line and "the Kafka listener at 127.0.0.1:1 is SASL_SSL and" in line, line
    assert "-X security.protocol=SASL_SSL -X ssl.ca.location=" in line, line


@pytest.mark.parametrize(
    "command", [["topics", "create", "t"], ["topics", "list"], ["partitions", "move", "t", "0", "--to", "1"]]
)
def test_a_client_setting_without_equals_is_a_usage_error(command: list[str]) -> None:
    result = _run(*command, "-b", "127.0.0.1:1", "-X", "security.protocol")
    assert result.exit_code == 2, result.output
    assert "-X expects key=value, got 'security.protocol'" in result.output, result.output


def test_a_missing_command_config_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "client.properties"
    result = _run("topics", "list", "-b", "127.0.0.1:1", "--command-config", str(missing))
    assert result.exit_code == 2 and "does not exist" in result.output, result.output


@pytest.mark.integration
@pytest.mark.parametrize(("group", "command"), [("topics", ["list"]), ("users", ["list"])])
def test_a_refused_login_is_named_at_once_not_after_the_clients_timeout(
    secure_broker: SecureBroker, group: str, command: list[str]
) -> None:
    wrong = _x("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.username=alice")
    started = time.monotonic()
    refused = _run(group, *command, "-b", secure_broker.sasl_plaintext, *wrong, "-X", "sasl.password=wrong")
    # The broker holds a refusal back connection.failed.authentication.delay.ms; librdkafka would
    # retry for the commands' 30 s timeout and then say "Broker transport failure".
    assert time.monotonic() - started < 10
    assert refused.exit_code == 1, refused.output
    assert "the login at" in refused.stderr and "sasl.password of --command-config or -X" in refused.stderr


@pytest.mark.integration
def test_a_broker_certificate_the_client_does_not_trust_is_named_at_once(secure_broker: SecureBroker) -> None:
    untrusting = _x("security.protocol=SASL_SSL", "sasl.mechanism=PLAIN", "sasl.username=alice")
    refused = _run(
        "topics", "list", "-b", secure_broker.sasl_ssl, *untrusting, "-X", "sasl.password=alice-secret"
    )
    assert refused.exit_code == 1, refused.output
    assert "the TLS handshake at" in refused.stderr and "ssl.ca.location" in refused.stderr


@pytest.mark.integration
@pytest.mark.parametrize("listener", ["sasl_plaintext", "ssl", "sasl_ssl"])
def test_a_secured_listener_given_with_b_and_no_settings_is_named_at_once(
    secure_broker: SecureBroker, listener: str
) -> None:
    server = getattr(secure_broker, listener)
    started = time.monotonic()
    refused = _run("topics", "list", "-b", server)
    # librdkafka would retry for the command's 30 s and then say "Broker transport failure".
    assert time.monotonic() - started < 10
    assert refused.exit_code == 1, refused.output
    assert f"the plaintext Kafka request at {server} failed" in refused.stderr, refused.stderr
    assert "security.protocol" in refused.stderr and "\n" not in refused.stderr.strip()
    listed = _run("topics", "list", "-b", secure_broker.plaintext)  # the plaintext listener still works
    assert listed.exit_code == 0, listed.output
