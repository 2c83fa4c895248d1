"""ACLs with real clients: each resource type's denial answered with Kafka's error, granted by
CreateAcls, listed by DescribeAcls, revoked by DeleteAcls; super users; authorized operations."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_clients import share_group_starts_earliest
from tests.support.kafka_requests import request
from tests.support.raw_kafka_client import connect, roundtrip
from tests.support.secure_brokers import SecureBroker

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("acl-broker"),
        overrides={
            "sasl.plain.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
    )
    process.start()
    yield process
    process.stop()


def client(broker: BrokerProcess, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        **extra,
    }


def admin_of(broker: BrokerProcess, user: str = "admin") -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client(broker, user))


def grant(broker: BrokerProcess, *bindings: tuple[str, str, str, str, str]) -> None:
    """(resource type, name, pattern, principal, operation) ALLOW bindings, created by the admin."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    acls = [
        AclBinding(
            getattr(ResourceType, rtype), name, getattr(ResourcePatternType, pattern), principal, "*",
            getattr(AclOperation, op), AclPermissionType.ALLOW,
        )
        for rtype, name, pattern, principal, op in bindings
    ]  # fmt: skip
    admin = admin_of(broker)  # must outlive its futures
    for future in admin.create_acls(acls, request_timeout=30).values():
        future.result(30)


def produce(broker: BrokerProcess, user: str, topic: str, **extra: Any) -> str | None:
    """The delivery error's name, or None once the record was acknowledged."""
    from confluent_kafka import Producer

    errors: list[str | None] = []
    producer = Producer(client(broker, user, **{"message.timeout.ms": 5000, **extra}))
    producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err.name() if err else None))
    producer.flush(15)
    return errors[0] if errors else "NO_DELIVERY_REPORT"


def new_topic(broker: BrokerProcess, prefix: str) -> str:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    admin = admin_of(broker)
    admin.create_topics([NewTopic(name, 1)])[name].result(30)
    return name


@pytest.mark.integration
def test_topic_write_is_denied_until_granted_by_prefix(acl_broker: BrokerProcess) -> None:
    topic = new_topic(acl_broker, "alice-")
    assert produce(acl_broker, "alice", topic) == "TOPIC_AUTHORIZATION_FAILED"
    grant(acl_broker, ("TOPIC", "alice-", "PREFIXED", "User:alice", "WRITE"))
    assert produce(acl_broker, "alice", topic) is None
    assert produce(acl_broker, "bob", topic) == "TOPIC_AUTHORIZATION_FAILED"
    assert produce(acl_broker, "admin", topic) is None  # super user


@pytest.mark.integration
# consumer: KIP-848's heartbeat; share: KIP-932's ShareConsumer
@pytest.mark.parametrize("protocol", ["classic", "consumer", "share"])
def test_consumer_group_needs_group_read(acl_broker: BrokerProcess, protocol: str) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException, ShareConsumer

    topic = new_topic(acl_broker, "grp-")
    assert produce(acl_broker, "admin", topic) is None
    grant(acl_broker, ("TOPIC", topic, "LITERAL", "User:bob", "READ"))
    group = f"g-{topic}"
    if protocol == "share":
        share_group_starts_earliest(client(acl_broker, "admin"), group)
    errors: list[int] = []

    def consume() -> bytes | None:
        if protocol == "share":
            consumer: Any = ShareConsumer(client(acl_broker, "bob", **{"group.id": group}))
        else:
            settings = {"group.id": group, "auto.offset.reset": "earliest", "group.protocol": protocol}
            consumer = Consumer(client(acl_broker, "bob", **settings))
        consumer.subscribe([topic])
        try:
            for _ in range(20):
                try:
                    polled = consumer.poll(1.0)
                except KafkaException as exc:  # a share consumer raises what a consumer returns
                    errors.append(exc.args[0].code())
                    return None
                for message in polled if protocol == "share" else [polled] if polled else []:
                    if message.error():
                        errors.append(message.error().code())
                        return None
                    return message.value()  # type: ignore[no-any-return]
            return None
        finally:
            consumer.close()

    assert consume() is None
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    grant(acl_broker, ("GROUP", group, "LITERAL", "User:bob", "READ"))
    assert consume() == b"v"


