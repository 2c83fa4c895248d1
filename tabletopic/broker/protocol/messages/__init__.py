"""Version-free request types, one module per API (or small family of APIs), with field names as
Kafka's schemas spell them: a handler takes the request type (and returns its response type of
:mod:`tabletopic.broker.protocol.responses`), so a misspelt field is a mypy error rather than a
default on the wire. :mod:`~tabletopic.broker.protocol.messages.convert` reads kio's class of any
version into them; ``broker/handlers`` maps each typed API to its types in its dispatch table.

Every API the broker serves has its request type here (ApiVersions reads nothing of its request).
Where every served version has the fields the handler reads, the type is the union of kio's class
of each served version (``v0.FetchRequest | v1.FetchRequest | ...``): the handler reads kio's
object as it is, and mypy checks every field it reads against every version. kio generates those
classes from Kafka's own JSON schemas, so the fields are never typed again by hand. The union is a
string naming modules imported for mypy alone (``if TYPE_CHECKING:``): importing all 232 served
request modules would double the broker's start-up (0.86 s against 0.92 s), and a running broker
imports only those of the versions its clients use. Where versions differ in shape, the type is a
frozen dataclass read once from kio's class of any version. Shapes several APIs share (what an ACL
rule reads, a config resource, a topic's partition indexes) are Protocols. Response types are
generated from kio's classes into :mod:`tabletopic.broker.protocol.responses`.
``tests/broker/test_typed_requests.py`` checks each union names
exactly the served versions, and each Protocol and dataclass against kio's class of every served
version.
"""
