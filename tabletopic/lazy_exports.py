"""A package's re-exports loaded on first use.

Importing a settings module of a package (every command loads every key) must not pull in the
heavy modules behind the package's re-exports: the package names them in a module ``__getattr__``
that imports the defining module only when the name is first read."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``exports`` maps each re-exported name to the
    module that defines it; any other name is an AttributeError, as for a plain module."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
