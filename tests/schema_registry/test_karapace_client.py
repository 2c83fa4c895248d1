"""Karapace's registry client against a registry process: the requests it sends, made here with
httpx, and the answers read the way it reads them, for Avro, JSON Schema and Protobuf schemas with
references, each round-tripping a value through the wire format as Karapace's REST proxy does.

Karapace's client is not on PyPI (its REST proxy carries it: ``karapace.core.serialization``'s
``SchemaRegistryClient`` over ``karapace.core.client.Client``), so it cannot be installed here. What
it sends, read from its source (Aiven-Open/karapace):

- register: ``POST /subjects/{quote(subject)}/versions``, ``Content-Type:
  application/vnd.schemaregistry.v1+json``, ``{"schema": text, "schemaType": type}`` (Avro and
  JSON Schema text re-encoded as compact JSON); it reads ``id``.
- by subject: ``GET /subjects/{quote(subject)}/versions/{latest|n}``; it needs ``id``, ``schema``
  and ``version``, takes a missing ``schemaType`` as AVRO and fetches every ``references`` entry
  (``name``, ``subject``, integer ``version``) the same way, recursively.
- by id: ``GET /schemas/ids/{id}?includeSubjects=True``; it needs ``schema``, reads ``subjects``
  (the REST proxy refuses to produce with an id whose subjects lack the topic's), ``schemaType``
  and ``references`` (version -1: the latest); on an error it reads ``message``.

Its HTTP client is aiohttp: ``Accept: */*`` and any content type parsed as JSON. (Its register
call for a Protobuf schema with references calls a ``json()`` its ``Reference`` does not have, so
references go in the list form its own REST API and Confluent's take.)
"""

from __future__ import annotations

import io
import json
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.schema_registry.schemas import ADDRESS, ORDER
from tests.support.registry_process import RegistryProcess

pytestmark = pytest.mark.integration

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
AIOHTTP_HEADERS = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate", "User-Agent": "Python aiohttp"}


@dataclass
class Fetched:
    """A schema as Karapace's client holds it: type, text and resolved dependencies by name."""

    schema_type: str
    text: str
    dependencies: dict[str, Fetched] = field(default_factory=dict)
    schema_id: int = 0
    version: int = 0
    subjects: list[str] | None = None


