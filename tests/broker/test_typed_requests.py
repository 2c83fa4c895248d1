"""Every kio request class the broker serves fits the handler's request type
(:mod:`tabletopic.broker.protocol.messages`).

A request type that is the union of kio's classes is checked by mypy, field by field, against each
class it names; this test checks that it names kio's class of exactly the served versions. A
Protocol several APIs share (what an ACL rule reads) is checked here: each served version of each
API it stands for has every field the Protocol reads (nested entities too). A version-free
dataclass may name only fields kio has (a required one in every served version, a defaulted one in
at least one), and a sample of every served version reads into it.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import importlib
import inspect
import types
import typing
import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from types import ModuleType
from typing import Any, Protocol

import pytest
from kio.schema.index import api_key_map

from tabletopic.broker.fetch_sessions import requested
from tabletopic.broker.handlers import APIS, State
from tabletopic.broker.protocol.messages import (
    acls,
    alter_configs,
    alter_replica_log_dirs,
    client_quotas,
    consumer_groups,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    describe_log_dirs,
    describe_producers,
    describe_quorum,
    describe_topic_partitions,
    elect_leaders,
    fetch,
    find_coordinator,
    groups,
    init_producer_id,
    join_group,
    list_offsets,
    metadata,
    offset_commit,
    offset_for_leader_epoch,
    partition_reassignments,
    produce,
    share_groups,
    topic_partitions,
    transactions,
    user_scram_credentials,
    write_txn_markers,
)
from tabletopic.broker.protocol.messages.convert import read_message
from tabletopic.broker.protocol.sentinels import LATEST, READ_COMMITTED, READ_UNCOMMITTED
from tabletopic.broker.protocol.versions import (
    GROUP_MAX_VERSIONS,
    MAX_VERSIONS,
    SECURITY_MAX_VERSIONS,
    min_version,
)
from tabletopic.broker.security import guard, guard_rules, share_rules

# (api key, Protocol, the first version it covers or the range of them, the entity of kio's request
# it types ("" for the request itself, else a path such as "resources")): kio's class of each served
# version from that one (or in that range) satisfies the Protocol as it is. The Protocols are shapes
# several APIs share (what the ACL rules read, the config APIs' resources); a single API's request
# type is the union of kio's classes (ALIASES).
PROTOCOLS: list[tuple[int, type, int | range, str]] = [
    (33, alter_configs.ConfigsAlteration, 0, ""),
    (44, alter_configs.ConfigsAlteration, 0, ""),
    *((key, guard.TopicsRequest, 0, "") for key in (1, 2, 8, 21, 23, 47, 61)),
    *((key, guard_rules.GroupRequest, 0, "") for key in (11, 12, 13, 14, 68, 91, 92)),
    *((key, share_rules.ShareGroupOffsetsChange, 0, "") for key in (91, 92)),
    (8, guard_rules.GroupTopicsRequest, 0, ""),
    *((key, guard_rules.ConfigResourcesRequest, 0, "") for key in (32, 33, 44)),
    (35, topic_partitions.TopicAndPartitions, 0, "topics"),
    (43, topic_partitions.TopicAndPartitions, 0, "topic_partitions"),
    (61, topic_partitions.TopicPartitionIndexes, 0, "topics"),
    (27, topic_partitions.TopicPartitionIndexes, 0, "markers.topics"),
    (46, topic_partitions.TopicPartitionIndexes, 0, "topics"),
]

ALL = 0  # every served version

# module, alias -> the (api key, first version or range, entity path) whose kio classes it unites:
# exactly kio's class of each served version in each part, so serving another version means naming
# it (mypy then checks every field a handler reads against it).
ALIASES: dict[tuple[ModuleType, str], list[tuple[int, int | range, str]]] = {
    (acls, "DescribeAclsRequest"): [(29, ALL, "")],
    (acls, "CreateAclsRequest"): [(30, ALL, "")],
    (acls, "AclCreation"): [(30, ALL, "creations")],
    (acls, "DeleteAclsRequest"): [(31, ALL, "")],
    (acls, "AclsFilter"): [(29, ALL, ""), (31, ALL, "filters")],
    (alter_configs, "AlterConfigsRequest"): [(33, ALL, "")],
    (alter_configs, "AlterConfigsResource"): [(33, ALL, "resources")],
    (alter_configs, "IncrementalAlterConfigsRequest"): [(44, ALL, "")],
    (alter_configs, "IncrementalAlterConfigsResource"): [(44, ALL, "resources")],
    (alter_configs, "AlterableConfigOperation"): [(44, ALL, "resources.configs")],
    (alter_replica_log_dirs, "AlterReplicaLogDirsRequest"): [(34, ALL, "")],
    (client_quotas, "DescribeClientQuotasRequest"): [(48, ALL, "")],
    (client_quotas, "QuotaFilterComponent"): [(48, ALL, "components")],
    (client_quotas, "AlterClientQuotasRequest"): [(49, ALL, "")],
    (client_quotas, "QuotaAlteration"): [(49, ALL, "entries")],
    (consumer_groups, "ConsumerGroupHeartbeatRequest"): [(68, ALL, "")],
    (consumer_groups, "RegexConsumerGroupHeartbeatRequest"): [(68, consumer_groups.TOPIC_REGEX_SINCE, "")],
    (consumer_groups, "GroupsDescription"): [(69, ALL, ""), (77, ALL, "")],
    (create_partitions, "CreatePartitionsRequest"): [(37, ALL, "")],
    (create_partitions, "CreatePartitionsTopic"): [(37, ALL, "topics")],
    (create_partitions, "CreatePartitionsAssignment"): [(37, ALL, "topics.assignments")],
    (create_topics, "CreateTopicsRequest"): [(19, ALL, "")],
    (create_topics, "CreatableTopic"): [(19, ALL, "topics")],
    (delete_records, "DeleteRecordsRequest"): [(21, ALL, "")],
    (delete_records, "DeleteRecordsPartition"): [(21, ALL, "topics.partitions")],
    (delete_topics, "DeleteTopicNamesRequest"): [(20, range(delete_topics.TOPIC_STATES_SINCE), "")],
    (delete_topics, "DeleteTopicStatesRequest"): [(20, delete_topics.TOPIC_STATES_SINCE, "")],
    (describe_cluster, "DescribeClusterRequest"): [(60, ALL, "")],
    (describe_log_dirs, "DescribeLogDirsRequest"): [(35, ALL, "")],
    (describe_producers, "DescribeProducersRequest"): [(61, ALL, "")],
    (describe_quorum, "DescribeQuorumRequest"): [(55, ALL, "")],
    (describe_topic_partitions, "DescribeTopicPartitionsRequest"): [(75, ALL, "")],
    (elect_leaders, "ElectLeadersRequest"): [(43, ALL, "")],
    (fetch, "FetchRequest"): [(1, ALL, "")],
    (fetch, "FetchTopic"): [(1, ALL, "topics")],
    (fetch, "FetchPartition"): [(1, ALL, "topics.partitions")],
    (fetch, "ForgottenTopic"): [(1, fetch.SESSIONS_SINCE, "forgotten_topics_data")],
    (fetch, "SessionFetchRequest"): [(1, fetch.SESSIONS_SINCE, "")],
    (fetch, "RackAwareFetchRequest"): [(1, fetch.RACK_ID_SINCE, "")],
    (fetch, "LeaderEpochFetchPartition"): [(1, fetch.LEADER_EPOCH_SINCE, "topics.partitions")],
    (fetch, "TopicByName"): [
        (1, range(fetch.TOPIC_ID_SINCE), "topics"),
        (1, range(fetch.SESSIONS_SINCE, fetch.TOPIC_ID_SINCE), "forgotten_topics_data"),
    ],
    (fetch, "TopicById"): [
        (1, fetch.TOPIC_ID_SINCE, "topics"),
        (1, fetch.TOPIC_ID_SINCE, "forgotten_topics_data"),
    ],
    (groups, "DeleteGroupsRequest"): [(42, ALL, "")],
    (metadata, "MetadataRequest"): [(3, ALL, "")],
    (metadata, "MetadataRequestTopic"): [(3, ALL, "topics")],
    (metadata, "MetadataRequestTopicById"): [(3, metadata.TOPIC_ID_SINCE, "topics")],
    (metadata, "AutoCreatingMetadataRequest"): [(3, metadata.AUTO_CREATION_SINCE, "")],
    (metadata, "TopicOperationsMetadataRequest"): [(3, metadata.AUTHORIZED_OPERATIONS_SINCE, "")],
    (metadata, "ClusterOperationsMetadataRequest"): [
        (3, range(metadata.AUTHORIZED_OPERATIONS_SINCE, metadata.CLUSTER_OPERATIONS_BEFORE), "")
    ],
    (offset_commit, "OneGroupOffsetFetch"): [(9, range(offset_commit.BATCHED_FETCH_SINCE), "")],
    (offset_commit, "GroupsOffsetFetch"): [(9, offset_commit.BATCHED_FETCH_SINCE, "")],
    (offset_commit, "OffsetDeleteRequest"): [(47, ALL, "")],
    (offset_for_leader_epoch, "OffsetForLeaderEpochRequest"): [(23, ALL, "")],
    (offset_for_leader_epoch, "OffsetForLeaderPartition"): [(23, ALL, "topics.partitions")],
    (partition_reassignments, "AlterPartitionReassignmentsRequest"): [(45, ALL, "")],
    (partition_reassignments, "ReassignablePartition"): [(45, ALL, "topics.partitions")],
    (partition_reassignments, "ListPartitionReassignmentsRequest"): [(46, ALL, "")],
    (produce, "ProduceRequest"): [(0, ALL, "")],
    (produce, "PartitionProduceData"): [(0, ALL, "topic_data.partition_data")],
    (share_groups, "ShareGroupHeartbeatRequest"): [(76, ALL, "")],
    (share_groups, "ShareFetchRequest"): [(78, ALL, "")],
    (share_groups, "ShareAcknowledgeRequest"): [(79, ALL, "")],
    (share_groups, "ShareSessionRequest"): [(78, ALL, ""), (79, ALL, "")],
    (share_groups, "AcknowledgedTopic"): [(78, ALL, "topics"), (79, ALL, "topics")],
    (share_groups, "DescribeShareGroupOffsetsRequest"): [(90, ALL, "")],
    (share_groups, "AlterShareGroupOffsetsRequest"): [(91, ALL, "")],
    (share_groups, "DeleteShareGroupOffsetsRequest"): [(92, ALL, "")],
    (transactions, "AddPartitionsToTxnRequest"): [(24, ALL, "")],
    (transactions, "AddPartitionsToTxnTopic"): [(24, ALL, "v3_and_below_topics")],
    (transactions, "AddOffsetsToTxnRequest"): [(25, ALL, "")],
    (transactions, "EndTxnRequest"): [(26, ALL, "")],
    (transactions, "ProducerRequest"): [(25, ALL, ""), (26, ALL, "")],
    (transactions, "TxnOffsetCommitScope"): [(28, ALL, "")],
    (transactions, "DescribeTransactionsRequest"): [(65, ALL, "")],
    (transactions, "ListTransactionsRequest"): [(66, ALL, "")],
    (user_scram_credentials, "DescribeUserScramCredentialsRequest"): [(50, ALL, "")],
    (user_scram_credentials, "AlterUserScramCredentialsRequest"): [(51, ALL, "")],
    (user_scram_credentials, "ScramCredentialDeletion"): [(51, ALL, "deletions")],
    (user_scram_credentials, "ScramCredentialUpsertion"): [(51, ALL, "upsertions")],
    (write_txn_markers, "WriteTxnMarkersRequest"): [(27, ALL, "")],
    (write_txn_markers, "WritableTxnMarker"): [(27, ALL, "markers")],
}

# api key -> the frozen dataclass read from kio's class of any served version.
DATACLASSES: dict[int, type] = {
    2: list_offsets.ListOffsetsRequest,
    10: find_coordinator.FindCoordinatorRequest,
    20: delete_topics.DeleteTopicsRequest,
    22: init_producer_id.InitProducerIdRequest,
    28: transactions.TxnOffsetCommitRequest,
    32: describe_configs.DescribeConfigsRequest,
    8: offset_commit.OffsetCommitRequest,
    9: offset_commit.OffsetFetchRequest,
    11: join_group.JoinGroupRequest,
    12: join_group.HeartbeatRequest,
    13: join_group.LeaveGroupRequest,
    14: join_group.SyncGroupRequest,
    15: groups.DescribeGroupsRequest,
    16: groups.ListGroupsRequest,
}


def served(api_key: int) -> range:
    highest = {**MAX_VERSIONS, **GROUP_MAX_VERSIONS, **SECURITY_MAX_VERSIONS}.get(api_key)
    assert highest is not None
    return range(min_version(api_key), highest + 1)


def kio_class(api_key: int, version: int, kind: str = "request") -> type:
    """kio's request (or response) class of an API version (``list_offsets`` v3:
    ``ListOffsetsRequest``)."""
    api = api_key_map[api_key]
    module = importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")
    cls: type = getattr(module, "".join(word.capitalize() for word in api.split("_")) + kind.capitalize())
    assert cls.__api_key__ == api_key  # type: ignore[attr-defined]
    return cls


def kio_request(api_key: int, version: int) -> type:
    return kio_class(api_key, version)


def without_none(hint: Any) -> Any:
    """``X`` for ``X | None``; other hints unchanged."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def element(hint: Any) -> Any:
    """The element type of a ``Sequence[X]`` / ``tuple[X, ...]`` hint (optional or not), else None."""
    hint = without_none(hint)
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (tuple, list, Sequence) and args:
        return without_none(args[0])
    return None


