"""The API versions this broker advertises.

The minimum is kio's (Kafka 4's baseline: Produce >= 3, Fetch >= 4); the maximum is what a
Kafka 4.0 broker serves, where our handlers fill that version correctly. kio also holds later
versions (Kafka 4.1+: Produce v13 and OffsetCommit/OffsetFetch v10 by topic id, Fetch v18, ...);
a client asking for one of those gets UNSUPPORTED_VERSION in that version's own response
(``codec.encode_unsupported_version``), never a closed socket.

Kafka 4.0 versions still below Kafka's here, and why: EndTxn v5, TxnOffsetCommit v5 and
AddPartitionsToTxn v4-v5 belong to transaction protocol v2 (KIP-890 part 2: an epoch bump per
transaction, partitions added by the partition leader), which we do not implement; clients use
them only when a broker finalizes the transaction.version feature, which we do not advertise.
"""

from __future__ import annotations

from functools import cache

from kio.schema.index import api_key_map, schema_name_map

# api_key -> highest version we serve (the lowest is kio's).
MAX_VERSIONS: dict[int, int] = {
    0: 12,  # Produce
    1: 17,  # Fetch (v17 only adds the replica's directory id, a follower's field)
    2: 10,  # ListOffsets (v10 only adds a timeout; clients infer "Kafka 4.0" from it)
    3: 13,  # Metadata (v13: a top-level error code, REBOOTSTRAP_REQUIRED)
    17: 1,  # SaslHandshake
    18: 4,  # ApiVersions (a newer one gets the KIP-511 v0 fallback answer)
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics
    21: 2,  # DeleteRecords
    22: 5,  # InitProducerId
    23: 4,  # OffsetForLeaderEpoch
    24: 3,  # AddPartitionsToTxn (v4+ is the brokers' batched form)
    25: 4,  # AddOffsetsToTxn
    26: 4,  # EndTxn
    27: 1,  # WriteTxnMarkers (coordinator to partition leader, cluster mode)
    28: 4,  # TxnOffsetCommit
    32: 4,  # DescribeConfigs
    33: 2,  # AlterConfigs
    34: 2,  # AlterReplicaLogDirs
    35: 4,  # DescribeLogDirs
    36: 2,  # SaslAuthenticate
    37: 3,  # CreatePartitions
    43: 2,  # ElectLeaders
    44: 1,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    55: 2,  # DescribeQuorum
    60: 2,  # DescribeCluster (v2: include_fenced_brokers; we list live brokers only)
    61: 0,  # DescribeProducers
    64: 0,  # UnregisterBroker (kafka-cluster unregister; Kafka serves it on the controller)
    65: 0,  # DescribeTransactions
    66: 1,  # ListTransactions
    75: 0,  # DescribeTopicPartitions
    78: 1,  # ShareFetch (KIP-932; v2's acquire modes and RENEW are not served)
    79: 1,  # ShareAcknowledge
}

# The consumer- and share-group APIs, served by the group coordinator (``broker/handlers`` APIS).
GROUP_MAX_VERSIONS: dict[int, int] = {
    8: 9,  # OffsetCommit
    9: 9,  # OffsetFetch
    10: 6,  # FindCoordinator (v6: share-group keys, refused as INVALID_REQUEST)
    11: 9,  # JoinGroup
    12: 4,  # Heartbeat
    13: 5,  # LeaveGroup
    14: 5,  # SyncGroup
    15: 6,  # DescribeGroups (v6: an unknown group is GROUP_ID_NOT_FOUND, KIP-1043)
    16: 5,  # ListGroups
    42: 2,  # DeleteGroups
    47: 0,  # OffsetDelete
    68: 1,  # ConsumerGroupHeartbeat (KIP-848)
    69: 1,  # ConsumerGroupDescribe
    76: 1,  # ShareGroupHeartbeat (KIP-932)
    77: 1,  # ShareGroupDescribe
    90: 1,  # DescribeShareGroupOffsets (v1: with the lag)
    91: 0,  # AlterShareGroupOffsets
    92: 0,  # DeleteShareGroupOffsets
}

# The ACL, quota and SCRAM APIs, served against the node's security state (``broker/handlers``
# runs each against its ACL service, quota service or credential store).
SECURITY_MAX_VERSIONS: dict[int, int] = {
    29: 3,  # DescribeAcls
    30: 3,  # CreateAcls
    31: 3,  # DeleteAcls
    48: 1,  # DescribeClientQuotas
    49: 1,  # AlterClientQuotas
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
}


@cache
def min_version(api_key: int) -> int:
    """kio's lowest schema version of an API."""
    return min(schema_name_map[api_key_map[api_key]])


@cache
def kio_max_version(api_key: int) -> int:
    return max(schema_name_map[api_key_map[api_key]])


def advertised_ranges(api_keys: dict[int, int]) -> list[tuple[int, int, int]]:
    """``(api_key, min, max)`` triples for ApiVersions, capped at what kio can parse."""
    return [
        (key, min_version(key), min(maximum, kio_max_version(key)))
        for key, maximum in sorted(api_keys.items())
    ]
