"""The bench scripts import the package lazily (inside the function that runs a target), so a
name moved in ``tabletopic/`` breaks a bench only when someone runs it, after minutes of other
targets. This reads every ``bench/*.py`` and checks that each name it takes from ``tabletopic``
still exists where the script looks for it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _package_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for each import from the package anywhere in ``path``; name None for
    ``import tabletopic.x``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tabletopic":
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            found.extend((name, None) for name in names if name.split(".")[0] == "tabletopic")
    return found


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda path: path.name)
def test_every_name_a_bench_takes_from_the_package_exists(script: Path) -> None:
    missing = []
    for module_name, name in _package_imports(script):
        module = importlib.import_module(module_name)
        if name is None or hasattr(module, name):
            continue
        try:
            importlib.import_module(f"{module_name}.{name}")
        except ModuleNotFoundError:
            missing.append(f"{module_name}.{name}")
    assert not missing, f"{script.name} imports names the package no longer has: {missing}"