def protocol_members(protocol: type) -> Iterator[tuple[str, Any]]:
    """Each property a Protocol declares (its own and its bases'), with its return hint."""
    for cls in protocol.__mro__:
        if cls in (Protocol, typing.Generic, object):
            continue
        for name, value in vars(cls).items():
            if isinstance(value, property) and value.fget is not None:
                yield name, typing.get_type_hints(value.fget)["return"]


def is_protocol(hint: Any) -> bool:
    return isinstance(hint, type) and getattr(hint, "_is_protocol", False)


def missing_from(protocol: type, kio_class: Any, path: str = "") -> list[str]:
    """The Protocol's fields (nested ones as ``a.b``) that kio's class lacks."""
    kio_hints = typing.get_type_hints(kio_class)
    missing = []
    for name, hint in protocol_members(protocol):
        if name not in kio_hints:
            missing.append(path + name)
            continue
        nested, kio_nested = element(hint), element(kio_hints[name])
        if nested is None:  # an entity itself (optional or not) rather than a list of them
            nested, kio_nested = without_none(hint), without_none(kio_hints[name])
        if is_protocol(nested):
            assert dataclasses.is_dataclass(kio_nested), f"{path}{name} is no entity in kio"
            missing += missing_from(nested, kio_nested, f"{path}{name}.")
    return missing