class KarapaceRequests:
    """The requests of Karapace's ``SchemaRegistryClient``, one method per client method."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, headers=AIOHTTP_HEADERS, timeout=30)

    def post_new_schema(self, subject: str, schema_type: str, schema: Any, references: Any = None) -> int:
        text = schema if schema_type == "PROTOBUF" else json.dumps(schema, separators=(",", ":"))
        payload: dict[str, Any] = {"schema": text, "schemaType": schema_type}
        if references:
            payload["references"] = references
        result = self.http.post(
            f"/subjects/{quote(subject)}/versions",
            content=json.dumps(payload),
            headers={"Content-Type": CONTENT_TYPE},
        )
        assert result.is_success, result.text
        return int(result.json()["id"])

    def get_schema(
        self, subject: str, version: int | None = None, seen: frozenset[Any] = frozenset()
    ) -> Fetched:
        assert (subject, version) not in seen, "a cycle in references"
        seen = seen | {(subject, version)}
        result = self.http.get(
            f"/subjects/{quote(subject)}/versions/{'latest' if version is None else version}"
        )
        assert result.is_success, result.text
        body = result.json()
        assert {"id", "schema", "version"} <= body.keys(), body
        fetched = Fetched(body.get("schemaType", "AVRO"), body["schema"], {}, body["id"], body["version"])
        for reference in body.get("references", []):  # Reference.from_dict: int(version)
            name, ref_subject, ref_version = (
                str(reference["name"]),
                str(reference["subject"]),
                int(reference["version"]),
            )
            fetched.dependencies[name] = self.get_schema(ref_subject, ref_version, seen)
        return fetched

    def get_schema_for_id(self, schema_id: int) -> Fetched:
        result = self.http.get(f"/schemas/ids/{schema_id}", params={"includeSubjects": "True"})
        assert result.is_success, result.json()["message"]
        body = result.json()
        assert "schema" in body, body
        fetched = Fetched(
            body.get("schemaType", "AVRO"), body["schema"], {}, schema_id, 0, body.get("subjects")
        )
        for reference in body.get("references") or []:
            version = int(reference["version"])
            fetched.dependencies[str(reference["name"])] = self.get_schema(
                str(reference["subject"]), None if version == -1 else version
            )
        return fetched


@pytest.fixture
def karapace(registry_server: RegistryProcess) -> KarapaceRequests:
    return KarapaceRequests(registry_server.url)


def topic() -> str:
    return f"k-{uuid.uuid4().hex[:10]}"


def frame(schema_id: int, payload: bytes, indexes: bytes = b"") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + indexes + payload


def check_by_id(karapace: KarapaceRequests, schema_id: int, subject: str, schema_type: str) -> Fetched:
    """What the REST proxy checks before producing with an id, and the schema it decodes with."""
    fetched = karapace.get_schema_for_id(schema_id)
    assert fetched.schema_type == schema_type
    assert fetched.subjects is not None and subject in fetched.subjects
    return fetched


def test_karapace_requests_round_trip_avro_with_references(karapace: KarapaceRequests) -> None:
    import avro.io
    import avro.schema

    name = topic()
    address, order = ADDRESS, ORDER
    karapace.post_new_schema(f"{name}-address", "AVRO", address)
    references = [{"name": "acme.Address", "subject": f"{name}-address", "version": 1}]
    order_id = karapace.post_new_schema(f"{name}-value", "AVRO", order, references)

    def parse(fetched: Fetched) -> Any:  # Karapace parses dependencies first into the same names
        names = avro.schema.Names()
        for dependency in fetched.dependencies.values():
            avro.schema.make_avsc_object(json.loads(dependency.text), names)
        return avro.schema.make_avsc_object(json.loads(fetched.text), names)

    latest = karapace.get_schema(f"{name}-value")
    assert (latest.schema_id, latest.version, latest.schema_type) == (order_id, 1, "AVRO")
    assert list(latest.dependencies) == ["acme.Address"]
    out = io.BytesIO()
    avro.io.DatumWriter(parse(latest)).write(
        {"id": 7, "ship_to": {"city": "Oslo"}}, avro.io.BinaryEncoder(out)
    )
    payload = frame(order_id, out.getvalue())

    by_id = check_by_id(karapace, int.from_bytes(payload[1:5], "big"), f"{name}-value", "AVRO")
    reader = avro.io.DatumReader(parse(by_id))
    assert reader.read(avro.io.BinaryDecoder(io.BytesIO(payload[5:]))) == {
        "id": 7,
        "ship_to": {"city": "Oslo"},
    }
    # Registering the same schema again is Karapace's "upsert": the same id.
    assert karapace.post_new_schema(f"{name}-value", "AVRO", order, references) == order_id


def test_karapace_requests_round_trip_json_schema_with_references(karapace: KarapaceRequests) -> None:
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    name = topic()
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    order = {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "ship_to": {"$ref": "address.json"}},
        "required": ["id", "ship_to"],
    }
    karapace.post_new_schema(f"{name}-address", "JSON", address)
    references = [{"name": "address.json", "subject": f"{name}-address", "version": 1}]
    order_id = karapace.post_new_schema(f"{name}-value", "JSON", order, references)

    def validator(fetched: Fetched) -> Any:
        resources = [
            (ref, Resource.from_contents(json.loads(dep.text), default_specification=DRAFT7))
            for ref, dep in fetched.dependencies.items()
        ]
        return jsonschema.Draft7Validator(
            json.loads(fetched.text), registry=Registry().with_resources(resources)
        )

    latest = karapace.get_schema(f"{name}-value")
    assert (latest.schema_id, latest.schema_type) == (order_id, "JSON")
    value = {"id": 7, "ship_to": {"city": "Oslo"}}
    validator(latest).validate(value)
    payload = frame(order_id, json.dumps(value).encode())

    by_id = check_by_id(karapace, order_id, f"{name}-value", "JSON")
    decoded = json.loads(payload[5:])
    validator(by_id).validate(decoded)
    assert decoded == value
    assert not validator(by_id).is_valid({"id": 7, "ship_to": {"city": 5}})  # the reference is enforced


def test_karapace_requests_round_trip_protobuf_with_references(karapace: KarapaceRequests) -> None:
    from google.protobuf import message_factory

    from tabletopic.schema_registry.formats.protobuf import message_descriptor_for
    from tabletopic.schema_registry.lookup import RegisteredSchema

    name = topic()
    money = (
        'syntax = "proto3";\npackage acme;\nmessage Money {\n  int64 units = 1;\n  string currency = 2;\n}\n'
    )
    order = (
        'syntax = "proto3";\npackage acme;\nimport "acme/money.proto";\n'
        "message Order {\n  string id = 1;\n  Money total = 2;\n}\n"
    )
    karapace.post_new_schema(f"{name}-money", "PROTOBUF", money)
    references = [{"name": "acme/money.proto", "subject": f"{name}-money", "version": 1}]
    order_id = karapace.post_new_schema(f"{name}-value", "PROTOBUF", order, references)

    def message_class(fetched: Fetched) -> Any:  # compiled from the texts the client fetched
        dependencies = tuple((ref, dep.text) for ref, dep in fetched.dependencies.items())
        schema = RegisteredSchema(fetched.schema_id, "PROTOBUF", fetched.text, dependencies)
        return message_factory.GetMessageClass(message_descriptor_for(schema, [0]))

    latest = karapace.get_schema(f"{name}-value")
    assert (latest.schema_id, latest.schema_type) == (order_id, "PROTOBUF")
    assert list(latest.dependencies) == ["acme/money.proto"]
    cls = message_class(latest)
    value = cls(id="o-1")
    value.total.units, value.total.currency = 42, "EUR"
    payload = frame(order_id, value.SerializeToString(), b"\x00")  # message indexes [0]

    by_id = check_by_id(karapace, order_id, f"{name}-value", "PROTOBUF")
    decoded = message_class(by_id).FromString(payload[6:])
    assert (decoded.id, decoded.total.units, decoded.total.currency) == ("o-1", 42, "EUR")


def test_karapace_requests_get_an_error_message_for_an_unknown_id(karapace: KarapaceRequests) -> None:
    result = karapace.http.get("/schemas/ids/999999999", params={"includeSubjects": "True"})
    assert result.status_code == 404
    assert result.json()["error_code"] == 40403 and result.json()["message"]
