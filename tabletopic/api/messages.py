"""The console's message browser and its operator actions, as admin API endpoints:

- ``GET /v1/topics/{name}/messages``: records of one partition from an offset, a timestamp or the
  last N, each with key, value, headers and metadata; values and keys in Confluent's wire format
  are decoded through this node's schema registry (Avro, Protobuf, JSON Schema);
- ``POST /v1/topics/{name}/messages``: produce a test message;
- ``GET /v1/groups`` and ``GET /v1/groups/{group}``: consumer groups with their members, committed
  offsets and lag (``tabletopic groups``), the cluster's from any broker;
- ``POST /v1/groups/{group}/offsets``: reset a group's committed offsets on a topic (to the
  earliest, the latest, a timestamp or an offset);
- ``GET|POST|DELETE /v1/acls`` and ``GET|POST|DELETE /v1/scram-users``: ACLs and SCRAM users, when
  the node has an authorizer / SCRAM listener.

Why a Kafka client and not the broker's own store: a partition may be led by another broker of the
cluster, a group coordinated by another, and a reset must go to the group's coordinator with
Kafka's own checks (a group with members is refused). The client talks to this node's listener as
the broker itself (its inter-broker credentials), which then routes it like any client. The
client calls block: every endpoint runs them in a thread.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from tabletopic.api import cluster_view, views
from tabletopic.api.sources import ConsoleSources
from tabletopic.api.topics import TopicApiError
from tabletopic.broker.security.acls import configured_authorizer

log = logging.getLogger(__name__)

MAX_MESSAGES = 500
READ_BUDGET_S = 10.0
CLIENT_TIMEOUT_S = 15.0
_SCHEMA_ID = struct.Struct(">I")


class ProduceMessage(BaseModel):
    key: str | None = Field(default=None, description="UTF-8 text; null for no key")
    value: str | None = Field(default=None, description="UTF-8 text; null for a tombstone")
    headers: dict[str, str] = Field(default_factory=dict)
    partition: int | None = Field(default=None, description="Default: the partitioner's choice (by key)")


class OffsetReset(BaseModel):
    topic: str
    to: Literal["earliest", "latest", "timestamp", "offset"]
    value: int | None = Field(default=None, description="The timestamp (ms) or offset, for those two")
    partitions: list[int] | None = Field(default=None, description="Default: every partition")


class AclEntry(BaseModel):
    resource_type: Literal["topic", "group", "cluster", "transactional_id"]
    resource_name: str
    pattern_type: Literal["literal", "prefixed"] = "literal"
    principal: str = Field(description="e.g. User:alice")
    host: str = "*"
    operation: str = Field(description="read, write, create, delete, alter, describe, all, ...")
    permission: Literal["allow", "deny"] = "allow"


class ScramUser(BaseModel):
    name: str
    password: str
    mechanism: Literal["SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-256"
    iterations: int = Field(default=8192, ge=4096, le=16384)


def client_error(exc: BaseException) -> str:
    """A client failure in Kafka's own terms (``NAME: reason``), not ``KafkaError{code=…}``."""
    error = exc.args[0] if exc.args else None
    name = getattr(error, "name", None)
    text = getattr(error, "str", None)
    if callable(name) and callable(text):
        return f"{name()}: {text()}"
    return str(exc)