def dataclass_fields(
    cls: Any, kio_classes: list[Any], path: str = ""
) -> Iterator[tuple[str, bool, list[bool]]]:
    """``(field, required, [kio class has it])`` for each field of a version-free dataclass."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        kio_hints = [typing.get_type_hints(kio) for kio in kio_classes]
        present = [field.name in h for h in kio_hints]
        yield path + field.name, required, present
        nested = element(hints[field.name])
        if nested is not None and dataclasses.is_dataclass(nested):
            inner = [element(h[field.name]) for h in kio_hints if field.name in h]
            yield from dataclass_fields(nested, inner, f"{path}{field.name}.")


def entity(kio_class: type, path: str) -> type:
    """The kio class of the entities at ``path`` (``a.b``) of a request class."""
    for name in filter(None, path.split(".")):
        kio_class = element(typing.get_type_hints(kio_class)[name])
    return kio_class


@pytest.mark.parametrize(
    ("api_key", "protocol", "version", "path"),
    [
        pytest.param(key, protocol, version, path, id=f"{protocol.__name__}-v{version}")
        for key, protocol, since, path in PROTOCOLS
        for version in served(key)
        if (version in since if isinstance(since, range) else version >= since)
    ],
)
def test_every_served_version_has_each_field_its_protocol_reads(
    api_key: int, protocol: type, version: int, path: str
) -> None:
    assert missing_from(protocol, entity(kio_request(api_key, version), path)) == []


@pytest.mark.parametrize("api_key", sorted(DATACLASSES))
def test_a_version_free_dataclass_names_only_fields_kio_has(api_key: int) -> None:
    kio_classes = [kio_request(api_key, version) for version in served(api_key)]
    for name, required, present in dataclass_fields(DATACLASSES[api_key], kio_classes):
        if required:
            assert all(present), f"{name} has no default but some served version lacks it"
        else:
            assert any(present), f"{name} is in no served version"


def sample(kio_class: Any) -> Any:
    """An instance of a kio entity class: each field a plain value of its type, each list of
    entities one sampled entity (kio's classes do not validate when built)."""
    values: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(kio_class).items():
        if typing.get_origin(hint) is typing.ClassVar or name.startswith("__"):
            continue
        values[name] = sample_value(hint)
    return kio_class(**values)


def sample_value(hint: Any) -> Any:
    nested = element(hint)
    if nested is not None:
        return (sample(nested),) if dataclasses.is_dataclass(nested) else ()
    if without_none(hint) is not hint:
        return None
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    for kind, value in (
        (bool, False),
        (int, 0),
        (str, ""),
        (timedelta, timedelta(0)),
        (uuid.UUID, uuid.UUID(int=0)),
    ):
        if isinstance(hint, type) and issubclass(hint, kind):
            return value
    return None


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(key, version) for key in sorted(DATACLASSES) for version in served(key)],
)
def test_every_served_version_reads_into_its_version_free_dataclass(api_key: int, version: int) -> None:
    request: object = read_message(DATACLASSES[api_key], sample(kio_request(api_key, version)))
    assert isinstance(request, DATACLASSES[api_key])


