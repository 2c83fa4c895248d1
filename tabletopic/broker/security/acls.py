"""The node's ACLs: the stored bindings, the current :class:`~tabletopic.broker.security.acl.Authorizer`
snapshot every request is checked against, and the settings that shape it.

The snapshot is rebuilt after every change made through this node, and in a cluster when another
broker announces one (see :mod:`~tabletopic.broker.security.shared_cache`).
"""

from __future__ import annotations

import asyncio

from tabletopic.broker.security import settings
from tabletopic.broker.security.acl import AclBinding, Authorizer
from tabletopic.broker.security.shared_cache import SharedCache
from tabletopic.broker.security.store import SecurityStore
from tabletopic.config import Config, ConfigError

AUTHORIZER_CLASSES = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
    }
)


def configured_authorizer(config: Config) -> str:
    """The authorizer ``authorizer.class.name`` names, "" for none (every request allowed, and the
    ACL APIs answer SECURITY_DISABLED)."""
    return (config.get(settings.AUTHORIZER_CLASS_NAME) or "").strip()


def parse_super_users(text: str) -> list[str]:
    """``User:a;User:b`` -> principals. Raises ConfigError naming ``super.users``."""
    users = [part.strip() for part in text.split(";") if part.strip()]
    for user in users:
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise ConfigError(f"super.users entry {user!r} must be a principal such as User:admin")
    return users


class AclService(SharedCache):
    """ACL storage and decisions of one node.

    Raises:
        ConfigError: ``authorizer.class.name`` names an authorizer we do not have, or ``super.users``
            is malformed.
    """

    what = "ACLs"
    kind = "acls"

    def __init__(self, config: Config, store: SecurityStore) -> None:
        super().__init__()
        name = configured_authorizer(config)
        if name and name not in AUTHORIZER_CLASSES:
            raise ConfigError(
                f"authorizer.class.name={name} is not available; use "
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer or leave it empty"
            )
        self.enabled = bool(name)
        self._store = store
        self._super_users = parse_super_users(config.get(settings.SUPER_USERS) or "")
        self._allow_if_no_acl: bool = config.get(settings.ALLOW_EVERYONE_IF_NO_ACL_FOUND)
        self.authorizer = Authorizer((), self._super_users, self._allow_if_no_acl)

    @property
    def store(self) -> SecurityStore:
        return self._store

    async def start(self, poll: bool = True) -> None:
        await super().start(poll and self.enabled)  # without an authorizer no ACL is checked

    async def refresh(self) -> None:
        bindings = await asyncio.to_thread(self._store.acls)
        self.authorizer = Authorizer(bindings, self._super_users, self._allow_if_no_acl)

    def bindings(self) -> list[AclBinding]:
        return [acl for acls in self.authorizer.by_type.values() for acl in acls]

    async def add(self, bindings: list[AclBinding]) -> None:
        await asyncio.to_thread(self._store.add_acls, bindings)
        await self.changed()

    async def remove(self, bindings: list[AclBinding]) -> None:
        await asyncio.to_thread(self._store.remove_acls, bindings)
        await self.changed()
