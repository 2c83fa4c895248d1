"""The OWNER fence of a shared WAL directory: the writer's check after each fsync fails once a
recoverer has written its fence, and only then."""

from __future__ import annotations

from pathlib import Path

import pytest

from tabletopic.s3stream.wal_fence import OWNER, Role, WalFence, WalFenced, WalToken


def test_token_text_round_trips_and_garbage_reads_as_none() -> None:
    token = WalToken(Role.WRITER, 3, "0001-42", "host-a", 42)
    assert WalToken.parse(token.text()) == token
    assert WalToken.parse("") is None
    assert WalToken.parse("writer 3") is None
    assert WalToken.parse("owner x y z w") is None


def test_writer_check_passes_while_its_claim_stands(tmp_path: Path) -> None:
    fence = WalFence(tmp_path / "a")
    writer = WalToken.here(Role.WRITER, 1, "a")
    fence.claim(writer)
    fence.check(writer)
    assert fence.read() == writer
    assert not list(fence.directory.glob(f"{OWNER}.*"))  # no temporary file left behind


def test_writer_check_fails_after_a_recoverer_fenced(tmp_path: Path) -> None:
    fence = WalFence(tmp_path / "a")
    writer = WalToken.here(Role.WRITER, 1, "a")
    fence.claim(writer)
    WalFence(tmp_path / "a").fence(WalToken(Role.FENCED, 2, "b", "host-b", 7))
    with pytest.raises(WalFenced, match="broker 2"):
        fence.check(writer)


def test_writer_check_fails_when_the_owner_file_is_gone(tmp_path: Path) -> None:
    fence = WalFence(tmp_path / "a")
    writer = WalToken.here(Role.WRITER, 1, "a")
    fence.claim(writer)
    fence.path.unlink()
    with pytest.raises(WalFenced):
        fence.check(writer)


def test_another_process_with_the_same_ids_is_not_the_same_holder(tmp_path: Path) -> None:
    fence = WalFence(tmp_path / "a")
    writer = WalToken.here(Role.WRITER, 1, "a")
    fence.claim(WalToken(Role.WRITER, 1, "a", writer.host, writer.pid + 1))
    with pytest.raises(WalFenced):
        fence.check(writer)
