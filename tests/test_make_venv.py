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
    for tool in ("bash", "env", "md5sum", "cut", "rm", "dirname", "cat", "grep", "touch", "sh"):
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
    result = run(root, env, "serve")
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
    result = run(root, env, "serve", fake)
    assert "made by Python 3.12.1" in result.stdout and "rebuilding" in result.stdout
    assert not (root / ".venv").exists()  # the wrong venv is gone ...
    assert (
        result.returncode == 1 and f"PYTHON={fake} is not Python 3.11" in result.stderr
    )  # ... and so is 3.12


FAKE_PYTHON_311 = """#!/bin/sh
# a Python that is 3.11 (the version check is its only use here)
exit 0
"""
FAKE_PIP = """#!/bin/sh
# records what it was asked to install
echo "$*" >> "$(dirname "$0")/../pip.log"
"""


def venv_with_fake_pip(root: Path) -> Path:
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON_311), ("pip", FAKE_PIP)):
        (venv_bin / name).write_text(text)
        (venv_bin / name).chmod(0o755)
    return root / ".venv" / "pip.log"


def installs(log: Path) -> list[str]:
    """The package specs pip was asked for (the pip/wheel upgrade left out)."""
    if not log.exists():
        return []
    return [line.split()[-1] for line in log.read_text().splitlines() if "-e" in line.split()]


def test_serve_installs_only_the_package_and_test_adds_the_extras(tmp_path: Path) -> None:
    root, env = project(tmp_path)
    log = venv_with_fake_pip(root)
    first = run(root, env, "serve")
    assert first.returncode == 0, first.stderr
    assert installs(log) == ["."]  # not '.[test]': serving needs no pytest, mypy or playwright
    log.unlink()
    again = run(root, env, "serve")
    assert again.returncode == 0 and installs(log) == []  # stamped: nothing to do
    test = run(root, env, "test")
    assert test.returncode == 0, test.stderr
    assert installs(log) == [".[test]"]  # the extras are added after a serve install
    log.unlink()
    assert run(root, env, "serve").returncode == 0 and installs(log) == []  # a test install serves
    assert run(root, env, "test").returncode == 0 and installs(log) == []


def test_a_changed_pyproject_reinstalls(tmp_path: Path) -> None:
    root, env = project(tmp_path)
    log = venv_with_fake_pip(root)
    assert run(root, env, "test").returncode == 0
    log.unlink()
    with (root / "pyproject.toml").open("a") as f:
        f.write("\n# changed\n")
    assert run(root, env, "serve").returncode == 0 and installs(log) == ["."]


def test_the_mode_is_required(tmp_path: Path) -> None:
    root, env = project(tmp_path)
    result = run(root, env)
    assert result.returncode == 2 and "serve|cluster|test" in result.stderr


def test_make_cluster_adds_the_cluster_extra_to_a_serving_venv(tmp_path: Path) -> None:
    """`tabletopic cluster up` after `make serve` needs SeaweedFS: `make cluster` adds the
    [cluster] extra, and serving afterwards installs nothing again."""
    root, env = project(tmp_path)
    log = venv_with_fake_pip(root)
    assert run(root, env, "serve").returncode == 0 and installs(log) == ["."]
    log.unlink()
    cluster = run(root, env, "cluster")
    assert cluster.returncode == 0, cluster.stderr
    assert installs(log) == [".[cluster]"]
    log.unlink()
    assert run(root, env, "serve").returncode == 0 and installs(log) == []
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "ensure-venv.sh cluster" in makefile and "install-system-deps.sh cluster" in makefile


def test_make_serve_installs_verbosely_and_checks_the_venv_every_time() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install -q" not in makefile and "scripts/ensure-venv.sh" in makefile
    assert "ensure-venv.sh serve" in makefile and "ensure-venv.sh test" in makefile
    assert "\nserve: venv\n" in makefile and "\ntest: venv-test\n" in makefile
    assert os.access(ROOT / "scripts" / "ensure-venv.sh", os.X_OK)
