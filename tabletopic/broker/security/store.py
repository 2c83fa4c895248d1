"""The security state kept in the metadata database: SCRAM credentials (salted, never passwords),
ACLs and client quotas.

Reads go to the database each time (an authentication is rare next to requests, and a credential
altered through another node must take effect here at once); writes are one transaction per
AlterUserScramCredentials request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tabletopic import database
from tabletopic.broker.security.acl import (
    MAX_NAME,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from tabletopic.broker.security.quotas import MAX_ENCODED_ENTITY
from tabletopic.broker.security.scram import ScramCredential

_metadata = sa.MetaData()

scram_credentials = sa.Table(
    "security_scram_credentials",
    _metadata,
    sa.Column("user_name", sa.String(MAX_NAME), primary_key=True),
    sa.Column("mechanism", sa.String(32), primary_key=True),
    sa.Column("salt", sa.LargeBinary, nullable=False),
    sa.Column("iterations", sa.Integer, nullable=False),
    sa.Column("stored_key", sa.LargeBinary, nullable=False),
    sa.Column("server_key", sa.LargeBinary, nullable=False),
)

acls = sa.Table(
    "security_acls",
    _metadata,
    sa.Column("resource_type", sa.SmallInteger, primary_key=True),
    sa.Column("resource_name", sa.String(MAX_NAME), primary_key=True),
    sa.Column("pattern_type", sa.SmallInteger, primary_key=True),
    sa.Column("principal", sa.String(MAX_NAME), primary_key=True),
    sa.Column("host", sa.String(MAX_NAME), primary_key=True),
    sa.Column("operation", sa.SmallInteger, primary_key=True),
    sa.Column("permission", sa.SmallInteger, primary_key=True),
)

client_quotas = sa.Table(
    "security_client_quotas",
    _metadata,
    sa.Column("entity", sa.String(MAX_ENCODED_ENTITY), primary_key=True),  # quotas.encode_entity
    sa.Column("quota_key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
)

MIGRATIONS: list[database.Migration] = [
    database.create_tables(scram_credentials),
    database.create_tables(acls),
    database.create_tables(client_quotas),
]

# A credential row holds every field of ScramCredential under the same name, keyed by its user.
_CREDENTIAL_COLUMNS = tuple(scram_credentials.c[f.name] for f in dataclasses.fields(ScramCredential))


def _credential(row: sa.Row[Any]) -> ScramCredential:
    """The credential of a row of :data:`_CREDENTIAL_COLUMNS` (binary columns as bytes, whatever
    the driver hands back)."""
    return ScramCredential(
        row.mechanism, bytes(row.salt), row.iterations, bytes(row.stored_key), bytes(row.server_key)
    )


@dataclass(frozen=True, slots=True)
class CredentialChange:
    """One upsertion (``credential`` set) or deletion (``credential`` None) of a user's mechanism."""

    user: str
    mechanism: str
    credential: ScramCredential | None


class SecurityStore:
    """SCRAM credentials in the metadata database."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def migrate(self) -> None:
        database.migrate(self._engine, "security", MIGRATIONS)

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        c = scram_credentials.c
        with self._engine.connect() as conn:
            row = conn.execute(
                sa.select(*_CREDENTIAL_COLUMNS).where(c.user_name == user, c.mechanism == mechanism)
            ).first()
        return None if row is None else _credential(row)

    def credentials_of(self, user: str) -> list[ScramCredential]:
        c = scram_credentials.c
        with self._engine.connect() as conn:
            rows = conn.execute(
                sa.select(*_CREDENTIAL_COLUMNS).where(c.user_name == user).order_by(c.mechanism)
            ).all()
        return [_credential(r) for r in rows]

    def users(self) -> dict[str, list[tuple[str, int]]]:
        """Every user with SCRAM credentials -> ``[(mechanism, iterations), ...]``."""
        c = scram_credentials.c
        with self._engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.user_name, c.mechanism, c.iterations).order_by(c.user_name, c.mechanism)
            )
            result: dict[str, list[tuple[str, int]]] = {}
            for row in rows:
                result.setdefault(row.user_name, []).append((row.mechanism, row.iterations))
        return result

    def apply(self, changes: Iterable[CredentialChange]) -> None:
        """Apply upsertions and deletions in one transaction."""
        c = scram_credentials.c
        with self._engine.begin() as conn:
            for change in changes:
                conn.execute(
                    sa.delete(scram_credentials).where(
                        c.user_name == change.user, c.mechanism == change.mechanism
                    )
                )
                cred = change.credential
                if cred is not None:
                    # The credential names its mechanism, the change's.
                    conn.execute(
                        sa.insert(scram_credentials).values(user_name=change.user, **dataclasses.asdict(cred))
                    )

    # --- ACLs ------------------------------------------------------------------------------------
    def acls(self) -> list[AclBinding]:
        with self._engine.connect() as conn:
            return self._acls_in(conn)

    def add_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Store bindings; one already stored is left as it is (CreateAcls is idempotent)."""
        with self._engine.begin() as conn:
            existing = set(self._acls_in(conn))
            for binding in dict.fromkeys(bindings):
                if binding not in existing:
                    conn.execute(sa.insert(acls).values(**_acl_row(binding)))

    def remove_acls(self, bindings: Iterable[AclBinding]) -> None:
        c = acls.c
        with self._engine.begin() as conn:
            for binding in bindings:
                row = _acl_row(binding)
                conn.execute(sa.delete(acls).where(*(c[key] == value for key, value in row.items())))

    # --- client quotas ---------------------------------------------------------------------------
    def quotas(self) -> dict[str, dict[str, float]]:
        """Encoded entity -> quota key -> value."""
        c = client_quotas.c
        result: dict[str, dict[str, float]] = {}
        with self._engine.connect() as conn:
            for row in conn.execute(sa.select(c.entity, c.quota_key, c.value)):
                result.setdefault(row.entity, {})[row.quota_key] = row.value
        return result

    def alter_quotas(self, changes: Iterable[tuple[str, str, float | None]]) -> None:
        """``(encoded entity, key, value or None to remove)`` in one transaction."""
        c = client_quotas.c
        with self._engine.begin() as conn:
            for entity, key, value in changes:
                conn.execute(sa.delete(client_quotas).where(c.entity == entity, c.quota_key == key))
                if value is not None:
                    conn.execute(sa.insert(client_quotas).values(entity=entity, quota_key=key, value=value))

    def _acls_in(self, conn: sa.Connection) -> list[AclBinding]:
        return [
            AclBinding(
                ResourceType(r.resource_type),
                r.resource_name,
                PatternType(r.pattern_type),
                r.principal,
                r.host,
                Operation(r.operation),
                Permission(r.permission),
            )
            for r in conn.execute(sa.select(acls)).all()
        ]


def _acl_row(binding: AclBinding) -> dict[str, object]:
    return {
        "resource_type": int(binding.resource_type),
        "resource_name": binding.resource_name,
        "pattern_type": int(binding.pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": int(binding.operation),
        "permission": int(binding.permission),
    }
