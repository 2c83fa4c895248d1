"""DescribeClientQuotas (48) and AlterClientQuotas (49): quotas per user and/or client id (and the
ip entity's connection rate, stored only) in the metadata database, with Kafka's matching rules and
per-entry INVALID_REQUEST answers, over the node's
:class:`~tabletopic.broker.security.quota_service.QuotaService`."""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    QuotaAlteration,
    QuotaFilterComponent,
)
from tabletopic.broker.protocol.responses import (
    AlterClientQuotasEntryData,
    AlterClientQuotasResponse,
    DescribeClientQuotasEntryData,
    DescribeClientQuotasResponse,
    EntityData,
)
from tabletopic.broker.security.quota_service import QuotaService
from tabletopic.broker.security.quotas import (
    ENTITY_TYPES,
    MAX_ENCODED_ENTITY,
    QUOTA_KEYS,
    Entity,
    InvalidQuota,
    encode_entity,
    make_entity,
)

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def _wire_entity(entity: Entity) -> list[EntityData]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


def _matches(entity: Entity, components: Sequence[QuotaFilterComponent], strict: bool) -> bool:
    names = dict(entity)
    for component in components:
        if component.entity_type not in names:
            return False
        name = names[component.entity_type]
        if component.match_type == MATCH_EXACT and name != component.match:
            return False
        if component.match_type == MATCH_DEFAULT and name is not None:
            return False
    return not strict or len(names) == len(components)


async def describe(
    quotas: QuotaService, ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    components: list[QuotaFilterComponent] = list(request.components)
    types = [c.entity_type for c in components]
    problem = None
    if any(t not in ENTITY_TYPES for t in types):
        problem = f"Unexpected entity type in {types}"
    elif len(set(types)) != len(types):
        problem = "Duplicate entity type in the filter"
    elif any(c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY) for c in components):
        problem = "Unknown match type"
    if problem is not None:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "error_message": problem}
    entries: list[DescribeClientQuotasEntryData] = [
        {
            "entity": _wire_entity(entity),
            "values": [{"key": key, "value": value} for key, value in sorted(values.items())],
        }
        for entity, values in sorted(quotas.tracker.quotas.items(), key=lambda item: encode_entity(item[0]))
        if _matches(entity, components, request.strict)
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "entries": entries}


def _changes(entry: QuotaAlteration) -> tuple[Entity, list[tuple[str, float | None]]]:
    entity = make_entity((e.entity_type, e.entity_name) for e in entry.entity)
    allowed = set.intersection(*(set(QUOTA_KEYS[t]) for t, _ in entity))
    changes: list[tuple[str, float | None]] = []
    for op in entry.ops:
        if op.key not in allowed:
            raise InvalidQuota(f"Invalid configuration key {op.key} for entity {encode_entity(entity)}")
        if op.remove:
            changes.append((op.key, None))
        elif not op.value > 0:
            raise InvalidQuota(f"Quota {op.key} must be positive, got {op.value}")
        else:
            changes.append((op.key, float(op.value)))
    if len({key for key, _ in changes}) != len(changes):
        raise InvalidQuota("A quota key appears twice for one entity")
    if len(encode_entity(entity)) > MAX_ENCODED_ENTITY:
        raise InvalidQuota(f"The entity's names are longer than the {MAX_ENCODED_ENTITY} characters stored")
    return entity, changes


async def alter(
    quotas: QuotaService, ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    results: list[AlterClientQuotasEntryData] = []
    accepted: list[tuple[str, str, float | None]] = []
    for entry in request.entries:
        wire: list[EntityData] = [
            {"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity
        ]
        try:
            entity, changes = _changes(entry)
        except InvalidQuota as exc:
            results.append(
                {"error_code": ErrorCode.invalid_request, "error_message": str(exc), "entity": wire}
            )
            continue
        accepted += [(encode_entity(entity), key, value) for key, value in changes]
        results.append({"error_code": ErrorCode.none, "error_message": None, "entity": wire})
    if accepted and not request.validate_only:
        await quotas.alter(accepted)
    return {"throttle_time": 0, "entries": results}
