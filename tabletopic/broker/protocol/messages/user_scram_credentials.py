"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users (each served
v0; a null ``users`` describes every user).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0 import request as alter_v0
    from kio.schema.describe_user_scram_credentials.v0 import request as describe_v0

DescribeUserScramCredentialsRequest: TypeAlias = "describe_v0.DescribeUserScramCredentialsRequest"
AlterUserScramCredentialsRequest: TypeAlias = "alter_v0.AlterUserScramCredentialsRequest"
ScramCredentialDeletion: TypeAlias = "alter_v0.ScramCredentialDeletion"
ScramCredentialUpsertion: TypeAlias = "alter_v0.ScramCredentialUpsertion"
