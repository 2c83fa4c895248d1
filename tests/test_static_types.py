"""Mistakes strict mypy catches because of our types: ``Config.get`` is typed by the key (a key read
as the wrong type fails type checking, not at run time), and node ids and the epochs are distinct
types (a swapped pair in a fencing check fails type checking, not as a wrong fencing decision)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from tabletopic import settings
from tabletopic.broker.security import settings as security_settings
from tabletopic.broker.security.tls import TlsSettings
from tabletopic.config import Config


def _mypy(tmp_path: Path, source: str) -> str:
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent(source))
    stdout, _, _ = mypy_api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy_cache"), str(path)]
    )
    return stdout


@pytest.mark.timeout(240)
def test_mypy_sees_the_type_each_key_declares(tmp_path: Path) -> None:
    out = _mypy(
        tmp_path,
        """
        from tabletopic.config import Config
        from tabletopic.broker.security import settings as s
        from tabletopic.table import settings as t
        config = Config()
        reveal_type(config.get(s.QUOTA_WINDOW_NUM))
        reveal_type(config.get(s.HTTP_READWRITE_USERS))
        reveal_type(config.get(t.SCHEMA_REGISTRY_URL))
        wrong: str = config.get(s.QUOTA_WINDOW_NUM)
        """,
    )
    assert 'Revealed type is "int"' in out
    assert 'Revealed type is "list[str]"' in out
    assert 'Revealed type is "str | None"' in out
    assert "Incompatible types in assignment" in out


def test_a_key_without_explicit_value_gives_its_default() -> None:
    config = Config({"log.level": "DEBUG"})
    assert config.get(settings.LOG_LEVEL) == "DEBUG"
    assert config.get(security_settings.QUOTA_WINDOW_NUM) == security_settings.QUOTA_WINDOW_NUM.default


def test_a_sasl_ssl_listener_without_its_own_client_auth_reads_none() -> None:
    config = Config({"ssl.client.auth": "required"})
    assert TlsSettings(config).get(security_settings.SSL_CLIENT_AUTH) == "required"
    own = TlsSettings(config, "listener.name.sasl_ssl.", own_client_auth=True)
    assert own.get(security_settings.SSL_CLIENT_AUTH) == "none"


@pytest.mark.timeout(240)
def test_mypy_refuses_an_epoch_passed_as_another(tmp_path: Path) -> None:
    out = _mypy(
        tmp_path,
        """
        from sqlalchemy.engine import Connection
        from tabletopic.cluster.db import check_leadership
        from tabletopic.ids import BrokerEpoch, LeaderEpoch, NodeId

        def right(conn: Connection) -> bool:
            return check_leadership(conn, ("t", 0), NodeId(1), BrokerEpoch(2), LeaderEpoch(3))

        def swapped(conn: Connection) -> bool:
            return check_leadership(conn, ("t", 0), NodeId(1), LeaderEpoch(3), BrokerEpoch(2))
        """,
    )
    errors = [line for line in out.splitlines() if "error:" in line]
    assert len(errors) == 2, out  # both swapped arguments, nothing in the right call
    assert all(":10:" in line for line in errors), out
    assert 'expected "BrokerEpoch"' in out and 'expected "LeaderEpoch"' in out
