"""Session-wide fixtures. Servers start once per test run and only when a test asks for them.

Everything tests share lives in ``tests/support/``: the fixture modules (``*_fixtures``, one per
kind of server, registered here), process wrappers, clients, request builders and waits.

Tests wait for the condition they need (``tests/support/waiting.py``: ``wait_until`` in async code,
``wait_until_sync`` in threads and processes), never a fixed time; the few sleeps left are the
subject of their test (a pause that must elapse, a rate, watching that nothing happens) and say so
in a comment on the line.
"""

import os
from typing import Any

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


def pytest_configure(config: pytest.Config) -> None:
    """Collect the paths given on the command line in sorted order. pytest 9.1 (the index's newest
    below 9.2) loses a directory's conftest fixtures when its files are given apart, with a file of
    a parent directory between them (``tests/broker/security/test_acls.py tests/test_x.py
    tests/broker/test_topics_cli.py``: ``fixture 'bootstrap' not found``; pytest issues 14635 and
    14971). Sorted, a directory's files stand together; which tests run does not change."""
    config.args[:] = sorted(config.args)


# `make test` runs the suite in two pytest-xdist workers (`--dist loadgroup`). One runs every test
# that uses the run's shared servers (a mark below, or a session-scoped fixture of tests/), so those
# stay one set per run; the other runs every other test: the in-process ones, and those that start
# and kill their own nodes. Grouping by test, not by module, matters: a module with one test on the
# shared servers used to put all its other tests on that worker too, about seven minutes of the
# suite's critical path, while the other worker sat idle after its first five.
#
# The second worker runs at a lower priority (``os.nice``), and so do the nodes it starts: it takes
# the CPU the shared servers leave. Two workers that both ran brokers at one priority starved each
# other on a 2-core machine (group heartbeats over 5 s; a cluster test failed on timing).
SHARED_SERVER_MARKERS = ("s3", "postgres", "spark")
SHARED = "shared-servers"
ALONE = "alone"


def _uses_shared_servers(item: pytest.Item) -> bool:
    if any(item.get_closest_marker(name) for name in SHARED_SERVER_MARKERS):
        return True
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
    """Gives each test its xdist group: ``shared-servers`` if it uses the run's servers, else
    ``alone``."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(SHARED if _uses_shared_servers(item) else ALONE))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Stops a ``--dist loadgroup`` run whose worker's test ids lack their group.

    xdist hands a test to a worker by the ``@group`` it appends to the test's id; with a pytest
    whose ids xdist can no longer change (pytest 9.2 with xdist 3.8), every group was lost without
    a word: servers ran in both workers, the suite took twice as long and timing tests failed."""
    if node.config.getoption("dist") != "loadgroup":
        return
    lost = [test_id for test_id in ids if "@" not in test_id]
    if lost:
        pytest.exit(
            f"pytest-xdist lost the xdist_group of {len(lost)} of {len(ids)} tests (first: {lost[0]}): "
            "this pytest and pytest-xdist do not work together (see the pin in pyproject.toml)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


ALONE_NICENESS = 10
_niced = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """In an xdist worker running the ``alone`` group, lower the worker's priority once."""
    global _niced
    if _niced or "PYTEST_XDIST_WORKER" not in os.environ:
        return
    marker = item.get_closest_marker("xdist_group")
    if marker is not None and marker.args and marker.args[0] == ALONE:
        os.nice(ALONE_NICENESS)
        _niced = True
