"""What a request handler knows about the request besides its body.

Shared by every handler module (including ``broker/groups``) so handlers never reach into the
connection object.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class SecurityProtocol(enum.StrEnum):
    """The listener security protocols the broker serves, spelled as in ``listeners`` and on the
    wire (Metadata, DescribeConfigs)."""

    PLAINTEXT = "PLAINTEXT"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    # The SASL principal ("User:alice") once authenticated; "User:ANONYMOUS" on PLAINTEXT.
    principal: str = "User:ANONYMOUS"
    # The listener's security protocol (PLAINTEXT or SASL_PLAINTEXT): Metadata advertises the
    # endpoint of the same listener the client came in on.
    listener: str = SecurityProtocol.PLAINTEXT
