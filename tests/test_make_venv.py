"""``scripts/ensure-venv.sh`` (what ``make serve``/``make test`` run first): Python 3.11 or a clear
instruction, and a .venv made by another Python is rebuilt instead of reused."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE_PYTHON = """#!/bin/sh
# a Python that is not 3.11
if [ "$1" = "--version" ]; then echo "Python 3.12.1"; exit 0; fi
exit 1
"""


def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the script and pyproject.toml, and a PATH with only tools it needs and a python3
    that is 3.12."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "ensure-venv.sh", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "env", "md5sum", "cut", "rm", "dirname", "cat", "grep", "touch"):
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    fake = bin_dir / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    return tmp_path, {"PATH": str(bin_dir), "HOME": str(tmp_path)}


def run(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(root / "scripts" / "ensure-venv.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "PATH": env["PATH"]},
        executable=shutil.which("bash"),
    )


def test_without_python_311_it_says_exactly_what_to_install(tmp_path: Path) -> None:
    root, env = project(tmp_path)
    result = run(root, env)
    assert result.returncode == 1
    assert "needs Python 3.11" in result.stderr
    assert "apt-get install python3.11 python3.11-venv" in result.stderr
    assert "make serve PYTHON=" in result.stderr
    assert not (root / ".venv").exists()


def test_a_venv_made_by_another_python_is_rebuilt_not_reused(tmp_path: Path) -> None:
    root, env = project(tmp_path)
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(root / "bin" / "python3")
    fake = str(root / "bin" / "python3")
    result = run(root, env, fake)
    assert "made by Python 3.12.1" in result.stdout and "rebuilding" in result.stdout
    assert not (root / ".venv").exists()  # the wrong venv is gone ...
    assert (
        result.returncode == 1 and f"PYTHON={fake} is not Python 3.11" in result.stderr
    )  # ... and so is 3.12


def test_make_serve_installs_verbosely_and_checks_the_venv_every_time() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install -q" not in makefile and "scripts/ensure-venv.sh" in makefile
    assert os.access(ROOT / "scripts" / "ensure-venv.sh", os.X_OK)
