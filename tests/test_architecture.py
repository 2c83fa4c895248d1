"""The layering of docs/architecture.md holds: import-linter's contracts (pyproject.toml) are kept,
every top-level module of the package (and of the broker) is placed in a layer, so a new one cannot
slip past them, and no import circle exists inside the package."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp

import tabletopic
import tabletopic.broker

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def _contract(name: str) -> dict[str, Any]:
    [contract] = [c for c in _contracts() if c["name"] == name]
    return contract


def _placed(contract: dict[str, Any]) -> set[str]:
    return {name.strip() for layer in contract["layers"] for name in str(layer).split("|")}


def test_every_top_level_module_has_a_layer() -> None:
    placed = _placed(_contract("Layers import one way"))
    modules = {f"tabletopic.{m.name}" for m in pkgutil.iter_modules(tabletopic.__path__)}
    assert modules - placed == set(), "add these to a layer in pyproject.toml and docs/architecture.md"
    assert placed - modules == set(), "these layers name modules that do not exist"


def test_every_broker_module_has_a_layer_and_only_the_server_imports_the_handlers() -> None:
    placed = _placed(_contract("The broker's layers import one way"))
    modules = {f"tabletopic.broker.{m.name}" for m in pkgutil.iter_modules(tabletopic.broker.__path__)}
    assert modules - placed == set(), "add these to a broker layer in pyproject.toml and docs/architecture.md"
    assert placed - modules == set(), "these broker layers name modules that do not exist"
    routed = _contract("Only the server routes to the request handlers")
    sources = set(routed["source_modules"])
    allowed = {"tabletopic.broker.server", "tabletopic.broker.handlers"}
    assert modules - allowed - sources == set(), "add these to the handlers' forbidden contract's sources"


def test_no_import_circle_inside_the_package() -> None:
    """Any circle, type-level imports included: a module that needs a type from a module that
    imports it takes a Protocol, or the type moves down."""
    graph = grimp.build_graph("tabletopic", cache_dir=None)
    circles = _circles({m: graph.find_modules_directly_imported_by(m) for m in graph.modules})
    assert circles == [], "import circles (break them by moving the shared types down): " + "; ".join(
        " -> ".join(sorted(circle)) for circle in circles
    )


def _circles(imports: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(imports.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_circle_finder_finds_a_type_level_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:]
