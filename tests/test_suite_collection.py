"""The suite collects the same way whatever order its paths are given in: a developer running a
few modules gets each directory's conftest fixtures, as ``make test`` does. And a test module
shares nothing by being imported: helpers live in ``tests/support/``, fixtures in a conftest."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_files_given_apart_from_their_directorys_other_files_keep_its_conftest_fixtures() -> None:
    """pytest 9.1 loses ``tests/broker/conftest.py``'s fixtures for the last file here (a nested
    file, then a file of a parent directory, then the nested directory's own file);
    ``tests/conftest.py`` sorts the paths so it cannot."""
    interleaved = [
        "tests/broker/security/test_acls.py",
        "tests/test_fencing.py",
        "tests/broker/test_topics_cli.py",
    ]
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--fixtures-per-test",
    ]
    result = subprocess.run(
        [*command, "-q", *interleaved],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bootstrap -- tests/broker/conftest.py" in result.stdout, result.stdout


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def test_no_test_module_or_conftest_is_imported_as_a_library() -> None:
    """A helper imported from a test module drags that module's tests and fixtures into another's
    namespace (a fixture imported this way needed a ``noqa`` to survive the linter), and a conftest
    imported by name is a plugin used as a library: both moved to ``tests/support/``."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for folder in ("tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for module in sorted(_imported_modules(path))
        if module.startswith("tests.")
        and (module.rsplit(".", 1)[-1].startswith("test_") or module.endswith(".conftest"))
    ]
    assert not offenders, "\n".join(offenders)
