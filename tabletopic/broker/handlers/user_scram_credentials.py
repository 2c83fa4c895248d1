"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the SCRAM users in the
metadata database, with Kafka's per-user errors (what ``kafka-configs.sh --entity-type users``
and ``tabletopic users`` use)."""

from __future__ import annotations

import asyncio
from collections import Counter

from kio.schema.errors import ErrorCode

from tabletopic.broker.context import RequestContext
from tabletopic.broker.protocol.messages.user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from tabletopic.broker.protocol.responses import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from tabletopic.broker.security.acl import MAX_NAME
from tabletopic.broker.security.scram import (
    BY_WIRE_TYPE,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
)
from tabletopic.broker.security.store import CredentialChange, SecurityStore

TWICE = "A user credential cannot be altered twice in the same request"
MISSING = "Attempt to delete a user credential that does not exist"


def _result(
    user: str, code: ErrorCode = ErrorCode.none, message: str | None = None
) -> AlterUserScramCredentialsResult:
    return {"user": user, "error_code": code, "error_message": message}


async def describe(
    store: SecurityStore, ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    users = await asyncio.to_thread(store.users)
    wanted = [u.name for u in request.users] if request.users else sorted(users)
    counts = Counter(wanted)
    results: list[DescribeUserScramCredentialsResult] = []
    for name in dict.fromkeys(wanted):
        if counts[name] > 1:
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
            results.append({**_result(name, ErrorCode.duplicate_resource, message), "credential_infos": []})
        elif name not in users:
            message = f"Attempt to describe a user credential that does not exist: {name}"
            results.append({**_result(name, ErrorCode.resource_not_found, message), "credential_infos": []})
        else:
            infos: list[CredentialInfo] = [
                {"mechanism": SCRAM_MECHANISMS[mechanism].wire_type, "iterations": iterations}
                for mechanism, iterations in users[name]
            ]
            results.append({**_result(name), "credential_infos": infos})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results}


def _check_upsertion(entry: ScramCredentialUpsertion) -> tuple[ErrorCode, str] | None:
    if entry.mechanism not in BY_WIRE_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if entry.iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, f"Too few iterations (at least {MIN_ITERATIONS})"
    if entry.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, f"Too many iterations (at most {MAX_ITERATIONS})"
    if not entry.salt or not entry.salted_password:
        return ErrorCode.unacceptable_credential, "Empty salt or salted password"
    return None


async def alter(
    store: SecurityStore, ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    """Each user's alterations are applied together or not at all (Kafka's rule): one bad entry
    fails that user, never the others."""
    existing = await asyncio.to_thread(store.users)
    entries: list[
        tuple[ScramCredentialDeletion | ScramCredentialUpsertion, ScramCredentialUpsertion | None]
    ] = [(d, None) for d in request.deletions]
    entries += [(u, u) for u in request.upsertions]
    seen = Counter((entry.name, entry.mechanism) for entry, _ in entries)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    changes: dict[str, list[CredentialChange]] = {}
    for entry, upsertion in entries:
        user = entry.name
        changes.setdefault(user, [])
        if user in errors:
            continue
        if not user:
            errors[user] = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif len(user) > MAX_NAME:
            errors[user] = (
                ErrorCode.unacceptable_credential,
                f"Username is longer than {MAX_NAME} characters",
            )
        elif seen[(user, entry.mechanism)] > 1:
            errors[user] = (ErrorCode.duplicate_resource, TWICE)
        elif upsertion is None:
            mechanism = BY_WIRE_TYPE.get(entry.mechanism)
            if mechanism is None:
                errors[user] = (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
            elif mechanism.name not in dict(existing.get(user, [])):
                errors[user] = (ErrorCode.resource_not_found, MISSING)
            else:
                changes[user].append(CredentialChange(user, mechanism.name, None))
        else:
            problem = _check_upsertion(upsertion)
            if problem is not None:
                errors[user] = problem
            else:
                mechanism = BY_WIRE_TYPE[upsertion.mechanism]
                credential = ScramCredential.from_salted_password(
                    mechanism, bytes(upsertion.salt), upsertion.iterations, bytes(upsertion.salted_password)
                )
                changes[user].append(CredentialChange(user, mechanism.name, credential))
    accepted = [change for user, pending in changes.items() if user not in errors for change in pending]
    if accepted:
        await asyncio.to_thread(store.apply, accepted)
    results = [_result(user, *errors[user]) if user in errors else _result(user) for user in changes]
    return {"throttle_time": 0, "results": results}
