"""Kafka ACLs as plain data and the pure decision over them (no storage, no I/O).

The rules are Kafka's (StandardAuthorizer): a super user may do anything; a matching DENY wins over
any ALLOW; ALL matches every operation; READ, WRITE, DELETE and ALTER each imply DESCRIBE, and
ALTER_CONFIGS implies DESCRIBE_CONFIGS; a resource nobody has written an ACL for is open to all
only with ``allow.everyone.if.no.acl.found``. Resource names match literally (``*`` is the
wildcard) or by prefix.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

# The widest resource name, principal, host or SCRAM user name stored (the security tables' columns;
# PostgreSQL refuses a longer value, SQLite would keep it).
MAX_NAME = 255


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as in Kafka
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
# The operations each resource type knows (Kafka's), for authorized-operations bitfields.
OPERATIONS_OF = {
    ResourceType.TOPIC: (
        Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
        Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (
        Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
        Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
}  # fmt: skip
_IMPLIES = {
    Operation.DESCRIBE: (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER),
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
}
CONCRETE_RESOURCE_TYPES = frozenset(OPERATIONS_OF) | {ResourceType.DELEGATION_TOKEN, ResourceType.USER}


class InvalidAcl(ValueError):
    """A binding that can never be stored (Kafka answers INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def validate(self) -> None:
        """Raises InvalidAcl for what Kafka refuses to create."""
        if self.resource_type not in CONCRETE_RESOURCE_TYPES:
            raise InvalidAcl(f"Invalid resource type {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid pattern type {self.pattern_type.name}: use LITERAL or PREFIXED")
        if self.operation in (Operation.ANY, Operation.UNKNOWN):
            raise InvalidAcl(f"Invalid operation {self.operation.name}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permission type {self.permission.name}")
        if not self.resource_name:
            raise InvalidAcl("Resource name must not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}` (no colon is present)")
        if not self.host:
            raise InvalidAcl("Host must not be empty")
        for what, value in (
            ("Resource name", self.resource_name),
            ("Principal", self.principal),
            ("Host", self.host),
        ):
            if len(value) > MAX_NAME:
                raise InvalidAcl(f"{what} is longer than {MAX_NAME} characters")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter: None (or ANY) matches every value; pattern type MATCH
    matches every binding that would apply to the named resource (literal, wildcard, prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type is not self.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not Operation.ANY and acl.operation is not self.operation:
            return False
        return self.permission is Permission.ANY or acl.permission is self.permission

    def _pattern_matches(self, acl: AclBinding) -> bool:
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is None:
                return True
            return _applies(acl, self.resource_name)
        if self.pattern_type is not PatternType.ANY and acl.pattern_type is not self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def _applies(acl: AclBinding, name: str) -> bool:
    """Whether ``acl``'s resource pattern covers the resource ``name``."""
    if acl.pattern_type is PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return acl.resource_name in (name, WILDCARD)


def _covers(acl_operation: Operation, operation: Operation, permission: Permission) -> bool:
    if acl_operation in (operation, Operation.ALL):
        return True
    return permission is Permission.ALLOW and acl_operation in _IMPLIES.get(operation, ())


class Authorizer:
    """Decisions over one snapshot of the ACLs.

    Args:
        acls: every stored binding.
        super_users: principals allowed everything (``super.users``).
        allow_if_no_acl: ``allow.everyone.if.no.acl.found``.
    """

    def __init__(self, acls: Iterable[AclBinding], super_users: Iterable[str], allow_if_no_acl: bool) -> None:
        self.by_type: dict[ResourceType, list[AclBinding]] = {}
        for acl in acls:
            self.by_type.setdefault(acl.resource_type, []).append(acl)
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = [acl for acl in self.by_type.get(resource_type, ()) if _applies(acl, name)]
        if not acls:
            return self.allow_if_no_acl
        mine = [
            acl
            for acl in acls
            if acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)
        ]
        for acl in mine:
            if acl.permission is Permission.DENY and _covers(acl.operation, operation, Permission.DENY):
                return False
        return any(
            acl.permission is Permission.ALLOW and _covers(acl.operation, operation, Permission.ALLOW)
            for acl in mine
        )

    def authorize_any(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether ``operation`` is allowed on at least one resource of this type (Kafka's
        ``authorizeByResourceType``, used for idempotent producers without IDEMPOTENT_WRITE)."""
        if principal in self.super_users:
            return True
        candidates = {acl.resource_name for acl in self.by_type.get(resource_type, ())}
        if not candidates:
            return self.allow_if_no_acl
        return any(self.authorize(principal, host, operation, resource_type, name) for name in candidates)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The bitfield Metadata / DescribeCluster / DescribeGroups report (bit = operation code)."""
        bits = 0
        for operation in OPERATIONS_OF.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits
