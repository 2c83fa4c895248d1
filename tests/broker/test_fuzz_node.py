"""Random well-formed requests of every served API version, sent over sockets to a real node with
ACLs on: as a principal no ACL names (every rule refuses) and as a super user (every handler
runs). Each must be answered in its version's shape on a connection that stays open: a refusal or
an answer naming a field the version lacks used to make the server log a traceback and close the
connection (ElectLeaders', AlterReplicaLogDirs' and DescribeQuorum's refusals; Metadata v10 asked
by topic id)."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.support import raw_kafka_client as raw
from tests.support.broker_process import BrokerProcess
from tests.support.request_fuzz import HANDLED, HANDLED_IDS, as_sent, requests_of, without_long_poll

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


class Sessions:
    """One connection per principal, opened again after the server closed it (so that one
    failure does not fail every later case)."""

    def __init__(self, node: BrokerProcess) -> None:
        self._node = node
        self._open: dict[str, socket.socket] = {}

    def _connect(self, user: str) -> socket.socket:
        if user == "anonymous":  # the PLAINTEXT listener: User:ANONYMOUS, whom no ACL names
            return raw.connect(self._node.bootstrap)
        sock = socket.create_connection(("127.0.0.1", self._node.sasl_port), timeout=30)
        raw.roundtrip(sock, SaslHandshakeRequest(mechanism="PLAIN"))
        login = raw.roundtrip(sock, SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{user}-pw".encode()))
        assert login.error_code is ErrorCode.none, login
        return sock

    def answer(self, user: str, frame: bytes, api_key: int, version: int) -> Any:
        sock = self._open.get(user) or self._connect(user)
        self._open[user] = sock
        try:
            sock.sendall(frame)
            return raw.decode_response(raw.read_frame(sock), api_key, version)[1]
        except BaseException:
            sock.close()
            del self._open[user]
            raise

    def close(self) -> None:
        for sock in self._open.values():
            sock.close()


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sessions]:
    node = BrokerProcess(
        Path(tmp_path_factory.mktemp("fuzzed-node")),
        overrides={
            "sasl.plain.users": "admin:admin-pw",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "group.initial.rebalance.delay.ms": "0",
        },
    )
    node.start()
    opened = Sessions(node)
    yield opened
    opened.close()
    node.stop()


@pytest.mark.parametrize(("api_key", "version"), HANDLED, ids=HANDLED_IDS)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_version_is_answered_refused_or_served_on_an_open_connection(
    sessions: Sessions, api_key: int, version: int, data: st.DataObject
) -> None:
    request = without_long_poll(data.draw(requests_of(api_key, version)))
    if api_key == 0 and request.acks == 0:  # a Produce with acks=0 is never answered
        request = dataclasses.replace(request, acks=1)
    sent = as_sent(request)
    if sent is None:
        return
    for user in ("anonymous", "admin"):
        assert sessions.answer(user, sent[0], api_key, version) is not None
