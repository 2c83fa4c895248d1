"""Session-wide fixtures. Servers start once per test run and only when a test asks for them.

Everything tests share lives in ``tests/support/``: the fixture modules (``*_fixtures``, one per
kind of server, registered here), process wrappers, clients, request builders and waits.

Tests wait for the condition they need (``tests/support/waiting.py``: ``wait_until`` in async code,
``wait_until_sync`` in threads and processes), never a fixed time; the few sleeps left are the
subject of their test (a pause that must elapse, a rate, watching that nothing happens) and say so
in a comment on the line.
"""

import pytest

from tests.support.broker_process import BrokerProcess

pytest_plugins = [
    "tests.support.server_fixtures",
    "tests.support.spark_fixtures",
    "tests.support.catalog_fixtures",
    "tests.support.browser_fixtures",
    "tests.support.cluster_fixtures",
]

# Every node a test starts forms a new group's first generation at once: Kafka's default waits 3 s
# (group.initial.rebalance.delay.ms) for more members to arrive, and every group a test forms is
# new, so each one paid 3 s. No test here is about that wait (the group state tests cover it).
BrokerProcess.defaults = {"group.initial.rebalance.delay.ms": "0"}


# `make test` runs the suite in two pytest-xdist workers (`--dist loadgroup`): one runs every module
# that uses a server shared by the session (a session-scoped fixture of tests/), the other every module
# whose tests run in-process or start processes of their own. The shared servers stay one set per
# run, and the suite takes about as long as the shared-server modules alone.


def _uses_shared_servers(item: pytest.Item) -> bool:
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is None:
        return False
    return any(
        definition.scope == "session" and definition.func.__module__.startswith("tests.")
        for definitions in fixture_info.name2fixturedefs.values()
        for definition in definitions
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Gives each module one xdist group: ``shared-servers`` if any of its tests uses one, else
    ``own-processes``."""
    shared = {item.path for item in items if _uses_shared_servers(item)}
    for item in items:
        group = "shared-servers" if item.path in shared else "own-processes"
        item.add_marker(pytest.mark.xdist_group(group))
