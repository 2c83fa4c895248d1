"""The console of one broker of the shared 3-broker cluster, in a real browser: every broker with
its rack and state, exactly one controller, and a topic's partitions with the leaders and high
watermarks the other brokers hold (read from the metadata database, not this broker's store)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import LocalCluster, placed, produce_raw, wait_until
from tests.support.cluster_fixtures import RACKS
from tests.support.kafka_clients import create_topic

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.s3, pytest.mark.slow]


def test_broker_1s_console_shows_the_whole_cluster_and_other_brokers_partitions(
    healthy_cluster: LocalCluster, page: Any, screenshots: Path
) -> None:
    topic = f"console-{uuid.uuid4().hex[:8]}"
    create_topic(healthy_cluster.brokers[1].bootstrap, topic, 6)
    leaders = placed(healthy_cluster, topic, 6)
    elsewhere = sorted(p for p, (node, _) in leaders.items() if node != 1)
    assert elsewhere, leaders
    partition = elsewhere[0]
    owner = leaders[partition][0]
    for i in range(3):
        assert wait_until(
            lambda v=b"m%d" % i: produce_raw(healthy_cluster, owner, topic, partition, v) == 0, timeout=20
        )

    page.goto(healthy_cluster.brokers[1].admin_url + "/")
    # Every broker the cluster knows is listed, those other tests added and stopped too (as such).
    rows = [
        r for r in page.locator("#nodes tbody tr").all() if r.get_attribute("data-broker") in ("1", "2", "3")
    ]
    assert len(rows) == 3
    racks = {r.get_attribute("data-broker"): r.locator(".rack").inner_text() for r in rows}
    assert racks == {str(n): rack for n, rack in RACKS.items()}
    everyone = page.locator("#nodes tbody tr").all()
    controllers = [r for r in everyone if r.locator(".controller").inner_text() == "yes"]
    assert len(controllers) == 1
    assert all(r.locator(".state").inner_text() == "alive" for r in rows)
    assert "(this node)" in page.locator('#nodes tr[data-broker="1"]').inner_text()
    assert page.locator("#timeline").count() == 1 and page.locator("#balancer").count() == 1
    page.screenshot(path=str(screenshots / "cluster-overview.png"), full_page=True)

    page.goto(f"{healthy_cluster.brokers[1].admin_url}/topics/{topic}")
    page.wait_for_url(re.compile(rf"/topics/{topic}$"))
    cells = page.locator("#partitions tbody tr").nth(partition)
    assert cells.locator(".leader").inner_text().strip() == str(owner)
    assert cells.locator(".hw").inner_text().strip() == "3"
    shown = [r.locator(".leader").inner_text().strip() for r in page.locator("#partitions tbody tr").all()]
    assert shown == [str(leaders[p][0]) for p in range(6)]
    page.screenshot(path=str(screenshots / "cluster-topic.png"), full_page=True)
