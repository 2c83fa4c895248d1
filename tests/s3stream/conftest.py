"""Fixtures for the storage engine: a store factory parametrised over WAL mode × object store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tabletopic import database
from tests.support.store_harness import StoreHarness, local_object_settings, s3_object_settings


def _backend_params() -> list[Any]:
    return [
        pytest.param(("local", "dir"), id="local-wal-dir"),
        pytest.param(("object", "dir"), id="object-wal-dir"),
        pytest.param(("local", "s3"), id="local-wal-s3", marks=pytest.mark.s3),
        pytest.param(("object", "s3"), id="object-wal-s3", marks=pytest.mark.s3),
    ]


@pytest.fixture(params=_backend_params())
async def harness(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreHarness]:
    wal_mode, backend = request.param
    if backend == "s3":
        objects = s3_object_settings(request.getfixturevalue("s3_settings"))
    else:
        objects = local_object_settings(tmp_path)
    h = StoreHarness(tmp_path, wal_mode, objects, database.default_url(tmp_path))
    yield h
    await h.close_all()


@pytest.fixture
async def local_harness(tmp_path: Path) -> AsyncIterator[StoreHarness]:
    """Local WAL, local directory: for tests about one mechanism, not the backends."""
    h = StoreHarness(tmp_path, "local", local_object_settings(tmp_path), database.default_url(tmp_path))
    yield h
    await h.close_all()
