"""DescribeConfigs withholds what carries credentials (issue 29, item 6): metadata.url (on
PostgreSQL it holds the database password) and any value with a URL that has user information."""

from __future__ import annotations

from pathlib import Path

import pytest

from tabletopic.broker.handlers.describe_configs import is_sensitive
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(120)


def test_urls_with_credentials_are_sensitive() -> None:
    assert is_sensitive("metadata.url", "postgresql+psycopg://app:pw@db/meta")
    assert is_sensitive("metadata.url", "sqlite:////var/lib/tabletopic/metadata.db")
    assert is_sensitive("automq.table.topic.schema.registry.url", "http://reg:pw@host:8081")
    assert is_sensitive("advertised.listeners", ["PLAINTEXT://h:1", "X://token@h:2"])
    assert not is_sensitive("automq.table.topic.schema.registry.url", "http://host:8081/path@v1")
    assert not is_sensitive("advertised.listeners", ["PLAINTEXT://h:1"])


@pytest.mark.integration
def test_describe_configs_withholds_the_metadata_url_and_urls_with_credentials(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    data_dir = tmp_path / "data"
    node = BrokerProcess(
        data_dir,
        overrides={
            "metadata.url": f"sqlite:///{data_dir / 'metadata.db'}",
            "automq.table.topic.schema.registry.url": "http://registry:registry-pw@127.0.0.1:1",
        },
    )
    node.start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "1")
        entries = admin.describe_configs([resource])[resource].result(30)
    finally:
        node.stop()
    for name in ("metadata.url", "automq.table.topic.schema.registry.url"):
        assert entries[name].is_sensitive and entries[name].value is None, name
    assert not entries["listeners"].is_sensitive and entries["listeners"].value
