"""The admin HTTP API of a running node: health, metrics, cluster, topics CRUD and configs."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.support import kafka_clients as clients
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(broker_process: BrokerProcess) -> httpx.Client:
    return httpx.Client(base_url=broker_process.admin_url, timeout=30)


def test_health_lists_started_components(admin: httpx.Client) -> None:
    body = admin.get("/health").json()
    assert body["status"] == "ok"
    assert "broker" in body["components"]


def test_metrics_expose_broker_counters_in_prometheus_text(admin: httpx.Client, bootstrap: str) -> None:
    clients.confluent_produce(
        bootstrap, f"metrics-{uuid.uuid4().hex[:6]}", clients.make_messages(10, 1, "m"), "none", True
    )
    response = admin.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'tabletopic_broker_requests_total{api="produce",error="none"}' in text
    assert "tabletopic_broker_request_seconds_bucket" in text
    assert "tabletopic_broker_partitions" in text
    assert 'tabletopic_broker_requests_in_flight{api="produce"} 0.0' in text


def test_cluster_names_this_node_and_its_listeners(
    admin: httpx.Client, broker_process: BrokerProcess
) -> None:
    body = admin.get("/v1/cluster").json()
    assert body["cluster_id"]
    ports = {listener["port"] for listener in body["brokers"][0]["listeners"]}
    assert broker_process.kafka_port in ports


def test_a_single_node_cluster_view_counts_records_and_stored_bytes(
    admin: httpx.Client, bootstrap: str
) -> None:
    name = f"view-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": name, "partitions": 2}).status_code == 201
    clients.confluent_produce(bootstrap, name, clients.make_messages(20, 2, "v"), "none", True)
    body = admin.get("/v1/cluster").json()
    assert body["mode"] == "single node" and body["controller_id"] == body["brokers"][0]["node_id"]
    listed = {t["name"]: t for t in body["topic_list"]}
    assert listed[name]["records"] == 20 and listed[name]["partitions"] == 2
    assert body["records"] >= 20 and body["timeline"] == []


def test_the_console_answers_a_favicon_and_folds_topic_defaults(admin: httpx.Client) -> None:
    favicon = admin.get("/favicon.ico")
    assert favicon.status_code == 200 and favicon.headers["content-type"].startswith("image/svg")
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    assert (
        admin.post("/v1/topics", json={"name": name, "configs": {"retention.ms": "60000"}}).status_code == 201
    )
    page = admin.get(f"/topics/{name}").text
    shown = page[page.index('id="configs"') : page.index('id="default-configs"')]
    assert "retention.ms" in shown and "60000" in shown
    assert "9223372036854775807" not in shown  # Kafka's defaults are folded away below
    assert "keys at their defaults" in page


def test_topic_lifecycle_create_describe_alter_delete(admin: httpx.Client, bootstrap: str) -> None:
    name = f"http-{uuid.uuid4().hex[:8]}"
    created = admin.post(
        "/v1/topics", json={"name": name, "partitions": 2, "configs": {"retention.ms": "60000"}}
    )
    assert created.status_code == 201, created.text
    assert len(created.json()["partitions"]) == 2
    clients.confluent_produce(bootstrap, name, clients.make_messages(20, 2, "h"), "none", True)
    described = admin.get(f"/v1/topics/{name}").json()
    assert [p["high_watermark"] for p in described["partitions"]] == [10, 10]
    assert described["configs"]["retention.ms"] == "60000"
    assert name in [t["name"] for t in admin.get("/v1/topics").json()]
    altered = admin.patch(
        f"/v1/topics/{name}/configs", json={"set": {"retention.bytes": "1000"}, "delete": ["retention.ms"]}
    )
    assert altered.status_code == 200
    assert altered.json()["retention.bytes"] == "1000"
    assert altered.json()["retention.ms"] == "604800000"
    assert admin.delete(f"/v1/topics/{name}").status_code == 204
    assert admin.get(f"/v1/topics/{name}").status_code == 404


def test_topic_errors_carry_kafka_error_names(admin: httpx.Client) -> None:
    name = f"dup-{uuid.uuid4().hex[:8]}"
    assert admin.post("/v1/topics", json={"name": name}).status_code == 201
    duplicate = admin.post("/v1/topics", json={"name": name})
    assert duplicate.status_code == 409
    assert duplicate.json()["error_code"] == "TOPIC_ALREADY_EXISTS"
    bad_config = admin.post("/v1/topics", json={"name": f"x-{name}", "configs": {"nope": "1"}})
    assert (bad_config.status_code, bad_config.json()["error_code"]) == (400, "INVALID_CONFIG")
    missing = admin.delete("/v1/topics/never-existed")
    assert (missing.status_code, missing.json()["error_code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION")


def test_openapi_document_lists_the_topic_routes(admin: httpx.Client) -> None:
    paths = admin.get("/openapi.json").json()["paths"]
    assert "/v1/topics" in paths and "/v1/topics/{name}" in paths


def test_table_topic_configs_are_checked_by_the_table_pipeline(bootstrap: str) -> None:
    """automq.table.topic.* keys reach the validator the table component registers; its reason
    comes back as INVALID_CONFIG."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"table-{uuid.uuid4().hex[:8]}"
    bad = NewTopic(
        name,
        num_partitions=1,
        replication_factor=1,
        config={"automq.table.topic.enable": "true", "automq.table.topic.errors.tolerance": "sometimes"},
    )
    with pytest.raises(KafkaException) as caught:
        admin.create_topics([bad])[name].result(30)
    error = caught.value.args[0]
    assert error.name() == "INVALID_CONFIG"
    assert "errors.tolerance" in error.str()
    good = NewTopic(
        name, num_partitions=1, replication_factor=1, config={"automq.table.topic.enable": "true"}
    )
    admin.create_topics([good])[name].result(30)
    # Leave no table topic behind: the shared broker's table pipeline would keep polling it.
    admin.delete_topics([name])[name].result(30)
