"""ACL enforcement around the request handlers: each API's rule checks what the request touches and
answers the parts the principal may not touch with Kafka's error (TOPIC_, GROUP_, CLUSTER_ or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) where that part's answer goes, handing only the rest to the
handler. Handlers never see ACLs.

The dispatcher wraps every route through :meth:`Guard.wrap` (the one hook in ``broker/server``);
without an authorizer configured, the wrap returns the handler itself, so nothing changes and
nothing costs. The per-API rules live in :mod:`~tabletopic.broker.security.guard_rules`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol import WireResponse, build_response, encode_response
from tabletopic.broker.security.acl import Authorizer, Operation, ResourceType
from tabletopic.broker.security.acls import AclService
from tabletopic.broker.topics import TopicRegistry

Response = dict[str, Any] | WireResponse | None
Call = Callable[[Any], Awaitable[Response]]
Handler = Callable[[Any, RequestContext, Any], Awaitable[Response]]

NOT_REQUESTED = -2147483648  # Kafka's "authorized operations were not asked for"
RequestT = TypeVar("RequestT")


class TopicsRequest(Protocol):
    """What a rule of the APIs that list ``topics`` reads of the request (ListOffsets, Fetch,
    DeleteRecords, OffsetForLeaderEpoch, DescribeProducers, OffsetCommit, OffsetDelete): each entry
    is read through its API's :class:`TopicShape`."""

    @property
    def topics(self) -> Sequence[object]: ...


def narrowed(request: RequestT, **entries: tuple[object, ...]) -> RequestT:
    """kio's request (a frozen dataclass) with lists replaced by the entries the principal may
    touch, for the handler to answer."""
    return cast(RequestT, dataclasses.replace(cast(Any, request), **entries))


class TopicHolder(Protocol):
    """What the rules read of the broker: its topics (names of topic ids, whether one exists)."""

    @property
    def topics(self) -> TopicRegistry: ...


@dataclass(frozen=True, slots=True)
class Check:
    """One request's principal and host against the current ACL snapshot."""

    authorizer: Authorizer
    principal: str
    host: str
    broker: TopicHolder

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def cluster(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, "kafka-cluster")

    def topic(self, operation: Operation, name: str) -> bool:
        return self.allowed(operation, ResourceType.TOPIC, name)

    def group(self, operation: Operation, name: str) -> bool:
        return self.allowed(operation, ResourceType.GROUP, name)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name)


Rule = Callable[[Check, RequestContext, Any, Call], Awaitable[Response]]


def host_of(client_host: str) -> str:
    """``127.0.0.1:5555`` -> ``127.0.0.1`` (ACL hosts are addresses without the port)."""
    host, sep, port = client_host.rpartition(":")
    return host.strip("[]") if sep and port.isdigit() else client_host


class Guard:
    """Wraps handlers with their API's authorization rule.

    Args:
        acls: the node's ACLs (``enabled`` False leaves every handler unwrapped).
        broker: resolves topic ids (Fetch v13+, Metadata) to names.
        rules: API key -> rule; an API without a rule is allowed only to principals with ALTER on
            the cluster (a new API is closed until someone writes its rule).
    """

    def __init__(self, acls: AclService, broker: TopicHolder, rules: dict[int, Rule]) -> None:
        self._acls = acls
        self._broker = broker
        self._rules = rules

    def wrap(self, api_key: int, handler: Handler) -> Handler:
        if not self._acls.enabled:
            return handler
        rule = self._rules.get(api_key, cluster_rule(Operation.ALTER))
        acls, broker = self._acls, self._broker

        async def guarded(target: Any, ctx: RequestContext, request: object) -> Response:
            check = Check(acls.authorizer, ctx.principal, host_of(ctx.client_host), broker)

            async def call(body: object) -> Response:
                return await handler(target, ctx, body)

            return await rule(check, ctx, request, call)

        return guarded


# --- building blocks the rules share -------------------------------------------------------------


def cluster_rule(
    operation: Operation, errors: Callable[[Any], dict[str, Any]] | None = None, *, throttled: bool = True
) -> Rule:
    """All or nothing on the CLUSTER resource; ``errors(request)`` gives the refusal's fields where
    the response has no top-level error message (per-entry errors, or no top-level code at all);
    ``throttled`` False for a response without a throttle time."""

    async def rule(check: Check, ctx: RequestContext, request: object, call: Call) -> Response:
        if check.cluster(operation):
            return await call(request)
        if errors is not None:
            refusal = errors(request)
        else:
            refusal = {
                "error_code": ErrorCode.cluster_authorization_failed,
                "error_message": "Cluster authorization failed.",
            }
        return {"throttle_time": 0, **refusal} if throttled else refusal

    return rule


