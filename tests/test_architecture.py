"""The layering of docs/architecture.md holds: import-linter's contracts (pyproject.toml) are kept,
and every top-level module of the package is placed in a layer, so a new one cannot slip past them."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import tabletopic

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def test_every_top_level_module_has_a_layer() -> None:
    [layers] = [c for c in _contracts() if c["type"] == "layers"]
    placed = {name.strip() for layer in layers["layers"] for name in str(layer).split("|")}  # type: ignore[attr-defined]
    modules = {f"tabletopic.{m.name}" for m in pkgutil.iter_modules(tabletopic.__path__)}
    assert modules - placed == set(), "add these to a layer in pyproject.toml and docs/architecture.md"
    assert placed - modules == set(), "these layers name modules that do not exist"


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:]
