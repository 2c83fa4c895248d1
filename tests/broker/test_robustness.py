"""Bad input on the wire: the broker answers in protocol terms or closes only the offending
connection, and keeps serving a concurrent client throughout."""

from __future__ import annotations

import os
import struct
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v10 import request as metadata_v10
from kio.schema.metadata.v11 import request as metadata_v11
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from tests.support import kafka_clients as clients
from tests.support import raw_kafka_client as rawclient
from tests.support.waiting import wait_until_sync

pytestmark = pytest.mark.integration


@pytest.fixture
def busy_producer(bootstrap: str) -> Iterator[list[int]]:
    """A confluent-kafka producer sending steadily in the background; yields its delivery count."""
    from confluent_kafka import Producer

    topic = f"steady-{uuid.uuid4().hex[:8]}"
    delivered = [0]
    errors: list[object] = []
    stop = threading.Event()

    def run() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": "all"})

        def on_delivery(err: object, _msg: object) -> None:
            if err:
                errors.append(err)
            else:
                delivered[0] += 1

        while not stop.is_set():
            producer.produce(topic, b"tick", on_delivery=on_delivery)
            producer.poll(0.01)
        producer.flush(10)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield delivered
    stop.set()
    thread.join(20)
    assert not errors, errors[:3]


def _wait_for_progress(delivered: list[int], timeout: float = 15.0) -> None:
    before = delivered[0]
    wait_until_sync(lambda: delivered[0] > before + 5, timeout=timeout, interval=0.05)  # else it stalled


def test_garbage_bytes_close_only_that_connection(bootstrap: str, busy_producer: list[int]) -> None:
    _wait_for_progress(busy_producer)
    sock = rawclient.connect(bootstrap)
    body = os.urandom(64)
    sock.sendall(struct.pack(">i", len(body)) + body)
    assert rawclient.is_closed_by_peer(sock)
    _wait_for_progress(busy_producer)


def test_valid_header_with_truncated_body_closes_connection(bootstrap: str, busy_producer: list[int]) -> None:
    request = rawclient.encode_request(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="x"),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        correlation_id=5,
    )
    truncated_body = request[4:-6]
    sock = rawclient.connect(bootstrap)
    sock.sendall(struct.pack(">i", len(truncated_body)) + truncated_body)
    assert rawclient.is_closed_by_peer(sock)
    _wait_for_progress(busy_producer)


def test_connection_closed_midway_through_a_frame_does_not_disturb_others(
    bootstrap: str, busy_producer: list[int]
) -> None:
    sock = rawclient.connect(bootstrap)
    sock.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x0c" + b"x" * 20)
    sock.close()
    _wait_for_progress(busy_producer)


def test_unknown_api_key_closes_connection(bootstrap: str, busy_producer: list[int]) -> None:
    sock = rawclient.connect(bootstrap)
    frame = struct.pack(">hhih", 999, 0, 7, -1)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert rawclient.is_closed_by_peer(sock)
    _wait_for_progress(busy_producer)


def test_200_megabyte_length_prefix_is_refused_before_allocation(
    bootstrap: str, busy_producer: list[int]
) -> None:
    sock = rawclient.connect(bootstrap)
    sock.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00\x12\x00\x03")
    assert rawclient.is_closed_by_peer(sock, timeout=5)
    _wait_for_progress(busy_producer)


def test_negative_length_prefix_closes_connection(bootstrap: str) -> None:
    sock = rawclient.connect(bootstrap)
    sock.sendall(struct.pack(">i", -5))
    assert rawclient.is_closed_by_peer(sock, timeout=5)


def test_api_versions_above_our_range_get_a_v0_answer_listing_our_keys(bootstrap: str) -> None:
    sock = rawclient.connect(bootstrap)
    frame = struct.pack(">hhih", 18, 99, 42, -1) + b"\x00\x00\x00"
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    correlation_id, response = rawclient.decode_response(rawclient.read_frame(sock), 18, 0)
    assert correlation_id == 42
    assert response.error_code is ErrorCode.unsupported_version
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[18] == (0, 4)
    assert keys[0][0] == 3 and keys[1][0] == 4
    # The connection stays usable: the client retries with a version we listed.
    answer = rawclient.roundtrip(
        sock, ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 43
    )
    assert answer.error_code is ErrorCode.none


def test_api_versions_v4_is_served(bootstrap: str) -> None:
    """Kafka 4 serves ApiVersions v4 (KAFKA-17011); kafka-python sends it first and got the KIP-511
    v0 fallback, then retried v3."""
    from tests.support.kafka_requests import request

    sock = rawclient.connect(bootstrap)
    answer = rawclient.roundtrip(
        sock, request(18, 4, client_software_name="raw", client_software_version="1")
    )
    sock.close()
    assert answer.error_code is ErrorCode.none
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}[18] == (0, 4)


def test_describe_groups_v6_answers_an_unknown_group_group_id_not_found(bootstrap: str) -> None:
    """Kafka 4.0 serves DescribeGroups v6 (KIP-1043): an unknown group is GROUP_ID_NOT_FOUND with
    a message instead of a Dead group."""
    from tests.support.kafka_requests import request

    sock = rawclient.connect(bootstrap)
    wanted = request(15, 6, groups=[f"nobody-{uuid.uuid4().hex[:6]}"], include_authorized_operations=False)
    answer = rawclient.roundtrip(sock, wanted)
    sock.close()
    assert answer.groups[0].error_code is ErrorCode.group_id_not_found
    assert answer.groups[0].error_message


