"""Single-node answers to cluster admin APIs: ElectLeaders, partition reassignments, DescribeQuorum,
DescribeTopicPartitions (with its cursor), ApiVersions."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tabletopic.broker.protocol.versions import MAX_VERSIONS, advertised_ranges
from tests.support.broker_calls import call
from tests.support.kafka_requests import request


async def test_elect_leaders_is_never_needed(broker_service) -> None:
    await broker_service.topics.create("t", 2)
    response = await call(
        broker_service,
        request(
            43, 2, election_type=0, timeout=1000, topic_partitions=[{"topic": "t", "partitions": [0, 1, 7]}]
        ),
    )
    codes = [p.error_code for p in response.replica_election_results[0].partition_result]
    assert codes == [ErrorCode.election_not_needed] * 2 + [ErrorCode.unknown_topic_or_partition]


async def test_reassignment_to_this_node_is_accepted_and_nothing_is_ongoing(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    node = broker_service.node_id
    alter = await call(
        broker_service,
        request(
            45,
            0,
            timeout=1000,
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "replicas": [node]}]}],
        ),
    )
    elsewhere = await call(
        broker_service,
        request(
            45,
            0,
            timeout=1000,
            topics=[{"name": "t", "partitions": [{"partition_index": 0, "replicas": [node + 1]}]}],
        ),
    )
    listed = await call(broker_service, request(46, 0, timeout=1000, topics=None))
    assert alter.responses[0].partitions[0].error_code is ErrorCode.none
    assert elsewhere.responses[0].partitions[0].error_code is ErrorCode.invalid_replica_assignment
    assert listed.topics == ()


async def test_quorum_is_this_node(broker_service) -> None:
    response = await call(
        broker_service,
        request(55, 2, topics=[{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]),
    )
    partition = response.topics[0].partitions[0]
    assert partition.leader_id == broker_service.node_id
    assert [v.replica_id for v in partition.current_voters] == [broker_service.node_id]


async def test_describe_topic_partitions_pages_with_a_cursor(broker_service) -> None:
    await broker_service.topics.create("a", 3)
    await broker_service.topics.create("b", 2)
    first = await call(broker_service, request(75, 0, topics=[], response_partition_limit=4, cursor=None))
    assert [(t.name, len(t.partitions)) for t in first.topics] == [("a", 3), ("b", 1)]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("b", 1)
    rest = await call(
        broker_service,
        request(
            75, 0, topics=[], response_partition_limit=4, cursor={"topic_name": "b", "partition_index": 1}
        ),
    )
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [("b", [1])]
    assert rest.next_cursor is None


async def test_api_versions_lists_what_the_broker_serves(broker_service) -> None:
    broker_service.api_ranges = advertised_ranges(MAX_VERSIONS)
    for version in range(0, 5):
        response = await call(
            broker_service, request(18, version, client_software_name="t", client_software_version="1")
        )
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert served[0] == (3, 12) and served[1] == (4, 17) and served[18] == (0, 4)


async def test_offset_for_leader_epoch_answers_the_high_watermark(broker_service) -> None:
    from tests.support.kafka_requests import make_batch, produce_request

    await broker_service.topics.create("e", 1)
    await call(broker_service, produce_request("e", 0, make_batch([b"a", b"b", b"c"])))
    response = await call(
        broker_service,
        request(
            23,
            4,
            replica_id=-1,
            topics=[
                {
                    "topic": "e",
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
                        {"partition": 3, "current_leader_epoch": 0, "leader_epoch": 0},
                    ],
                }
            ],
        ),
    )
    known, unknown = response.topics[0].partitions
    assert (known.error_code, known.leader_epoch, known.end_offset) == (ErrorCode.none, 0, 3)
    assert unknown.error_code is ErrorCode.unknown_topic_or_partition


async def test_describe_producers_shows_idempotent_producer_state(broker_service) -> None:
    from tests.support.kafka_requests import make_batch, produce_request

    await broker_service.topics.create("p", 1)
    for seq in (0, 2):
        batch = make_batch([b"a", b"b"], producer_id=42, producer_epoch=3, base_sequence=seq)
        await call(broker_service, produce_request("p", 0, batch))
    response = await call(broker_service, request(61, 0, topics=[{"name": "p", "partition_indexes": [0, 9]}]))
    known, unknown = response.topics[0].partitions
    state = known.active_producers[0]
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (42, 3, 3)
    assert unknown.error_code is ErrorCode.unknown_topic_or_partition


async def test_moving_a_replica_to_the_one_log_dir_is_a_no_op(broker_service) -> None:
    await broker_service.topics.create("t", 1)
    here = str(broker_service.config.data_dir)
    response = await call(
        broker_service,
        request(
            34,
            2,
            dirs=[
                {"path": here, "topics": [{"name": "t", "partitions": [0, 5]}]},
                {"path": "/elsewhere", "topics": [{"name": "t", "partitions": [0]}]},
            ],
        ),
    )
    codes = [(p.partition_index, p.error_code) for r in response.results for p in r.partitions]
    assert codes == [
        (0, ErrorCode.none),
        (5, ErrorCode.unknown_topic_or_partition),
        (0, ErrorCode.log_dir_not_found),
    ]
