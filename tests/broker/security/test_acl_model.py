"""The pure ACL decision: Kafka's rules for patterns, DENY over ALLOW, implied operations, super
users and allow.everyone.if.no.acl.found."""

from __future__ import annotations

import pytest

from tabletopic.broker.security.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rtype=T, name="orders", pattern=LIT, principal="User:alice", host="*", op=Operation.READ, perm=ALLOW):  # type: ignore[no-untyped-def]
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def test_literal_prefixed_and_wildcard_names() -> None:
    authz = Authorizer([acl(name="orders"), acl(name="pay-", pattern=PRE), acl(rtype=G, name="*")], [], False)
    assert authz.authorize("User:alice", "1.2.3.4", Operation.READ, T, "orders")
    assert not authz.authorize("User:alice", "1.2.3.4", Operation.READ, T, "orders-2")
    assert authz.authorize("User:alice", "1.2.3.4", Operation.READ, T, "pay-eu")
    assert authz.authorize("User:alice", "1.2.3.4", Operation.READ, G, "any-group")
    assert not authz.authorize("User:bob", "1.2.3.4", Operation.READ, T, "orders")


def test_deny_wins_and_all_covers_every_operation() -> None:
    authz = Authorizer(
        [acl(op=Operation.ALL), acl(name="ord", pattern=PRE, op=Operation.WRITE, perm=DENY)], [], False
    )
    assert authz.authorize("User:alice", "h", Operation.READ, T, "orders")
    assert not authz.authorize("User:alice", "h", Operation.WRITE, T, "orders")


def test_read_implies_describe_but_deny_describe_is_explicit() -> None:
    authz = Authorizer([acl(op=Operation.READ), acl(op=Operation.ALTER_CONFIGS)], [], False)
    assert authz.authorize("User:alice", "h", Operation.DESCRIBE, T, "orders")
    assert authz.authorize("User:alice", "h", Operation.DESCRIBE_CONFIGS, T, "orders")
    assert not authz.authorize("User:alice", "h", Operation.WRITE, T, "orders")


def test_host_and_wildcard_principal() -> None:
    authz = Authorizer([acl(principal="User:*", host="10.0.0.1")], [], False)
    assert authz.authorize("User:anyone", "10.0.0.1", Operation.READ, T, "orders")
    assert not authz.authorize("User:anyone", "10.0.0.2", Operation.READ, T, "orders")


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    closed = Authorizer([acl()], ["User:admin"], False)
    assert closed.authorize("User:admin", "h", Operation.DELETE, C, "kafka-cluster")
    assert not closed.authorize("User:bob", "h", Operation.READ, T, "unnamed")
    opened = Authorizer([acl()], [], True)
    assert opened.authorize("User:bob", "h", Operation.READ, T, "unnamed")
    # A resource with any ACL is closed to everyone the ACLs do not name.
    assert not opened.authorize("User:bob", "h", Operation.READ, T, "orders")


def test_authorized_operations_bitfield() -> None:
    bits = Authorizer([acl(op=Operation.WRITE)], [], False).authorized_operations(
        "User:alice", "h", T, "orders"
    )
    assert bits == (1 << Operation.WRITE) | (1 << Operation.DESCRIBE)


@pytest.mark.parametrize(
    "binding",
    [
        acl(rtype=ResourceType.ANY),
        acl(pattern=PatternType.MATCH),
        acl(op=Operation.ANY),
        acl(perm=Permission.ANY),
        acl(name=""),
        acl(principal="alice"),
        acl(rtype=C, name="other"),
        acl(name="t" * 256),  # wider than the column that stores it (PostgreSQL refuses it)
        acl(principal="User:" + "a" * 251),
    ],
)
def test_invalid_bindings_are_refused(binding: AclBinding) -> None:
    with pytest.raises(InvalidAcl):
        binding.validate()


def test_match_filter_finds_every_binding_that_applies() -> None:
    bindings = [acl(name="orders"), acl(name="ord", pattern=PRE), acl(name="*"), acl(name="other")]
    found = [b for b in bindings if AclFilter(T, "orders", PatternType.MATCH).matches(b)]
    assert [b.resource_name for b in found] == ["orders", "ord", "*"]
    assert [b.resource_name for b in bindings if AclFilter(T, "ord", PatternType.ANY).matches(b)] == ["ord"]
