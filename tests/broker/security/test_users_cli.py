"""``tabletopic users``: add, list and delete SCRAM users of a running node, and log in with them."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tabletopic.cli import app
from tests.support.secure_brokers import SecureBroker, round_trip, sasl_login


@pytest.mark.integration
def test_users_add_list_delete_over_sasl_ssl(secure_broker: SecureBroker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The CLI itself connects as a SCRAM user over TLS, with settings from a properties file.
    client_config = tmp_path / "client.properties"
    client_config.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.ca.location={secure_broker.ca.cert}\n"
        "sasl.mechanism=SCRAM-SHA-512\nsasl.username=carol\nsasl.password=carol-secret\n"
    )
    common = ["-b", secure_broker.sasl_ssl, "--command-config", str(client_config)]
    runner = CliRunner()
    added = runner.invoke(
        app, ["users", "add", "frank", "--password", "frank-pw", "-m", "SCRAM-SHA-256", *common]
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["users", "list", *common])
    assert "frank\tSCRAM-SHA-256 (iterations 4096)" in listed.output, listed.output
    round_trip(secure_broker.sasl_plaintext, sasl_login("SCRAM-SHA-256", "frank", "frank-pw"))
    deleted = runner.invoke(app, ["users", "delete", "frank", *common])
    assert deleted.exit_code == 0, deleted.output
    assert "frank" not in runner.invoke(app, ["users", "list", *common]).output
    missing = runner.invoke(app, ["users", "delete", "frank", *common])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_users_add_refuses_an_unknown_mechanism() -> None:
    result = CliRunner().invoke(
        app, ["users", "add", "x", "--password", "p", "-m", "MD5", "-b", "127.0.0.1:1"]
    )
    assert result.exit_code != 0 and "unknown mechanism MD5" in result.output
