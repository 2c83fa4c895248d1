"""Request bodies and the response class of the REST API.

Request models ignore fields they do not know (sent by newer clients) rather than failing, as
Confluent does; the fields they do know are validated strictly. ``metadata`` and ``ruleSet`` (data
contracts) are checked here by shape and by :mod:`tabletopic.schema_registry.contracts` by rule.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from tabletopic.schema_registry.contracts import encode_contract
from tabletopic.schema_registry.formats.base import SchemaReference, SchemaType
from tabletopic.schema_registry.model import SchemaSubmission

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryJSONResponse(JSONResponse):
    """Every answer carries Confluent's content type (clients accept it and plain JSON alike)."""

    media_type = CONTENT_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


# Ids and versions are 32-bit in Confluent's API (and in our columns); -1 means "latest"/"none".
Int32 = Annotated[StrictInt, Field(ge=-1, le=2**31 - 1)]


class ReferenceBody(_Body):
    name: Annotated[StrictStr, Field(min_length=1, max_length=1024)]
    subject: Annotated[StrictStr, Field(min_length=1, max_length=1024)]
    version: Int32

    def to_reference(self) -> SchemaReference:
        return SchemaReference(self.name, self.subject, self.version)


class MetadataBody(_Body):
    """Confluent's schema ``metadata``: tags by schema path, free-form properties, sensitive names."""

    tags: dict[StrictStr, list[StrictStr]] | None = None
    properties: dict[StrictStr, StrictStr] | None = None
    sensitive: list[StrictStr] | None = None


class RuleBody(_Body):
    """One data-contract rule; ``kind``/``mode`` are checked against the rule list it is in."""

    name: StrictStr
    doc: StrictStr | None = None
    kind: StrictStr
    mode: StrictStr
    type: StrictStr | None = None
    tags: list[StrictStr] | None = None
    params: dict[StrictStr, StrictStr] | None = None
    expr: StrictStr | None = None
    on_success: StrictStr | None = Field(default=None, alias="onSuccess")
    on_failure: StrictStr | None = Field(default=None, alias="onFailure")
    disabled: bool | None = None


class RuleSetBody(_Body):
    migration_rules: list[RuleBody] | None = Field(default=None, alias="migrationRules")
    domain_rules: list[RuleBody] | None = Field(default=None, alias="domainRules")
    encoding_rules: list[RuleBody] | None = Field(default=None, alias="encodingRules")


class SchemaBody(_Body):
    """``POST /subjects/{s}/versions``, ``POST /subjects/{s}`` and the compatibility endpoints."""

    schema_text: StrictStr = Field(alias="schema")
    schema_type: StrictStr | None = Field(default=None, alias="schemaType")
    references: list[ReferenceBody] | None = None
    id: Int32 | None = None
    version: Int32 | None = None
    metadata: MetadataBody | None = None
    rule_set: RuleSetBody | None = Field(default=None, alias="ruleSet")

    def submission(self, normalize: bool) -> SchemaSubmission:
        references = tuple(r.to_reference() for r in self.references or ())
        contract = encode_contract(
            None if self.metadata is None else self.metadata.model_dump(by_alias=True, exclude_none=True),
            None if self.rule_set is None else self.rule_set.model_dump(by_alias=True, exclude_none=True),
        )
        return SchemaSubmission(self.schema_text, self.schema_type, references, normalize, contract)


class ConfigBody(_Body):
    compatibility: StrictStr | None = None
    compatibility_level: StrictStr | None = Field(default=None, alias="compatibilityLevel")


class ModeBody(_Body):
    mode: StrictStr


def schema_fields(
    schema_type: str, text: str, references: tuple[SchemaReference, ...], contract: str = ""
) -> dict[str, Any]:
    """The schema part of an answer: Confluent omits ``schemaType`` for Avro, empty references and
    absent ``metadata``/``ruleSet``."""
    body: dict[str, Any] = {}
    if schema_type != SchemaType.AVRO:
        body["schemaType"] = schema_type
    if references:
        body["references"] = [
            {"name": r.name, "subject": r.subject, "version": r.version} for r in references
        ]
    if contract:
        body.update(json.loads(contract))
    body["schema"] = text
    return body
