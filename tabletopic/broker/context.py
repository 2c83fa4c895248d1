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
    SSL = "SSL"
    SASL_SSL = "SASL_SSL"


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    connection_id: int
    # The SASL principal ("User:alice") once authenticated, or a TLS client certificate's
    # ("User:CN=alice,O=example"); "User:ANONYMOUS" otherwise.
    principal: str = "User:ANONYMOUS"
    # The listener's security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL): Metadata advertises the
    # endpoint of the same listener the client came in on.
    listener: str = SecurityProtocol.PLAINTEXT
