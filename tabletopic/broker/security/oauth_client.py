"""The client side of OAUTHBEARER for the connections the CLI makes itself (``partitions move``
and the login check every client command runs first): an access token from the identity
provider's token endpoint by OAuth 2.0's client-credentials grant (RFC 6749, section 4.4), and the
SASL message that carries it (RFC 7628).

It reads librdkafka's keys (``sasl.oauthbearer.method=oidc``, ``.token.endpoint.url``,
``.client.id``, ``.client.secret``, ``.scope``), so the one ``--command-config`` that the other
commands hand to librdkafka serves these connections too. As librdkafka does, it sends the client's
credentials with HTTP Basic authentication and asks for ``grant_type=client_credentials``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx

METHOD = "sasl.oauthbearer.method"
TOKEN_ENDPOINT = "sasl.oauthbearer.token.endpoint.url"
CLIENT_ID = "sasl.oauthbearer.client.id"
CLIENT_SECRET = "sasl.oauthbearer.client.secret"
SCOPE = "sasl.oauthbearer.scope"
CREDENTIALS_FROM = f"{CLIENT_ID}, {CLIENT_SECRET} and {TOKEN_ENDPOINT} of --command-config or -X"


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """Who the client is to its identity provider, and where it asks for tokens."""

    token_endpoint: str
    client_id: str
    client_secret: str
    scope: str | None = None

    @classmethod
    def from_settings(cls, settings: Mapping[str, str]) -> ClientCredentials:
        """The credentials librdkafka's keys name.

        Raises:
            ValueError: the method is not ``oidc`` (librdkafka's default makes an unsigned token,
                which a broker validating signatures refuses) or a key is missing; the message
                names the keys to set.
        """
        if settings.get(METHOD, "default").lower() != "oidc":
            raise ValueError(
                f"sasl.mechanism=OAUTHBEARER: this command fetches its token from your identity "
                f"provider; set {METHOD}=oidc with {TOKEN_ENDPOINT}, {CLIENT_ID} and {CLIENT_SECRET}"
            )
        if missing := [key for key in (TOKEN_ENDPOINT, CLIENT_ID, CLIENT_SECRET) if not settings.get(key)]:
            raise ValueError(f"{METHOD}=oidc needs {', '.join(missing)}")
        endpoint, client_id, secret = settings[TOKEN_ENDPOINT], settings[CLIENT_ID], settings[CLIENT_SECRET]
        return cls(endpoint, client_id, secret, settings.get(SCOPE) or None)

    def fetch_token(self, timeout: float) -> str:
        """A fresh access token.

        Raises:
            ConnectionRefusedError: the endpoint refused the credentials or answered without a
                token (the message has its status and error).
            OSError: the endpoint could not be reached.
        """
        form = {"grant_type": "client_credentials", **({"scope": self.scope} if self.scope else {})}
        try:
            answer = httpx.post(
                self.token_endpoint, data=form, auth=(self.client_id, self.client_secret), timeout=timeout
            )
        except httpx.TransportError as exc:
            raise OSError(f"token endpoint {self.token_endpoint}: {exc}") from exc
        try:
            body = answer.json()
        except ValueError:
            body = {}
        token = body.get("access_token") if isinstance(body, dict) else None
        if answer.status_code != 200 or not isinstance(token, str) or not token:
            error = (body.get("error_description") or body.get("error")) if isinstance(body, dict) else None
            raise ConnectionRefusedError(
                f"token endpoint {self.token_endpoint} answered {answer.status_code}"
                f"{f': {error}' if error else ' without an access_token'} (check {CREDENTIALS_FROM})"
            )
        return token


def client_first(token: str) -> bytes:
    """RFC 7628's initial client response: no authorization id, the token as a bearer token."""
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()
