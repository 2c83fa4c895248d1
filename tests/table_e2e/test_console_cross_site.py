"""The console's own page still triggers its actions in a real browser now that a POST must name
this host in Origin or Referer (issue 29, item 3), and a page of another origin is refused.

A browser test lives here, beside the console's other browser tests, not in ``tests/api``:
Playwright's synchronous API keeps an event loop running in the test thread for the session's
browser, which the asyncio tests collected after it could not start their own.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.timeout(120)


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