class Decoder:
    """Keys and values as a person reads them: Confluent wire format decoded through the registry,
    else UTF-8 text (JSON when it parses), else base64."""

    def __init__(self, sources: ConsoleSources) -> None:
        from tabletopic.table.convert.decoders import DecoderCache

        registry = sources.schema_registry()
        lookup = None
        if registry is not None:
            from tabletopic.schema_registry.client import CachedSchemaLookup

            lookup = CachedSchemaLookup(registry)
        self._registry = registry
        self._cache = DecoderCache(lookup, native=False)

    def decode(self, payload: bytes | None) -> dict[str, Any]:
        if payload is None:
            return {"format": "null", "value": None}
        if len(payload) >= 5 and payload[0] == 0 and self._registry is not None:
            decoded = self._by_schema_id(payload)
            if decoded is not None:
                return decoded
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            return {"format": "base64", "value": base64.b64encode(payload).decode("ascii")}
        try:
            return {"format": "json", "value": json.loads(text)}
        except ValueError:
            return {"format": "text", "value": text}

    def _by_schema_id(self, payload: bytes) -> dict[str, Any] | None:
        from tabletopic.api.views import plain
        from tabletopic.table.convert.decoders import Failure, decode_column
        from tabletopic.table.table_config import ConverterConfig, ConvertType

        (schema_id,) = _SCHEMA_ID.unpack_from(payload, 1)
        failures: dict[int, Failure] = {}
        try:
            array, _ = decode_column(
                [payload], ConverterConfig(ConvertType.BY_SCHEMA_ID), self._cache, failures
            )
        except Exception as exc:
            log.debug("schema id %d: %s", schema_id, exc)
            return None
        if failures:
            return {"format": "schema", "schema_id": schema_id, "error": failures[0].reason, "value": None}
        try:
            kind = self._registry.registered_by_id(schema_id).schema_type if self._registry else None
        except Exception:
            kind = None
        return {
            "format": str(kind or "AVRO").lower(),
            "schema_id": schema_id,
            "value": plain(array.to_pylist()[0]),
        }