def test_find_coordinator_v6_is_served(bootstrap: str) -> None:
    """Kafka 4 serves FindCoordinator v6 (KIP-932 share keys); a v6 request closed the socket."""
    from tests.support.kafka_requests import request

    sock = rawclient.connect(bootstrap)
    answer = rawclient.roundtrip(sock, request(10, 6, key_type=0, coordinator_keys=["g6"]))
    assert [(c.key, c.error_code) for c in answer.coordinators] == [("g6", ErrorCode.none)]
    assert answer.coordinators[0].node_id >= 0
    share = rawclient.roundtrip(sock, request(10, 6, key_type=2, coordinator_keys=["g6:x:0"]), 2)
    assert share.coordinators[0].error_code is ErrorCode.invalid_request
    sock.close()


@pytest.mark.parametrize(
    ("api_key", "version", "fields", "top_level"),
    [
        (1, 18, {"max_wait": 0, "min_bytes": 1, "max_bytes": 1, "isolation_level": 0, "session_id": 0,
                 "session_epoch": -1, "topics": [], "forgotten_topics_data": [], "rack_id": ""}, True),
        (0, 13, {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": []}, False),
        (8, 10, {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
                 "group_instance_id": None, "topics": []}, False),
    ],
    ids=["fetch-v18", "produce-v13", "offset-commit-v10"],
)  # fmt: skip
def test_a_version_above_ours_is_answered_unsupported_version_not_closed(
    bootstrap: str, api_key: int, version: int, fields: dict[str, object], top_level: bool
) -> None:
    """A version kio knows but we do not serve gets that version's response (UNSUPPORTED_VERSION
    where it has a top-level error code), and the connection keeps serving."""
    from tests.support.kafka_requests import request

    sock = rawclient.connect(bootstrap)
    answer = rawclient.roundtrip(sock, request(api_key, version, **fields), 9)
    if top_level:
        assert answer.error_code is ErrorCode.unsupported_version
    hello = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    ok = rawclient.roundtrip(sock, hello, 10)
    assert ok.error_code is ErrorCode.none
    sock.close()


def test_a_version_no_schema_describes_still_closes_the_connection(bootstrap: str) -> None:
    sock = rawclient.connect(bootstrap)
    frame = struct.pack(">hhih", 10, 99, 7, -1) + b"\x00\x00"
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert rawclient.is_closed_by_peer(sock)


def test_metadata_for_a_missing_topic_without_auto_creation_is_unknown_topic(bootstrap: str) -> None:
    sock = rawclient.connect(bootstrap)
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=f"absent-{uuid.uuid4().hex[:6]}"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    response = rawclient.roundtrip(sock, request)
    assert response.topics[0].error_code is ErrorCode.unknown_topic_or_partition


def _name(name: str | None) -> TopicName | None:
    return None if name is None else TopicName(name)


def _metadata_v10(name: str | None, topic_id: uuid.UUID) -> object:
    return metadata_v10.MetadataRequest(
        topics=(metadata_v10.MetadataRequestTopic(topic_id=topic_id, name=_name(name)),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def _metadata_v11(name: str | None, topic_id: uuid.UUID) -> object:
    return metadata_v11.MetadataRequest(
        topics=(metadata_v11.MetadataRequestTopic(topic_id=topic_id, name=_name(name)),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


@pytest.mark.parametrize(
    ("request_of", "name", "topic_id"),
    [
        (_metadata_v10, None, uuid.uuid4()),
        (_metadata_v11, None, uuid.UUID(int=0)),
        (_metadata_v10, "named", uuid.uuid4()),
    ],
    ids=["v10-by-id", "v11-null-name", "v10-name-and-id"],
)
def test_metadata_v10_and_v11_asking_by_topic_id_is_an_invalid_request_on_an_open_connection(
    bootstrap: str,
    request_of: Callable[[str | None, uuid.UUID], object],
    name: str | None,
    topic_id: uuid.UUID,
) -> None:
    """v10 and v11 carry a topic id field but answer no null name: Kafka refuses asking by id
    before v12. The answer used to name the topic null, which the version cannot encode: the
    broker logged a traceback and closed the connection."""
    sock = rawclient.connect(bootstrap)
    response = rawclient.roundtrip(sock, request_of(name, topic_id))
    assert [(t.error_code, t.name) for t in response.topics] == [(ErrorCode.invalid_request, name or "")]
    versions = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    assert rawclient.roundtrip(sock, versions).error_code is ErrorCode.none  # still open


def test_pipelined_requests_are_answered_in_order(bootstrap: str) -> None:
    sock = rawclient.connect(bootstrap)
    request = ApiVersionsRequest(client_software_name="raw", client_software_version="1")
    sock.sendall(b"".join(rawclient.encode_request(request, i) for i in range(50)))
    for i in range(50):
        correlation_id, _ = rawclient.decode_response(rawclient.read_frame(sock), 18, 3)
        assert correlation_id == i


def test_topic_created_before_bad_clients_is_still_readable(bootstrap: str) -> None:
    topic = f"survivor-{uuid.uuid4().hex[:8]}"
    clients.create_topic(bootstrap, topic, 1)
    messages = clients.make_messages(100, 1, "survivor")
    clients.confluent_produce(bootstrap, topic, messages, "none", True)
    for _ in range(3):
        sock = rawclient.connect(bootstrap)
        sock.sendall(os.urandom(32))
        sock.close()
    assert clients.confluent_consume(bootstrap, topic, 1, 100) == messages