@dataclass(frozen=True, slots=True)
class TopicShape:
    """Where an API keeps topics and partitions in its request and response."""

    request_topics: str
    request_name: str
    request_partitions: str
    request_index: str | None  # None: the partitions are plain ints
    response_topics: str
    response_name: str
    response_partitions: str
    response_index: str
    error_fields: tuple[tuple[str, Any], ...] = ()
    top_fields: tuple[tuple[str, Any], ...] = ()

    def name_of(self, check: Check, topic: Any) -> str | None:
        name = getattr(topic, self.request_name, None)
        if self.request_name == "topic_id" and name is not None:
            found = check.broker.topics.by_id(name)
            return found.name if found is not None else None
        return name

    def error_topic(self, topic: Any, code: ErrorCode) -> dict[str, Any]:
        partitions = getattr(topic, self.request_partitions)
        indexes = [p if self.request_index is None else getattr(p, self.request_index) for p in partitions]
        entry_name = getattr(topic, self.request_name)
        return {
            self.response_name: entry_name,
            # Fetch names topics by id from v13 on and by name before: fill both, the builder keeps
            # the one this version has.
            **({"topic": entry_name} if self.response_name == "topic_id" else {}),
            self.response_partitions: [
                {self.response_index: i, "error_code": code, **dict(self.error_fields)} for i in indexes
            ],
        }


async def split_topics(
    shape: TopicShape,
    check: Check,
    allowed: Callable[[str], bool],
    code: ErrorCode,
    ctx: RequestContext,
    request: object,
    topics: Sequence[object],
    call: Call,
    unanswered: bool = False,
) -> Response:
    """Hand the handler the ``topics`` of the request (its list ``shape.request_topics``) that
    ``allowed`` accepts and answer the others with ``code``. A topic whose id is unknown goes to the
    handler, which answers UNKNOWN_TOPIC_ID as usual. ``unanswered``: the client expects no answer
    (Produce with acks=0)."""
    passed: list[object] = []
    refused: list[object] = []
    for topic in topics:
        name = shape.name_of(check, topic)
        (passed if name is None or allowed(name) else refused).append(topic)
    return await answer_split(shape, code, ctx, request, call, passed, refused, unanswered)


async def answer_split(
    shape: TopicShape,
    code: ErrorCode,
    ctx: RequestContext,
    request: object,
    call: Call,
    passed: Sequence[object],
    refused: Sequence[object],
    unanswered: bool = False,
) -> Response:
    if not refused:
        return await call(request)
    errors = [shape.error_topic(topic, code) for topic in refused]
    if not passed:
        if unanswered:
            return None  # Produce with acks=0 is never answered
        return {"throttle_time": 0, **dict(shape.top_fields), shape.response_topics: errors}
    response = await call(narrowed(request, **{shape.request_topics: tuple(passed)}))
    return merge_entries(response, shape.response_topics, errors, ctx)


def merge_entries(
    response: Response, key: str, entries: list[dict[str, Any]], ctx: RequestContext
) -> Response:
    """Add ``entries`` to the list ``key`` of a response, also of one the handler encoded itself."""
    if response is None:
        return None
    if isinstance(response, dict):
        return {**response, key: [*response.get(key, []), *entries]}
    decoded = _decode(b"".join(bytes(piece) for piece in response.buffers), ctx.api_key, ctx.api_version)
    extra = build_response(ctx.api_key, ctx.api_version, {key: entries})
    merged = dataclasses.replace(decoded, **{key: (*getattr(decoded, key), *getattr(extra, key))})
    return WireResponse([encode_response(ctx.correlation_id, merged)])


def _decode(frame: bytes, api_key: int, api_version: int) -> Any:
    """A full response frame (length prefix included) back to its kio object: the rare mixed case
    of a self-encoded response (Fetch of allowed and refused topics together)."""
    response_type = load_response_schema(api_key, api_version)
    offset = 8 + (1 if response_type.__header_schema__.__flexible__ else 0)
    body, _ = entity_reader(response_type)(memoryview(frame).toreadonly(), offset)
    return body
