"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), version-free: SCRAM users.

kio's class of the one served version of each satisfies these Protocols as it is (mypy checks it at
the end of this module).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

# api key -> the versions served (the broker's MAX_VERSIONS), each checked by mypy below.
SERVED_VERSIONS: dict[int, range] = {
    50: range(0, 1),  # DescribeUserScramCredentials
    51: range(0, 1),  # AlterUserScramCredentials
}


class UserName(Protocol):
    @property
    def name(self) -> str: ...


class DescribeUserScramCredentialsRequest(Protocol):
    @property
    def users(self) -> Sequence[UserName] | None: ...  # null: every user


class ScramCredentialDeletion(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def mechanism(self) -> int: ...


class ScramCredentialUpsertion(ScramCredentialDeletion, Protocol):
    @property
    def iterations(self) -> int: ...

    @property
    def salt(self) -> bytes: ...

    @property
    def salted_password(self) -> bytes: ...


class AlterUserScramCredentialsRequest(Protocol):
    @property
    def deletions(self) -> Sequence[ScramCredentialDeletion]: ...

    @property
    def upsertions(self) -> Sequence[ScramCredentialUpsertion]: ...


if TYPE_CHECKING:  # kio's class of every served version fits (checked by mypy only)
    from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest as Alter0
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest as Describe0,
    )

    def _describe(request: Describe0) -> DescribeUserScramCredentialsRequest:
        return request

    def _alter(request: Alter0) -> AlterUserScramCredentialsRequest:
        return request