class MessageBrowser:
    """Reads, produces and resets through a Kafka client logged in as this broker."""

    def __init__(self, sources: ConsoleSources) -> None:
        self.sources = sources

    def client_config(self) -> dict[str, Any]:
        service = self.sources.broker_service()
        if service is None:
            raise TopicApiError(503, "BROKER_NOT_AVAILABLE", "the broker is not running")
        return cluster_view.console_client_config(service)

    @contextmanager
    def _consumer(self, settings: dict[str, Any]) -> Iterator[Any]:
        """A consumer logged in as this broker, with ``settings``, for the reads of one request and
        closed after them; a client failure while it reads answers 502 KAFKA_ERROR."""
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                **self.client_config(),
                "group.id": "tabletopic-console",  # assigned, never subscribed or committed
                "enable.auto.commit": False,
                **settings,
            }
        )
        try:
            yield consumer
        except TopicApiError:
            raise
        except Exception as exc:
            raise TopicApiError(502, "KAFKA_ERROR", client_error(exc)) from exc
        finally:
            consumer.close()

    def _topic(self, name: str) -> Any:
        service = self.sources.broker_service()
        topic = service.topics.get(name) if service is not None else None
        if topic is None:
            raise TopicApiError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name} does not exist")
        return topic

    def read(
        self,
        name: str,
        partition: int,
        offset: int | None = None,
        timestamp: int | None = None,
        limit: int = 20,
    ) -> dict[str, Any]:
        """Up to ``limit`` records of one partition from ``offset`` (or the first at or after
        ``timestamp`` ms; neither: the last ``limit``), read committed."""
        from confluent_kafka import TopicPartition

        topic = self._topic(name)
        if not 0 <= partition < topic.partition_count:
            raise TopicApiError(
                404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name} has no partition {partition}"
            )
        limit = max(1, min(limit, MAX_MESSAGES))
        settings = {
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.queue.backoff.ms": 1,
        }
        with self._consumer(settings) as consumer:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(name, partition), timeout=CLIENT_TIMEOUT_S, cached=False
            )
            if timestamp is not None:
                found = consumer.offsets_for_times(
                    [TopicPartition(name, partition, timestamp)], timeout=CLIENT_TIMEOUT_S
                )[0]
                start = high if found.offset < 0 else found.offset
            elif offset is not None:
                start = min(max(offset, low), high)
            else:
                start = max(high - limit, low)
            records = self._poll(consumer, name, partition, start, high, limit)
        return {
            "topic": name,
            "partition": partition,
            "log_start_offset": low,
            "high_watermark": high,
            "start": start,
            "records": records,
        }

    def _poll(
        self, consumer: Any, name: str, partition: int, start: int, high: int, limit: int
    ) -> list[dict[str, Any]]:
        from confluent_kafka import KafkaError, TopicPartition

        if start >= high:
            return []
        consumer.assign([TopicPartition(name, partition, start)])
        decoder = Decoder(self.sources)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + READ_BUDGET_S
        while len(out) < limit and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    break
                raise TopicApiError(502, "KAFKA_ERROR", f"{error.name()}: {error.str()}")
            stamp_type, stamp = message.timestamp()
            out.append(
                {
                    "partition": message.partition(),
                    "offset": message.offset(),
                    "timestamp": stamp,
                    "timestamp_type": "LogAppendTime" if stamp_type == 2 else "CreateTime",
                    "key": decoder.decode(message.key()),
                    "value": decoder.decode(message.value()),
                    "headers": [
                        {"key": k, "value": decoder.decode(v)["value"] if v is not None else None}
                        for k, v in (message.headers() or [])
                    ],
                    "size": len(message.value() or b"") + len(message.key() or b""),
                }
            )
        return out

    def produce(self, name: str, body: ProduceMessage) -> dict[str, Any]:
        from confluent_kafka import Producer

        self._topic(name)
        producer = Producer({**self.client_config(), "enable.idempotence": False, "acks": "all"})
        outcome: dict[str, Any] = {}

        def delivered(error: Any, message: Any) -> None:
            if error is not None:
                outcome["error"] = f"{error.name()}: {error.str()}"
            else:
                outcome.update(partition=message.partition(), offset=message.offset())

        kwargs: dict[str, Any] = {"on_delivery": delivered, "headers": list(body.headers.items())}
        if body.partition is not None:
            kwargs["partition"] = body.partition
        try:
            producer.produce(
                name,
                key=None if body.key is None else body.key.encode(),
                value=None if body.value is None else body.value.encode(),
                **kwargs,
            )
            remaining = producer.flush(CLIENT_TIMEOUT_S)
        except Exception as exc:
            raise TopicApiError(400, "KAFKA_ERROR", client_error(exc)) from exc
        if remaining or "error" in outcome:
            raise TopicApiError(502, "KAFKA_ERROR", outcome.get("error", "not acknowledged in time"))
        return {"topic": name, **outcome}

    def reset_offsets(self, group: str, body: OffsetReset) -> dict[str, Any]:
        """Commit the chosen offsets for the group through its coordinator (Kafka refuses while the
        group has members: stop its consumers first)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        topic = self._topic(body.topic)
        count = topic.partition_count
        partitions = sorted(set(body.partitions)) if body.partitions is not None else list(range(count))
        unknown = [p for p in partitions if not 0 <= p < count]
        if unknown:
            raise TopicApiError(
                404,
                "UNKNOWN_TOPIC_OR_PARTITION",
                f"topic {body.topic} has partitions 0 to {count - 1}: no partition "
                + ", ".join(map(str, unknown)),
            )
        if body.to in ("timestamp", "offset") and body.value is None:
            raise TopicApiError(400, "INVALID_REQUEST", f"to={body.to} needs a value")
        with self._consumer({}) as consumer:
            wanted: list[Any] = []
            if body.to == "timestamp":
                assert body.value is not None
                asked = [TopicPartition(body.topic, p, body.value) for p in partitions]
                found = consumer.offsets_for_times(asked, timeout=CLIENT_TIMEOUT_S)
            for index, p in enumerate(partitions):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(body.topic, p), timeout=CLIENT_TIMEOUT_S, cached=False
                )
                if body.to == "earliest":
                    target = low
                elif body.to == "latest":
                    target = high
                elif body.to == "timestamp":
                    target = high if found[index].offset < 0 else found[index].offset
                else:
                    assert body.value is not None
                    target = min(max(body.value, low), high)
                wanted.append(TopicPartition(body.topic, p, target))
        admin = self._admin()
        try:
            futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])
            result = futures[group].result(CLIENT_TIMEOUT_S)
        except Exception as exc:
            raise TopicApiError(409, "KAFKA_ERROR", client_error(exc)) from exc
        failed = [f"{tp.partition}: {tp.error}" for tp in result.topic_partitions if tp.error is not None]
        if failed:
            raise TopicApiError(409, "KAFKA_ERROR", "; ".join(failed))
        return {
            "group": group,
            "topic": body.topic,
            "offsets": {tp.partition: tp.offset for tp in result.topic_partitions},
        }

    # Security ------------------------------------------------------------------------------------

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config())

    def _require_authorizer(self) -> None:
        """Answer SECURITY_DISABLED, as Kafka's ACL APIs do, when the node runs no authorizer
        (checked here: librdkafka's DescribeAcls does not surface that error as one)."""
        service = self.sources.broker_service()
        if service is not None and not configured_authorizer(service.config):
            raise TopicApiError(
                400,
                "SECURITY_DISABLED",
                "no authorizer is configured: set authorizer.class.name to manage ACLs",
            )

    def acls(self) -> list[dict[str, Any]]:
        self._require_authorizer()
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        match_all = AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]  # None matches any name, principal and host
            ResourcePatternType.ANY,
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        try:
            admin = self._admin()  # must outlive its futures
            bindings = admin.describe_acls(match_all, request_timeout=CLIENT_TIMEOUT_S).result(
                CLIENT_TIMEOUT_S
            )
        except Exception as exc:
            raise TopicApiError(400, "SECURITY_DISABLED", client_error(exc)) from exc
        return sorted((_acl_dict(b) for b in bindings), key=lambda a: tuple(str(v) for v in a.values()))

    def change_acl(self, entry: AclEntry, delete: bool) -> dict[str, Any]:
        self._require_authorizer()
        binding = _acl_binding(entry, as_filter=delete)
        admin = self._admin()
        try:
            if delete:
                deleted = admin.delete_acls([binding], request_timeout=CLIENT_TIMEOUT_S)[binding].result(
                    CLIENT_TIMEOUT_S
                )
                return {"deleted": len(deleted)}
            admin.create_acls([binding], request_timeout=CLIENT_TIMEOUT_S)[binding].result(CLIENT_TIMEOUT_S)
        except Exception as exc:
            raise TopicApiError(400, "KAFKA_ERROR", client_error(exc)) from exc
        return {"created": 1}

    def scram_users(self) -> list[dict[str, Any]]:
        try:
            admin = self._admin()  # must outlive its futures
            result = admin.describe_user_scram_credentials(request_timeout=CLIENT_TIMEOUT_S)
            described = (
                result.result(CLIENT_TIMEOUT_S)
                if hasattr(result, "result")
                else {n: f.result(CLIENT_TIMEOUT_S) for n, f in result.items()}
            )
        except Exception as exc:
            raise TopicApiError(400, "SECURITY_DISABLED", client_error(exc)) from exc
        return [
            {
                "name": name,
                "mechanisms": [
                    {
                        "mechanism": str(i.mechanism).split(".")[-1].replace("_", "-"),
                        "iterations": i.iterations,
                    }
                    for i in d.scram_credential_infos
                ],
            }
            for name, d in sorted(described.items())
        ]

    def set_scram_user(self, user: ScramUser) -> dict[str, Any]:
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        mechanism = getattr(ScramMechanism, user.mechanism.replace("-", "_"))
        upsertion = UserScramCredentialUpsertion(
            user.name, ScramCredentialInfo(mechanism, user.iterations), user.password.encode()
        )
        return self._alter_scram([upsertion], user.name, "set")

    def delete_scram_user(self, name: str) -> dict[str, Any]:
        from confluent_kafka.admin import UserScramCredentialDeletion  # type: ignore[attr-defined]

        found = {u["name"]: u for u in self.scram_users()}.get(name)
        if found is None:
            raise TopicApiError(404, "RESOURCE_NOT_FOUND", f"no SCRAM user {name}")
        from confluent_kafka.admin import ScramMechanism  # type: ignore[attr-defined]

        deletions = [
            UserScramCredentialDeletion(name, getattr(ScramMechanism, m["mechanism"].replace("-", "_")))
            for m in found["mechanisms"]
        ]
        return self._alter_scram(deletions, name, "deleted")

    def _alter_scram(self, changes: list[Any], name: str, done: str) -> dict[str, Any]:
        try:
            admin = self._admin()  # must outlive its futures
            futures = admin.alter_user_scram_credentials(changes, request_timeout=CLIENT_TIMEOUT_S)
            for future in futures.values():
                future.result(CLIENT_TIMEOUT_S)
        except Exception as exc:
            raise TopicApiError(400, "KAFKA_ERROR", client_error(exc)) from exc
        return {"name": name, "result": done}


