"""The console's state-changing actions cannot be triggered from another site (issue 29, item 3):
a POST must name this host in Origin (or Referer); a foreign origin is refused on every
state-changing admin request, while API clients that send neither keep working."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tabletopic.admin.origin import same_origin
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.timeout(120)


def test_origin_or_referer_must_name_the_host() -> None:
    host = {"host": "127.0.0.1:8080"}
    assert same_origin({**host, "origin": "http://127.0.0.1:8080"}, required=True)
    assert same_origin({**host, "referer": "https://127.0.0.1:8080/tables/t"}, required=True)
    assert not same_origin({**host, "origin": "http://evil.example"}, required=False)
    assert not same_origin({**host, "origin": "null"}, required=False)
    assert not same_origin({**host, "origin": "http://127.0.0.1:8080.evil.example"}, required=False)
    assert not same_origin({**host, "referer": "http://evil.example/?http://127.0.0.1:8080"}, required=True)
    assert not same_origin(host, required=True)
    assert same_origin(host, required=False)


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    node = BrokerProcess(Path(tmp_path_factory.mktemp("cross-site")) / "data")
    node.start()
    try:
        with httpx.Client(base_url=node.admin_url, timeout=30) as client:
            yield client
    finally:
        node.stop()


@pytest.mark.integration
@pytest.mark.parametrize("action", ["commit", "pause", "resume"])
def test_console_actions_need_the_consoles_own_origin(admin: httpx.Client, action: str) -> None:
    own = str(admin.base_url).rstrip("/")
    path = f"/tables/orders/{action}"
    assert admin.post(path, headers={"Origin": "http://evil.example"}).status_code == 403
    assert admin.post(path).status_code == 403  # a form post with no origin at all
    # Same origin gets through to the action (there is no table topic named orders here).
    assert admin.post(path, headers={"Origin": own}).status_code == 404
    assert admin.post(path, headers={"Referer": f"{own}/tables/orders"}).status_code == 404


@pytest.mark.integration
def test_admin_api_refuses_a_foreign_origin_but_not_a_script(admin: httpx.Client) -> None:
    assert admin.delete("/v1/topics/none", headers={"Origin": "http://evil.example"}).status_code == 403
    assert admin.delete("/v1/topics/none").status_code == 404


@pytest.mark.integration
def test_the_consoles_own_page_still_triggers_actions_in_a_browser(admin: httpx.Client, page: Any) -> None:
    """htmx posts from the console's page: the browser names the page's origin, so the action runs
    (404 here: no table topic is named orders); a page of another origin is refused."""
    own = str(admin.base_url).rstrip("/")
    page.goto(f"{own}/tables")
    post = "async (path) => (await fetch(path, {method: 'POST', headers: {'HX-Request': 'true'}})).status"
    assert page.evaluate(post, "/tables/orders/commit") == 404
    page.goto("about:blank")
    form = f"""() => {{
        const form = document.createElement('form');
        form.method = 'POST';
        form.action = '{own}/tables/orders/pause';
        document.body.appendChild(form);
        form.submit();
    }}"""
    with page.expect_response(f"{own}/tables/orders/pause") as answer:
        page.evaluate(form)
    assert answer.value.status == 403
