"""Which field of a request holds a NUL (the strings PostgreSQL cannot store)."""

from __future__ import annotations

from tabletopic.broker.protocol import nul_field
from tests.support.kafka_requests import produce_request, request


def test_a_clean_request_has_none() -> None:
    assert nul_field("client", request(42, 2, groups_names=["a", "b"])) is None
    assert nul_field(None, request(22, 4, transactional_id=None, transaction_timeout=1000)) is None


def test_the_header_client_id_is_checked_first() -> None:
    assert nul_field("cli\x00ent", request(42, 2, groups_names=["bad\x00"])) == "client_id"


def test_strings_in_arrays_and_nested_entities_are_named_by_path() -> None:
    assert nul_field("c", request(42, 2, groups_names=["fine", "bad\x00"])) == "groups_names"
    joined = request(
        11, 9, group_id="g", session_timeout=10000, rebalance_timeout=10000, member_id="m",
        group_instance_id=None, protocol_type="consumer", protocols=[{"name": "ra\x00nge", "metadata": b""}],
    )  # fmt: skip
    assert nul_field("c", joined) == "protocols.name"


def test_record_bytes_are_not_strings() -> None:
    assert nul_field("c", produce_request("t", 0, b"\x00" * 64)) is None


def test_commit_metadata_is_stored_byte_exact_so_its_nul_is_kept() -> None:
    partition = {
        "partition_index": 0,
        "committed_offset": 1,
        "committed_leader_epoch": -1,
        "committed_metadata": "a\x00b",
    }
    committed = request(
        8, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[{"name": "t", "partitions": [partition]}],
    )  # fmt: skip
    assert nul_field("c", committed) is None