def _list_offsets(version: int) -> object:
    schema = importlib.import_module(f"kio.schema.list_offsets.v{version}.request")
    fields = {"partition_index": 2, "timestamp": LATEST}
    if version >= 4:
        fields["current_leader_epoch"] = 7
    partition = schema.ListOffsetsPartition(**fields)
    topic = schema.ListOffsetsTopic(name="t", partitions=(partition,))
    request: dict[str, object] = {"replica_id": -1, "topics": (topic,)}
    if version >= 2:
        request["isolation_level"] = READ_COMMITTED
    if version >= 10:
        request["timeout"] = timedelta(seconds=1)
    return schema.ListOffsetsRequest(**request)


@pytest.mark.parametrize("version", range(min_version(2), MAX_VERSIONS[2] + 1))
def test_every_served_list_offsets_version_reads_into_the_version_free_request(version: int) -> None:
    request = read_message(list_offsets.ListOffsetsRequest, _list_offsets(version))
    [topic] = request.topics
    assert topic.name == "t"
    epoch = 7 if version >= 4 else -1  # before v4 a client names no leader epoch
    assert topic.partitions == (
        list_offsets.ListOffsetsPartition(partition_index=2, timestamp=LATEST, current_leader_epoch=epoch),
    )
    assert request.isolation_level == (READ_COMMITTED if version >= 2 else READ_UNCOMMITTED)