@pytest.mark.integration
def test_cluster_operations_are_denied_with_cluster_authorization_failed(acl_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType  # type: ignore[attr-defined]

    admin = admin_of(acl_broker, "bob")
    with pytest.raises(KafkaException) as denied:
        admin.create_topics([NewTopic("bob-made", 1)])["bob-made"].result(30)
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker_config = ConfigResource(ResourceType.BROKER, "1")
    with pytest.raises(KafkaException) as denied:
        admin.describe_configs([broker_config])[broker_config].result(30)
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error, so read the answer off the wire (as the
    # anonymous principal of the PLAINTEXT listener, which no ACL names).
    sock = connect(acl_broker.bootstrap)
    answer = roundtrip(
        sock,
        request(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1),
    )  # fmt: skip
    assert answer.error_code is ErrorCode.cluster_authorization_failed and answer.resources == ()
    # WriteTxnMarkers is for brokers (CLUSTER_ACTION, as in Kafka): refused per partition.
    markers = roundtrip(
        sock,
        request(27, 1, markers=[{"producer_id": 7, "producer_epoch": 0, "transaction_result": True,
                                 "topics": [{"name": "any", "partition_indexes": [0, 1]}],
                                 "coordinator_epoch": 0}]),
    )  # fmt: skip
    sock.close()
    codes = [p.error_code for m in markers.markers for t in m.topics for p in t.partitions]
    assert codes == [ErrorCode.cluster_authorization_failed] * 2


@pytest.mark.integration
def test_cluster_apis_without_a_top_level_message_are_refused_in_their_own_shape(
    acl_broker: BrokerProcess,
) -> None:
    """ElectLeaders, AlterReplicaLogDirs and DescribeQuorum have no top-level error message (nor,
    for DescribeQuorum, a throttle time): their refusals used to name one, which no version can
    encode, and the connection closed instead."""
    sock = connect(acl_broker.bootstrap)
    elect = roundtrip(
        sock,
        request(
            43, 2, election_type=0, timeout=30000, topic_partitions=[{"topic": "t", "partitions": [0, 1]}]
        ),
    )
    assert elect.error_code is ErrorCode.cluster_authorization_failed
    assert [p.error_code for r in elect.replica_election_results for p in r.partition_result] == [
        ErrorCode.cluster_authorization_failed
    ] * 2
    moves = roundtrip(
        sock, request(34, 2, dirs=[{"path": "/elsewhere", "topics": [{"name": "t", "partitions": [0]}]}])
    )
    assert [p.error_code for r in moves.results for p in r.partitions] == [
        ErrorCode.cluster_authorization_failed
    ]
    quorum = roundtrip(sock, request(55, 2, topics=[]))
    assert quorum.error_code is ErrorCode.cluster_authorization_failed
    sock.close()


@pytest.mark.integration
def test_transactional_id_needs_write(acl_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException, Producer

    grant(acl_broker, ("TOPIC", "txn-", "PREFIXED", "User:alice", "WRITE"))
    producer = Producer(client(acl_broker, "alice", **{"transactional.id": "alice-txn"}))
    with pytest.raises(KafkaException) as denied:
        producer.init_transactions(15)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(
        denied.value
    ) or "Transactional Id authorization failed" in str(denied.value)


@pytest.mark.integration
def test_metadata_lists_only_the_topics_a_principal_may_describe(acl_broker: BrokerProcess) -> None:
    visible = new_topic(acl_broker, "vis-")
    hidden = new_topic(acl_broker, "hid-")
    grant(acl_broker, ("TOPIC", visible, "LITERAL", "User:bob", "DESCRIBE"))
    topics = admin_of(acl_broker, "bob").list_topics(timeout=15).topics
    assert visible in topics and hidden not in topics
    admin = admin_of(acl_broker)
    assert hidden in admin.list_topics(timeout=15).topics


@pytest.mark.integration
def test_authorized_operations_are_reported_when_asked(acl_broker: BrokerProcess) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    topic = new_topic(acl_broker, "ops-")
    grant(acl_broker, ("TOPIC", topic, "LITERAL", "User:alice", "READ"))
    admin = admin_of(acl_broker, "alice")
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[
        topic
    ].result(30)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    super_admin = admin_of(acl_broker)
    cluster = super_admin.describe_cluster(include_authorized_operations=True).result(30)
    assert AclOperation.ALTER in cluster.authorized_operations  # the super user may do anything


@pytest.mark.integration
def test_describe_and_delete_acls(acl_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    grant(acl_broker, ("GROUP", "audit-", "PREFIXED", "User:carl", "READ"))
    admin = admin_of(acl_broker)
    match = AclBindingFilter(
        ResourceType.GROUP,
        "audit-x",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = admin.describe_acls(match).result(30)
    assert [(b.name, b.principal) for b in found] == [("audit-", "User:carl")]
    deleted = admin.delete_acls([match])[match].result(30)
    assert [(b.name, b.principal) for b in deleted] == [("audit-", "User:carl")]
    assert admin.describe_acls(match).result(30) == []


@pytest.mark.integration
def test_acl_apis_answer_security_disabled_without_an_authorizer(secure_broker: SecureBroker) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    binding = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:x",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    admin = AdminClient({"bootstrap.servers": secure_broker.plaintext})
    with pytest.raises(KafkaException) as disabled:
        admin.create_acls([binding])[binding].result(30)
    assert disabled.value.args[0].code() == KafkaError.SECURITY_DISABLED


@pytest.mark.integration
def test_acls_cli_adds_lists_and_removes(acl_broker: BrokerProcess) -> None:
    from typer.testing import CliRunner

    from tabletopic.cli import app

    common = [
        "-b", f"127.0.0.1:{acl_broker.sasl_port}", "-X", "security.protocol=SASL_PLAINTEXT",
        "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=admin", "-X", "sasl.password=admin-pw",
    ]  # fmt: skip
    runner = CliRunner()
    added = runner.invoke(
        app,
        [
            "acls",
            "add",
            "-t",
            "topic",
            "-n",
            "cli-",
            "--pattern",
            "prefixed",
            "-p",
            "User:dan",
            "-o",
            "read",
            *common,
        ],
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(app, ["acls", "list", "-p", "User:dan", *common])
    assert "allow User:dan read topic:cli- (prefixed, host *)" in listed.output, listed.output
    removed = runner.invoke(app, ["acls", "remove", "-p", "User:dan", *common])
    assert "removed allow User:dan read topic:cli-" in removed.output, removed.output
    assert runner.invoke(app, ["acls", "list", "-p", "User:dan", *common]).output.strip() == ""
    bad = runner.invoke(app, ["acls", "add", "-t", "planet", "-p", "User:x", "-o", "read", *common])
    assert bad.exit_code != 0 and "unknown resource type" in bad.output


@pytest.mark.integration
@pytest.mark.parametrize("version", [11, 12])
def test_fetch_of_allowed_and_denied_topics_together(acl_broker: BrokerProcess, version: int) -> None:
    """One Fetch names both (as the anonymous principal of the PLAINTEXT listener): the allowed
    topic's records come back in the broker's self-encoded answer, with the refused topic's
    partitions added as TOPIC_AUTHORIZATION_FAILED."""
    import dataclasses

    from tests.support.kafka_requests import fetch_request

    allowed, denied = new_topic(acl_broker, "mix-ok-"), new_topic(acl_broker, "mix-no-")
    for topic in (allowed, denied):
        assert produce(acl_broker, "admin", topic) is None
    grant(acl_broker, ("TOPIC", allowed, "LITERAL", "User:ANONYMOUS", "READ"))
    one, other = fetch_request(allowed, 0, 0, version=version), fetch_request(denied, 0, 0, version=version)
    both = dataclasses.replace(one, topics=one.topics + other.topics)
    sock = connect(acl_broker.bootstrap)
    answer = roundtrip(sock, both)
    sock.close()
    by_topic = {t.topic: t.partitions[0] for t in answer.responses}
    assert by_topic[allowed].error_code is ErrorCode.none and by_topic[allowed].records
    assert by_topic[denied].error_code is ErrorCode.topic_authorization_failed
    assert by_topic[denied].records == b""  # empty, never null (as Kafka)


@pytest.mark.integration
@pytest.mark.parametrize("version", [11, 12])
def test_fetch_of_only_denied_topics_answers_empty_records(acl_broker: BrokerProcess, version: int) -> None:
    """Every partition refused: the guard answers alone, still with empty (not null) records."""
    from tests.support.kafka_requests import fetch_request

    denied = new_topic(acl_broker, "only-no-")
    assert produce(acl_broker, "admin", denied) is None
    sock = connect(acl_broker.bootstrap)
    answer = roundtrip(sock, fetch_request(denied, 0, 0, version=version))
    sock.close()
    partition = answer.responses[0].partitions[0]
    assert partition.error_code is ErrorCode.topic_authorization_failed
    assert partition.records == b""


@pytest.mark.integration
def test_consumer_denied_read_sees_topic_authorization_failed(acl_broker: BrokerProcess) -> None:
    """librdkafka (Fetch v16 by topic id) with DESCRIBE but no READ on the topic: the application
    gets TOPIC_AUTHORIZATION_FAILED. With null records for the refused partition librdkafka logged
    "invalid MessageSetSize -1" / "Protocol parse failure for Fetch v16" and retried forever."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    topic = new_topic(acl_broker, "noread-")
    assert produce(acl_broker, "admin", topic) is None
    group = f"g-{topic}"
    grant(
        acl_broker,
        ("TOPIC", topic, "LITERAL", "User:bob", "DESCRIBE"),
        ("GROUP", group, "LITERAL", "User:bob", "READ"),
    )
    logs: list[str] = []

    class Logs:
        def log(self, _level: int, msg: str, *args: Any, **_kw: Any) -> None:
            logs.append(msg % args if args else msg)

    consumer = Consumer(
        client(acl_broker, "bob", **{"group.id": group, "debug": "fetch,protocol"}),
        logger=Logs(),
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    codes: list[int] = []
    try:
        for _ in range(15):
            message = consumer.poll(1.0)
            if message is not None and message.error():
                codes.append(message.error().code())
                break
    finally:
        consumer.close()
    assert codes == [KafkaError.TOPIC_AUTHORIZATION_FAILED], "\n".join(
        line for line in logs if "MessageSetSize" in line or "parse" in line.lower()
    )[-2000:]


@pytest.mark.integration
def test_transactional_produce_and_offsets_need_topic_group_and_transactional_id_acls(
    acl_broker: BrokerProcess,
) -> None:
    """AddPartitionsToTxn needs WRITE on the topic and TxnOffsetCommit READ on the group (both
    WRITE on the transactional id), as in Kafka: consume-transform-produce works once granted."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    source, out = new_topic(acl_broker, "ctp-src-"), new_topic(acl_broker, "ctp-out-")
    group = f"ctp-{source}"
    grant(
        acl_broker,
        ("TRANSACTIONAL_ID", "alice-ctp-", "PREFIXED", "User:alice", "WRITE"),
        ("TOPIC", out, "LITERAL", "User:alice", "WRITE"),
        ("TOPIC", source, "LITERAL", "User:alice", "READ"),
    )
    producer = Producer(client(acl_broker, "alice", **{"transactional.id": f"alice-ctp-{source}"}))
    producer.init_transactions(15)
    group_metadata = Consumer(client(acl_broker, "alice", **{"group.id": group})).consumer_group_metadata()
    offsets = [TopicPartition(source, 0, 1)]

    producer.begin_transaction()
    producer.produce(out, b"transformed")
    with pytest.raises(KafkaException) as denied:
        producer.send_offsets_to_transaction(offsets, group_metadata, 15)
    assert "GROUP_AUTHORIZATION_FAILED" in str(denied.value) or "Group authorization failed" in str(
        denied.value
    )
    producer.abort_transaction(15)

    grant(acl_broker, ("GROUP", group, "LITERAL", "User:alice", "READ"))
    producer.begin_transaction()
    producer.produce(out, b"transformed")
    producer.send_offsets_to_transaction(offsets, group_metadata, 15)
    producer.commit_transaction(15)
    admin = admin_of(acl_broker)  # must outlive its futures
    listed = admin.list_consumer_group_offsets([_group_partitions(group, source)], request_timeout=15)
    committed = listed[group].result(15)
    assert [tp.offset for tp in committed.topic_partitions] == [1]


def _group_partitions(group: str, topic: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    return ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])


@pytest.mark.integration
def test_transaction_apis_refuse_each_part_with_kafkas_error(acl_broker: BrokerProcess) -> None:
    """Read off the wire as the anonymous principal of the PLAINTEXT listener."""
    allowed, denied = new_topic(acl_broker, "atx-ok-"), new_topic(acl_broker, "atx-no-")
    txn = f"anon-{allowed}"
    sock = connect(acl_broker.bootstrap)

    def add_partitions() -> dict[str, ErrorCode]:
        answer = roundtrip(
            sock,
            request(24, 3, v3_and_below_transactional_id=txn, v3_and_below_producer_id=1,
                    v3_and_below_producer_epoch=0,
                    v3_and_below_topics=[{"name": allowed, "partitions": [0]},
                                         {"name": denied, "partitions": [0]}],
                    transactions=[]),
        )  # fmt: skip
        return {
            t.name: t.results_by_partition[0].partition_error_code
            for t in answer.results_by_topic_v3_and_below
        }

    try:
        assert set(add_partitions().values()) == {ErrorCode.transactional_id_authorization_failed}
        grant(
            acl_broker,
            ("TRANSACTIONAL_ID", txn, "LITERAL", "User:ANONYMOUS", "WRITE"),
            ("TOPIC", allowed, "LITERAL", "User:ANONYMOUS", "WRITE"),
        )
        # One refused topic: nothing is added, the others are not attempted.
        assert add_partitions() == {
            allowed: ErrorCode.operation_not_attempted,
            denied: ErrorCode.topic_authorization_failed,
        }
        commit = roundtrip(
            sock,
            request(28, 3, transactional_id=txn, group_id=f"g-{txn}", producer_id=1, producer_epoch=0,
                    generation_id=-1, member_id="", group_instance_id=None,
                    topics=[{"name": allowed, "partitions": [{"partition_index": 0, "committed_offset": 1,
                             "committed_leader_epoch": -1, "committed_metadata": None}]}]),
        )  # fmt: skip
        assert commit.topics[0].partitions[0].error_code is ErrorCode.group_authorization_failed

        other = f"anon-other-{allowed}"
        described = roundtrip(sock, request(65, 0, transactional_ids=[txn, other]))
        codes = {s.transactional_id: s.error_code for s in described.transaction_states}
        assert codes[other] is ErrorCode.transactional_id_authorization_failed
        assert codes[txn] is not ErrorCode.transactional_id_authorization_failed  # WRITE implies DESCRIBE
        listed = roundtrip(sock, request(66, 0, state_filters=[], producer_id_filters=[]))
        assert listed.error_code is ErrorCode.none
        assert all(s.transactional_id == txn for s in listed.transaction_states)
    finally:
        sock.close()
