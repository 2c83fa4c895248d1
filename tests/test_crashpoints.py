"""Crash points fire where the environment says, and ``TABLETOPIC_CRASH_ONCE`` limits one to a
single process of all those that inherit the variables (Spark's Python workers each are one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

PASS_THE_POINT = "from tabletopic.crashpoints import crash_point; crash_point('test.point'); print('passed')"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PASS_THE_POINT],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_crash_point_kills_every_process_that_passes_it() -> None:
    for _ in range(2):
        assert _run({"TABLETOPIC_CRASH_AT": "test.point"}).returncode == -signal.SIGKILL


def test_with_a_once_file_only_the_first_process_is_killed(tmp_path: Path) -> None:
    env = {"TABLETOPIC_CRASH_AT": "test.point", "TABLETOPIC_CRASH_ONCE": str(tmp_path / "fired")}
    first, second = _run(env), _run(env)
    assert first.returncode == -signal.SIGKILL
    assert (second.returncode, second.stdout.strip()) == (0, "passed")
