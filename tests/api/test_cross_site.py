"""The console's state-changing actions cannot be triggered from another site (issue 29, item 3):
a POST must name this host in Origin (or Referer); a foreign origin is refused on every
state-changing admin request, while API clients that send neither keep working."""

from __future__ import annotations

import httpx
import pytest

from tabletopic.api.origin import same_origin

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
