"""``tabletopic cluster up`` starts its servers side by side (PostgreSQL with SeaweedFS, then every
broker at once), and a start that fails is raised only once the others have returned, so
``LocalCluster.stop`` finds every process that did start."""

from __future__ import annotations

import threading
import time

import pytest

from tabletopic.cluster.local import free_port, start_together


def test_starts_run_at_the_same_time() -> None:
    # Each start waits for the other: one after the other, the first would wait forever (here 5 s).
    both = threading.Barrier(2, timeout=5)
    start_together([both.wait, both.wait])


def test_a_failed_start_is_raised_after_the_other_starts_have_returned() -> None:
    finished: list[str] = []

    def fails() -> None:
        raise RuntimeError("broker 1 exited")

    def slow() -> None:
        time.sleep(0.3)  # the subject: a start still running when the other has failed
        finished.append("broker 2")

    with pytest.raises(RuntimeError, match="broker 1 exited"):
        start_together([fails, slow])
    assert finished == ["broker 2"]


def test_ports_chosen_side_by_side_are_all_different() -> None:
    ports: list[int] = []

    def choose() -> None:
        ports.extend(free_port() for _ in range(50))

    start_together([choose] * 8)
    assert len(set(ports)) == len(ports) == 400
