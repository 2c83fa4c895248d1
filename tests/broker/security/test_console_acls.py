"""ACLs through the admin API on a node with an authorizer: the console acts as the broker's own
inter-broker principal (a super user here), lists, adds and deletes ACLs."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("console-acls"),
        overrides={
            "sasl.plain.users": "admin:admin-pw,broker:broker-pw",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:broker",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                'password="broker-pw";'
            ),
        },
    )
    process.start()
    yield process
    process.stop()


def test_acls_are_added_listed_and_deleted_through_the_admin_api(secured: BrokerProcess) -> None:
    entry = {
        "resource_type": "topic",
        "resource_name": "orders",
        "pattern_type": "prefixed",
        "principal": "User:alice",
        "operation": "read",
        "permission": "allow",
    }
    with httpx.Client(base_url=secured.admin_url, timeout=60) as admin:
        added = admin.post("/v1/acls", json=entry)
        assert added.status_code == 201, added.text
        listed = admin.get("/v1/acls").json()
        assert {**entry, "host": "*"} in listed
        page = admin.get("/security").text
        assert "User:alice" in page and "prefixed" in page
        deleted = admin.request("DELETE", "/v1/acls", json=entry)
        assert deleted.status_code == 200 and deleted.json()["deleted"] == 1
        assert {**entry, "host": "*"} not in admin.get("/v1/acls").json()
        bad = admin.post("/v1/acls", json={**entry, "operation": "fly"})
        assert bad.status_code == 400 and "unknown operation 'fly'" in bad.json()["message"]
