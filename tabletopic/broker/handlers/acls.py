"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) over the node's
:class:`~tabletopic.broker.security.acls.AclService`, with Kafka's answers: SECURITY_DISABLED
without an authorizer, INVALID_REQUEST for a binding or filter that can never match."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.acls import (
    AclCreation,
    AclsFilter,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)
from tabletopic.broker.protocol.responses import (
    AclCreationResult,
    AclDescription,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsResponse,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from tabletopic.broker.security.acl import (
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from tabletopic.broker.security.acls import AclService

NO_AUTHORIZER = "No Authorizer is configured."


def _enum(kind: Any, value: int) -> Any:
    try:
        return kind(int(value))
    except ValueError:
        return kind.UNKNOWN


def binding_of(entry: AclCreation) -> AclBinding:
    return AclBinding(
        _enum(ResourceType, entry.resource_type),
        entry.resource_name,
        _enum(PatternType, entry.resource_pattern_type),
        entry.principal,
        entry.host,
        _enum(Operation, entry.operation),
        _enum(Permission, entry.permission_type),
    )


def filter_of(entry: AclsFilter) -> AclFilter:
    """Raises InvalidAcl for a filter with an unknown element (Kafka refuses those)."""
    acl_filter = AclFilter(
        _enum(ResourceType, entry.resource_type_filter),
        entry.resource_name_filter,
        _enum(PatternType, entry.pattern_type_filter),
        entry.principal_filter,
        entry.host_filter,
        _enum(Operation, entry.operation),
        _enum(Permission, entry.permission_type),
    )
    for value in (
        acl_filter.resource_type,
        acl_filter.pattern_type,
        acl_filter.operation,
        acl_filter.permission,
    ):
        if value.name == "UNKNOWN":
            raise InvalidAcl(f"Invalid filter: unknown {type(value).__name__}")
    return acl_filter


def _acl_fields(acl: AclBinding) -> AclDescription:
    return {
        "principal": acl.principal,
        "host": acl.host,
        "operation": int(acl.operation),
        "permission_type": int(acl.permission),
    }


async def create(acls: AclService, ctx: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
    results: list[AclCreationResult] = []
    accepted: list[AclBinding] = []
    for entry in request.creations:
        if not acls.enabled:
            results.append({"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER})
            continue
        binding = binding_of(entry)
        try:
            binding.validate()
        except InvalidAcl as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        accepted.append(binding)
        results.append({"error_code": ErrorCode.none, "error_message": None})
    if accepted:
        await acls.add(accepted)
    return {"throttle_time": 0, "results": results}


async def describe(
    acls: AclService, ctx: RequestContext, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    if not acls.enabled:
        return {"throttle_time": 0, "error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER}
    try:
        acl_filter = filter_of(request)
    except InvalidAcl as exc:
        return {"throttle_time": 0, "error_code": ErrorCode.invalid_request, "error_message": str(exc)}
    grouped: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in acls.bindings():
        if acl_filter.matches(acl):
            key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
            grouped.setdefault(key, []).append(_acl_fields(acl))
    resources: list[DescribeAclsResource] = [
        {"resource_type": rtype, "resource_name": name, "pattern_type": ptype, "acls": entries}
        for (rtype, name, ptype), entries in sorted(grouped.items())
    ]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "resources": resources}


async def delete(acls: AclService, ctx: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
    results: list[DeleteAclsFilterResult] = []
    doomed: list[AclBinding] = []
    current = acls.bindings()
    for entry in request.filters:
        if not acls.enabled:
            results.append({"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER})
            continue
        try:
            acl_filter = filter_of(entry)
        except InvalidAcl as exc:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(exc)})
            continue
        matching = [acl for acl in current if acl_filter.matches(acl)]
        doomed.extend(matching)
        results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        "resource_type": int(acl.resource_type),
                        "resource_name": acl.resource_name,
                        "pattern_type": int(acl.pattern_type),
                        **_acl_fields(acl),
                    }
                    for acl in matching
                ],
            }
        )
    if doomed:
        await acls.remove(list(dict.fromkeys(doomed)))
    return {"throttle_time": 0, "filter_results": results}
