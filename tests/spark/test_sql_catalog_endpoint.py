"""How ``tabletopic sql`` finds the catalog: the node's REST catalog when one answers, otherwise one it
serves itself for the duration of the command (no Spark needed for these checks)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tabletopic.catalog.adapters import catalog_spec
from tabletopic.config import Config
from tabletopic.spark.cli import reachable_spec, split_statements
from tabletopic.table.ops.access import rest_answer
from tests.support.catalog_fixtures import CatalogFactory
from tests.support.ports import free_port

pytestmark = pytest.mark.timeout(60)


def test_uses_the_running_node_catalog_when_it_answers(tmp_path: Path, make_catalog: CatalogFactory) -> None:
    node = make_catalog({"data.dir": str(tmp_path)})
    assert node.rest is not None and rest_answer(node.rest.uri) == 200
    config = Config({"data.dir": str(tmp_path), "catalog.listener": node.rest.uri})
    with ExitStack() as stack:
        spec = reachable_spec(config, catalog_spec(config), stack)
    assert spec.rest_uri == node.rest.uri


def test_serves_the_catalog_itself_when_no_node_runs(tmp_path: Path) -> None:
    config = Config({"data.dir": str(tmp_path), "catalog.listener": f"http://127.0.0.1:{free_port()}"})
    spec = catalog_spec(config)
    assert rest_answer(str(spec.rest_uri)) is None
    with ExitStack() as stack:
        served = reachable_spec(config, spec, stack)
        assert served.rest_uri != spec.rest_uri
        assert httpx.get(f"{served.rest_uri}/v1/namespaces").json() == {"namespaces": []}
    assert rest_answer(str(served.rest_uri)) is None


def test_statements_split_on_semicolons_outside_quotes_and_comments() -> None:
    text = "SELECT 'a;b' AS x; -- a comment; with a semicolon\nSELECT `c;d` FROM t;;\n SELECT \"e;\""
    assert split_statements(text) == ["SELECT 'a;b' AS x", "SELECT `c;d` FROM t", 'SELECT "e;"']
