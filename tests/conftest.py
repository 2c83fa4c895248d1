"""Session-wide fixtures. Servers start once per test run and only when a test asks for them.

Everything tests share lives in ``tests/support/``: the fixture modules (``*_fixtures``, one per
kind of server, registered here), process wrappers, clients, request builders and waits.
"""

pytest_plugins = [
    "tests.support.server_fixtures",
    "tests.support.spark_fixtures",
    "tests.support.catalog_fixtures",
    "tests.support.browser_fixtures",
    "tests.support.cluster_fixtures",
]
