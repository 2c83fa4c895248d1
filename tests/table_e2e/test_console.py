"""The web console in a real browser (Debian's chromium driven by Playwright) against the shared live
node: click through every page, assert on what is shown, save screenshots to test-artifacts/console/.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from confluent_kafka import Consumer, Producer

from tests.support.table_node import TableNode, table_configs

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]


def produce(node: TableNode, topic: str, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(count):
        producer.produce(topic, key=str(i), value=json.dumps({"n": i}), partition=i % partitions)
    assert producer.flush(30) == 0


def nav(page: Any, name: str) -> None:
    """Follow the navigation bar's link to page ``name``."""
    page.locator("header nav").get_by_role("link", name=name, exact=True).click()


def chart_points(page: Any, selector: str) -> int:
    return int(page.locator(selector).get_attribute("data-points") or 0)


def wait_chart(page: Any, selector: str, timeout: float = 30.0) -> int:
    """Wait until the uPlot chart at ``selector`` is drawn with at least one point."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if page.locator(f"{selector} canvas").count() and chart_points(page, selector) > 0:
            return chart_points(page, selector)
        page.wait_for_timeout(250)
    raise AssertionError(f"chart {selector} has no points after {timeout} s")


def test_a_new_table_topic_appears_with_its_freshness_plot_after_its_first_commit(
    node: TableNode, topic_name: str, page: Any, screenshots: Path
) -> None:
    page.goto(node.admin_url + "/")
    nav(page, "Table topics")
    page.wait_for_url(re.compile(r"/tables$"))
    assert topic_name not in page.locator("#tables").inner_text()

    dlq = f"{topic_name}_dlq"
    node.create_topic(
        topic_name,
        table_configs(convert_value_type="string", errors_dlq_topic=dlq),
        partitions=2,
    )
    produce(node, topic_name, 40, partitions=2)
    # htmx refreshes the list in place: the new table topic shows up without a reload.
    page.locator("#tables a", has_text=topic_name).wait_for()
    page.locator("#tables a", has_text=topic_name).click()
    page.wait_for_url(re.compile(rf"/tables/{topic_name}$"))
    node.wait_committed(topic_name, {0: 20, 1: 20})
    page.wait_for_function(
        "document.querySelector('#rows') && document.querySelector('#rows').textContent.trim() === '40'",
        timeout=30_000,
    )
    assert "never" not in page.locator("#last-commit").inner_text()
    wait_chart(page, "#freshness-chart")
    wait_chart(page, "#lag-chart")
    snapshots = page.locator("#snapshots tbody tr")
    assert snapshots.count() >= 1
    assert "40" in page.locator("#snapshots").inner_text()  # rows added / total rows of the commit
    assert "dlq" in page.locator("#status").inner_text()
    preview = page.locator("#rows-preview").inner_text()
    assert "_kafka_value" in preview and '{"n":' in preview  # the table's own rows
    # Values as the table's types: structs as JSON, nulls as null, never Python reprs.
    assert '"partition": ' in preview and "None" not in preview and "{'" not in preview, preview
    assert "muted" in (page.locator("#last-error").get_attribute("class") or "")  # "none" is not an error
    page.screenshot(path=str(screenshots / "table-topic.png"), full_page=True)

    # The buttons act on the pipeline through the node.
    page.get_by_role("button", name="Pause").click()
    page.locator("#action-result", has_text="paused").wait_for()
    page.locator("#state", has_text="PAUSED").wait_for()
    assert node.table_status(topic_name)["state"] == "PAUSED"  # type: ignore[index]
    produce(node, topic_name, 4, partitions=2)
    page.get_by_role("button", name="Resume").click()
    page.locator("#action-result", has_text="resumed").wait_for()
    node.wait_committed(topic_name, {0: 22, 1: 22})
    page.get_by_role("button", name="Commit now").click()
    page.locator("#action-result", has_text="commit requested").wait_for()

    nav(page, "Table topics")
    page.wait_for_url(re.compile(r"/tables$"))
    wait_chart(page, f'#tables .chart[data-prefix="table|{topic_name}|freshness_seconds"]')
    page.screenshot(path=str(screenshots / "table-topics.png"), full_page=True)


def register_two_versions(node: TableNode, subject: str) -> None:
    from confluent_kafka.schema_registry import Schema

    client = node.registry()
    first = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    second = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "coupon", "type": ["null", "string"], "default": None},
        ],
    }
    client.register_schema(subject, Schema(json.dumps(first), "AVRO"))
    client.register_schema(subject, Schema(json.dumps(second), "AVRO"))


def consume_and_commit(node: TableNode, topic: str, group_id: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": node.bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == count
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_overview_topics_groups_and_schemas_pages_show_the_node(
    node: TableNode, topic_name: str, page: Any, screenshots: Path
) -> None:
    node.create_topic(topic_name, {}, partitions=2)
    produce(node, topic_name, 30, partitions=2)
    group_id = f"console-{topic_name}"
    consume_and_commit(node, topic_name, group_id, 20)
    subject = f"{topic_name}-value"
    register_two_versions(node, subject)

    page.goto(node.admin_url + "/")
    kafka_port = urlparse(f"kafka://{node.bootstrap}").port
    assert f":{kafka_port}" in page.locator("#nodes").inner_text()
    assert "this node" in page.locator("#nodes").inner_text()
    assert "WAL" in page.locator("#storage").inner_text()
    wait_chart(page, '.chart[data-prefix="node|produce_bytes_per_s"]')
    wait_chart(page, "#records-chart")
    assert page.locator("#records-chart").get_attribute("data-series") == "2"  # produced and consumed
    # Legends show words and the latest values before anyone hovers, never uPlot's "--".
    legend = page.locator("#records-chart .u-legend").inner_text()
    assert "--" not in legend and "_per_s" not in legend and "produced records/s" in legend, legend
    page.screenshot(path=str(screenshots / "overview.png"), full_page=True)

    nav(page, "Topics")
    page.wait_for_url(re.compile(r"/topics$"))
    row = page.locator("#topics tr", has_text=topic_name)
    assert "30" in row.inner_text()  # records held
    page.screenshot(path=str(screenshots / "topics.png"), full_page=True)
    row.get_by_role("link", name=topic_name).click()
    page.wait_for_url(re.compile(rf"/topics/{topic_name}$"))
    assert page.locator("#partitions tbody tr").count() == 2
    # Only what is set on the topic is listed; Kafka's defaults are folded away until asked for.
    assert "no config set on this topic" in page.locator("#configs").inner_text()
    page.locator("#default-configs summary").click()
    assert "retention.ms" in page.locator("#default-configs").inner_text()

    nav(page, "Consumer groups")
    page.wait_for_url(re.compile(r"/groups$"))
    page.locator("#groups a", has_text=group_id).click()
    page.wait_for_url(re.compile(rf"/groups/{group_id}$"))
    assert "Empty" in page.locator("main").inner_text()  # Kafka's spelling of the state
    offsets = page.locator("#offsets").inner_text()
    assert topic_name in offsets
    committed = [
        cells
        for cells in (
            [c.inner_text() for c in r.locator("td").all()] for r in page.locator("#offsets tbody tr").all()
        )
        if cells[0] == topic_name
    ]
    assert sum(int(c[2]) for c in committed) == 20 and sum(int(c[4]) for c in committed) == 10
    wait_chart(page, ".chart[data-match='|lag']")
    page.screenshot(path=str(screenshots / "group.png"), full_page=True)

    nav(page, "Schemas")
    page.wait_for_url(re.compile(r"/schemas$"))
    page.locator("#subjects a", has_text=subject).click()
    page.wait_for_url(re.compile(r"/schemas/.+"))
    assert page.locator("#compatibility").inner_text() == "BACKWARD"
    diff = page.locator("#diff").inner_text()
    assert re.search(r"^\+.*coupon", diff, re.MULTILINE), diff
    page.screenshot(path=str(screenshots / "schema-diff.png"), full_page=True)


@pytest.mark.parametrize("samples", [1, 0], ids=["one-sample", "no-sample"])
def test_a_chart_with_one_sample_or_none_spans_a_minute_not_years(
    node: TableNode, page: Any, samples: int
) -> None:
    """A node's first sample (or a restarted node's) drawn alone: uPlot padded the lone instant in
    proportion to its size and the time axis ran over years."""
    now = time.time()
    series = {"t": [now] * samples, "node|produce_bytes_per_s": [1024.0] * samples}
    page.route("**/console/series?*", lambda route: route.fulfill(json=series))
    page.goto(node.admin_url + "/")
    chart = page.locator('.chart[data-prefix="node|produce_bytes_per_s"]')
    chart.locator("canvas").wait_for()
    page.wait_for_function(
        "el => el.dataset.spanSeconds !== undefined", arg=chart.element_handle(), timeout=5_000
    )
    assert chart.get_attribute("data-span-seconds") == "60"
    assert chart_points(page, '.chart[data-prefix="node|produce_bytes_per_s"]') == samples


def test_console_and_api_docs_load_nothing_from_outside_the_node(
    node: TableNode, page: Any, screenshots: Path
) -> None:
    origin = urlparse(node.admin_url).netloc
    outside: list[str] = []

    def check(route: Any) -> None:
        url = route.request.url
        if urlparse(url).netloc == origin or url.startswith("data:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page.route("**/*", check)
    missing: list[str] = []
    page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)
    for path in ("/", "/topics", "/messages", "/groups", "/tables", "/schemas", "/security"):
        page.goto(node.admin_url + path)
        page.wait_for_load_state("networkidle")
    page.goto(node.admin_url + "/docs")
    page.locator(".swagger-ui .info .title").wait_for()
    assert "tabletopic admin API" in page.locator(".swagger-ui .info .title").inner_text()
    page.screenshot(path=str(screenshots / "api-docs.png"))
    assert outside == []
    assert missing == []  # the favicon too


def test_every_metric_has_the_tabletopic_prefix_and_the_grafana_dashboard_uses_real_ones(
    node: TableNode,
) -> None:
    import httpx

    text = httpx.get(node.admin_url + "/metrics", timeout=10).text
    typed = set(re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE))
    assert typed and all(name.startswith("tabletopic_") for name in typed), sorted(typed)
    families = {re.sub(r"_total$", "", name) for name in typed}
    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json").read_text()
    )
    used = {
        re.sub(r"_(total|bucket|count|sum)$", "", name)
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"tabletopic_\w+", target["expr"])
    }
    assert used and used <= families, used - families


def test_the_message_browser_reads_produces_resets_a_group_and_deletes_a_topic_with_confirmations(
    node: TableNode, topic_name: str, page: Any, screenshots: Path
) -> None:
    node.create_topic(topic_name, {}, partitions=1)
    produce(node, topic_name, 6)
    group_id = f"browse-{topic_name}"
    consume_and_commit(node, topic_name, group_id, 6)

    page.goto(node.admin_url + "/")
    nav(page, "Messages")
    page.wait_for_url(re.compile(r"/messages$"))
    page.locator("#browse select[name=topic]").select_option(topic_name)
    page.locator("#browse input[name=offset]").fill("2")
    page.locator("#browse").get_by_role("button", name="Show").click()
    page.locator("#messages tbody tr").first.wait_for()
    rows = page.locator("#messages tbody tr")
    assert rows.count() == 4 and rows.first.get_attribute("data-offset") == "2"
    assert '{"n": 2}' in rows.first.inner_text() and "json" in rows.first.locator(".format").inner_text()

    produce_form = page.locator("#produce")
    produce_form.locator("select[name=topic]").select_option(topic_name)
    produce_form.locator("input[name=key]").fill("hello")
    produce_form.locator("textarea[name=value]").fill('{"n": 99}')
    produce_form.locator("textarea[name=headers]").fill("src=console")
    produce_form.get_by_role("button", name="Produce").click()
    page.locator("#produce-result", has_text="at offset 6").wait_for()
    page.screenshot(path=str(screenshots / "messages.png"), full_page=True)

    page.goto(f"{node.admin_url}/groups/{group_id}")
    page.locator("#reset-offsets summary").click()
    reset = page.locator("#reset-offsets form")
    reset.locator("select[name=to]").select_option("earliest")
    reset.get_by_role("button", name="Reset").click()
    page.locator("#reset-result", has_text="type the group's name").wait_for()  # not confirmed: nothing done
    reset.locator("input[name=confirm]").fill(group_id)
    reset.get_by_role("button", name="Reset").click()
    page.locator("#reset-result", has_text="reset to earliest").wait_for()
    page.wait_for_function(
        "[...document.querySelectorAll('#offsets tbody tr td:nth-child(3)')]"
        ".map(t => t.textContent).join() === '0'",
        timeout=30_000,
    )
    page.screenshot(path=str(screenshots / "group-reset.png"), full_page=True)

    page.goto(f"{node.admin_url}/topics/{topic_name}")
    page.locator("#delete-topic summary").click()
    page.locator("#delete-topic input[name=confirm]").fill(topic_name)
    page.locator("#delete-topic").get_by_role("button", name="Delete topic and its data").click()
    page.locator("#delete-result", has_text=f"topic {topic_name} deleted").wait_for()

    # SCRAM users: created with the form, listed, deleted once the name is typed again.
    user = f"u{topic_name[-6:]}"
    page.goto(node.admin_url + "/security")
    add = page.locator("#add-user")
    add.locator("input[name=name]").fill(user)
    add.locator("input[name=password]").fill("a-secret-1")
    add.get_by_role("button", name="Create or set password").click()
    page.locator("#user-result", has_text=f"user {user} set").wait_for()
    page.reload()
    row = page.locator("#users tr", has_text=user)
    assert "SCRAM-SHA-256" in row.inner_text() and "a-secret-1" not in page.content()
    row.get_by_role("button", name="Delete").click()
    page.locator("#user-result", has_text="type the user's name").wait_for()
    row.locator("input[name=confirm]").fill(user)
    row.get_by_role("button", name="Delete").click()
    page.locator("#user-result", has_text=f"user {user} deleted").wait_for()
    page.screenshot(path=str(screenshots / "security.png"), full_page=True)
