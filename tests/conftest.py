"""Session-wide fixtures. Servers start once per test run and only when a test asks for them.

Fixtures live in ``tests/fixtures/`` modules, one per kind of server, registered here.
"""

pytest_plugins = [
    "tests.fixtures.servers",
    "tests.fixtures.spark",
    "tests.fixtures.catalogs",
]
