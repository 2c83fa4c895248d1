"""Version-free request and response types, one module per API, with field names as Kafka's schemas
spell them: a handler takes the request type and returns the response type, so a misspelt field is
a mypy error rather than a default on the wire. :mod:`~tabletopic.broker.protocol.messages.convert`
reads kio's class of any version into them and turns responses into what the response builder fits
to the client's version; ``broker/handlers`` maps each typed API to its types in its dispatch table.

Typed so far: every API of ``broker/handlers`` HANDLERS but ApiVersions and the share-group ones,
and FindCoordinator; the other group APIs still take kio's object. Responses are TypedDicts for
Produce, ListOffsets, InitProducerId, AddOffsetsToTxn, EndTxn, CreatePartitions and
DescribeCluster, dicts elsewhere. ``tests/broker/test_typed_requests.py`` checks them against
kio's class of every served version.
"""
