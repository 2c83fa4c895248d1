"""`tabletopic cluster up` after `make serve` alone: before starting anything, one error per missing
part, each naming what to install (the [cluster] extra for SeaweedFS, Debian's postgresql)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tabletopic.cli import app
from tabletopic.cluster import local


def test_cluster_up_names_the_extra_and_the_debian_package_when_they_are_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setattr(local, "postgres_bin_dir", lambda: None)
    monkeypatch.setattr(local.shutil, "which", lambda _name: None)
    monkeypatch.setattr(local.sys, "executable", "/nonexistent/bin/python")
    result = CliRunner().invoke(app, ["cluster", "up", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    text = result.output
    assert "pip install -e '.[cluster]'" in text and "make cluster" in text
    assert "apt-get install postgresql" in text
    assert "starting PostgreSQL" not in text  # nothing was started
