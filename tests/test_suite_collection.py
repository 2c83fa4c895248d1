"""The suite collects the same way whatever order its paths are given in: a developer running a
few modules gets each directory's conftest fixtures, as ``make test`` does."""

from __future__ import annotations

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