@pytest.mark.parametrize("version", served(3))
def test_metadata_authorized_operations_are_read_from_the_versions_that_ask(version: int) -> None:
    request = sample(kio_request(3, version))
    fields = {
        name: True
        for name in ("include_topic_authorized_operations", "include_cluster_authorized_operations")
        if name in typing.get_type_hints(type(request))
    }
    request = dataclasses.replace(request, **fields)
    assert metadata.asks_topic_operations(request, version) is (
        "include_topic_authorized_operations" in fields
    )
    assert metadata.asks_cluster_operations(request, version) is (
        "include_cluster_authorized_operations" in fields
    )


@pytest.mark.parametrize("version", served(1))
def test_fetch_session_fields_take_no_session_before_the_versions_that_carry_them(version: int) -> None:
    request = sample(kio_request(1, version))
    if version >= fetch.SESSIONS_SINCE:
        request = dataclasses.replace(request, session_id=5, session_epoch=3)
    assert fetch.session_of(request, version) == ((5, 3) if version >= fetch.SESSIONS_SINCE else (0, -1))
    assert fetch.forgotten_topics(request, version) == (
        request.forgotten_topics_data if version >= fetch.SESSIONS_SINCE else ()
    )
    [topic] = request.topics
    [partition] = topic.partitions
    if version >= fetch.LEADER_EPOCH_SINCE:
        partition = dataclasses.replace(partition, current_leader_epoch=4)
    topic = dataclasses.replace(topic, partitions=(partition,))
    expected_key = uuid.UUID(int=0) if version >= fetch.TOPIC_ID_SINCE else ""
    assert fetch.topic_key(topic, version) == expected_key
    [(key, named)] = requested(dataclasses.replace(request, topics=(topic,)), version)
    assert key == (expected_key, partition.partition)
    assert named.current_leader_epoch == (4 if version >= fetch.LEADER_EPOCH_SINCE else -1)


def test_a_protocol_field_a_served_version_lacks_is_found() -> None:
    """The check above would catch the ACL rule's Protocol of a group and its topics read from a
    request that names neither (FindCoordinator v4 names its groups in ``coordinator_keys``)."""
    assert missing_from(guard_rules.GroupTopicsRequest, kio_request(10, 4)) == ["group_id", "topics"]
    assert missing_from(guard_rules.GroupTopicsRequest, kio_request(8, 9)) == []


