"""Version-free request and response types, one module per API (or small family of APIs), with
field names as Kafka's schemas spell them: a handler takes the request type and returns the
response type, so a misspelt field is a mypy error rather than a default on the wire.
:mod:`~tabletopic.broker.protocol.messages.convert` reads kio's class of any version into them and
turns responses into what the response builder fits to the client's version; ``broker/handlers``
maps each typed API to its types in its dispatch table.

Every API the broker serves has its request type here (ApiVersions reads nothing of its request):
a Protocol kio's class of every served version satisfies as it is, or a frozen dataclass read once
from kio's class of any version where versions differ in shape. The ACL rules read kio's object
through the same Protocols, or through Protocols of just what they read. Responses are TypedDicts
for Produce, ListOffsets, InitProducerId, AddOffsetsToTxn, EndTxn, CreatePartitions and
DescribeCluster, dicts elsewhere. ``tests/broker/test_typed_requests.py`` checks them against
kio's class of every served version.
"""
