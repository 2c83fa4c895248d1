"""Strings PostgreSQL cannot store, a NUL character anywhere or a name longer than its column, are
refused in Kafka's terms on a connection that stays open. They used to fail the statement that
reads or stores them: the broker logged a traceback and closed the connection, on a cluster only
(SQLite stores both)."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.cluster import CLUSTER_TEST_MARKS, LocalCluster
from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, decode_response, encode_request, read_frame

pytestmark = CLUSTER_TEST_MARKS

NUL = "bad\x00id"


def _answer(sock: Any, sent: Any, client_id: str = "raw-test") -> Any:
    sock.sendall(encode_request(sent, 1, client_id))
    return decode_response(read_frame(sock), sent.__api_key__, sent.__version__)[1]


def _every_broker_answers(cluster: LocalCluster, sent: Any, client_id: str = "raw-test") -> dict[int, Any]:
    """Each broker's answer to ``sent``, after checking that its connection stayed open and that it
    logged no traceback."""
    answers: dict[int, Any] = {}
    for node_id, broker in sorted(cluster.running().items()):
        log_start = broker.log_path.stat().st_size
        sock = connect(broker.bootstrap)
        try:
            answers[node_id] = _answer(sock, sent, client_id)
            versions = request(18, 3, client_software_name="raw", client_software_version="1")
            assert _answer(sock, versions).error_code is ErrorCode.none  # the connection is still open
        finally:
            sock.close()
        written = broker.log_path.read_text(errors="replace")[log_start:]
        assert "handler failed" not in written and "Traceback" not in written, written[-2000:]
    return answers


@pytest.mark.parametrize(
    ("sent", "client_id", "refused"),
    [
        (request(22, 4, transactional_id=NUL, transaction_timeout=60000, producer_id=-1, producer_epoch=-1),
         "raw-test", lambda answer: answer.error_code),
        (request(42, 2, groups_names=[NUL]), "raw-test", lambda answer: answer.results),
        (request(10, 4, key_type=0, coordinator_keys=[NUL]), "raw-test", lambda answer: answer.coordinators),
        (request(11, 9, group_id="g", session_timeout=10000, rebalance_timeout=10000, member_id="",
                 group_instance_id=None, protocol_type="consumer", protocols=[], reason=None),
         NUL, lambda answer: answer.error_code),
    ],
    ids=["InitProducerId-txn-id", "DeleteGroups-group-id", "FindCoordinator-key", "JoinGroup-client-id"],
)  # fmt: skip
def test_a_nul_in_a_stored_string_is_an_invalid_request_on_every_broker(
    healthy_cluster: LocalCluster, sent: Any, client_id: str, refused: Any
) -> None:
    for node_id, answer in _every_broker_answers(healthy_cluster, sent, client_id).items():
        assert refused(answer) in (ErrorCode.invalid_request, ()), (node_id, answer)


LONG = "x" * 700
# Random letters: PostgreSQL compresses a repetitive key below its index limit.
COMMITTED = {
    "partition_index": 0,
    "committed_offset": 0,
    "committed_leader_epoch": -1,
    "committed_metadata": None,
}
LONG_GROUP = "".join(random.Random(7).choices(string.ascii_letters, k=3000))


def _long_txn_id_refused(answers: dict[int, Any]) -> None:
    codes = sorted({answer.error_code for answer in answers.values()}, key=int)
    # Only the transaction coordinator stores the id; the others answer NOT_COORDINATOR.
    assert (
        set(codes) <= {ErrorCode.not_coordinator, ErrorCode.invalid_request}
        and ErrorCode.invalid_request in codes
    )


def _long_user_refused(answers: dict[int, Any]) -> None:
    for answer in answers.values():
        assert [(r.error_code, r.error_message) for r in answer.results] == [
            (ErrorCode.unacceptable_credential, "Username is longer than 255 characters")
        ]


def _long_group_refused(answers: dict[int, Any]) -> None:
    for answer in answers.values():
        assert [p.error_code for t in answer.topics for p in t.partitions] == [ErrorCode.invalid_group_id]


def _long_entity_refused(answers: dict[int, Any]) -> None:
    for answer in answers.values():
        assert [e.error_code for e in answer.entries] == [ErrorCode.invalid_request]


@pytest.mark.parametrize(
    ("sent", "check"),
    [
        (request(22, 4, transactional_id=LONG, transaction_timeout=60000, producer_id=-1, producer_epoch=-1),
         _long_txn_id_refused),
        (request(51, 0, deletions=[], upsertions=[{"name": LONG, "mechanism": 1, "iterations": 4096,
                                                   "salt": b"s" * 16, "salted_password": b"p" * 32}]),
         _long_user_refused),
        (request(49, 1, validate_only=False, entries=[
            {"entity": [{"entity_type": "user", "entity_name": LONG}],
             "ops": [{"key": "producer_byte_rate", "value": 1000.0, "remove": False}]}]),
         _long_entity_refused),
        (request(8, 8, group_id=LONG_GROUP, generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=[{"name": "t", "partitions": [COMMITTED]}]),
         _long_group_refused),
    ],
    ids=["InitProducerId-txn-id", "ScramCredentials-user", "ClientQuotas-entity", "OffsetCommit-group"],
)  # fmt: skip
def test_a_name_longer_than_its_column_is_refused_on_every_broker(
    healthy_cluster: LocalCluster, sent: Any, check: Any
) -> None:
    check(_every_broker_answers(healthy_cluster, sent))
