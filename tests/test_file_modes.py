"""What a node keeps in its data directory is its own (issue 29, item 5): under the common umask
022 the directory is 0700 and every file the node writes there (metadata database with SCRAM
credentials, WAL, endpoints file) 0600, including a data directory that existed with 0755."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_the_data_directory_and_its_files_are_private_under_umask_022(
    umask_022: None, tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    node = BrokerProcess(data_dir)
    node.start()
    try:
        producer = Producer({"bootstrap.servers": node.bootstrap})
        producer.produce(f"modes-{uuid.uuid4().hex[:8]}", b"v")
        assert producer.flush(30) == 0
    finally:
        node.stop()
    open_to_others = {
        str(path.relative_to(tmp_path)): oct(stat.S_IMODE(path.stat().st_mode))
        for path in [data_dir, *data_dir.rglob("*")]
        if stat.S_IMODE(path.stat().st_mode) & 0o077
    }
    assert open_to_others == {}
    assert (data_dir / "metadata.db").exists()