@functools.cache
def mypy_namespace(module: ModuleType) -> dict[str, Any]:
    """The names of ``module`` as mypy sees them: its own, and the kio modules it imports for mypy
    alone (``if TYPE_CHECKING:``), imported here."""
    namespace = dict(vars(module))
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            exec(compile(ast.Module(body=node.body, type_ignores=[]), "<kio imports>", "exec"), namespace)
    return namespace


def alias_classes(module: ModuleType, alias: str) -> set[type]:
    """The kio classes a request type of ``module`` unites (a string for mypy: the union of kio
    classes and of the module's other such types)."""
    namespace = mypy_namespace(module)
    classes: set[type] = set()
    for name in (part.strip() for part in namespace[alias].split("|")):
        value = eval(name, namespace)
        classes |= alias_classes(module, name) if isinstance(value, str) else {value}
    return classes


@pytest.mark.parametrize(
    ("module", "alias"), [pytest.param(module, alias, id=alias) for module, alias in ALIASES]
)
def test_a_request_type_unites_kios_class_of_exactly_the_served_versions(
    module: ModuleType, alias: str
) -> None:
    expected = {
        entity(kio_request(key, version), path)
        for key, since, path in ALIASES[module, alias]
        for version in served(key)
        if (version in since if isinstance(since, range) else version >= since)
    }
    assert alias_classes(module, alias) == expected


def test_a_request_type_missing_a_served_version_is_found() -> None:
    """The check above would catch Fetch's type naming v4 to v16 while v17 is served."""
    assert kio_request(1, 17) in alias_classes(fetch, "FetchRequest")
    assert kio_request(1, 17) not in alias_classes(fetch, "TopicByName")


@pytest.mark.parametrize("version", served(1))
def test_the_client_rack_is_read_from_the_versions_that_carry_it(version: int) -> None:
    request = dataclasses.replace(
        sample(kio_request(1, version)), **({"rack_id": "az1"} if version >= 11 else {})
    )
    assert fetch.client_rack(request, version) == ("az1" if version >= fetch.RACK_ID_SINCE else None)


@pytest.mark.parametrize("version", served(3))
def test_metadata_fields_of_later_versions_take_kafkas_default_before(version: int) -> None:
    request = sample(kio_request(3, version))
    if version >= metadata.AUTO_CREATION_SINCE:
        request = dataclasses.replace(request, allow_auto_topic_creation=False)
    assert metadata.allows_auto_creation(request, version) is (version < metadata.AUTO_CREATION_SINCE)
    [topic] = request.topics
    named = uuid.UUID(int=5)
    if version >= metadata.TOPIC_ID_SINCE:
        topic = dataclasses.replace(topic, topic_id=named)
    assert metadata.topic_id_of(topic, version) == (named if version >= metadata.TOPIC_ID_SINCE else None)


@pytest.mark.parametrize("version", served(68))
def test_a_subscription_regex_is_read_from_the_versions_that_carry_it(version: int) -> None:
    request = sample(kio_request(68, version))
    if version >= consumer_groups.TOPIC_REGEX_SINCE:
        request = dataclasses.replace(request, subscribed_topic_regex="orders-.*")
    expected = "orders-.*" if version >= consumer_groups.TOPIC_REGEX_SINCE else None
    assert consumer_groups.subscribed_topic_regex(request, version) == expected


@pytest.mark.parametrize("version", served(9))
def test_an_offset_fetch_of_any_version_names_its_groups(version: int) -> None:
    request = read_message(offset_commit.OffsetFetchRequest, sample(kio_request(9, version)))
    assert request.group_ids() == [""]  # the sample's one group (a batch of one from v8)
    batched = version >= offset_commit.BATCHED_FETCH_SINCE
    assert len(request.groups) == (1 if batched else 0)


# The state each group of served versions runs against (SaslHandshake and SaslAuthenticate are
# answered by the connection, before any handler).
_STATES = [
    (MAX_VERSIONS.keys() - {17, 36}, {State.BROKER}),
    (GROUP_MAX_VERSIONS.keys(), {State.GROUPS}),
    (SECURITY_MAX_VERSIONS.keys(), {State.ACLS, State.QUOTAS, State.SCRAM}),
]


def test_the_dispatch_table_lists_every_served_api_with_its_state() -> None:
    assert set(APIS) == {key for keys, _ in _STATES for key in keys}
    for keys, states in _STATES:
        assert {APIS[key].state for key in keys} <= states
