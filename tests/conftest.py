"""Session-wide fixtures. Servers start once per test run and only when a test asks for them.

Everything tests share lives in ``tests/support/``: the fixture modules (``*_fixtures``, one per
kind of server, registered here), process wrappers, clients, request builders and waits.

Tests wait for the condition they need (``tests/support/waiting.py``: ``wait_until`` in async code,
``wait_until_sync`` in threads and processes), never a fixed time; the few sleeps left are the
subject of their test (a pause that must elapse, a rate, watching that nothing happens) and say so
in a comment on the line.
"""

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
