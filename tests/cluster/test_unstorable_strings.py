"""A string with a NUL character, which PostgreSQL cannot store, is refused up front with
INVALID_REQUEST on a connection that stays open. A group id or transactional id holding one used to
fail the statement that reads or stores it: the broker logged a traceback and closed the
connection, on a cluster only (SQLite stores NULs)."""

from __future__ import annotations

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
    for node_id, broker in sorted(healthy_cluster.running().items()):
        log_start = broker.log_path.stat().st_size
        sock = connect(broker.bootstrap)
        try:
            answer = _answer(sock, sent, client_id)
            assert refused(answer) in (ErrorCode.invalid_request, ()), (node_id, answer)
            assert _answer(
                sock, request(18, 3, client_software_name="raw", client_software_version="1")
            ).error_code is (ErrorCode.none)  # the connection is still open
        finally:
            sock.close()
        written = broker.log_path.read_text(errors="replace")[log_start:]
        assert "handler failed" not in written and "Traceback" not in written, written[-2000:]