def _mechanism_name(mechanism: Any) -> str:
    """``ScramMechanism.SCRAM_SHA_256`` as Kafka names it: ``SCRAM-SHA-256``."""
    return str(getattr(mechanism, "name", mechanism)).split(".")[-1].replace("_", "-")


def _acl_dict(binding: Any) -> dict[str, Any]:
    def word(value: Any) -> str:
        return str(getattr(value, "name", value)).lower()

    return {
        "resource_type": word(binding.restype),
        "resource_name": binding.name,
        "pattern_type": word(binding.resource_pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": word(binding.operation),
        "permission": word(binding.permission_type),
    }


def _acl_binding(entry: AclEntry, as_filter: bool) -> Any:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    def pick(kind: Any, value: str, what: str) -> Any:
        try:
            return getattr(kind, value.upper())
        except AttributeError:
            raise TopicApiError(400, "INVALID_REQUEST", f"unknown {what} {value!r}") from None

    args = (
        pick(ResourceType, entry.resource_type, "resource type"),
        entry.resource_name,
        pick(ResourcePatternType, entry.pattern_type, "pattern type"),
        entry.principal,
        entry.host,
        pick(AclOperation, entry.operation, "operation"),
        pick(AclPermissionType, entry.permission, "permission"),
    )
    return AclBindingFilter(*args) if as_filter else AclBinding(*args)


def messages_router(browser: MessageBrowser) -> APIRouter:
    router = APIRouter(tags=["messages"])

    @router.get("/v1/topics/{name}/messages", summary="Records of one partition, decoded")
    async def read_messages(
        name: str,
        partition: int = 0,
        offset: int | None = None,
        timestamp: int | None = None,
        limit: int = 20,
    ) -> dict[str, Any]:
        """From ``offset``, or the first record at or after ``timestamp`` (ms), or the last
        ``limit`` records; keys and values in Confluent's wire format decoded through the
        registry."""
        return await asyncio.to_thread(browser.read, name, partition, offset, timestamp, limit)

    @router.post("/v1/topics/{name}/messages", status_code=201, summary="Produce a test message")
    async def produce(name: str, body: ProduceMessage) -> dict[str, Any]:
        return await asyncio.to_thread(browser.produce, name, body)

    @router.get("/v1/groups", tags=["groups"], summary="Every consumer group: state, members, total lag")
    async def list_groups() -> list[dict[str, Any]]:
        return await views.groups(browser.sources)

    @router.get(
        "/v1/groups/{group:path}",  # a group id may hold a slash
        tags=["groups"],
        summary="One group: state, members with their assignments, committed offsets and lag",
    )
    async def describe_group(group: str) -> dict[str, Any]:
        found = await views.group(browser.sources, group)
        if found is None:
            raise HTTPException(404, f"no consumer group {group}")
        return found

    @router.post("/v1/groups/{group:path}/offsets", summary="Reset a group's committed offsets on a topic")
    async def reset(group: str, body: OffsetReset) -> dict[str, Any]:
        return await asyncio.to_thread(browser.reset_offsets, group, body)

    @router.get("/v1/acls", tags=["security"], summary="Every ACL (needs an authorizer)")
    async def list_acls() -> list[dict[str, Any]]:
        return await asyncio.to_thread(browser.acls)

    @router.post("/v1/acls", tags=["security"], status_code=201, summary="Add an ACL")
    async def add_acl(body: AclEntry) -> dict[str, Any]:
        return await asyncio.to_thread(browser.change_acl, body, False)

    @router.delete("/v1/acls", tags=["security"], summary="Delete the ACLs matching an entry")
    async def delete_acl(body: AclEntry) -> dict[str, Any]:
        return await asyncio.to_thread(browser.change_acl, body, True)

    @router.get("/v1/scram-users", tags=["security"], summary="SCRAM users and their mechanisms")
    async def list_users() -> list[dict[str, Any]]:
        return await asyncio.to_thread(browser.scram_users)

    @router.post("/v1/scram-users", tags=["security"], status_code=201, summary="Create or update a user")
    async def set_user(body: ScramUser) -> dict[str, Any]:
        return await asyncio.to_thread(browser.set_scram_user, body)

    @router.delete("/v1/scram-users/{name}", tags=["security"], summary="Delete a SCRAM user")
    async def delete_user(name: str) -> dict[str, Any]:
        return await asyncio.to_thread(browser.delete_scram_user, name)

    return router
