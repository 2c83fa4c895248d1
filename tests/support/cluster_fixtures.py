"""One 3-broker cluster per test session (PostgreSQL + SeaweedFS + 3 ``tabletopic serve``
processes), shared by every cluster test. Tests that kill or stop a broker start it again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import LocalCluster, wait_until
from tests.support.postgres import PostgresServer
from tests.support.seaweedfs import SeaweedFS, s3_settings_of

# One broker per zone, for the rack-aware routing tests (clients naming no zone are unaffected).
RACKS = {1: "a", 2: "b", 3: "c"}


@pytest.fixture(scope="session")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer, seaweedfs: SeaweedFS
) -> Iterator[LocalCluster]:
    url = postgres_server.create_database(f"cluster_{uuid.uuid4().hex[:8]}")
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), url, s3_settings_of(seaweedfs, "cluster"))
    try:
        local.start_many([1, 2, 3], RACKS)
        wait_until(lambda: len(local.metadata(1).brokers) == 3, timeout=30)
        yield local
    finally:
        local.stop_all()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of the test's own, to restart: restarting the suite's would fail every other
    test's sessions under way."""
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


def one_broker(
    root: Path, url: str, s3: dict[str, str], settings: dict[str, str] | None = None, wal: str = "object"
) -> LocalCluster:
    """A cluster of one broker on database ``url`` (its own, to restart or to pace), started."""
    cluster = LocalCluster(root, url, s3, settings or {}, wal=wal)
    cluster.start(1)
    wait_until(lambda: len(cluster.metadata(1).brokers) == 1, timeout=30)
    return cluster


def use_wal(cluster: LocalCluster, wal: str) -> None:
    """Restart the three brokers on another WAL kind (``shared`` or ``object``) if they are not on
    it: killed, as a crash (a shared WAL is taken back at the next start)."""
    if cluster.wal == wal:
        return
    for broker in cluster.brokers.values():
        broker.kill()
    cluster.brokers.clear()
    cluster.wal = wal
    cluster.start_many([1, 2, 3], RACKS)


def three_brokers_up(cluster: LocalCluster) -> None:
    """Start the brokers a test left stopped, and restart any a test deposed: a broker paused past
    its lease on the shared WAL has its WAL taken over and leaves the cluster for good, while its
    process lives on (a restart joins again). Returns once every broker lists all three."""

    def all_listed() -> bool:
        return all(len(cluster.metadata(n).brokers) == 3 for n in (1, 2, 3))

    cluster.start_many([n for n in (1, 2, 3) if n not in cluster.running()])
    try:
        wait_until(all_listed, timeout=30)
        return
    except TimeoutError:
        pass
    views = []
    for n in (1, 2, 3):
        try:
            views.append({b.node_id for b in cluster.metadata(n).brokers})
        except OSError:
            views.append(set())
    gone = [n for n in (1, 2, 3) if sum(n in view for view in views) < 2]
    for n in gone:
        cluster.brokers[n].kill()
    cluster.start_many(gone)
    wait_until(all_listed, timeout=30)


@pytest.fixture(scope="session", params=["shared", "object"])
def wal_kind(request: pytest.FixtureRequest) -> str:
    """Both WAL kinds, for the few cluster tests that run on each (session-scoped, so pytest runs
    the tests of one kind together and the brokers switch kinds as seldom as possible)."""
    return str(request.param)


@pytest.fixture
def healthy_cluster(cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The shared cluster with its three brokers up on the shared WAL, before and after the test."""
    use_wal(cluster, "shared")
    three_brokers_up(cluster)
    yield cluster
    cluster.start_many([n for n in (1, 2, 3) if n not in cluster.running()])


@pytest.fixture
def cluster_on_each_wal(cluster: LocalCluster, wal_kind: str) -> Iterator[LocalCluster]:
    """The shared cluster with its three brokers up on ``wal_kind``'s WAL."""
    use_wal(cluster, wal_kind)
    three_brokers_up(cluster)
    yield cluster
    cluster.start_many([n for n in (1, 2, 3) if n not in cluster.running()])
